/*
 * headers.cc - our nccl.h in the company nccl-tests and other CUDA programs give it: with
 * cuda_runtime.h before or after it (HEADERS_NCCL_FIRST), and NVIDIA's nccl_device.h after it,
 * whose types and C++ overloads must fit our declarations.
 */
#ifdef HEADERS_NCCL_FIRST
#include <nccl.h>
#include <cuda_runtime.h>
#else
#include <cuda_runtime.h>
#include <nccl.h>
#endif
#include <nccl_device.h>

#ifndef MSCCLRT_NCCL_ABI_H
#error "nccl.h is not ours"
#endif

static ncclResult_t use(ncclComm_t comm, cudaStream_t stream) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclDevCommRequirements reqs = {};
    ncclDevComm devComm;
    ncclTeam team = ncclTeamWorld(comm);
    (void)config;
    (void)team;
    if (ncclDevCommCreate(comm, &reqs, &devComm) != ncclSuccess) return ncclInternalError;
    return ncclAllReduce(nullptr, nullptr, 0, ncclFloat8e4m3, ncclSum, comm, stream);
}

ncclResult_t (*headers_use)(ncclComm_t, cudaStream_t) = use;

/*
 * nccl_internal.h - what the drop-in's entry points share: its communicator (a libmscclrt
 * communicator plus the NCCL-side state: configuration, non-blocking initialisation, the real
 * NCCL's mirror communicator for forwarded calls), result translation, the last error, and the
 * per-thread group state (a forwarded call inside a group opens a group in the real NCCL too).
 * No collective logic lives in runtime/nccl: every call becomes a libmscclrt call or a forward.
 */
#ifndef MSCCLRT_NCCL_INTERNAL_H
#define MSCCLRT_NCCL_INTERNAL_H

#include "mscclrt.h"
#include "nccl/nccl_abi.h"
#include "nccl/nccl_comm.h"
#include "nccl/nccl_config.h"
#include "nccl/nccl_forward.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define NCCL_SHIM_MAGIC 0x4e43434cu /* "NCCL" */

typedef struct NcclClique NcclClique;   /* the comms of one ncclCommInitAll */

struct ncclComm {
    uint32_t magic;                /* NCCL_SHIM_MAGIC while live */
    mscclrt_comm *rt;              /* NULL until a non-blocking init finishes */
    int rank, nranks, device;
    NcclConfig cfg;
    _Atomic int state;             /* ncclInProgress during a non-blocking init, then its result */
    pthread_t init_thread;
    bool init_joinable;
    char init_err[1024];           /* the init's failure text */
    pthread_mutex_t mu;            /* guards real */
    ncclComm_t real;               /* the real NCCL's mirror, made on the first forwarded call */
    NcclClique *clique;
    int clique_index;
    struct NcclReg *regs;          /* ncclCommRegister handles */
};

/* mscclrt_result -> ncclResult_t; on failure the last error takes mscclrt_last_error(). */
ncclResult_t nccl_result(mscclrt_result r);
/* nccl_result for calls that need the CUDA driver: a missing or unusable driver is
 * ncclSystemError, as NCCL says it (nccl_result would say ncclInvalidUsage). */
ncclResult_t nccl_result_init(mscclrt_result r);
/* A live communicator whose initialisation finished, or an error (named after fn). */
ncclResult_t nccl_comm_ready(ncclComm_t comm, const char *fn);
ncclResult_t nccl_fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forwarding (nccl_api_coll.c): the real comm to use inside the current group, with the real
 * NCCL's group opened when ours is open. */
ncclResult_t nccl_forward_begin(ncclComm_t comm, const NcclReal **real, ncclComm_t *rc,
                                const char *fn);

#endif

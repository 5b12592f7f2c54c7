/*
 * nccl_comm.h - what the drop-in's other files need from its entry points (nccl_api*.c, which
 * define struct ncclComm and these two functions): the real NCCL's communicator behind one of
 * ours, for calls that are forwarded (nccl_devapi.c), and the text ncclGetLastError returns.
 */
#ifndef MSCCLRT_NCCL_COMM_H
#define MSCCLRT_NCCL_COMM_H

#include "nccl/nccl_abi.h"

struct ncclComm;                /* the drop-in's communicator; defined by the entry points */

/* The real NCCL's communicator that mirrors `ours`, created on first use. On failure (no real
 * NCCL loaded, its init failed, `ours` is not a live communicator) returns NULL, sets *err to
 * the result to return and has already set the last error. */
ncclComm_t nccl_comm_real(ncclComm_t ours, ncclResult_t *err);

/* Sets the text ncclGetLastError returns (for this thread), printf-style. */
void nccl_set_last_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

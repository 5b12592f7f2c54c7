/*
 * cpu.h - the CPU reference backend: an in-process group of host "ranks" running plans over
 * host buffers with the intended semantics of the plan format (one host thread per thread
 * block). The public mscclrt_cpu_* entry points (cpu_api.c) check arguments and call these.
 */
#ifndef MSCCLRT_CPU_H
#define MSCCLRT_CPU_H

#include "mscclrt.h"
#include "plan.h"

#include <stddef.h>

/* A new communicator of nranks host ranks (1..4096). */
mscclrt_result cpu_comm_create(mscclrt_cpu_comm **out, int nranks);
void cpu_comm_destroy(mscclrt_cpu_comm *comm);      /* NULL is a no-op */
/* Whether comm is a live communicator (magic check). */
bool cpu_comm_valid(const mscclrt_cpu_comm *comm);
int cpu_comm_nranks(const mscclrt_cpu_comm *comm);
/* Number of cached execution contexts (tests: contexts are reused across calls). */
int cpu_comm_contexts(const mscclrt_cpu_comm *comm);
/* 0: a thread per rank (the default unless MSCCLRT_CPU_SEED is set); else the serial scheduler
 * with this seed, counting calls from 0 again (see mscclrt_cpu_comm_set_seed). */
void cpu_comm_set_seed(mscclrt_cpu_comm *comm, unsigned long long seed);

/* One call of plan p on every rank (see mscclrt_cpu_execute). send/recv have nranks entries.
 * After a failure the comm's contexts and barriers are reset (their state is unknown). */
mscclrt_result cpu_execute(mscclrt_cpu_comm *comm, const Plan *p, void *const *send,
                           void *const *recv, size_t in_bytes, size_t out_bytes,
                           mscclrt_dtype dtype, mscclrt_redop op, mscclrt_packet packet);

#endif

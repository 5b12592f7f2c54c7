/*
 * exec_internal.h - what the executor's files share and nobody else sees: the single-process
 * group (clique) and its setup rounds, context keys, and the steps of one call (context,
 * kernel, arguments, launch) that exec.c and exec_group.c both run.
 */
#ifndef MSCCLRT_EXEC_INTERNAL_H
#define MSCCLRT_EXEC_INTERNAL_H

#include "exec/exec.h"

#include <stdbool.h>

/* ---- the group shared by the comms of one mscclrt_comm_init_all ---------------------------- */
typedef struct SetupRound {
    uint64_t seq;
    int arrived, consumed;
    bool done;
    mscclrt_result res;
    char err[1024];
    const Plan **plan;             /* [nranks] */
    const void **send, **recv;     /* [nranks] */
    ExecCtx **ctx;                 /* [nranks] placeholders to fill */
    struct SetupRound *next;
} SetupRound;

struct ExecClique {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int nranks;
    int live;                      /* comms not yet destroyed */
    mscclrt_comm **comms;          /* [nranks], borrowed */
    int load_arrived;              /* exec_share_after_load's barrier: arrivals, generation */
    uint64_t load_gen;
    SetupRound *rounds;
};

/* Context key of a call: the allocations holding sendbuf and recvbuf (spec §7.3). span: for a
 * context not keyed by buffers, the message bytes its scratch must serve (0: the default,
 * EXEC_UNKEYED_SCRATCH_SPAN); not part of the key: a larger call grows the context. */
typedef struct { const void *send, *recv; size_t srange, rrange; uint64_t span; } BufKey;

/* exec_ctx.c */
mscclrt_result exec_buf_key(const mscclrt_comm *c, const void *send, const void *recv,
                            size_t in, size_t out, BufKey *k);
ExecCtx *exec_ctx_find(mscclrt_comm *c, const Plan *p, const BufKey *k);
void exec_ctx_unlink(mscclrt_comm *c, ExecCtx *x);
/* Unlinks x (replaced by a grown context) onto c->retired: kernels may still use it, so it is
 * freed at the next device synchronisation (exec_drop_*, comm release). */
void exec_ctx_retire(mscclrt_comm *c, ExecCtx *x);
/* Frees c->retired; the device must be idle for them. */
void exec_ctx_free_retired(mscclrt_comm *c);
/* A new placeholder context, linked into the comm (ready once its setup is done). */
mscclrt_result exec_ctx_placeholder(mscclrt_comm *c, const Plan *p, const BufKey *k, ExecCtx **out);
/* The end of a context's setup (res: its outcome): proxy attached and ready, or unlinked and freed. */
mscclrt_result exec_ctx_finish(mscclrt_comm *c, ExecCtx *x, mscclrt_result res);
/* Collective setup of a new context for (p, k) on c; refuses a capturing stream. */
mscclrt_result exec_ctx_setup(mscclrt_comm *c, const Plan *p, const BufKey *k, void *stream,
                              ExecCtx **out);

/* exec_setup.c (single-process groups) */
SetupRound *exec_round_deposit(mscclrt_comm *c, const Plan *p, ExecCtx *x);
mscclrt_result exec_round_wait(mscclrt_comm *c, SetupRound *rd);

/* exec_kernel.c */
mscclrt_result exec_kernel_get(mscclrt_comm *c, const ExecCtx *x, int dt, int op, int pk,
                               ExecKernel **out);
/* *grow (0 if the context serves the call): an unkeyed context whose scratch is too small for
 * these sizes on some rank gets the span to set it up again with (exec_scratch_grow_span); then
 * *args is not set. Every rank decides the same, since the span comes from every rank's need. */
mscclrt_result exec_size_get(mscclrt_comm *c, ExecCtx *x, const void *send, const void *recv,
                             uint64_t in, uint64_t out, const MkArgs **args, uint64_t *grow);

/* exec_share.c: ranks of one process sharing a GPU; refusals instead of hangs */
mscclrt_result exec_share_check_proxy(const mscclrt_comm *c, const char *what);
/* After a kernel's first load on c: when other ranks of the group share c's CUDA context, waits
 * until they have loaded theirs too (their loads would wait for our running kernel, which waits
 * for them). Every rank loads at the same call: collective. Not for a single-process group
 * inside a group call, whose one thread prepares every rank before it launches any. */
mscclrt_result exec_share_after_load(mscclrt_comm *c);

/* exec.c */
mscclrt_result exec_launch(mscclrt_comm *c, CuFunction fn, const ExecCtx *x, const MkArgs *args,
                           void *stream);
mscclrt_result exec_prepare(mscclrt_comm *c, const Plan *p, const void *send, void *recv,
                            size_t in, size_t out, int dt, int op, int pk, void *stream,
                            ExecCtx **xo, CuFunction *fn, MkArgs *args);

/* exec_group.c */
extern _Thread_local int exec_group_depth;   /* open mscclrt_group_start calls of this thread */
mscclrt_result exec_group_enqueue(mscclrt_comm *c, const Plan *p, const void *send, void *recv,
                                  size_t in, size_t out, int dt, int op, int pk, void *stream);

/* Whether a call has the plan, buffers and sizes of the comm's previous one (its context). */
static inline bool exec_hot_buffers(const mscclrt_comm *c, const Plan *p, const void *send,
                                    const void *recv, size_t in, size_t out) {
    return c->hot.plan == p && c->hot.send == send && c->hot.recv == recv &&
           c->hot.in_bytes == in && c->hot.out_bytes == out;
}
/* Whether a call is the comm's previous one (the hot path: no lookups at all). */
static inline bool exec_hot_match(const mscclrt_comm *c, const Plan *p, const void *send,
                             const void *recv, size_t in, size_t out, int dt, int op, int pk) {
    return exec_hot_buffers(c, p, send, recv, in, out) && c->hot.dtype == dt &&
           c->hot.op == op && c->hot.packet == pk;
}

#endif

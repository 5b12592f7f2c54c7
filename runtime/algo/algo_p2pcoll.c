/*
 * algo_p2pcoll.c - collectives composed of grouped send/recv, for a communicator that spans
 * nodes. Its collectives run on the multi-node stdlib programs, which do not fit every call
 * (in-place alltoall; message sizes the programs' chunking does not divide). Those calls would
 * otherwise fail, or go to a real NCCL under the drop-in. The ones that move data without
 * reducing it are a set of send/recv pairs: allgather, alltoall, broadcast, gather and
 * scatter become one group of them on the native send/recv kernel (one launch), which reaches
 * the ranks of this node through mapped memory and those of other nodes through the port
 * proxy. In-place alltoall sends from a copy of its buffer in staging memory the communicator
 * keeps (grown when too small, never freed under a graph that may use it: freed with the comm).
 * Small calls also go this way first where it measured faster than the plans (P2pFirst: the
 * rooted collectives up to MSCCLRT_P2PCOLL_BYTES, allgather with one rank a node up to
 * p2pcoll_allgather_limit). The reductions are not composed here.
 */
#include "algo/algo_p2pcoll.h"
#include "algo/algo.h"
#include "algo/algo_native.h"
#include "core/err.h"
#include "core/log.h"
#include "exec/exec.h"

#include <stdlib.h>

/* staging memory of one comm: the current buffer first, older ones after it (kept until the
 * comm goes: a captured graph may still copy into them) */
typedef struct P2pStage {
    struct P2pStage *next;
    CuDevPtr ptr;
    uint64_t bytes;
} P2pStage;

static int add(P2pStep *out, int max, int k, int peer, bool recv, bool staged, uint64_t off,
               uint64_t bytes) {
    if (k < 0 || k >= max) return -1;
    out[k] = (P2pStep){.peer = peer, .recv = recv, .staged = staged, .off = off, .bytes = bytes};
    return k + 1;
}

int p2pcoll_steps(const mscclrt_request *q, int n, int rank, P2pStep *out, int max) {
    if (n < 1 || rank < 0 || rank >= n) return -1;
    const bool inplace = q->sendbuf == (const void *)q->recvbuf;
    int k = 0;
    switch (q->collective) {
    case MSCCLRT_COLL_ALLGATHER: {       /* in_bytes from every rank to every rank */
        const uint64_t b = q->in_bytes;
        if (b == 0) return 0;
        for (int p = 0; p < n; p++) {
            k = add(out, max, k, p, false, false, 0, b);
            k = add(out, max, k, p, true, false, (uint64_t)p * b, b);
        }
        return k;
    }
    case MSCCLRT_COLL_ALLTOALL: {        /* block p of this rank to rank p's block `rank` */
        const uint64_t b = q->in_bytes / (uint64_t)n;
        if (b == 0) return 0;
        for (int p = 0; p < n; p++) {
            /* in place, this rank's own block stays where it is */
            if (inplace && p == rank) continue;
            k = add(out, max, k, p, false, inplace, (uint64_t)p * b, b);
            k = add(out, max, k, p, true, false, (uint64_t)p * b, b);
        }
        return k;
    }
    case MSCCLRT_COLL_BROADCAST: {
        const uint64_t b = q->out_bytes;
        if (b == 0 || q->root < 0 || q->root >= n) return b == 0 ? 0 : -1;
        if (rank != q->root) return add(out, max, 0, q->root, true, false, 0, b);
        for (int p = 0; p < n; p++) {
            if (p == rank && inplace) continue;
            k = add(out, max, k, p, false, false, 0, b);
            if (p == rank) k = add(out, max, k, p, true, false, 0, b);
        }
        return k;
    }
    case MSCCLRT_COLL_GATHER: {          /* in_bytes from every rank to the root's block */
        const uint64_t b = q->in_bytes;
        if (b == 0 || q->root < 0 || q->root >= n) return b == 0 ? 0 : -1;
        if (rank != q->root) return add(out, max, 0, q->root, false, false, 0, b);
        for (int p = 0; p < n; p++) {
            if (p == rank) k = add(out, max, k, p, false, false, 0, b);
            k = add(out, max, k, p, true, false, (uint64_t)p * b, b);
        }
        return k;
    }
    case MSCCLRT_COLL_SCATTER: {         /* the root's block p to rank p */
        const uint64_t b = q->out_bytes;
        if (b == 0 || q->root < 0 || q->root >= n) return b == 0 ? 0 : -1;
        if (rank != q->root) return add(out, max, 0, q->root, true, false, 0, b);
        for (int p = 0; p < n; p++) {
            k = add(out, max, k, p, false, false, (uint64_t)p * b, b);
            if (p == rank) k = add(out, max, k, p, true, false, 0, b);
        }
        return k;
    }
    default:
        return -1;                       /* reductions, send/recv itself */
    }
}

bool algo_p2pcoll_serves(mscclrt_comm *c, const mscclrt_request *q) {
    if (!c->algo || c->algo->ranks_per_node == c->nranks) return false;   /* one node */
    switch (q->collective) {
    case MSCCLRT_COLL_ALLGATHER: case MSCCLRT_COLL_ALLTOALL: case MSCCLRT_COLL_BROADCAST:
    case MSCCLRT_COLL_GATHER: case MSCCLRT_COLL_SCATTER:
        break;
    default:
        return false;
    }
    return 2 * c->nranks <= MN_P2P_MAX && algo_native_reaches_all(c);   /* one group's entries */
}

bool algo_p2pcoll_first(const mscclrt_request *q, const P2pFirst *first) {
    if (!q || !first || q->message_bytes == 0) return false;
    switch (q->collective) {
    case MSCCLRT_COLL_ALLTOALL: return q->message_bytes <= first->alltoall;
    case MSCCLRT_COLL_ALLGATHER: return q->message_bytes <= first->allgather;
    case MSCCLRT_COLL_BROADCAST: case MSCCLRT_COLL_GATHER: case MSCCLRT_COLL_SCATTER:
        return q->message_bytes <= first->rooted;
    default: return false;
    }
}

/* 2 nodes of one H200 each, loopback TCP, nccl-tests all_gather, median of 4 rounds (c82):
 * composed 68/81/107/162/164 us at 64 KiB-1 MiB against the plans' 67/98/153/186/212 and
 * NCCL's 89/98/126/179/271; at 2 MiB level, at 4 MiB the plans ahead (c84: 515-622 against
 * 622-643) */
uint64_t p2pcoll_allgather_limit(long long setting, int ranks_per_node) {
    if (setting >= 0) return (uint64_t)setting;
    return ranks_per_node == 1 ? P2PCOLL_ALLGATHER_AUTO_BYTES : 0;
}

/* The staging buffer for at least `bytes` (its context current). */
static mscclrt_result stage_get(mscclrt_comm *c, const mscclrt_request *q, uint64_t bytes,
                                CuDevPtr *ptr) {
    AlgoComm *a = c->algo;
    P2pStage *s = a->p2p_stage;
    if (s && s->bytes >= bytes) {
        *ptr = s->ptr;
        return MSCCLRT_SUCCESS;
    }
    if (q->capturing)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "rank %d: in-place alltoall of %llu bytes "
                       "across nodes under graph capture needs %llu bytes of staging memory, "
                       "which cannot be allocated while capturing: run it once before capture",
                       c->rank, (unsigned long long)q->message_bytes, (unsigned long long)bytes);
    P2pStage *n = calloc(1, sizeof *n);
    if (!n) return rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory", c->rank);
    const uint64_t want = bytes < (1u << 20) ? (1u << 20) : bytes;
    mscclrt_result res = cu_check(cu.cuMemAlloc(&n->ptr, (size_t)want),
                                  "cuMemAlloc(staging for in-place alltoall)");
    if (res != MSCCLRT_SUCCESS) {
        free(n);
        return res;
    }
    n->bytes = want;
    n->next = s;
    a->p2p_stage = n;
    *ptr = n->ptr;
    return MSCCLRT_SUCCESS;
}

/* The copy of an in-place alltoall's buffer into staging, on the call's stream. */
typedef struct StageCopy {
    mscclrt_comm *c;
    CuDevPtr dst, src;
    size_t bytes;
    void *stream;
} StageCopy;

static mscclrt_result stage_copy(const StageCopy *s) {
    CuContext prev;
    TRY(exec_cuda_current(s->c, &prev));
    const mscclrt_result res = cu_check(cu.cuMemcpyDtoDAsync(s->dst, s->src, s->bytes,
                                                             (CuStream)s->stream),
                                        "cuMemcpyDtoDAsync(in-place alltoall to staging)");
    exec_cuda_restore(s->c, prev);
    return res;
}

/* group end's deferred form (arg: a malloc'd StageCopy, freed by the group) */
static mscclrt_result stage_copy_deferred(void *arg, ExecDeferStage stage) {
    return stage == EXEC_DEFER_RUN ? stage_copy(arg) : MSCCLRT_SUCCESS;
}

mscclrt_result algo_p2pcoll_run(mscclrt_comm *c, const mscclrt_request *q, const char *fn) {
    P2pStep steps[MN_P2P_MAX];
    const int k = p2pcoll_steps(q, c->nranks, c->rank, steps, MN_P2P_MAX);
    if (k < 0)
        return rt_fail(MSCCLRT_ERR_INTERNAL, "%s: rank %d: %s is not composed of send/recv", fn,
                       c->rank, mscclrt_coll_name(q->collective));
    if (k == 0) return MSCCLRT_SUCCESS;
    CuDevPtr stage = 0;
    bool staged = false;
    for (int i = 0; i < k; i++) staged |= steps[i].staged;
    if (staged) {
        CuContext prev;
        TRY(exec_cuda_current(c, &prev));
        mscclrt_result res = stage_get(c, q, q->in_bytes, &stage);
        exec_cuda_restore(c, prev);
        TRY(res);
        const StageCopy sc = {c, stage, (CuDevPtr)(uintptr_t)q->sendbuf, (size_t)q->in_bytes,
                              q->stream};
        if (exec_in_group()) {
            /* inside the caller's group the copy waits for the group's earlier calls (they
             * may write this buffer): it is issued at group end in call order, and this
             * call's sends go into a launch of their own after it */
            StageCopy *d = malloc(sizeof *d);
            if (!d) return rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory", c->rank);
            *d = sc;
            c->algo->p2p_open = NULL;
            TRY(exec_group_defer(c, stage_copy_deferred, d, NULL));
        } else {
            TRY(stage_copy(&sc));
        }
    }
    LOG_TRACE(LOG_SUB_EXEC, "rank %d: %s of %llu bytes as %d send/recv steps%s", c->rank,
              mscclrt_coll_name(q->collective), (unsigned long long)q->message_bytes, k,
              staged ? " (staged)" : "");
    TRY(mscclrt_group_start());
    mscclrt_result res = MSCCLRT_SUCCESS;
    for (int i = 0; i < k && res == MSCCLRT_SUCCESS; i++) {
        const P2pStep *s = &steps[i];
        if (s->recv) {
            res = mscclrt_recv(c, (char *)q->recvbuf + s->off, (size_t)s->bytes, MSCCLRT_UINT8,
                               s->peer, q->stream);
        } else {
            const char *src = s->staged ? (const char *)(uintptr_t)stage : (const char *)q->sendbuf;
            res = mscclrt_send(c, src + s->off, (size_t)s->bytes, MSCCLRT_UINT8, s->peer,
                               q->stream);
        }
    }
    const mscclrt_result end = mscclrt_group_end();
    return res != MSCCLRT_SUCCESS ? res : end;
}

void algo_p2pcoll_free(mscclrt_comm *c) {
    AlgoComm *a = c->algo;
    while (a && a->p2p_stage) {
        P2pStage *s = a->p2p_stage;
        a->p2p_stage = s->next;
        cu.cuMemFree(s->ptr);
        free(s);
    }
}

/*
 * algo_coll.c - the NCCL-shaped collective calls on a communicator (mscclrt_allreduce, ...,
 * mscclrt_send/recv), PreMulSum operators, windows, and mscclrt_algo_run: each call becomes a
 * request (sizes as nccl-tests counts them, buffer mode, capture status, symmetric windows),
 * the selector chain picks an algorithm (algo_registry.c), and the call runs as a plan through
 * the executor or as a native launch (algo_native.c) — queued in call order inside groups.
 * Point-to-point calls of one group on one comm become one launch of the built-in send/recv
 * kernel, so all-to-all-v patterns built from send/recv take one kernel, not one per peer.
 */
#include "algo/algo.h"
#include "algo/algo_native.h"
#include "algo/algo_p2pcoll.h"
#include "bootstrap/bootstrap.h"
#include "core/api_plan.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "exec/exec.h"

#include <stdlib.h>
#include <string.h>

static mscclrt_result algo_p2p_launch(void *arg, ExecDeferStage stage);

/* The grid of a send/recv group: fixed for the communicator, since both sides of a pair must
 * cut transfers the same way and neither knows the other's group. All 32 blocks (the slot
 * path's bandwidth, and 256 KiB per entry as packets), fewer where ranks share a process and
 * GPU (exec_native_block_cap, the same on every rank). */
#define P2P_THREADS 1024
static int p2p_blocks(mscclrt_comm *c) {
    int blocks = 0, threads = P2P_THREADS;
    native_default_grid(UINT64_MAX, UINT64_MAX, 0, 0, exec_native_block_cap(c, MN_MAX_BLOCKS),
                        exec_context_share_max(c) > 1, &blocks, &threads);
    return blocks;
}

struct AlgoPremul {
    bool live;
    mscclrt_dtype dtype;
    CuDevPtr scalar;               /* device address the kernels read */
    CuDevPtr owned;                /* host residence: our copy of the value */
};

struct AlgoWindow {
    CuDevPtr base;
    size_t bytes;
    struct AlgoWindow *next;
};

/* ---- requests ------------------------------------------------------------------------------- */
static bool in_windows(const AlgoComm *a, const void *p, size_t n) {
    const CuDevPtr v = (CuDevPtr)(uintptr_t)p;
    for (const AlgoWindow *w = a->windows; w; w = w->next)
        if (v >= w->base && v - w->base + n <= w->bytes) return true;
    return false;
}

/* The comm-dependent fields of a request; checks op and root. */
static mscclrt_result fill_request(mscclrt_comm *c, mscclrt_request *q, const char *fn) {
    TRY(exec_comm_check(c, fn));
    if (c->revoked)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "%s: rank %d: the communicator was revoked", fn,
                       c->rank);
    AlgoComm *a = algo_comm(c);
    if (!a) return MSCCLRT_ERR_SYSTEM;
    if ((unsigned)q->dtype >= MSCCLRT_DTYPE_COUNT)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: rank %d: dtype %d out of range [0, %d)", fn,
                       c->rank, (int)q->dtype, MSCCLRT_DTYPE_COUNT);
    if (q->op < 0 || (q->op >= MSCCLRT_REDOP_COUNT &&
                      (q->op - MSCCLRT_REDOP_COUNT >= a->npremul ||
                       !a->premul[q->op - MSCCLRT_REDOP_COUNT].live)))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: rank %d: operator %d is neither a built-in "
                       "one [0, %d) nor a live PreMulSum operator of this communicator", fn,
                       c->rank, q->op, MSCCLRT_REDOP_COUNT);
    if (q->op >= MSCCLRT_REDOP_COUNT && a->premul[q->op - MSCCLRT_REDOP_COUNT].dtype != q->dtype)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: rank %d: PreMulSum operator %d was made for "
                       "%s, the call is %s", fn, c->rank, q->op,
                       mscclrt_dtype_name(a->premul[q->op - MSCCLRT_REDOP_COUNT].dtype),
                       mscclrt_dtype_name(q->dtype));
    if (q->root != -1 && (q->root < 0 || q->root >= c->nranks))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: rank %d: root %d out of range [0, %d)", fn,
                       c->rank, q->root, c->nranks);
    q->world_size = c->nranks;
    q->rank = c->rank;
    q->ranks_per_node = a->ranks_per_node;
    q->arch = c->arch;
    int st = CU_CAPTURE_STATUS_NONE;
    q->capturing = cu.cuStreamIsCapturing((CuStream)q->stream, &st) == CU_OK &&
                   st != CU_CAPTURE_STATUS_NONE;
    q->symmetric = a->windows && in_windows(a, q->sendbuf, q->in_bytes) &&
                   in_windows(a, q->recvbuf, q->out_bytes);
    return MSCCLRT_SUCCESS;
}

static const mscclrt_algo *builtin_for(mscclrt_comm *c, mscclrt_coll coll) {
    const AlgoSet *set = NULL;
    if (algo_default_set(c, &set) != MSCCLRT_SUCCESS || !set) return NULL;
    char name[64];
    snprintf(name, sizeof name, "native/%s", mscclrt_coll_name(coll));
    for (int i = 0; i < set->n; i++)
        if (strcmp(set->v[i]->desc.name, name) == 0) return set->v[i];
    return NULL;
}

static mscclrt_result deferred_native(void *arg, ExecDeferStage stage) {
    return stage == EXEC_DEFER_RUN ? algo_native_launch(arg) : MSCCLRT_SUCCESS;   /* kernel resolved at the call */
}

/* Issues a filled launch: now (from the caller's copy), or at group end in call order. */
static mscclrt_result issue_native(mscclrt_comm *c, NativeLaunch *l, const mscclrt_request *q) {
    if (q->op >= MSCCLRT_REDOP_COUNT)
        l->args.scalar = c->algo->premul[q->op - MSCCLRT_REDOP_COUNT].scalar;
    if (!exec_in_group()) {
        AlgoComm *a = c->algo;
        if (__builtin_expect(a->record, 0)) {
            a->last.fn = l->fn;
            a->last.blocks = l->blocks;
            a->last.threads = l->threads;
            a->last.args = l->args;
        }
        return algo_native_launch(l);
    }
    NativeLaunch *copy = malloc(sizeof *copy);
    if (!copy) return rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory", c->rank);
    memcpy(copy, l, offsetof(NativeLaunch, list));   /* collectives carry no p2p list */
    return exec_group_defer(c, deferred_native, copy, &copy->args.in_bytes);
}

/* One native launch of algo for q: kernel and grid resolved (compiled on first use). */
static mscclrt_result run_native(mscclrt_comm *c, const mscclrt_algo *algo,
                                 const mscclrt_request *q, int blocks, int threads,
                                 const void *extra, size_t extra_bytes, NativeLaunch *l) {
    TRY(algo_native_prepare(c, algo, q, blocks, threads, extra, extra_bytes, l));
    return issue_native(c, l, q);
}

/* A plan-based algorithm can serve this call now: a standard operator, and a context for these
 * buffers that exists and is large enough; else, outside capture, a first use that may set one
 * up. A first call or a growth sets up memory, which a CUDA-graph capture cannot take; and a
 * plan keyed by its buffers that has a context on the same allocations already would set up
 * one more for every new offset (nccl-tests -R 2 moves its buffers by an offset each
 * iteration: every call an address exchange, 185-295 us for all_gather up to 256 KiB), unless
 * the user registered it. The answer is the same on every rank while ranks use their windows
 * alike (contexts are set up collectively). */
static bool plan_runs_now(mscclrt_comm *c, const mscclrt_algo *algo, const mscclrt_request *q) {
    if (q->op >= MSCCLRT_REDOP_COUNT) return false;
    /* eager, a plan on scratch alone serves any buffers (setting up or growing as it needs):
     * no lookups on this path, which every eager call of such a plan takes */
    if (!q->capturing && !algo->needs_symmetric) return true;
    bool same_allocs = false;
    if (exec_plan_ready(c, exec_plan(algo->plan), q->sendbuf, q->recvbuf, q->in_bytes,
                        q->out_bytes, &same_allocs))
        return true;
    /* an algorithm the user registered is theirs to run: it sets up for the new buffers */
    return !q->capturing && (!same_allocs || algo_is_registered(algo));
}

/* What runs for a choice: the chosen algorithm, or the built-in native one of the collective
 * when a plan cannot take this call now (PreMulSum; first use under capture; new buffers in
 * allocations it has set up already). */
static mscclrt_result effective(mscclrt_comm *c, const mscclrt_request *q, mscclrt_choice *ch) {
    if (ch->algo->kind != MSCCLRT_ALGO_PLAN || plan_runs_now(c, ch->algo, q)) return MSCCLRT_SUCCESS;
    const mscclrt_algo *nat = builtin_for(c, q->collective);
    /* across nodes the built-in collective runs over the port proxy (not PreMulSum) */
    if (!nat && algo_native_net_serves(c, q)) nat = algo_native_net_builtin(c, q->collective);
    /* nothing else outside capture: the plan sets up a context for these buffers too */
    if (!nat && !q->capturing && q->op < MSCCLRT_REDOP_COUNT) return MSCCLRT_SUCCESS;
    if (!nat)
        return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "rank %d: plan '%s' cannot serve this %s "
                       "(PreMulSum operator, or first use under CUDA-graph capture) and no "
                       "built-in native algorithm is there to take it%s", c->rank,
                       ch->algo->desc.name, mscclrt_coll_name(q->collective),
                       q->ranks_per_node != q->world_size ? " (the communicator spans nodes)"
                                                          : "");
    LOG_TRACE(LOG_SUB_EXEC, "rank %d: %s: '%s' handed to '%s' (PreMulSum, capture or new "
              "buffers)", c->rank, mscclrt_coll_name(q->collective), ch->algo->desc.name,
              nat->desc.name);
    ch->algo = nat;
    ch->blocks = ch->threads = 0;
    return MSCCLRT_SUCCESS;
}

static mscclrt_result run_choice(mscclrt_comm *c, const mscclrt_request *q, mscclrt_choice ch,
                                 const void *extra, size_t extra_bytes, NativeLaunch *l) {
    TRY(effective(c, q, &ch));
    if (ch.algo->kind == MSCCLRT_ALGO_PLAN)
        return mscclrt_execute_ex(c, ch.algo->plan, q->sendbuf, q->recvbuf, q->in_bytes,
                                  q->out_bytes, q->dtype, (mscclrt_redop)q->op, MSCCLRT_LL16,
                                  q->stream);
    return run_native(c, ch.algo, q, ch.blocks, ch.threads, extra, extra_bytes, l);
}

/* ---- one order for the comm's calls ---------------------------------------------------------
 * The comm's algorithms share its scratch, slots and counters, so its calls must run one after
 * the other, as NCCL orders a communicator's operations: a call on a stream other than the
 * previous call's first waits for everything issued on that stream so far. Only a change of
 * stream costs anything (an event record and a wait). Under capture the wait cannot refer to
 * an uncaptured stream: a graph's calls must be ordered by the caller (one stream). */
static void order_streams(mscclrt_comm *c, const mscclrt_request *q) {
    AlgoComm *a = c->algo;
    if (a->stream_used && q->stream == a->last_stream) return;
    if (a->stream_used && !q->capturing) {
        CuContext prev;
        if (exec_cuda_current(c, &prev) == MSCCLRT_SUCCESS) {
            if (!a->order_event)
                cu.cuEventCreate((CuEvent *)&a->order_event, CU_EVENT_FLAG_DISABLE_TIMING);
            if (!a->order_event ||
                cu.cuEventRecord((CuEvent)a->order_event, (CuStream)a->last_stream) != CU_OK ||
                cu.cuStreamWaitEvent((CuStream)q->stream, (CuEvent)a->order_event, 0) != CU_OK)
                LOG_WARN("rank %d: could not order a call on stream %p after the previous one on "
                         "%p", c->rank, q->stream, a->last_stream);
            exec_cuda_restore(c, prev);
        }
    }
    a->last_stream = q->stream;
    a->stream_used = true;
}

/* ---- contexts of cleaned algorithms ----------------------------------------------------------
 * mscclrt_algo_clean_cached_contexts bumps an algorithm's generation; a comm that ran its plan
 * under an older one drops those contexts before the next call (every rank cleans, so every
 * rank sets up again at the same call). */
struct AlgoGen { const mscclrt_algo *algo; uint64_t gen; };

static void plan_generation(mscclrt_comm *c, const mscclrt_algo *algo) {
    AlgoComm *a = c->algo;
    const uint64_t g = __atomic_load_n(&algo->generation, __ATOMIC_ACQUIRE);
    for (int i = 0; i < a->ngens; i++)
        if (a->gens[i].algo == algo) {
            if (a->gens[i].gen != g) {
                exec_drop_plan_contexts(c, exec_plan(algo->plan));
                a->gens[i].gen = g;
            }
            return;
        }
    struct AlgoGen *v = realloc(a->gens, (size_t)(a->ngens + 1) * sizeof *v);
    if (!v) return;   /* not remembered: a later clean drops nothing here (nothing is wrong) */
    a->gens = v;
    a->gens[a->ngens++] = (struct AlgoGen){algo, g};
}

/* ---- the selection cache: a request of a shape seen before skips selection ---------------- */
static bool sel_match(const AlgoSel *e, const mscclrt_request *q, uint64_t epoch) {
    return e->valid && e->epoch == epoch && e->coll == q->collective && e->msg == q->message_bytes &&
           e->in == q->in_bytes && e->out == q->out_bytes && e->dtype == (int)q->dtype &&
           e->op == q->op && e->root == q->root && e->inplace == q->inplace &&
           e->symmetric == q->symmetric && e->capturing == q->capturing;
}

static void sel_store(AlgoComm *a, const mscclrt_request *q, uint64_t epoch, mscclrt_choice ch,
                      const mscclrt_algo *ran, const NativeLaunch *l) {
    AlgoSel *e = &a->sel[a->sel_next];
    a->sel_next = (a->sel_next + 1) % ALGO_SEL_CACHE;
    *e = (AlgoSel){.valid = true, .epoch = epoch, .coll = q->collective, .msg = q->message_bytes,
                   .in = q->in_bytes, .out = q->out_bytes, .dtype = (int)q->dtype, .op = q->op,
                   .root = q->root, .inplace = q->inplace, .symmetric = q->symmetric,
                   .capturing = q->capturing, .choice = ch, .ran = ran,
                   .gen = __atomic_load_n(&ran->generation, __ATOMIC_ACQUIRE)};
    if (ran->kind == MSCCLRT_ALGO_NATIVE) {
        e->fn = l->fn;
        e->blocks = l->blocks;
        e->threads = l->threads;
        e->direct = l->direct;
        e->own = l->own;
    }
}

/* What no algorithm serves on a communicator that spans nodes (sizes the multi-node programs do
 * not fit, in-place alltoall): data movement as one group of send/recv (algo_p2pcoll.c), else
 * the built-in collective's slot path, its pieces to other nodes through the port proxy, on a
 * block per MSCCLRT_NATIVE_NET_BLOCK_BYTES (algo_native_net_blocks). */
static mscclrt_result across_nodes_fallback(mscclrt_comm *c, const mscclrt_request *q,
                                            bool composed, const char *fn) {
    if (composed) return algo_p2pcoll_run(c, q, fn);
    const mscclrt_algo *nat = algo_native_net_builtin(c, q->collective);
    if (!nat) return rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory", c->rank);
    const int blocks = algo_native_net_blocks(c, q->message_bytes);
    LOG_TRACE(LOG_SUB_EXEC, "rank %d: %s of %llu bytes: no algorithm fits; '%s' over the port "
              "proxy on %d blocks", c->rank, fn, (unsigned long long)q->message_bytes,
              nat->desc.name, blocks);
    NativeLaunch l;
    return run_native(c, nat, q, blocks, 0, NULL, 0, &l);
}

static mscclrt_result coll(mscclrt_comm *c, mscclrt_request *q, const char *fn) {
    TRY(fill_request(c, q, fn));
    if (q->message_bytes == 0) return MSCCLRT_SUCCESS;   /* NCCL: a count of 0 is a no-op */
    if (!q->sendbuf || !q->recvbuf)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: rank %d: %s is NULL", fn, c->rank,
                       !q->sendbuf ? "sendbuf" : "recvbuf");
    AlgoComm *a = c->algo;
    order_streams(c, q);
    const uint64_t epoch = algo_registry_epoch();
    NativeLaunch l;
    for (int k = 1; k <= ALGO_SEL_CACHE; k++) {   /* most recent first */
        const AlgoSel *e = &a->sel[(a->sel_next - k + ALGO_SEL_CACHE) % ALGO_SEL_CACHE];
        if (!sel_match(e, q, epoch)) continue;
        if (e->ran->kind == MSCCLRT_ALGO_PLAN) {
            a->last.fn = NULL;
            if (__atomic_load_n(&e->ran->generation, __ATOMIC_RELAXED) != e->gen)
                break;   /* cleaned since: the slow path drops the old contexts */
            /* the cache knows the call's shape, not its buffers: buffers the plan cannot
             * take now go the slow way, which hands the call to the native algorithm
             * (nccl-tests moves its buffers by an offset every iteration: -R 2 -G 1 failed on
             * the second captured call of every plan keyed by buffers) */
            if (!plan_runs_now(c, e->ran, q)) break;
            return mscclrt_execute_ex(c, e->ran->plan, q->sendbuf, q->recvbuf, q->in_bytes,
                                      q->out_bytes, q->dtype, (mscclrt_redop)q->op, MSCCLRT_LL16,
                                      q->stream);
        }
        l.fn = (CuFunction)e->fn;
        l.blocks = e->blocks;
        l.threads = e->threads;
        l.p2p = false;
        l.direct = e->direct;
        l.own = e->own;
        algo_native_fill(c, q, NULL, 0, &l);
        return issue_native(c, &l, q);
    }
    mscclrt_choice ch;
    /* across nodes, what no algorithm serves still runs: composed of send/recv, or as the
     * built-in collective over the port proxy */
    const bool composed = algo_p2pcoll_serves(c, q);
    long long first = 0, first_a2a = 0, first_ag = 0;
    if (composed) TRY(param_int(PARAM_P2PCOLL_BYTES, &first));
    if (composed) TRY(param_int(PARAM_P2PCOLL_ALLTOALL_BYTES, &first_a2a));
    if (composed) TRY(param_int(PARAM_P2PCOLL_ALLGATHER_BYTES, &first_ag));
    const P2pFirst limits = {(uint64_t)first, (uint64_t)first_a2a,
                             p2pcoll_allgather_limit(first_ag, a->ranks_per_node)};
    if (composed && algo_p2pcoll_first(q, &limits)) {
        LOG_TRACE(LOG_SUB_EXEC, "rank %d: %s of %llu bytes: composed send/recv "
                  "(MSCCLRT_P2PCOLL_BYTES=%lld, MSCCLRT_P2PCOLL_ALLTOALL_BYTES=%lld, "
                  "MSCCLRT_P2PCOLL_ALLGATHER_BYTES=%lld)", c->rank, fn,
                  (unsigned long long)q->message_bytes, first, first_a2a, first_ag);
        return algo_p2pcoll_run(c, q, fn);
    }
    const bool net_native = algo_native_net_serves(c, q);
    long long net_first = 0;
    if (net_native) TRY(param_int(PARAM_NATIVE_NET_BYTES, &net_first));
    if (net_native && algo_native_net_first(q, net_first)) {
        LOG_TRACE(LOG_SUB_EXEC, "rank %d: %s of %llu bytes: the built-in collective over the "
                  "port proxy (MSCCLRT_NATIVE_NET_BYTES=%lld)", c->rank, fn,
                  (unsigned long long)q->message_bytes, net_first);
        return across_nodes_fallback(c, q, false, fn);
    }
    if (composed || net_native) {
        bool none = false;
        const mscclrt_result sr = algo_select_quiet(c, q, &ch, &none);
        if (none) return across_nodes_fallback(c, q, composed, fn);
        TRY(sr);
    } else {
        TRY(algo_select(c, q, &ch));
    }
    LOG_TRACE(LOG_SUB_EXEC, "rank %d: %s of %llu bytes: '%s' (%d x %d)", c->rank, fn,
              (unsigned long long)q->message_bytes, ch.algo->desc.name, ch.blocks, ch.threads);
    mscclrt_choice run = ch;
    TRY(effective(c, q, &run));
    if (run.algo->kind == MSCCLRT_ALGO_PLAN) {
        a->last.fn = NULL;
        plan_generation(c, run.algo);
        TRY(mscclrt_execute_ex(c, run.algo->plan, q->sendbuf, q->recvbuf, q->in_bytes,
                               q->out_bytes, q->dtype, (mscclrt_redop)q->op, MSCCLRT_LL16,
                               q->stream));
    } else {
        TRY(run_native(c, run.algo, q, run.blocks, run.threads, NULL, 0, &l));
    }
    /* a plan under capture may be handed to native only until its context exists: not cached */
    if (!(q->capturing && run.algo != ch.algo)) sel_store(a, q, epoch, ch, run.algo, &l);
    return MSCCLRT_SUCCESS;
}

static mscclrt_request req0(mscclrt_coll k, const void *s, void *r, mscclrt_dtype dt, int op,
                            int root, void *stream) {
    mscclrt_request q;
    memset(&q, 0, sizeof q);
    q.collective = k;
    q.sendbuf = s;
    q.recvbuf = r;
    q.dtype = dt;
    q.op = op;
    q.root = root;
    q.peer = -1;
    q.stream = stream;
    return q;
}

/* size_t products of user counts, checked */
static mscclrt_result bytes_of(mscclrt_comm *c, size_t count, mscclrt_dtype dt, uint64_t mult,
                               uint64_t *out, const char *fn) {
    TRY(exec_comm_check(c, fn));
    const size_t es = mscclrt_dtype_size(dt);
    if (es == 0)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: dtype %d out of range [0, %d)", fn, (int)dt,
                       MSCCLRT_DTYPE_COUNT);
    unsigned __int128 v = (unsigned __int128)count * es * mult;
    if (v > ((uint64_t)1 << 62))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: %zu elements of %zu bytes (x%llu) overflow",
                       fn, count, es, (unsigned long long)mult);
    *out = (uint64_t)v;
    return MSCCLRT_SUCCESS;
}

mscclrt_result mscclrt_allreduce(mscclrt_comm *c, const void *s, void *r, size_t count,
                                 mscclrt_dtype dt, int op, void *stream) {
    mscclrt_request q = req0(MSCCLRT_COLL_ALLREDUCE, s, r, dt, op, -1, stream);
    TRY(bytes_of(c, count, dt, 1, &q.in_bytes, "mscclrt_allreduce"));
    q.out_bytes = q.message_bytes = q.in_bytes;
    q.inplace = s == r;
    return coll(c, &q, "mscclrt_allreduce");
}

mscclrt_result mscclrt_allgather(mscclrt_comm *c, const void *s, void *r, size_t count,
                                 mscclrt_dtype dt, void *stream) {
    mscclrt_request q = req0(MSCCLRT_COLL_ALLGATHER, s, r, dt, MSCCLRT_SUM, -1, stream);
    TRY(bytes_of(c, count, dt, 1, &q.in_bytes, "mscclrt_allgather"));
    q.out_bytes = q.message_bytes = q.in_bytes * (uint64_t)c->nranks;
    q.inplace = (const char *)s == (const char *)r + (uint64_t)c->rank * q.in_bytes;
    return coll(c, &q, "mscclrt_allgather");
}

mscclrt_result mscclrt_reducescatter(mscclrt_comm *c, const void *s, void *r, size_t count,
                                     mscclrt_dtype dt, int op, void *stream) {
    mscclrt_request q = req0(MSCCLRT_COLL_REDUCESCATTER, s, r, dt, op, -1, stream);
    TRY(bytes_of(c, count, dt, 1, &q.out_bytes, "mscclrt_reducescatter"));
    q.in_bytes = q.message_bytes = q.out_bytes * (uint64_t)c->nranks;
    q.inplace = (char *)r == (const char *)s + (uint64_t)c->rank * q.out_bytes;
    return coll(c, &q, "mscclrt_reducescatter");
}

mscclrt_result mscclrt_broadcast(mscclrt_comm *c, const void *s, void *r, size_t count,
                                 mscclrt_dtype dt, int root, void *stream) {
    mscclrt_request q = req0(MSCCLRT_COLL_BROADCAST, s, r, dt, MSCCLRT_SUM, root, stream);
    TRY(bytes_of(c, count, dt, 1, &q.in_bytes, "mscclrt_broadcast"));
    q.out_bytes = q.message_bytes = q.in_bytes;
    if (root != c->rank && !s) q.sendbuf = r;   /* non-roots' sendbuf is not used */
    q.inplace = 2;   /* the root's mode is not known on every rank (mscclrt_request) */
    return coll(c, &q, "mscclrt_broadcast");
}

mscclrt_result mscclrt_reduce(mscclrt_comm *c, const void *s, void *r, size_t count,
                              mscclrt_dtype dt, int op, int root, void *stream) {
    mscclrt_request q = req0(MSCCLRT_COLL_REDUCE, s, r, dt, op, root, stream);
    TRY(bytes_of(c, count, dt, 1, &q.in_bytes, "mscclrt_reduce"));
    q.out_bytes = q.message_bytes = q.in_bytes;
    if (root != c->rank && !r) q.recvbuf = (void *)s;   /* non-roots' recvbuf is not used */
    q.inplace = 2;   /* the root's mode is not known on every rank (mscclrt_request) */
    return coll(c, &q, "mscclrt_reduce");
}

mscclrt_result mscclrt_alltoall(mscclrt_comm *c, const void *s, void *r, size_t count,
                                mscclrt_dtype dt, void *stream) {
    mscclrt_request q = req0(MSCCLRT_COLL_ALLTOALL, s, r, dt, MSCCLRT_SUM, -1, stream);
    TRY(bytes_of(c, count, dt, (uint64_t)c->nranks, &q.in_bytes, "mscclrt_alltoall"));
    q.out_bytes = q.message_bytes = q.in_bytes;
    q.inplace = s == r;
    return coll(c, &q, "mscclrt_alltoall");
}

mscclrt_result mscclrt_gather(mscclrt_comm *c, const void *s, void *r, size_t count,
                              mscclrt_dtype dt, int root, void *stream) {
    mscclrt_request q = req0(MSCCLRT_COLL_GATHER, s, r, dt, MSCCLRT_SUM, root, stream);
    TRY(bytes_of(c, count, dt, 1, &q.in_bytes, "mscclrt_gather"));
    q.out_bytes = q.message_bytes = q.in_bytes * (uint64_t)c->nranks;
    if (root != c->rank && !r) q.recvbuf = (void *)s;   /* only the root's recvbuf is used */
    q.inplace = 2;   /* the root's mode is not known on every rank (mscclrt_request) */
    return coll(c, &q, "mscclrt_gather");
}

mscclrt_result mscclrt_scatter(mscclrt_comm *c, const void *s, void *r, size_t count,
                               mscclrt_dtype dt, int root, void *stream) {
    mscclrt_request q = req0(MSCCLRT_COLL_SCATTER, s, r, dt, MSCCLRT_SUM, root, stream);
    TRY(bytes_of(c, count, dt, 1, &q.out_bytes, "mscclrt_scatter"));
    q.in_bytes = q.message_bytes = q.out_bytes * (uint64_t)c->nranks;
    if (root != c->rank && !s) q.sendbuf = r;            /* only the root's sendbuf is used */
    q.inplace = 2;   /* the root's mode is not known on every rank (mscclrt_request) */
    return coll(c, &q, "mscclrt_scatter");
}

/* ---- point to point -------------------------------------------------------------------------- */
static mscclrt_result p2p(mscclrt_comm *c, void *buf, size_t count, mscclrt_dtype dt, int peer,
                          void *stream, int recv, const char *fn) {
    uint64_t bytes = 0;
    TRY(bytes_of(c, count, dt, 1, &bytes, fn));
    if (peer < 0 || peer >= c->nranks)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: rank %d: peer %d out of range [0, %d)", fn,
                       c->rank, peer, c->nranks);
    if (bytes == 0) return MSCCLRT_SUCCESS;
    if (!buf) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: rank %d: buffer is NULL", fn, c->rank);
    AlgoComm *a = algo_comm(c);
    if (!a) return MSCCLRT_ERR_SYSTEM;
    /* across nodes the native context reaches the other nodes' ranks through the port proxy,
     * unless that is off (MSCCLRT_PORT_PROXY=0) or the kernel table too small (algo_native.c) */
    if (a->ranks_per_node != c->nranks && c->boot &&
        boot_node_of(c->boot, peer) != boot_node(c->boot) && !algo_native_reaches(c, peer))
        return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "%s: rank %d: no send/recv path to rank %d on "
                       "another node (node %d, this is node %d): the native context does not "
                       "reach it (MSCCLRT_PORT_PROXY=0, more than %d ranks, or no native "
                       "context: MSCCLRT_NATIVE_SCRATCH_BYTES=0)", fn, c->rank, peer,
                       boot_node_of(c->boot, peer), boot_node(c->boot), MK_TAB_MAX);
    if (!exec_in_group()) {   /* a group of one */
        TRY(mscclrt_group_start());
        mscclrt_result res = p2p(c, buf, count, dt, peer, stream, recv, fn);
        mscclrt_result end = mscclrt_group_end();
        return res != MSCCLRT_SUCCESS ? res : end;
    }
    NativeLaunch *l = a->p2p_open;
    if (!l) {
        const mscclrt_algo *algo = builtin_for(c, MSCCLRT_COLL_SENDRECV);
        if (!algo)
            return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "%s: rank %d: no send/recv path (the native "
                           "context is off: MSCCLRT_NATIVE_SCRATCH_BYTES=0)", fn, c->rank);
        mscclrt_request q = req0(MSCCLRT_COLL_SENDRECV, buf, buf, dt, MSCCLRT_SUM, -1, stream);
        q.message_bytes = q.in_bytes = q.out_bytes = bytes;
        TRY(fill_request(c, &q, fn));
        order_streams(c, &q);
        if (!(l = malloc(sizeof *l))) return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
        mscclrt_result res = algo_native_prepare(c, algo, &q, p2p_blocks(c), P2P_THREADS, NULL, 0, l);
        if (res != MSCCLRT_SUCCESS) {
            free(l);
            return res;
        }
        l->args.np2p = 0;
        l->args.in_bytes = 0;
        algo_native_p2p_begin(c, l);
        TRY(exec_group_defer(c, algo_p2p_launch, l, &l->args.in_bytes));
        a->p2p_open = l;
    }
    if (l->stream != stream)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "%s: rank %d: the send/recv calls of one group "
                       "on one communicator must use one stream (%p, then %p)", fn, c->rank,
                       l->stream, stream);
    if (l->args.np2p >= MN_P2P_MAX)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "%s: rank %d: more than %d send/recv calls in "
                       "one group on one communicator", fn, c->rank, MN_P2P_MAX);
    l->args.in_bytes += bytes;   /* the group's volume, for simulation */
    MnP2p *o = &l->list.v[l->args.np2p++];
    o->ptr = (mk_u64)(uintptr_t)buf;
    o->bytes = bytes;
    o->peer = peer;
    o->recv = recv;
    if (recv) algo_native_p2p_recv(c, l, peer, buf, bytes);
    return MSCCLRT_SUCCESS;
}

/* the launch of a group's send/recv list (an ExecDeferredFn) */
static mscclrt_result algo_p2p_launch(void *arg, ExecDeferStage stage) {
    NativeLaunch *l = arg;
    if (l->comm->algo && l->comm->algo->p2p_open == l) l->comm->algo->p2p_open = NULL;
    if (l->args.np2p == 0) return MSCCLRT_SUCCESS;
    /* the group's grid and kernel (the 16-entry one loads on first use) before any launch of
     * the group: 4 ranks on 2 GPUs in one process hung in cuModuleLoadData behind another
     * rank's spinning send/recv kernel (test_gpu_coll 4, 2 x H200) */
    if (stage == EXEC_DEFER_PREPARE) algo_native_p2p_end(l->comm, l);
    return stage == EXEC_DEFER_RUN ? algo_native_launch(l) : MSCCLRT_SUCCESS;
}

mscclrt_result mscclrt_send(mscclrt_comm *c, const void *buf, size_t count, mscclrt_dtype dt,
                            int peer, void *stream) {
    return p2p(c, (void *)buf, count, dt, peer, stream, 0, "mscclrt_send");
}
mscclrt_result mscclrt_recv(mscclrt_comm *c, void *buf, size_t count, mscclrt_dtype dt,
                            int peer, void *stream) {
    return p2p(c, buf, count, dt, peer, stream, 1, "mscclrt_recv");
}

/* ---- direct runs, selection ------------------------------------------------------------------ */
mscclrt_result mscclrt_algo_run(mscclrt_comm *c, const mscclrt_algo *algo,
                                 const mscclrt_request *req, int blocks, int threads,
                                 const void *extra, size_t extra_bytes) {
    if (!algo_check(algo))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_algo_run: algo is NULL or freed");
    if (!req) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_algo_run: req is NULL");
    mscclrt_request q = *req;
    TRY(fill_request(c, &q, "mscclrt_algo_run"));
    const char *why = NULL;
    if (!algo_fits(algo, &q, &why))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_algo_run: rank %d: '%s' does not fit "
                       "this %s of %llu bytes: %s", c->rank, algo->desc.name,
                       mscclrt_coll_name(q.collective), (unsigned long long)q.message_bytes,
                       why ? why : "?");
    if (algo->kind == MSCCLRT_ALGO_PLAN && extra_bytes)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_algo_run: extra arguments are for native "
                       "algorithms; '%s' is plan-based", algo->desc.name);
    order_streams(c, &q);
    mscclrt_choice ch = {algo, blocks, threads};
    NativeLaunch l;
    return run_choice(c, &q, ch, extra, extra_bytes, &l);
}

mscclrt_result mscclrt_select(mscclrt_comm *c, const mscclrt_request *req, mscclrt_choice *choice) {
    if (!req || !choice) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_select: NULL argument");
    mscclrt_request q = *req;
    TRY(fill_request(c, &q, "mscclrt_select"));
    return algo_select(c, &q, choice);
}

/* ---- PreMulSum ---------------------------------------------------------------------------------- */
mscclrt_result mscclrt_redop_create_premulsum(mscclrt_comm *c, int *op, const void *scalar,
                                              mscclrt_dtype dt, mscclrt_scalar_residence res) {
    TRY(exec_comm_check(c, "mscclrt_redop_create_premulsum"));
    if (!op || !scalar)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_redop_create_premulsum: %s is NULL",
                       !op ? "op" : "scalar");
    const size_t es = mscclrt_dtype_size(dt);
    if (!es)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_redop_create_premulsum: dtype %d", (int)dt);
    if (res != MSCCLRT_SCALAR_DEVICE && res != MSCCLRT_SCALAR_HOST)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_redop_create_premulsum: residence %d is "
                       "neither device (0) nor host (1)", (int)res);
    AlgoComm *a = algo_comm(c);
    if (!a) return MSCCLRT_ERR_SYSTEM;
    int slot = 0;
    while (slot < a->npremul && a->premul[slot].live) slot++;
    if (slot == a->npremul) {
        if (a->npremul >= 1 << 20)
            return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "mscclrt_redop_create_premulsum: too many "
                           "live operators on rank %d", c->rank);
        AlgoPremul *v = realloc(a->premul, (size_t)(a->npremul + 1) * sizeof *v);
        if (!v) return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
        a->premul = v;
        memset(&v[a->npremul++], 0, sizeof *v);
    }
    AlgoPremul *p = &a->premul[slot];
    memset(p, 0, sizeof *p);
    if (res == MSCCLRT_SCALAR_HOST) {
        CuContext prev;
        TRY(exec_cuda_current(c, &prev));
        mscclrt_result r = cu_check(cu.cuMemAlloc(&p->owned, 16), "cuMemAlloc(PreMulSum scalar)");
        if (r == MSCCLRT_SUCCESS)
            r = cu_check(cu.cuMemcpyHtoD(p->owned, scalar, es), "cuMemcpyHtoD(PreMulSum scalar)");
        exec_cuda_restore(c, prev);
        if (r != MSCCLRT_SUCCESS) {
            if (p->owned) cu.cuMemFree(p->owned);
            p->owned = 0;
            return r;
        }
        p->scalar = p->owned;
    } else {
        p->scalar = (CuDevPtr)(uintptr_t)scalar;
    }
    p->dtype = dt;
    p->live = true;
    *op = MSCCLRT_REDOP_COUNT + slot;
    return MSCCLRT_SUCCESS;
}

mscclrt_result mscclrt_redop_destroy(mscclrt_comm *c, int op) {
    TRY(exec_comm_check(c, "mscclrt_redop_destroy"));
    AlgoComm *a = c->algo;
    const int slot = op - MSCCLRT_REDOP_COUNT;
    if (!a || slot < 0 || slot >= a->npremul || !a->premul[slot].live)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_redop_destroy: rank %d: %d is not a live "
                       "PreMulSum operator of this communicator", c->rank, op);
    AlgoPremul *p = &a->premul[slot];
    if (p->owned) {
        /* a collective still queued may read it: wait for the device first */
        CuContext prev;
        if (exec_cuda_current(c, &prev) == MSCCLRT_SUCCESS) {
            cu.cuCtxSynchronize();
            cu.cuMemFree(p->owned);
            exec_cuda_restore(c, prev);
        }
    }
    memset(p, 0, sizeof *p);
    return MSCCLRT_SUCCESS;
}

/* ---- windows ------------------------------------------------------------------------------------ */
mscclrt_result mscclrt_window_register(mscclrt_comm *c, void *buf, size_t bytes,
                                       mscclrt_window **win) {
    TRY(exec_comm_check(c, "mscclrt_window_register"));
    if (!buf || !win || bytes == 0)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_window_register: rank %d: %s", c->rank,
                       !buf ? "buf is NULL" : !win ? "win is NULL" : "0 bytes");
    AlgoComm *a = algo_comm(c);
    if (!a) return MSCCLRT_ERR_SYSTEM;
    CuContext prev;
    TRY(exec_cuda_current(c, &prev));
    CuDevPtr base = 0;
    size_t size = 0;
    CuResult r = cu.cuMemGetAddressRange(&base, &size, (CuDevPtr)(uintptr_t)buf);
    exec_cuda_restore(c, prev);
    if (r != CU_OK || (CuDevPtr)(uintptr_t)buf - base + bytes > size)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_window_register: rank %d: %p + %zu bytes "
                       "is not inside one device allocation of this communicator's device", c->rank,
                       buf, bytes);
    /* every rank registers its window in the same order: check the agreement on sizes where a
     * bootstrap links the ranks (a mismatch would make the zero-copy algorithms overrun) */
    if (c->boot) {
        uint64_t *sz = calloc((size_t)c->nranks, sizeof *sz);
        if (!sz) return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
        sz[c->rank] = bytes;
        mscclrt_result res = boot_allgather(c->boot, sz, sizeof *sz);
        int bad = -1;
        for (int q = 0; q < c->nranks && res == MSCCLRT_SUCCESS && bad < 0; q++)
            if (sz[q] != bytes) bad = q;
        uint64_t theirs = bad >= 0 ? sz[bad] : 0;
        free(sz);
        TRY(res);
        if (bad >= 0)
            return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "mscclrt_window_register: rank %d registers "
                           "%zu bytes but rank %d registers %llu: windows are registered "
                           "collectively, the same size on every rank", c->rank, bytes, bad,
                           (unsigned long long)theirs);
    }
    AlgoWindow *w = calloc(1, sizeof *w);
    if (!w) return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
    w->base = (CuDevPtr)(uintptr_t)buf;
    w->bytes = bytes;
    w->next = a->windows;
    a->windows = w;
    *win = (mscclrt_window *)w;
    return MSCCLRT_SUCCESS;
}

mscclrt_result mscclrt_window_deregister(mscclrt_comm *c, mscclrt_window *win) {
    TRY(exec_comm_check(c, "mscclrt_window_deregister"));
    AlgoComm *a = c->algo;
    for (AlgoWindow **pp = a ? &a->windows : NULL; pp && *pp; pp = &(*pp)->next)
        if (*pp == (AlgoWindow *)win) {
            AlgoWindow *w = *pp;
            *pp = w->next;
            /* contexts set up on this window's memory go too (every rank deregisters) */
            exec_drop_contexts(c, (const void *)(uintptr_t)w->base);
            free(w);
            return MSCCLRT_SUCCESS;
        }
    return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_window_deregister: rank %d: %p is not a "
                   "window of this communicator", c->rank, (void *)win);
}

void algo_coll_free(mscclrt_comm *c) {
    AlgoComm *a = c->algo;
    if (!a) return;
    for (int i = 0; i < a->npremul; i++)
        if (a->premul[i].owned) cu.cuMemFree(a->premul[i].owned);
    free(a->premul);
    a->premul = NULL;
    if (a->order_event) cu.cuEventDestroy((CuEvent)a->order_event);
    a->order_event = NULL;
    free(a->gens);
    a->gens = NULL;
    a->ngens = 0;
    a->npremul = 0;
    while (a->windows) {
        AlgoWindow *w = a->windows;
        a->windows = w->next;
        free(w);
    }
}

/* ---- mscclrt-perf's reference -------------------------------------------------------------- */
mscclrt_result algo_record_launches(mscclrt_comm *c, bool on) {
    TRY(exec_comm_check(c, "algo_record_launches"));
    AlgoComm *a = algo_comm(c);
    if (!a) return MSCCLRT_ERR_SYSTEM;
    a->record = on;
    a->last.fn = NULL;
    return MSCCLRT_SUCCESS;
}

mscclrt_result algo_last_launch(mscclrt_comm *c, AlgoBareLaunch *out) {
    TRY(exec_comm_check(c, "algo_last_launch"));
    memset(out, 0, sizeof *out);
    const AlgoComm *a = c->algo;
    if (a && a->last.fn) {   /* a native choice: its kernel and arguments */
        out->fn = a->last.fn;
        out->blocks = a->last.blocks;
        out->threads = a->last.threads;
        out->args = a->last.args;
        out->params[0] = &out->args;
        out->params[1] = &out->list;
        return MSCCLRT_SUCCESS;
    }
    CuFunction fn = NULL;
    TRY(exec_last_launch(c, &fn, &out->blocks, &out->threads, out->params));
    out->fn = fn;
    return MSCCLRT_SUCCESS;
}

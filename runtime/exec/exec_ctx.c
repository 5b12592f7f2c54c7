/*
 * exec_ctx.c - the context cache of a communicator: a context per (plan, send allocation,
 * recv allocation) holds scratch, the state block and the peer table. Keys, lookup, scratch
 * sizing (spec §3.5), allocation, the peer table, and the collective setup of a new context,
 * through the group's setup rounds (one process, exec_setup.c) or the bootstrap (exec_mp.c).
 */
#include "exec/exec_internal.h"
#include <stdio.h>
#include "core/err.h"
#include "core/log.h"
#include "core/clock.h"
#include "transport/transport.h"

#include <stdlib.h>
#include <string.h>

/* ---- contexts -------------------------------------------------------------------------------- */

mscclrt_result exec_buf_key(const mscclrt_comm *c, const void *send, const void *recv,
                              size_t in, size_t out, BufKey *k) {
    const void *ptr[2] = {send, recv};
    const size_t len[2] = {in, out};
    k->span = 0;
    static const char *const what[2] = {"sendbuf", "recvbuf"};
    for (int i = 0; i < 2; i++) {
        CuDevPtr b = 0;
        size_t n = 0;
        CuResult r = cu.cuMemGetAddressRange(&b, &n, (CuDevPtr)(uintptr_t)ptr[i]);
        if (r != CU_OK)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: %s %p is not device memory "
                           "(cuMemGetAddressRange: %d)", c->rank, what[i], ptr[i], r);
        /* peers map this allocation (one cuMem mapping, or one cuMemAlloc block) */
        if ((CuDevPtr)(uintptr_t)ptr[i] - b + len[i] > n)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: %s %p + %zu bytes runs past the end "
                           "of its allocation (%#llx, %zu bytes): a buffer must lie in one "
                           "allocation or cuMem mapping, the unit peers map", c->rank, what[i],
                           ptr[i], len[i], (unsigned long long)b, n);
        /* the key is the buffer itself, not its allocation: ranks may place their buffers at
         * different offsets of their allocations, so peers must learn each rank's own pointer
         * (an offset taken from this rank's call and added to a peer's allocation base
         * addressed the wrong bytes there) */
        const size_t room = n - (size_t)((CuDevPtr)(uintptr_t)ptr[i] - b);
        if (i == 0) {
            k->send = ptr[i];
            k->srange = room;
        } else {
            k->recv = ptr[i];
            k->rrange = room;
        }
    }
    return MSCCLRT_SUCCESS;
}

bool exec_plan_keys_buffers(const Plan *p) {
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        for (int b = 0; b < g->nremotes; b++)
            if (g->remotes[b].type != PLAN_BUF_SCRATCH) return true;
        for (int s = 0; s < g->nswitch; s++)
            if (g->switches[s].buf != PLAN_BUF_SCRATCH) return true;
    }
    return false;
}

ExecCtx *exec_ctx_find(mscclrt_comm *c, const Plan *p, const BufKey *k) {
    for (ExecCtx *x = c->ctxs; x; x = x->next)
        if (x->plan == p && (!x->keyed || (x->send == k->send && x->recv == k->recv &&
                                           x->send_range == k->srange && x->recv_range == k->rrange)))
            return x;
    return NULL;
}

void exec_ctx_free(ExecCtx *x) {
    if (!x) return;
    if (x->proxy) { /* its copies into peers and signals must be over before peers reuse memory */
        if (proxy_drain(x->proxy, 10) != MSCCLRT_SUCCESS)
            LOG_WARN("freeing a context: %s", mscclrt_last_error());
        proxy_unregister(x->proxy, x->tab + x->layout.tab_chan[1], x->layout.nchan[1]);
    }
    net_release(x->net, x);   /* drained: no trigger uses its windows any more */
    for (int i = 0; i < x->nimports; i++)
        if (xport_ipc_close(x->xport, x->imports[i]) != MSCCLRT_SUCCESS)
            LOG_WARN("freeing a context: %s", mscclrt_last_error());
    free(x->imports);
    nvls_ctx_free(x->nvls);   /* unbinds the multicast groups; frees a cuMem scratch */
    if (x->scratch && x->scratch_host) cu.cuMemFreeHost((void *)(uintptr_t)x->scratch);
    else if (x->scratch && !x->scratch_vmm) cu.cuMemFree(x->scratch);
    if (x->state) cu.cuMemFree(x->state);
    free(x);
}

void exec_ctx_unlink(mscclrt_comm *c, ExecCtx *x) {
    for (ExecCtx **pp = &c->ctxs; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            break;
        }
    if (c->hot.ctx == x) memset(&c->hot, 0, sizeof c->hot);
}

void exec_ctx_retire(mscclrt_comm *c, ExecCtx *x) {
    exec_ctx_unlink(c, x);
    x->next = c->retired;
    c->retired = x;
}

void exec_ctx_free_retired(mscclrt_comm *c) {
    while (c->retired) {
        ExecCtx *x = c->retired;
        c->retired = x->next;
        exec_ctx_free(x);
    }
}

/* Bytes of the allocation after ptr (the largest message that can start there). */
static mscclrt_result alloc_room(const void *ptr, const char *what, int rank, size_t *room) {
    CuDevPtr base = 0;
    size_t size = 0;
    CuResult r = cu.cuMemGetAddressRange(&base, &size, (CuDevPtr)(uintptr_t)ptr);
    if (r != CU_OK)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: %s %p is not device memory of this "
                       "group (cuMemGetAddressRange: %d)", rank, what, ptr, r);
    *room = size - (size_t)((CuDevPtr)(uintptr_t)ptr - base);
    return MSCCLRT_SUCCESS;
}

/* Scratch of one rank's context (spec §3.5, from the allocations capped by max_message_size;
 * reuse_resources plans get their own scratch too). */
uint64_t exec_scratch_bytes(const Plan *p, int rank, uint64_t in_room, uint64_t out_room) {
    const PlanGpu *g = &p->gpus[rank];
    if (g->scratch_chunks == 0) return 0;
    if (p->reuse_resources) return (uint64_t)1 << 26;   /* spec §3.5 PREDEFINED */
    uint64_t in = in_room < p->max_size ? in_room : p->max_size;
    uint64_t out = out_room < p->max_size ? out_room : p->max_size;
    uint64_t per = g->input_chunks ? (in + g->input_chunks - 1) / g->input_chunks
                                   : (out + g->output_chunks - 1) / (g->output_chunks ? g->output_chunks : 1);
    uint64_t a = p->alignment ? p->alignment : 16;
    per = (per + a - 1) / a * a;
    /* halves of a multiple of 256 bytes: exact, and the second one starts aligned (rounding
     * the doubled size instead once left a half of 0 and silently stopped double buffering) */
    return plan_scratch_bytes(p, rank, per, 256);
}

mscclrt_result exec_scratch_size(const Plan *p, int rank, bool keyed, const void *send,
                                 const void *recv, uint64_t span, size_t *bytes) {
    *bytes = 0;
    if (p->gpus[rank].scratch_chunks == 0) return MSCCLRT_SUCCESS;
    if (!keyed) {
        if (!span) span = EXEC_UNKEYED_SCRATCH_SPAN;
        *bytes = (size_t)exec_scratch_bytes(p, rank, span, span);
        return MSCCLRT_SUCCESS;
    }
    size_t in_room = 0, out_room = 0;
    TRY(alloc_room(send, "sendbuf", rank, &in_room));
    TRY(alloc_room(recv, "recvbuf", rank, &out_room));
    *bytes = (size_t)exec_scratch_bytes(p, rank, in_room, out_room);
    return MSCCLRT_SUCCESS;
}

/* plan_geom's scratch need of rank q for in / out bytes (0 if the sizes do not fit the plan:
 * the call fails later with the geometry's message) */
static uint64_t rank_need(const Plan *p, int q, uint64_t in, uint64_t out) {
    PlanGeom g;
    PlanErr err;
    return plan_geom(p, q, in, out, &g, &err) ? g.scratch_bytes : 0;
}

/* Every rank's need from plan_geom, against what exec_scratch_bytes gives for a span. Doubling
 * keeps the number of re-setups logarithmic in the largest message (nccl-tests' sweep grows
 * by 2 or 4 per step), and the old contexts retired meanwhile add up to less than the new. */
uint64_t exec_scratch_grow_span(const Plan *p, uint64_t in, uint64_t out, uint64_t span,
                                uint64_t have) {
    if (p->reuse_resources) return 0;   /* fixed scratch (spec §3.5): exec_size_get refuses */
    bool short_somewhere = false;
    for (int q = 0; q < p->ngpus && !short_somewhere; q++) short_somewhere = rank_need(p, q, in, out) > have;
    if (!short_somewhere) return 0;
    const uint64_t top = (uint64_t)1 << 62, big = in > out ? in : out;
    uint64_t s = span ? span : EXEC_UNKEYED_SCRATCH_SPAN;
    s = s < top ? s * 2 : s;
    while (s < big && s < top) s *= 2;
    for (;; s *= 2) {
        bool fits = true;
        for (int q = 0; q < p->ngpus && fits; q++)
            fits = exec_scratch_bytes(p, q, s, s) >= rank_need(p, q, in, out);
        if (fits || s >= top) return s;
    }
}

bool exec_scratch_host(const Plan *p, uint64_t scratch_bytes, bool net_stages, int nremote,
                       int nranks, uint64_t most) {
    return scratch_bytes > 0 && scratch_bytes <= most && net_stages && nremote == nranks - 1 &&
           !p->scratch_device && !nvls_plan_uses(p);
}

CuDevPtr exec_host_mapped_alloc(size_t bytes, char *why, size_t why_len) {
    void *h = NULL;
    CuDevPtr d = 0;
    CuResult r = cu.cuMemHostAlloc(&h, bytes, CU_HOSTALLOC_PORTABLE | CU_HOSTALLOC_DEVICEMAP);
    if (r == CU_OK) r = cu.cuMemHostGetDevicePointer(&d, h, 0);
    if (r == CU_OK && d == (CuDevPtr)(uintptr_t)h) {
        memset(h, 0, bytes);
        return d;
    }
    if (r != CU_OK) snprintf(why, why_len, "not available (CUDA error %d)", (int)r);
    else snprintf(why, why_len, "its device address differs from its host address");
    if (h) cu.cuMemFreeHost(h);
    return 0;
}

/* The scratch in pinned host memory the GPU maps (x->scratch_host, chosen by exec_mp.c); where
 * it cannot be had, device memory after all. */
static mscclrt_result scratch_host_alloc(mscclrt_comm *c, ExecCtx *x) {
    char why[96];
    x->scratch = exec_host_mapped_alloc(x->scratch_bytes, why, sizeof why);
    if (x->scratch) return MSCCLRT_SUCCESS;
    LOG_INFO(LOG_SUB_EXEC, "rank %d: plan '%s': scratch in device memory (pinned host memory: %s)",
             c->rank, PLAN_ESC(x->plan->name), why);
    x->scratch_host = false;
    TRY(cu_check(cu.cuMemAlloc(&x->scratch, x->scratch_bytes), "cuMemAlloc(scratch)"));
    return cu_check(cu.cuMemsetD8(x->scratch, 0, x->scratch_bytes), "cuMemsetD8(scratch)");
}

/* Allocations of rank r's context; the device's context is current. */
mscclrt_result exec_ctx_alloc(mscclrt_comm *c, ExecCtx *x) {
    const Plan *p = x->plan;
    TRY(cg_layout(p, c->rank, &x->layout));
    /* switch channels anywhere in the plan: every rank takes part in the multicast setup, so
     * every rank passes the NVLS gate (the refusal when MSCCLRT_ENABLE_NVLS is not 1) */
    const bool nvls = nvls_plan_uses(p);
    if (nvls) TRY(nvls_check_enabled(p, c->rank, c->dev));
    /* x->scratch_bytes: set by the caller (the same on every rank, so that the double-buffer
     * half, which a rank also applies to its peers' scratch, is the same everywhere) */
    x->scratch_half = p->double_scratch ? x->scratch_bytes / 2 : 0; /* 256-aligned halves */
    if (x->scratch_bytes && nvls && nvls_plan_binds(p, c->rank, PLAN_BUF_SCRATCH)) {
        /* multicast binds cuMem memory only; in one process every device of the group reaches
         * the scratch as a peer, which cuMem memory allows only through cuMemSetAccess */
        int acc[1024], nacc = 0;   /* a clique has at most 1024 ranks */
        for (int i = 0; c->clique && i < c->clique->nranks && nacc < 1024; i++)
            if (c->clique->comms[i]) acc[nacc++] = c->clique->comms[i]->device;
        TRY(nvls_scratch_alloc(&x->nvls, p, c->rank, c->device, x->scratch_bytes, acc, nacc,
                               &x->scratch));
        x->scratch_vmm = true;
        TRY(cu_check(cu.cuMemsetD8(x->scratch, 0, x->scratch_bytes), "cuMemsetD8(scratch)"));
    } else if (x->scratch_bytes && x->scratch_host) {
        TRY(scratch_host_alloc(c, x));
    } else if (x->scratch_bytes) {
        TRY(cu_check(cu.cuMemAlloc(&x->scratch, x->scratch_bytes), "cuMemAlloc(scratch)"));
        TRY(cu_check(cu.cuMemsetD8(x->scratch, 0, x->scratch_bytes), "cuMemsetD8(scratch)"));
    }
    TRY(cu_check(cu.cuMemAlloc(&x->state, x->layout.state_bytes), "cuMemAlloc(state)"));
    TRY(cu_check(cu.cuMemsetD8(x->state, 0, x->layout.state_bytes), "cuMemsetD8(state)"));
    const PlanGpu *g = &p->gpus[c->rank];
    if (g->nsems > 0)
        TRY(cu_check(cu.cuMemcpyHtoD(x->state + x->layout.off_sem, g->sem_init,
                                     (size_t)g->nsems * sizeof(int)), "cuMemcpyHtoD(semaphores)"));
    LOG_INFO(LOG_SUB_EXEC, "rank %d: context for plan '%s' (allocations %p, %p): scratch %zu bytes",
             c->rank, PLAN_ESC(p->name), x->send, x->recv, x->scratch_bytes);
    return MSCCLRT_SUCCESS;
}

void exec_fill_table(ExecCtx *x, int r, const mk_u64 *sendb, const mk_u64 *recvb,
                     const mk_u64 *scratch, const mk_u64 *state) {
    const Plan *p = x->plan;
    const PlanGpu *g = &p->gpus[r];
    const CgLayout *l = &x->layout;
    memset(x->tab, 0, sizeof x->tab);
    for (int t = 0; t < 2; t++) {
        int k = 0;
        for (int b = 0; b < g->nremotes; b++) {
            if (!g->remotes[b].access[t]) continue;
            int o = g->remotes[b].rank;
            x->tab[l->tab_remote[t] + k++] = g->remotes[b].type == PLAN_BUF_INPUT ? sendb[o]
                                           : g->remotes[b].type == PLAN_BUF_OUTPUT ? recvb[o]
                                           : scratch[o];
        }
        for (int ch = 0; ch < g->npeers[t]; ch++) {
            int peer = g->peers[t][ch], occ = 0;
            for (int j = 0; j < ch; j++) occ += g->peers[t][j] == peer;
            int slot = cg_inbound_slot(p, peer, t, r, occ);
            CgLayout pl;
            if (cg_layout(p, peer, &pl) != MSCCLRT_SUCCESS || slot < 0) continue;
            x->tab[l->tab_chan[t] + ch] = state[peer] + pl.off_inbound + (mk_u64)slot * 8;
        }
    }
}

/* A new placeholder context, linked into the comm (ready once its round is done). */
mscclrt_result exec_ctx_placeholder(mscclrt_comm *c, const Plan *p, const BufKey *k,
                                      ExecCtx **out) {
    ExecCtx *x = calloc(1, sizeof *x);
    if (!x) return rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory for a context", c->rank);
    x->plan = p;
    x->keyed = exec_plan_keys_buffers(p);
    x->span = x->keyed ? 0 : k->span ? k->span : EXEC_UNKEYED_SCRATCH_SPAN;
    if (x->keyed) {
        x->send = k->send;
        x->recv = k->recv;
        x->send_range = k->srange;
        x->recv_range = k->rrange;
    }
    x->next = c->ctxs;
    c->ctxs = x;
    *out = x;
    return MSCCLRT_SUCCESS;
}

/* Port channels through the proxy: start the comm's proxy on first need, register the peers'
 * counters this context signals, and give the kernel table the FIFO's address. */
static mscclrt_result ctx_attach_proxy(mscclrt_comm *c, ExecCtx *x) {
    if (!x->layout.uses_proxy) return MSCCLRT_SUCCESS;
    {
        char what[200];
        snprintf(what, sizeof what, "plan '%s'", PLAN_ESC(x->plan->name));
        TRY(exec_share_check_proxy(c, what));
    }
    if (!c->proxy) {
        CuContext prev;
        TRY(exec_cuda_current(c, &prev));
        mscclrt_result r = proxy_create(&c->proxy, c->ctx, c->rank);
        exec_cuda_restore(c, prev);
        TRY(r);
    }
    if (c->net) TRY(proxy_route_net(c->proxy, c->net));   /* ranks on other nodes */
    TRY(proxy_register(c->proxy, x->tab + x->layout.tab_chan[1], x->layout.nchan[1]));
    x->proxy = c->proxy;
    x->tab[x->layout.tab_proxy] = proxy_fifo_addr(c->proxy);
    return MSCCLRT_SUCCESS;
}

/* The end of a context's collective setup (res: its outcome), whichever way it ran: the port
 * proxy, then ready; on failure the placeholder is unlinked and freed. */
mscclrt_result exec_ctx_finish(mscclrt_comm *c, ExecCtx *x, mscclrt_result res) {
    if (res == MSCCLRT_SUCCESS) res = ctx_attach_proxy(c, x);
    if (res != MSCCLRT_SUCCESS) {
        exec_ctx_unlink(c, x);
        exec_ctx_free(x);
        return res;
    }
    x->ready = true;
    return MSCCLRT_SUCCESS;
}

mscclrt_result exec_ctx_setup(mscclrt_comm *c, const Plan *p, const BufKey *k,
                                void *stream, ExecCtx **out) {
    const void *send = k->send, *recv = k->recv;
    int st = CU_CAPTURE_STATUS_NONE;
    if (cu.cuStreamIsCapturing((CuStream)stream, &st) == CU_OK && st != CU_CAPTURE_STATUS_NONE)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "rank %d: the first call of plan '%s' for "
                       "sendbuf %p / recvbuf %p sets up memory and cannot be captured into a CUDA "
                       "graph; make one call before capturing", c->rank, PLAN_ESC(p->name), send, recv);
    ExecCtx *x = NULL;
    const double t0 = rt_now_s();
    TRY(exec_ctx_placeholder(c, p, k, &x));
    mscclrt_result res;
    if (c->boot) { /* one process per rank: collective through the bootstrap */
        res = exec_mp_setup(c, x);
    } else {
        SetupRound *rd = exec_round_deposit(c, p, x);
        if (!rd) {
            exec_ctx_unlink(c, x);
            free(x);
            return rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory for a setup round", c->rank);
        }
        res = exec_round_wait(c, rd);
    }
    TRY(exec_ctx_finish(c, x, res));
    *out = x;
    LOG_INFO(LOG_SUB_EXEC, "rank %d: context of plan '%s' set up in %.2f ms", c->rank, PLAN_ESC(p->name),
             (rt_now_s() - t0) * 1e3);
    return MSCCLRT_SUCCESS;
}

/* Frees (after one device synchronisation) every context of c for which drop(x, key) holds. */
static void drop_where(mscclrt_comm *c, bool (*drop)(const ExecCtx *x, const void *key),
                       const void *key) {
    bool synced = false;
    for (ExecCtx **pp = &c->ctxs; *pp;) {
        ExecCtx *x = *pp;
        if (!drop(x, key)) {
            pp = &x->next;
            continue;
        }
        if (!synced) {
            CuContext prev;
            if (exec_cuda_current(c, &prev) == MSCCLRT_SUCCESS) {
                cu.cuCtxSynchronize();
                exec_cuda_restore(c, prev);
            }
            synced = true;
            exec_ctx_free_retired(c);
        }
        *pp = x->next;
        if (c->hot.ctx == x) memset(&c->hot, 0, sizeof c->hot);
        exec_ctx_free(x);
    }
}

/* [lo, hi): the allocation whose contexts go */
typedef struct { uintptr_t lo, hi; } AllocSpan;
static bool in_alloc(const ExecCtx *x, const void *key) {
    const AllocSpan *a = key;
    const uintptr_t s = (uintptr_t)x->send, r = (uintptr_t)x->recv;
    return x->keyed && ((s >= a->lo && s < a->hi) || (r >= a->lo && r < a->hi));
}
static bool runs_plan(const ExecCtx *x, const void *p) { return x->plan == p; }

void exec_drop_contexts(mscclrt_comm *c, const void *ptr) {
    /* every context of a buffer in ptr's allocation (contexts are keyed by the buffers) */
    AllocSpan a = {(uintptr_t)ptr, (uintptr_t)ptr + 1};
    CuContext prev;
    if (exec_cuda_current(c, &prev) == MSCCLRT_SUCCESS) {
        CuDevPtr b = 0;
        size_t n = 0;
        if (cu.cuMemGetAddressRange(&b, &n, (CuDevPtr)(uintptr_t)ptr) == CU_OK)
            a = (AllocSpan){(uintptr_t)b, (uintptr_t)b + n};
        exec_cuda_restore(c, prev);
    }
    drop_where(c, in_alloc, &a);
}
void exec_drop_plan_contexts(mscclrt_comm *c, const Plan *p) { drop_where(c, runs_plan, p); }


/* ---- for the layers above -------------------------------------------------------------------- */
mscclrt_result exec_setup_contexts(mscclrt_comm **cs, int n, const Plan *p, ExecCtx **out) {
    if (n < 1) return rt_fail(MSCCLRT_ERR_INTERNAL, "exec_setup_contexts: %d communicators", n);
    for (int i = 0; i < n; i++) out[i] = NULL;
    BufKey none;
    memset(&none, 0, sizeof none);
    if (n == 1 && cs[0]->boot) {        /* one process (or thread) per rank: the bootstrap */
        CuContext prev;
        TRY(exec_cuda_current(cs[0], &prev));
        mscclrt_result res = exec_ctx_setup(cs[0], p, &none, NULL, &out[0]);
        exec_cuda_restore(cs[0], prev);
        return res;
    }
    /* one process: every rank deposits its round, then all wait (the last one sets up all) */
    SetupRound **rds = calloc((size_t)n, sizeof *rds);
    if (!rds) return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory for %d setup rounds", n);
    mscclrt_result res = MSCCLRT_SUCCESS;
    for (int i = 0; i < n && res == MSCCLRT_SUCCESS; i++) {
        res = exec_ctx_placeholder(cs[i], p, &none, &out[i]);
        if (res == MSCCLRT_SUCCESS && !(rds[i] = exec_round_deposit(cs[i], p, out[i])))
            res = rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory for a setup round");
    }
    for (int i = 0; i < n; i++) {
        if (!rds[i]) continue;
        mscclrt_result r = exec_ctx_finish(cs[i], out[i], exec_round_wait(cs[i], rds[i]));
        if (r != MSCCLRT_SUCCESS) out[i] = NULL;   /* unlinked and freed */
        if (res == MSCCLRT_SUCCESS) res = r;
    }
    free(rds);
    if (res != MSCCLRT_SUCCESS)
        for (int i = 0; i < n; i++) {
            if (out[i]) exec_context_release(cs[i], out[i]);
            out[i] = NULL;
        }
    return res;
}

void exec_context_release(mscclrt_comm *c, ExecCtx *x) {
    exec_ctx_unlink(c, x);
    exec_ctx_free(x);
}

/* A keyed context of p on the allocations of k's buffers, whatever their offsets there: a
 * buffer's room (exec_buf_key) runs to its allocation's end, so two buffers share an allocation
 * exactly when pointer + room agree (allocations do not overlap). */
static bool keyed_in_allocs(const mscclrt_comm *c, const Plan *p, const BufKey *k) {
    const uintptr_t send_end = (uintptr_t)k->send + k->srange, recv_end = (uintptr_t)k->recv + k->rrange;
    for (const ExecCtx *x = c->ctxs; x; x = x->next)
        if (x->plan == p && x->keyed && (uintptr_t)x->send + x->send_range == send_end &&
            (uintptr_t)x->recv + x->recv_range == recv_end)
            return true;
    return false;
}

bool exec_plan_ready(mscclrt_comm *c, const Plan *p, const void *send, const void *recv,
                     size_t in, size_t out, bool *same_allocs) {
    if (same_allocs) *same_allocs = false;
    /* the previous call of this comm, repeated: its context is in hand (no driver query) */
    if (exec_hot_buffers(c, p, send, recv, in, out) && c->hot.ctx && c->hot.ctx->ready) return true;
    BufKey k;
    CuContext prev;
    if (exec_cuda_current(c, &prev) != MSCCLRT_SUCCESS) return false;
    bool ok = exec_buf_key(c, send, recv, in, out, &k) == MSCCLRT_SUCCESS;
    exec_cuda_restore(c, prev);
    const ExecCtx *x = ok ? exec_ctx_find(c, p, &k) : NULL;
    /* a context too small for this call would grow, which is a setup too */
    if (x && x->ready && (x->keyed || !exec_scratch_grow_span(p, in, out, x->span, x->scratch_bytes)))
        return true;
    if (ok && same_allocs) *same_allocs = keyed_in_allocs(c, p, &k);
    return false;
}

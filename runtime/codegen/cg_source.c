/*
 * cg_source.c - generates the CUDA source of one rank of a plan: a `switch (blockIdx.x)` whose
 * cases are the thread blocks' op lists unrolled into calls of the device library, with every
 * buffer, channel, semaphore and chunk index a constant. Sizes derive from the run-time chunk
 * size (MkArgs.chunk), so one kernel serves every message size of the plan.
 * Semantics are the plan format's intended ones (spec §5; §9 quirks fixed: every reduce applies
 * the call's operator, get is not swapped, each put source uses its own buffer, remote buffers
 * sit at the same offset inside every rank's allocation as in MSCCL++ (contexts are cached per
 * allocation), all scratch accesses follow the double-buffer half).
 */
#include "codegen/codegen.h"
#include "dtype/dtype.h"
#include "core/err.h"
#include "core/param.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
} Sb;

static void sb_printf(Sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(Sb *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) { b->oom = true; return; }
        if ((size_t)n < room && b->s) { b->len += (size_t)n; return; }
        size_t cap = b->cap ? b->cap * 2 : 8192;
        while (cap < b->len + (size_t)n + 1) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) { b->oom = true; return; }
        b->s = s;
        b->cap = cap;
    }
}

/* ---- layout ------------------------------------------------------------------------------- */
static int count_peer(const PlanGpu *g, int t, int peer) {
    int n = 0;
    for (int i = 0; i < g->npeers[t]; i++) n += g->peers[t][i] == peer;
    return n;
}

int cg_chan_counter(const CgLayout *l, int t, int c) { return t == 0 ? c : l->nchan[0] + c; }

int cg_inbound_slot(const Plan *p, int owner, int t, int from, int k) {
    const PlanGpu *o = &p->gpus[owner], *f = &p->gpus[from];
    if (k >= count_peer(f, t, owner)) return -1;
    /* the owner's own k-th channel to `from`, if it has one */
    int seen = 0;
    for (int c = 0; c < o->npeers[t]; c++)
        if (o->peers[t][c] == from && seen++ == k) return t == 0 ? c : o->npeers[0] + c;
    /* a filler: after all declared channels, memory fillers then port fillers, by peer */
    int slot = o->npeers[0] + o->npeers[1];
    for (int tt = 0; tt < 2; tt++)
        for (int q = 0; q < p->ngpus; q++) {
            int have = count_peer(o, tt, q), want = count_peer(&p->gpus[q], tt, owner);
            int extra = want > have ? want - have : 0;
            if (tt == t && q == from) return slot + (k - have);
            slot += extra;
        }
    return -1;
}

static bool op_is_reduce(const PlanOp *op) { return (plan_op_flags(op->kind) & OPF_REDUCE) != 0; }

mscclrt_result cg_layout(const Plan *p, int rank, CgLayout *l) {
    memset(l, 0, sizeof *l);
    if (rank < 0 || rank >= p->ngpus)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "plan '%s': rank %d out of range [0, %d)",
                       PLAN_ESC(p->name), rank, p->ngpus);
    const PlanGpu *g = &p->gpus[rank];
    l->ntb = g->ntbs;
    l->threads = p->threads;
    for (int b = 0; b < g->nremotes; b++)
        for (int t = 0; t < 2; t++) l->nremote[t] += g->remotes[b].access[t];
    l->nchan[0] = g->npeers[0];
    l->nchan[1] = g->npeers[1];
    l->nswitch = g->nswitch;
    l->tab_remote[0] = 0;
    l->tab_remote[1] = l->nremote[0];
    l->tab_chan[0] = l->tab_remote[1] + l->nremote[1];
    l->tab_chan[1] = l->tab_chan[0] + l->nchan[0];
    l->tab_switch = l->tab_chan[1] + l->nchan[1];
    l->ntab = l->tab_switch + l->nswitch;
    /* port channels through the host proxy (the default) need the FIFO descriptor */
    long long port_proxy;
    TRY(param_int(PARAM_PORT_PROXY, &port_proxy));
    l->uses_proxy = (l->nchan[1] > 0 || l->nremote[1] > 0) && port_proxy != 0;
    l->tab_proxy = l->uses_proxy ? l->ntab++ : -1;
    if (l->ntab > MK_TAB_MAX)
        return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s': rank %d needs %d remote/channel table "
                       "entries, more than the %d a kernel parameter holds", PLAN_ESC(p->name),
                       rank, l->ntab, MK_TAB_MAX);
    if (l->ntab == 0) l->ntab = 1;
    l->nslots = l->nchan[0] + l->nchan[1];
    for (int t = 0; t < 2; t++)
        for (int q = 0; q < p->ngpus; q++) {
            int have = count_peer(g, t, q), want = count_peer(&p->gpus[q], t, rank);
            if (want > have) l->nslots += want - have;
        }
    size_t off = 0;
    l->off_flags = off;
    off += ((size_t)l->ntb * 4 + 7) / 8 * 8;
    l->off_inbound = off;
    off += (size_t)(l->nslots ? l->nslots : 1) * 8;
    l->off_expected = off;
    off += (size_t)(l->nchan[0] + l->nchan[1] + 1) * 8;
    l->off_sem = off;
    off += ((size_t)(g->nsems + 1) * 4 + 7) / 8 * 8;
    l->off_bar = off;
    off += sizeof(MkBarrier) * MK_NBARRIERS;
    l->state_bytes = off;
    for (int r = 0; r < p->ngpus; r++)
        for (int t = 0; t < p->gpus[r].ntbs; t++)
            for (int o = 0; o < p->gpus[r].tbs[t].nops; o++) {
                const PlanOp *op = &p->gpus[r].tbs[t].ops[o];
                if (op_is_reduce(op)) l->has_reduce = true;
                for (int i = 0; op->kind == PLAN_OP_PIPELINE && i < op->ninner; i++)
                    if (op_is_reduce(&op->inner[i])) l->has_reduce = true;
                if (r != rank) continue;
                int fl = plan_op_flags(op->kind);
                for (int i = 0; op->kind == PLAN_OP_PIPELINE && i < op->ninner; i++)
                    fl |= plan_op_flags(op->inner[i].kind);
                if (fl & OPF_PACKET) l->has_packets = true;
                if (fl & OPF_SWITCH) l->has_switch = true;
            }
    l->uses_flag = l->has_packets || p->double_scratch;
    return MSCCLRT_SUCCESS;
}

/* ---- generation ---------------------------------------------------------------------------- */
typedef struct {
    const Plan *p;
    int rank;
    const PlanGpu *g;
    const CgLayout *l;
    const char *T;           /* element type */
    int op;                  /* mscclrt_redop */
    int P;                   /* packet bytes: 16 or 8 */
    int payload;             /* data bytes per packet */
    size_t esize;            /* element size */
    Sb *b;
    int tb, opi;             /* position for messages */
    bool in_pipe;
    int var;                 /* fresh variable counter */
} Gen;

const char *cg_ctype(mscclrt_dtype t) {
    switch (t) {
    case MSCCLRT_INT8: return "signed char";
    case MSCCLRT_UINT8: return "mk::u8";
    case MSCCLRT_INT32: return "int";
    case MSCCLRT_UINT32: return "mk::u32";
    case MSCCLRT_INT64: return "long long";
    case MSCCLRT_UINT64: return "mk::u64";
    case MSCCLRT_FLOAT16: return "mk::f16";
    case MSCCLRT_FLOAT32: return "float";
    case MSCCLRT_FLOAT64: return "double";
    case MSCCLRT_BFLOAT16: return "mk::bf16";
    case MSCCLRT_FP8_E4M3: return "mk::e4m3";
    case MSCCLRT_FP8_E5M2: return "mk::e5m2";
    default: return NULL;
    }
}
static size_t csize(mscclrt_dtype t) {
    static const size_t s[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return (unsigned)t < MSCCLRT_DTYPE_COUNT ? s[t] : 0;
}

static mscclrt_result gfail(Gen *G, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static mscclrt_result gfail(Gen *G, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s': gpus[%d].threadblocks[%d].ops[%d] (%s): %s",
                   PLAN_ESC(G->p->name), G->rank, G->tb, G->opi,
                   plan_op_name(G->g->tbs[G->tb].ops[G->opi].kind), msg);
}

/* Declares the byte offset and size variables of one entry; returns the variable number.
 * Offsets follow spec §3.3-3.4 (chunk math, tbg slices) plus the pipeline offset `po`. */
static int entry_vars(Gen *G, const PlanOp *op, const PlanRef *r) {
    int v = G->var++;
    sb_printf(G->b, "    mk::u64 o%d = C * %uull, z%d = C * %uull;\n", v, r->index, v, r->size);
    if (op->tbg_size > 0)
        sb_printf(G->b, "    { const mk::u64 lo = mk::split(z%d, %d, %d, A), hi = mk::split(z%d, %d, %d, A);"
                  " o%d += lo; z%d = hi - lo; }\n", v, op->tbg_id, op->tbg_size, v,
                  op->tbg_id + 1, op->tbg_size, v, v);
    if (G->in_pipe)
        sb_printf(G->b, "    o%d += po; z%d = z%d > po ? (z%d - po < U ? z%d - po : U) : 0;\n", v, v,
                  v, v, v);
    return v;
}

/* Base pointer expression of an entry (data space), into buf. */
static mscclrt_result entry_base(Gen *G, const PlanOp *op, const PlanRef *r, char *buf,
                                 size_t n, PlanBuf *type) {
    if (r->kind == PLAN_REF_LOCAL) {
        *type = r->type;
        snprintf(buf, n, "B%d", (int)r->type);
        return MSCCLRT_SUCCESS;
    }
    const PlanTb *tb = &G->g->tbs[G->tb];
    if (r->kind == PLAN_REF_REMOTE) {
        int t = op->chan_type == PLAN_CHAN_PORT ? 1 : 0;
        if (op->chan_type != PLAN_CHAN_MEMORY && op->chan_type != PLAN_CHAN_PORT)
            return gfail(G, "remote entry needs channel_type memory or port");
        if (r->id < 0 || r->id >= tb->nremote[t])
            return gfail(G, "buffer_id %d out of range [0, %d)", r->id, tb->nremote[t]);
        int gid = tb->remote[t][r->id];
        int per = 0;
        for (int i = 0; i < gid; i++) per += G->g->remotes[i].access[t];
        *type = G->g->remotes[gid].type;
        /* peers' i/o are allocation bases: add this call's offset into the allocation (the
         * symmetric layout of spec §3.4: every rank's buffer sits at the same offset) */
        snprintf(buf, n, "((char *)t.v[%d] + %s)", G->l->tab_remote[t] + per,
                 *type == PLAN_BUF_SCRATCH ? "soff" : *type == PLAN_BUF_INPUT ? "a.in_off" : "a.out_off");
        return MSCCLRT_SUCCESS;
    }
    if (r->id < 0 || r->id >= tb->nchan[PLAN_CHAN_SWITCH])
        return gfail(G, "switch_channel_id %d out of range [0, %d)", r->id,
                     tb->nchan[PLAN_CHAN_SWITCH]);
    int sw = tb->chan[PLAN_CHAN_SWITCH][r->id];
    *type = G->g->switches[sw].buf;
    /* like peer buffers: the multicast mapping starts at the allocation's base, so i/o
     * entries add the call's offset inside it (spec §3.4) */
    snprintf(buf, n, "((char *)t.v[%d] + %s)", G->l->tab_switch + sw,
             *type == PLAN_BUF_SCRATCH ? "soff" : *type == PLAN_BUF_INPUT ? "a.in_off" : "a.out_off");
    return MSCCLRT_SUCCESS;
}

typedef struct { char e[160]; int v; PlanBuf type; } Ent;

static mscclrt_result ent(Gen *G, const PlanOp *op, const PlanRef *r, bool packet, Ent *out) {
    char base[96];
    TRY(entry_base(G, op, r, base, sizeof base, &out->type));
    out->v = entry_vars(G, op, r);
    snprintf(out->e, sizeof out->e, "(%s + %so%d)", base, packet ? "2 * " : "", out->v);
    return MSCCLRT_SUCCESS;
}

static void emit_list(Gen *G, const char *ctype_, const char *name, Ent *e, int n) {
    sb_printf(G->b, "    %s const %s[%d] = {", ctype_, name, n ? n : 1);
    for (int i = 0; i < n; i++) sb_printf(G->b, "%s%s", i ? ", " : "", e[i].e);
    if (!n) sb_printf(G->b, "0");
    sb_printf(G->b, "};\n");
}

static mscclrt_result chan_check(Gen *G, const PlanOp *op, int t, int j, int *gc) {
    const PlanTb *tb = &G->g->tbs[G->tb];
    int id = op->chan_ids[j];
    if (id < 0 || id >= tb->nchan[t])
        return gfail(G, "channel_ids[%d] = %d out of range [0, %d)", j, id, tb->nchan[t]);
    *gc = tb->chan[t][id];
    return MSCCLRT_SUCCESS;
}

/* Whether pairs a and b of a fused put/ppkt read the same local source entry (and move as
 * many chunks as they read). */
static bool same_source(const PlanOp *op, int a, int b) {
    const PlanRef *x = &op->src[a], *y = &op->src[b];
    return x->kind == PLAN_REF_LOCAL && y->kind == PLAN_REF_LOCAL && x->type == y->type &&
           x->index == y->index && x->size == y->size && op->dst[a].size == x->size &&
           op->dst[b].size == y->size;
}

/* Fusion inside an op: the pairs of a fused put or ppkt that read the same source become one
 * loop that reads it once and stores to all their destinations (allpair_packet at N=8 reads
 * its input once instead of 7 times). Pairs are independent copies, so grouping is free to
 * reorder them. A pair on its own is emitted exactly as before. */
static void emit_fanout(Gen *G, const PlanOp *op, const Ent *s, const Ent *d, bool packets) {
    bool taken[PLAN_MAX_OP_ENTRIES] = {false};
    for (int m = 0; m < op->nsrc; m++) {
        if (taken[m]) continue;
        Ent grp[PLAN_MAX_OP_ENTRIES];
        int n = 0;
        for (int q = m; q < op->nsrc; q++)
            if (!taken[q] && (q == m || same_source(op, m, q))) {
                grp[n++] = d[q];
                taken[q] = true;
            }
        if (packets) {
            sb_printf(G->b, "    { char *const D[%d] = {", n);
            for (int k = 0; k < n; k++) sb_printf(G->b, "%s%s", k ? ", " : "", grp[k].e);
            sb_printf(G->b, "}; mk::to_packets<%d, %d>(D, %s, z%d, flag); }\n", G->P, n, s[m].e,
                      s[m].v);
        } else if (n == 1) {
            sb_printf(G->b, "    mk::copy(%s, %s, z%d);\n", d[m].e, s[m].e, d[m].v);
        } else {
            sb_printf(G->b, "    {\n");
            emit_list(G, "char *", "D", grp, n);
            sb_printf(G->b, "    mk::copy_multi<%d>(D, %s, z%d);\n    }\n", n, s[m].e, d[m].v);
        }
    }
}

static mscclrt_result gen_op(Gen *G, const PlanOp *op);

static mscclrt_result gen_sync(Gen *G, const PlanOp *op) {
    Sb *b = G->b;
    int t = op->chan_type == PLAN_CHAN_PORT ? 1 : 0;
    switch (op->kind) {
    case PLAN_OP_NOP:
        sb_printf(b, "    __syncthreads();\n");
        return MSCCLRT_SUCCESS;
    case PLAN_OP_BARRIER:
        if (op->barrier_id < 0 || op->barrier_id >= PLAN_MAX_BARRIERS)
            return gfail(G, "barrier_id %d out of range [0, %d)", op->barrier_id, PLAN_MAX_BARRIERS);
        sb_printf(b, "    mk::barrier(&bar[%d], %du);\n", op->barrier_id, op->num_threadblocks);
        return MSCCLRT_SUCCESS;
    case PLAN_OP_SIGNAL:
    case PLAN_OP_RLXSIGNAL: {
        if (op->chan_type != PLAN_CHAN_MEMORY && op->chan_type != PLAN_CHAN_PORT)
            return gfail(G, "signal needs channel_type memory or port");
        /* through the proxy, every trigger the block pushed before (the channel's data) must
         * precede the flag in the FIFO */
        const bool proxy = t == 1 && G->l->uses_proxy;
        const char *fn = proxy ? "proxy_signal(F, "
                         : op->kind == PLAN_OP_RLXSIGNAL && t == 0 ? "signal_relaxed(" : "signal(";
        if (proxy) sb_printf(b, "    __syncthreads();\n");
        for (int j = 0; j < op->nchan; j++) {
            int c = 0;
            TRY(chan_check(G, op, t, j, &c));
            sb_printf(b, "    if (threadIdx.x == %d) mk::%st.v[%d]);\n", j, fn,
                      G->l->tab_chan[t] + c);
        }
        return MSCCLRT_SUCCESS;
    }
    case PLAN_OP_WAIT:
    case PLAN_OP_RLXWAIT:
        if (op->chan_type != PLAN_CHAN_MEMORY && op->chan_type != PLAN_CHAN_PORT)
            return gfail(G, "wait needs channel_type memory or port");
        for (int j = 0; j < op->nchan; j++) {
            int c = 0;
            TRY(chan_check(G, op, t, j, &c));
            int k = cg_chan_counter(G->l, t, c);
            sb_printf(b, "    if (threadIdx.x == %d) mk::wait%s(&inbound[%d], &expected[%d]);\n", j,
                      op->kind == PLAN_OP_RLXWAIT && t == 0 ? "_relaxed" : "", k, k);
        }
        return MSCCLRT_SUCCESS;
    case PLAN_OP_FLUSH:
        if (!G->l->uses_proxy) {
            /* port data moves with SM stores on this path; the signal's release orders them */
            sb_printf(b, "    /* flush: nothing outstanding */\n");
            return MSCCLRT_SUCCESS;
        }
        /* the intended semantics (spec §5.2): wait until the proxy completed every earlier
         * request; one FIFO serves all of the rank's channels, so one mark covers them all */
        sb_printf(b, "    __syncthreads();\n    if (threadIdx.x == 0) mk::proxy_flush(F);\n"
                  "    __syncthreads();\n");
        return MSCCLRT_SUCCESS;
    case PLAN_OP_SEM_ACQUIRE:
    case PLAN_OP_SEM_RELEASE:
        for (int j = 0; j < op->nsem; j++) {
            if (op->sem_ids[j] < 0 || op->sem_ids[j] >= G->g->nsems)
                return gfail(G, "semaphore_ids[%d] = %d out of range [0, %d)", j, op->sem_ids[j],
                             G->g->nsems);
            sb_printf(b, "    if (threadIdx.x == %d) mk::sem_%s(&sem[%d]);\n", j,
                      op->kind == PLAN_OP_SEM_ACQUIRE ? "acquire" : "release", op->sem_ids[j]);
        }
        return MSCCLRT_SUCCESS;
    default:
        return gfail(G, "not a synchronisation op");
    }
}

static int multimem_kind(Gen *G) {
    const char *T = G->T;
    int op = G->op == MSCCLRT_AVG ? MSCCLRT_SUM : G->op;
    if (!strcmp(T, "float")) return op == MSCCLRT_SUM ? 0 : -1;
    if (!strcmp(T, "mk::f16")) return op == MSCCLRT_SUM ? 1 : op == MSCCLRT_MIN ? 3 : op == MSCCLRT_MAX ? 4 : -1;
    if (!strcmp(T, "mk::bf16")) return op == MSCCLRT_SUM ? 2 : op == MSCCLRT_MIN ? 5 : op == MSCCLRT_MAX ? 6 : -1;
    if (!strcmp(T, "mk::u32")) return op == MSCCLRT_SUM ? 7 : op == MSCCLRT_MIN ? 9 : op == MSCCLRT_MAX ? 10 : -1;
    if (!strcmp(T, "int")) return op == MSCCLRT_SUM ? 8 : op == MSCCLRT_MIN ? 11 : op == MSCCLRT_MAX ? 12 : -1;
    return -1;
}

/* put / pws / pwsf / ppkt / rppkt on a port channel through the proxy (spec §5.5): after a
 * block barrier (the data was written by the whole block), thread m pushes entry m's copy on
 * channel c_m; pws adds the channel's flag behind it, pwsf also waits for completion. Packet
 * variants copy packets as they are (2 bytes per data byte); rppkt first waits until its local
 * packets have all arrived, since the copy engine cannot wait for them. */
static mscclrt_result gen_port_put(Gen *G, const PlanOp *op) {
    Sb *b = G->b;
    const bool pk = op->kind == PLAN_OP_PPKT || op->kind == PLAN_OP_RPPKT;
    const int n = op->kind == PLAN_OP_RPPKT ? op->ndst : op->nsrc;
    if (op->nchan != n)
        return gfail(G, "%d channel_ids for %d entries (a port channel per entry)", op->nchan, n);
    Ent s, d;
    if (op->kind == PLAN_OP_RPPKT) {
        TRY(ent(G, op, &op->src[0], true, &s));
        snprintf(s.e, sizeof s.e, "(B2 + 2 * o%d)", s.v); /* always local scratch (spec §5.5) */
        sb_printf(b, "    mk::wait_packets<%d>(%s, 2 * z%d, flag);\n", G->P, s.e, s.v);
    }
    sb_printf(b, "    __syncthreads();\n");
    for (int m = 0; m < n; m++) {
        int c = 0;
        TRY(chan_check(G, op, 1, m, &c));
        if (op->kind != PLAN_OP_RPPKT) TRY(ent(G, op, &op->src[m], pk, &s));
        TRY(ent(G, op, &op->dst[m], pk, &d));
        /* puts move size(dst) bytes (spec §5.5), packet copies twice the source's data */
        sb_printf(b, "    if (threadIdx.x == %d) {\n      mk::proxy_put(F, %s, %s, %sz%d);\n", m,
                  d.e, s.e, pk ? "2 * " : "", pk ? s.v : d.v);
        if (op->kind == PLAN_OP_PWS || op->kind == PLAN_OP_PWSF)
            sb_printf(b, "      mk::proxy_signal(F, t.v[%d]);\n", G->l->tab_chan[1] + c);
        if (op->kind == PLAN_OP_PWSF) sb_printf(b, "      mk::proxy_flush(F);\n");
        sb_printf(b, "    }\n");
    }
    return MSCCLRT_SUCCESS;
}

static mscclrt_result gen_op(Gen *G, const PlanOp *op) {
    Sb *b = G->b;
    Ent s[PLAN_MAX_OP_ENTRIES], d[PLAN_MAX_OP_ENTRIES];
    const int fl = plan_op_flags(op->kind);
    const int port = op->chan_type == PLAN_CHAN_PORT;
    const char *T = G->T;
    if (fl & OPF_SYNC) return gen_sync(G, op);
    if (op->kind == PLAN_OP_PIPELINE) {
        if (G->in_pipe) return gfail(G, "nested pipeline");
        if (op->unit_size == 0) return gfail(G, "iter_context.unit_size is 0");
        sb_printf(b, "  { /* pipeline: unit %llu bytes, %u chunks */\n"
                  "    const mk::u64 U = %lluull, nit = (C * %uull + U - 1) / U;\n"
                  "    for (mk::u64 it = 0; it < nit; it++) {\n    const mk::u64 po = it * U;\n",
                  (unsigned long long)op->unit_size, op->num_chunks,
                  (unsigned long long)op->unit_size, op->num_chunks);
        G->in_pipe = true;
        for (int i = 0; i < op->ninner; i++) {
            sb_printf(b, "  { /* %s */\n", plan_op_name(op->inner[i].kind));
            mscclrt_result r = gen_op(G, &op->inner[i]);
            if (r != MSCCLRT_SUCCESS) { G->in_pipe = false; return r; }
            sb_printf(b, "  }\n");
        }
        G->in_pipe = false;
        sb_printf(b, "    }\n  }\n");
        return MSCCLRT_SUCCESS;
    }
    if (op->nsrc < 1 || op->ndst < 1) return gfail(G, "needs src_buff and dst_buff entries");
    const bool pk = (fl & OPF_PACKET) != 0;
    if (pk && (fl & OPF_REDUCE) && G->esize > (size_t)G->payload)
        return gfail(G, "LL%d packets carry %d data bytes, less than one %zu-byte element; use "
                     "LL16 for this data type", G->P, G->payload, G->esize);
    switch (op->kind) {
    case PLAN_OP_COPY:
        TRY(ent(G, op, &op->src[0], false, &s[0]));
        TRY(ent(G, op, &op->dst[0], false, &d[0]));
        sb_printf(b, "    mk::copy(%s, %s, z%d);\n", d[0].e, s[0].e, s[0].v);
        return MSCCLRT_SUCCESS;
    case PLAN_OP_PUT:
    case PLAN_OP_PWS:
    case PLAN_OP_PWSF:
        if (op->nsrc != op->ndst) return gfail(G, "%d sources for %d destinations", op->nsrc, op->ndst);
        if (port && G->l->uses_proxy) return gen_port_put(G, op);
        for (int m = 0; m < op->nsrc; m++) {
            TRY(ent(G, op, &op->src[m], false, &s[m]));
            TRY(ent(G, op, &op->dst[m], false, &d[m]));
        }
        emit_fanout(G, op, s, d, false);
        if (port && op->kind != PLAN_OP_PUT) {
            sb_printf(b, "    __syncthreads();\n");
            for (int j = 0; j < op->nchan; j++) {
                int c = 0;
                TRY(chan_check(G, op, 1, j, &c));
                sb_printf(b, "    if (threadIdx.x == %d) mk::signal(t.v[%d]);\n", j,
                          G->l->tab_chan[1] + c);
            }
        }
        return MSCCLRT_SUCCESS;
    case PLAN_OP_GET:
        if (op->nsrc != op->ndst) return gfail(G, "%d sources for %d destinations", op->nsrc, op->ndst);
        for (int m = 0; m < op->nsrc; m++) {
            TRY(ent(G, op, &op->src[m], false, &s[m]));
            TRY(ent(G, op, &op->dst[m], false, &d[m]));
            sb_printf(b, "    mk::copy(%s, %s, z%d);\n", d[m].e, s[m].e, s[m].v);
        }
        return MSCCLRT_SUCCESS;
    case PLAN_OP_CPKT:
        TRY(ent(G, op, &op->src[0], false, &s[0]));
        TRY(ent(G, op, &op->dst[0], true, &d[0]));
        sb_printf(b, "    { char *const D[1] = {%s}; mk::to_packets<%d, 1>(D, %s, z%d, flag); }\n",
                  d[0].e, G->P, s[0].e, s[0].v);
        return MSCCLRT_SUCCESS;
    case PLAN_OP_UPKT:
        TRY(ent(G, op, &op->src[0], true, &s[0]));
        TRY(ent(G, op, &op->dst[0], false, &d[0]));
        sb_printf(b, "    mk::from_packets<%d>(%s, (B2 + 2 * o%d), z%d, flag);\n", G->P, d[0].e,
                  s[0].v, s[0].v);
        return MSCCLRT_SUCCESS;
    case PLAN_OP_PPKT:
        if (op->nsrc != op->ndst) return gfail(G, "%d sources for %d destinations", op->nsrc, op->ndst);
        if (port && G->l->uses_proxy) return gen_port_put(G, op);
        for (int m = 0; m < op->nsrc; m++) {
            TRY(ent(G, op, &op->src[m], port, &s[m]));
            TRY(ent(G, op, &op->dst[m], true, &d[m]));
            if (port) /* the source is already in packet form (spec §5.5) */
                sb_printf(b, "    mk::copy_packets_raw(%s, %s, 2 * z%d);\n", d[m].e, s[m].e, s[m].v);
        }
        if (!port) emit_fanout(G, op, s, d, true);
        return MSCCLRT_SUCCESS;
    case PLAN_OP_RPPKT:
        if (port && G->l->uses_proxy) return gen_port_put(G, op);
        TRY(ent(G, op, &op->src[0], true, &s[0]));
        for (int m = 0; m < op->ndst; m++) TRY(ent(G, op, &op->dst[m], true, &d[m]));
        sb_printf(b, "    {\n");
        emit_list(G, "char *", "D", d, op->ndst);
        sb_printf(b, "    mk::forward_packets<%d, %d>(D, (B2 + 2 * o%d), z%d, flag);\n    }\n", G->P,
                  op->ndst, s[0].v, s[0].v);
        return MSCCLRT_SUCCESS;
    case PLAN_OP_RE:
    case PLAN_OP_RES:
    case PLAN_OP_RRE:
    case PLAN_OP_RRES:
        for (int m = 0; m < op->nsrc; m++) TRY(ent(G, op, &op->src[m], false, &s[m]));
        for (int m = 0; m < op->ndst; m++) TRY(ent(G, op, &op->dst[m], false, &d[m]));
        sb_printf(b, "    {\n");
        emit_list(G, "const char *", "S", s, op->nsrc);
        emit_list(G, "char *", "D", d, op->ndst);
        sb_printf(b, "    mk::reduce<%s, %d, %d, %d>(D, S, z%d);\n    }\n", T, G->op, op->nsrc,
                  op->ndst, s[0].v);
        return MSCCLRT_SUCCESS;
    case PLAN_OP_REPKT:
    case PLAN_OP_RESPKT:
    case PLAN_OP_RECPKT:
    case PLAN_OP_RECSPKT: {
        TRY(ent(G, op, &op->src[0], false, &s[0]));
        for (int m = 1; m < op->nsrc; m++) {
            TRY(ent(G, op, &op->src[m], true, &s[m]));
            /* packet sources are always read from local scratch (spec §5.3) */
            snprintf(s[m].e, sizeof s[m].e, "(B2 + 2 * o%d)", s[m].v);
        }
        TRY(ent(G, op, &op->dst[0], false, &d[0]));
        int ndk = 0;
        Ent k[PLAN_MAX_OP_ENTRIES];
        for (int m = 1; m < op->ndst; m++) TRY(ent(G, op, &op->dst[m], true, &k[ndk++]));
        if (op->kind == PLAN_OP_REPKT && ndk) return gfail(G, "repkt has %d extra destinations", ndk);
        if ((op->kind == PLAN_OP_RECPKT || op->kind == PLAN_OP_RECSPKT) && ndk < 1)
            return gfail(G, "missing the packet destination");
        sb_printf(b, "    {\n");
        emit_list(G, "char *", "DP", d, 1);
        emit_list(G, "char *", "DK", k, ndk);
        emit_list(G, "const char *", "PK", s + 1, op->nsrc - 1);
        sb_printf(b, "    mk::reduce_packets<%s, %d, %d, %d, 1, %d>(DP, DK, %s, PK, z%d, flag);\n    }\n",
                  T, G->op, G->P, op->nsrc - 1, ndk, s[0].e, s[0].v);
        return MSCCLRT_SUCCESS;
    }
    case PLAN_OP_GLRES: {
        int kind = multimem_kind(G);
        if (kind < 0)
            return gfail(G, "multimem cannot reduce %s with operator %s", T,
                         dtype_redop_name((mscclrt_redop)G->op));
        TRY(ent(G, op, &op->src[0], false, &s[0]));
        TRY(ent(G, op, &op->dst[0], false, &d[0]));
        sb_printf(b, "    mk::mm_reduce_store<%d>(%s, %s, z%d);\n", kind, d[0].e, s[0].e, s[0].v);
        return MSCCLRT_SUCCESS;
    }
    case PLAN_OP_GSTORE:
        TRY(ent(G, op, &op->src[0], false, &s[0]));
        TRY(ent(G, op, &op->dst[0], false, &d[0]));
        sb_printf(b, "    mk::mm_store(%s, %s, z%d);\n", d[0].e, s[0].e, s[0].v);
        return MSCCLRT_SUCCESS;
    case PLAN_OP_GSTOREPKT:
        TRY(ent(G, op, &op->src[0], true, &s[0]));
        TRY(ent(G, op, &op->dst[0], true, &d[0]));
        sb_printf(b, "    mk::mm_store_packets<%d>(%s, %s, z%d, flag);\n", G->P, d[0].e, s[0].e,
                  s[0].v);
        return MSCCLRT_SUCCESS;
    default:
        return gfail(G, "operation not supported by the GPU code generator");
    }
}

/* The plan's name for the comment atop the generated source: escaped (plan_escape: one line,
 * no control characters), and every star-slash written as "* /", so that a name cannot close
 * the comment and put its own code into the kernel. */
static const char *comment_name(const char *name, char buf[2 * PLAN_ESC_MAX]) {
    char esc[PLAN_ESC_MAX];
    plan_escape(esc, sizeof esc, name);
    size_t n = 0;
    for (const char *c = esc; *c; c++) {
        buf[n++] = *c;
        if (c[0] == '*' && c[1] == '/') buf[n++] = ' ';
    }
    buf[n] = 0;
    return buf;
}

mscclrt_result cg_generate(const Plan *p, int rank, mscclrt_dtype dt, mscclrt_redop rop,
                           mscclrt_packet pkt, char **out) {
    *out = NULL;
    CgLayout l;
    TRY(cg_layout(p, rank, &l));
    if (!cg_ctype(dt))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "code generation: invalid data type %d", (int)dt);
    if ((unsigned)rop >= MSCCLRT_REDOP_COUNT)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "code generation: invalid operator %d", (int)rop);
    if (pkt != MSCCLRT_LL16 && pkt != MSCCLRT_LL8)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "code generation: invalid packet type %d", (int)pkt);
    Sb b = {0};
    Gen G = {.p = p, .rank = rank, .g = &p->gpus[rank], .l = &l, .b = &b};
    /* a kernel that combines nothing does not depend on dtype/op: one source for all of them */
    G.T = l.has_reduce ? cg_ctype(dt) : "mk::u8";
    G.esize = l.has_reduce ? csize(dt) : 1;
    G.op = l.has_reduce ? (int)rop : 0;
    G.P = pkt == MSCCLRT_LL8 ? 8 : 16;
    if (!l.has_packets) G.P = 16; /* likewise for the packet type */
    G.payload = G.P / 2;
    const bool avg = l.has_reduce && rop == MSCCLRT_AVG;
    char cname[2 * PLAN_ESC_MAX];
    sb_printf(&b, "/* generated by libmscclrt: plan '%s', rank %d of %d, %s, %s, LL%d */\n",
              comment_name(p->name, cname), rank, p->ngpus, l.has_reduce ? dtype_name(dt) : "any dtype",
              l.has_reduce ? dtype_redop_name(rop) : "no reduction", G.P);
    sb_printf(&b, "#include \"mscclrt_device.cuh\"\n"
              "struct MkTab { mk::u64 v[%d]; };\n"
              "extern \"C\" __global__ void __launch_bounds__(%d, 1)\n"
              CG_KERNEL_NAME "(const MkArgs a, const MkTab t) {\n"
              "  mk::launch_prologue();\n"
              "  const mk::u64 C = a.chunk, A = %uull;\n"
              "  char *const st = (char *)a.state;\n"
              "  mk::u32 *const tbflag = (mk::u32 *)(st + %zu);\n"
              "  mk::u64 *const inbound = (mk::u64 *)(st + %zu);\n"
              "  mk::u64 *const expected = (mk::u64 *)(st + %zu);\n"
              "  int *const sem = (int *)(st + %zu);\n"
              "  MkBarrier *const bar = (MkBarrier *)(st + %zu);\n",
              l.ntab, p->threads, p->alignment, l.off_flags, l.off_inbound, l.off_expected,
              l.off_sem, l.off_bar);
    if (l.uses_proxy)
        sb_printf(&b, "  const MkFifo *const F = (const MkFifo *)t.v[%d];\n", l.tab_proxy);
    if (l.uses_flag)
        sb_printf(&b, "  const mk::u32 flag = tbflag[blockIdx.x] + 1;\n"
                  "  const mk::u64 soff = (flag & 1) ? 0 : a.scratch_half;\n");
    else
        sb_printf(&b, "  const mk::u32 flag = 1;\n  const mk::u64 soff = 0;\n");
    sb_printf(&b, "  char *const B0 = (char *)a.in;\n  char *const B1 = (char *)a.out;\n"
              "  char *const B2 = (char *)a.scratch + soff;\n"
              "  (void)A; (void)inbound; (void)expected; (void)sem; (void)bar; (void)B0; (void)B1; (void)B2; (void)flag; (void)t;\n"
              "  switch (blockIdx.x) {\n");
    mscclrt_result res = MSCCLRT_SUCCESS;
    for (int tb = 0; tb < G.g->ntbs && res == MSCCLRT_SUCCESS; tb++) {
        const PlanTb *T = &G.g->tbs[tb];
        sb_printf(&b, "  case %d: {\n", tb);
        for (int o = 0; o < T->nops && res == MSCCLRT_SUCCESS; o++) {
            G.tb = tb;
            G.opi = o;
            sb_printf(&b, "  { /* op %d: %s */\n", o, plan_op_name(T->ops[o].kind));
            res = gen_op(&G, &T->ops[o]);
            sb_printf(&b, "  }\n");
        }
        sb_printf(&b, "  } break;\n");
    }
    sb_printf(&b, "  default: break;\n  }\n");
    if (avg && l.uses_proxy) /* the copy engine may still read what the division changes */
        sb_printf(&b, "  mk::barrier(&bar[%d], gridDim.x);\n"
                  "  if (blockIdx.x == 0 && threadIdx.x == 0) mk::proxy_flush(F);\n",
                  MK_NBARRIERS - 1);
    if (avg)
        sb_printf(&b, "  mk::barrier(&bar[%d], gridDim.x);\n"
                  "  mk::divide<%s>((char *)a.out, a.out_bytes, a.nranks, (mk::u64)blockIdx.x * blockDim.x + threadIdx.x,"
                  " (mk::u64)gridDim.x * blockDim.x);\n", MK_NBARRIERS - 1, G.T);
    if (l.uses_flag)
        sb_printf(&b, "  __syncthreads();\n  if (threadIdx.x == 0) tbflag[blockIdx.x] = flag;\n");
    sb_printf(&b, "}\n");
    if (res != MSCCLRT_SUCCESS) {
        free(b.s);
        return res;
    }
    if (b.oom) {
        free(b.s);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "code generation: out of memory");
    }
    *out = b.s;
    return MSCCLRT_SUCCESS;
}

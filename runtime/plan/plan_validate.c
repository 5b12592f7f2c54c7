/*
 * plan_validate.c - the complete validation of a plan model (spec §2, §2.7, §2.8, §6.2): index
 * spaces, limits, pairing. The loader (plan_load.c) runs it on every parsed file and the compiler
 * on its in-memory plans, so both refuse the same things with the same messages, naming the JSON
 * path the model came from (or would be written as).
 */
#include "plan.h"
#include "plan_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- validation of a model ------------------------------------------------------------------------
 * Paths are those of the JSON the model came from (or would be written as): ops and entries
 * have the same positions; channel tables are named by type and TB-local index. */

typedef struct {
    const Plan *p;
    const char *what;
    PlanErr *err;
} Va;

static bool vf(Va *V, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool vf(Va *V, const char *path, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    plan_vfail(V->err, V->what, path, fmt, ap);
    va_end(ap);
    return false;
}

static uint32_t buf_chunks(const PlanGpu *g, PlanBuf b) {
    switch (b) {
    case PLAN_BUF_INPUT: return g->input_chunks;
    case PLAN_BUF_OUTPUT: return g->output_chunks;
    default: return g->scratch_chunks;
    }
}

/* How an entry is used: as data, or as LL packets (twice the bytes at twice the offset). */
typedef enum { USE_DATA, USE_PACKET } RefUse;

/* Checks chunks [index, index+size) of buffer b of rank `owner` (rank `self` reads it). */
static bool check_range(Va *V, const char *path, const PlanRef *r, int self, int owner, PlanBuf b,
                        RefUse use) {
    const PlanGpu *g = &V->p->gpus[owner];
    uint64_t chunks = buf_chunks(g, b);
    char whose[64] = "";
    if (owner != self) snprintf(whose, sizeof whose, "rank %d's ", owner);
    if (use == USE_PACKET) {
        /* packets double offsets and sizes; only LL plans double the scratch (spec §4.4) */
        uint64_t room = chunks * ((b == PLAN_BUF_SCRATCH && V->p->protocol_ll) ? 2 : 1);
        if (2 * ((uint64_t)r->index + r->size) > room)
            return vf(V, path, "packets of chunks %u..%" PRIu64 " need %" PRIu64 " chunks of "
                      "%s%s, which has %" PRIu64 "%s", r->index, (uint64_t)r->index + r->size,
                      2 * ((uint64_t)r->index + r->size), whose, plan_buf_long_name(b), room,
                      b == PLAN_BUF_SCRATCH && !V->p->protocol_ll ?
                      " (scratch is doubled only for protocol \"LL\")" : "");
        return true;
    }
    char kp[PLAN_PATH_MAX];
    if (r->index >= chunks && !(r->size == 0 && r->index == chunks)) {
        plan_path_key(kp, path, "index");
        return vf(V, kp, "%u is outside %s%s (%" PRIu64 " chunks)", r->index, whose,
                  plan_buf_long_name(b), chunks);
    }
    if ((uint64_t)r->index + r->size > chunks) {
        plan_path_key(kp, path, "size");
        return vf(V, kp, "%u chunks from index %u go past the end of %s%s (%" PRIu64 " chunks)",
                  r->size, r->index, whose, plan_buf_long_name(b), chunks);
    }
    return true;
}

/* Resolves and bounds-checks one entry of an op of rank r, TB tb. want_kind is the kind the op
 * needs at this position; want_scratch requires scratch (packet buffers). */
static bool check_ref(Va *V, const char *path, const PlanOp *op, const PlanRef *ref, int r,
                      const PlanTb *tb, PlanRefKind want_kind, bool want_scratch, RefUse use) {
    static const char *kind_names[] = {"a local entry ('type')", "a remote entry ('buffer_id')",
                                       "a switch entry ('switch_channel_id')"};
    const Plan *p = V->p;
    const PlanGpu *g = &p->gpus[r];
    if ((unsigned)ref->kind > PLAN_REF_SWITCH) return vf(V, path, "invalid entry kind");
    if (ref->kind != want_kind)
        return vf(V, path, "'%s' needs %s here, not %s", plan_op_name(op->kind),
                  kind_names[want_kind], kind_names[ref->kind]);
    char kp[PLAN_PATH_MAX];
    PlanBuf b;
    switch (ref->kind) {
    case PLAN_REF_LOCAL:
        if ((unsigned)ref->type >= PLAN_BUF_COUNT) return vf(V, path, "invalid buffer type");
        b = ref->type;
        if (want_scratch && b != PLAN_BUF_SCRATCH) {
            plan_path_key(kp, path, "type");
            return vf(V, kp, "'%s' needs scratch (\"s\") here, not %s", plan_op_name(op->kind),
                      plan_buf_long_name(b));
        }
        return check_range(V, path, ref, r, r, b, use);
    case PLAN_REF_REMOTE: {
        plan_path_key(kp, path, "buffer_id");
        if (op->chan_type != PLAN_CHAN_MEMORY && op->chan_type != PLAN_CHAN_PORT)
            return vf(V, kp, "a remote entry needs the op's channel_type to be \"memory\" or "
                             "\"port\" (it selects the remote table), not \"%s\"",
                      plan_chan_name(op->chan_type));
        int a = op->chan_type;
        if (ref->id < 0 || ref->id >= tb->nremote[a])
            return vf(V, kp, "%d is outside the thread block's %d %s remote buffer ref(s)",
                      ref->id, tb->nremote[a], plan_chan_name(op->chan_type));
        const PlanRemote *rb = &g->remotes[tb->remote[a][ref->id]];
        b = rb->type;
        if (want_scratch && b != PLAN_BUF_SCRATCH)
            return vf(V, kp, "'%s' needs a remote scratch (\"s\") buffer here, but remote buffer "
                      "%d is rank %d's %s", plan_op_name(op->kind), tb->remote[a][ref->id],
                      rb->rank, plan_buf_long_name(b));
        return check_range(V, path, ref, r, rb->rank, b, use);
    }
    case PLAN_REF_SWITCH: {
        plan_path_key(kp, path, "switch_channel_id");
        if (op->chan_type != PLAN_CHAN_SWITCH)
            return vf(V, kp, "a switch entry needs channel_type \"switch\", not \"%s\"",
                      plan_chan_name(op->chan_type));
        if (ref->id < 0 || ref->id >= tb->nchan[PLAN_CHAN_SWITCH])
            return vf(V, kp, "%d is outside the thread block's %d switch channel(s)", ref->id,
                      tb->nchan[PLAN_CHAN_SWITCH]);
        const PlanSwitch *sw = &g->switches[tb->chan[PLAN_CHAN_SWITCH][ref->id]];
        b = sw->buf;
        if (want_scratch && b != PLAN_BUF_SCRATCH)
            return vf(V, kp, "'%s' needs a switch channel on scratch here, not on %s",
                      plan_op_name(op->kind), plan_buf_long_name(b));
        /* a multicast address reaches the same offset in every member's buffer */
        for (int m = 0; m < sw->nranks; m++)
            if (!check_range(V, path, ref, sw->ranks[m], sw->ranks[m], b, use)) return false;
        return true;
    }
    }
    return true;
}

/* Entry list rule: entries [0, lead) are local, the rest are `rest`; count in [lo, hi]. */
typedef struct {
    int lo, hi;
    int lead;                  /* leading local entries */
    PlanRefKind rest;
} ListShape;

static bool check_list_shape(Va *V, const char *path, const PlanOp *op, const char *key, int n,
                             ListShape s) {
    char kp[PLAN_PATH_MAX];
    plan_path_key(kp, path, key);
    if (n < s.lo || n > s.hi) {
        if (s.lo == s.hi)
            return vf(V, s.lo == 0 || n == 0 ? path : kp, "'%s' needs exactly %d %s entr%s, "
                      "got %d", plan_op_name(op->kind), s.lo, key, s.lo == 1 ? "y" : "ies", n);
        return vf(V, n == 0 ? path : kp, "'%s' needs %d to %d %s entries, got %d",
                  plan_op_name(op->kind), s.lo, s.hi, key, n);
    }
    return true;
}

static PlanRefKind shape_kind(ListShape s, int i) { return i < s.lead ? PLAN_REF_LOCAL : s.rest; }

/* Checks an op's entries against its kind (spec §5) and bounds every one of them. */
static bool check_entries(Va *V, const char *path, const PlanOp *op, int r, const PlanTb *tb) {
    const int M = PLAN_MAX_OP_ENTRIES;
    ListShape src = {0, 0, 0, PLAN_REF_LOCAL}, dst = {0, 0, 0, PLAN_REF_LOCAL};
    /* which entries are LL packet buffers (must be scratch, bounded in packet space) */
    int src_pkt_from = M, dst_pkt_from = M, dst_pkt_to = M; /* [from, to) */
    int src_pkt_to = M;
    switch (op->kind) {
    case PLAN_OP_COPY: src = dst = (ListShape){1, 1, 1, PLAN_REF_LOCAL}; break;
    case PLAN_OP_CPKT:
        src = dst = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        dst_pkt_from = 0;
        break;
    case PLAN_OP_UPKT:
        src = dst = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        src_pkt_from = 0;
        break;
    case PLAN_OP_PUT: case PLAN_OP_PWS: case PLAN_OP_PWSF:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){1, M, 0, PLAN_REF_REMOTE};
        break;
    case PLAN_OP_GET:
        src = (ListShape){1, M, 0, PLAN_REF_REMOTE};
        dst = (ListShape){1, M, M, PLAN_REF_LOCAL};
        break;
    case PLAN_OP_PPKT:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){1, M, 0, PLAN_REF_REMOTE};
        dst_pkt_from = 0;
        if (op->chan_type == PLAN_CHAN_PORT) { /* port ppkt copies packets that already exist */
            src_pkt_from = 0;
        }
        break;
    case PLAN_OP_RPPKT:
        src = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        dst = (ListShape){1, M, 0, PLAN_REF_REMOTE};
        src_pkt_from = 0;
        dst_pkt_from = 0;
        break;
    case PLAN_OP_RE:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        break;
    case PLAN_OP_RES:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){1, M, 1, PLAN_REF_REMOTE};
        break;
    case PLAN_OP_RRE:
        src = (ListShape){1, M, 1, PLAN_REF_REMOTE};
        dst = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        break;
    case PLAN_OP_RRES:
        src = (ListShape){1, M, 1, PLAN_REF_REMOTE};
        dst = (ListShape){1, M, 1, PLAN_REF_REMOTE};
        break;
    case PLAN_OP_REPKT:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        src_pkt_from = 1;
        break;
    case PLAN_OP_RESPKT:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){1, M, 1, PLAN_REF_REMOTE};
        src_pkt_from = 1;
        dst_pkt_from = 1;
        break;
    case PLAN_OP_RECPKT:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){2, 2, 2, PLAN_REF_LOCAL};
        src_pkt_from = 1;
        dst_pkt_from = 1;
        break;
    case PLAN_OP_RECSPKT:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){2, M, 2, PLAN_REF_REMOTE};
        src_pkt_from = 1;
        dst_pkt_from = 1;
        break;
    case PLAN_OP_GLRES:
        src = dst = (ListShape){1, 1, 0, PLAN_REF_SWITCH};
        break;
    case PLAN_OP_GSTORE:
        src = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        dst = (ListShape){1, 1, 0, PLAN_REF_SWITCH};
        break;
    case PLAN_OP_GSTOREPKT:
        src = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        dst = (ListShape){1, 1, 0, PLAN_REF_SWITCH};
        src_pkt_from = 0;
        dst_pkt_from = 0;
        break;
    default: /* sync ops and pipeline: no entries */
        break;
    }
    if (!check_list_shape(V, path, op, "src_buff", op->nsrc, src)) return false;
    if (!check_list_shape(V, path, op, "dst_buff", op->ndst, dst)) return false;
    char kp[PLAN_PATH_MAX], ep[PLAN_PATH_MAX];
    plan_path_key(kp, path, "src_buff");
    for (int i = 0; i < op->nsrc; i++) {
        plan_path_idx(ep, kp, i);
        bool pkt = i >= src_pkt_from && i < src_pkt_to;
        /* port ppkt sources are packets in any buffer; the others must be scratch */
        bool scratch = pkt && !(op->kind == PLAN_OP_PPKT);
        if (!check_ref(V, ep, op, &op->src[i], r, tb, shape_kind(src, i), scratch,
                       pkt ? USE_PACKET : USE_DATA))
            return false;
    }
    plan_path_key(kp, path, "dst_buff");
    for (int i = 0; i < op->ndst; i++) {
        plan_path_idx(ep, kp, i);
        bool pkt = i >= dst_pkt_from && i < dst_pkt_to;
        if (!check_ref(V, ep, op, &op->dst[i], r, tb, shape_kind(dst, i), pkt,
                       pkt ? USE_PACKET : USE_DATA))
            return false;
    }
    /* every entry moves the same amount of data: the executor takes it from one entry */
    for (int i = 0; i < op->nsrc + op->ndst; i++) {
        const PlanRef *e = i < op->nsrc ? &op->src[i] : &op->dst[i - op->nsrc];
        if (e->size != op->src[0].size) {
            plan_path_key(kp, path, i < op->nsrc ? "src_buff" : "dst_buff");
            plan_path_idx(ep, kp, i < op->nsrc ? i : i - op->nsrc);
            plan_path_key(kp, ep, "size");
            return vf(V, kp, "%u differs from src_buff[0].size %u (all entries of an op move "
                      "the same number of chunks)", e->size, op->src[0].size);
        }
    }
    /* get reads the peer at the local entry's offset and writes at the remote entry's offset
     * (spec §5.4): both offsets must fit both buffers */
    if (op->kind == PLAN_OP_GET && op->chan_type == PLAN_CHAN_MEMORY) {
        for (int m = 0; m < op->nsrc; m++) {
            const PlanRemote *rb = &V->p->gpus[r].remotes[tb->remote[PLAN_CHAN_MEMORY][op->src[m].id]];
            plan_path_key(kp, path, "dst_buff");
            plan_path_idx(ep, kp, m);
            if (!check_range(V, ep, &op->dst[m], r, rb->rank, rb->type, USE_DATA)) return false;
            plan_path_key(kp, path, "src_buff");
            plan_path_idx(ep, kp, m);
            if (!check_range(V, ep, &op->src[m], r, r, op->dst[m].type, USE_DATA)) return false;
        }
    }
    return true;
}

/* k-th occurrence of `peer` in rank r's list of type t, for channel index c (0-based). */
static int occurrence(const PlanGpu *g, int t, int c) {
    int k = 0;
    for (int i = 0; i < c; i++)
        if (g->peers[t][i] == g->peers[t][c]) k++;
    return k;
}

static int count_peer(const PlanGpu *g, int t, int peer) {
    int k = 0;
    for (int i = 0; i < g->npeers[t]; i++)
        if (g->peers[t][i] == peer) k++;
    return k;
}

/* The op's channel_type and channel_ids (spec §2.7, §5). */
static bool check_op_channels(Va *V, const char *path, const PlanOp *op, int r, const PlanTb *tb) {
    const Plan *p = V->p;
    const PlanGpu *g = &p->gpus[r];
    int flags = plan_op_flags(op->kind);
    const char *name = plan_op_name(op->kind);
    char kp[PLAN_PATH_MAX];
    plan_path_key(kp, path, "channel_type");
    if ((unsigned)op->chan_type > PLAN_CHAN_NONE) return vf(V, kp, "invalid channel type");
    PlanChanType ct = op->chan_type;
    if (!(flags & OPF_CHANNEL)) {
        if (ct != PLAN_CHAN_NONE)
            return vf(V, kp, "'%s' uses no channel, but channel_type is \"%s\"", name,
                      plan_chan_name(ct));
        if (op->nchan > 0)
            return vf(V, path, "'%s' uses no channel, but has channel_ids", name);
        return true;
    }
    /* which channel types each op accepts */
    bool mem = true, port = true, sw = false;
    switch (op->kind) {
    case PLAN_OP_GET: case PLAN_OP_RES: case PLAN_OP_RRE: case PLAN_OP_RRES:
    case PLAN_OP_RESPKT: case PLAN_OP_RECSPKT:
        port = false;
        break;
    case PLAN_OP_GLRES: case PLAN_OP_GSTORE: case PLAN_OP_GSTOREPKT:
        mem = port = false;
        sw = true;
        break;
    default:
        break;
    }
    if (!((ct == PLAN_CHAN_MEMORY && mem) || (ct == PLAN_CHAN_PORT && port) ||
          (ct == PLAN_CHAN_SWITCH && sw))) {
        if (ct == PLAN_CHAN_NONE)
            return vf(V, path, "'%s' needs channel_type %s", name,
                      sw ? "\"switch\"" : port ? "\"memory\" or \"port\"" : "\"memory\"");
        return vf(V, kp, "'%s' cannot use a \"%s\" channel (expected %s)", name,
                  plan_chan_name(ct), sw ? "\"switch\"" : port ? "\"memory\" or \"port\"" :
                  "\"memory\"");
    }
    plan_path_key(kp, path, "channel_ids");
    if (op->nchan < 0 || op->nchan > PLAN_MAX_OP_CHANNELS)
        return vf(V, kp, "%d channels, more than the executor's limit of %d", op->nchan,
                  PLAN_MAX_OP_CHANNELS);
    for (int i = 0; i < op->nchan; i++) {
        char ip[PLAN_PATH_MAX];
        plan_path_idx(ip, kp, i);
        int c = op->chan_ids[i];
        if (c < 0 || c >= tb->nchan[ct])
            return vf(V, ip, "%d is outside the thread block's %d %s channel(s)", c,
                      tb->nchan[ct], plan_chan_name(ct));
        if (ct == PLAN_CHAN_SWITCH) continue;
        /* a channel that is used must have a partner on the peer (spec §6.2) */
        int gc = tb->chan[ct][c];
        int peer = g->peers[ct][gc];
        int k = occurrence(g, ct, gc);
        int back = count_peer(&p->gpus[peer], ct, r);
        if (k >= back)
            return vf(V, ip, "%s channel %d (to rank %d) has no partner: rank %d declares %d %s "
                      "channel(s) to rank %d, and a rank's k-th channel to a peer pairs with "
                      "the peer's k-th channel back (mscclrt-plan(5), Validation)",
                      plan_chan_name(ct), gc, peer, peer, back, plan_chan_name(ct), r);
    }
    bool sync = flags & OPF_SYNC;
    if (sync && op->nchan == 0) return vf(V, path, "'%s' needs at least one channel in channel_ids", name);
    /* port data ops push one request per destination, on channel_ids[m] (spec §5.5) */
    if (ct == PLAN_CHAN_PORT && !sync) {
        if (op->nchan != op->ndst)
            return vf(V, kp, "port '%s' needs one channel per dst_buff entry: %d channel(s), "
                      "%d entries", name, op->nchan, op->ndst);
        for (int m = 0; m < op->ndst; m++) {
            const PlanRef *d = &op->dst[m];
            if (d->kind != PLAN_REF_REMOTE || d->id < 0 || d->id >= tb->nremote[PLAN_CHAN_PORT])
                continue; /* reported by the entry checks */
            int owner = g->remotes[tb->remote[PLAN_CHAN_PORT][d->id]].rank;
            int peer = g->peers[PLAN_CHAN_PORT][tb->chan[PLAN_CHAN_PORT][op->chan_ids[m]]];
            if (owner != peer) {
                char ip[PLAN_PATH_MAX];
                plan_path_idx(ip, kp, m);
                return vf(V, ip, "port channel to rank %d carries dst_buff[%d], a buffer of "
                          "rank %d", peer, m, owner);
            }
        }
    }
    return true;
}

static bool check_op(Va *V, const char *path, const PlanOp *op, int r, const PlanTb *tb,
                     bool inner) {
    const PlanGpu *g = &V->p->gpus[r];
    if ((unsigned)op->kind >= PLAN_OP_COUNT) return vf(V, path, "invalid op kind %d", op->kind);
    const char *name = plan_op_name(op->kind);
    char kp[PLAN_PATH_MAX];
    if (op->nsrc < 0 || op->nsrc > PLAN_MAX_OP_ENTRIES || op->ndst < 0 ||
        op->ndst > PLAN_MAX_OP_ENTRIES)
        return vf(V, path, "more than %d src or dst entries", PLAN_MAX_OP_ENTRIES);
    if (!check_op_channels(V, path, op, r, tb)) return false;
    if (!check_entries(V, path, op, r, tb)) return false;

    if (op->kind == PLAN_OP_SEM_ACQUIRE || op->kind == PLAN_OP_SEM_RELEASE) {
        plan_path_key(kp, path, "semaphore_ids");
        if (op->nsem <= 0) return vf(V, path, "'%s' needs at least one semaphore id", name);
    } else if (op->nsem != 0) {
        return vf(V, path, "'%s' takes no semaphore_ids", name);
    }
    if (op->nsem > PLAN_MAX_OP_SEMAPHORES)
        return vf(V, path, "%d semaphores, more than the executor's limit of %d", op->nsem,
                  PLAN_MAX_OP_SEMAPHORES);
    for (int i = 0; i < op->nsem; i++) {
        char ip[PLAN_PATH_MAX];
        plan_path_key(kp, path, "semaphore_ids");
        plan_path_idx(ip, kp, i);
        if (op->sem_ids[i] < 0 || op->sem_ids[i] >= g->nsems)
            return vf(V, ip, "%d is outside the rank's %d semaphore(s)", op->sem_ids[i], g->nsems);
    }
    if (op->kind == PLAN_OP_BARRIER) {
        plan_path_key(kp, path, "barrier_id");
        if (op->barrier_id < 0 || op->barrier_id >= PLAN_MAX_BARRIERS)
            return vf(V, kp, "%d is outside 0..%d (the executor has %d grid barriers)",
                      op->barrier_id, PLAN_MAX_BARRIERS - 1, PLAN_MAX_BARRIERS);
        plan_path_key(kp, path, "num_threadblocks");
        if (op->num_threadblocks < 1 || op->num_threadblocks > g->ntbs)
            return vf(V, kp, "%d is outside 1..%d (the rank's thread blocks)",
                      op->num_threadblocks, g->ntbs);
    }
    if (op->tbg_size != 0) {
        plan_path_key(kp, path, "tbg_info");
        char ip[PLAN_PATH_MAX];
        if (op->tbg_size < 1 || op->tbg_size > g->ntbs) {
            plan_path_key(ip, kp, "tbg_size");
            return vf(V, ip, "%d is outside 1..%d (the rank's thread blocks)", op->tbg_size,
                      g->ntbs);
        }
        if (op->tbg_id < 0 || op->tbg_id >= op->tbg_size) {
            plan_path_key(ip, kp, "tb_id");
            return vf(V, ip, "%d is outside 0..%d (tbg_size is %d)", op->tbg_id,
                      op->tbg_size - 1, op->tbg_size);
        }
    }
    if ((unsigned)op->reduce_op > PLAN_RED_AVG) return vf(V, path, "invalid reduce_op");

    if (op->kind == PLAN_OP_PIPELINE) {
        if (inner) return vf(V, path, "nested pipelines are not supported");
        plan_path_key(kp, path, "iter_context");
        char ip[PLAN_PATH_MAX];
        if (op->unit_size == 0 || op->unit_size > UINT32_MAX) {
            plan_path_key(ip, kp, "unit_size");
            return vf(V, ip, "%" PRIu64 " is outside 1..%u bytes", op->unit_size, UINT32_MAX);
        }
        if (op->num_chunks == 0) {
            plan_path_key(ip, kp, "num_chunks");
            return vf(V, ip, "must be at least 1");
        }
        if (op->ninner <= 0 || !op->inner) return vf(V, path, "pipeline has no ops");
        plan_path_key(kp, path, "ops");
        for (int i = 0; i < op->ninner; i++) {
            plan_path_idx(ip, kp, i);
            if (!check_op(V, ip, &op->inner[i], r, tb, true)) return false;
        }
    } else if (op->ninner != 0) {
        return vf(V, path, "'%s' has inner ops; only a pipeline does", name);
    }
    return true;
}

/* Every participant of a barrier must agree on its size and run it equally often. */
static bool check_barriers(Va *V, const char *gpath, const PlanGpu *g) {
    for (int id = 0; id < PLAN_MAX_BARRIERS; id++) {
        int users = 0, want = -1, first_tb = -1, first_count = 0;
        for (int t = 0; t < g->ntbs; t++) {
            const PlanTb *tb = &g->tbs[t];
            int count = 0;
            for (int i = 0; i < tb->nops; i++) {
                const PlanOp *op = &tb->ops[i];
                for (int j = -1; j < op->ninner; j++) {
                    const PlanOp *o = j < 0 ? op : &op->inner[j];
                    if (o->kind != PLAN_OP_BARRIER || o->barrier_id != id) continue;
                    count++;
                    if (want < 0) want = o->num_threadblocks;
                    else if (o->num_threadblocks != want)
                        return vf(V, gpath, "barrier %d is used with num_threadblocks %d and %d",
                                  id, want, o->num_threadblocks);
                }
            }
            if (count == 0) continue;
            if (first_tb < 0) {
                first_tb = t;
                first_count = count;
            } else if (count != first_count) {
                return vf(V, gpath, "barrier %d runs %d time(s) in thread block %d but %d in "
                          "thread block %d (participants would hang)", id, first_count,
                          first_tb, count, t);
            }
            users++;
        }
        if (users > 0 && users != want)
            return vf(V, gpath, "barrier %d has num_threadblocks %d but %d thread block(s) use "
                      "it (participants would hang)", id, want, users);
    }
    return true;
}

/* Switch groups: every member declares the same groups in the same order (spec §2.3, §6.6). */
static bool check_switches(Va *V, const char *gpath, int r) {
    const Plan *p = V->p;
    const PlanGpu *g = &p->gpus[r];
    for (int s = 0; s < g->nswitch; s++) {
        const PlanSwitch *sw = &g->switches[s];
        char sp[PLAN_PATH_MAX];
        plan_path_fmt(sp, "%s switch channel %d", gpath, s);
        if ((unsigned)sw->buf >= PLAN_BUF_COUNT) return vf(V, sp, "invalid buffer type");
        if (sw->nranks < 1) return vf(V, sp, "rank group is empty");
        bool self = false;
        for (int i = 0; i < sw->nranks; i++) {
            int m = sw->ranks[i];
            if (m < 0 || m >= p->ngpus)
                return vf(V, sp, "rank %d is outside 0..%d", m, p->ngpus - 1);
            for (int j = 0; j < i; j++)
                if (sw->ranks[j] == m) return vf(V, sp, "rank %d is listed twice", m);
            if (m == r) self = true;
        }
        if (!self) return vf(V, sp, "group does not contain rank %d itself", r);
        for (int i = 0; i < sw->nranks; i++) {
            int m = sw->ranks[i];
            if (m == r) continue;
            /* this is the k-th group of r containing m; it must be m's k-th group containing r */
            int k = 0;
            for (int s2 = 0; s2 < s; s2++)
                for (int j = 0; j < g->switches[s2].nranks; j++)
                    if (g->switches[s2].ranks[j] == m) k++;
            const PlanGpu *gm = &p->gpus[m];
            const PlanSwitch *match = NULL;
            for (int s2 = 0; s2 < gm->nswitch && !match; s2++)
                for (int j = 0; j < gm->switches[s2].nranks; j++)
                    if (gm->switches[s2].ranks[j] == r) {
                        if (k-- == 0) match = &gm->switches[s2];
                        break;
                    }
            bool same = match && match->nranks == sw->nranks && match->buf == sw->buf;
            for (int j = 0; same && j < sw->nranks; j++) same = match->ranks[j] == sw->ranks[j];
            if (!same)
                return vf(V, sp, "rank %d does not declare the same switch channel (same ranks, "
                          "same buffer, same order): multicast groups are created collectively",
                          m);
        }
    }
    return true;
}

bool plan_validate(const Plan *p, const char *what, PlanErr *err) {
    PlanErr dummy;
    if (!err) err = &dummy;
    Va V = {.p = p, .what = what ? what : "<memory>", .err = err};
    if (!p) return vf(&V, "", "no plan");
    if (!p->name || !*p->name) return vf(&V, "name", "must not be empty");
    if ((unsigned)p->collective >= PLAN_COLL_COUNT) return vf(&V, "collective", "invalid value");
    if ((unsigned)p->target >= PLAN_TARGET_COUNT) return vf(&V, "target", "invalid value");
    if (p->threads < 1 || p->threads > PLAN_MAX_THREADS)
        return vf(&V, "num_threads_per_block", "%d is outside 1..%d", p->threads,
                  PLAN_MAX_THREADS);
    if (p->alignment < 4 || (p->alignment & (p->alignment - 1)) != 0)
        return vf(&V, "buffer_alignment", "%u must be a power of two, at least 4", p->alignment);
    if (p->min_size > p->max_size)
        return vf(&V, "min_message_size", "%" PRIu64 " is larger than max_message_size %" PRIu64,
                  p->min_size, p->max_size);
    if (p->ngpus < 1 || !p->gpus) return vf(&V, "gpus", "the plan has no ranks");
    for (int i = 0; i < p->ntags; i++)
        if (!p->tags || !p->tags[i]) return vf(&V, "tags", "missing tag text");

    /* rank-level tables of every rank first: thread blocks of one rank look into the others */
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        char gp[PLAN_PATH_MAX], kp[PLAN_PATH_MAX], ip[PLAN_PATH_MAX];
        plan_path_idx(gp, "gpus", r);
        if (g->id != r) {
            plan_path_key(kp, gp, "id");
            return vf(&V, kp, "%d must equal the position %d", g->id, r);
        }
        if (g->input_chunks == 0) {
            plan_path_key(kp, gp, "input_chunks");
            return vf(&V, kp, "must be at least 1 (the executor divides by it)");
        }
        if (g->output_chunks == 0) {
            plan_path_key(kp, gp, "output_chunks");
            return vf(&V, kp, "must be at least 1 (the executor divides by it)");
        }
        /* memory/port peers */
        plan_path_key(kp, gp, "channels");
        for (int t = 0; t < 2; t++)
            for (int c = 0; c < g->npeers[t]; c++) {
                int peer = g->peers[t][c];
                if (peer < 0 || peer >= p->ngpus)
                    return vf(&V, kp, "%s channel %d connects to rank %d, outside 0..%d",
                              plan_chan_name((PlanChanType)t), c, peer, p->ngpus - 1);
                if (peer == r)
                    return vf(&V, kp, "%s channel %d connects rank %d to itself",
                              plan_chan_name((PlanChanType)t), c, r);
            }
        if (!check_switches(&V, gp, r)) return false;
        /* remote buffers */
        plan_path_key(kp, gp, "remote_buffers");
        for (int b = 0; b < g->nremotes; b++) {
            const PlanRemote *rb = &g->remotes[b];
            plan_path_idx(ip, kp, b);
            if (rb->rank < 0 || rb->rank >= p->ngpus)
                return vf(&V, ip, "rank %d is outside 0..%d", rb->rank, p->ngpus - 1);
            if (rb->rank == r) return vf(&V, ip, "rank %d names itself", r);
            if ((unsigned)rb->type >= PLAN_BUF_COUNT) return vf(&V, ip, "invalid buffer type");
            if (!rb->access[0] && !rb->access[1])
                return vf(&V, ip, "access_channel_types is empty (expected \"memory\" and/or "
                                  "\"port\")");
        }
    }
    /* then the thread blocks, which refer to every rank's tables */
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        char gp[PLAN_PATH_MAX], kp[PLAN_PATH_MAX], ip[PLAN_PATH_MAX];
        plan_path_idx(gp, "gpus", r);
        if (g->ntbs < 0 || (g->ntbs > 0 && !g->tbs)) return vf(&V, gp, "invalid thread blocks");
        if (g->ntbs > PLAN_MAX_TBS)
            return vf(&V, gp, "%d thread blocks, more than the limit of %d", g->ntbs, PLAN_MAX_TBS);
        for (int t = 0; t < g->ntbs; t++) {
            const PlanTb *tb = &g->tbs[t];
            char tp[PLAN_PATH_MAX];
            plan_path_key(kp, gp, "threadblocks");
            plan_path_idx(tp, kp, t);
            if (tb->id != t) {
                plan_path_key(kp, tp, "id");
                return vf(&V, kp, "%d must equal the position %d", tb->id, t);
            }
            plan_path_key(kp, tp, "channels");
            int have[PLAN_CHAN_TYPES] = {g->npeers[0], g->npeers[1], g->nswitch};
            for (int ct = 0; ct < PLAN_CHAN_TYPES; ct++) {
                if (tb->nchan[ct] < 0 || tb->nchan[ct] > PLAN_MAX_TB_CHANNELS)
                    return vf(&V, kp, "%d %s channels, outside 0..%d", tb->nchan[ct],
                              plan_chan_name((PlanChanType)ct), PLAN_MAX_TB_CHANNELS);
                for (int j = 0; j < tb->nchan[ct]; j++)
                    if (tb->chan[ct][j] < 0 || tb->chan[ct][j] >= have[ct])
                        return vf(&V, kp, "%s channel_ids: %d is outside the rank's %d %s "
                                  "channel(s)", plan_chan_name((PlanChanType)ct), tb->chan[ct][j],
                                  have[ct], plan_chan_name((PlanChanType)ct));
            }
            plan_path_key(kp, tp, "remote_buffer_refs");
            for (int a = 0; a < PLAN_REMOTE_TYPES; a++) {
                if (tb->nremote[a] < 0 || tb->nremote[a] > PLAN_MAX_TB_REMOTES)
                    return vf(&V, kp, "%d %s refs, outside 0..%d", tb->nremote[a],
                              plan_chan_name((PlanChanType)a), PLAN_MAX_TB_REMOTES);
                for (int j = 0; j < tb->nremote[a]; j++) {
                    int id = tb->remote[a][j];
                    if (id < 0 || id >= g->nremotes)
                        return vf(&V, kp, "%s remote_buffer_ids: %d is outside the rank's %d "
                                  "remote buffer(s)", plan_chan_name((PlanChanType)a), id,
                                  g->nremotes);
                    if (!g->remotes[id].access[a])
                        return vf(&V, kp, "%s remote_buffer_ids: remote buffer %d is not "
                                  "accessible through \"%s\" (its access_channel_types lack it)",
                                  plan_chan_name((PlanChanType)a), id,
                                  plan_chan_name((PlanChanType)a));
                }
            }
            if (tb->nops < 0 || (tb->nops > 0 && !tb->ops)) return vf(&V, tp, "invalid ops");
            int flat = plan_tb_flat_ops(tb);
            if (p->target == PLAN_TARGET_MSCCLPP && flat > PLAN_MAX_OPS_PER_TB)
                return vf(&V, tp, "%d ops after flattening pipelines, more than MSCCL++'s "
                          "executor's limit of %d", flat, PLAN_MAX_OPS_PER_TB);
            plan_path_key(kp, tp, "ops");
            for (int i = 0; i < tb->nops; i++) {
                plan_path_idx(ip, kp, i);
                if (!check_op(&V, ip, &tb->ops[i], r, tb, false)) return false;
            }
        }
        if (!check_barriers(&V, gp, g)) return false;
    }
    return true;
}

/*
 * pass_fuse.c - instruction fusion of spec §8.6, per thread block, inside pipelines too.
 * A run of ops is folded left to right: while `cur + next` fuses, cur becomes the fused op.
 * Evaluating a pair may strip data_sync bits (a nop that pass_data_sync would add next to
 * another sync is redundant), so this must run before pass_data_sync.
 * Deviations from the DSL, all on the safe side: never exceed the executor's per-op arrays
 * (8 channel ids, 10 entries, 16 semaphores); never fuse memory puts/ppkts whose sources lie
 * in different buffers (the executor uses src[0]'s base for all, §5.4); merge two reduces only
 * when the result is what running them in sequence computes; glres gets the store offset as
 * its dst index (the DSL writes the load offset); every pipeline's inner list is fused.
 */
#include "passes.h"

#include <stdlib.h>

static bool is_nop_or_barrier(PlanOpKind k) {
    return k == PLAN_OP_NOP || k == PLAN_OP_BARRIER;
}

static bool has(int data_sync, int bit) {
    return (data_sync & bit) != 0;
}

/* "pipeline starts with sync": its first inner op synchronises the block before anything else
 * (the DSL also says so when the *last* inner op is a nop; that quirk is not reproduced). */
static bool pipe_starts_sync(const PlanOp *p) {
    if (p->kind != PLAN_OP_PIPELINE || p->ninner == 0) return false;
    const PlanOp *f = &p->inner[0];
    return is_nop_or_barrier(f->kind) || (pass_is_sync_op(f->kind) && has(f->data_sync, PLAN_SYNC_BEFORE));
}

/* "pipeline ends with sync": its last inner op synchronises the block after everything. */
static bool pipe_ends_sync(const PlanOp *p) {
    if (p->kind != PLAN_OP_PIPELINE || p->ninner == 0) return false;
    const PlanOp *l = &p->inner[p->ninner - 1];
    return is_nop_or_barrier(l->kind) || (pass_is_sync_op(l->kind) && has(l->data_sync, PLAN_SYNC_AFTER));
}

/* b already has a sync right before it: a's `after` nop would be redundant. */
static bool syncs_before(const PlanOp *b) {
    return (pass_is_sync_op(b->kind) && has(b->data_sync, PLAN_SYNC_BEFORE)) ||
           pipe_starts_sync(b) || is_nop_or_barrier(b->kind);
}

static void strip_before(PlanOp *b) {
    if (pass_is_sync_op(b->kind)) b->data_sync &= ~PLAN_SYNC_BEFORE;
}

static bool same_tbg(const PlanOp *a, const PlanOp *b) {
    if (a->tbg_size == 0 && b->tbg_size == 0) return true;
    return a->tbg_size == b->tbg_size && a->tbg_id == b->tbg_id;
}

static bool chan_in(const PlanOp *op, int c) {
    for (int i = 0; i < op->nchan; i++)
        if (op->chan_ids[i] == c) return true;
    return false;
}

/* Local entries overlap (same buffer, intersecting chunk ranges). */
static bool local_overlap(const PlanRef *x, const PlanRef *y) {
    return x->kind == PLAN_REF_LOCAL && y->kind == PLAN_REF_LOCAL && x->type == y->type &&
           x->index < y->index + y->size && y->index < x->index + x->size;
}

static void append_chans(PlanOp *a, const PlanOp *b) {
    for (int i = 0; i < b->nchan; i++) a->chan_ids[a->nchan++] = b->chan_ids[i];
}

static void append_dsts(PlanOp *a, const PlanOp *b, int from) {
    for (int i = from; i < b->ndst; i++) a->dst[a->ndst++] = b->dst[i];
}

/* Sync-op + sync-op of the same kind (§8.6 rows sem/signal/wait/flush). */
static bool fuse_sync_pair(PlanOp *a, const PlanOp *b) {
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case PLAN_OP_SEM_ACQUIRE: case PLAN_OP_SEM_RELEASE:
        if (a->nsem + b->nsem > PLAN_MAX_OP_SEMAPHORES) return false;
        for (int i = 0; i < b->nsem; i++) a->sem_ids[a->nsem++] = b->sem_ids[i];
        break;
    case PLAN_OP_SIGNAL: case PLAN_OP_RLXSIGNAL: case PLAN_OP_WAIT: case PLAN_OP_RLXWAIT:
        if (a->chan_type != b->chan_type || a->nchan + b->nchan > PLAN_MAX_OP_CHANNELS) return false;
        for (int i = 0; i < b->nchan; i++)   /* disjoint sets only: each signal counts */
            if (chan_in(a, b->chan_ids[i])) return false;
        append_chans(a, b);
        break;
    case PLAN_OP_FLUSH: {
        if (a->chan_type != b->chan_type) return false;
        int n = a->nchan;
        for (int i = 0; i < b->nchan; i++) n += !chan_in(a, b->chan_ids[i]);
        if (n > PLAN_MAX_OP_CHANNELS) return false;
        for (int i = 0; i < b->nchan; i++)
            if (!chan_in(a, b->chan_ids[i])) a->chan_ids[a->nchan++] = b->chan_ids[i];
        break;
    }
    default:
        return false;
    }
    a->data_sync |= b->data_sync;
    return true;
}

/* put/ppkt/pws/pwsf + the same op; get + get (§8.6). */
static bool fuse_transfers(PlanOp *a, const PlanOp *b) {
    if (a->kind != b->kind || a->chan_type != b->chan_type || !same_tbg(a, b)) return false;
    if (a->nsrc < 1 || b->nsrc < 1 || a->src[0].size != b->src[0].size) return false;
    if (a->nsrc + b->nsrc > PLAN_MAX_OP_ENTRIES || a->ndst + b->ndst > PLAN_MAX_OP_ENTRIES ||
        a->nchan + b->nchan > PLAN_MAX_OP_CHANNELS)
        return false;
    if (a->kind != PLAN_OP_GET && a->chan_type == PLAN_CHAN_MEMORY) {
        /* §5.4 / §9.5: the executor reads every source at the base of src[0]'s buffer type */
        for (int i = 0; i < b->nsrc; i++)
            if (b->src[i].kind != a->src[0].kind || b->src[i].type != a->src[0].type) return false;
    }
    for (int i = 0; i < b->nsrc; i++) a->src[a->nsrc++] = b->src[i];
    append_dsts(a, b, 0);
    append_chans(a, b);
    return true;
}

/* rppkt + rppkt from identical sources: one read, more destinations. */
static bool fuse_rppkt(PlanOp *a, const PlanOp *b) {
    if (b->kind != PLAN_OP_RPPKT || a->chan_type != b->chan_type || !same_tbg(a, b)) return false;
    if (a->nsrc != b->nsrc) return false;
    for (int i = 0; i < a->nsrc; i++)
        if (!pass_ref_eq(&a->src[i], &b->src[i])) return false;
    if (a->ndst + b->ndst > PLAN_MAX_OP_ENTRIES || a->nchan + b->nchan > PLAN_MAX_OP_CHANNELS)
        return false;
    append_dsts(a, b, 0);
    append_chans(a, b);
    return true;
}

/* re/repkt/rre + the same op accumulating into the same place. The DSL only asks for an equal
 * first source and equal dst; sequentially the second op would then overwrite the first's
 * result unless dst == src[0], so we also ask for that, and that b's other local sources do not
 * read what a just wrote. */
static bool fuse_reduces(PlanOp *a, const PlanOp *b) {
    if (a->kind != b->kind || a->chan_type != b->chan_type || a->reduce_op != b->reduce_op ||
        !same_tbg(a, b))
        return false;
    if (a->ndst != 1 || b->ndst != 1 || a->nsrc < 1 || b->nsrc < 1) return false;
    if (!pass_ref_eq(&a->src[0], &b->src[0]) || !pass_ref_eq(&a->dst[0], &b->dst[0])) return false;
    if (!pass_ref_eq(&a->dst[0], &a->src[0])) return false;
    if (a->nsrc + b->nsrc - 1 > PLAN_MAX_OP_ENTRIES || a->nchan + b->nchan > PLAN_MAX_OP_CHANNELS)
        return false;
    for (int i = 1; i < b->nsrc; i++)
        if (local_overlap(&b->src[i], &a->dst[0])) return false;
    /* src order: a's locals, b's locals after its first, a's remotes, b's remotes */
    PlanRef merged[2 * PLAN_MAX_OP_ENTRIES];
    int n = 0;
    for (int i = 0; i < a->nsrc; i++)
        if (a->src[i].kind == PLAN_REF_LOCAL) merged[n++] = a->src[i];
    for (int i = 1; i < b->nsrc; i++)
        if (b->src[i].kind == PLAN_REF_LOCAL) merged[n++] = b->src[i];
    for (int i = 0; i < a->nsrc; i++)
        if (a->src[i].kind != PLAN_REF_LOCAL) merged[n++] = a->src[i];
    for (int i = 1; i < b->nsrc; i++)
        if (b->src[i].kind != PLAN_REF_LOCAL) merged[n++] = b->src[i];
    for (int i = 0; i < n; i++) a->src[i] = merged[i];
    a->nsrc = n;
    append_chans(a, b);
    return true;
}

/* b is a single-source memory op reading exactly `from`, with destinations that fit after a's. */
static bool forwards(const PlanOp *a, const PlanOp *b, const PlanRef *from, PlanOpKind kind) {
    if (b->kind != kind || b->chan_type != PLAN_CHAN_MEMORY || !same_tbg(a, b)) return false;
    if (b->nsrc != 1 || !pass_ref_eq(&b->src[0], from)) return false;
    if (a->ndst + b->ndst > PLAN_MAX_OP_ENTRIES) return false;
    for (int i = 0; i < b->ndst; i++)
        if (b->dst[i].size != from->size) return false;
    return true;
}

/* re/res/rre/rres + memory put of the result; repkt/respkt + memory ppkt of the result;
 * repkt + cpkt of the result; recpkt/recspkt + memory ppkt of the result or rppkt of the
 * packet copy (§8.6 reduce -> *send rows). */
static bool fuse_reduce_send(PlanOp *a, const PlanOp *b) {
    if (a->ndst < 1 || a->dst[0].kind != PLAN_REF_LOCAL) return false;
    if (a->chan_type != PLAN_CHAN_NONE && a->chan_type != PLAN_CHAN_MEMORY) return false;
    switch (a->kind) {
    case PLAN_OP_RE: case PLAN_OP_RES: case PLAN_OP_RRE: case PLAN_OP_RRES:
        if (!forwards(a, b, &a->dst[0], PLAN_OP_PUT)) return false;
        a->kind = a->kind == PLAN_OP_RE || a->kind == PLAN_OP_RES ? PLAN_OP_RES : PLAN_OP_RRES;
        break;
    case PLAN_OP_REPKT:
        if (b->kind == PLAN_OP_CPKT) {
            if (a->ndst != 1 || !same_tbg(a, b) || b->nsrc != 1 || b->ndst != 1 ||
                !pass_ref_eq(&b->src[0], &a->dst[0]) || b->dst[0].kind != PLAN_REF_LOCAL)
                return false;
            a->kind = PLAN_OP_RECPKT;
            a->dst[a->ndst++] = b->dst[0];
            return true;
        }
        if (!forwards(a, b, &a->dst[0], PLAN_OP_PPKT)) return false;
        a->kind = PLAN_OP_RESPKT;
        break;
    case PLAN_OP_RESPKT:
        if (!forwards(a, b, &a->dst[0], PLAN_OP_PPKT)) return false;
        a->kind = PLAN_OP_RESPKT;
        break;
    case PLAN_OP_RECPKT: case PLAN_OP_RECSPKT:
        if (a->ndst < 2) return false;
        if (!forwards(a, b, &a->dst[0], PLAN_OP_PPKT) && !forwards(a, b, &a->dst[1], PLAN_OP_RPPKT))
            return false;
        a->kind = PLAN_OP_RECSPKT;
        break;
    default:
        return false;
    }
    a->chan_type = PLAN_CHAN_MEMORY;
    append_dsts(a, b, 0);
    return true;
}

/* glre + gstore of its result to the same switch channel -> glres (load offset -> store offset). */
static bool fuse_glres(PlanOp *a, const PlanOp *b) {
    if (!pass_is_glre(a) || b->kind != PLAN_OP_GSTORE) return false;
    if (a->nsrc != 1 || b->nsrc != 1 || b->ndst != 1) return false;
    if (a->chan_type != b->chan_type || !same_tbg(a, b)) return false;
    const PlanRef *ld = &a->src[0], *st = &b->dst[0], *mid = &a->dst[0], *bs = &b->src[0];
    if (ld->kind != PLAN_REF_SWITCH || st->kind != PLAN_REF_SWITCH || ld->id != st->id ||
        ld->size != st->size)
        return false;
    if (!pass_ref_eq(mid, bs) || (mid->rank >= 0 && bs->rank >= 0 && mid->rank != bs->rank))
        return false;
    a->dst[0] = *st;
    a->ndst = 1;
    return true;
}

/* a + b (§8.6). Returns true when b was folded into a. May clear data_sync bits of a or b. */
static bool fuse_pair(PlanOp *a, PlanOp *b) {
    switch (a->kind) {
    case PLAN_OP_NOP:
        if (b->kind == PLAN_OP_NOP) return true;
        if (b->kind == PLAN_OP_BARRIER || pipe_starts_sync(b)) {
            PlanOp t = *a;   /* a nop owns nothing; b takes its place */
            *a = *b;
            *b = t;
            return true;
        }
        strip_before(b);
        return false;
    case PLAN_OP_BARRIER:
        if (b->kind == PLAN_OP_NOP) return true;
        strip_before(b);
        return false;
    case PLAN_OP_PIPELINE:
        if (!pipe_ends_sync(a)) return false;
        if (b->kind == PLAN_OP_NOP) return true;
        strip_before(b);
        return false;
    default:
        break;
    }
    if (pass_is_sync_op(a->kind)) {
        if (pass_is_sync_op(b->kind) && fuse_sync_pair(a, b)) return true;
        if (syncs_before(b)) a->data_sync &= ~PLAN_SYNC_AFTER;
        return false;
    }
    switch (a->kind) {
    case PLAN_OP_GET: case PLAN_OP_PUT: case PLAN_OP_PPKT: case PLAN_OP_PWS: case PLAN_OP_PWSF:
        return fuse_transfers(a, b);
    case PLAN_OP_RPPKT:
        return fuse_rppkt(a, b);
    case PLAN_OP_RE: case PLAN_OP_REPKT: case PLAN_OP_RRE:
        if (a->kind == b->kind) return fuse_reduces(a, b);
        return fuse_reduce_send(a, b);
    case PLAN_OP_RES: case PLAN_OP_RRES: case PLAN_OP_RESPKT: case PLAN_OP_RECPKT:
    case PLAN_OP_RECSPKT:
        return fuse_reduce_send(a, b);
    case PLAN_OP_GLRES:
        return fuse_glres(a, b);
    default:
        return false;
    }
}

/* Fuses ops[0..*n) in place; inner lists of pipelines first. */
static void fuse_list(PlanOp *ops, int *n) {
    for (int i = 0; i < *n; i++)
        if (ops[i].kind == PLAN_OP_PIPELINE) fuse_list(ops[i].inner, &ops[i].ninner);
    int w = 0;
    for (int i = 0; i < *n;) {
        PlanOp cur = ops[i];
        int j = i + 1;
        while (j < *n && fuse_pair(&cur, &ops[j])) {
            plan_op_release(&ops[j]);   /* what was folded away (a nop, or a data op) */
            j++;
        }
        ops[w++] = cur;
        i = j;
    }
    *n = w;
}

bool pass_fuse(Plan *p, Diag *d) {
    (void)d;
    for (int r = 0; r < p->ngpus; r++)
        for (int t = 0; t < p->gpus[r].ntbs; t++)
            fuse_list(p->gpus[r].tbs[t].ops, &p->gpus[r].tbs[t].nops);
    return true;
}

/*
 * pass_auto_sync.c - data-dependency syncs inside a thread block (spec §8.7). Threads of a block
 * are not synchronised between ops, so when an op touches local chunks that an earlier op wrote
 * (or writes chunks an earlier op read) since the last nop/barrier, a `nop` goes in front of it.
 * Runs after pass_data_sync, whose nops end the windows. Pipelines: the inner list is handled
 * with a fresh window, and the pipeline counts as one op (the union of its inner accesses).
 * Recorded accesses follow §8.7, with two safe additions: a packet reduce's plain first source
 * is recorded as a read, and gstore's local source is recorded as a read.
 */
#include "passes.h"

#include <stdlib.h>

typedef struct {
    PlanBuf buf;
    uint32_t lo, hi;   /* chunk range [lo, hi) */
    bool write;
    int op;            /* position of the op in its list */
} Access;

typedef struct {
    Access *a;
    int n, cap;
    bool oom;
} AccessSet;

static void add(AccessSet *s, const PlanRef *ref, bool write, int op) {
    if (ref->kind != PLAN_REF_LOCAL || ref->size == 0) return;
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 16;
        Access *a = realloc(s->a, (size_t)cap * sizeof *a);
        if (!a) {
            s->oom = true;
            return;
        }
        s->a = a;
        s->cap = cap;
    }
    s->a[s->n++] = (Access){ref->type, ref->index, ref->index + ref->size, write, op};
}

/* The local accesses of one op (a pipeline: of all its inner ops), tagged with `pos`. */
static void op_accesses(const PlanOp *op, int pos, AccessSet *s) {
    switch (op->kind) {
    case PLAN_OP_COPY:
        for (int i = 0; i < op->nsrc; i++) add(s, &op->src[i], false, pos);
        for (int i = 0; i < op->ndst; i++) add(s, &op->dst[i], true, pos);
        break;
    case PLAN_OP_UPKT:   /* packet source: flag-checked, needs no block sync */
        for (int i = 0; i < op->ndst; i++) add(s, &op->dst[i], true, pos);
        break;
    case PLAN_OP_CPKT:   /* packet destination: flag-checked */
    case PLAN_OP_PUT: case PLAN_OP_PPKT: case PLAN_OP_PWS: case PLAN_OP_PWSF:
    case PLAN_OP_GSTORE:
        for (int i = 0; i < op->nsrc; i++) add(s, &op->src[i], false, pos);
        break;
    case PLAN_OP_GET:
        for (int i = 0; i < op->ndst; i++) add(s, &op->dst[i], true, pos);
        break;
    case PLAN_OP_RE: case PLAN_OP_RES: case PLAN_OP_RRE: case PLAN_OP_RRES:
    case PLAN_OP_REPKT: case PLAN_OP_RESPKT: case PLAN_OP_RECPKT: case PLAN_OP_RECSPKT:
        for (int i = 0; i < op->nsrc; i++) add(s, &op->src[i], false, pos);
        if (op->ndst > 0) add(s, &op->dst[0], true, pos);   /* packet/remote dsts: not recorded */
        break;
    case PLAN_OP_PIPELINE:
        for (int i = 0; i < op->ninner; i++) op_accesses(&op->inner[i], pos, s);
        break;
    default:   /* sync ops, rppkt, glres, gstorepkt: no local plain-data access */
        break;
    }
}

static bool conflicts(const AccessSet *win, const AccessSet *cur) {
    for (int i = 0; i < cur->n; i++)
        for (int j = 0; j < win->n; j++) {
            const Access *x = &cur->a[i], *y = &win->a[j];
            if (x->op != y->op && x->buf == y->buf && x->lo < y->hi && y->lo < x->hi &&
                (x->write || y->write))
                return true;
        }
    return false;
}

/* Marks the ops of ops[0..n) (top level only) that need a nop in front (nop_before[i], may be
 * NULL to only count); returns how many, or -1 on OOM. */
static int mark_list(const PlanOp *ops, int n, bool *nop_before) {
    AccessSet win = {0}, cur = {0};
    int added = 0;
    for (int i = 0; i < n; i++) {
        const PlanOp *op = &ops[i];
        if (op->kind == PLAN_OP_NOP || op->kind == PLAN_OP_BARRIER) {
            win.n = 0;
            continue;
        }
        cur.n = 0;
        op_accesses(op, i, &cur);
        if (conflicts(&win, &cur)) {
            if (nop_before) nop_before[i] = true;
            added++;
            win.n = 0;
        }
        for (int k = 0; k < cur.n; k++) add(&win, &(PlanRef){.kind = PLAN_REF_LOCAL,
                                                              .type = cur.a[k].buf,
                                                              .index = cur.a[k].lo,
                                                              .size = cur.a[k].hi - cur.a[k].lo},
                                            cur.a[k].write, i);
    }
    bool ok = !win.oom && !cur.oom;
    free(win.a);
    free(cur.a);
    return ok ? added : -1;
}

/* The nops sync_list would insert into ops[0..n), pipelines' inner lists included; -1 on OOM. */
static long count_list(const PlanOp *ops, int n) {
    long added = mark_list(ops, n, NULL);
    for (int i = 0; i < n && added >= 0; i++)
        if (ops[i].kind == PLAN_OP_PIPELINE) {
            long inner = count_list(ops[i].inner, ops[i].ninner);
            added = inner < 0 ? -1 : added + inner;
        }
    return added;
}

/* Inserts the nops into ops[0..*n); false on OOM. */
static bool sync_list(PlanOp **ops, int *n, int *cap, PlanLoc *oom_at) {
    for (int i = 0; i < *n; i++)
        if ((*ops)[i].kind == PLAN_OP_PIPELINE &&
            !sync_list(&(*ops)[i].inner, &(*ops)[i].ninner, NULL, oom_at))
            return false;
    bool *nop_before = calloc((size_t)(*n > 0 ? *n : 1), sizeof *nop_before);
    if (!nop_before) return false;
    int added = mark_list(*ops, *n, nop_before);
    bool ok = added >= 0;
    PlanOp *out = NULL;
    if (ok && added > 0) {
        out = calloc((size_t)(*n + added), sizeof *out);
        ok = out != NULL;
    }
    if (ok && added > 0) {
        int w = 0;
        for (int i = 0; i < *n; i++) {
            if (nop_before[i]) {
                plan_op_init(&out[w], PLAN_OP_NOP);
                out[w++].loc = (*ops)[i].loc;
            }
            out[w++] = (*ops)[i];
        }
        free(*ops);
        *ops = out;
        *n = w;
        if (cap) *cap = w;
    }
    if (!ok && *n > 0) *oom_at = (*ops)[0].loc;
    free(nop_before);
    return ok;
}

long pass_auto_sync_count(const Plan *p) {
    long added = 0;
    for (int r = 0; r < p->ngpus && added >= 0; r++)
        for (int t = 0; t < p->gpus[r].ntbs && added >= 0; t++) {
            const PlanTb *tb = &p->gpus[r].tbs[t];
            long n = count_list(tb->ops, tb->nops);
            added = n < 0 ? -1 : added + n;
        }
    return added;
}

bool pass_auto_sync(Plan *p, Diag *d) {
    for (int r = 0; r < p->ngpus; r++)
        for (int t = 0; t < p->gpus[r].ntbs; t++) {
            PlanTb *tb = &p->gpus[r].tbs[t];
            PlanLoc at = {0, 0};
            if (!sync_list(&tb->ops, &tb->nops, &tb->cap_ops, &at)) {
                diag_error(d, at, "out of memory inserting data-dependency syncs (rank %d tb %d)", r, t);
                return false;
            }
        }
    return true;
}

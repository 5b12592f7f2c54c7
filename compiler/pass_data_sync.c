/*
 * pass_data_sync.c - spec §8.5 step 3: a sync op (signal, wait, rlx*, flush, sem_*) only orders
 * the threads that run it, so a `nop` (__syncthreads) goes before it when its data_sync has
 * `before` and after it when it has `after`; inside pipelines too. Runs after pass_fuse (which
 * strips redundant bits), then clears data_sync everywhere: it never reaches the JSON.
 */
#include "passes.h"

#include <stdlib.h>

static int extra_nops(const PlanOp *op) {
    if (!pass_is_sync_op(op->kind)) return 0;
    return ((op->data_sync & PLAN_SYNC_BEFORE) != 0) + ((op->data_sync & PLAN_SYNC_AFTER) != 0);
}

/* Rewrites ops[0..*n) into a new array with the nops; *ops is replaced (and the old array
 * freed) on success. */
static bool expand(PlanOp **ops, int *n, int *cap) {
    for (int i = 0; i < *n; i++)
        if ((*ops)[i].kind == PLAN_OP_PIPELINE &&
            !expand(&(*ops)[i].inner, &(*ops)[i].ninner, NULL))
            return false;
    int total = *n;
    for (int i = 0; i < *n; i++) total += extra_nops(&(*ops)[i]);
    if (total == *n) {
        for (int i = 0; i < *n; i++) (*ops)[i].data_sync = 0;
        return true;
    }
    PlanOp *out = calloc((size_t)total, sizeof *out);
    if (!out) return false;
    int w = 0;
    for (int i = 0; i < *n; i++) {
        PlanOp *op = &(*ops)[i];
        PlanOp nop;
        plan_op_init(&nop, PLAN_OP_NOP);
        nop.loc = op->loc;
        bool before = pass_is_sync_op(op->kind) && (op->data_sync & PLAN_SYNC_BEFORE);
        bool after = pass_is_sync_op(op->kind) && (op->data_sync & PLAN_SYNC_AFTER);
        if (before) out[w++] = nop;
        out[w] = *op;
        out[w++].data_sync = 0;
        if (after) out[w++] = nop;
    }
    free(*ops);
    *ops = out;
    *n = total;
    if (cap) *cap = total;
    return true;
}

bool pass_data_sync(Plan *p, Diag *d) {
    for (int r = 0; r < p->ngpus; r++)
        for (int t = 0; t < p->gpus[r].ntbs; t++) {
            PlanTb *tb = &p->gpus[r].tbs[t];
            if (!expand(&tb->ops, &tb->nops, &tb->cap_ops)) {
                diag_error(d, (PlanLoc){0, 0}, "out of memory inserting syncs (rank %d tb %d)", r, t);
                return false;
            }
        }
    return true;
}

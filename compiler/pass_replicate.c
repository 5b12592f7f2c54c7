/*
 * pass_replicate.c - instance replication, policy `interleaved` (spec §8.8), applied exactly
 * once (the DSL's DslCompiler applies it twice). Chunk counts, channel lists, switch channels and
 * semaphores are repeated `instances` times; TB t becomes TBs t·I+i whose GPU-level channel ids
 * c become c·I+i, semaphore ids s·I+i, barrier ids b·I+i and chunk indices index·I+i·size.
 * TB-local indices and remote_buffers are unchanged. Runs after every pass that reasons about
 * the indices as written.
 */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

static void shift_op(PlanOp *op, int I, int i) {
    for (int k = 0; k < op->nsrc; k++)
        op->src[k].index = op->src[k].index * (uint32_t)I + (uint32_t)i * op->src[k].size;
    for (int k = 0; k < op->ndst; k++)
        op->dst[k].index = op->dst[k].index * (uint32_t)I + (uint32_t)i * op->dst[k].size;
    for (int k = 0; k < op->nsem; k++) op->sem_ids[k] = op->sem_ids[k] * I + i;
    if (op->kind == PLAN_OP_BARRIER) op->barrier_id = op->barrier_id * I + i;
    for (int k = 0; k < op->ninner; k++) shift_op(&op->inner[k], I, i);
}

/* Each element of arr[0..*n) repeated I times in a row; false on OOM (arr unchanged). */
static bool repeat_ints(int **arr, int *n, int I) {
    if (*n == 0) return true;
    int *out = malloc((size_t)*n * (size_t)I * sizeof *out);
    if (!out) return false;
    for (int k = 0; k < *n; k++)
        for (int i = 0; i < I; i++) out[k * I + i] = (*arr)[k];
    free(*arr);
    *arr = out;
    *n *= I;
    return true;
}

static bool repeat_switches(PlanGpu *g, int I) {
    if (g->nswitch == 0) return true;
    PlanSwitch *out = calloc((size_t)g->nswitch * (size_t)I, sizeof *out);
    if (!out) return false;
    for (int k = 0; k < g->nswitch; k++)
        for (int i = 0; i < I; i++) {
            PlanSwitch *s = &out[k * I + i];
            s->buf = g->switches[k].buf;
            s->nranks = g->switches[k].nranks;
            s->ranks = malloc((size_t)(s->nranks > 0 ? s->nranks : 1) * sizeof(int));
            if (!s->ranks) {
                for (int j = 0; j < k * I + i; j++) free(out[j].ranks);
                free(out);
                return false;
            }
            memcpy(s->ranks, g->switches[k].ranks, (size_t)s->nranks * sizeof(int));
        }
    for (int k = 0; k < g->nswitch; k++) free(g->switches[k].ranks);
    free(g->switches);
    g->switches = out;
    g->nswitch *= I;
    return true;
}

static void free_tbs(PlanTb *tbs, int n) {
    for (int t = 0; t < n; t++) {
        for (int k = 0; k < tbs[t].nops; k++) plan_op_release(&tbs[t].ops[k]);
        free(tbs[t].ops);
    }
    free(tbs);
}

static bool replicate_tbs(PlanGpu *g, int I) {
    if (g->ntbs == 0) return true;
    int n = g->ntbs * I;
    PlanTb *out = calloc((size_t)n, sizeof *out);
    if (!out) return false;
    for (int t = 0; t < g->ntbs; t++)
        for (int i = 0; i < I; i++) {
            const PlanTb *src = &g->tbs[t];
            PlanTb *dst = &out[t * I + i];
            *dst = *src;
            dst->id = t * I + i;
            dst->ops = NULL;
            dst->nops = dst->cap_ops = 0;
            for (int ty = 0; ty < PLAN_CHAN_TYPES; ty++)
                for (int c = 0; c < dst->nchan[ty]; c++) dst->chan[ty][c] = src->chan[ty][c] * I + i;
            for (int k = 0; k < src->nops; k++) {
                if (!plan_tb_append(dst, &src->ops[k])) {
                    free_tbs(out, t * I + i + 1);
                    return false;
                }
                shift_op(&dst->ops[dst->nops - 1], I, i);
            }
        }
    free_tbs(g->tbs, g->ntbs);
    g->tbs = out;
    g->ntbs = n;
    return true;
}

bool pass_replicate(Plan *p, int instances, Diag *d) {
    if (instances < 1) {
        diag_error(d, (PlanLoc){0, 0}, "instances must be at least 1, got %d", instances);
        return false;
    }
    if (instances == 1) return true;
    int I = instances;
    for (int r = 0; r < p->ngpus; r++) {
        PlanGpu *g = &p->gpus[r];
        uint64_t big = (uint64_t)g->scratch_chunks * (uint64_t)I;
        if ((uint64_t)g->input_chunks * (uint64_t)I > UINT32_MAX ||
            (uint64_t)g->output_chunks * (uint64_t)I > UINT32_MAX || big > UINT32_MAX) {
            diag_error(d, (PlanLoc){0, 0},
                       "rank %d: %d instances make more than 2^32 chunks", r, I);
            return false;
        }
        g->input_chunks *= (uint32_t)I;
        g->output_chunks *= (uint32_t)I;
        g->scratch_chunks *= (uint32_t)I;
        if (!repeat_ints(&g->peers[0], &g->npeers[0], I) ||
            !repeat_ints(&g->peers[1], &g->npeers[1], I) ||
            !repeat_ints(&g->sem_init, &g->nsems, I) || !repeat_switches(g, I) ||
            !replicate_tbs(g, I)) {
            diag_error(d, (PlanLoc){0, 0}, "out of memory replicating rank %d", r);
            return false;
        }
    }
    return true;
}

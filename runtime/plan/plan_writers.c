/*
 * plan_writers.c - which operations of a plan write a given chunk of a rank's buffer: local
 * destinations on that rank and remote destinations of any rank that reach it through a
 * channel. mscclrt-run and the check helpers use it to say, when a check fails, which rank,
 * thread block and op produced (or should have produced) the wrong element.
 */
#include "plan.h"

#include <stddef.h>

/* Whether destination `e` of `op` (rank r, thread block tb) lands in `buf` of rank `owner`. */
static bool lands(const Plan *p, int r, const PlanTb *tb, const PlanOp *op, const PlanRef *e,
                  int owner, PlanBuf buf) {
    if (e->kind == PLAN_REF_LOCAL) return r == owner && e->type == buf;
    if (e->kind != PLAN_REF_REMOTE) return false;   /* switch: every member; not attributed */
    if (op->chan_type != PLAN_CHAN_MEMORY && op->chan_type != PLAN_CHAN_PORT) return false;
    int a = (int)op->chan_type;
    if (e->id < 0 || e->id >= tb->nremote[a]) return false;
    int b = tb->remote[a][e->id];
    const PlanGpu *g = &p->gpus[r];
    if (b < 0 || b >= g->nremotes) return false;
    return g->remotes[b].rank == owner && g->remotes[b].type == buf;
}

int plan_chunk_writers(const Plan *p, int owner, PlanBuf buf, uint64_t chunk, PlanWriter *out,
                       int max) {
    int n = 0;
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        for (int t = 0; t < g->ntbs; t++) {
            const PlanTb *tb = &g->tbs[t];
            PlanWriter last = {-1, -1, -1, -1, PLAN_OP_NOP};   /* in program order */
            for (int i = 0; i < tb->nops; i++) {
                const PlanOp *top = &tb->ops[i];
                bool pipe = top->kind == PLAN_OP_PIPELINE;
                for (int j = 0; j < (pipe ? top->ninner : 1); j++) {
                    const PlanOp *op = pipe ? &top->inner[j] : top;
                    for (int k = 0; k < op->ndst && k < PLAN_MAX_OP_ENTRIES; k++) {
                        const PlanRef *e = &op->dst[k];
                        /* a pipeline's inner ops move their window each iteration: any chunk
                         * of the buffer may be theirs */
                        bool covers = pipe || (chunk >= e->index && chunk < (uint64_t)e->index + e->size);
                        if (covers && lands(p, r, tb, op, e, owner, buf)) {
                            last = (PlanWriter){r, t, i, pipe ? j : -1, op->kind};
                            break;
                        }
                    }
                }
            }
            if (last.rank < 0) continue;
            if (n < max) out[n] = last;
            n++;
        }
    }
    return n;
}

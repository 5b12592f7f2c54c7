/*
 * plan_relabel.c - the same plan with its ranks' roles permuted: rank r runs the program that
 * rank role[r] had, and every rank that program names (channel peers, remote buffers, switch
 * groups, gstore sources) is translated to the rank now playing it. A rooted plan written for
 * root 0 serves root k this way (algo_rooted.c), as long as the permutation keeps each node's
 * ranks together, since memory channels must stay inside a node. Where one buffer holds a
 * chunk per rank (gather's output, scatter's input), chunk c belongs to the rank playing c:
 * its one-chunk references are renumbered too.
 */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* indexed: the buffer whose chunk c is rank c's (-1: none). False when a reference to it spans
 * several chunks, which would no longer be contiguous. */
static bool relabel_refs(PlanRef *refs, int n, const int *actual, int indexed) {
    for (int i = 0; i < n; i++) {
        if (refs[i].rank >= 0) refs[i].rank = actual[refs[i].rank];
        if (indexed < 0 || refs[i].kind != PLAN_REF_LOCAL || (int)refs[i].type != indexed)
            continue;
        if (refs[i].size != 1) return false;
        refs[i].index = (uint32_t)actual[refs[i].index];
    }
    return true;
}

static bool relabel_ops(PlanOp *ops, int n, const int *actual, int indexed) {
    for (int i = 0; i < n; i++)
        if (!relabel_refs(ops[i].src, ops[i].nsrc, actual, indexed) ||
            !relabel_refs(ops[i].dst, ops[i].ndst, actual, indexed) ||
            (ops[i].ninner && !relabel_ops(ops[i].inner, ops[i].ninner, actual, indexed)))
            return false;
    return true;
}

static bool relabel_gpu(PlanGpu *g, int rank, const int *actual, int indexed) {
    g->id = rank;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < g->npeers[k]; i++) g->peers[k][i] = actual[g->peers[k][i]];
    for (int s = 0; s < g->nswitch; s++)
        for (int i = 0; i < g->switches[s].nranks; i++)
            g->switches[s].ranks[i] = actual[g->switches[s].ranks[i]];
    for (int i = 0; i < g->nremotes; i++) {
        g->remotes[i].rank = actual[g->remotes[i].rank];
        if ((int)g->remotes[i].type == indexed) return false;   /* peers index it: not renumbered */
    }
    for (int t = 0; t < g->ntbs; t++)
        if (!relabel_ops(g->tbs[t].ops, g->tbs[t].nops, actual, indexed)) return false;
    return true;
}

Plan *plan_relabel(const Plan *p, const int *role, int indexed, PlanErr *err) {
    const int n = p->ngpus;
    int *actual = malloc((size_t)n * sizeof *actual);   /* plan rank -> the rank playing it */
    if (!actual) {
        snprintf(err->msg, sizeof err->msg, "plan '%s': out of memory", p->name);
        return NULL;
    }
    for (int q = 0; q < n; q++) actual[q] = -1;
    for (int r = 0; r < n; r++) {
        if (role[r] < 0 || role[r] >= n || actual[role[r]] >= 0) {
            snprintf(err->msg, sizeof err->msg, "plan '%s': relabelling: rank %d's role %d is "
                     "%s", p->name, r, role[r], role[r] < 0 || role[r] >= n
                     ? "out of range" : "taken twice (not a permutation)");
            free(actual);
            return NULL;
        }
        actual[role[r]] = r;
    }
    Plan *c = plan_clone(p);
    PlanGpu *gpus = c ? malloc((size_t)n * sizeof *gpus) : NULL;
    if (!gpus) {
        snprintf(err->msg, sizeof err->msg, "plan '%s': out of memory", p->name);
        plan_free(c);
        free(actual);
        return NULL;
    }
    /* move each program to the rank that plays it (the structs own their arrays: moved, not
     * copied), then translate the ranks it names */
    for (int r = 0; r < n; r++) gpus[r] = c->gpus[role[r]];
    free(c->gpus);
    c->gpus = gpus;
    for (int r = 0; r < n; r++)
        if (!relabel_gpu(&c->gpus[r], r, actual, indexed)) {
            snprintf(err->msg, sizeof err->msg, "plan '%s': rank %d reaches chunks of its %s by "
                     "ranges or through peers, which a relabelling cannot renumber", p->name, r,
                     indexed == PLAN_BUF_INPUT ? "input" : "output");
            plan_free(c);
            free(actual);
            return NULL;
        }
    free(actual);
    return c;
}

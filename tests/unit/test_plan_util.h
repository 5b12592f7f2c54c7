/*
 * test_plan_util.h - helpers shared by the plan tests: deep comparison of two plan models
 * (reporting the first difference) and reading a whole file.
 */
#ifndef TEST_PLAN_UTIL_H
#define TEST_PLAN_UTIL_H
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMPAT_DIR "tests/plans/compat/"

static const char *const compat_plans[] = {
    "allreduce", "allreduce_packet", "reduce", "reduce_nvls", "reduce_pack", "reduce_tbg",
    "transfer_pack",
};
#define NCOMPAT ((int)(sizeof compat_plans / sizeof compat_plans[0]))

/* malloc'd file contents (NUL-terminated), NULL if unreadable */
static inline char *tp_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    size_t r;
    while (b && (r = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) { free(b); b = NULL; }
            else b = nb;
        }
    }
    fclose(f);
    if (b) b[n] = '\0';
    if (len) *len = n;
    return b;
}

static inline bool tp_ref_eq(const PlanRef *a, const PlanRef *b) {
    return a->kind == b->kind && (a->kind != PLAN_REF_LOCAL || a->type == b->type) &&
           (a->kind == PLAN_REF_LOCAL || a->id == b->id) && a->index == b->index &&
           a->size == b->size && a->rank == b->rank;
}

static inline bool tp_op_eq(const PlanOp *a, const PlanOp *b, char *why, size_t n) {
#define D(c, ...) do { if (!(c)) { snprintf(why, n, __VA_ARGS__); return false; } } while (0)
    D(a->kind == b->kind, "op kind %d vs %d", a->kind, b->kind);
    D(a->chan_type == b->chan_type, "chan_type");
    D(a->nchan == b->nchan && !memcmp(a->chan_ids, b->chan_ids, sizeof(int) * (size_t)a->nchan),
      "channel_ids");
    D(a->nsrc == b->nsrc && a->ndst == b->ndst, "entry counts");
    for (int i = 0; i < a->nsrc; i++) D(tp_ref_eq(&a->src[i], &b->src[i]), "src[%d]", i);
    for (int i = 0; i < a->ndst; i++) D(tp_ref_eq(&a->dst[i], &b->dst[i]), "dst[%d]", i);
    D(a->nsem == b->nsem && !memcmp(a->sem_ids, b->sem_ids, sizeof(int) * (size_t)a->nsem), "sems");
    D(a->kind != PLAN_OP_BARRIER || (a->barrier_id == b->barrier_id &&
      a->num_threadblocks == b->num_threadblocks), "barrier");
    D(a->tbg_size == b->tbg_size && (a->tbg_size == 0 || a->tbg_id == b->tbg_id), "tbg");
    D(a->reduce_op == b->reduce_op, "reduce_op");
    D(a->unit_size == b->unit_size && a->num_chunks == b->num_chunks, "iter_context");
    D(a->ninner == b->ninner, "ninner");
    for (int i = 0; i < a->ninner; i++)
        if (!tp_op_eq(&a->inner[i], &b->inner[i], why, n)) return false;
    return true;
}

/* true if equal; else why says where they differ */
static inline bool tp_plan_eq(const Plan *a, const Plan *b, char *why, size_t n) {
    D(!strcmp(a->name, b->name), "name");
    D(a->collective == b->collective && !strcmp(a->collective_name, b->collective_name), "coll");
    D(a->protocol_ll == b->protocol_ll && a->inplace == b->inplace &&
      a->reuse_resources == b->reuse_resources && a->threads == b->threads &&
      a->double_scratch == b->double_scratch && a->alignment == b->alignment &&
      a->min_size == b->min_size && a->max_size == b->max_size, "top-level scalars");
    D(a->ntags == b->ntags, "ntags");
    for (int i = 0; i < a->ntags; i++) D(!strcmp(a->tags[i], b->tags[i]), "tag %d", i);
    D(a->ngpus == b->ngpus, "ngpus");
    for (int r = 0; r < a->ngpus; r++) {
        const PlanGpu *g = &a->gpus[r], *h = &b->gpus[r];
        D(g->id == h->id && g->input_chunks == h->input_chunks &&
          g->output_chunks == h->output_chunks && g->scratch_chunks == h->scratch_chunks,
          "gpu %d scalars", r);
        for (int t = 0; t < 2; t++)
            D(g->npeers[t] == h->npeers[t] && (g->npeers[t] == 0 ||
              !memcmp(g->peers[t], h->peers[t], sizeof(int) * (size_t)g->npeers[t])),
              "gpu %d peers", r);
        D(g->nswitch == h->nswitch, "gpu %d nswitch", r);
        for (int s = 0; s < g->nswitch; s++)
            D(g->switches[s].buf == h->switches[s].buf &&
              g->switches[s].nranks == h->switches[s].nranks &&
              !memcmp(g->switches[s].ranks, h->switches[s].ranks,
                      sizeof(int) * (size_t)g->switches[s].nranks), "gpu %d switch %d", r, s);
        D(g->nremotes == h->nremotes, "gpu %d nremotes", r);
        for (int i = 0; i < g->nremotes; i++)
            D(g->remotes[i].rank == h->remotes[i].rank && g->remotes[i].type == h->remotes[i].type
              && g->remotes[i].access[0] == h->remotes[i].access[0] &&
              g->remotes[i].access[1] == h->remotes[i].access[1], "gpu %d remote %d", r, i);
        D(g->nsems == h->nsems && (g->nsems == 0 ||
          !memcmp(g->sem_init, h->sem_init, sizeof(int) * (size_t)g->nsems)), "gpu %d sems", r);
        D(g->ntbs == h->ntbs, "gpu %d ntbs", r);
        for (int t = 0; t < g->ntbs; t++) {
            const PlanTb *x = &g->tbs[t], *y = &h->tbs[t];
            D(x->id == y->id && x->nops == y->nops, "gpu %d tb %d", r, t);
            D(!memcmp(x->nchan, y->nchan, sizeof x->nchan) &&
              !memcmp(x->nremote, y->nremote, sizeof x->nremote), "gpu %d tb %d tables", r, t);
            for (int c = 0; c < PLAN_CHAN_TYPES; c++)
                D(!memcmp(x->chan[c], y->chan[c], sizeof(int) * (size_t)x->nchan[c]),
                  "gpu %d tb %d channels", r, t);
            for (int c = 0; c < PLAN_REMOTE_TYPES; c++)
                D(!memcmp(x->remote[c], y->remote[c], sizeof(int) * (size_t)x->nremote[c]),
                  "gpu %d tb %d remotes", r, t);
            for (int i = 0; i < x->nops; i++) {
                char inner[200];
                if (!tp_op_eq(&x->ops[i], &y->ops[i], inner, sizeof inner)) {
                    snprintf(why, n, "gpu %d tb %d op %d: %s", r, t, i, inner);
                    return false;
                }
            }
        }
    }
    return true;
#undef D
}
#endif

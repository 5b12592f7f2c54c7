/*
 * algo_rooted.c - rooted collectives across nodes for any root. The multi-node stdlib programs
 * are written for root 0; for root k this room makes, once per (communicator, collective,
 * root), the same plans with the ranks' roles permuted so that k plays rank 0 and every node
 * keeps its own ranks (plan_relabel), and hands them to selection beside the default
 * collection. Gather's output and scatter's input hold a block per rank, renumbered with the
 * roles; plans that reach those blocks by ranges or through peers cannot be, and are left out.
 */
#include "algo/algo.h"
#include "core/api_plan.h"
#include "core/err.h"
#include "core/log.h"
#include "exec/exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct AlgoRooted {
    mscclrt_coll coll;
    int root;
    int n;
    mscclrt_algo **v;              /* owned references */
    struct AlgoRooted *next;
} AlgoRooted;

bool algo_rooted_serves(const mscclrt_request *req) {
    return (req->collective == MSCCLRT_COLL_BROADCAST || req->collective == MSCCLRT_COLL_REDUCE ||
            req->collective == MSCCLRT_COLL_GATHER || req->collective == MSCCLRT_COLL_SCATTER) &&
           req->root > 0 && req->ranks_per_node > 0 && req->ranks_per_node < req->world_size &&
           req->world_size % req->ranks_per_node == 0;
}

void algo_rooted_roles(int n, int g, int root, int *role) {
    const int m = n / g, rn = root / g, rl = root % g;
    for (int r = 0; r < n; r++)
        role[r] = ((r / g - rn + m) % m) * g + ((r % g - rl + g) % g);
}

/* tags with "root=0" replaced by "root=<root>" (the fit check reads it) */
static char *rooted_tags(const char *tags, int root) {
    const char *at = tags ? strstr(tags, "root=0") : NULL;
    const size_t len = tags ? strlen(tags) : 0;
    char *out = malloc(len + 16);
    if (!out) return NULL;
    if (!at) {
        snprintf(out, len + 16, "%s%sroot=%d", tags ? tags : "", len ? "," : "", root);
        return out;
    }
    snprintf(out, len + 16, "%.*sroot=%d%s", (int)(at - tags), tags, root, at + 6);
    return out;
}

/* The root-k form of one root-0 multi-node algorithm of the collection (*out NULL when its
 * plan cannot be relabelled). */
static mscclrt_result rooted_one(const mscclrt_algo *src, int root, int g, mscclrt_algo **out) {
    *out = NULL;
    const int indexed = src->desc.collective == MSCCLRT_COLL_GATHER    ? PLAN_BUF_OUTPUT
                        : src->desc.collective == MSCCLRT_COLL_SCATTER ? PLAN_BUF_INPUT
                                                                       : -1;
    const Plan *p = api_plan_model(src->plan);
    const int n = p ? p->ngpus : 0;
    int *role = n ? malloc((size_t)n * sizeof *role) : NULL;
    if (!role) return rt_fail(MSCCLRT_ERR_SYSTEM, "rooted '%s': out of memory", src->desc.name);
    algo_rooted_roles(n, g, root, role);
    PlanErr e;
    Plan *pl = plan_relabel(p, role, indexed, &e);
    free(role);
    if (!pl) {   /* a plan that cannot be relabelled is not a failure: another one serves */
        LOG_INFO(LOG_SUB_PLAN, "'%s' for root %d: %s", src->desc.name, root, e.msg);
        return MSCCLRT_SUCCESS;
    }
    mscclrt_plan *h = NULL;
    TRY(api_plan_wrap(pl, &h, "rooted algorithms"));
    char *tags = rooted_tags(src->desc.tags, root);
    mscclrt_algo_desc d = src->desc;
    d.tags = tags;
    mscclrt_result res = tags ? mscclrt_algo_from_plan(out, h, &d)
                              : rt_fail(MSCCLRT_ERR_SYSTEM, "rooted algorithms: out of memory");
    free(tags);
    if (res != MSCCLRT_SUCCESS) {
        mscclrt_plan_free(h);
        return res;
    }
    (*out)->own_plan = true;
    (*out)->desc.buffer_mode = src->desc.buffer_mode;   /* as the collection vouched for src */
    return MSCCLRT_SUCCESS;
}

mscclrt_result algo_rooted_make(const AlgoSet *defs, mscclrt_coll coll, int root, int rpn,
                                mscclrt_algo **v, int *n) {
    *n = 0;
    for (int i = 0; defs && i < defs->n; i++) {
        const mscclrt_algo *s = defs->v[i];
        long r0 = -1;
        if (s->desc.collective != coll || s->kind != MSCCLRT_ALGO_PLAN ||
            !algo_tag_int(s->desc.tags, "root", &r0) || r0 != 0 || s->desc.ranks_per_node != rpn)
            continue;
        mscclrt_result res = rooted_one(s, root, rpn, &v[*n]);
        if (res != MSCCLRT_SUCCESS) {
            while (*n > 0) algo_release(v[--*n]);
            return res;
        }
        if (v[*n]) ++*n;
    }
    return MSCCLRT_SUCCESS;
}

mscclrt_result algo_rooted_candidates(mscclrt_comm *c, const AlgoSet *defs,
                                      const mscclrt_request *req, mscclrt_algo *const **out,
                                      int *n) {
    *out = NULL;
    *n = 0;
    AlgoComm *a = algo_comm(c);
    if (!a) return MSCCLRT_ERR_SYSTEM;
    for (AlgoRooted *e = a->rooted; e; e = e->next)
        if (e->coll == req->collective && e->root == req->root) {
            *out = e->v;
            *n = e->n;
            return MSCCLRT_SUCCESS;
        }
    AlgoRooted *e = calloc(1, sizeof *e);
    if (!e || !(e->v = calloc((size_t)(defs ? defs->n : 0) + 1, sizeof *e->v))) {
        free(e);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: rooted algorithms: out of memory", c->rank);
    }
    e->coll = req->collective;
    e->root = req->root;
    mscclrt_result res = algo_rooted_make(defs, req->collective, req->root, req->ranks_per_node,
                                          e->v, &e->n);
    if (res != MSCCLRT_SUCCESS) {
        free(e->v);
        free(e);
        return res;
    }
    LOG_INFO(LOG_SUB_INIT, "rank %d: %d %s algorithm(s) for root %d (the root-0 programs with "
             "the ranks' roles permuted)", c->rank, e->n, mscclrt_coll_name(req->collective),
             req->root);
    e->next = a->rooted;
    a->rooted = e;
    *out = e->v;
    *n = e->n;
    return MSCCLRT_SUCCESS;
}

void algo_rooted_free(AlgoComm *a) {
    while (a && a->rooted) {
        AlgoRooted *e = a->rooted;
        a->rooted = e->next;
        for (int i = 0; i < e->n; i++) algo_release(e->v[i]);
        free(e->v);
        free(e);
    }
}

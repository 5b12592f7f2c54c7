/*
 * test_algo_rooted.c - rooted collectives across nodes for roots other than 0 (algo_rooted.c,
 * plan_relabel.c) without a GPU: the role permutation maps the root to 0 and keeps every node's
 * ranks together; relabelled multi-node broadcast, reduce, gather and scatter plans keep their
 * memory channels inside nodes and, run on the CPU backend for every root of several layouts,
 * compute their collective for root k; plans that reach gather's or scatter's rank blocks by
 * ranges are refused, as is a role list that is no permutation; which requests it serves.
 */
#include "../harness.h"
#include "algo/algo.h"
#include "core/api_plan.h"
#include "core/err.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void t_roles(void) {
    static const int layouts[][2] = {{4, 2}, {6, 3}, {8, 2}, {8, 4}, {12, 3}, {4, 1}};
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++) {
        const int n = layouts[i][0], g = layouts[i][1];
        for (int k = 0; k < n; k++) {
            int role[16], seen[16] = {0};
            algo_rooted_roles(n, g, k, role);
            CHECK_EQ_INT(0, role[k]);
            for (int r = 0; r < n; r++) {
                CHECK(role[r] >= 0 && role[r] < n);
                if (role[r] >= 0 && role[r] < n) seen[role[r]]++;
                for (int q = 0; q < n; q++)   /* same node before, same node after */
                    CHECK_EQ_INT(r / g == q / g, role[r] / g == role[q] / g);
            }
            for (int q = 0; q < n; q++) CHECK_EQ_INT(1, seen[q]);
        }
    }
}

static const mscclrt_algo *by_name(const AlgoSet *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i]->desc.name, name)) return s->v[i];
    return NULL;
}

typedef enum { BCAST, REDUCE, GATHER, SCATTER } Kind;

/* What rank r's output element e must be for root k (in: every rank's input; ne elements per
 * input; per: elements of one rank's block), or INT32_MIN where it is not checked. */
static int32_t want_of(Kind kind, int32_t *const (*in), int n, int k, int r, size_t e, size_t per) {
    int32_t s = 0;
    switch (kind) {
    case BCAST: return in[k][e];
    case REDUCE:
        if (r != k) return INT32_MIN;
        for (int q = 0; q < n; q++) s += in[q][e];
        return s;
    case GATHER: return r == k ? in[e / per][e % per] : INT32_MIN;
    case SCATTER: return in[k][(size_t)r * per + e];
    }
    return INT32_MIN;
}

/* Runs plan (root k's form) on the CPU backend, int32, out of place, and checks its result. */
static bool run_rooted(const mscclrt_plan *plan, int n, int k, Kind kind) {
    size_t in = 0, out = 0, min = 0;
    if (mscclrt_plan_min_bytes(plan, &min) != MSCCLRT_SUCCESS ||
        mscclrt_plan_call_sizes(plan, 3 * min, &in, &out) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "sizes: %s\n", mscclrt_last_error());
        return false;
    }
    const size_t ne = in / 4, no = out / 4;
    const size_t per = kind == GATHER ? ne : kind == SCATTER ? no : 0;
    int32_t *bufs[16][2], *ins[16];
    void *send[16], *recv[16];
    for (int r = 0; r < n; r++) {
        bufs[r][0] = malloc(in);
        bufs[r][1] = malloc(out);
        for (size_t e = 0; e < ne; e++) bufs[r][0][e] = (int32_t)(1000 * r + (int)e % 97);
        memset(bufs[r][1], 0xa5, out);
        send[r] = bufs[r][0];
        recv[r] = bufs[r][1];
        ins[r] = bufs[r][0];
    }
    mscclrt_cpu_comm *comm = NULL;
    bool ok = mscclrt_cpu_comm_create(&comm, n) == MSCCLRT_SUCCESS &&
              mscclrt_cpu_execute(comm, plan, send, recv, in, out, MSCCLRT_INT32, MSCCLRT_SUM,
                                  MSCCLRT_LL16) == MSCCLRT_SUCCESS;
    if (!ok) fprintf(stderr, "execute: %s\n", mscclrt_last_error());
    for (int r = 0; ok && r < n; r++) {
        for (size_t e = 0; ok && e < no; e++) {
            const int32_t want = want_of(kind, ins, n, k, r, e, per);
            if (want == INT32_MIN) continue;
            if (bufs[r][1][e] != want) {
                fprintf(stderr, "root %d: rank %d element %zu: got %d, want %d\n", k, r, e,
                        bufs[r][1][e], want);
                ok = false;
            }
        }
    }
    mscclrt_cpu_comm_destroy(comm);
    for (int r = 0; r < n; r++) {
        free(bufs[r][0]);
        free(bufs[r][1]);
    }
    return ok;
}

static void t_relabelled_plans_run(void) {
    static const int layouts[][2] = {{4, 2}, {6, 3}, {4, 1}, {8, 4}};
    static const struct { const char *name; Kind kind; } progs[] = {
        {"stdlib/broadcast/hier", BCAST}, {"stdlib/broadcast/hier_scratch", BCAST},
        {"stdlib/reduce/hier", REDUCE}, {"stdlib/reduce/hier_scratch", REDUCE},
        {"stdlib/gather/hier_scratch", GATHER}, {"stdlib/scatter/hier_scratch", SCATTER},
    };
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++) {
        const int n = layouts[i][0], g = layouts[i][1];
        AlgoSet *s = calloc(1, sizeof *s);
        CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_default_build_plans(n, g, 90, "", s, NULL));
        for (size_t p = 0; p < sizeof progs / sizeof *progs; p++) {
            const mscclrt_algo *a = by_name(s, progs[p].name);
            CHECK(a != NULL);
            if (!a) continue;
            const Plan *model = api_plan_model(a->plan);
            const int indexed = progs[p].kind == GATHER    ? PLAN_BUF_OUTPUT
                                : progs[p].kind == SCATTER ? PLAN_BUF_INPUT
                                                           : -1;
            for (int k = 1; k < n; k++) {
                int role[16];
                algo_rooted_roles(n, g, k, role);
                PlanErr e;
                Plan *pl = plan_relabel(model, role, indexed, &e);
                if (!pl) fprintf(stderr, "%s: %s\n", progs[p].name, e.msg);
                CHECK(pl != NULL);
                if (!pl) continue;
                /* memory channels stay inside nodes, port channels cross them */
                for (int r = 0; r < n; r++)
                    for (int c = 0; c < pl->gpus[r].npeers[0]; c++)
                        CHECK_EQ_INT(r / g, pl->gpus[r].peers[0][c] / g);
                CHECK(plan_validate(pl, "relabelled", &e));
                mscclrt_plan *h = NULL;
                CHECK_EQ_INT(MSCCLRT_SUCCESS, api_plan_wrap(pl, &h, "test"));
                const bool ran = run_rooted(h, n, k, progs[p].kind);
                if (!ran) fprintf(stderr, "%s N=%d G=%d root %d failed\n", progs[p].name, n, g, k);
                CHECK(ran);
                mscclrt_plan_free(h);
            }
        }
        algo_set_free(s);
    }
}

static void t_refused(void) {
    AlgoSet *s = calloc(1, sizeof *s);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_default_build_plans(4, 2, 90, "", s, NULL));
    const mscclrt_algo *a = by_name(s, "stdlib/broadcast/hier");
    CHECK(a != NULL);
    if (a) {
        static const int dup[4] = {0, 1, 1, 3}, out[4] = {0, 1, 2, 4};
        PlanErr e;
        CHECK(plan_relabel(api_plan_model(a->plan), dup, -1, &e) == NULL);
        CHECK_CONTAINS(e.msg, "taken twice");
        CHECK(plan_relabel(api_plan_model(a->plan), out, -1, &e) == NULL);
        CHECK_CONTAINS(e.msg, "out of range");
    }
    /* gather/hier puts ranges of blocks into the root's output: it cannot be renumbered */
    const mscclrt_algo *gh = by_name(s, "stdlib/gather/hier");
    CHECK(gh != NULL);
    if (gh) {
        int role[4];
        algo_rooted_roles(4, 2, 3, role);
        PlanErr e;
        CHECK(plan_relabel(api_plan_model(gh->plan), role, PLAN_BUF_OUTPUT, &e) == NULL);
        CHECK_CONTAINS(e.msg, "by ranges or through peers");
    }
    algo_set_free(s);
}

static void t_serves(void) {
    mscclrt_request q = {.collective = MSCCLRT_COLL_BROADCAST, .root = 3, .world_size = 8,
                         .ranks_per_node = 4};
    CHECK(algo_rooted_serves(&q));
    q.collective = MSCCLRT_COLL_REDUCE;
    CHECK(algo_rooted_serves(&q));
    q.root = 0;   /* the collection's own plans */
    CHECK(!algo_rooted_serves(&q));
    q.root = 3;
    q.ranks_per_node = 8;   /* one node: the native algorithms take any root */
    CHECK(!algo_rooted_serves(&q));
    q.ranks_per_node = 4;
    q.collective = MSCCLRT_COLL_GATHER;
    CHECK(algo_rooted_serves(&q));
    q.collective = MSCCLRT_COLL_ALLGATHER;   /* no root */
    CHECK(!algo_rooted_serves(&q));
}

int main(void) {
    TEST("algo_rooted: the roles map the root to 0 and keep nodes together", t_roles());
    TEST("algo_rooted: relabelled broadcast, reduce, gather and scatter run for every root (CPU)",
         t_relabelled_plans_run());
    TEST("algo_rooted: no permutation, or rank blocks reached by ranges: refused", t_refused());
    TEST("algo_rooted: which requests it serves", t_serves());
    return harness_report();
}

/*
 * algo_comm.c - a communicator's state in the algorithm layer (AlgoComm, mscclrt_comm.algo):
 * created on first use with the layout facts selection needs (ranks per node, from the
 * bootstrap's host grouping), freed when the communicator is released (runtime/comm).
 */
#include "algo/algo.h"
#include "algo/algo_p2pcoll.h"
#include "algo/algo_native.h"
#include "bootstrap/bootstrap.h"
#include "core/err.h"
#include "core/log.h"
#include "exec/exec.h"

#include <stdlib.h>

/* Ranks per node when every node holds as many ranks; 0 when they differ (no algorithm that
 * names a ranks-per-node count can serve such a group, and the answer is the same on every
 * rank, as selection needs). A comm without a bootstrap (comm_init_all) is one node. */
static int layout_ranks_per_node(const mscclrt_comm *c) {
    if (!c->boot) return c->nranks;
    const Boot *b = c->boot;
    int nnodes = boot_nnodes(b);
    if (nnodes <= 0 || c->nranks % nnodes) return 0;
    int *count = calloc((size_t)nnodes, sizeof *count);
    if (!count) return 0;
    for (int r = 0; r < c->nranks; r++) {
        int node = boot_node_of(b, r);
        if (node >= 0 && node < nnodes) count[node]++;
    }
    int per = c->nranks / nnodes;
    for (int i = 0; i < nnodes && per; i++)
        if (count[i] != per) per = 0;
    free(count);
    return per;
}

AlgoComm *algo_comm(mscclrt_comm *c) {
    if (c->algo) return c->algo;
    AlgoComm *a = calloc(1, sizeof *a);
    if (!a) {
        rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory for the algorithm state", c->rank);
        return NULL;
    }
    a->ranks_per_node = layout_ranks_per_node(c);
    if (a->ranks_per_node == 0)
        LOG_INFO(LOG_SUB_INIT, "rank %d: the nodes of this %d-rank group hold different numbers "
                 "of ranks: only algorithms for any layout apply", c->rank, c->nranks);
    c->algo = a;
    return a;
}

/* Frees what this file and algo_default.c own. The members of other files (native contexts of
 * algo_native.c, windows, PreMulSum operators of algo_coll.c) are freed before the free(a)
 * below, by their owners' calls, with the device context current (comm_release calls this
 * after the executor's contexts are gone and before the bootstrap closes). */
void algo_comm_free(mscclrt_comm *c) {
    AlgoComm *a = c->algo;
    if (!a) return;
    algo_native_free(c);
    algo_p2pcoll_free(c);
    algo_coll_free(c);
    algo_rooted_free(a);
    algo_set_free(a->defaults);
    a->defaults = NULL;
    free(a);
    c->algo = NULL;
}

MSCCLRT_API mscclrt_result mscclrt_comm_algorithms(mscclrt_comm *comm, mscclrt_coll coll,
                                                   const mscclrt_algo **algos, int max, int *n) {
    if ((unsigned)coll > MSCCLRT_COLL_COUNT)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_algorithms: coll %d is not a "
                       "collective (nor MSCCLRT_COLL_COUNT for all)", (int)coll);
    if (!n || max < 0 || (max > 0 && !algos))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_algorithms: %s",
                       !n ? "n argument is NULL" : max < 0 ? "max is negative"
                       : "algos argument is NULL with max > 0");
    TRY(exec_comm_check(comm, "mscclrt_comm_algorithms"));
    const AlgoSet *set;
    TRY(algo_default_set(comm, &set));
    int k = 0;
    for (int i = 0; set && i < set->n; i++) {
        if (coll != MSCCLRT_COLL_COUNT && set->v[i]->desc.collective != coll) continue;
        if (k < max) algos[k] = set->v[i];
        k++;
    }
    *n = k;
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API mscclrt_result mscclrt_comm_ranks_per_node(mscclrt_comm *comm, int *ranks_per_node) {
    if (!ranks_per_node)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_ranks_per_node: NULL argument");
    TRY(exec_comm_check(comm, "mscclrt_comm_ranks_per_node"));
    AlgoComm *a = algo_comm(comm);
    if (!a) return MSCCLRT_ERR_SYSTEM;
    *ranks_per_node = a->ranks_per_node;
    return MSCCLRT_SUCCESS;
}

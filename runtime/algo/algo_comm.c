/*
 * algo_comm.c - the algorithm layer's state on a communicator (AlgoComm): made on first use
 * with the comm's layout (ranks per node from the bootstrap's host grouping; a single-process
 * group is one node), released with the comm after its contexts.
 */
#include "algo/algo.h"
#include "algo/algo_native.h"
#include "bootstrap/bootstrap.h"
#include "core/err.h"
#include "exec/exec.h"

#include <stdlib.h>

AlgoComm *algo_comm(mscclrt_comm *c) {
    if (c->algo) return c->algo;
    AlgoComm *a = calloc(1, sizeof *a);
    if (!a) {
        rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory for the algorithm state", c->rank);
        return NULL;
    }
    a->ranks_per_node = c->boot ? boot_local_size(c->boot) : c->nranks;
    c->algo = a;
    return a;
}

void algo_comm_free(mscclrt_comm *c) {
    AlgoComm *a = c->algo;
    if (!a) return;
    algo_native_free(c);
    algo_coll_free(c);
    if (a->defaults) algo_set_free(a->defaults);
    free(a);
    c->algo = NULL;
}

/*
 * comm_split.c - communicators made from others, over the parent's bootstrap: split (by color
 * and key, every rank of the parent takes part), shrink (the survivors when some ranks are gone:
 * only they take part, so no step needs an excluded rank), and the host-side broadcast those
 * builds and the NCCL drop-in use. The new group is an ordinary bootstrap group: its lowest rank
 * makes a unique id and sends it to its members over the parent's links.
 */
#include "comm/comm.h"
#include "bootstrap/bootstrap.h"
#include "core/err.h"
#include "core/log.h"

#include <stdlib.h>
#include <string.h>

#define SPLIT_TAG 0x5350   /* "SP": the new group's unique id, from its rank 0 to its members */
#define BCAST_TAG 0x4243   /* "BC": mscclrt_comm_host_bcast */

static mscclrt_result need_boot(const mscclrt_comm *c, const char *fn) {
    TRY(exec_comm_check(c, fn));
    if (!c->boot)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "%s: rank %d: the communicator belongs to a "
                       "single-process group (mscclrt_comm_init_all), which has no bootstrap; "
                       "only communicators of mscclrt_comm_init_rank/init_env can do this", fn,
                       c->rank);
    return MSCCLRT_SUCCESS;
}

mscclrt_result mscclrt_comm_host_bcast(mscclrt_comm *c, void *buf, size_t bytes, int root) {
    TRY(need_boot(c, "mscclrt_comm_host_bcast"));
    if (root < 0 || root >= c->nranks || (!buf && bytes))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_host_bcast: root %d of %d, buf %p",
                       root, c->nranks, buf);
    if (c->rank != root) return boot_recv(c->boot, root, BCAST_TAG, buf, bytes);
    for (int q = 0; q < c->nranks; q++)
        if (q != root) TRY(boot_send(c->boot, q, BCAST_TAG, buf, bytes));
    return MSCCLRT_SUCCESS;
}

/* The group `members` (parent ranks, in new-rank order, this rank among them): its first
 * member makes the id and hands it out; then everyone joins as init_rank does. */
static mscclrt_result join(mscclrt_comm *c, const int *members, int n, int me, mscclrt_comm **out,
                           const char *fn) {
    mscclrt_unique_id id;
    if (me == 0) {
        TRY(mscclrt_get_unique_id(&id));
        for (int k = 1; k < n; k++) TRY(boot_send(c->boot, members[k], SPLIT_TAG, &id, sizeof id));
    } else {
        TRY(boot_recv(c->boot, members[0], SPLIT_TAG, &id, sizeof id));
    }
    mscclrt_result res = mscclrt_comm_init_rank(out, n, id, me, c->device);
    if (res == MSCCLRT_SUCCESS)
        LOG_INFO(LOG_SUB_INIT, "%s: rank %d of the parent is rank %d of %d", fn, c->rank, me, n);
    return res;
}

mscclrt_result mscclrt_comm_split(mscclrt_comm *c, int color, int key, mscclrt_comm **out) {
    if (!out) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_split: out is NULL");
    *out = NULL;
    TRY(need_boot(c, "mscclrt_comm_split"));
    const int n = c->nranks;
    int *all = malloc((size_t)n * 3 * sizeof *all);
    if (!all) return rt_fail(MSCCLRT_ERR_SYSTEM, "mscclrt_comm_split: out of memory");
    all[3 * c->rank] = color < 0 ? -1 : color;
    all[3 * c->rank + 1] = key;
    all[3 * c->rank + 2] = c->rank;
    mscclrt_result res = boot_allgather(c->boot, all, 3 * sizeof *all);
    if (res != MSCCLRT_SUCCESS || color < 0) {
        free(all);
        return res;
    }
    /* members of my color ordered by (key, parent rank): insertion sort keeps it linear for
     * the usual already-ordered keys */
    int *mem = malloc((size_t)n * sizeof *mem);
    int m = 0, me = -1;
    for (int q = 0; mem && q < n; q++) {
        if (all[3 * q] != color) continue;
        int j = m++;
        while (j > 0 && (all[3 * mem[j - 1] + 1] > all[3 * q + 1])) {
            mem[j] = mem[j - 1];
            j--;
        }
        mem[j] = q;
    }
    for (int k = 0; mem && k < m; k++)
        if (mem[k] == c->rank) me = k;
    res = mem ? join(c, mem, m, me, out, "mscclrt_comm_split")
              : rt_fail(MSCCLRT_ERR_SYSTEM, "mscclrt_comm_split: out of memory");
    free(mem);
    free(all);
    return res;
}

mscclrt_result mscclrt_comm_shrink(mscclrt_comm *c, const int *exclude, int nexclude,
                                   mscclrt_comm **out) {
    if (!out) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_shrink: out is NULL");
    *out = NULL;
    TRY(need_boot(c, "mscclrt_comm_shrink"));
    if (nexclude < 0 || nexclude >= c->nranks || (nexclude && !exclude))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_shrink: %d ranks to exclude of %d",
                       nexclude, c->nranks);
    bool *gone = calloc((size_t)c->nranks, sizeof *gone);
    int *mem = malloc((size_t)c->nranks * sizeof *mem);
    mscclrt_result res = MSCCLRT_SUCCESS;
    if (!gone || !mem) res = rt_fail(MSCCLRT_ERR_SYSTEM, "mscclrt_comm_shrink: out of memory");
    for (int k = 0; k < nexclude && res == MSCCLRT_SUCCESS; k++) {
        if (exclude[k] < 0 || exclude[k] >= c->nranks)
            res = rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_comm_shrink: excluded rank %d out of "
                          "range [0, %d)", exclude[k], c->nranks);
        else if (exclude[k] == c->rank)
            res = rt_fail(MSCCLRT_ERR_INVALID_USAGE, "mscclrt_comm_shrink: rank %d excludes "
                          "itself; excluded ranks do not call shrink", c->rank);
        else
            gone[exclude[k]] = true;
    }
    int m = 0, me = -1;
    for (int q = 0; q < c->nranks && res == MSCCLRT_SUCCESS; q++) {
        if (gone[q]) continue;
        if (q == c->rank) me = m;
        mem[m++] = q;
    }
    if (res == MSCCLRT_SUCCESS) res = join(c, mem, m, me, out, "mscclrt_comm_shrink");
    free(gone);
    free(mem);
    return res;
}

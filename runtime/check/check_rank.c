/*
 * check_rank.c - the postcondition of one rank's output when every rank's input came from
 * check_fill: instead of holding all inputs, the slices the check needs are regenerated from
 * (seed, rank, element) a block at a time, and check.c's per-rank checker does the rest, on
 * several threads with a set of slots each.
 */
#include "check/check.h"
#include "core/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mscclrt_dtype t;
    mscclrt_redop op;
    uint64_t seed;
    size_t block;               /* bytes per slot */
    char *slots;                /* one block per rank */
} RegenInputs;

static const void *regen_input(void *ctx, int rank, size_t first, size_t n) {
    RegenInputs *g = ctx;
    char *slot = g->slots + (size_t)rank * g->block;
    check_fill_range(g->t, g->op, slot, first, n, g->seed, rank);
    return slot;
}

bool check_collective_rank(PlanCollective coll, int nranks, int rank, mscclrt_dtype t,
                           mscclrt_redop op, uint64_t seed, size_t in_bytes, const void *output,
                           size_t out_bytes, CheckMismatch *mm) {
    size_t es = dtype_size(t);
    if (mm) memset(mm, 0, sizeof *mm);
    if (!es || nranks < 1 || rank < 0 || rank >= nranks || !check_collective_known(coll)) {
        if (mm) {
            mm->rank = -1;
            snprintf(mm->msg, sizeof mm->msg, "check_collective_rank: nothing to check for %s, "
                     "rank %d of %d, dtype %d", plan_coll_name(coll), rank, nranks, (int)t);
        }
        return false;
    }
    /* 1 MiB per rank; very large groups get smaller blocks (at least 4 KiB) */
    size_t block = CHECK_BLOCK_BYTES;
    if ((size_t)nranks * block > ((size_t)256 << 20)) block = ((size_t)256 << 20) / (size_t)nranks;
    if (block < 4096) block = 4096;
    block -= block % es;
    /* one set of slots per thread; all threads' slots together stay under 512 MiB */
    int nt;
    if (check_threads(out_bytes / es > in_bytes / es ? out_bytes / es : in_bytes / es, &nt) !=
        MSCCLRT_SUCCESS) {
        if (mm) {
            mm->rank = -1;
            snprintf(mm->msg, sizeof mm->msg, "%s", mscclrt_last_error());
        }
        return false;
    }
    size_t per_thread = (size_t)nranks * block;
    while (nt > 1 && (size_t)nt * per_thread > ((size_t)512 << 20)) nt--;
    RegenInputs g[MAX_CHECK_THREADS];
    void *ctxs[MAX_CHECK_THREADS];
    bool have = true;
    for (int i = 0; i < nt; i++) {
        g[i] = (RegenInputs){t, op, seed, block, malloc(per_thread)};
        ctxs[i] = &g[i];
        have = have && g[i].slots;
    }
    bool ok = false;
    if (!have) {
        if (mm) {
            mm->rank = -1;
            snprintf(mm->msg, sizeof mm->msg, "rank %d: cannot check: out of memory for %d x %zu "
                     "bytes of reference input", rank, nranks, block);
        }
    } else {
        ok = check_rank_threads(coll, nranks, rank, t, op, regen_input, ctxs, nt, block, in_bytes,
                                output, out_bytes, mm);
    }
    for (int i = 0; i < nt; i++) free(g[i].slots);
    return ok;
}

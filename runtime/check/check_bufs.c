/*
 * check_bufs.c - the host buffers of a checked CPU call, one set per rank: what the call reads
 * (send) and writes (recv), laid out in place as spec §3.7 says when asked, and a copy of each
 * rank's input as it was before the call, which check_collective compares against (in place,
 * the call overwrites it). mscclrt_cpu_check_plan (check_cpu.c) and mscclrt-run's CPU backends
 * (runtime/cmd/mscclrt_run.c) both run their calls on these.
 */
#include "check/check.h"
#include "core/err.h"

#include <stdlib.h>
#include <string.h>

bool check_bufs_alloc(CheckBufs *b, PlanCollective coll, int nranks, size_t in_bytes,
                      size_t out_bytes, bool inplace) {
    size_t n = (size_t)nranks, big = in_bytes > out_bytes ? in_bytes : out_bytes;
    *b = (CheckBufs){.nranks = nranks, .in_bytes = in_bytes, .out_bytes = out_bytes};
    b->own = calloc(n, sizeof *b->own);
    b->own_send = calloc(n, sizeof *b->own_send);
    b->inputs = calloc(n, sizeof *b->inputs);
    b->send = calloc(n, sizeof *b->send);
    b->recv = calloc(n, sizeof *b->recv);
    if (!b->own || !b->own_send || !b->inputs || !b->send || !b->recv) goto oom;
    for (int r = 0; r < nranks; r++) {   /* malloc(0) may be NULL: every buffer has a byte */
        if (!(b->inputs[r] = malloc(in_bytes ? in_bytes : 1))) goto oom;
        if (!inplace) {
            if (!(b->own[r] = malloc(out_bytes ? out_bytes : 1)) ||
                !(b->own_send[r] = malloc(in_bytes ? in_bytes : 1)))
                goto oom;
            b->send[r] = b->own_send[r];
            b->recv[r] = b->own[r];
            continue;
        }
        if (!(b->own[r] = malloc(big ? big : 1))) goto oom;
        b->send[r] = b->recv[r] = b->own[r];
        /* allgather's input is its block of the output; reducescatter's output, of the input */
        if (coll == PLAN_COLL_ALLGATHER) b->send[r] = b->own[r] + (size_t)r * in_bytes;
        else if (coll == PLAN_COLL_REDUCESCATTER) b->recv[r] = b->own[r] + (size_t)r * out_bytes;
    }
    return true;
oom:
    check_bufs_free(b);
    return false;
}

mscclrt_result check_bufs_fill(CheckBufs *b, mscclrt_dtype t, mscclrt_redop op, uint64_t seed) {
    size_t es = mscclrt_dtype_size(t);
    for (int r = 0; r < b->nranks; r++) {
        memset(b->recv[r], CHECK_FILL_BYTE, b->out_bytes);   /* outputs never written show up */
        TRY(check_fill(t, op, b->send[r], es ? b->in_bytes / es : 0, seed, r));
        memcpy(b->inputs[r], b->send[r], b->in_bytes);
    }
    return MSCCLRT_SUCCESS;
}

void check_bufs_free(CheckBufs *b) {
    for (int r = 0; r < b->nranks; r++) {
        if (b->own) free(b->own[r]);
        if (b->own_send) free(b->own_send[r]);
        if (b->inputs) free(b->inputs[r]);
    }
    free(b->own);
    free(b->own_send);
    free(b->inputs);
    free(b->send);
    free(b->recv);
    *b = (CheckBufs){0};
}

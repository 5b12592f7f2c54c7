/*
 * plan_geom.c - chunk geometry of one call of a plan (spec §3.2-§3.6): the executor's size
 * checks, the chunk size shared by i/o/s, the scratch size with the LL and double-buffer
 * factors, and the per-rank byte counts of a message as nccl-tests counts it.
 */
#include "plan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

/* "plan 'NAME': " (the name escaped) + the formatted rest into err; returns false. */
static bool gfail(PlanErr *err, const Plan *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool gfail(PlanErr *err, const Plan *p, const char *fmt, ...) {
    if (!err) return false;
    int n = snprintf(err->msg, sizeof err->msg, "plan '%s': ", PLAN_ESC(p->name));
    if (n < 0 || (size_t)n >= sizeof err->msg) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

/* Number of pipeline iterations of `op` for chunk size ub (spec §3.6): ceil(K*ub / U). */
static uint64_t pipeline_iters(const PlanOp *op, uint64_t ub) {
    unsigned __int128 total = (unsigned __int128)op->num_chunks * ub;
    if (op->unit_size == 0) return UINT64_MAX;
    unsigned __int128 n = (total + op->unit_size - 1) / op->unit_size;
    return n > UINT64_MAX ? UINT64_MAX : (uint64_t)n;
}

uint64_t plan_scratch_bytes(const Plan *p, int rank, uint64_t chunk, uint64_t half_align) {
    uint64_t A = p->alignment ? p->alignment : 16;
    uint64_t r = A > half_align ? A : half_align;  /* powers of two: a multiple of both */
    uint64_t half = chunk * p->gpus[rank].scratch_chunks * (p->protocol_ll ? 2 : 1);
    half = (half + r - 1) / r * r;
    return half * (p->double_scratch ? 2 : 1);
}

bool plan_geom(const Plan *p, int rank, uint64_t in_bytes, uint64_t out_bytes, PlanGeom *g,
               PlanErr *err) {
    if (rank < 0 || rank >= p->ngpus)
        return gfail(err, p, "rank %d is outside 0..%d", rank, p->ngpus - 1);
    const PlanGpu *gpu = &p->gpus[rank];
    uint64_t A = p->alignment ? p->alignment : 16;
    uint64_t ic = gpu->input_chunks, oc = gpu->output_chunks;

    /* §3.2-1: sizes aligned and divisible into chunks */
    if (in_bytes % A != 0 || out_bytes % A != 0)
        return gfail(err, p, "%s of %" PRIu64 " bytes is not a multiple of "
                     "buffer_alignment %" PRIu64, in_bytes % A ? "input" : "output",
                     in_bytes % A ? in_bytes : out_bytes, A);
    if (ic == 0 || oc == 0)
        return gfail(err, p, "rank %d has %s_chunks 0", rank,
                     ic == 0 ? "input" : "output");
    if ((in_bytes / A) % ic != 0)
        return gfail(err, p, "input of %" PRIu64 " bytes does not split into %" PRIu64
                     " chunks of a multiple of %" PRIu64 " bytes (buffer_alignment)",
                     in_bytes, ic, A);
    if ((out_bytes / A) % oc != 0)
        return gfail(err, p, "output of %" PRIu64 " bytes does not split into %" PRIu64
                     " chunks of a multiple of %" PRIu64 " bytes (buffer_alignment)",
                     out_bytes, oc, A);
    /* §3.2-2: the checked size is the output for allgather (and gather), else the input */
    bool ag = p->collective == PLAN_COLL_ALLGATHER || p->collective == PLAN_COLL_GATHER;
    uint64_t checked = ag ? out_bytes : in_bytes;
    if (checked < p->min_size || checked > p->max_size)
        return gfail(err, p, "%s of %" PRIu64 " bytes is outside the plan's message "
                     "size range [%" PRIu64 ", %" PRIu64 "]", ag ? "output" : "input",
                     checked, p->min_size, p->max_size);
    /* §3.2-3: one chunk size for i, o and s */
    if (in_bytes / ic != out_bytes / oc)
        return gfail(err, p, "size per chunk inconsistent: input %" PRIu64 " bytes / %"
                     PRIu64 " chunks = %" PRIu64 ", output %" PRIu64 " bytes / %" PRIu64
                     " chunks = %" PRIu64, in_bytes, ic, in_bytes / ic, out_bytes, oc,
                     out_bytes / oc);
    uint64_t chunk = in_bytes / ic;

    /* op records hold 32-bit byte offsets and sizes (spec §2.8); packets double scratch */
    uint64_t most = ic > oc ? ic : oc;
    uint64_t sc = (uint64_t)gpu->scratch_chunks * (p->protocol_ll ? 2 : 1);
    if (sc > most) most = sc;
    if (chunk != 0 && most > UINT32_MAX / chunk)
        return gfail(err, p, "chunks of %" PRIu64 " bytes put offsets beyond 4 GiB "
                     "(%" PRIu64 " chunks): the executor's op records are 32-bit",
                     chunk, most);

    /* §3.5 scratch, sized from the message (allocation ranges are the caller's business) */
    uint64_t scratch;
    if (p->reuse_resources && gpu->scratch_chunks > 0) {
        scratch = (uint64_t)1 << 26;
    } else {
        scratch = plan_scratch_bytes(p, rank, chunk, 0);
    }

    /* §3.6 pipeline iteration counts are read as uint16 on the device */
    for (int t = 0; t < gpu->ntbs; t++)
        for (int i = 0; i < gpu->tbs[t].nops; i++) {
            const PlanOp *op = &gpu->tbs[t].ops[i];
            if (op->kind != PLAN_OP_PIPELINE) continue;
            uint64_t n = pipeline_iters(op, chunk);
            if (n > PLAN_MAX_PIPELINE_ITER)
                return gfail(err, p, "gpus[%d].threadblocks[%d].ops[%d]: the pipeline "
                             "needs %" PRIu64 " iterations of %" PRIu64 " bytes for chunks of %"
                             PRIu64 " bytes, more than the executor's %d", rank, t, i,
                             n, op->unit_size, chunk, PLAN_MAX_PIPELINE_ITER);
        }

    g->in_bytes = in_bytes;
    g->out_bytes = out_bytes;
    g->chunk_bytes = chunk;
    g->scratch_bytes = scratch;
    g->scratch_half = p->double_scratch ? scratch / 2 : 0;
    return true;
}

/* bytes * num / den, saturating; exact when it is an integer */
static uint64_t scale(uint64_t bytes, uint64_t num, uint64_t den) {
    if (den == 0) return 0;
    unsigned __int128 v = (unsigned __int128)bytes * num / den;
    return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

void plan_call_sizes(const Plan *p, uint64_t bytes, uint64_t *in_bytes, uint64_t *out_bytes) {
    uint64_t ic = p->ngpus > 0 ? p->gpus[0].input_chunks : 1;
    uint64_t oc = p->ngpus > 0 ? p->gpus[0].output_chunks : 1;
    switch (p->collective) {
    case PLAN_COLL_ALLGATHER: /* bytes is the output; the input is its share by chunk count */
    case PLAN_COLL_GATHER:
        *out_bytes = bytes;
        *in_bytes = scale(bytes, ic, oc);
        break;
    case PLAN_COLL_REDUCESCATTER: /* bytes is the input */
    case PLAN_COLL_SCATTER:
        *in_bytes = bytes;
        *out_bytes = scale(bytes, oc, ic);
        break;
    default: /* allreduce, alltoall, broadcast, sendrecv, reduce, test, custom: both */
        *in_bytes = *out_bytes = bytes;
        break;
    }
}

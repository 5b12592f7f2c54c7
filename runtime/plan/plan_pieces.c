/*
 * plan_pieces.c - when a message runs as pieces: an elementwise collective whose chunks are too
 * large for the executor's 32-bit op offsets (a program with many scratch chunks at 1 GiB, e.g.
 * allreduce/hier_scratch: 8 chunks of 512 MiB) is run as consecutive sub-ranges of its buffers
 * (exec.c), each a message the plan's geometry accepts. Pure plan logic, tested in test_plan_geom.
 */
#include "plan.h"

bool plan_elementwise(const Plan *p) {
    return p->collective == PLAN_COLL_ALLREDUCE || p->collective == PLAN_COLL_BROADCAST ||
           p->collective == PLAN_COLL_REDUCE;
}

static uint64_t gcd64(uint64_t a, uint64_t b) {
    while (b) {
        const uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* every rank accepts a message of `bytes` */
static bool fits(const Plan *p, uint64_t bytes) {
    for (int r = 0; r < p->ngpus; r++) {
        PlanGeom g;
        PlanErr e;
        if (!plan_geom(p, r, bytes, bytes, &g, &e)) return false;
    }
    return true;
}

uint64_t plan_piece_bytes(const Plan *p, uint64_t in_bytes) {
    if (!plan_elementwise(p) || p->ngpus <= 0) return 0;
    /* unit: a multiple of every rank's alignment x input and output chunk counts; limit: the
     * largest message whose chunks keep every rank's op offsets below 4 GiB */
    const uint64_t A = p->alignment ? p->alignment : 16;
    uint64_t unit = 1, limit = UINT64_MAX;
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        const uint64_t ic = g->input_chunks ? g->input_chunks : 1;
        const uint64_t oc = g->output_chunks ? g->output_chunks : 1;
        const uint64_t cnt[2] = {ic, oc};
        for (int k = 0; k < 2; k++) {
            const uint64_t u = A * cnt[k];
            const uint64_t l = unit / gcd64(unit, u);
            if (l > UINT64_MAX / u) return 0;
            unit = l * u;
        }
        uint64_t most = ic > oc ? ic : oc;
        const uint64_t sc = (uint64_t)g->scratch_chunks * (p->protocol_ll ? 2 : 1);
        if (sc > most) most = sc;
        const uint64_t chunk_max = UINT32_MAX / most;
        const uint64_t lim = chunk_max > UINT64_MAX / ic ? UINT64_MAX : chunk_max * ic;
        if (lim < limit) limit = lim;
    }
    /* within the limit the offsets fit: whatever else plan_geom refuses, pieces do not help */
    if (in_bytes <= limit || in_bytes % unit != 0 || limit < unit) return 0;
    /* as few pieces as the limit allows, of equal size (rounded to the unit), the last one the
     * rest; shrink while a piece or the rest is refused (pipeline limits, min size) */
    uint64_t piece = limit / unit * unit;
    while (piece >= unit) {
        const uint64_t n = (in_bytes + piece - 1) / piece;
        uint64_t even = (in_bytes / n + unit - 1) / unit * unit;
        if (even > piece) even = piece;
        if ((n - 1) * even < in_bytes) {
            const uint64_t last = in_bytes - (n - 1) * even;
            if (last <= even && fits(p, even) && fits(p, last)) return even;
        }
        piece = (piece / 2) / unit * unit;
    }
    return 0;
}

/*
 * pass_mscclpp_sizes.c - the smallest message MSCCL++'s executor runs correctly, for plans
 * meant for it (--target mscclpp): raises min_message_size until every thread block of every
 * thread-block group (tbg_info) gets a non-empty slice of each buffer its operation names.
 *
 * Why: MSCCL++ cuts a rank's data into chunks of whole buffer_alignment units and a tbg
 * operation's buffer among its tbg_size blocks in whole units (its calcOffset/calcSize). Below
 * tbg_size units some blocks get nothing, and MSCCL++ v0.10's executor then leaves outputs
 * unwritten or faults. Measured on 2 x H200 (tests/gpu/mscclpp_executor.sh): the 15 stdlib
 * programs that failed at their smallest aligned size all passed at 256 B, 2 KiB and 16 KiB but
 * one (rs_ag_packet, 16 blocks to a group, which failed at 256 B and passed from 2 KiB), which
 * is where this rule puts their minimum. libmscclrt splits any size itself, so plans for it
 * keep the range their program declares.
 */
#include "passes.h"

/* the chunk count MSCCL++ divides a rank's data by (its getSizeAndChunks): the input's when the
 * input has chunks, else the output's; and the count min_message_size is measured against
 * (allgather: the output, every other collective the input) */
static uint32_t data_chunks(const PlanGpu *g) {
    return g->input_chunks ? g->input_chunks : g->output_chunks;
}
static uint32_t measured_chunks(const Plan *p, const PlanGpu *g) {
    return p->collective == PLAN_COLL_ALLGATHER ? g->output_chunks : data_chunks(g);
}

/* units per chunk op needs so that each of its tbg_size blocks gets one of every buffer */
static uint64_t op_units(const PlanOp *op) {
    uint64_t need = 1;
    if (op->tbg_size > 1) {
        for (int i = 0; i < op->nsrc + op->ndst; i++) {
            const PlanRef *r = i < op->nsrc ? &op->src[i] : &op->dst[i - op->nsrc];
            if (r->kind == PLAN_REF_SWITCH || r->size == 0) continue;
            const uint64_t u = ((uint64_t)op->tbg_size + r->size - 1) / r->size;
            if (u > need) need = u;
        }
    }
    for (int k = 0; k < op->ninner; k++) {
        const uint64_t u = op_units(&op->inner[k]);
        if (u > need) need = u;
    }
    return need;
}

bool pass_mscclpp_sizes(Plan *p, PlanLoc at, Diag *d) {
    if (p->target != PLAN_TARGET_MSCCLPP) return true;
    const uint64_t align = p->alignment ? p->alignment : 16;
    uint64_t least = 0;
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        const uint32_t dc = data_chunks(g), mc = measured_chunks(p, g);
        if (!dc || !mc) continue;   /* pass_check_limits reports chunkless plans */
        uint64_t units = 1;
        for (int t = 0; t < g->ntbs; t++)
            for (int o = 0; o < g->tbs[t].nops; o++) {
                const uint64_t u = op_units(&g->tbs[t].ops[o]);
                if (u > units) units = u;
            }
        /* a chunk of `units` alignment units; the measured buffer holds mc chunks of the same
         * size as the dc chunks of the data (MSCCL++ requires sizes per chunk to agree) */
        const uint64_t bytes = units * align * mc;
        if (bytes > least) least = bytes;
    }
    if (least <= p->min_size) return true;
    if (least > p->max_size) {
        diag_error(d, at, "no message size of the plan's range %llu .. %llu runs in "
                   "MSCCL++'s executor: it needs at least %llu bytes, so that every block of "
                   "each thread-block group gets part of each buffer (--target mscclpp)",
                   (unsigned long long)p->min_size, (unsigned long long)p->max_size,
                   (unsigned long long)least);
        return false;
    }
    p->min_size = least;
    return true;
}

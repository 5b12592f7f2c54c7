/*
 * check_cpu.c - a failed check explained, and the one-call CPU check of a plan.
 * check_explain turns a mismatch (rank, element) into the plan's view of it: which buffer and
 * chunk the element is in, which ops (rank, thread block, op index and name) write that chunk
 * last in their thread blocks, and whether the value is still the fill pattern written before
 * the call (so nothing wrote it). mscclrt_cpu_check_plan is mscclrt_gpu_check_plan's CPU twin
 * (for tests, the Python package and C programs without a GPU).
 */
#include "check/check.h"
#include "core/api_plan.h"
#include "core/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Appends the writers of chunk `c` of `buf` on rank `rank` to text (at most a few). */
static size_t add_writers(char *text, size_t len, size_t at, const Plan *p, int rank, PlanBuf buf,
                          uint64_t c) {
    PlanWriter w[4];
    int n = plan_chunk_writers(p, rank, buf, c, w, 4);
    int k;
    if (at >= len) return at;
    if (n == 0) {
        k = snprintf(text + at, len - at, "; no op of the plan writes %s chunk %llu of rank %d",
                     plan_buf_long_name(buf), (unsigned long long)c, rank);
        return k > 0 ? at + (size_t)k : at;
    }
    k = snprintf(text + at, len - at, "; %s chunk %llu of rank %d is written%s by", plan_buf_long_name(buf),
                 (unsigned long long)c, rank, n > 1 ? " last in each thread block" : "");
    at = k > 0 ? at + (size_t)k : at;
    for (int i = 0; i < n && i < 4 && at < len; i++) {
        char inner[32] = "";
        if (w[i].inner >= 0) snprintf(inner, sizeof inner, " (its op %d)", w[i].inner);
        k = snprintf(text + at, len - at, "%s rank %d tb %d op %d%s (%s)", i ? "," : "", w[i].rank,
                     w[i].tb, w[i].op, inner, plan_op_name(w[i].kind));
        at = k > 0 ? at + (size_t)k : at;
    }
    if (n > 4 && at < len) {
        k = snprintf(text + at, len - at, " and %d more", n - 4);
        at = k > 0 ? at + (size_t)k : at;
    }
    return at;
}

void check_explain(const Plan *p, bool inplace, int rank, size_t elem, size_t elem_bytes,
                   const void *value, int fill_byte, uint64_t in_bytes, uint64_t out_bytes,
                   char *text, size_t len) {
    if (!len) return;
    text[0] = 0;
    if (!p || rank < 0 || rank >= p->ngpus) return;
    PlanGeom g;
    PlanErr e;
    if (!plan_geom(p, rank, in_bytes, out_bytes, &g, &e) || g.chunk_bytes == 0) return;
    uint64_t off = (uint64_t)elem * elem_bytes, c = g.chunk_bytes;
    size_t at = 0;
    const unsigned char *v = value;
    bool fill = v != NULL && fill_byte >= 0;
    for (size_t i = 0; fill && i < elem_bytes; i++) fill = v[i] == (unsigned char)fill_byte;
    if (fill) {
        char as[48] = "";
        if (elem_bytes == 4) {
            float f;
            memcpy(&f, v, sizeof f);
            snprintf(as, sizeof as, ": %.3g as float32", (double)f);
        }
        int k = snprintf(text, len, "; the value is the fill pattern written into every output "
                         "before the call (0x%02x bytes%s), so nothing wrote this element",
                         fill_byte, as);
        at = k > 0 ? (size_t)k : 0;
    }
    at = add_writers(text, len, at, p, rank, PLAN_BUF_OUTPUT, off / c);
    if (!inplace) return;
    /* in place the input shares this memory (spec §3.7 layouts) */
    uint64_t ioff = off;
    if (p->collective == PLAN_COLL_ALLGATHER) {
        if (off < (uint64_t)rank * in_bytes || off >= (uint64_t)(rank + 1) * in_bytes) return;
        ioff = off - (uint64_t)rank * in_bytes;
    } else if (p->collective == PLAN_COLL_REDUCESCATTER) {
        ioff = (uint64_t)rank * out_bytes + off;
    }
    add_writers(text, len, at, p, rank, PLAN_BUF_INPUT, ioff / c);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

MSCCLRT_API mscclrt_result mscclrt_cpu_check_plan(const mscclrt_plan *plan, int nranks,
                                                  const mscclrt_gpu_check *chk, double *usec) {
    const Plan *p = api_plan_model(plan);
    if (!p) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_cpu_check_plan: plan argument is %s",
                           plan ? "not a live plan" : "NULL");
    if (!chk) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_cpu_check_plan: chk argument is NULL");
    if (nranks != p->ngpus)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_cpu_check_plan: %d ranks, but plan '%s' "
                       "is for %d", nranks, PLAN_ESC(p->name), p->ngpus);
    if (!check_collective_known(p->collective))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_cpu_check_plan: collective '%s' of plan "
                       "'%s' has no known postcondition", plan_coll_name(p->collective),
                       PLAN_ESC(p->name));
    size_t in, out, es = mscclrt_dtype_size(chk->dtype);
    TRY(mscclrt_plan_call_sizes(plan, chk->bytes, &in, &out));
    if (es == 0 || in % es || out % es)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_cpu_check_plan: %zu bytes: per-rank sizes "
                       "%zu/%zu are not whole elements of the data type", chk->bytes, in, out);
    if (chk->bytes == 0) {   /* an empty collective: nothing runs, nothing can be wrong */
        if (usec) *usec = 0;
        return MSCCLRT_SUCCESS;
    }
    int n = nranks, iters = chk->iters > 0 ? chk->iters : 1;
    bool inplace = chk->inplace != 0;
    PlanCollective coll = p->collective;
    mscclrt_result res;
    mscclrt_cpu_comm *comm = NULL;
    CheckBufs b;
    if (!check_bufs_alloc(&b, coll, n, in, out, inplace))
        return rt_fail(MSCCLRT_ERR_SYSTEM, "mscclrt_cpu_check_plan: out of memory for %d ranks", n);
    res = mscclrt_cpu_comm_create(&comm, n);
    if (res != MSCCLRT_SUCCESS) goto out;
    double busy = 0;
    for (int it = 0; it < iters; it++) {
        res = check_bufs_fill(&b, chk->dtype, chk->op, chk->seed + (uint64_t)it);
        if (res != MSCCLRT_SUCCESS) goto out;
        double t = now_s();
        res = mscclrt_cpu_execute(comm, plan, b.send, b.recv, in, out, chk->dtype, chk->op,
                                  chk->packet);
        busy += now_s() - t;
        if (res != MSCCLRT_SUCCESS) goto out;
        CheckMismatch mm;
        if (!check_collective(coll, n, chk->dtype, chk->op, (const void *const *)b.inputs, in,
                              (const void *const *)b.recv, out, &mm)) {
            char why[1024] = "";
            if (mm.rank >= 0)
                check_explain(p, inplace, mm.rank, mm.elem, es,
                              (const unsigned char *)b.recv[mm.rank] + mm.elem * es,
                              CHECK_FILL_BYTE, in, out, why, sizeof why);
            res = rt_fail(MSCCLRT_ERR_INTERNAL, "plan '%s': check failed (%zu bytes, iteration "
                          "%d): %s%s", PLAN_ESC(p->name), chk->bytes, it, mm.msg, why);
            goto out;
        }
    }
    if (usec) *usec = busy * 1e6 / iters;
out:
    mscclrt_cpu_comm_destroy(comm);
    check_bufs_free(&b);
    return res;
}

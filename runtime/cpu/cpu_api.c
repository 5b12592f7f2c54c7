/*
 * cpu_api.c - the public mscclrt_cpu_* entry points: argument checks with messages naming the
 * function and the argument, then the CPU backend (cpu.c).
 */
#include "core/api_plan.h"
#include "core/err.h"
#include "cpu/cpu.h"

#include <stdlib.h>

MSCCLRT_API mscclrt_result mscclrt_cpu_comm_create(mscclrt_cpu_comm **out, int nranks) {
    if (!out) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_cpu_comm_create: out is NULL");
    return cpu_comm_create(out, nranks);
}

MSCCLRT_API void mscclrt_cpu_comm_destroy(mscclrt_cpu_comm *comm) {
    cpu_comm_destroy(comm);
}

MSCCLRT_API mscclrt_result mscclrt_cpu_comm_set_seed(mscclrt_cpu_comm *comm,
                                                     unsigned long long seed) {
    if (!cpu_comm_valid(comm))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_cpu_comm_set_seed: comm is NULL or not "
                       "a CPU communicator");
    cpu_comm_set_seed(comm, seed);
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API mscclrt_result mscclrt_cpu_execute(mscclrt_cpu_comm *comm, const mscclrt_plan *plan,
                                               void *const *send, void *const *recv,
                                               size_t in_bytes, size_t out_bytes,
                                               mscclrt_dtype dtype, mscclrt_redop op,
                                               mscclrt_packet packet) {
    const char *fn = "mscclrt_cpu_execute";
    if (!cpu_comm_valid(comm))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: comm is NULL or not a CPU communicator", fn);
    const Plan *p = api_plan_model(plan);
    if (!p) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: plan is NULL or not a plan", fn);
    if (!send || !recv) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: send or recv array is NULL", fn);
    if ((unsigned)dtype >= MSCCLRT_DTYPE_COUNT)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: dtype %d out of range [0, %d)", fn, (int)dtype,
                       MSCCLRT_DTYPE_COUNT);
    if ((unsigned)op >= MSCCLRT_REDOP_COUNT)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: op %d out of range [0, %d)", fn, (int)op,
                       MSCCLRT_REDOP_COUNT);
    if (packet != MSCCLRT_LL16 && packet != MSCCLRT_LL8)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: packet %d is neither MSCCLRT_LL16 nor "
                       "MSCCLRT_LL8", fn, (int)packet);
    int n = cpu_comm_nranks(comm);
    if (p->ngpus != n)
        return rt_fail(MSCCLRT_ERR_PLAN, "%s: plan '%s' is for %d ranks, the communicator has %d",
                       fn, PLAN_ESC(p->name), p->ngpus, n);
    for (int r = 0; r < n; r++)
        if ((in_bytes && !send[r]) || (out_bytes && !recv[r]))
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: rank %d's %s buffer is NULL", fn, r,
                           in_bytes && !send[r] ? "send" : "recv");
    /* as the GPU executor: an elementwise message beyond the 32-bit op offsets runs as pieces */
    const uint64_t piece = in_bytes == out_bytes ? plan_piece_bytes(p, in_bytes) : 0;
    if (!piece) return cpu_execute(comm, p, send, recv, in_bytes, out_bytes, dtype, op, packet);
    void **s = calloc(2 * (size_t)n, sizeof *s);
    if (!s) return rt_fail(MSCCLRT_ERR_SYSTEM, "%s: out of memory", fn);
    void **r = s + n;
    mscclrt_result res = MSCCLRT_SUCCESS;
    for (uint64_t off = 0; off < in_bytes && res == MSCCLRT_SUCCESS; off += piece) {
        const uint64_t len = in_bytes - off < piece ? in_bytes - off : piece;
        for (int k = 0; k < n; k++) {
            s[k] = (char *)send[k] + off;
            r[k] = (char *)recv[k] + off;
        }
        res = cpu_execute(comm, p, s, r, len, len, dtype, op, packet);
    }
    free(s);
    return res;
}

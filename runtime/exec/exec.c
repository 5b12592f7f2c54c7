/*
 * exec.c - one call of a plan on a GPU communicator: find the context (collective setup on
 * first use, exec_ctx.c), the kernel and the per-size arguments (exec_kernel.c), then
 * cuLaunchKernel on the caller's stream. A call equal to the comm's previous one takes the hot
 * path: a few compares and the launch.
 */
#include "exec/exec_internal.h"
#include "core/err.h"
#include "core/log.h"
#include "core/api_plan.h"

#include <stdio.h>
#include <string.h>

const Plan *exec_plan(const mscclrt_plan *plan) { return api_plan_model(plan); }

mscclrt_result exec_launch(mscclrt_comm *c, CuFunction fn, const ExecCtx *x,
                             const MkArgs *args, void *stream) {
    /* a failed proxy would leave the kernel waiting for signals that never come; an idle one
     * sleeps up to 50 us between polls, so wake it for the triggers this kernel will push */
    if (x->proxy) {
        TRY(proxy_check(x->proxy));
        proxy_kick(x->proxy);
    }
    void *params[2] = {(void *)args, (void *)x->tab};
    return exec_launch_kernel(c, fn, x->layout.ntb, x->layout.threads, params, stream, true,
                              "plan", x->plan->name);
}

/* Everything of one call but the launch: context (setup if needed), kernel, arguments. Module
 * loads and allocations may wait for running kernels of the device, so a group prepares all
 * its calls before it launches any (two ranks on one GPU would deadlock otherwise). */
mscclrt_result exec_prepare(mscclrt_comm *c, const Plan *p, const void *send, void *recv,
                                   size_t in, size_t out, int dt, int op, int pk, void *stream,
                                   ExecCtx **xo, CuFunction *fn, MkArgs *args) {
    CuContext prev;
    TRY(exec_cuda_current(c, &prev));
    mscclrt_result res = MSCCLRT_SUCCESS;
    BufKey key;
    TRY_GOTO(exec_buf_key(c, send, recv, in, out, &key), res, out);
    ExecCtx *x = exec_ctx_find(c, p, &key);
    if (x && !x->ready) {
        res = rt_fail(MSCCLRT_ERR_INTERNAL, "rank %d: context of plan '%s' used before its "
                      "setup finished", c->rank, PLAN_ESC(p->name));
        goto out;
    }
    if (!x) TRY_GOTO(exec_ctx_setup(c, p, &key, stream, &x), res, out);
    ExecKernel *k;
    const MkArgs *a;
    TRY_GOTO(exec_kernel_get(c, x, dt, op, pk, &k), res, out);
    if (c->clique) {   /* ranks sharing this GPU in this process must all fit at once */
        char what[200];
        snprintf(what, sizeof what, "plan '%s'", PLAN_ESC(p->name));
        TRY_GOTO(exec_share_check_blocks(c, k->fn, x->layout.ntb, x->layout.threads, what), res, out);
    }
    uint64_t grow = 0;
    TRY_GOTO(exec_size_get(c, x, send, recv, in, out, &a, &grow), res, out);
    if (grow) {   /* a larger message than the scratch serves: every rank sets up a larger one */
        LOG_INFO(LOG_SUB_EXEC, "rank %d: plan '%s': scratch of %zu bytes is short for in %zu / "
                 "out %zu bytes; growing it for messages up to %llu bytes", c->rank,
                 PLAN_ESC(p->name), x->scratch_bytes, in, out, (unsigned long long)grow);
        exec_ctx_retire(c, x);
        key.span = grow;
        TRY_GOTO(exec_ctx_setup(c, p, &key, stream, &x), res, out);
        TRY_GOTO(exec_size_get(c, x, send, recv, in, out, &a, &grow), res, out);
        if (grow) {
            res = rt_fail(MSCCLRT_ERR_INTERNAL, "rank %d: plan '%s': grown scratch of %zu bytes "
                          "still short for in %zu / out %zu bytes", c->rank, PLAN_ESC(p->name),
                          x->scratch_bytes, in, out);
            goto out;
        }
    }
    *xo = x;
    *fn = k->fn;
    *args = *a;
    c->hot.plan = p;
    c->hot.send = send;
    c->hot.recv = recv;
    c->hot.in_bytes = in;
    c->hot.out_bytes = out;
    c->hot.dtype = dt;
    c->hot.op = op;
    c->hot.packet = pk;
    c->hot.ctx = x;
    c->hot.args = a;
    c->hot.fn = k->fn;
out:
    exec_cuda_restore(c, prev);
    return res;
}

static mscclrt_result exec_call(mscclrt_comm *c, const Plan *p, const void *send, void *recv,
                                size_t in, size_t out, int dt, int op, int pk, void *stream) {
    ExecCtx *x;
    CuFunction fn;
    MkArgs args;
    TRY(exec_prepare(c, p, send, recv, in, out, dt, op, pk, stream, &x, &fn, &args));
    return exec_launch(c, fn, x, &args, stream);
}

/* One message of the plan: into the open group, or now. */
static mscclrt_result exec_issue(mscclrt_comm *c, const Plan *p, const void *send, void *recv,
                                 size_t in, size_t out, int dt, int op, int pk, void *stream) {
    if (exec_group_depth > 0) return exec_group_enqueue(c, p, send, recv, in, out, dt, op, pk, stream);
    return exec_call(c, p, send, recv, in, out, dt, op, pk, stream);
}

/* ---- execute ------------------------------------------------------------------------------- */
mscclrt_result mscclrt_execute_ex(mscclrt_comm *c, const mscclrt_plan *plan, const void *send,
                                  void *recv, size_t in, size_t out, mscclrt_dtype dt,
                                  mscclrt_redop op, mscclrt_packet pk, void *stream) {
    const Plan *p = exec_plan(plan);
    /* hot path: the same call as the previous one on this comm */
    if (exec_group_depth == 0 && c && c->magic == EXEC_COMM_MAGIC && p &&
        exec_hot_match(c, p, send, recv, in, out, (int)dt, (int)op, (int)pk) &&
        !__atomic_load_n(&c->revoked, __ATOMIC_RELAXED))
        return exec_launch(c, c->hot.fn, c->hot.ctx, c->hot.args, stream);
    TRY(exec_comm_check(c, "mscclrt_execute"));
    if (c->revoked)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "mscclrt_execute: rank %d: the communicator was "
                       "revoked", c->rank);
    if (!p) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_execute: plan is NULL or not a plan");
    if ((unsigned)dt >= MSCCLRT_DTYPE_COUNT)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_execute: dtype %d out of range [0, %d)",
                       (int)dt, MSCCLRT_DTYPE_COUNT);
    if ((unsigned)op >= MSCCLRT_REDOP_COUNT)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_execute: op %d out of range [0, %d)",
                       (int)op, MSCCLRT_REDOP_COUNT);
    if (pk != MSCCLRT_LL16 && pk != MSCCLRT_LL8)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_execute: packet type %d is neither "
                       "LL16 (0) nor LL8 (1)", (int)pk);
    if (p->ngpus != c->nranks)
        return rt_fail(MSCCLRT_ERR_PLAN, "mscclrt_execute: plan '%s' is for %d ranks; the comm's "
                       "group has %d", PLAN_ESC(p->name), p->ngpus, c->nranks);
    if (!send || !recv)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_execute: rank %d: %s is NULL", c->rank,
                       !send ? "sendbuf" : "recvbuf");
    /* an elementwise message too large for the plan's 32-bit op offsets: consecutive pieces */
    const uint64_t piece = in == out ? plan_piece_bytes(p, in) : 0;
    if (!piece) return exec_issue(c, p, send, recv, in, out, (int)dt, (int)op, (int)pk, stream);
    for (uint64_t off = 0; off < in; off += piece) {
        const uint64_t len = in - off < piece ? in - off : piece;
        LOG_TRACE(LOG_SUB_EXEC, "rank %d: plan '%s': piece [%llu, +%llu) of %zu bytes", c->rank,
                  PLAN_ESC(p->name), (unsigned long long)off, (unsigned long long)len, in);
        TRY(exec_issue(c, p, (const char *)send + off, (char *)recv + off, len, len, (int)dt,
                       (int)op, (int)pk, stream));
    }
    return MSCCLRT_SUCCESS;
}

mscclrt_result mscclrt_execute(mscclrt_comm *c, const mscclrt_plan *plan, const void *send,
                               void *recv, size_t in, size_t out, mscclrt_dtype dt,
                               mscclrt_redop op, void *stream) {
    return mscclrt_execute_ex(c, plan, send, recv, in, out, dt, op, MSCCLRT_LL16, stream);
}

/*
 * exec_kernel.c - a communicator's kernels and their per-size arguments: the kernel of a
 * (plan, rank, dtype, op, packet) is generated and compiled on first use (runtime/codegen,
 * disk cache) and loaded once; the MkArgs of a (context, sizes, buffer offsets) are computed
 * once and kept most-recently-used first.
 */
#include "exec/exec_internal.h"
#include "core/err.h"
#include "core/log.h"
#include "core/clock.h"
#include "core/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- kernels ---------------------------------------------------------------------------------- */
mscclrt_result exec_kernel_get(mscclrt_comm *c, const ExecCtx *x, int dt, int op, int pk,
                                 ExecKernel **out) {
    const CgLayout *l = &x->layout;
    int kdt = l->has_reduce ? dt : -1, kop = l->has_reduce ? op : -1;
    int kpk = l->has_packets ? pk : -1;
    for (ExecKernel *k = c->kernels; k; k = k->next)
        if (k->plan == x->plan && k->dtype == kdt && k->op == kop && k->packet == kpk) {
            *out = k;
            return MSCCLRT_SUCCESS;
        }
    char *src = NULL;
    ExecKernel *k = NULL;
    mscclrt_result res;
    char what[300];
    snprintf(what, sizeof what, "plan '%s' rank %d (%s, %s, LL%d)", PLAN_ESC(x->plan->name), c->rank,
             mscclrt_dtype_name((mscclrt_dtype)dt), mscclrt_redop_name((mscclrt_redop)op),
             pk == MSCCLRT_LL8 ? 8 : 16);
    const double t0 = rt_now_s();
    TRY_GOTO(cg_generate(x->plan, c->rank, (mscclrt_dtype)dt, (mscclrt_redop)op,
                         (mscclrt_packet)pk, &src), res, fail);
    const double t1 = rt_now_s();
    const char *dump = param_str(PARAM_CG_DUMP_DIR);
    if (*dump) {
        /* the file name keeps only [A-Za-z0-9_-] of the plan's name: a name holding '/' or
         * '..' must not place the file outside the dump directory */
        char path[1024], safe[64];
        size_t n = 0;
        for (const char *s = x->plan->name; *s && n + 1 < sizeof safe; s++)
            safe[n++] = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                        (*s >= '0' && *s <= '9') || *s == '-' ? *s : '_';
        safe[n] = 0;
        mkdir(dump, 0755);
        snprintf(path, sizeof path, "%s/%s.r%d.%d.%d.%d.cu", dump, safe, c->rank, kdt, kop, kpk);
        FILE *f = fopen(path, "w");
        if (f) {
            fputs(src, f);
            fclose(f);
        }
    }
    k = calloc(1, sizeof *k);
    if (!k) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
        goto fail;
    }
    TRY_GOTO(exec_module_load(c, src, CG_KERNEL_NAME, what, &k->module, &k->fn), res, fail);
    LOG_INFO(LOG_SUB_EXEC, "%s: source generated in %.2f ms", what, (t1 - t0) * 1e3);
    k->plan = x->plan;
    k->dtype = kdt;
    k->op = kop;
    k->packet = kpk;
    k->next = c->kernels;
    c->kernels = k;
    free(src);
    *out = k;
    return MSCCLRT_SUCCESS;
fail:
    free(k);
    free(src);
    return res;
}

/* ---- per-size arguments ---------------------------------------------------------------------- */
mscclrt_result exec_size_get(mscclrt_comm *c, ExecCtx *x, const void *send, const void *recv,
                               uint64_t in, uint64_t out, const MkArgs **args, uint64_t *grow) {
    *grow = 0;
    /* keyed: offsets into the context's allocations (added to peers' bases, spec §3.4); unkeyed:
     * peers never see our buffers, and the size cache is keyed by the pointers themselves */
    const uint64_t in_off = x->keyed ? (uint64_t)((const char *)send - (const char *)x->send)
                                     : (uint64_t)(uintptr_t)send;
    const uint64_t out_off = x->keyed ? (uint64_t)((const char *)recv - (const char *)x->recv)
                                      : (uint64_t)(uintptr_t)recv;
    for (int i = 0; i < x->nsizes; i++)
        if (x->sizes[i].in_bytes == in && x->sizes[i].out_bytes == out &&
            x->sizes[i].in_off == in_off && x->sizes[i].out_off == out_off) {
            if (i) { /* move to front */
                ExecSize s = x->sizes[i];
                memmove(&x->sizes[1], &x->sizes[0], (size_t)i * sizeof s);
                x->sizes[0] = s;
            }
            *args = &x->sizes[0].args;
            return MSCCLRT_SUCCESS;
        }
    PlanGeom g;
    PlanErr err;
    if (!plan_geom(x->plan, c->rank, in, out, &g, &err))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: %s", c->rank, err.msg);
    uint64_t need = g.scratch_bytes;
    if (!x->keyed && !x->plan->reuse_resources &&
        (*grow = exec_scratch_grow_span(x->plan, in, out, x->span, x->scratch_bytes)) != 0)
        return MSCCLRT_SUCCESS;
    if (x->plan->reuse_resources && x->plan->gpus[c->rank].scratch_chunks) {
        /* the fixed 64 MiB holds every chunk only while chunks stay below spec §3.5's
         * scratchChunkSize; beyond it MSCCL++ wraps scratch offsets (§5.0), which the generated
         * kernels do not do: refuse rather than run past the scratch */
        need = plan_scratch_bytes(x->plan, c->rank, g.chunk_bytes, 256);
        if (need > x->scratch_bytes)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: reuse_resources plan '%s': chunks of "
                           "%llu bytes (in %llu / out %llu bytes) need %llu bytes of scratch, more "
                           "than the fixed %zu such plans keep; MSCCL++ would wrap scratch "
                           "offsets past it, the generated kernels do not: use smaller messages "
                           "(libmscclrt(3), Calls)", c->rank, PLAN_ESC(x->plan->name),
                           (unsigned long long)g.chunk_bytes, (unsigned long long)in,
                           (unsigned long long)out, (unsigned long long)need, x->scratch_bytes);
    }
    if (need > x->scratch_bytes)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: plan '%s' needs %llu scratch bytes for "
                       "in %llu / out %llu bytes, but this context has %zu (%s)", c->rank,
                       PLAN_ESC(x->plan->name), (unsigned long long)need, (unsigned long long)in,
                       (unsigned long long)out, x->scratch_bytes,
                       x->keyed ? "sized from the buffers' allocations"
                                : "sized for the plan's max_message_size, at most 64 MiB");
    ExecSize s;
    memset(&s, 0, sizeof s);
    s.in_bytes = in;
    s.out_bytes = out;
    s.in_off = in_off;
    s.out_off = out_off;
    s.args.in = (mk_u64)(uintptr_t)send;
    s.args.out = (mk_u64)(uintptr_t)recv;
    s.args.in_off = x->keyed ? in_off : 0;
    s.args.out_off = x->keyed ? out_off : 0;
    s.args.scratch = x->scratch;
    s.args.chunk = g.chunk_bytes;
    s.args.scratch_half = x->scratch_half;
    s.args.state = x->state;
    s.args.out_bytes = out;
    s.args.nranks = (mk_u32)c->nranks;
    s.args.rank = (mk_u32)c->rank;
    int n = x->nsizes < EXEC_SIZES ? x->nsizes : EXEC_SIZES - 1;
    memmove(&x->sizes[1], &x->sizes[0], (size_t)n * sizeof s);
    x->sizes[0] = s;
    x->nsizes = n + 1;
    /* the hot entry may point into the moved array: recomputed by the caller */
    *args = &x->sizes[0].args;
    return MSCCLRT_SUCCESS;
}

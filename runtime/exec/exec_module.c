/*
 * exec_module.c - the one way a kernel gets onto a GPU and runs there, for plans (exec_kernel.c)
 * and native algorithms (runtime/algo) alike: compile a CUDA source for the comm's architecture
 * (runtime/codegen: NVRTC behind the disk cache), load the module, find the kernel, point the
 * module at the comm's abort word, and wait for the ranks sharing the CUDA context to load theirs
 * (exec_share.c); and the failure of the one launch (exec_launch_kernel, inline in exec.h: the
 * hot path crosses no extra file for it).
 */
#include "exec/exec_internal.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>

mscclrt_result exec_module_load(mscclrt_comm *c, const char *src, const char *kernel,
                                const char *what, CuModule *module, CuFunction *fn) {
    *module = NULL;
    *fn = NULL;
    void *cubin = NULL;
    size_t len = 0;
    bool cached = false;
    const double t0 = rt_now_s();
    TRY(cg_compile(src, c->arch, what, &cubin, &len, &cached));
    const double t1 = rt_now_s();
    mscclrt_result res = cu_check(cu.cuModuleLoadData(module, cubin), "cuModuleLoadData");
    free(cubin);
    if (res == MSCCLRT_SUCCESS) {
        char fwhat[400];
        snprintf(fwhat, sizeof fwhat, "%s: cuModuleGetFunction (is '%s' an extern \"C\" "
                 "__global__ function of the source?)", what, kernel);
        res = cu_check(cu.cuModuleGetFunction(fn, *module, kernel), fwhat);
    }
    if (res == MSCCLRT_SUCCESS) res = exec_module_arm(c, *module);
    if (res == MSCCLRT_SUCCESS) res = exec_share_after_load(c);
    if (res != MSCCLRT_SUCCESS) {
        if (*module) cu.cuModuleUnload(*module);
        *module = NULL;
        *fn = NULL;
        return res;
    }
    LOG_INFO(LOG_SUB_EXEC, "rank %d: %s: kernel ready in %.2f ms (%s %.2f ms, %zu-byte cubin, "
             "module load %.2f ms)", c->rank, what, (rt_now_s() - t0) * 1e3,
             cached ? "cache hit" : "NVRTC", (t1 - t0) * 1e3, len, (rt_now_s() - t1) * 1e3);
    return MSCCLRT_SUCCESS;
}

mscclrt_result exec_launch_failed(const mscclrt_comm *c, CuResult r, int blocks, int threads,
                                  const char *kind, const char *name) {
    char msg[300];
    snprintf(msg, sizeof msg, "rank %d: launch of %s '%s' (%d blocks x %d threads)", c->rank, kind,
             PLAN_ESC(name), blocks, threads);
    return cu_check(r, msg);
}

mscclrt_result exec_last_launch(const mscclrt_comm *c, CuFunction *fn, int *blocks, int *threads,
                                void *params[2]) {
    const ExecCtx *x = c->hot.ctx;
    if (!x || !c->hot.fn)
        return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "rank %d: no previous plan launch", c->rank);
    *fn = c->hot.fn;
    *blocks = x->layout.ntb;
    *threads = x->layout.threads;
    params[0] = (void *)c->hot.args;
    params[1] = (void *)x->tab;
    return MSCCLRT_SUCCESS;
}

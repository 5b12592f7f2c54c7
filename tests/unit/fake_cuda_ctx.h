/*
 * fake_cuda_ctx.h - for unit tests whose child process runs on tests/tools/fake_cuda.c: the
 * parent finds the fake's directory (fake_cuda_dir) and puts it first on the child's
 * LD_LIBRARY_PATH; in the child, fake_cuda_context loads the driver, checks that it is the
 * fake one (a real driver here would be a setup error, not a pass), and makes device 0's
 * primary context current. Static: each test includes it once, after harness.h.
 */
#ifndef TEST_FAKE_CUDA_CTX_H
#define TEST_FAKE_CUDA_CTX_H

#include "core/err.h"
#include "cuda/cuda_driver.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#ifndef CHECK_OK
#define CHECK_OK(call) do { mscclrt_result r__ = (call); CHECK_EQ_INT(MSCCLRT_SUCCESS, r__); \
    if (r__ != MSCCLRT_SUCCESS) fprintf(stderr, "  -> %s\n", mscclrt_last_error()); } while (0)
#endif

/* The directory of the fake driver: fake_cuda/ next to this test's binary
 * (runtime/cuda/module.mk builds it there). */
static void fake_cuda_dir(char *dir, size_t n) {
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len > 0 ? len : 0] = '\0';
    snprintf(dir, n, "%s/fake_cuda", dirname(exe));
}

/* 0 with *ctx current; 1 (after a failed check) otherwise. */
static int fake_cuda_context(CuContext *ctx) {
    CHECK_OK(cu_load());
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib || !dlsym(lib, "fake_cuda_allocs")) {
        fprintf(stderr, "the libcuda.so.1 loaded is not tests/tools/fake_cuda.c's\n");
        CHECK(!"fake CUDA driver loaded");
        return 1;
    }
    CuDevice d = 0;
    *ctx = NULL;
    CHECK_OK(cu_check(cu.cuDeviceGet(&d, 0), "cuDeviceGet"));
    CHECK_OK(cu_check(cu.cuDevicePrimaryCtxRetain(ctx, d), "cuDevicePrimaryCtxRetain"));
    CHECK_OK(cu_check(cu.cuCtxSetCurrent(*ctx), "cuCtxSetCurrent"));
    return *ctx ? 0 : 1;
}

#endif

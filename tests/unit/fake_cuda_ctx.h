/*
 * fake_cuda_ctx.h - for unit tests whose child process runs on tests/tools/fake_cuda.c: the
 * parent checks the fake is built and puts its directory first on the children's
 * LD_LIBRARY_PATH (fake_cuda_setup), then runs itself as the child (fake_cuda_child); in the child, fake_cuda_context loads the driver, checks that it is the
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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CHECK_OK
#define CHECK_OK(call) do { mscclrt_result r__ = (call); CHECK_EQ_INT(MSCCLRT_SUCCESS, r__); \
    if (r__ != MSCCLRT_SUCCESS) fprintf(stderr, "  -> %s\n", mscclrt_last_error()); } while (0)
#endif

/* The directory of the fake driver: fake_cuda/ next to this test's binary
 * (runtime/cuda/module.mk builds it there). */
static inline void fake_cuda_dir(char *dir, size_t n) {
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len > 0 ? len : 0] = '\0';
    snprintf(dir, n, "%s/fake_cuda", dirname(exe));
}

/* The parent's setup: a test line "<prefix>: the fake CUDA driver is built" (false when it is
 * not), then the fake's directory first on LD_LIBRARY_PATH for the children. */
static inline bool fake_cuda_setup(const char *prefix) {
    char dir[PATH_MAX + 32], lib[PATH_MAX + 64], name[256];
    fake_cuda_dir(dir, sizeof dir);
    snprintf(lib, sizeof lib, "%s/libcuda.so.1", dir);
    snprintf(name, sizeof name, "%s: the fake CUDA driver is built", prefix);
    const int f0 = h_failed;
    TEST(name, CHECK(access(lib, R_OK) == 0));
    if (h_failed != f0) return false;
    setenv("LD_LIBRARY_PATH", dir, 1);
    return true;
}

/* Runs this program again as "argv0 --child" (stdout to out_fd unless it is negative); true
 * when it exited 0. The caller's stdio is flushed first, so the child does not repeat it. */
static inline bool fake_cuda_child(const char *argv0, int out_fd) {
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        if (out_fd >= 0) dup2(out_fd, 1);
        execl("/proc/self/exe", argv0, "--child", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return false;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* main's first statement: run as "--child", it runs child() (a 60 s alarm against hangs),
 * reports and returns child's status */
#define FAKE_CUDA_CHILD_ENTRY(argc, argv, child) do { \
        if ((argc) == 2 && strcmp((argv)[1], "--child") == 0) { \
            alarm(60); \
            const int rc_ = (child)(); \
            harness_report(); \
            return rc_; \
        } \
    } while (0)

/* 0 with *ctx current; 1 (after a failed check) otherwise. */
static inline int fake_cuda_context(CuContext *ctx) {
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

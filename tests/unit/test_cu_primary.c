/*
 * test_cu_primary.c - the library's reference to each device's primary context
 * (runtime/cuda/cu_primary.c): taken once per device however many times it is asked for,
 * never released, and a device that does not exist is an error that leaves nothing behind. A
 * child process runs on the fake CUDA driver (tests/tools/fake_cuda.c), which counts retains.
 */
#include "../harness.h"
#include "fake_cuda_ctx.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int child(void) {
    (void)fake_cuda_context;   /* not used here: it would retain device 0 itself */
    CHECK_OK(cu_load());
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    int (*refs)(int) = NULL;
    if (lib) *(void **)&refs = dlsym(lib, "fake_cuda_ctx_refs");
    if (!refs) {
        fprintf(stderr, "the libcuda.so.1 loaded is not tests/tools/fake_cuda.c's\n");
        CHECK(!"fake CUDA driver loaded");
        return 1;
    }
    CuContext a = NULL, b = NULL, c = NULL;
    CHECK_OK(cu_primary_ctx(0, &a));
    CHECK_OK(cu_primary_ctx(0, &b));
    CHECK(a != NULL && a == b);
    CHECK_EQ_INT(1, refs(0));                   /* one reference, however often asked */
    CHECK_OK(cu_primary_ctx(1, &c));
    CHECK(c != NULL && c != a);
    CHECK_EQ_INT(1, refs(1));
    CuContext bad = NULL;
    CHECK_EQ_INT(MSCCLRT_ERR_CUDA, cu_primary_ctx(99, &bad));
    CHECK_CONTAINS(mscclrt_last_error(), "cuDevicePrimaryCtxRetain");
    CHECK(bad == NULL);
    CHECK_OK(cu_primary_ctx(0, &b));            /* still there after the failure */
    CHECK(b == a);
    CHECK_EQ_INT(1, refs(0));
    return h_failed ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--child") == 0) {
        alarm(60);
        int rc = child();
        harness_report();
        return rc;
    }
    char dir[PATH_MAX + 32], lib[PATH_MAX + 64];
    fake_cuda_dir(dir, sizeof dir);
    snprintf(lib, sizeof lib, "%s/libcuda.so.1", dir);
    TEST("cu primary: the fake CUDA driver is built", CHECK(access(lib, R_OK) == 0));
    if (h_failed) return harness_report();
    setenv("LD_LIBRARY_PATH", dir, 1);
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], "--child", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    TEST("cu primary: one reference per device, kept; a bad device leaves none",
         CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0));
    return harness_report();
}

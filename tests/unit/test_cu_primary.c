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
    FAKE_CUDA_CHILD_ENTRY(argc, argv, child);
    if (!fake_cuda_setup("cu primary")) return harness_report();
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    TEST("cu primary: one reference per device, kept; a bad device leaves none",
         CHECK(fake_cuda_child(argv[0], -1)));
    return harness_report();
}

/*
 * test_cu_trace.c - MSCCLRT_DEBUG=TRACE with the ALLOC subsystem logs the library's device
 * allocations and frees (runtime/cuda/cu_trace.c) with their addresses and the calling code;
 * without ALLOC in the subsystems nothing of it is logged. A child process runs on the fake
 * CUDA driver (tests/tools/fake_cuda.c) with the variables set before the driver loads.
 */
#include "../harness.h"
#include "fake_cuda_ctx.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int child(void) {
    CuContext ctx;
    if (fake_cuda_context(&ctx)) return 1;
    CuDevPtr p = 0;
    CHECK_OK(cu_check(cu.cuMemAlloc(&p, 4096), "cuMemAlloc"));
    printf("allocated %#llx\n", (unsigned long long)p);
    CHECK_OK(cu_check(cu.cuMemFree(p), "cuMemFree"));
    cu.cuDevicePrimaryCtxRelease(0);
    return h_failed ? 1 : 0;
}

/* runs the child with MSCCLRT_DEBUG_SUBSYS=subsys; its log (read into log) and the address it
 * allocated */
static bool run_child(const char *self, const char *subsys, char *log, size_t n, unsigned long long *addr) {
    char path[] = "/tmp/test_cu_trace_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return false;
    close(fd);
    char out[] = "/tmp/test_cu_trace_out_XXXXXX";
    int ofd = mkstemp(out);
    if (ofd < 0) return false;
    setenv("MSCCLRT_DEBUG", "TRACE", 1);
    setenv("MSCCLRT_DEBUG_SUBSYS", subsys, 1);
    setenv("MSCCLRT_DEBUG_FILE", path, 1);
    const bool ok = fake_cuda_child(self, ofd);
    unsetenv("MSCCLRT_DEBUG");
    unsetenv("MSCCLRT_DEBUG_SUBSYS");
    unsetenv("MSCCLRT_DEBUG_FILE");
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(log, 1, n - 1, f) : 0;
    log[len] = '\0';
    if (f) fclose(f);
    char buf[128] = {0};
    lseek(ofd, 0, SEEK_SET);
    ssize_t got = read(ofd, buf, sizeof buf - 1);
    buf[got > 0 ? got : 0] = '\0';
    close(ofd);
    unlink(path);
    unlink(out);
    *addr = 0;
    sscanf(buf, "allocated %llx", addr);
    return ok;
}

int main(int argc, char **argv) {
    FAKE_CUDA_CHILD_ENTRY(argc, argv, child);
    if (!fake_cuda_setup("cu trace")) return harness_report();
    static char log[1 << 16];
    unsigned long long a = 0;
    TEST("cu trace: ALLOC logs each allocation and free with its address and caller", {
        CHECK(run_child(argv[0], "ALLOC", log, sizeof log, &a));
        CHECK(a != 0);
        char want[128];
        snprintf(want, sizeof want, "cuMemAlloc(4096) = %#llx (result 0) from test_cu_trace+0x", a);
        CHECK(strstr(log, want) != NULL);
        snprintf(want, sizeof want, "cuMemFree(%#llx) (result 0) from test_cu_trace+0x", a);
        CHECK(strstr(log, want) != NULL);
        if (h_failed) fprintf(stderr, "log:\n%s\n", log);
    });
    TEST("cu trace: other subsystems log none of it", {
        CHECK(run_child(argv[0], "INIT", log, sizeof log, &a));
        CHECK(strstr(log, "cuMemAlloc(") == NULL);
        CHECK(strstr(log, "cuMemFree(") == NULL);
    });
    return harness_report();
}

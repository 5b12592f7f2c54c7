/*
 * test_comm_init_fail.c - mscclrt_comm_init_all on the fake CUDA driver (tests/tools/fake_cuda.c):
 * one success (then destroy), then a failure injected at each step of the init in turn (a
 * context retain, peer access, an abort word, the native context's setup, a communicator's
 * calloc). Each must return its error with a message naming the failing call, leave comms[] NULL
 * and hold nothing: no primary context retained, no driver allocation left, and, under ASan
 * (`make test-sanitize`), no leak and no freed memory touched.
 *
 * Each scenario runs in a child: the test re-executes itself with LD_LIBRARY_PATH leading to the
 * fake (cu_load opens libcuda.so.1 once per process, and the fake counts calls from the start).
 * The link wraps calloc (runtime/cuda/module.mk), so a communicator's calloc can fail with no
 * hook in the library.
 */
#include "exec/exec_internal.h"
#include "core/param.h"
#include "../harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- a communicator's calloc, made to fail ---------------------------------------------- */
void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);
static int comm_calloc_fail;   /* fail the N-th calloc of a mscclrt_comm from now; 0: none */
void *__wrap_calloc(size_t n, size_t size) {
    if (comm_calloc_fail && n == 1 && size == sizeof(mscclrt_comm) && --comm_calloc_fail == 0)
        return NULL;
    return __real_calloc(n, size);
}

/* ---- the scenarios ---------------------------------------------------------------------- */
typedef struct {
    const char *name;
    int ndev;                  /* fake devices, all in the group */
    const char *cuda_fail;     /* FAKE_CUDA_FAIL, or NULL */
    int comm_calloc_fail;      /* fail the calloc of comm N-1; 0: none */
    mscclrt_result want;
    const char *want_text;     /* in mscclrt_last_error() */
} Scenario;

/* The init's CUDA call `fail` ("cuMemHostAlloc:2": its second call) returns out of memory on
 * ndev devices, and the message names `what`; or the calloc of comm nth-1 fails. */
#define CUDA_OOM(name, ndev, fail, what) \
    {"comm_init_fail/" name, ndev, fail, 0, MSCCLRT_ERR_CUDA, what ": CUDA_ERROR_OUT_OF_MEMORY"}
#define COMM_CALLOC(name, nth) {"comm_init_fail/" name, 2, NULL, nth, MSCCLRT_ERR_SYSTEM, \
                                "mscclrt_comm_init_all: out of memory"}
static const Scenario scenarios[] = {
    {"comm_init_fail/success-then-destroy", 2, NULL, 0, MSCCLRT_SUCCESS, NULL},
    CUDA_OOM("ctx-retain-rank0", 2, "cuDevicePrimaryCtxRetain:1", "cuDevicePrimaryCtxRetain"),
    CUDA_OOM("ctx-retain-rank1", 2, "cuDevicePrimaryCtxRetain:2", "cuDevicePrimaryCtxRetain"),
    CUDA_OOM("ctx-retain-rank2-of-4", 4, "cuDevicePrimaryCtxRetain:3", "cuDevicePrimaryCtxRetain"),
    CUDA_OOM("ctx-retain-one-device", 1, "cuDevicePrimaryCtxRetain:1", "cuDevicePrimaryCtxRetain"),
    CUDA_OOM("abort-word-rank0", 2, "cuMemHostAlloc:1", "cuMemHostAlloc(abort word)"),
    CUDA_OOM("abort-word-rank1", 2, "cuMemHostAlloc:2", "cuMemHostAlloc(abort word)"),
    CUDA_OOM("peer-access", 2, "cuCtxEnablePeerAccess:1", "cuCtxEnablePeerAccess"),
    /* algo_native_init: its first allocation (rank 0's scratch, in the group's setup round) */
    CUDA_OOM("native-scratch", 2, "cuMemAlloc:1", "cuMemAlloc(scratch)"),
    /* algo_native_init, after the setup round: rank 0's MnContext copy */
    CUDA_OOM("native-context", 2, "cuMemcpyHtoD:1", "cuMemcpyHtoD(native context)"),
    /* no comm yet: the clique's live count is 0 and it must still be freed */
    COMM_CALLOC("calloc-comm0", 1),
    COMM_CALLOC("calloc-comm1", 2),
};
#define NSCENARIOS ((int)(sizeof scenarios / sizeof scenarios[0]))

/* What the fake still holds: allocations (none) and primary context retains (at most the
 * library's one per device, kept for the process's life: runtime/cuda/cu_primary.c; exactly
 * one after communicators were made and destroyed, whose release must not drop it: releasing
 * a primary context's last reference frees the application's memory in it). */
static void check_fake_holds_nothing(int ndev, bool made) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    int (*refs)(int) = NULL;
    long (*allocs)(void) = NULL;
    if (lib) {
        *(void **)&refs = dlsym(lib, "fake_cuda_ctx_refs");
        *(void **)&allocs = dlsym(lib, "fake_cuda_allocs");
    }
    if (!refs || !allocs) {
        fprintf(stderr, "the libcuda.so.1 loaded is not tests/tools/fake_cuda.c's\n");
        CHECK(refs && allocs);
    } else {
        for (int d = 0; d < ndev; d++) {
            if (made) CHECK_EQ_INT(1, refs(d));
            else CHECK(refs(d) == 0 || refs(d) == 1);
        }
        CHECK_EQ_INT(0, allocs());
    }
    if (lib) dlclose(lib);
}

static void run_scenario(const Scenario *s) {
    char n[16];
    snprintf(n, sizeof n, "%d", s->ndev);
    setenv("FAKE_CUDA_DEVICES", n, 1);
    if (s->cuda_fail) setenv("FAKE_CUDA_FAIL", s->cuda_fail, 1);
    mscclrt_comm *comms[8];
    for (int i = 0; i < 8; i++) comms[i] = (mscclrt_comm *)&comms[i];   /* must become NULL */
    comm_calloc_fail = s->comm_calloc_fail;
    mscclrt_result r = mscclrt_comm_init_all(comms, s->ndev, NULL);
    comm_calloc_fail = 0;
    CHECK_EQ_INT(s->want, r);
    if (r != MSCCLRT_SUCCESS) fprintf(stderr, "mscclrt_last_error: %s\n", mscclrt_last_error());
    if (s->want_text) CHECK_CONTAINS(mscclrt_last_error(), s->want_text);
    if (s->want == MSCCLRT_SUCCESS && r == MSCCLRT_SUCCESS) {
        for (int i = 0; i < s->ndev; i++) {
            int rank = -1;
            CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_comm_rank(comms[i], &rank));
            CHECK_EQ_INT(i, rank);
        }
        for (int i = 0; i < s->ndev; i++) CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_comm_destroy(comms[i]));
    } else {
        for (int i = 0; i < s->ndev; i++) CHECK(comms[i] == NULL);
    }
    check_fake_holds_nothing(s->ndev, s->want == MSCCLRT_SUCCESS && r == MSCCLRT_SUCCESS);
}

/* ---- the parent: one child per scenario ------------------------------------------------- */
static int run_child(int idx) {
    char arg[16];
    snprintf(arg, sizeof arg, "%d", idx);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        alarm(120);
        dup2(2, 1);   /* the child's lines are diagnostics: only the parent prints "testing" */
        char self[] = "test_comm_init_fail", flag[] = "--child";
        char *argv[] = {self, flag, arg, NULL};
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    if (WIFEXITED(st))
        fprintf(stderr, "%s: child exited %d (its checks or a sanitizer report above)\n",
                scenarios[idx].name, WEXITSTATUS(st));
    else
        fprintf(stderr, "%s: child killed by signal %d\n", scenarios[idx].name,
                WIFSIGNALED(st) ? WTERMSIG(st) : -1);
    return 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        int idx = atoi(argv[2]);
        if (idx < 0 || idx >= NSCENARIOS) return 2;
        run_scenario(&scenarios[idx]);
        return harness_report();
    }
    /* the fake lies in fake_cuda/ next to this binary (runtime/cuda/module.mk) */
    char exe[PATH_MAX], dir[PATH_MAX + 32];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        perror("readlink /proc/self/exe");
        return 1;
    }
    exe[len] = '\0';
    snprintf(dir, sizeof dir, "%s/fake_cuda", dirname(exe));
    char lib[PATH_MAX + 64];
    snprintf(lib, sizeof lib, "%s/libcuda.so.1", dir);
    if (access(lib, R_OK) != 0) {
        fprintf(stderr, "%s: missing (make builds it with this test)\n", lib);
        TEST("comm_init_fail/fake-driver", CHECK(access(lib, R_OK) == 0));
        return harness_report();
    }
    const char *old = getenv("LD_LIBRARY_PATH");
    char *path = malloc(strlen(dir) + (old ? strlen(old) : 0) + 2);
    if (!path) return 1;
    sprintf(path, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
    setenv("LD_LIBRARY_PATH", path, 1);
    free(path);
    /* the library's defaults, whatever the caller's environment says; a hang ends in 10 s */
    for (int i = 0; i < PARAM_COUNT; i++) unsetenv(param_env_name((ParamId)i));
    setenv("MSCCLRT_SETUP_TIMEOUT_MS", "10000", 1);
    unsetenv("FAKE_CUDA_FAIL");
    for (int i = 0; i < NSCENARIOS; i++) TEST(scenarios[i].name, CHECK_EQ_INT(0, run_child(i)));
    return harness_report();
}

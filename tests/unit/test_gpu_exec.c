/*
 * test_gpu_exec.c - GPU correctness of the generated kernels (tests/gpu/run.sh runs it on a GPU
 * machine; `make test` skips it with 77 where there is no GPU). Every compat plan except
 * reduce_nvls (and every plan file given as an argument) runs on a single-process group of 2
 * ranks (devices 0,1, or both ranks on device 0 when there is one GPU) for sizes from the
 * smallest legal one to 16 MiB, several dtypes/operators, LL16 and LL8, many back-to-back
 * iterations and a CUDA-graph replay, each checked against the host reference.
 * MSCCLRT_TEST_QUICK=1 runs fewer combinations.
 */
#include "../harness.h"
#include "test_plan_util.h"

#include "cuda/cuda_driver.h"
#include "mscclrt.h"

#include <stdlib.h>
#include <string.h>

typedef struct { mscclrt_dtype dt; mscclrt_redop op; mscclrt_packet pk; } Combo;

static mscclrt_comm *comms[8];
static int nranks = 2;

static void run_plan(const char *path, bool quick) {
    mscclrt_plan *plan = NULL;
    mscclrt_result r = mscclrt_plan_load(&plan, path);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, r);
    if (r != MSCCLRT_SUCCESS) {
        fprintf(stderr, "%s\n", mscclrt_last_error());
        return;
    }
    mscclrt_plan_info info;
    mscclrt_plan_get_info(plan, &info);
    if (info.nranks != nranks) {
        fprintf(stderr, "%s: %d ranks, this test runs %d; skipped\n", path, info.nranks, nranks);
        mscclrt_plan_free(plan);
        return;
    }
    size_t unit = 0;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_plan_min_bytes(plan, &unit));
    if (!unit) unit = 16;
    const size_t targets[] = {0, 1024, 65536, 1 << 20, 16 << 20};
    const Combo combos[] = {
        {MSCCLRT_FLOAT32, MSCCLRT_SUM, MSCCLRT_LL16}, {MSCCLRT_FLOAT16, MSCCLRT_SUM, MSCCLRT_LL8},
        {MSCCLRT_BFLOAT16, MSCCLRT_MAX, MSCCLRT_LL16}, {MSCCLRT_INT32, MSCCLRT_PROD, MSCCLRT_LL8},
        {MSCCLRT_UINT8, MSCCLRT_MIN, MSCCLRT_LL16}, {MSCCLRT_FP8_E4M3, MSCCLRT_SUM, MSCCLRT_LL16},
        {MSCCLRT_FLOAT64, MSCCLRT_AVG, MSCCLRT_LL16}, {MSCCLRT_INT64, MSCCLRT_SUM, MSCCLRT_LL16},
        {MSCCLRT_FP8_E5M2, MSCCLRT_AVG, MSCCLRT_LL8}, {MSCCLRT_FLOAT32, MSCCLRT_AVG, MSCCLRT_LL8},
    };
    const int ncombo = (int)(sizeof combos / sizeof combos[0]);
    int modes[2], nmodes = 0;
    if (info.inplace) modes[nmodes++] = 1;
    else modes[nmodes++] = 0;
    for (int si = 0; si < (int)(sizeof targets / sizeof targets[0]); si++) {
        size_t bytes = targets[si] < unit ? unit : targets[si] / unit * unit;
        if (bytes > info.max_message_size || bytes < info.min_message_size) continue;
        for (int ci = 0; ci < ncombo; ci++) {
            if (quick && ci % 3 != si % 3) continue;
            if (!quick && si == 4 && ci > 1) continue; /* 16 MiB: two combos */
            const Combo *c = &combos[ci];
            /* LL8 packets carry 4 bytes: 8-byte reductions need LL16 */
            mscclrt_packet pk = c->pk;
            if (pk == MSCCLRT_LL8 && mscclrt_dtype_size(c->dt) == 8) pk = MSCCLRT_LL16;
            for (int m = 0; m < nmodes; m++) {
                mscclrt_gpu_check chk = {.bytes = bytes, .dtype = c->dt, .op = c->op, .packet = pk,
                                         .inplace = modes[m], .iters = 20, .graph_iters = 10,
                                         .seed = 1000 + (uint64_t)si * 31 + (uint64_t)ci};
                double us = 0;
                r = mscclrt_gpu_check_plan(comms, nranks, plan, &chk, &us);
                if (r != MSCCLRT_SUCCESS)
                    fprintf(stderr, "%s: %zu bytes %s %s LL%d %s: %s\n", path, bytes,
                            mscclrt_dtype_name(c->dt), mscclrt_redop_name(c->op),
                            pk == MSCCLRT_LL8 ? 8 : 16, modes[m] ? "in-place" : "out-of-place",
                            mscclrt_last_error());
                else
                    printf("  ok %-22s %9zu B %-9s %-4s LL%-2d %s %8.1f us/call\n", info.name, bytes,
                           mscclrt_dtype_name(c->dt), mscclrt_redop_name(c->op),
                           pk == MSCCLRT_LL8 ? 8 : 16, modes[m] ? "ip " : "oop", us);
                CHECK_EQ_INT(MSCCLRT_SUCCESS, r);
                if (r == MSCCLRT_ERR_TIMEOUT) { /* the GPU is stuck: nothing else can run */
                    harness_report();
                    exit(1);
                }
            }
        }
    }
    mscclrt_plan_free(plan);
}

static void init_group(const int *devs) {
    mscclrt_result r = mscclrt_comm_init_all(comms, nranks, devs);
    if (r != MSCCLRT_SUCCESS) fprintf(stderr, "%s\n", mscclrt_last_error());
    CHECK_EQ_INT(MSCCLRT_SUCCESS, r);
    if (r != MSCCLRT_SUCCESS) return;
    int rank = -1, size = -1, dev = -1;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_comm_rank(comms[1], &rank));
    CHECK_EQ_INT(1, rank);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_comm_size(comms[1], &size));
    CHECK_EQ_INT(2, size);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_comm_device(comms[1], &dev));
    CHECK_EQ_INT(devs[1], dev);
}

static void nvls_refused(void) {
    mscclrt_plan *plan = NULL;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_plan_load(&plan, COMPAT_DIR "reduce_nvls.json"));
    mscclrt_gpu_check chk = {.bytes = 1 << 20, .dtype = MSCCLRT_FLOAT32, .op = MSCCLRT_SUM,
                             .iters = 1, .seed = 1};
    mscclrt_result r = mscclrt_gpu_check_plan(comms, nranks, plan, &chk, NULL);
    CHECK_EQ_INT(MSCCLRT_ERR_UNAVAILABLE, r);
    CHECK_CONTAINS(mscclrt_last_error(), "MSCCLRT_ENABLE_NVLS");
    mscclrt_plan_free(plan);
}

/* A buffer running past its allocation is refused before anything is set up: peers map one
 * allocation, so the rest would be out of their reach. */
static void past_allocation_refused(void) {
    mscclrt_plan *plan = NULL;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_plan_load(&plan, COMPAT_DIR "allreduce_packet.json"));
    CuContext ctx = NULL;
    CHECK_EQ_INT(CU_OK, cu.cuDevicePrimaryCtxRetain(&ctx, 0));
    cu.cuCtxSetCurrent(ctx);
    CuDevPtr a = 0;
    CHECK_EQ_INT(CU_OK, cu.cuMemAlloc(&a, 1 << 20));
    int dev = -1;
    mscclrt_comm_device(comms[0], &dev);
    if (a && dev == 0) {
        const void *send = (const void *)(uintptr_t)(a + (1 << 20) - 4096);
        void *recv = (void *)(uintptr_t)a;
        mscclrt_result r = mscclrt_execute(comms[0], plan, send, recv, 8192, 8192,
                                           MSCCLRT_FLOAT32, MSCCLRT_SUM, NULL);
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, r);
        CHECK_CONTAINS(mscclrt_last_error(), "runs past the end of its allocation");
    }
    if (a) cu.cuMemFree(a);
    cu.cuDevicePrimaryCtxRelease(0);
    mscclrt_plan_free(plan);
}

int main(int argc, char **argv) {
    if (cu_load() != MSCCLRT_SUCCESS) {
        return harness_skip("a GPU", mscclrt_last_error());
    }
    int count = 0;
    if (cu.cuDeviceGetCount(&count) != CU_OK || count < 1) {
        return harness_skip("a GPU", "no CUDA device");
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *q = getenv("MSCCLRT_TEST_QUICK");
    bool quick = q && *q == '1';
    int devs[2] = {0, count >= 2 ? 1 : 0};
    TEST("gpu comm_init_all", init_group(devs));
    if (h_failed) return harness_report();
    printf("devices: %d, %d\n", devs[0], devs[1]);
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            char name[600];
            snprintf(name, sizeof name, "gpu plan %s", argv[i]);
            TEST(name, run_plan(argv[i], quick));
        }
    } else {
        for (int i = 0; i < NCOMPAT; i++) {
            if (!strcmp(compat_plans[i], "reduce_nvls")) continue; /* multicast: never here */
            char path[256], name[300];
            snprintf(path, sizeof path, COMPAT_DIR "%s.json", compat_plans[i]);
            snprintf(name, sizeof name, "gpu compat %s", compat_plans[i]);
            TEST(name, run_plan(path, quick));
        }
    }
    TEST("gpu switch channels refused without MSCCLRT_ENABLE_NVLS", nvls_refused());
    TEST("gpu buffer past the end of its allocation refused", past_allocation_refused());
    for (int r = 0; r < nranks; r++) mscclrt_comm_destroy(comms[r]);
    return harness_report();
}

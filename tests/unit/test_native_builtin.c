/*
 * test_native_builtin.c - the built-in native algorithms without a GPU: NVRTC compiles their
 * source (kernels/native_builtin.cuh through the embedded device library) for every dtype and
 * operator they are specialised for, PreMulSum and the byte-moving variant included, and the
 * native scratch layout leaves aligned, non-empty slots for 1 to 1024 ranks (or says it cannot).
 * Skips (77) where NVRTC cannot be loaded.
 */
#include "../harness.h"
#include "algo/algo_native.h"
#include "codegen/codegen.h"
#include "core/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool compile(int dt, int op, const char *T) {
    char src[512];
    snprintf(src, sizeof src, "#define MSCCLRT_DTYPE %d\n#define MSCCLRT_OP %d\n#define MSCCLRT_T %s\n%s",
             dt, op, T, algo_native_builtin_source());
    char what[64];
    snprintf(what, sizeof what, "builtin %s op %d", T, op);
    mscclrt_result r = cg_check_source(src, 90, what);
    if (r != MSCCLRT_SUCCESS) fprintf(stderr, "%s\n", mscclrt_last_error());
    return r == MSCCLRT_SUCCESS;
}

static void t_compiles(bool all) {
    CHECK(compile(-1, 0, "mk::u8"));
    for (int dt = 0; dt < MSCCLRT_DTYPE_COUNT; dt++)
        for (int op = 0; op <= MN_OP_PREMULSUM; op++) {
            if (!all && dt != MSCCLRT_FLOAT32 && dt != MSCCLRT_BFLOAT16 && dt != MSCCLRT_FP8_E4M3 &&
                dt != MSCCLRT_INT64)
                continue;
            CHECK(compile(dt, op, cg_ctype((mscclrt_dtype)dt)));
        }
}

static void t_layout(void) {
    for (int n = 1; n <= 1024; n *= 2) {
        uint64_t off = 0;
        const uint64_t slot = native_slot_bytes(n, 32u << 20, &off);
        if (n <= 256) CHECK(slot >= 256);
        if (!slot) continue;
        CHECK_EQ_INT(0, slot % 256);
        CHECK_EQ_INT(0, off % 256);
        CHECK(off >= 4ull * MN_MAX_BLOCKS * (uint64_t)n * 8);          /* counters fit */
        CHECK(off + (uint64_t)MN_MAX_BLOCKS * n * 2 * slot <= (32u << 20)); /* slots fit */
    }
    CHECK_EQ_INT(0, native_slot_bytes(8, 4096, NULL));   /* too small: refused, not negative */
}

int main(void) {
    if (cg_check_source("extern \"C\" __global__ void k() {}", 90, "probe") != MSCCLRT_SUCCESS) {
        return harness_skip("NVRTC (the CUDA toolkit's libnvrtc)", mscclrt_last_error());
    }
    TEST("native builtin: scratch layout for 1..1024 ranks", t_layout());
    TEST("native builtin: NVRTC compiles every dtype x operator (PreMulSum too)",
         t_compiles(getenv("MSCCLRT_TEST_QUICK") == NULL));
    return harness_report();
}

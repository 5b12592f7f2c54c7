/*
 * test_cpu_dtype.c - the data-type arithmetic of runtime/check: fp16/bf16/fp8 conversions
 * (round to nearest even, overflow to inf, e4m3 saturation), the pairwise operators of every
 * type, avg, the input generator and the collective postcondition checker.
 */
#include "check/check.h"
#include "../harness.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static uint16_t f16_sum(uint16_t a, uint16_t b, mscclrt_redop op) {
    dtype_reduce(MSCCLRT_FLOAT16, op, &a, &b, 1);
    return a;
}

static void t_f16_convert(void) {
    CHECK_EQ_INT(0x3c00, dtype_f64_to_f16(1.0));
    CHECK_EQ_INT(0xc000, dtype_f64_to_f16(-2.0));
    CHECK_EQ_INT(0x7bff, dtype_f64_to_f16(65504.0));
    CHECK_EQ_INT(0x7bff, dtype_f64_to_f16(65519.99));
    CHECK_EQ_INT(0x7c00, dtype_f64_to_f16(65520.0));      /* tie, odd max -> inf */
    CHECK_EQ_INT(0x7c00, dtype_f64_to_f16(1e9));
    CHECK_EQ_INT(0xfc00, dtype_f64_to_f16(-INFINITY));
    CHECK_EQ_INT(0x0001, dtype_f64_to_f16(ldexp(1, -24)));
    CHECK_EQ_INT(0x0000, dtype_f64_to_f16(ldexp(1, -25)));  /* tie to even (0) */
    CHECK_EQ_INT(0x0002, dtype_f64_to_f16(3 * ldexp(1, -25)));
    CHECK_EQ_INT(0x3c00, dtype_f64_to_f16(1.0 + ldexp(1, -11)));  /* tie to even */
    CHECK_EQ_INT(0x3c02, dtype_f64_to_f16(1.0 + 3 * ldexp(1, -11)));
    CHECK(isnan(dtype_f16_to_f64(dtype_f64_to_f16(NAN))));
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        double v = dtype_f16_to_f64((uint16_t)h);
        if (!isnan(v) && dtype_f64_to_f16(v) != h) bad++;
    }
    CHECK_EQ_INT(0, bad);
}

static void t_f16_overflow_to_inf(void) {
    CHECK_EQ_INT(0x7c00, f16_sum(0x7bff, 0x7bff, MSCCLRT_SUM));     /* not clamped */
    CHECK_EQ_INT(0xfc00, f16_sum(0xfbff, 0xfbff, MSCCLRT_SUM));
    CHECK_EQ_INT(0x7c00, f16_sum(0x5c00, 0x5c00, MSCCLRT_PROD));    /* 256^2 */
    CHECK_EQ_INT(0x4200, f16_sum(0x3c00, 0x4000, MSCCLRT_SUM));     /* 1 + 2 = 3 */
    CHECK_EQ_INT(0x3c00, f16_sum(0x3c00, 0x4000, MSCCLRT_MIN));
    CHECK_EQ_INT(0x4000, f16_sum(0x3c00, 0x4000, MSCCLRT_MAX));
}

static void t_bf16(void) {
    CHECK_EQ_INT(0x3f80, dtype_f64_to_bf16(1.0));
    CHECK_EQ_INT(0x3f80, dtype_f64_to_bf16(1.0 + ldexp(1, -8)));   /* tie to even */
    CHECK_EQ_INT(0x3f82, dtype_f64_to_bf16(1.0 + 3 * ldexp(1, -8)));
    CHECK_EQ_INT(0x7f80, dtype_f64_to_bf16(1e39));
    uint16_t a = 0x7f7f, b = 0x7f7f;                                 /* max finite */
    dtype_reduce(MSCCLRT_BFLOAT16, MSCCLRT_SUM, &a, &b, 1);
    CHECK_EQ_INT(0x7f80, a);
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        double v = dtype_bf16_to_f64((uint16_t)h);
        if (!isnan(v) && dtype_f64_to_bf16(v) != h) bad++;
    }
    CHECK_EQ_INT(0, bad);
}

static void t_fp8_e4m3(void) {
    CHECK_EQ_INT(0x38, dtype_f64_to_e4m3(1.0));
    CHECK_EQ_INT(0x7e, dtype_f64_to_e4m3(448.0));
    CHECK_EQ_INT(0x7e, dtype_f64_to_e4m3(464.0));                    /* saturates */
    CHECK_EQ_INT(0xfe, dtype_f64_to_e4m3(-1e6));
    CHECK_EQ_INT(0x7e, dtype_f64_to_e4m3(INFINITY));
    CHECK_EQ_INT(0x7f, dtype_f64_to_e4m3(NAN) & 0x7f);
    CHECK_EQ_INT(0x38, dtype_f64_to_e4m3(1.0625));                   /* tie -> 1.0 */
    CHECK_EQ_INT(0x3a, dtype_f64_to_e4m3(1.1875));                   /* tie -> 1.25 */
    CHECK_EQ_INT(0x01, dtype_f64_to_e4m3(ldexp(1, -9)));
    CHECK_EQ_INT(0x00, dtype_f64_to_e4m3(ldexp(1, -10)));            /* tie -> 0 */
    CHECK_EQ_INT(0x08, dtype_f64_to_e4m3(ldexp(1, -6)));             /* min normal */
    CHECK(isnan(dtype_e4m3_to_f64(0x7f)));
    CHECK(dtype_e4m3_to_f64(0x7e) == 448.0);
    uint8_t a = 0x7e, b = 0x7e;
    dtype_reduce(MSCCLRT_FP8_E4M3, MSCCLRT_SUM, &a, &b, 1);
    CHECK_EQ_INT(0x7e, a);                                           /* 896 saturates */
    int bad = 0;
    for (int h = 0; h < 256; h++) {
        double v = dtype_e4m3_to_f64((uint8_t)h);
        if (!isnan(v) && dtype_f64_to_e4m3(v) != h) bad++;
    }
    CHECK_EQ_INT(0, bad);
}

static void t_fp8_e5m2(void) {
    CHECK_EQ_INT(0x3c, dtype_f64_to_e5m2(1.0));
    CHECK_EQ_INT(0x7b, dtype_f64_to_e5m2(57344.0));
    CHECK_EQ_INT(0x7c, dtype_f64_to_e5m2(61440.0));                  /* tie, odd -> inf */
    CHECK_EQ_INT(0x7b, dtype_f64_to_e5m2(61439.0));
    CHECK_EQ_INT(0x3c, dtype_f64_to_e5m2(1.125));                    /* tie -> 1.0 */
    CHECK_EQ_INT(0x3e, dtype_f64_to_e5m2(1.375));                    /* tie -> 1.5 */
    CHECK_EQ_INT(0x01, dtype_f64_to_e5m2(ldexp(1, -16)));
    CHECK(isinf(dtype_e5m2_to_f64(0x7c)));
    CHECK(isnan(dtype_e5m2_to_f64(0x7e)));
    int bad = 0;
    for (int h = 0; h < 256; h++) {
        double v = dtype_e5m2_to_f64((uint8_t)h);
        if (!isnan(v) && dtype_f64_to_e5m2(v) != h) bad++;
    }
    CHECK_EQ_INT(0, bad);
}

/* Every code of both fp8 formats against the textbook formula, and every gap between two
 * neighbouring positive finite codes: its midpoint rounds to the even code, anything just
 * off the midpoint to the nearer one (this covers the encoders' fast and general paths). */
static double fp8_formula(int h, int ebits, int mbits, int bias) {
    int e = (h >> mbits) & ((1 << ebits) - 1), m = h & ((1 << mbits) - 1);
    double v = e ? ldexp(1.0 + ldexp(m, -mbits), e - bias) : ldexp(m, 1 - bias - mbits);
    return h & 0x80 ? -v : v;
}

static void t_fp8_exhaustive(void) {
    int bad = 0;
    for (int h = 0; h < 256; h++) {
        bool nan4 = (h & 0x7f) == 0x7f, special5 = ((h >> 2) & 0x1f) == 0x1f;
        if (!nan4 && dtype_e4m3_to_f64((uint8_t)h) != fp8_formula(h, 4, 3, 7)) bad++;
        if (!special5 && dtype_e5m2_to_f64((uint8_t)h) != fp8_formula(h, 5, 2, 15)) bad++;
    }
    CHECK_EQ_INT(0, bad);
    for (int fmt = 0; fmt < 2; fmt++) {
        int top = fmt == 0 ? 0x7e : 0x7b;                /* largest finite code */
        for (int h = 0; h < top; h++) {
            double lo = fmt == 0 ? dtype_e4m3_to_f64((uint8_t)h) : dtype_e5m2_to_f64((uint8_t)h);
            double hi = fmt == 0 ? dtype_e4m3_to_f64((uint8_t)(h + 1))
                                 : dtype_e5m2_to_f64((uint8_t)(h + 1));
            double mid = (lo + hi) / 2, eps = (hi - lo) / 64;
            int even = h % 2 == 0 ? h : h + 1;
            for (int sign = 0; sign < 2; sign++) {
                double s = sign ? -1.0 : 1.0;
                int sb = sign ? 0x80 : 0;
                uint8_t (*enc)(double) = fmt == 0 ? dtype_f64_to_e4m3 : dtype_f64_to_e5m2;
                if (enc(s * mid) != (sb | even)) bad++;
                if (enc(s * (mid - eps)) != (sb | h)) bad++;
                if (enc(s * (mid + eps)) != (sb | (h + 1))) bad++;
            }
        }
    }
    CHECK_EQ_INT(0, bad);
}

static void t_integer_ops(void) {
    int8_t a = 127, b = 1;
    dtype_reduce(MSCCLRT_INT8, MSCCLRT_SUM, &a, &b, 1);
    CHECK_EQ_INT(-128, a);
    uint8_t c = 16, d = 16;
    dtype_reduce(MSCCLRT_UINT8, MSCCLRT_PROD, &c, &d, 1);
    CHECK_EQ_INT(0, c);
    int32_t e[2] = {-5, 7}, f[2] = {3, -9};
    dtype_reduce(MSCCLRT_INT32, MSCCLRT_MIN, e, f, 2);
    CHECK_EQ_INT(-5, e[0]);
    CHECK_EQ_INT(-9, e[1]);
    uint32_t g = 0xffffffffu, h = 3;
    dtype_reduce(MSCCLRT_UINT32, MSCCLRT_MAX, &g, &h, 1);
    CHECK(g == 0xffffffffu);
    int64_t i = INT64_MAX, j = 1;
    dtype_reduce(MSCCLRT_INT64, MSCCLRT_SUM, &i, &j, 1);
    CHECK(i == INT64_MIN);
    int32_t k = -7;
    dtype_avg_finish(MSCCLRT_INT32, &k, 1, 2);
    CHECK_EQ_INT(-3, k);
    float x = 3.0f;
    dtype_avg_finish(MSCCLRT_FLOAT32, &x, 1, 2);
    CHECK(x == 1.5f);
    double y = 1.0, z = 2.0;
    dtype_reduce(MSCCLRT_FLOAT64, MSCCLRT_PROD, &y, &z, 1);
    CHECK(y == 2.0);
}

static void t_names(void) {
    mscclrt_dtype t;
    mscclrt_redop o;
    CHECK(dtype_parse("fp8_e5m2", &t) && t == MSCCLRT_FP8_E5M2);
    CHECK(!dtype_parse("half", &t));
    CHECK(dtype_redop_parse("avg", &o) && o == MSCCLRT_AVG);
    CHECK_STR("bfloat16", dtype_name(MSCCLRT_BFLOAT16));
    CHECK_EQ_INT(2, dtype_size(MSCCLRT_BFLOAT16));
    CHECK_EQ_INT(0, dtype_size(MSCCLRT_DTYPE_COUNT));
}

static void t_fill_nonzero_deterministic(void) {
    for (int t = 0; t < MSCCLRT_DTYPE_COUNT; t++)
        for (int op = 0; op < MSCCLRT_REDOP_COUNT; op++) {
            unsigned char a[64 * 8], b[64 * 8], z[8] = {0};
            size_t es = dtype_size((mscclrt_dtype)t);
            check_fill((mscclrt_dtype)t, (mscclrt_redop)op, a, 1, 7, 0);
            CHECK(memcmp(a, z, es) != 0);
            check_fill((mscclrt_dtype)t, (mscclrt_redop)op, a, 64, 7, 3);
            check_fill((mscclrt_dtype)t, (mscclrt_redop)op, b, 64, 7, 3);
            CHECK(memcmp(a, b, 64 * es) == 0);
            check_fill((mscclrt_dtype)t, (mscclrt_redop)op, b, 64, 8, 3);
            CHECK(memcmp(a, b, 64 * es) != 0);
        }
}

static void t_checker(void) {
    float in0[4] = {1, 2, 3, 4}, in1[4] = {10, 20, 30, 40};
    float out0[4] = {11, 22, 33, 44}, out1[4] = {11, 22, 33, 44};
    const void *ins[2] = {in0, in1}, *outs[2] = {out0, out1};
    CheckMismatch mm;
    CHECK(check_collective(PLAN_COLL_ALLREDUCE, 2, MSCCLRT_FLOAT32, MSCCLRT_SUM, ins, 16, outs,
                           16, &mm));
    out1[2] = 33.5f;
    CHECK(!check_collective(PLAN_COLL_ALLREDUCE, 2, MSCCLRT_FLOAT32, MSCCLRT_SUM, ins, 16,
                            outs, 16, &mm));
    CHECK_EQ_INT(1, mm.rank);
    CHECK_EQ_INT(2, mm.elem);
    CHECK_CONTAINS(mm.msg, "rank 1 element 2");
    float ag0[8] = {1, 2, 3, 4, 10, 20, 30, 40}, ag1[8] = {1, 2, 3, 4, 10, 20, 30, 40};
    const void *ago[2] = {ag0, ag1};
    CHECK(check_collective(PLAN_COLL_ALLGATHER, 2, MSCCLRT_FLOAT32, MSCCLRT_SUM, ins, 16, ago,
                           32, &mm));
    ag1[5] = 0;
    CHECK(!check_collective(PLAN_COLL_ALLGATHER, 2, MSCCLRT_FLOAT32, MSCCLRT_SUM, ins, 16,
                            ago, 32, &mm));
    CHECK_EQ_INT(5, mm.elem);
    float rs0[2] = {11, 22}, rs1[2] = {33, 44};
    const void *rso[2] = {rs0, rs1};
    CHECK(check_collective(PLAN_COLL_REDUCESCATTER, 2, MSCCLRT_FLOAT32, MSCCLRT_SUM, ins, 16,
                           rso, 8, &mm));
    const void *sro[2] = {in1, in0};
    CHECK(check_collective(PLAN_COLL_SENDRECV, 2, MSCCLRT_FLOAT32, MSCCLRT_SUM, ins, 16, sro,
                           16, &mm));
    CHECK(!check_collective(PLAN_COLL_SENDRECV, 2, MSCCLRT_FLOAT32, MSCCLRT_SUM, ins, 16, ins,
                            16, &mm));
    float a2a0[4] = {1, 2, 10, 20}, a2a1[4] = {3, 4, 30, 40};
    const void *a2ao[2] = {a2a0, a2a1};
    CHECK(check_collective(PLAN_COLL_ALLTOALL, 2, MSCCLRT_FLOAT32, MSCCLRT_SUM, ins, 16, a2ao,
                           16, &mm));
    uint16_t h0[1] = {dtype_f64_to_f16(1.0)}, h1[1] = {dtype_f64_to_f16(2.0)};
    uint16_t hout[1] = {dtype_f64_to_f16(3.0)};
    const void *hi[2] = {h0, h1}, *ho[2] = {hout, hout};
    CHECK(check_collective(PLAN_COLL_ALLREDUCE, 2, MSCCLRT_FLOAT16, MSCCLRT_SUM, hi, 2, ho, 2,
                           &mm));
    hout[0] = dtype_f64_to_f16(3.01);                  /* 5 ulps off: beyond the tolerance */
    CHECK(!check_collective(PLAN_COLL_ALLREDUCE, 2, MSCCLRT_FLOAT16, MSCCLRT_SUM, hi, 2, ho,
                            2, &mm));
}

int main(void) {
    TEST("cpu_dtype/f16_convert", t_f16_convert());
    TEST("cpu_dtype/f16_overflow_to_inf", t_f16_overflow_to_inf());
    TEST("cpu_dtype/bf16", t_bf16());
    TEST("cpu_dtype/fp8_e4m3", t_fp8_e4m3());
    TEST("cpu_dtype/fp8_e5m2", t_fp8_e5m2());
    TEST("cpu_dtype/fp8_exhaustive", t_fp8_exhaustive());
    TEST("cpu_dtype/integer_ops", t_integer_ops());
    TEST("cpu_dtype/names", t_names());
    TEST("cpu_dtype/fill_nonzero_deterministic", t_fill_nonzero_deterministic());
    TEST("cpu_dtype/checker", t_checker());
    return harness_report();
}

/*
 * check.c - the arithmetic of every data type as a GPU does it (conversions with round to
 * nearest even, one rounding per pairwise operation), deterministic inputs, and the collective
 * postcondition checker against float64 / exact-integer references (see check.h).
 */
#include "check/check.h"
#include "core/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *name; size_t size; bool is_float; } dtypes[MSCCLRT_DTYPE_COUNT] = {
    [MSCCLRT_INT8] = {"int8", 1, false},         [MSCCLRT_UINT8] = {"uint8", 1, false},
    [MSCCLRT_INT32] = {"int32", 4, false},       [MSCCLRT_UINT32] = {"uint32", 4, false},
    [MSCCLRT_INT64] = {"int64", 8, false},       [MSCCLRT_UINT64] = {"uint64", 8, false},
    [MSCCLRT_FLOAT16] = {"float16", 2, true},    [MSCCLRT_FLOAT32] = {"float32", 4, true},
    [MSCCLRT_FLOAT64] = {"float64", 8, true},    [MSCCLRT_BFLOAT16] = {"bfloat16", 2, true},
    [MSCCLRT_FP8_E4M3] = {"fp8_e4m3", 1, true},  [MSCCLRT_FP8_E5M2] = {"fp8_e5m2", 1, true},
};
static const char *redop_names[MSCCLRT_REDOP_COUNT] = {"sum", "prod", "max", "min", "avg"};

const char *check_dtype_name(mscclrt_dtype t) {
    return (unsigned)t < MSCCLRT_DTYPE_COUNT ? dtypes[t].name : "?";
}

size_t check_dtype_size(mscclrt_dtype t) {
    return (unsigned)t < MSCCLRT_DTYPE_COUNT ? dtypes[t].size : 0;
}

bool check_dtype_is_float(mscclrt_dtype t) {
    return (unsigned)t < MSCCLRT_DTYPE_COUNT && dtypes[t].is_float;
}

bool check_dtype_parse(const char *name, mscclrt_dtype *out) {
    for (int t = 0; t < MSCCLRT_DTYPE_COUNT; t++)
        if (name && strcmp(name, dtypes[t].name) == 0) {
            *out = (mscclrt_dtype)t;
            return true;
        }
    return false;
}

const char *check_redop_name(mscclrt_redop op) {
    return (unsigned)op < MSCCLRT_REDOP_COUNT ? redop_names[op] : "?";
}

bool check_redop_parse(const char *name, mscclrt_redop *out) {
    for (int r = 0; r < MSCCLRT_REDOP_COUNT; r++)
        if (name && strcmp(name, redop_names[r]) == 0) {
            *out = (mscclrt_redop)r;
            return true;
        }
    return false;
}

/* ---- small binary floating-point formats ---------------------------------------------------
 * One encoder for fp16 (5,10), bf16 (8,7), e4m3 (4,3, no inf, saturating) and e5m2 (5,2).
 * Scaling by powers of two is exact in double, so nearbyint() does the one rounding (RNE). */
typedef struct { int ebits, mbits, bias; bool fn; } MiniFmt;
static const MiniFmt fmt_f16 = {5, 10, 15, false}, fmt_bf16 = {8, 7, 127, false},
                     fmt_e4m3 = {4, 3, 7, true}, fmt_e5m2 = {5, 2, 15, false};

static uint32_t mini_encode(double v, const MiniFmt *f) {
    uint32_t sign = signbit(v) ? 1u << (f->ebits + f->mbits) : 0;
    uint32_t eall = (1u << f->ebits) - 1;
    uint32_t maxfin = f->fn ? (eall << f->mbits) | ((1u << f->mbits) - 2) /* S.1111.110 */
                            : ((eall - 1) << f->mbits) | ((1u << f->mbits) - 1);
    if (isnan(v)) return sign | (f->fn ? (eall << f->mbits) | ((1u << f->mbits) - 1)
                                       : (eall << f->mbits) | (1u << (f->mbits - 1)));
    double a = fabs(v);
    if (isinf(a)) return sign | (f->fn ? maxfin : eall << f->mbits);
    if (a == 0) return sign;
    int e2;
    frexp(a, &e2);
    int E = e2 - 1, emin = 1 - f->bias;
    uint64_t code;
    if (E < emin) {
        code = (uint64_t)nearbyint(ldexp(a, f->mbits - emin)); /* subnormal; may carry to normal */
    } else {
        uint64_t q = (uint64_t)nearbyint(ldexp(ldexp(a, -E) - 1.0, f->mbits));
        code = ((uint64_t)(E + f->bias) << f->mbits) + q;      /* mantissa carry bumps the exponent */
    }
    if (f->fn) {
        if (code > maxfin) code = maxfin;                      /* satfinite */
    } else if ((code >> f->mbits) >= eall) {
        code = (uint64_t)eall << f->mbits;                     /* IEEE overflow: inf */
    }
    return sign | (uint32_t)code;
}

static double mini_decode(uint32_t c, const MiniFmt *f) {
    uint32_t eall = (1u << f->ebits) - 1;
    uint32_t m = c & ((1u << f->mbits) - 1), e = (c >> f->mbits) & eall;
    bool neg = (c >> (f->ebits + f->mbits)) & 1;
    double v;
    if (e == eall && f->fn && m == (1u << f->mbits) - 1) return NAN;
    if (e == eall && !f->fn) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, 1 - f->bias - f->mbits);
    else v = ldexp(1.0 + ldexp((double)m, -f->mbits), (int)e - f->bias);
    return neg ? -v : v;
}

/* Fast path of mini_encode for normal results: round the double's 52-bit mantissa to `mbits`
 * (RNE on the bits; a carry bumps the exponent), then overflow to inf (IEEE) or saturate
 * ("fn" formats, whose top exponent still holds normals). Subnormal results, zeros, inf and
 * NaN take the general path. */
static uint32_t fast_encode(double v, const MiniFmt *f) {
    uint64_t x;
    memcpy(&x, &v, 8);
    uint32_t eall = (1u << f->ebits) - 1;
    int e = (int)((x >> 52) & 0x7ff) - 1023, emax = f->fn ? (int)eall - f->bias : f->bias;
    if (e < 1 - f->bias || e > emax || ((x >> 52) & 0x7ff) == 0x7ff) return mini_encode(v, f);
    uint32_t sign = (uint32_t)(x >> 63) << (f->ebits + f->mbits);
    uint64_t mant = x & ((1ull << 52) - 1);
    int drop = 52 - f->mbits;
    uint64_t rem = mant & ((1ull << drop) - 1), half = 1ull << (drop - 1);
    uint32_t code = ((uint32_t)(e + f->bias) << f->mbits) | (uint32_t)(mant >> drop);
    if (rem > half || (rem == half && (code & 1))) code++;
    if (f->fn) {
        uint32_t maxfin = (eall << f->mbits) | ((1u << f->mbits) - 2);
        if (code > maxfin) code = maxfin;                      /* satfinite */
    } else if ((code >> f->mbits) >= eall) {
        code = eall << f->mbits;                               /* IEEE overflow: inf */
    }
    return sign | code;
}

uint16_t check_f64_to_f16(double v) { return (uint16_t)fast_encode(v, &fmt_f16); }
double check_bf16_to_f64(uint16_t h) {
    uint32_t b = (uint32_t)h << 16;   /* bf16 is the top half of a float */
    float f;
    memcpy(&f, &b, 4);
    return f;
}
double check_f16_to_f64(uint16_t h) {
    uint32_t e = (h >> 10) & 0x1f;
    if (e == 0 || e == 0x1f) return mini_decode(h, &fmt_f16);
    uint32_t b = (uint32_t)(h & 0x8000) << 16 | (e + 112) << 23 | (uint32_t)(h & 0x3ff) << 13;
    float f;
    memcpy(&f, &b, 4);
    return f;
}
uint16_t check_f64_to_bf16(double v) { return (uint16_t)fast_encode(v, &fmt_bf16); }
uint8_t check_f64_to_e4m3(double v) { return (uint8_t)fast_encode(v, &fmt_e4m3); }
double check_e4m3_to_f64(uint8_t b) {
    uint32_t e = (b >> 3) & 0xf, m = b & 7;
    if (e == 0 || (e == 0xf && m == 7)) return mini_decode(b, &fmt_e4m3); /* subnormal, NaN */
    uint32_t w = (uint32_t)(b & 0x80) << 24 | (e + 120) << 23 | m << 20;
    float f;
    memcpy(&f, &w, 4);
    return f;
}
uint8_t check_f64_to_e5m2(double v) { return (uint8_t)fast_encode(v, &fmt_e5m2); }
/* e5m2 is the top byte of an fp16 with the same exponent bias */
double check_e5m2_to_f64(uint8_t b) { return check_f16_to_f64((uint16_t)(b << 8)); }

/* ---- element access ------------------------------------------------------------------------ */
/* Integer element as 64 bits: sign-extended for signed types, zero-extended otherwise. */
static uint64_t load_int(mscclrt_dtype t, const void *buf, size_t i) {
    const unsigned char *p = (const unsigned char *)buf + i * check_dtype_size(t);
    switch (t) {
    case MSCCLRT_INT8: { int8_t v; memcpy(&v, p, 1); return (uint64_t)(int64_t)v; }
    case MSCCLRT_UINT8: { uint8_t v; memcpy(&v, p, 1); return v; }
    case MSCCLRT_INT32: { int32_t v; memcpy(&v, p, 4); return (uint64_t)(int64_t)v; }
    case MSCCLRT_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

static void store_int(mscclrt_dtype t, void *buf, size_t i, uint64_t v) {
    unsigned char *p = (unsigned char *)buf + i * check_dtype_size(t);
    switch (check_dtype_size(t)) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

static bool is_signed_int(mscclrt_dtype t) {
    return t == MSCCLRT_INT8 || t == MSCCLRT_INT32 || t == MSCCLRT_INT64;
}

double check_load(mscclrt_dtype t, const void *buf, size_t i) {
    const unsigned char *p = (const unsigned char *)buf + i * check_dtype_size(t);
    switch (t) {
    case MSCCLRT_FLOAT16: { uint16_t h; memcpy(&h, p, 2); return check_f16_to_f64(h); }
    case MSCCLRT_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); return check_bf16_to_f64(h); }
    case MSCCLRT_FP8_E4M3: return check_e4m3_to_f64(*p);
    case MSCCLRT_FP8_E5M2: return check_e5m2_to_f64(*p);
    case MSCCLRT_FLOAT32: { float f; memcpy(&f, p, 4); return f; }
    case MSCCLRT_FLOAT64: { double d; memcpy(&d, p, 8); return d; }
    case MSCCLRT_INT8: case MSCCLRT_INT32: case MSCCLRT_INT64:
        return (double)(int64_t)load_int(t, buf, i);
    case MSCCLRT_UINT8: case MSCCLRT_UINT32: case MSCCLRT_UINT64:
        return (double)load_int(t, buf, i);
    default: return 0;
    }
}

void check_store(mscclrt_dtype t, void *buf, size_t i, double v) {
    unsigned char *p = (unsigned char *)buf + i * check_dtype_size(t);
    switch (t) {
    case MSCCLRT_FLOAT16: { uint16_t h = check_f64_to_f16(v); memcpy(p, &h, 2); break; }
    case MSCCLRT_BFLOAT16: { uint16_t h = check_f64_to_bf16(v); memcpy(p, &h, 2); break; }
    case MSCCLRT_FP8_E4M3: *p = check_f64_to_e4m3(v); break;
    case MSCCLRT_FP8_E5M2: *p = check_f64_to_e5m2(v); break;
    case MSCCLRT_FLOAT32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case MSCCLRT_FLOAT64: memcpy(p, &v, 8); break;
    default: {
        double tr = trunc(v);
        uint64_t x;
        if (!(fabs(tr) < 18446744073709551616.0)) x = 0;   /* NaN/out of range: no UB */
        else if (tr < 0) x = (uint64_t)(int64_t)fmax(tr, -9223372036854775808.0);
        else x = tr >= 9223372036854775808.0 ? (uint64_t)tr : (uint64_t)(int64_t)tr;
        store_int(t, buf, i, x);
    }
    }
}

/* ---- reductions ------------------------------------------------------------------------------ */
static uint64_t int_op(mscclrt_dtype t, mscclrt_redop op, uint64_t a, uint64_t b) {
    bool s = is_signed_int(t);
    switch (op) {
    case MSCCLRT_PROD: return a * b;
    case MSCCLRT_MIN: return s ? ((int64_t)a < (int64_t)b ? a : b) : (a < b ? a : b);
    case MSCCLRT_MAX: return s ? ((int64_t)a > (int64_t)b ? a : b) : (a > b ? a : b);
    default: return a + b;                                  /* sum, avg: wraps */
    }
}

static double dbl_op(mscclrt_redop op, double a, double b) {
    switch (op) {
    case MSCCLRT_PROD: return a * b;
    case MSCCLRT_MIN: return fmin(a, b);
    case MSCCLRT_MAX: return fmax(a, b);
    default: return a + b;
    }
}

static float flt_op(mscclrt_redop op, float a, float b) {
    switch (op) {
    case MSCCLRT_PROD: return a * b;
    case MSCCLRT_MIN: return fminf(a, b);
    case MSCCLRT_MAX: return fmaxf(a, b);
    default: return a + b;
    }
}

void check_reduce(mscclrt_dtype t, mscclrt_redop op, void *acc, const void *src, size_t n) {
    switch (t) {
    case MSCCLRT_FLOAT32: {
        for (size_t k = 0; k < n; k++) {
            float x, y;
            memcpy(&x, (char *)acc + 4 * k, 4);
            memcpy(&y, (const char *)src + 4 * k, 4);
            x = flt_op(op, x, y);
            memcpy((char *)acc + 4 * k, &x, 4);
        }
        break;
    }
    case MSCCLRT_FLOAT64: {
        for (size_t k = 0; k < n; k++) {
            double x, y;
            memcpy(&x, (char *)acc + 8 * k, 8);
            memcpy(&y, (const char *)src + 8 * k, 8);
            x = dbl_op(op, x, y);
            memcpy((char *)acc + 8 * k, &x, 8);
        }
        break;
    }
    case MSCCLRT_FLOAT16: case MSCCLRT_BFLOAT16: {
        bool bf = t == MSCCLRT_BFLOAT16;
        for (size_t k = 0; k < n; k++) {
            uint16_t a, b;
            memcpy(&a, (char *)acc + 2 * k, 2);
            memcpy(&b, (const char *)src + 2 * k, 2);
            double x = bf ? check_bf16_to_f64(a) : check_f16_to_f64(a);
            double y = bf ? check_bf16_to_f64(b) : check_f16_to_f64(b);
            double r = op == MSCCLRT_SUM || op == MSCCLRT_AVG ? x + y : dbl_op(op, x, y);
            a = bf ? check_f64_to_bf16(r) : check_f64_to_f16(r);
            memcpy((char *)acc + 2 * k, &a, 2);
        }
        break;
    }
    case MSCCLRT_FP8_E4M3: case MSCCLRT_FP8_E5M2:
        /* widened operands are exact in double and so are sums and products of two of them
         * (except for extreme bf16 exponents), so the store is the one rounding */
        for (size_t k = 0; k < n; k++)
            check_store(t, acc, k, dbl_op(op, check_load(t, acc, k), check_load(t, src, k)));
        break;
    default:
        for (size_t k = 0; k < n; k++)
            store_int(t, acc, k, int_op(t, op, load_int(t, acc, k), load_int(t, src, k)));
        break;
    }
}

static uint64_t int_div(mscclrt_dtype t, uint64_t v, int n) {
    if (is_signed_int(t)) {
        int64_t s = (int64_t)v;
        if (t == MSCCLRT_INT8) s = (int8_t)(uint8_t)v;
        if (t == MSCCLRT_INT32) s = (int32_t)(uint32_t)v;
        return (uint64_t)(s / n);
    }
    if (t == MSCCLRT_UINT8) v = (uint8_t)v;
    if (t == MSCCLRT_UINT32) v = (uint32_t)v;
    return v / (uint64_t)n;
}

void check_avg_finish(mscclrt_dtype t, void *buf, size_t n, int nranks) {
    for (size_t k = 0; k < n; k++) {
        if (t == MSCCLRT_FLOAT32) {
            float f;
            memcpy(&f, (char *)buf + 4 * k, 4);
            f = f / (float)nranks;
            memcpy((char *)buf + 4 * k, &f, 4);
        } else if (check_dtype_is_float(t)) {
            check_store(t, buf, k, check_load(t, buf, k) / nranks);
        } else {
            store_int(t, buf, k, int_div(t, load_int(t, buf, k), nranks));
        }
    }
}

/* ---- inputs ---------------------------------------------------------------------------------- */
static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void check_fill_range(mscclrt_dtype t, mscclrt_redop op, void *buf, size_t first, size_t n,
                      uint64_t seed, int rank) {
    uint64_t base = mix64(seed ^ ((uint64_t)(rank + 1) << 40));
    for (size_t k = 0; k < n; k++) {
        size_t i = first + k;             /* element i depends on (seed, rank, i) only */
        uint64_t h = mix64(base + i);
        double v;
        if (op == MSCCLRT_PROD) {
            /* |v| in [1, 1.375]: products over 8 ranks stay below 13, even in e4m3 */
            v = (1.0 + (double)(h % 4) / 8.0) * ((h >> 8) & 1 ? -1.0 : 1.0);
            if (i == 0) v = rank % 2 ? -1.0 : 1.0;
        } else if (check_dtype_is_float(t)) {
            v = ((double)(h % 17) - 8.0) / 4.0;          /* [-2, 2] in quarters */
            if (i == 0) v = 1.0 + rank % 3;              /* never all zeros */
        } else if (is_signed_int(t)) {
            v = (double)(h % 41) - 20.0;
            if (i == 0) v = 1.0 + rank % 3;
        } else {
            v = (double)(h % 41);
            if (i == 0) v = 1.0 + rank % 3;
        }
        check_store(t, buf, k, v);
    }
}

typedef struct {
    mscclrt_dtype t;
    mscclrt_redop op;
    char *buf;
    size_t n, per;
    uint64_t seed;
    int rank;
} FillJobs;

static void fill_job(void *arg, int i) {
    FillJobs *f = arg;
    size_t lo = (size_t)i * f->per, hi = lo + f->per < f->n ? lo + f->per : f->n;
    if (lo < hi)
        check_fill_range(f->t, f->op, f->buf + lo * check_dtype_size(f->t), lo, hi - lo, f->seed,
                         f->rank);
}

mscclrt_result check_fill(mscclrt_dtype t, mscclrt_redop op, void *buf, size_t n, uint64_t seed,
                          int rank) {
    int nt;
    TRY(check_threads(n, &nt));
    FillJobs f = {t, op, buf, n, (n + (size_t)nt - 1) / (size_t)nt, seed, rank};
    check_run_threads(nt, fill_job, &f);
    return MSCCLRT_SUCCESS;
}

/* ---- postconditions ------------------------------------------------------------------------ */
bool check_collective_known(PlanCollective coll) {
    return coll == PLAN_COLL_ALLREDUCE || coll == PLAN_COLL_ALLGATHER ||
           coll == PLAN_COLL_REDUCESCATTER || coll == PLAN_COLL_ALLTOALL ||
           coll == PLAN_COLL_BROADCAST || coll == PLAN_COLL_SENDRECV ||
           coll == PLAN_COLL_REDUCE || coll == PLAN_COLL_GATHER || coll == PLAN_COLL_SCATTER;
}

bool check_collective_reduces(PlanCollective coll) {
    return coll == PLAN_COLL_ALLREDUCE || coll == PLAN_COLL_REDUCESCATTER ||
           coll == PLAN_COLL_REDUCE;
}

/* Unit roundoff and smallest subnormal of a float type (constants: this runs per element). */
static void float_limits(mscclrt_dtype t, double *u, double *tiny) {
    switch (t) {
    case MSCCLRT_FLOAT16: *u = 0x1p-11; *tiny = 0x1p-24; break;
    case MSCCLRT_BFLOAT16: *u = 0x1p-8; *tiny = 0x1p-133; break;
    case MSCCLRT_FP8_E4M3: *u = 0x1p-4; *tiny = 0x1p-9; break;
    case MSCCLRT_FP8_E5M2: *u = 0x1p-3; *tiny = 0x1p-16; break;
    case MSCCLRT_FLOAT32: *u = 0x1p-24; *tiny = 0x1p-149; break;
    default: *u = 0x1p-53; *tiny = 0x1p-1074; break;
    }
}

static void mismatch(CheckMismatch *mm, int rank, size_t elem, double got, double want,
                     double tol, mscclrt_dtype t, const char *what) {
    if (!mm) return;
    mm->rank = rank;
    mm->elem = elem;
    mm->got = got;
    mm->expected = want;
    mm->tolerance = tol;
    snprintf(mm->msg, sizeof mm->msg,
             "rank %d element %zu (%s): got %.9g, expected %.9g (tolerance %.3g; %s)", rank, elem,
             check_dtype_name(t), got, want, tol, what);
}

/* Reduced element `e` over all ranks' inputs (element index into each input) vs got. */
static bool check_reduced(int nranks, mscclrt_dtype t, mscclrt_redop op,
                          const void *const *inputs, size_t e, const void *out, size_t oe,
                          int rank, CheckMismatch *mm) {
    if (!check_dtype_is_float(t)) {
        uint64_t acc = load_int(t, inputs[0], e);
        for (int r = 1; r < nranks; r++) acc = int_op(t, op, acc, load_int(t, inputs[r], e));
        if (op == MSCCLRT_AVG) acc = int_div(t, acc, nranks);
        unsigned char want[8], got[8];
        store_int(t, want, 0, acc);
        size_t es = check_dtype_size(t);
        memcpy(got, (const unsigned char *)out + oe * es, es);
        if (memcmp(want, got, es) == 0) return true;
        mismatch(mm, rank, oe, check_load(t, got, 0), check_load(t, want, 0), 0, t,
                 "exact integer reference, wrapping");
        return false;
    }
    double u, tiny, ref = check_load(t, inputs[0], e), mag = fabs(ref);
    for (int r = 1; r < nranks; r++) {
        double x = check_load(t, inputs[r], e);
        ref = dbl_op(op, ref, x);
        mag = op == MSCCLRT_PROD ? fabs(ref) : mag + fabs(x);
    }
    float_limits(t, &u, &tiny);
    double tol;
    switch (op) {
    case MSCCLRT_MIN: case MSCCLRT_MAX: tol = 0; break;
    case MSCCLRT_AVG: ref /= nranks; tol = (nranks + 2) * u * mag / nranks + u * fabs(ref); break;
    default: tol = (nranks + 1) * u * mag; break;
    }
    tol += nranks * tiny;
    double got = check_load(t, out, oe);
    if (!isnan(got) && fabs(got - ref) <= tol) return true;
    mismatch(mm, rank, oe, got, ref, tol, t, "float64 reference");
    return false;
}

static bool check_copy(const void *want, const void *got, size_t n, mscclrt_dtype t, int rank,
                       size_t first_elem, const char *what, CheckMismatch *mm) {
    size_t es = check_dtype_size(t);
    if (memcmp(want, got, n * es) == 0) return true;
    for (size_t k = 0; k < n; k++)
        if (memcmp((const char *)want + k * es, (const char *)got + k * es, es) != 0) {
            mismatch(mm, rank, first_elem + k, check_load(t, got, k), check_load(t, want, k), 0, t,
                     what);
            return false;
        }
    return false;
}

/* Elements [first, first + n) of every rank's input, n at most `blk`: a block each. */
static bool read_slices(CheckInputFn in, void *ctx, int nranks, size_t first, size_t n,
                        const void **slices) {
    for (int q = 0; q < nranks; q++)
        if (!(slices[q] = in(ctx, q, first, n))) return false;
    return true;
}

/* Input source of check_collective: every rank's whole input is in memory. */
typedef struct { const void *const *inputs; size_t es; } MemInputs;

static const void *mem_input(void *ctx, int rank, size_t first, size_t n) {
    const MemInputs *m = ctx;
    (void)n;
    return (const char *)m->inputs[rank] + first * m->es;
}

static bool no_input(int rank, CheckMismatch *mm) {
    if (mm) {
        memset(mm, 0, sizeof *mm);
        mm->rank = -1;
        snprintf(mm->msg, sizeof mm->msg, "rank %d: cannot check: the reference input is not "
                 "available (out of memory?)", rank);
    }
    return false;
}

/* The element-to-element map of a collective's postcondition, seen from one rank's output:
 * output elements [0, span) are checked in segments, each taken from one source: one rank's
 * input (copies) or the same elements of every rank's input (reductions). The rooted reduce
 * and gather (root 0) check the root's output only: the others' span is 0. */
typedef struct {
    PlanCollective coll;
    int nranks, rank;
    size_t nin, nout, span;
} CheckMap;

static CheckMap check_map(PlanCollective coll, int nranks, int rank, size_t nin, size_t nout) {
    CheckMap m = {coll, nranks, rank, nin, nout, 0};
    switch (coll) {
    case PLAN_COLL_ALLREDUCE: m.span = nout < nin ? nout : nin; break;
    case PLAN_COLL_REDUCE: m.span = rank != 0 ? 0 : nout < nin ? nout : nin; break;
    case PLAN_COLL_REDUCESCATTER: m.span = nout; break;
    case PLAN_COLL_SCATTER: m.span = nout < nin / (size_t)nranks ? nout : nin / (size_t)nranks; break;
    case PLAN_COLL_ALLGATHER: m.span = (size_t)nranks * nin; break;
    case PLAN_COLL_GATHER: m.span = rank != 0 ? 0 : (size_t)nranks * nin; break;
    case PLAN_COLL_ALLTOALL: m.span = (size_t)nranks * (nin / (size_t)nranks); break;
    default: m.span = nout < nin ? nout : nin; break;          /* broadcast, sendrecv */
    }
    return m;
}

/* Output element o: the source rank (-1: every rank), the first source element, the number
 * of elements left in this segment, and what the segment must hold (for messages). */
static size_t check_segment(const CheckMap *m, size_t o, int *src, size_t *first, char *what,
                            size_t what_len) {
    switch (m->coll) {
    case PLAN_COLL_ALLREDUCE:
    case PLAN_COLL_REDUCE:
    case PLAN_COLL_REDUCESCATTER:
        *src = -1;
        *first = (m->coll == PLAN_COLL_REDUCESCATTER ? (size_t)m->rank * m->nout : 0) + o;
        return m->span - o;
    case PLAN_COLL_SCATTER:
        *src = 0;
        *first = (size_t)m->rank * m->nout + o;
        snprintf(what, what_len, "scatter: must be block %d of root 0's input", m->rank);
        return m->span - o;
    case PLAN_COLL_ALLGATHER:
    case PLAN_COLL_GATHER: {
        size_t s = o / m->nin;
        *src = (int)s;
        *first = o % m->nin;
        snprintf(what, what_len, "%s: block %zu must be rank %zu's input",
                 m->coll == PLAN_COLL_GATHER ? "gather to root 0" : "allgather", s, s);
        return m->nin - *first;
    }
    case PLAN_COLL_ALLTOALL: {
        size_t part = m->nin / (size_t)m->nranks, s = o / part;
        *src = (int)s;
        *first = (size_t)m->rank * part + o % part;
        snprintf(what, what_len, "alltoall: block %zu must be block %d of rank %zu's input", s,
                 m->rank, s);
        return part - o % part;
    }
    default:
        *src = m->coll == PLAN_COLL_BROADCAST ? 0 : (m->rank - 1 + m->nranks) % m->nranks;
        *first = o;
        if (m->coll == PLAN_COLL_BROADCAST)
            snprintf(what, what_len, "broadcast: must be root 0's input");
        else
            snprintf(what, what_len, "sendrecv: must be rank %d's input", *src);
        return m->span - o;
    }
}

/* Output elements [lo, hi) of one rank, read `blk` elements at a time through `in`. */
static bool check_range(const CheckMap *m, mscclrt_dtype t, mscclrt_redop op, CheckInputFn in,
                        void *ctx, size_t blk, const char *out, size_t lo, size_t hi,
                        CheckMismatch *mm) {
    size_t es = check_dtype_size(t);
    const void **slices = malloc((size_t)m->nranks * sizeof *slices);
    if (!slices) return no_input(m->rank, mm);
    bool ok = true;
    char what[96] = "";
    for (size_t o = lo; ok && o < hi;) {
        int src;
        size_t first, left = check_segment(m, o, &src, &first, what, sizeof what);
        size_t bn = hi - o < blk ? hi - o : blk;
        if (bn > left) bn = left;
        if (src < 0) {
            if (!read_slices(in, ctx, m->nranks, first, bn, slices)) {
                ok = no_input(m->rank, mm);
                break;
            }
            for (size_t k = 0; ok && k < bn; k++)
                ok = check_reduced(m->nranks, t, op, slices, k, out, o + k, m->rank, mm);
        } else {
            const void *want = in(ctx, src, first, bn);
            if (!want) {
                ok = no_input(m->rank, mm);
                break;
            }
            ok = check_copy(want, out + o * es, bn, t, m->rank, o, what, mm);
        }
        o += bn;
    }
    free(slices);
    return ok;
}

typedef struct {
    const CheckMap *m;
    mscclrt_dtype t;
    mscclrt_redop op;
    CheckInputFn in;
    void *const *ctxs;
    size_t blk, per;
    const char *out;
    bool *ok;
    CheckMismatch *mms;
} RangeJobs;

static void range_job(void *arg, int i) {
    RangeJobs *j = arg;
    size_t lo = (size_t)i * j->per, hi = lo + j->per < j->m->span ? lo + j->per : j->m->span;
    j->ok[i] = lo >= hi || check_range(j->m, j->t, j->op, j->in, j->ctxs[i], j->blk, j->out, lo,
                                       hi, &j->mms[i]);
}

bool check_rank_threads(PlanCollective coll, int nranks, int rank, mscclrt_dtype t,
                        mscclrt_redop op, CheckInputFn in, void *const *ctxs, int nthreads,
                        size_t block_bytes, size_t in_bytes, const void *output,
                        size_t out_bytes, CheckMismatch *mm) {
    size_t es = check_dtype_size(t);
    if (!es) {
        if (mm) snprintf(mm->msg, sizeof mm->msg, "check: bad dtype %d", (int)t);
        return false;
    }
    size_t blk = block_bytes / es ? block_bytes / es : 1;
    if (!check_collective_known(coll)) {
        if (mm) snprintf(mm->msg, sizeof mm->msg, "collective '%s' has no known postcondition",
                         plan_coll_name(coll));
        return false;
    }
    CheckMap m = check_map(coll, nranks, rank, in_bytes / es, out_bytes / es);
    if (nthreads < 1) nthreads = 1;
    /* whole blocks per thread, so every thread reads the blocks one thread would have read */
    size_t per = (m.span + (size_t)nthreads - 1) / (size_t)nthreads;
    per = (per + blk - 1) / blk * blk;
    bool *oks = calloc((size_t)nthreads, sizeof *oks);
    CheckMismatch *mms = calloc((size_t)nthreads, sizeof *mms);
    bool ok = oks && mms;
    if (ok) {
        RangeJobs j = {&m, t, op, in, ctxs, blk, per ? per : 1, output, oks, mms};
        check_run_threads(nthreads, range_job, &j);
        for (int i = 0; i < nthreads && ok; i++) /* the first failing range: the first mismatch */
            if (!oks[i]) {
                ok = false;
                if (mm) *mm = mms[i];
            }
    } else {
        no_input(rank, mm);
    }
    free(oks);
    free(mms);
    return ok;
}

bool check_rank_from(PlanCollective coll, int nranks, int rank, mscclrt_dtype t, mscclrt_redop op,
                     CheckInputFn in, void *ctx, size_t block_bytes, size_t in_bytes,
                     const void *output, size_t out_bytes, CheckMismatch *mm) {
    void *const ctxs[1] = {ctx};
    return check_rank_threads(coll, nranks, rank, t, op, in, ctxs, 1, block_bytes, in_bytes,
                              output, out_bytes, mm);
}

bool check_collective(PlanCollective coll, int nranks, mscclrt_dtype t, mscclrt_redop op,
                      const void *const *inputs, size_t in_bytes, const void *const *outputs,
                      size_t out_bytes, CheckMismatch *mm) {
    MemInputs m = {inputs, check_dtype_size(t)};
    if (!check_collective_known(coll)) {
        if (mm) snprintf(mm->msg, sizeof mm->msg, "collective '%s' has no known postcondition",
                         plan_coll_name(coll));
        return false;
    }
    size_t es = check_dtype_size(t);
    void *ctxs[MAX_CHECK_THREADS];
    for (int r = 0; r < nranks; r++) {
        /* a bad dtype (es 0) is reported by check_rank_threads */
        size_t span = es ? check_map(coll, nranks, r, in_bytes / es, out_bytes / es).span : 0;
        int nt;
        if (check_threads(span, &nt) != MSCCLRT_SUCCESS) {
            if (mm) {
                memset(mm, 0, sizeof *mm);
                mm->rank = -1;
                snprintf(mm->msg, sizeof mm->msg, "%s", mscclrt_last_error());
            }
            return false;
        }
        for (int i = 0; i < nt; i++) ctxs[i] = &m;
        if (!check_rank_threads(coll, nranks, r, t, op, mem_input, ctxs, nt, CHECK_BLOCK_BYTES,
                                in_bytes, outputs[r], out_bytes, mm))
            return false;
    }
    return true;
}

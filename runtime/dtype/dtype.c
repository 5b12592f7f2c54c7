/*
 * dtype.c - the arithmetic of every data type as a GPU does it: names and sizes, conversions
 * with round to nearest even, element loads and stores, one rounding per pairwise operation
 * (see dtype.h).
 */
#include "dtype/dtype.h"

#include <math.h>
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

const char *dtype_name(mscclrt_dtype t) {
    return (unsigned)t < MSCCLRT_DTYPE_COUNT ? dtypes[t].name : "?";
}

size_t dtype_size(mscclrt_dtype t) {
    return (unsigned)t < MSCCLRT_DTYPE_COUNT ? dtypes[t].size : 0;
}

bool dtype_is_float(mscclrt_dtype t) {
    return (unsigned)t < MSCCLRT_DTYPE_COUNT && dtypes[t].is_float;
}

bool dtype_parse(const char *name, mscclrt_dtype *out) {
    for (int t = 0; t < MSCCLRT_DTYPE_COUNT; t++)
        if (name && strcmp(name, dtypes[t].name) == 0) {
            *out = (mscclrt_dtype)t;
            return true;
        }
    return false;
}

const char *dtype_redop_name(mscclrt_redop op) {
    return (unsigned)op < MSCCLRT_REDOP_COUNT ? redop_names[op] : "?";
}

bool dtype_redop_parse(const char *name, mscclrt_redop *out) {
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

uint16_t dtype_f64_to_f16(double v) { return (uint16_t)fast_encode(v, &fmt_f16); }
double dtype_bf16_to_f64(uint16_t h) {
    uint32_t b = (uint32_t)h << 16;   /* bf16 is the top half of a float */
    float f;
    memcpy(&f, &b, 4);
    return f;
}
double dtype_f16_to_f64(uint16_t h) {
    uint32_t e = (h >> 10) & 0x1f;
    if (e == 0 || e == 0x1f) return mini_decode(h, &fmt_f16);
    uint32_t b = (uint32_t)(h & 0x8000) << 16 | (e + 112) << 23 | (uint32_t)(h & 0x3ff) << 13;
    float f;
    memcpy(&f, &b, 4);
    return f;
}
uint16_t dtype_f64_to_bf16(double v) { return (uint16_t)fast_encode(v, &fmt_bf16); }
uint8_t dtype_f64_to_e4m3(double v) { return (uint8_t)fast_encode(v, &fmt_e4m3); }
double dtype_e4m3_to_f64(uint8_t b) {
    uint32_t e = (b >> 3) & 0xf, m = b & 7;
    if (e == 0 || (e == 0xf && m == 7)) return mini_decode(b, &fmt_e4m3); /* subnormal, NaN */
    uint32_t w = (uint32_t)(b & 0x80) << 24 | (e + 120) << 23 | m << 20;
    float f;
    memcpy(&f, &w, 4);
    return f;
}
uint8_t dtype_f64_to_e5m2(double v) { return (uint8_t)fast_encode(v, &fmt_e5m2); }
/* e5m2 is the top byte of an fp16 with the same exponent bias */
double dtype_e5m2_to_f64(uint8_t b) { return dtype_f16_to_f64((uint16_t)(b << 8)); }

/* ---- element access ------------------------------------------------------------------------ */
/* Integer element as 64 bits: sign-extended for signed types, zero-extended otherwise. */
uint64_t dtype_load_int(mscclrt_dtype t, const void *buf, size_t i) {
    const unsigned char *p = (const unsigned char *)buf + i * dtype_size(t);
    switch (t) {
    case MSCCLRT_INT8: { int8_t v; memcpy(&v, p, 1); return (uint64_t)(int64_t)v; }
    case MSCCLRT_UINT8: { uint8_t v; memcpy(&v, p, 1); return v; }
    case MSCCLRT_INT32: { int32_t v; memcpy(&v, p, 4); return (uint64_t)(int64_t)v; }
    case MSCCLRT_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

void dtype_store_int(mscclrt_dtype t, void *buf, size_t i, uint64_t v) {
    unsigned char *p = (unsigned char *)buf + i * dtype_size(t);
    switch (dtype_size(t)) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

bool dtype_is_signed_int(mscclrt_dtype t) {
    return t == MSCCLRT_INT8 || t == MSCCLRT_INT32 || t == MSCCLRT_INT64;
}

double dtype_load(mscclrt_dtype t, const void *buf, size_t i) {
    const unsigned char *p = (const unsigned char *)buf + i * dtype_size(t);
    switch (t) {
    case MSCCLRT_FLOAT16: { uint16_t h; memcpy(&h, p, 2); return dtype_f16_to_f64(h); }
    case MSCCLRT_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); return dtype_bf16_to_f64(h); }
    case MSCCLRT_FP8_E4M3: return dtype_e4m3_to_f64(*p);
    case MSCCLRT_FP8_E5M2: return dtype_e5m2_to_f64(*p);
    case MSCCLRT_FLOAT32: { float f; memcpy(&f, p, 4); return f; }
    case MSCCLRT_FLOAT64: { double d; memcpy(&d, p, 8); return d; }
    case MSCCLRT_INT8: case MSCCLRT_INT32: case MSCCLRT_INT64:
        return (double)(int64_t)dtype_load_int(t, buf, i);
    case MSCCLRT_UINT8: case MSCCLRT_UINT32: case MSCCLRT_UINT64:
        return (double)dtype_load_int(t, buf, i);
    default: return 0;
    }
}

void dtype_store(mscclrt_dtype t, void *buf, size_t i, double v) {
    unsigned char *p = (unsigned char *)buf + i * dtype_size(t);
    switch (t) {
    case MSCCLRT_FLOAT16: { uint16_t h = dtype_f64_to_f16(v); memcpy(p, &h, 2); break; }
    case MSCCLRT_BFLOAT16: { uint16_t h = dtype_f64_to_bf16(v); memcpy(p, &h, 2); break; }
    case MSCCLRT_FP8_E4M3: *p = dtype_f64_to_e4m3(v); break;
    case MSCCLRT_FP8_E5M2: *p = dtype_f64_to_e5m2(v); break;
    case MSCCLRT_FLOAT32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case MSCCLRT_FLOAT64: memcpy(p, &v, 8); break;
    default: {
        double tr = trunc(v);
        uint64_t x;
        if (!(fabs(tr) < 18446744073709551616.0)) x = 0;   /* NaN/out of range: no UB */
        else if (tr < 0) x = (uint64_t)(int64_t)fmax(tr, -9223372036854775808.0);
        else x = tr >= 9223372036854775808.0 ? (uint64_t)tr : (uint64_t)(int64_t)tr;
        dtype_store_int(t, buf, i, x);
    }
    }
}

/* ---- reductions ------------------------------------------------------------------------------ */
uint64_t dtype_int_op(mscclrt_dtype t, mscclrt_redop op, uint64_t a, uint64_t b) {
    bool s = dtype_is_signed_int(t);
    switch (op) {
    case MSCCLRT_PROD: return a * b;
    case MSCCLRT_MIN: return s ? ((int64_t)a < (int64_t)b ? a : b) : (a < b ? a : b);
    case MSCCLRT_MAX: return s ? ((int64_t)a > (int64_t)b ? a : b) : (a > b ? a : b);
    default: return a + b;                                  /* sum, avg: wraps */
    }
}

double dtype_double_op(mscclrt_redop op, double a, double b) {
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

void dtype_reduce(mscclrt_dtype t, mscclrt_redop op, void *acc, const void *src, size_t n) {
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
            x = dtype_double_op(op, x, y);
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
            double x = bf ? dtype_bf16_to_f64(a) : dtype_f16_to_f64(a);
            double y = bf ? dtype_bf16_to_f64(b) : dtype_f16_to_f64(b);
            double r = op == MSCCLRT_SUM || op == MSCCLRT_AVG ? x + y : dtype_double_op(op, x, y);
            a = bf ? dtype_f64_to_bf16(r) : dtype_f64_to_f16(r);
            memcpy((char *)acc + 2 * k, &a, 2);
        }
        break;
    }
    case MSCCLRT_FP8_E4M3: case MSCCLRT_FP8_E5M2:
        /* widened operands are exact in double and so are sums and products of two of them
         * (except for extreme bf16 exponents), so the store is the one rounding */
        for (size_t k = 0; k < n; k++)
            dtype_store(t, acc, k, dtype_double_op(op, dtype_load(t, acc, k), dtype_load(t, src, k)));
        break;
    default:
        for (size_t k = 0; k < n; k++)
            dtype_store_int(t, acc, k, dtype_int_op(t, op, dtype_load_int(t, acc, k), dtype_load_int(t, src, k)));
        break;
    }
}

uint64_t dtype_int_div(mscclrt_dtype t, uint64_t v, int n) {
    if (dtype_is_signed_int(t)) {
        int64_t s = (int64_t)v;
        if (t == MSCCLRT_INT8) s = (int8_t)(uint8_t)v;
        if (t == MSCCLRT_INT32) s = (int32_t)(uint32_t)v;
        return (uint64_t)(s / n);
    }
    if (t == MSCCLRT_UINT8) v = (uint8_t)v;
    if (t == MSCCLRT_UINT32) v = (uint32_t)v;
    return v / (uint64_t)n;
}

void dtype_avg_finish(mscclrt_dtype t, void *buf, size_t n, int nranks) {
    for (size_t k = 0; k < n; k++) {
        if (t == MSCCLRT_FLOAT32) {
            float f;
            memcpy(&f, (char *)buf + 4 * k, 4);
            f = f / (float)nranks;
            memcpy((char *)buf + 4 * k, &f, 4);
        } else if (dtype_is_float(t)) {
            dtype_store(t, buf, k, dtype_load(t, buf, k) / nranks);
        } else {
            dtype_store_int(t, buf, k, dtype_int_div(t, dtype_load_int(t, buf, k), nranks));
        }
    }
}


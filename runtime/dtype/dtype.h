/*
 * dtype.h - the ground floor of data types, below every other room: names, sizes and parsing
 * of mscclrt_dtype and mscclrt_redop, conversions of fp16/bf16/fp8, element loads and stores,
 * and the pairwise reduction operators the way a GPU computes them. Used by the plan API,
 * code generation, the tuning table, the CPU backend and the checks.
 */
#ifndef MSCCLRT_DTYPE_H
#define MSCCLRT_DTYPE_H

#include "mscclrt.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- names and sizes (internal twins of the public helpers) ----------------------------- */
const char *dtype_name(mscclrt_dtype t);          /* "float16", ...; "?" if invalid */
size_t dtype_size(mscclrt_dtype t);               /* 0 if invalid */
bool dtype_parse(const char *name, mscclrt_dtype *out);
const char *dtype_redop_name(mscclrt_redop op);          /* "sum", ...; "?" if invalid */
bool dtype_redop_parse(const char *name, mscclrt_redop *out);
bool dtype_is_float(mscclrt_dtype t);

/* ---- conversions: round to nearest even. fp16, bf16 and e5m2 overflow to +-inf (IEEE);
 * e4m3 (the "fn" variant: no inf) saturates to +-448; NaN stays NaN. -------------------- */
uint16_t dtype_f64_to_f16(double v);
double dtype_f16_to_f64(uint16_t h);
uint16_t dtype_f64_to_bf16(double v);
double dtype_bf16_to_f64(uint16_t h);
uint8_t dtype_f64_to_e4m3(double v);
double dtype_e4m3_to_f64(uint8_t b);
uint8_t dtype_f64_to_e5m2(double v);
double dtype_e5m2_to_f64(uint8_t b);

/* Element `i` of a buffer of type t as a double (integers exactly up to 2^53), and the store
 * of a double rounded to t (integers: truncated toward zero, wrapped modulo 2^bits). */
double dtype_load(mscclrt_dtype t, const void *buf, size_t i);
void dtype_store(mscclrt_dtype t, void *buf, size_t i, double v);

/* acc[k] = acc[k] (op) src[k] for k < n elements, one pairwise operation in the precision of t
 * as a GPU does it: fp16/bf16/fp8 are widened, combined and rounded back once per operation;
 * float32 in float, float64 in double; integers wrap. MSCCLRT_AVG combines as a sum (the
 * division by the rank count is dtype_avg_finish). */
void dtype_reduce(mscclrt_dtype t, mscclrt_redop op, void *acc, const void *src, size_t n);
/* The final step of avg: buf[k] /= nranks (floats: rounded to t; integers: truncated). */
void dtype_avg_finish(mscclrt_dtype t, void *buf, size_t n, int nranks);

/* The integer and float64 steps of the references (runtime/check): an integer element as its
 * 64-bit pattern (sign-extended for signed types) and its store (wrapped to the type), the
 * operator on two such patterns wrapping as the type does, the truncating division of avg, and
 * the operator in float64. */
bool dtype_is_signed_int(mscclrt_dtype t);
uint64_t dtype_load_int(mscclrt_dtype t, const void *buf, size_t i);
void dtype_store_int(mscclrt_dtype t, void *buf, size_t i, uint64_t v);
uint64_t dtype_int_op(mscclrt_dtype t, mscclrt_redop op, uint64_t a, uint64_t b);
uint64_t dtype_int_div(mscclrt_dtype t, uint64_t v, int n);
double dtype_double_op(mscclrt_redop op, double a, double b);

#endif

/*
 * intmath.h - integer helpers several modules need (greatest common divisor, least common
 * multiple), written once. Header-only: static inline.
 */
#ifndef MSCCLRT_INTMATH_H
#define MSCCLRT_INTMATH_H

#include <stdint.h>

static inline uint64_t rt_gcd(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Least common multiple; 0 when an argument is 0 or the result does not fit 64 bits. */
static inline uint64_t rt_lcm(uint64_t a, uint64_t b) {
    if (a == 0 || b == 0) return 0;
    uint64_t q = a / rt_gcd(a, b);
    return q > UINT64_MAX / b ? 0 : q * b;
}

#endif

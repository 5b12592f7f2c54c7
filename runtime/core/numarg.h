/*
 * numarg.h - strict parsing of the numbers given to the commands' options (mscclrt-run,
 * mscclrt-perf): decimal digits only, an optional K/M/G suffix where the option takes bytes,
 * overflow and range refused, and one message naming the option and the value.
 */
#ifndef MSCCLRT_NUMARG_H
#define MSCCLRT_NUMARG_H

#include <stdbool.h>
#include <stddef.h>

#define NUMARG_MSG 512                  /* room for any numarg message */

/* What an option accepts. */
typedef struct {
    const char *what;                   /* noun phrase for messages: "a rank count" */
    unsigned long long lo, hi;          /* inclusive; hi = ULLONG_MAX: no upper bound is named */
    bool suffixes;                      /* one K, M or G (either case): x 2^10, 2^20, 2^30 */
} NumArg;

/* Parses `text`, the value of option `opt`, as a decimal integer within spec. Refused: an empty
 * value, a sign or whitespace anywhere, anything but digits (and the one suffix), a value that
 * does not fit 64 bits (suffix included) and one outside [lo, hi]. Leading zeros are decimal.
 * true: *out is the value. false: msg holds "OPT 'TEXT': what is wrong; what is expected". */
bool numarg_parse(const NumArg *spec, const char *opt, const char *text, unsigned long long *out,
                  char msg[NUMARG_MSG]);

/* Parses a decimal factor ("2", "1.5": digits with an optional fraction, nothing else) within
 * [lo, hi]; messages as numarg_parse. NaN, infinities and exponents cannot be written. */
bool numarg_factor(const char *opt, const char *text, double lo, double hi, double *out,
                   char msg[NUMARG_MSG]);

#endif

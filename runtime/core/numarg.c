/*
 * numarg.c - strict parsing of the numbers given to the commands' options (numarg.h). strtoull
 * and strtod are not used: they skip whitespace, take a sign (" -5" becomes 2^64-5), read 0x and
 * a leading 0 as other bases, and strtod yields values (1e30, nan) that overflow a size_t.
 */
#include "core/numarg.h"

#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define SHOWN_MAX 80                    /* bytes of the value quoted in a message */

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool is_space_or_sign(char c) {
    return c == '+' || c == '-' || c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
           c == '\r';
}

/* "OPT 'TEXT': " + the formatted rest; TEXT is cut at SHOWN_MAX bytes. */
static bool fail(char msg[NUMARG_MSG], const char *opt, const char *text, const char *problem,
                 const char *what, const char *range, const char *hint) {
    size_t n = strlen(text);
    snprintf(msg, NUMARG_MSG, "%s '%.*s%s': %s%sexpected %s%s%s", opt, SHOWN_MAX, text,
             n > SHOWN_MAX ? "..." : "", problem, *problem ? "; " : "", what, range, hint);
    return false;
}

/* The problem with text as digits [. digits] (fraction allowed) or digits [K|M|G] (suffixes
 * allowed), or NULL when its shape is right. */
static const char *shape_problem(const char *text, bool fraction, bool suffixes, char sbuf[48]) {
    if (!*text) return "empty";
    for (const char *c = text; *c; c++)
        if (is_space_or_sign(*c)) return "a sign or a space is not allowed";
    const char *c = text;
    while (is_digit(*c)) c++;
    if (c == text) return "not a decimal number";
    if (fraction && *c == '.') {
        const char *f = ++c;
        while (is_digit(*c)) c++;
        if (c == f) return "not a decimal number";
    }
    if (!*c) return NULL;
    if (suffixes && strchr("KkMmGg", *c) && !c[1]) return NULL;
    if (suffixes && !c[1]) {
        snprintf(sbuf, 48, "unknown suffix '%c' (K, M or G)", *c);
        return sbuf;
    }
    return "not a decimal number";
}

bool numarg_parse(const NumArg *spec, const char *opt, const char *text, unsigned long long *out,
                  char msg[NUMARG_MSG]) {
    char range[96] = "", sbuf[48];
    if (spec->hi != ULLONG_MAX) snprintf(range, sizeof range, " in [%llu, %llu]", spec->lo, spec->hi);
    const char *hint = spec->suffixes ? " (digits, optional K, M or G suffix)" : " (digits only)";
    if (!text) text = "";
    const char *problem = shape_problem(text, false, spec->suffixes, sbuf);
    if (problem) return fail(msg, opt, text, problem, spec->what, range, hint);
    unsigned long long v = 0;
    const char *c = text;
    for (; is_digit(*c); c++) {
        unsigned d = (unsigned)(*c - '0');
        if (v > (ULLONG_MAX - d) / 10) return fail(msg, opt, text, "too large", spec->what, range, hint);
        v = v * 10 + d;
    }
    unsigned shift = 0;
    switch (*c) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    default: break;
    }
    if (shift && v > ULLONG_MAX >> shift)
        return fail(msg, opt, text, "too large", spec->what, range, hint);
    v <<= shift;
    if (v < spec->lo || v > spec->hi) return fail(msg, opt, text, "", spec->what, range, "");
    *out = v;
    return true;
}

bool numarg_factor(const char *opt, const char *text, double lo, double hi, double *out,
                   char msg[NUMARG_MSG]) {
    char range[96], sbuf[48];
    snprintf(range, sizeof range, " in [%g, %g]", lo, hi);
    const char *hint = " (digits with an optional fraction, as 2 or 1.5)";
    if (!text) text = "";
    const char *problem = shape_problem(text, true, false, sbuf);
    if (problem) return fail(msg, opt, text, problem, "a factor", range, hint);
    /* digits[.digits] only, so strtod cannot see an exponent, a name or a sign; the commands do
     * not call setlocale, so '.' is the decimal point. Very long digit strings become inf or
     * huge and fail the range check. */
    double v = strtod(text, NULL);
    if (!(v >= lo && v <= hi)) return fail(msg, opt, text, "", "a factor", range, "");
    *out = v;
    return true;
}

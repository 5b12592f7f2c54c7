/*
 * test_numarg.c - the strict option-number parser of mscclrt-run and mscclrt-perf (numarg.c):
 * decimal only, K/M/G suffixes, signs and whitespace refused, 64-bit overflow refused, ranges,
 * and messages that name the option and the value. tests/cases/cmd_args.sh checks the commands.
 */
#include "../harness.h"
#include "core/numarg.h"

#include <limits.h>

static const NumArg bytes = {"a positive byte count", 1, ULLONG_MAX, true};
static const NumArg ranks = {"a rank count", 1, 4096, false};

/* Parses text with spec; want_ok says whether it must be accepted (then with value want). */
static void ok(const NumArg *spec, const char *text, unsigned long long want) {
    unsigned long long v = 12345;
    char msg[NUMARG_MSG] = "";
    bool r = numarg_parse(spec, "--opt", text, &v, msg);
    if (!r) fprintf(stderr, "refused '%s': %s\n", text, msg);
    CHECK(r);
    CHECK(v == want);
}

/* Must be refused with a message that contains `part`; *out stays untouched. */
static void bad(const NumArg *spec, const char *text, const char *part) {
    unsigned long long v = 12345;
    char msg[NUMARG_MSG] = "";
    CHECK(!numarg_parse(spec, "--opt", text, &v, msg));
    CHECK(v == 12345);
    CHECK_CONTAINS(msg, part);
}

static void t_sizes(void) {
    ok(&bytes, "1", 1);
    ok(&bytes, "4096", 4096);
    ok(&bytes, "020", 20);                      /* decimal, not octal */
    ok(&bytes, "64K", 64ull << 10);
    ok(&bytes, "64k", 64ull << 10);
    ok(&bytes, "1M", 1ull << 20);
    ok(&bytes, "3g", 3ull << 30);
    ok(&bytes, "18446744073709551615", ULLONG_MAX);
    ok(&bytes, "17179869183G", 17179869183ull << 30);
    bad(&bytes, " -5", "--opt ' -5': a sign or a space is not allowed; expected a positive byte "
                       "count (digits, optional K, M or G suffix)");
    bad(&bytes, "-5", "a sign or a space is not allowed");
    bad(&bytes, "+5", "a sign or a space is not allowed");
    bad(&bytes, " 5", "a sign or a space is not allowed");
    bad(&bytes, "5 ", "a sign or a space is not allowed");
    bad(&bytes, "", "--opt '': empty");
    bad(&bytes, "0x10", "not a decimal number");
    bad(&bytes, "1e30", "not a decimal number");
    bad(&bytes, "nan", "not a decimal number");
    bad(&bytes, "inf", "not a decimal number");
    bad(&bytes, "1.5M", "not a decimal number");
    bad(&bytes, "K", "not a decimal number");
    bad(&bytes, "1KB", "not a decimal number");
    bad(&bytes, "5X", "unknown suffix 'X' (K, M or G)");
    bad(&bytes, "18446744073709551616", "too large");
    bad(&bytes, "99999999999999999999999", "too large");
    bad(&bytes, "17179869184G", "too large");
    bad(&bytes, "0", "--opt '0': expected a positive byte count");
}

static void t_counts(void) {
    ok(&ranks, "1", 1);
    ok(&ranks, "4096", 4096);
    ok(&ranks, "0008", 8);
    bad(&ranks, "0", "--opt '0': expected a rank count in [1, 4096]");
    bad(&ranks, "4097", "--opt '4097': expected a rank count in [1, 4096]");
    bad(&ranks, "4K", "not a decimal number");           /* no suffixes for counts */
    bad(&ranks, "-1", "a sign or a space is not allowed; expected a rank count in [1, 4096] "
                      "(digits only)");
    /* the value is quoted, cut when long */
    char longv[300];
    memset(longv, '7', sizeof longv - 1);
    longv[sizeof longv - 1] = 0;
    bad(&ranks, longv, "...': too large");
}

static void t_factor(void) {
    double f = 0;
    char msg[NUMARG_MSG];
    CHECK(numarg_factor("-f", "2", 1, 1024, &f, msg) && f == 2);
    CHECK(numarg_factor("-f", "1.5", 1, 1024, &f, msg) && f == 1.5);
    CHECK(numarg_factor("-f", "1024", 1, 1024, &f, msg) && f == 1024);
    const char *badv[] = {"1e30", "nan", "inf", "-2", " 2", "2.", ".5", "0x2", "", "2x"};
    for (size_t i = 0; i < sizeof badv / sizeof *badv; i++) {
        f = -1;
        CHECK(!numarg_factor("-f", badv[i], 1, 1024, &f, msg));
        CHECK(f == -1);
        CHECK_CONTAINS(msg, "-f '");
    }
    CHECK(!numarg_factor("-f", "0.5", 1, 1024, &f, msg));
    CHECK_CONTAINS(msg, "-f '0.5': expected a factor in [1, 1024]");
    CHECK(!numarg_factor("-f", "1025", 1, 1024, &f, msg));
    char huge[400];
    memset(huge, '9', sizeof huge - 1);
    huge[sizeof huge - 1] = 0;
    CHECK(!numarg_factor("-f", huge, 1, 1024, &f, msg));   /* inf from strtod: out of range */
    CHECK_CONTAINS(msg, "expected a factor in [1, 1024]");
}

int main(void) {
    TEST("numarg/sizes", t_sizes());
    TEST("numarg/counts", t_counts());
    TEST("numarg/factor", t_factor());
    return harness_report();
}

/*
 * harness.h - the whole unit-test framework: checks are counted, failures print the expression
 * and both values, and harness_report() prints the closing "testing NAME ... passed|failed";
 * harness_skip() ends a program that cannot run here, saying what it needs.
 * Include it once per test program; define TEST_NAME before including to name the program.
 */
#ifndef MSCCL_HARNESS_H
#define MSCCL_HARNESS_H
#include <stdio.h>
#include <string.h>

static int h_checks, h_failed;

#define CHECK(c) do { h_checks++; if (!(c)) { h_failed++; \
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); } } while (0)
#define CHECK_EQ_INT(w, g) do { long long w_ = (long long)(w), g_ = (long long)(g); h_checks++; \
    if (w_ != g_) { h_failed++; fprintf(stderr, "%s:%d: %s: want %lld, got %lld\n", \
    __FILE__, __LINE__, #g, w_, g_); } } while (0)
#define CHECK_STR(w, g) do { const char *w_ = (w), *g_ = (g); h_checks++; \
    if (!g_ || strcmp(w_, g_) != 0) { h_failed++; fprintf(stderr, "%s:%d: %s:\n  want \"%s\"\n  got  \"%s\"\n", \
    __FILE__, __LINE__, #g, w_, g_ ? g_ : "(null)"); } } while (0)
#define CHECK_CONTAINS(hay, needle) do { const char *h_ = (hay), *n_ = (needle); h_checks++; \
    if (!h_ || !strstr(h_, n_)) { h_failed++; fprintf(stderr, "%s:%d: %s does not contain \"%s\": \"%s\"\n", \
    __FILE__, __LINE__, #hay, n_, h_ ? h_ : "(null)"); } } while (0)

/* Runs one named sub-test and prints its line, so the driver counts each separately; flushed at
 * once, so a program killed by a time limit (stdout into a file is fully buffered) still shows
 * how far it got */
#define TEST(name, body) do { int f0_ = h_failed; body; \
    printf("testing %s ... %s\n", name, h_failed == f0_ ? "passed" : "failed"); fflush(stdout); } while (0)

/* A sub-test that cannot run here: its line names what it needs, for the driver's summary. */
#define TEST_SKIP(name, needs) printf("testing %s ... skipped (needs %s)\n", name, needs)

/* Ends a test program that cannot run on this machine: prints the detail (the driver's error,
 * say; may be NULL) and "skipped (needs WHAT)", the reason tests/run.sh reports, and returns 77,
 * the driver's exit status for a skip: `return harness_skip("a GPU", mscclrt_last_error());`. */
static inline int harness_skip(const char *needs, const char *detail) {
    if (detail && *detail) fprintf(stderr, "%s\n", detail);
    fprintf(stderr, "skipped (needs %s)\n", needs);
    return 77;
}

static inline int harness_report(void) {
    fprintf(stderr, "%d checks, %d failed\n", h_checks, h_failed);
    return h_failed ? 1 : 0;
}
#endif

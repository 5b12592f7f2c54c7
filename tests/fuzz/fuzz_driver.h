/*
 * fuzz_driver.h - what a fuzz target (fuzz_net.c, fuzz_plan.c) shares with fuzz_driver.c: the
 * target describes itself in one FuzzTarget, and the driver stops a run on a broken invariant
 * (fuzz_die) and, built with -DFUZZ_STANDALONE, is the main program that replays files and
 * mutates them with the target's own mutation (for machines without libFuzzer; under libFuzzer
 * only fuzz_die and the random numbers are used):
 *   NAME [-t seconds] [-r runs] [-s seed] [-o crash-file] file-or-dir...
 * tests/fuzz/fuzz_lib.sh builds and runs both kinds for the tests/cases/fuzz_*.sh scripts.
 */
#ifndef FUZZ_DRIVER_H
#define FUZZ_DRIVER_H

#include <stddef.h>
#include <stdint.h>

/* One per target, defined by it as `const FuzzTarget fuzz_target = {...}`. */
typedef struct {
    const char *name;              /* "fuzz_net": starts every line the driver prints */
    size_t max_input;              /* bytes read from a file (the rest is cut), a mutant's room */
    const char *crash_path;        /* where a crashing input goes unless -o says */
    const unsigned long *accepted; /* inputs (or parts) the code under test accepted, counted by
                                    * the target; reported with accepted_what after the run */
    const char *accepted_what;     /* "headers accepted", "loaded" */
    /* One edit of buf (len bytes, capacity max_input) in place; returns the new length. */
    size_t (*mutate)(uint8_t *buf, size_t len);
    int (*edits)(void);            /* how many edits make one mutant (drawn with fuzz_rnd) */
} FuzzTarget;

extern const FuzzTarget fuzz_target;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Prints "NAME: what: detail" (detail may be NULL), saves the input being run (standalone;
 * libFuzzer saves it itself) and aborts: the sanitizers and libFuzzer report it as a crash. */
_Noreturn void fuzz_die(const char *what, const char *detail);

uint64_t fuzz_rnd(void);           /* xorshift64*, seeded by -s: a run can be repeated */
size_t fuzz_rnd_below(size_t n);   /* in [0, n); 0 when n is 0 */

#endif

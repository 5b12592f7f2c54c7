/*
 * fuzz_plan.c - fuzz target of the plan loader: any input is parsed; a rejected one must come with
 * a message, an accepted one must write, re-load and re-write identically, and survive the
 * geometry and dump code. Built with fuzz_driver.c: under libFuzzer (LLVMFuzzerTestOneInput), or
 * with -DFUZZ_STANDALONE as a program that replays files and mutates them with JSON-aware edits
 * (mutate below):
 *   fuzz_plan [-t seconds] [-r runs] [-s seed] [-o crash-file] file-or-dir...
 * Built with -DFUZZ_RUN_CPU (and fuzz_run_cpu.c and the runtime) it is fuzz_plan_cpu: every
 * accepted plan is also run on the CPU backend.
 */
#include "plan.h"
#include "fuzz_driver.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FUZZ_RUN_CPU
void fuzz_run_cpu(const uint8_t *data, size_t size);   /* fuzz_run_cpu.c */
#endif

static FILE *devnull;
static unsigned long fuzz_accepted; /* inputs that loaded, for the standalone driver's summary */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!devnull) devnull = fopen("/dev/null", "w");
    PlanErr e;
    e.msg[0] = '\0';
    Plan *p = plan_parse((const char *)data, size, "fuzz", &e);
    if (!p) {
        if (!e.msg[0]) fuzz_die("rejected without a message", NULL);
        return 0;
    }
    fuzz_accepted++;
    bool compact = size & 1;
    char *t1 = plan_to_json(p, compact, "fuzz");
    if (!t1) fuzz_die("plan_to_json failed", NULL);
    PlanErr e2;
    Plan *q = plan_parse(t1, strlen(t1), "rewritten", &e2);
    if (!q) fuzz_die("a written plan does not load", e2.msg);
    char *t2 = plan_to_json(q, compact, "fuzz");
    if (!t2 || strcmp(t1, t2) != 0) fuzz_die("write -> load -> write is not stable", NULL);
    Plan *c = plan_clone(p);
    if (!c || !plan_validate(c, "clone", &e2)) fuzz_die("a clone does not validate", e2.msg);
    static const uint64_t sizes[] = {0, 16, 1024, 4096, 1 << 20, 3u << 20, 1ull << 32,
                                     UINT64_MAX - 15};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint64_t in, out;
        plan_call_sizes(p, sizes[i], &in, &out);
        for (int r = 0; r < p->ngpus && r < 4; r++) {
            PlanGeom g;
            if (!plan_geom(p, r, in, out, &g, &e2) && !e2.msg[0])
                fuzz_die("geometry failed without a message", NULL);
        }
    }
    if (devnull) {
        plan_dump_table(p, devnull);
        plan_dump_dot(p, devnull);
    }
    plan_free(c);
    plan_free(q);
    plan_free(p);
    free(t1);
    free(t2);
#ifdef FUZZ_RUN_CPU
    fuzz_run_cpu(data, size);   /* a plan that loads must run or fail cleanly */
#endif
    return 0;
}

/* ---- the standalone driver's mutation (fuzz_driver.h) ------------------------------------- */

#define FUZZ_MAX_INPUT (1u << 20)

/* Values and names that sit on the loader's edges, written over numbers and strings. */
static const char *const numbers[] = {
    "0", "-1", "1", "2", "3", "7", "8", "9", "15", "16", "17", "63", "64", "65", "1023", "1024",
    "1025", "65535", "65536", "2147483647", "2147483648", "-2147483649", "4294967295",
    "4294967296", "9007199254740993", "18446744073709551615", "18446744073709551616", "1e999",
    "-1e999", "0.5", "-0", "1e2", "[]", "{}", "null", "true", "\"1\"",
};
static const char *const strings[] = {
    "nop", "barrier", "signal", "wait", "put", "get", "copy", "ppkt", "rppkt", "re", "rre",
    "rres", "respkt", "recspkt", "glres", "glre", "gstore", "gstorepkt", "pipeline", "memory",
    "port", "switch", "none", "i", "o", "s", "LL", "Simple", "allgather", "reducescatter", "x",
    "", "buffer_id", "switch_channel_id", "type", "channels", "ops",
};

/* One JSON-aware mutation of buf (capacity FUZZ_MAX_INPUT) in place; returns the new length. */
static size_t mutate(char *buf, size_t len) {
    char tmp[32];
    switch (fuzz_rnd_below(10)) {
    case 0: /* flip a byte */
        if (len) buf[fuzz_rnd_below(len)] ^= (char)(1u << fuzz_rnd_below(8));
        return len;
    case 1: case 2: { /* replace a number with an interesting value */
        size_t start = fuzz_rnd_below(len), i;
        for (i = start; i < len && !(buf[i] >= '0' && buf[i] <= '9'); i++) {}
        if (i >= len) return len;
        size_t j = i;
        while (j < len && ((buf[j] >= '0' && buf[j] <= '9') || buf[j] == '-')) j++;
        if (i > 0 && buf[i - 1] == '-') i--;
        const char *v = numbers[fuzz_rnd_below(sizeof numbers / sizeof numbers[0])];
        size_t vl = strlen(v);
        if (len - (j - i) + vl >= FUZZ_MAX_INPUT) return len;
        memmove(buf + i + vl, buf + j, len - j);
        memcpy(buf + i, v, vl);
        return len - (j - i) + vl;
    }
    case 3: { /* replace the contents of a string */
        size_t start = fuzz_rnd_below(len), i;
        for (i = start; i < len && buf[i] != '"'; i++) {}
        if (i >= len) return len;
        size_t j = i + 1;
        while (j < len && buf[j] != '"') j++;
        if (j >= len) return len;
        const char *v = strings[fuzz_rnd_below(sizeof strings / sizeof strings[0])];
        size_t vl = strlen(v);
        size_t old = j - i - 1;
        if (len - old + vl >= FUZZ_MAX_INPUT) return len;
        memmove(buf + i + 1 + vl, buf + j, len - j);
        memcpy(buf + i + 1, v, vl);
        return len - old + vl;
    }
    case 4: { /* delete a span */
        if (!len) return len;
        size_t a = fuzz_rnd_below(len), n = 1 + fuzz_rnd_below(len - a < 64 ? len - a : 64);
        memmove(buf + a, buf + a + n, len - a - n);
        return len - n;
    }
    case 5: { /* duplicate a span somewhere else */
        if (!len) return len;
        size_t a = fuzz_rnd_below(len), n = 1 + fuzz_rnd_below(len - a < 256 ? len - a : 256);
        if (len + n >= FUZZ_MAX_INPUT) return len;
        char span[256];
        memcpy(span, buf + a, n);
        size_t at = fuzz_rnd_below(len + 1);
        memmove(buf + at + n, buf + at, len - at);
        memcpy(buf + at, span, n);
        return len + n;
    }
    case 8: case 9: { /* nudge a number by one: mutants that stay valid reach deeper code */
        size_t start = fuzz_rnd_below(len), i;
        for (i = start; i < len && !(buf[i] >= '0' && buf[i] <= '9'); i++) {}
        if (i >= len) return len;
        size_t j = i;
        while (j < len && buf[j] >= '0' && buf[j] <= '9') j++;
        if (j - i > 9 || (i > 0 && (buf[i - 1] == '.' || buf[i - 1] == '-'))) return len;
        /* the digits of [i, j) only: buf is not terminated at len, and what lies past it (a
         * longer earlier input's bytes) may go on with digits */
        long v = 0;
        for (size_t k = i; k < j; k++) v = v * 10 + (buf[k] - '0');
        v += fuzz_rnd() & 1 ? 1 : -1;
        if (v < 0) v = 1;
        int n = snprintf(tmp, sizeof tmp, "%ld", v);
        if (n <= 0 || len - (j - i) + (size_t)n >= FUZZ_MAX_INPUT) return len;
        memmove(buf + i + n, buf + j, len - j);
        memcpy(buf + i, tmp, (size_t)n);
        return len - (j - i) + (size_t)n;
    }
    case 6: /* truncate */
        return len ? fuzz_rnd_below(len) : 0;
    default: { /* insert a structural character */
        static const char chars[] = "{}[],:\"0-";
        if (len + 1 >= FUZZ_MAX_INPUT) return len;
        size_t at = fuzz_rnd_below(len + 1);
        memmove(buf + at + 1, buf + at, len - at);
        buf[at] = chars[fuzz_rnd_below(sizeof chars - 1)];
        return len + 1;
    }
    }
}

/* Mostly single edits: mutants that stay valid JSON reach deeper code. */
static int edits(void) { return fuzz_rnd_below(4) ? 1 : 2 + (int)fuzz_rnd_below(3); }

static size_t mutate_bytes(uint8_t *buf, size_t len) { return mutate((char *)buf, len); }

#ifdef FUZZ_RUN_CPU
#define FUZZ_NAME "fuzz_plan_cpu"
#else
#define FUZZ_NAME "fuzz_plan"
#endif

const FuzzTarget fuzz_target = {
    .name = FUZZ_NAME, .max_input = FUZZ_MAX_INPUT, .crash_path = FUZZ_NAME "_crash.json",
    .accepted = &fuzz_accepted, .accepted_what = "loaded", .mutate = mutate_bytes,
    .edits = edits,
};

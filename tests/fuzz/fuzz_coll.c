/*
 * fuzz_coll.c - fuzz target for the whole mscclc front end (scanner, parser, sema, lowering,
 * passes, validation) through mscclc_compile(). Two modes:
 *   - libFuzzer: build with -fsanitize=fuzzer (LLVMFuzzerTestOneInput below);
 *   - standalone (-DFUZZ_STANDALONE): fuzz_coll SECONDS CORPUS_FILE... replays every corpus file,
 *     then mutates them at random (byte flips, token splices, truncations, duplications) until
 *     the time is up. Crashes, leaks and UB are reported by the sanitizers it is built with.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mscclc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 16) return 0;   /* keep single runs fast; the language needs no big inputs */
    MscclcDefine defs[1] = {{"N", 4}};
    /* -D N=4 on half the inputs that declare N (on the others it is only an error) */
    bool has_n = memmem(data, size, "param N", 7) != NULL;
    /* at most 1 million loop iterations: the compiler's own 20 million take about 1.5 s
     * without sanitizers and ran past libFuzzer's 10 s under them (a clean-clone CI run) */
    MscclcOptions opt = {.filename = "fuzz.coll", .defines = defs, .ndefines = (size & 1) && has_n ? 1 : 0,
                         .error_limit = 5, .compact = (size & 2) != 0, .max_iterations = 1000000};
    MscclcResult res;
    mscclc_compile((const char *)data, size, &opt, &res);
    if (res.status == MSCCLC_ERR_INTERNAL) {   /* a plan the checks let through but validation refuses */
        fprintf(stderr, "internal error:\n%s\n", res.diagnostics ? res.diagnostics : "");
        abort();
    }
    if (res.status == MSCCLC_OK && !res.plan) abort();          /* contract of mscclc.h */
    if (res.status != MSCCLC_OK && res.plan) abort();
    if (!res.diagnostics) abort();
    if (res.plan) {
        char *json = plan_to_json(res.plan, true, MSCCLC_PRODUCER);
        PlanErr err;
        Plan *back = json ? plan_parse(json, strlen(json), "<fuzz>", &err) : NULL;
        if (json && !back) {             /* whatever the compiler emits must load back */
            fprintf(stderr, "compiled plan does not load: %s\n", err.msg);
            abort();
        }
        plan_free(back);
        free(json);
    }
    mscclc_result_free(&res);
    return 0;
}

#ifdef FUZZ_STANDALONE
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static const char *const tokens[] = {
    "(", ")", "[", "]", "{", "}", "\n", ";", ",", ":", "..", "->", "@", "=", "==", "!", "-", "*", "/", "%",
    "0", "1", "7", "-1", "1K", "1G", "99999999999999999999", "N", "r", "p", "rank(0)", ".input", ".output",
    "[0:1]", "[3]", "for ", " in ", "if ", "else ", "let ", "param ", "require ", "program ", "scratch ",
    "channel ", "semaphore ", "tb(1)", "tbg(0..2)", "memory(0 -> 1)", "port(1 -> 0)", "\"s\"", "#c\n",
    ".signal()", ".wait()", ".put(", ".get(", "copy(", "reduce(", "pipeline(unit = 1K) {", "step ",
    "2", "3", "4", "16", "1024", "alignment ", "threads ", "instances ", "chunk_factor ", "sizes ",
    "protocol LL", "inplace", "double_scratch", "reuse_resources", "fusion off", "auto_sync off",
    "tags ", "collective ", "ranks ", "switch(ranks = [0, 1], buffer = input)", "semaphore(rank = 0)",
};

typedef struct {
    char *data;
    size_t len;
} Buf;

static Buf read_all(const char *path) {
    Buf b = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return b;
    b.data = malloc(1 << 16);
    if (b.data) b.len = fread(b.data, 1, 1 << 16, f);
    fclose(f);
    return b;
}

/* Numbers at the edges of the language's and the plan format's limits. */
static const char *const numbers[] = {
    "0", "1", "2", "3", "4", "5", "7", "8", "15", "16", "17", "31", "32", "33", "63", "64", "65",
    "1023", "1024", "1025", "4095", "4096", "4097", "65535", "65536", "1M", "1G", "4G", "-1", "-2",
};

/* One random mutation of src into out (out has room for 1<<17 bytes). */
static size_t mutate(const Buf *src, char *out) {
    size_t n = src->len;
    memcpy(out, src->data, n);
    int rounds = 1 + (int)(rnd() % 4);
    for (int k = 0; k < rounds; k++) {
        size_t at = n ? rnd() % (n + 1) : 0;
        switch (rnd() % 7) {
        case 0: /* flip a byte */
            if (n) out[rnd() % n] = (char)rnd();
            break;
        case 1: { /* insert a token */
            const char *t = tokens[rnd() % (sizeof tokens / sizeof tokens[0])];
            size_t l = strlen(t);
            if (n + l < (1 << 16)) {
                memmove(out + at + l, out + at, n - at);
                memcpy(out + at, t, l);
                n += l;
            }
            break;
        }
        case 2: /* delete a range */
            if (n) {
                size_t l = rnd() % 16;
                if (at + l > n) l = n - at;
                memmove(out + at, out + at + l, n - at - l);
                n -= l;
            }
            break;
        case 3: /* truncate */
            n = at;
            break;
        case 4: { /* duplicate a range */
            size_t l = rnd() % 64;
            if (at + l > n) l = n - at;
            if (n + l < (1 << 16)) {
                memmove(out + at + l, out + at, n - at);
                n += l;
            }
            break;
        }
        case 6: { /* replace a whole number by one at a limit */
            size_t i = at;
            while (i < n && !(out[i] >= '0' && out[i] <= '9')) i++;
            size_t j = i;
            while (j < n && ((out[j] >= '0' && out[j] <= '9') || out[j] == 'K' || out[j] == 'M' ||
                             out[j] == 'G'))
                j++;
            const char *v = numbers[rnd() % (sizeof numbers / sizeof numbers[0])];
            size_t l = strlen(v);
            if (i < n && n - (j - i) + l < (1 << 16)) {
                memmove(out + i + l, out + j, n - j);
                memcpy(out + i, v, l);
                n = n - (j - i) + l;
            }
            break;
        }
        default: /* replace a digit by another number */
            for (size_t i = at; i < n; i++)
                if (out[i] >= '0' && out[i] <= '9') {
                    out[i] = (char)('0' + rnd() % 10);
                    break;
                }
            break;
        }
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fputs("usage: fuzz_coll SECONDS CORPUS_FILE...\n", stderr);
        return 2;
    }
    double seconds = atof(argv[1]);
    int nfiles = argc - 2;
    Buf *corpus = calloc((size_t)nfiles, sizeof *corpus);
    char *scratch = malloc(1 << 17);
    if (!corpus || !scratch) return 2;
    for (int i = 0; i < nfiles; i++) {
        corpus[i] = read_all(argv[i + 2]);
        if (!corpus[i].data) {
            fprintf(stderr, "fuzz_coll: cannot read %s\n", argv[i + 2]);
            return 2;
        }
        LLVMFuzzerTestOneInput((const uint8_t *)corpus[i].data, corpus[i].len);
    }
    rng_state ^= (uint64_t)time(NULL);
    fprintf(stderr, "fuzz_coll: seed %llu\n", (unsigned long long)rng_state);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long runs = 0;
    do {
        for (int k = 0; k < 64; k++) {
            size_t n = mutate(&corpus[rnd() % (uint64_t)nfiles], scratch);
            LLVMFuzzerTestOneInput((const uint8_t *)scratch, n);
            runs++;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 < seconds);
    fprintf(stderr, "fuzz_coll: %ld runs, no crash\n", runs);
    for (int i = 0; i < nfiles; i++) free(corpus[i].data);
    free(corpus);
    free(scratch);
    return 0;
}
#endif

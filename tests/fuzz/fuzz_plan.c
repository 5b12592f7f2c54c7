/*
 * fuzz_plan.c - fuzz target of the plan loader: any input is parsed; a rejected one must come with
 * a message, an accepted one must write, re-load and re-write identically, and survive the
 * geometry and dump code. Built with libFuzzer (LLVMFuzzerTestOneInput) or, with
 * -DFUZZ_STANDALONE, as a driver that replays files and runs a JSON-aware mutation loop:
 *   fuzz_plan [-t seconds] [-s seed] [-o crash-file] file-or-dir...
 * Built with -DFUZZ_RUN_CPU (and fuzz_run_cpu.c and the runtime) it is fuzz_plan_cpu: every
 * accepted plan is also run on the CPU backend.
 */
#include "plan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
#ifdef FUZZ_RUN_CPU
void fuzz_run_cpu(const uint8_t *data, size_t size);   /* fuzz_run_cpu.c */
#endif

static FILE *devnull;
static unsigned long fuzz_accepted; /* inputs that loaded, for the standalone driver's summary */

#ifdef FUZZ_STANDALONE
static void save_crash(void);
#else
static void save_crash(void) {} /* libFuzzer saves the input itself */
#endif

/* Stops the run on a broken invariant: the sanitizers and libFuzzer report an abort as a crash. */
static void fuzz_die(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_plan: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    save_crash();
    abort();
}

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

#ifdef FUZZ_STANDALONE
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>

#define FUZZ_MAX_INPUT (1u << 20)

typedef struct {
    char *data;
    size_t len;
} Input;

static Input *corpus;
static size_t ncorpus, capcorpus;
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static size_t rnd_below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

static void add_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char *buf = malloc(FUZZ_MAX_INPUT);
    size_t n = buf ? fread(buf, 1, FUZZ_MAX_INPUT, f) : 0;
    fclose(f);
    if (!buf) return;
    if (ncorpus == capcorpus) {
        capcorpus = capcorpus ? capcorpus * 2 : 64;
        corpus = realloc(corpus, capcorpus * sizeof *corpus);
        if (!corpus) abort();
    }
    corpus[ncorpus++] = (Input){buf, n};
}

/* The input being run, written to crash_path when a run dies (death callback of the sanitizers
 * or a broken invariant), so it can be replayed. */
static const char *cur_data;
static size_t cur_len;
static const char *crash_path = "fuzz_plan_crash.json";

static void save_crash(void) {
    if (!cur_data) return;
    int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    ssize_t w = write(fd, cur_data, cur_len);
    close(fd);
    fprintf(stderr, "fuzz_plan: input saved to %s (%zd bytes)\n", crash_path, w);
}

void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void add_path(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "fuzz_plan: cannot read %s\n", path);
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        add_file(path);
        return;
    }
    DIR *d = opendir(path);
    if (!d) return;
    char *names[4096];
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) && n < 4096;)
        if (de->d_name[0] != '.') names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str); /* deterministic order */
    for (int i = 0; i < n; i++) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, names[i]);
        if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) add_file(full);
        free(names[i]);
    }
}

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
    switch (rnd_below(10)) {
    case 0: /* flip a byte */
        if (len) buf[rnd_below(len)] ^= (char)(1u << rnd_below(8));
        return len;
    case 1: case 2: { /* replace a number with an interesting value */
        size_t start = rnd_below(len), i;
        for (i = start; i < len && !(buf[i] >= '0' && buf[i] <= '9'); i++) {}
        if (i >= len) return len;
        size_t j = i;
        while (j < len && ((buf[j] >= '0' && buf[j] <= '9') || buf[j] == '-')) j++;
        if (i > 0 && buf[i - 1] == '-') i--;
        const char *v = numbers[rnd_below(sizeof numbers / sizeof numbers[0])];
        size_t vl = strlen(v);
        if (len - (j - i) + vl >= FUZZ_MAX_INPUT) return len;
        memmove(buf + i + vl, buf + j, len - j);
        memcpy(buf + i, v, vl);
        return len - (j - i) + vl;
    }
    case 3: { /* replace the contents of a string */
        size_t start = rnd_below(len), i;
        for (i = start; i < len && buf[i] != '"'; i++) {}
        if (i >= len) return len;
        size_t j = i + 1;
        while (j < len && buf[j] != '"') j++;
        if (j >= len) return len;
        const char *v = strings[rnd_below(sizeof strings / sizeof strings[0])];
        size_t vl = strlen(v);
        size_t old = j - i - 1;
        if (len - old + vl >= FUZZ_MAX_INPUT) return len;
        memmove(buf + i + 1 + vl, buf + j, len - j);
        memcpy(buf + i + 1, v, vl);
        return len - old + vl;
    }
    case 4: { /* delete a span */
        if (!len) return len;
        size_t a = rnd_below(len), n = 1 + rnd_below(len - a < 64 ? len - a : 64);
        memmove(buf + a, buf + a + n, len - a - n);
        return len - n;
    }
    case 5: { /* duplicate a span somewhere else */
        if (!len) return len;
        size_t a = rnd_below(len), n = 1 + rnd_below(len - a < 256 ? len - a : 256);
        if (len + n >= FUZZ_MAX_INPUT) return len;
        char span[256];
        memcpy(span, buf + a, n);
        size_t at = rnd_below(len + 1);
        memmove(buf + at + n, buf + at, len - at);
        memcpy(buf + at, span, n);
        return len + n;
    }
    case 8: case 9: { /* nudge a number by one: mutants that stay valid reach deeper code */
        size_t start = rnd_below(len), i;
        for (i = start; i < len && !(buf[i] >= '0' && buf[i] <= '9'); i++) {}
        if (i >= len) return len;
        size_t j = i;
        while (j < len && buf[j] >= '0' && buf[j] <= '9') j++;
        if (j - i > 9 || (i > 0 && (buf[i - 1] == '.' || buf[i - 1] == '-'))) return len;
        long v = strtol(buf + i, NULL, 10) + (rnd() & 1 ? 1 : -1);
        if (v < 0) v = 1;
        int n = snprintf(tmp, sizeof tmp, "%ld", v);
        if (n <= 0 || len - (j - i) + (size_t)n >= FUZZ_MAX_INPUT) return len;
        memmove(buf + i + n, buf + j, len - j);
        memcpy(buf + i, tmp, (size_t)n);
        return len - (j - i) + (size_t)n;
    }
    case 6: /* truncate */
        return len ? rnd_below(len) : 0;
    default: { /* insert a structural character */
        static const char chars[] = "{}[],:\"0-";
        if (len + 1 >= FUZZ_MAX_INPUT) return len;
        size_t at = rnd_below(len + 1);
        memmove(buf + at + 1, buf + at, len - at);
        buf[at] = chars[rnd_below(sizeof chars - 1)];
        return len + 1;
    }
    }
}

int main(int argc, char **argv) {
    double seconds = 10;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) rng_state = strtoull(argv[++i], NULL, 0) | 1;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) crash_path = argv[++i];
        else {
            fprintf(stderr, "usage: fuzz_plan [-t seconds] [-s seed] [-o crash-file] file-or-dir...\n");
            return 2;
        }
    }
    for (; i < argc; i++) add_path(argv[i]);
    if (ncorpus == 0) {
        fprintf(stderr, "fuzz_plan: no inputs\n");
        return 2;
    }
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(save_crash);
    printf("fuzz_plan: seed %llu\n", (unsigned long long)rng_state);
    fflush(stdout);
    /* replay */
    for (size_t k = 0; k < ncorpus; k++) {
        cur_data = corpus[k].data;
        cur_len = corpus[k].len;
        LLVMFuzzerTestOneInput((const uint8_t *)corpus[k].data, corpus[k].len);
    }
    /* mutate until the time is up */
    char *buf = malloc(FUZZ_MAX_INPUT);
    if (!buf) return 2;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long runs = 0;
    fuzz_accepted = 0;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 >= seconds)
            break;
        const Input *in = &corpus[rnd_below(ncorpus)];
        size_t len = in->len;
        memcpy(buf, in->data, len);
        int nmut = rnd_below(4) ? 1 : 2 + (int)rnd_below(3); /* mostly single edits */
        for (int m = 0; m < nmut; m++) len = mutate(buf, len);
        cur_data = buf;
        cur_len = len;
        LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
        runs++;
    }
    printf("fuzz_plan: %zu inputs replayed, %lu mutants run (%lu loaded) in %.0f s\n", ncorpus,
           runs, fuzz_accepted, seconds);

    cur_data = NULL;
    free(buf);
    for (size_t k = 0; k < ncorpus; k++) free(corpus[k].data);
    free(corpus);
    if (devnull) fclose(devnull);
    return 0;
}
#endif

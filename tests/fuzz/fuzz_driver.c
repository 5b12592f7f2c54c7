/*
 * fuzz_driver.c - the fuzz targets' shared driver (fuzz_driver.h): fuzz_die and the random
 * numbers always; with -DFUZZ_STANDALONE also main(), which loads the corpus (files, or the
 * files of directories in name order), replays it, then runs mutants of random corpus inputs
 * (the target's edits) until the time or the run count is up, saving the input being run when
 * a run dies (a broken invariant, or the sanitizers' death callback) so that it can be replayed
 * with -t 0. Deterministic for a given seed (-s), which it prints first.
 */
#include "fuzz_driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

uint64_t fuzz_rnd(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

size_t fuzz_rnd_below(size_t n) { return n ? (size_t)(fuzz_rnd() % n) : 0; }

#ifdef FUZZ_STANDALONE
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FUZZ_MAX_DIR 4096   /* files read from one directory */

typedef struct {
    uint8_t *data;
    size_t len;
} Input;

static Input *corpus;
static size_t ncorpus, capcorpus;

/* The input being run, written to crash_path when the run dies. */
static const uint8_t *cur_data;
static size_t cur_len;
static const char *crash_path;

static void save_crash(void) {
    if (!cur_data) return;
    int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    ssize_t w = write(fd, cur_data, cur_len);
    close(fd);
    fprintf(stderr, "%s: input saved to %s (%zd bytes)\n", fuzz_target.name, crash_path, w);
}

void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static void add_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    uint8_t *buf = malloc(fuzz_target.max_input);
    size_t n = buf ? fread(buf, 1, fuzz_target.max_input, f) : 0;
    fclose(f);
    if (!buf) return;
    if (ncorpus == capcorpus) {
        capcorpus = capcorpus ? capcorpus * 2 : 64;
        corpus = realloc(corpus, capcorpus * sizeof *corpus);
        if (!corpus) abort();
    }
    corpus[ncorpus++] = (Input){buf, n};
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void add_path(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "%s: cannot read %s\n", fuzz_target.name, path);
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        add_file(path);
        return;
    }
    DIR *d = opendir(path);
    if (!d) return;
    char *names[FUZZ_MAX_DIR];
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) && n < FUZZ_MAX_DIR;)
        if (de->d_name[0] != '.') names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);   /* deterministic order */
    for (int i = 0; i < n; i++) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, names[i]);
        if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) add_file(full);
        free(names[i]);
    }
}

static void run(const uint8_t *data, size_t len) {
    cur_data = data;
    cur_len = len;
    LLVMFuzzerTestOneInput(data, len);
}

static double since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

int main(int argc, char **argv) {
    const char *name = fuzz_target.name;
    double seconds = 10;
    unsigned long max_runs = 0;   /* 0: until the time is up */
    crash_path = fuzz_target.crash_path;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) max_runs = strtoul(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            rng_state = strtoull(argv[++i], NULL, 0) | 1;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) crash_path = argv[++i];
        else {
            fprintf(stderr, "usage: %s [-t seconds] [-r runs] [-s seed] [-o crash-file] "
                    "file-or-dir...\n", name);
            return 2;
        }
    }
    for (; i < argc; i++) add_path(argv[i]);
    if (ncorpus == 0) {
        fprintf(stderr, "%s: no inputs\n", name);
        return 2;
    }
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(save_crash);
    printf("%s: seed %llu\n", name, (unsigned long long)rng_state);
    fflush(stdout);
    for (size_t k = 0; k < ncorpus; k++) run(corpus[k].data, corpus[k].len);
    uint8_t *buf = malloc(fuzz_target.max_input);
    if (!buf) return 2;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long runs = 0;
    unsigned long replayed = *fuzz_target.accepted;
    for (; (!max_runs || runs < max_runs) && since(&t0) < seconds; runs++) {
        const Input *in = &corpus[fuzz_rnd_below(ncorpus)];
        size_t len = in->len;
        memcpy(buf, in->data, len);
        for (int m = fuzz_target.edits(); m > 0; m--) len = fuzz_target.mutate(buf, len);
        run(buf, len);
    }
    printf("%s: %zu inputs replayed, %lu mutants run (%lu %s) in %.0f s\n", name, ncorpus, runs,
           *fuzz_target.accepted - replayed, fuzz_target.accepted_what, since(&t0));
    cur_data = NULL;
    free(buf);
    for (size_t k = 0; k < ncorpus; k++) free(corpus[k].data);
    free(corpus);
    return 0;
}
#else
static void save_crash(void) {}   /* libFuzzer saves the input itself */
#endif

_Noreturn void fuzz_die(const char *what, const char *detail) {
    fprintf(stderr, "%s: %s%s%s\n", fuzz_target.name, what, detail ? ": " : "",
            detail ? detail : "");
    save_crash();
    abort();
}

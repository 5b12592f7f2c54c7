/*
 * check_threads.c - the host threads of large checks: input generation and postcondition
 * checks split their elements into contiguous ranges, one per thread, so a 1 GiB result is
 * checked in seconds. Each range's work is independent; results are merged in range order.
 */
#include "check/check.h"
#include "core/err.h"
#include "core/param.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* below this many elements per thread, starting threads costs more than it saves */
#define MIN_ELEMS_PER_THREAD ((size_t)1 << 18)

static_assert(PARAM_MAX_CHECK_THREADS == MAX_CHECK_THREADS,
              "params.def's range of MSCCLRT_CHECK_THREADS must end at MAX_CHECK_THREADS");

mscclrt_result check_threads(size_t elems, int *nt) {
    *nt = 1;
    long long want;
    TRY(param_int(PARAM_CHECK_THREADS, &want));
    long n = (long)want;
    if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n > MAX_CHECK_THREADS) n = MAX_CHECK_THREADS;
    size_t by_work = elems / MIN_ELEMS_PER_THREAD;
    if ((size_t)n > by_work) n = (long)by_work;
    *nt = n < 1 ? 1 : (int)n;
    return MSCCLRT_SUCCESS;
}

typedef struct {
    void (*job)(void *arg, int i);
    void *arg;
    int i;
} ThreadJob;

static void *thread_main(void *p) {
    ThreadJob *t = p;
    t->job(t->arg, t->i);
    return NULL;
}

void check_run_threads(int n, void (*job)(void *arg, int i), void *arg) {
    ThreadJob *jobs = n > 1 ? calloc((size_t)n, sizeof *jobs) : NULL;
    pthread_t *tids = n > 1 ? calloc((size_t)n, sizeof *tids) : NULL;
    bool *started = n > 1 ? calloc((size_t)n, sizeof *started) : NULL;
    if (!jobs || !tids || !started) { /* one thread, or no memory for more: run them in turn */
        free(jobs);
        free(tids);
        free(started);
        for (int i = 0; i < n; i++) job(arg, i);
        return;
    }
    for (int i = 1; i < n; i++) {
        jobs[i] = (ThreadJob){job, arg, i};
        started[i] = pthread_create(&tids[i], NULL, thread_main, &jobs[i]) == 0;
    }
    job(arg, 0);
    for (int i = 1; i < n; i++) {
        if (started[i]) pthread_join(tids[i], NULL);
        else job(arg, i);                /* a thread that did not start: its range runs here */
    }
    free(jobs);
    free(tids);
    free(started);
}

/*
 * clock.h - the one monotonic clock of the runtime, in seconds (timeouts, deadlines and the
 * timings it logs). Header-only: static inline.
 */
#ifndef MSCCLRT_CLOCK_H
#define MSCCLRT_CLOCK_H

#include <time.h>

static inline double rt_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif

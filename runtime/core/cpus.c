/*
 * cpus.c - MSCCLRT_PROGRESS_CPUS: the CPUs of the library's progress threads. By default they
 * inherit the affinity of the thread that made the communicator, so under mpirun's binding of
 * each rank to one core (its default for two ranks) the port proxy and the socket threads share
 * that core with the application, and every hand-off between them waits for the scheduler;
 * this variable lets a user give them CPUs of their own (for instance the GPU's NUMA node).
 */
#include "core/cpus.h"
#include "core/err.h"
#include "core/param.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* a decimal CPU number at *p (advanced past it): false when there is none or it is too large */
static bool cpu_number(const char **p, long *out) {
    const char *s = *p;
    long v = 0;
    if (*s < '0' || *s > '9') return false;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s++ - '0');
        if (v >= CPU_SETSIZE) return false;
    }
    *p = s;
    *out = v;
    return true;
}

bool cpus_parse(const char *s, cpu_set_t *set, char *why, size_t why_len) {
    CPU_ZERO(set);
    if (!s || !*s) return true;
    int item = 1;
    for (const char *p = s;; item++) {
        long a, b;
        if (!cpu_number(&p, &a)) {
            snprintf(why, why_len, "item %d: a CPU number from 0 to %d expected at '%.16s'", item,
                     CPU_SETSIZE - 1, p);
            goto bad;
        }
        b = a;
        if (*p == '-') {
            p++;
            if (!cpu_number(&p, &b)) {
                snprintf(why, why_len, "item %d: a CPU number from 0 to %d expected after '-' at "
                         "'%.16s'", item, CPU_SETSIZE - 1, p);
                goto bad;
            }
            if (b < a) {
                snprintf(why, why_len, "item %d: the range %ld-%ld goes backwards", item, a, b);
                goto bad;
            }
        }
        for (long c = a; c <= b; c++) CPU_SET((int)c, set);
        if (!*p) return true;
        if (*p != ',') {
            snprintf(why, why_len, "item %d: ',' or the end expected at '%.16s'", item, p);
            goto bad;
        }
        p++;
    }
bad:
    CPU_ZERO(set);
    return false;
}

mscclrt_result cpus_place_progress(pthread_t t, const char *who) {
    const char *s = param_str(PARAM_PROGRESS_CPUS);
    if (!*s) return MSCCLRT_SUCCESS;
    cpu_set_t set;
    char why[128];
    if (!cpus_parse(s, &set, why, sizeof why))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "MSCCLRT_PROGRESS_CPUS='%s': %s", s, why);
    const int e = pthread_setaffinity_np(t, sizeof set, &set);
    if (e != 0)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "MSCCLRT_PROGRESS_CPUS='%s': the %s cannot run "
                       "there: %s (CPUs offline or outside this process's cpuset?)", s, who,
                       strerror(e));
    return MSCCLRT_SUCCESS;
}

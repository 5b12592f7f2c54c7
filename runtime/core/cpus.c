/*
 * cpus.c - MSCCLRT_PROGRESS_CPUS: the CPUs of the library's progress threads. Left alone they
 * would inherit the affinity of the thread that made the communicator, so under mpirun's binding of
 * each rank to one core (its default for two ranks) the port proxy and the socket threads share
 * that core with the application, and every hand-off between them waits for the scheduler;
 * this variable gives them CPUs of their own: a list, or "numa" (the default), the CPUs local to
 * the rank's GPU (as MSCCL++ places its proxy thread), and MSCCLRT_PROGRESS_THREADS picks which
 * threads move: by default all of them. The socket threads copy every byte between nodes
 * (across two nodes over loopback TCP all_reduce, reduce_scatter, all_gather and send/recv of
 * 4-16 MiB ran 1.3-1.9 times faster off the bound core, c55); the proxy hands every small
 * message to them, and on the application's core it cost gather 1 KiB 30 us against 23 and
 * alltoall 4 KiB 26-29 against 21-24 (c87, 2 x H200, 2 nodes of one GPU).
 */
#include "core/cpus.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"

#include <errno.h>
#include <stdatomic.h>
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

bool cpus_local_to(const char *pci, cpu_set_t *set) {
    CPU_ZERO(set);
    const char *root = param_str(PARAM_SYSFS_ROOT);
    char path[512], text[4096], why[128];
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s/local_cpulist", *root ? root : "/sys", pci);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    const size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    text[strcspn(text, "\n")] = 0;
    return cpus_parse(text, set, why, sizeof why) && CPU_COUNT(set) > 0;
}

/* whether MSCCLRT_PROGRESS_THREADS (all, socket or proxy) names threads of `kind` */
static mscclrt_result moves_kind(CpusThread kind, bool *yes) {
    const char *w = param_str(PARAM_PROGRESS_THREADS);
    if (!strcmp(w, "all")) *yes = true;
    else if (!strcmp(w, "socket")) *yes = kind == CPUS_SOCKET;
    else if (!strcmp(w, "proxy")) *yes = kind == CPUS_PROXY;
    else
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "MSCCLRT_PROGRESS_THREADS='%s': all, socket or "
                       "proxy expected", w);
    return MSCCLRT_SUCCESS;
}

/* MSCCLRT_PROGRESS_CPUS=numa could not place a thread: it keeps its affinity, said once per
 * process (every socket has two threads) */
static void numa_stays(const char *who, const char *why) {
    static atomic_bool said;
    if (!atomic_exchange(&said, true))
        LOG_INFO(LOG_SUB_INIT, "MSCCLRT_PROGRESS_CPUS=numa: %s; the %s and the like keep their "
                 "affinity", why, who);
}

mscclrt_result cpus_progress_for(CpusThread kind, const char *gpu_pci, const char *who,
                                 CpusPlace *pl) {
    pl->move = pl->numa = false;
    CPU_ZERO(&pl->set);
    const char *s = param_str(PARAM_PROGRESS_CPUS);
    if (!*s) return MSCCLRT_SUCCESS;
    bool kind_moves = false;
    TRY(moves_kind(kind, &kind_moves));
    if (!kind_moves) return MSCCLRT_SUCCESS;
    char why[128];
    pl->numa = !strcmp(s, "numa");
    if (pl->numa) {
        if (!gpu_pci || !cpus_local_to(gpu_pci, &pl->set)) {
            snprintf(why, sizeof why, "the CPUs of GPU %s are unknown", gpu_pci ? gpu_pci : "(none)");
            numa_stays(who, why);
            return MSCCLRT_SUCCESS;
        }
    } else if (!cpus_parse(s, &pl->set, why, sizeof why)) {
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "MSCCLRT_PROGRESS_CPUS='%s': %s", s, why);
    }
    pl->move = true;
    return MSCCLRT_SUCCESS;
}

mscclrt_result cpus_apply(pthread_t t, const CpusPlace *pl, const char *who) {
    if (!pl->move) return MSCCLRT_SUCCESS;
    const int e = pthread_setaffinity_np(t, sizeof pl->set, &pl->set);
    if (e == 0) return MSCCLRT_SUCCESS;
    /* numa (the default) never fails a communicator: the GPU's CPUs may all lie outside the
     * process's cpuset (a container given other cores), and then the thread stays */
    if (pl->numa) {
        numa_stays(who, "the GPU's CPUs are outside this process's cpuset");
        return MSCCLRT_SUCCESS;
    }
    return rt_fail(MSCCLRT_ERR_INVALID_ARG, "MSCCLRT_PROGRESS_CPUS='%s': the %s cannot run "
                   "there: %s (CPUs offline or outside this process's cpuset?)",
                   param_str(PARAM_PROGRESS_CPUS), who, strerror(e));
}

mscclrt_result cpus_place_progress(pthread_t t, CpusThread kind, const char *who,
                                   const char *gpu_pci) {
    CpusPlace pl;
    TRY(cpus_progress_for(kind, gpu_pci, who, &pl));
    return cpus_apply(t, &pl, who);
}

/*
 * cpus.h - where the library's progress threads run (MSCCLRT_PROGRESS_CPUS): a CPU list in the
 * kernel's notation ("0-3,8,10-11"), parsed strictly, and its application to a thread the
 * library created (the port proxy, the socket transport's send and receive threads).
 */
#ifndef MSCCLRT_CPUS_H
#define MSCCLRT_CPUS_H

#include "mscclrt.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

/* Parses s into *set: comma-separated items, each a CPU number or an ascending range a-b, every
 * number below CPU_SETSIZE, nothing else (no spaces, no empty items). An empty s is an empty
 * set. False with a reason in why (naming the item) on anything else; *set is then empty. */
bool cpus_parse(const char *s, cpu_set_t *set, char *why, size_t why_len);

/* The kinds of progress thread, for MSCCLRT_PROGRESS_THREADS */
typedef enum { CPUS_PROXY, CPUS_SOCKET } CpusThread;

/* The CPUs local to PCI device `pci` ("dddd:bb:dd.f"): <root>/bus/pci/devices/<pci>/
 * local_cpulist (root "/sys", or MSCCLRT_SYSFS_ROOT). False where it cannot be read or parsed,
 * or names no CPU. */
bool cpus_local_to(const char *pci, cpu_set_t *set);

/* Where the progress threads of one kind go, resolved once for all of them */
typedef struct {
    bool move;        /* false: they keep the affinity they were created with */
    bool numa;        /* set is the GPU's CPUs: a refusal leaves a thread where it is */
    cpu_set_t set;
} CpusPlace;

/* Resolves MSCCLRT_PROGRESS_CPUS for threads of `kind` (`who` names them in the log and
 * errors): move where MSCCLRT_PROGRESS_THREADS names the kind and the variable is a CPU list,
 * or "numa" with the CPUs local to the GPU at PCI address gpu_pci known (cpus_local_to; where
 * they cannot be read, or gpu_pci is NULL, the threads stay, logged once). Empty: they stay. A
 * malformed list or MSCCLRT_PROGRESS_THREADS is MSCCLRT_ERR_INVALID_ARG naming the variable. */
mscclrt_result cpus_progress_for(CpusThread kind, const char *gpu_pci, const char *who,
                                 CpusPlace *pl);

/* Moves thread t (the library's own; `who` names it in errors) as pl says. CPUs the system
 * refuses (not online, outside the process's cgroup) are MSCCLRT_ERR_INVALID_ARG naming the
 * variable and the cause, except for numa, where the thread stays (logged once). */
mscclrt_result cpus_apply(pthread_t t, const CpusPlace *pl, const char *who);

/* cpus_progress_for and cpus_apply for one thread t of `kind` */
mscclrt_result cpus_place_progress(pthread_t t, CpusThread kind, const char *who,
                                   const char *gpu_pci);

#endif

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

/* Moves thread t (the library's own, of `kind`; `who` names it in errors) to
 * MSCCLRT_PROGRESS_CPUS where MSCCLRT_PROGRESS_THREADS names its kind: a CPU list, or "numa",
 * the CPUs local to the GPU at PCI address gpu_pci (cpus_local_to; where they cannot be read,
 * or gpu_pci is NULL, the thread stays where it is, logged). Empty: it stays where it was
 * created. A malformed list or MSCCLRT_PROGRESS_THREADS, or CPUs the system refuses (not
 * online, outside the process's cgroup), is MSCCLRT_ERR_INVALID_ARG naming the variable and the
 * cause. */
mscclrt_result cpus_place_progress(pthread_t t, CpusThread kind, const char *who,
                                   const char *gpu_pci);

/* Whether cpus_place_progress would move threads of `kind` (for the GPU at gpu_pci, NULL: none
 * known): MSCCLRT_PROGRESS_THREADS names the kind and MSCCLRT_PROGRESS_CPUS is a list, or numa
 * with the GPU's CPUs known (false also on a malformed MSCCLRT_PROGRESS_THREADS, which
 * cpus_place_progress reports). */
bool cpus_moves(CpusThread kind, const char *gpu_pci);

#endif

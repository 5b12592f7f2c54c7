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

/* Moves thread t (the library's own; `who` names it in errors) to MSCCLRT_PROGRESS_CPUS, or
 * leaves it where it was created when that is empty. A malformed list, or CPUs the system
 * refuses (not online, outside the process's cgroup), is MSCCLRT_ERR_INVALID_ARG naming the
 * variable and the cause. */
mscclrt_result cpus_place_progress(pthread_t t, const char *who);

#endif

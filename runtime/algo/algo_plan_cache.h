/*
 * algo_plan_cache.h - how the default collection (algo_default.c) gets a program's compiled
 * plan: from the process's memory, from the disk cache, or compiled now (algo_plan_cache.c).
 */
#ifndef MSCCLRT_ALGO_PLAN_CACHE_H
#define MSCCLRT_ALGO_PLAN_CACHE_H

#include "core/disk_cache.h"
#include "mscclc.h"
#include "mscclrt.h"

#include <stdbool.h>

typedef struct {
    const char *file;             /* "allreduce/allpair_packet.coll" */
    const char *text;
    const char *coll;             /* "allreduce" */
    const MscclcDefine *defs;
    int ndefs;
    const DiskCache *cache;       /* <cache root>/plans; fd -1: no disk cache */
} PlanJob;

/* The compiled plan of one program: from memory, from disk, or compiled now (then stored in
 * both). *out NULL with success: the program refuses these defines (logged). */
mscclrt_result algo_plan_for(const PlanJob *j, mscclrt_plan **out, bool *from_cache);

#endif

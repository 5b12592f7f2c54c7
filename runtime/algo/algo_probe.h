/*
 * algo_probe.h - MSCCLRT_NATIVE_PROBE: the native kernels' timestamp ring (native_abi.h, MnProbe;
 * kernels/native_probe.cuh writes it), allocated with a communicator's native context and
 * summarised when the communicator goes: per kernel kind and collective, the launches recorded
 * and the median time from the kernel's start to each numbered point.
 */
#ifndef MSCCLRT_ALGO_PROBE_H
#define MSCCLRT_ALGO_PROBE_H
#include "mscclrt.h"
#include "native_abi.h"

#include <stdbool.h>

#include <stdint.h>
#include <stdio.h>

typedef struct AlgoProbeRow {
    unsigned kind, coll;          /* MN_PROBE_KIND_*, the collective (MN_ALLREDUCE ...) */
    uint64_t launches;            /* records of this kind and collective in the ring */
    int64_t at[MN_PROBE_POINTS];  /* median ns from the start to point k; -1: never reached
                                     (at[0], at[1]: 0) */
} AlgoProbeRow;

/* Whether the native modules carry the probe (MSCCLRT_NATIVE_PROBE=1); malformed: an error. */
mscclrt_result algo_probe_enabled(bool *on);
/* A zeroed MnProbe ring in device memory (the comm's CUDA context is current). */
mscclrt_result algo_probe_alloc(uint64_t *dev);
/* Per (kind, collective), in order of first appearance, at most max rows: the count. Only the
 * ring itself is read, so a host copy serves (unit tests build one). */
int algo_probe_summarize(const MnProbe *p, AlgoProbeRow *rows, int max);
/* The rows as text lines "mscclrt probe: rank R: <kind> <coll>: N launches, point k +x.xx us ..." */
void algo_probe_print(FILE *f, int rank, const AlgoProbeRow *rows, int n);
/* Copies the ring back, prints its summary to stderr, frees it (the device is idle). */
void algo_probe_report(int rank, uint64_t dev);

#endif

/*
 * fuzz_run_cpu.c - the second half of the plan fuzzer built as fuzz_plan_cpu (fuzz_plan.c with
 * -DFUZZ_RUN_CPU): every plan the loader accepts is run once on the CPU backend through the
 * public API (mscclrt_plan_parse, mscclrt_cpu_execute). A plan that loads must run or fail
 * cleanly, with a message; a crash, a sanitizer report or a hang (the harness's -timeout, or
 * the backend's own MSCCLRT_CPU_TIMEOUT_MS, set low here) is a bug. Runs are kept small: at
 * most FUZZ_RUN_MAX_RANKS ranks and FUZZ_RUN_MAX_BYTES per buffer, else the plan is skipped.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mscclrt.h"
#include "fuzz_driver.h"

void fuzz_run_cpu(const uint8_t *data, size_t size);

#define FUZZ_RUN_MAX_RANKS 8
#define FUZZ_RUN_MAX_BYTES ((size_t)256 << 10)

static mscclrt_cpu_comm *comms[FUZZ_RUN_MAX_RANKS + 1];   /* one per rank count, kept */
static unsigned long runs_ok, runs_failed, runs_skipped;

static void fuzz_run_cpu_report(void) {
    printf("fuzz_plan_cpu: %lu plans ran, %lu failed cleanly, %lu skipped (more than %d ranks or "
           "%zu bytes)\n", runs_ok, runs_failed, runs_skipped, FUZZ_RUN_MAX_RANKS, FUZZ_RUN_MAX_BYTES);
}

/* At exit (libFuzzer's too): the figures, then the communicators. */
static void at_exit(void) {
    fuzz_run_cpu_report();
    for (int n = 0; n <= FUZZ_RUN_MAX_RANKS; n++) {
        mscclrt_cpu_comm_destroy(comms[n]);
        comms[n] = NULL;
    }
}

/* A failed call must say why. */
static void failed(mscclrt_result r, const char *call) {
    const char *m = mscclrt_last_error();
    if (!m || !*m) fuzz_die(call, "failed without a message");
    (void)r;
}


void fuzz_run_cpu(const uint8_t *data, size_t size) {
    static int init;
    if (!init) {
        init = 1;
        setenv("MSCCLRT_CPU_TIMEOUT_MS", "300", 0);   /* a deadlocked plan fails fast */
        setenv("MSCCLRT_DEBUG", "NONE", 0);
        atexit(at_exit);
    }
    mscclrt_plan *plan = NULL;
    mscclrt_result r = mscclrt_plan_parse(&plan, (const char *)data, size, "fuzz");
    if (r != MSCCLRT_SUCCESS) {   /* plan_parse accepted it: the public loader must agree */
        fuzz_die("mscclrt_plan_parse refused a plan plan_parse accepted", mscclrt_last_error());
        return;
    }
    mscclrt_plan_info info;
    size_t bytes = 0, in = 0, out = 0;
    if (mscclrt_plan_get_info(plan, &info) != MSCCLRT_SUCCESS) fuzz_die("mscclrt_plan_get_info failed", NULL);
    if (info.nranks < 1 || info.nranks > FUZZ_RUN_MAX_RANKS) {
        runs_skipped++;
        mscclrt_plan_free(plan);
        return;
    }
    r = mscclrt_plan_min_bytes(plan, &bytes);
    if (r == MSCCLRT_SUCCESS) {
        size_t k = 1 + (size >> 2) % 4;   /* 1 to 4 times the smallest legal size */
        if (bytes <= FUZZ_RUN_MAX_BYTES / k &&
            mscclrt_plan_call_sizes(plan, bytes * k, &in, &out) == MSCCLRT_SUCCESS)
            bytes *= k;
        r = mscclrt_plan_call_sizes(plan, bytes, &in, &out);
        if (r != MSCCLRT_SUCCESS) failed(r, "mscclrt_plan_call_sizes");
    } else {
        failed(r, "mscclrt_plan_min_bytes");
    }
    if (r != MSCCLRT_SUCCESS || in > FUZZ_RUN_MAX_BYTES || out > FUZZ_RUN_MAX_BYTES) {
        runs_skipped++;
        mscclrt_plan_free(plan);
        return;
    }
    int n = info.nranks;
    if (!comms[n] && (r = mscclrt_cpu_comm_create(&comms[n], n)) != MSCCLRT_SUCCESS) {
        failed(r, "mscclrt_cpu_comm_create");
        fuzz_die("cannot create a CPU communicator", mscclrt_last_error());
    }
    /* buffers as mscclrt-run lays them out (spec §3.7 for in-place calls) */
    unsigned char *bufs[FUZZ_RUN_MAX_RANKS], *sbufs[FUZZ_RUN_MAX_RANKS];
    void *send[FUZZ_RUN_MAX_RANKS], *recv[FUZZ_RUN_MAX_RANKS];
    bool inplace = info.inplace != 0 && (size & 2);   /* both layouts for in-place plans */
    bool ag = strcmp(info.collective, "allgather") == 0, rs = strcmp(info.collective, "reducescatter") == 0;
    for (int q = 0; q < n; q++) {
        size_t big = in > out ? in : out;
        bufs[q] = malloc((inplace ? big : out) + 1);
        sbufs[q] = inplace ? NULL : malloc(in + 1);
        if (!bufs[q] || (!inplace && !sbufs[q])) fuzz_die("out of memory", NULL);
        if (!inplace) {
            send[q] = sbufs[q];
            recv[q] = bufs[q];
        } else if (ag && (size_t)q * in + in <= big) {
            recv[q] = bufs[q];
            send[q] = bufs[q] + (size_t)q * in;
        } else if (rs && (size_t)q * out + out <= big) {
            send[q] = bufs[q];
            recv[q] = bufs[q] + (size_t)q * out;
        } else {
            send[q] = recv[q] = bufs[q];
        }
        memset(recv[q], 0xa5, out);
        for (size_t i = 0; i < in; i++) ((unsigned char *)send[q])[i] = (unsigned char)(i * 7 + (size_t)q);
    }
    static const mscclrt_dtype dts[] = {MSCCLRT_FLOAT32, MSCCLRT_FLOAT16, MSCCLRT_INT32, MSCCLRT_BFLOAT16,
                                        MSCCLRT_UINT8, MSCCLRT_FLOAT64};
    mscclrt_dtype dt = dts[(size >> 3) % (sizeof dts / sizeof dts[0])];
    mscclrt_redop op = (mscclrt_redop)((size >> 5) % MSCCLRT_REDOP_COUNT);
    mscclrt_packet pk = (size & 1) ? MSCCLRT_LL8 : MSCCLRT_LL16;
    r = mscclrt_cpu_execute(comms[n], plan, send, recv, in, out, dt, op, pk);
    if (r == MSCCLRT_SUCCESS) {
        runs_ok++;
    } else {
        failed(r, "mscclrt_cpu_execute");
        runs_failed++;
    }
    for (int q = 0; q < n; q++) {
        free(bufs[q]);
        free(sbufs[q]);
    }
    mscclrt_plan_free(plan);
}

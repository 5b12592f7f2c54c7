/*
 * gpu_probe.h - for the GPU tests that fork ranks: how many GPUs there are, asked in a child
 * process, because a parent that initialises CUDA before fork leaves its children a driver
 * they cannot use; and a rank's entry into its device.
 */
#ifndef TESTS_GPU_PROBE_H
#define TESTS_GPU_PROBE_H

#include "cuda/cuda_driver.h"
#include "mscclrt.h"

#include <sys/wait.h>
#include <unistd.h>

/* The device count, at most most (1..most), or 0 when there is no usable GPU. */
static inline int gpu_probe_count(int most) {
    fflush(stdout);
    const pid_t probe = fork();
    if (probe == 0) {
        int n = 0;
        if (cu_load() != MSCCLRT_SUCCESS) _exit(0);
        _exit(cu.cuDeviceGetCount(&n) == CU_OK && n > 0 ? (n > most ? most : n) : 0);
    }
    if (probe < 0) return 0;
    int st = 0;
    waitpid(probe, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
}

/* Makes device's primary context current in this (rank) thread and retains it; *dev gets the
 * device, for cuDevicePrimaryCtxRelease when the rank is done. */
static inline void gpu_enter(int device, CuDevice *dev) {
    CuContext ctx = NULL;
    cu.cuDeviceGet(dev, device);
    cu.cuDevicePrimaryCtxRetain(&ctx, *dev);
    cu.cuCtxSetCurrent(ctx);
}

#endif

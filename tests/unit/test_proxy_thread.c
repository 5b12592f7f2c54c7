/*
 * test_proxy_thread.c - the port proxy's thread (runtime/proxy/proxy.c) on the fake CUDA driver
 * (tests/tools/fake_cuda.c, whose device pointers are host addresses): a host thread pushes
 * triggers into the FIFO exactly as kernels do (kernels/mk_proxy.cuh), and the proxy thread
 * must take every one whether it spins or sleeps (MSCCLRT_PROXY_SPIN_US=0: it sleeps on its
 * condition variable as soon as the FIFO is empty), with and without proxy_kick; proxy_drain
 * must return once everything pushed was taken and completed, and fail with the proxy's error
 * after a bad trigger; the thread sets itself to the relaxed graph-capture mode (other threads'
 * captures must not fail its CUDA calls). Runs in a child re-executed with LD_LIBRARY_PATH leading to the fake.
 */
#include "../harness.h"
#include "core/err.h"
#include "cuda/cuda_driver.h"
#include "proxy/proxy.h"
#include "fake_cuda_ctx.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- a producer with the kernel's protocol, on the descriptor the proxy made ---------------- */
static uint64_t push(const MkFifo *f, uint64_t dst, uint64_t src, uint64_t bytes, uint32_t kind) {
    _Atomic uint64_t *head = (_Atomic uint64_t *)(uintptr_t)f->head;
    const uint64_t slot = atomic_fetch_add(head, 1);
    while (__atomic_load_n((uint64_t *)(uintptr_t)f->tail_host, __ATOMIC_ACQUIRE) +
           MK_FIFO_SLOTS <= slot)
        sched_yield();
    volatile MkTrigger *e = (MkTrigger *)(uintptr_t)f->ring + (slot & (MK_FIFO_SLOTS - 1));
    e->dst = dst;
    e->src = src;
    e->bytes = bytes;
    e->kind = kind;
    __atomic_store_n(&e->seq, (uint32_t)(slot + 1), __ATOMIC_RELEASE);
    return slot;
}

/* Waits (bounded) until the 8 bytes at p reach v. */
static bool wait_u64(const uint64_t *p, uint64_t v, double secs) {
    double t0 = now_s();
    while (__atomic_load_n(p, __ATOMIC_ACQUIRE) < v)
        if (now_s() - t0 > secs) return false;
    return true;
}

static int child(void) {
    CuContext ctx = NULL;
    if (fake_cuda_context(&ctx)) return 1;
    Proxy *p = NULL;
    CHECK_OK(proxy_create(&p, ctx, 0));
    if (!p) return 1;
    const MkFifo *f = (const MkFifo *)(uintptr_t)proxy_fifo_addr(p);
    static uint64_t counter[2];
    static char src[4096], dst[4096];
    const uint64_t ctrs[2] = {(uint64_t)(uintptr_t)&counter[0], (uint64_t)(uintptr_t)&counter[1]};
    CHECK_OK(proxy_register(p, ctrs, 2));

    /* 0. the thread runs beside users' graph captures: it chose the relaxed capture mode
     *    (cu_capture_relaxed) before taking any trigger */
    long (*relaxed)(void) = NULL;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib) *(void **)&relaxed = dlsym(lib, "fake_cuda_relaxed_threads");
    CHECK(relaxed != NULL);
    if (relaxed) {
        const double t0 = now_s();
        while (relaxed() < 1 && now_s() - t0 < 5) sched_yield();
        CHECK(relaxed() >= 1);
    }

    /* 1. single triggers after idle gaps: the thread has gone to sleep before most of them (spin
     *    0), half are announced with proxy_kick as a launch would be; none may be lost */
    enum { ROUNDS = 400 };
    const int rounds = ROUNDS;
    static double waits[2][ROUNDS];   /* [kicked][k]: each pair's wait, for the log */
    int nw[2] = {0, 0};
    for (int i = 1; i <= rounds; i++) {
        usleep((useconds_t)(i % 7) * 30);
        memset(src, i & 0xff, 64);
        if (i % 2) proxy_kick(p);
        double t0 = now_s();
        push(f, (uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, 64, MK_TRIG_PUT);
        push(f, ctrs[0], 0, 0, MK_TRIG_SIGNAL);
        bool ok = wait_u64(&counter[0], (uint64_t)i, 5);
        CHECK(ok);
        if (!ok) break;
        waits[i % 2][nw[i % 2]++] = now_s() - t0;
        CHECK_EQ_INT(i & 0xff, (unsigned char)dst[63]);   /* the put came before its signal */
    }
    for (int k = 0; k < 2; k++) {   /* medians (insertion sort: 200 values) */
        for (int a = 1; a < nw[k]; a++)
            for (int b = a; b > 0 && waits[k][b - 1] > waits[k][b]; b--) {
                double x = waits[k][b];
                waits[k][b] = waits[k][b - 1];
                waits[k][b - 1] = x;
            }
        if (nw[k])
            fprintf(stderr, "%d put+signal pairs after idle gaps%s: median wait %.0f us, worst "
                    "%.0f us\n", nw[k], k ? ", kicked first" : "", waits[k][nw[k] / 2] * 1e6,
                    waits[k][nw[k] - 1] * 1e6);
    }

    /* 2. a burst that wraps the ring, then a flush mark and a drain */
    for (int i = 0; i < 3 * (int)MK_FIFO_SLOTS; i++) push(f, ctrs[1], 0, 0, MK_TRIG_SIGNAL);
    const uint64_t mark = push(f, 0, 0, 0, MK_TRIG_FLUSH) + 1;
    CHECK_OK(proxy_drain(p, 5));
    CHECK_EQ_INT(3 * MK_FIFO_SLOTS, counter[1]);
    CHECK_EQ_INT(mark, *(const uint64_t *)(uintptr_t)f->flushed);
    CHECK_OK(proxy_check(p));

    /* 3. a signal to an unregistered counter stops the proxy: drain and check report it */
    static uint64_t stray;
    push(f, (uint64_t)(uintptr_t)&stray, 0, 0, MK_TRIG_SIGNAL);
    mscclrt_result r = proxy_drain(p, 5);
    CHECK(r != MSCCLRT_SUCCESS);
    CHECK(strstr(mscclrt_last_error(), "no context of this rank registered") != NULL);
    CHECK(proxy_check(p) != MSCCLRT_SUCCESS);
    proxy_unregister(p, ctrs, 2);
    proxy_destroy(p);
    cu.cuDevicePrimaryCtxRelease(0);   /* fake_cuda_context retained device 0's */
    return h_failed ? 1 : 0;
}

int main(int argc, char **argv) {
    FAKE_CUDA_CHILD_ENTRY(argc, argv, child);
    if (!fake_cuda_setup("proxy thread")) return harness_report();
    setenv("MSCCLRT_PROXY_SPIN_US", "0", 1);   /* sleep whenever idle: the case to prove */
    const bool ok = fake_cuda_child(argv[0], -1);
    TEST("proxy thread: relaxed capture mode, triggers after idle gaps, kicks, a wrapping burst, "
         "drain, a failure",
         CHECK(ok));
    return harness_report();
}

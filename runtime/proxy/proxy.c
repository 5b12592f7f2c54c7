/*
 * proxy.c - one communicator's port-channel proxy over CUDA: the FIFO ring in host-mapped pinned
 * memory (kernels write it across PCIe, the thread reads it in place), the MkFifo descriptor and
 * counters in device memory, a non-blocking stream on which every trigger becomes a copy-engine
 * cuMemcpyAsync or a cuStreamWriteValue64 (signals and flush marks, ordered after the copies
 * before them), and the thread that polls: busy while work flows and MSCCLRT_PROXY_SPIN_US
 * after (yielding the core on every idle poll), then every 50 us on a condition variable that
 * proxy_kick (a launch that will push triggers) cuts short. The producers are kernels, which
 * cannot wake a host thread, so some polling stays; the kick takes it off the path of a launch
 * after a long idle.
 * Triggers to window addresses (ranks on other nodes) are routed to the network transport.
 */
#include "proxy/proxy.h"
#include "core/clock.h"
#include "core/cpus.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "cuda/cuda_driver.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Device block: the descriptor, then the three device-side counters. */
typedef struct {
    MkFifo desc;
    uint64_t head, tail_cache, flushed;
} DevBlock;

/* Host-mapped block: the ring, then the published tail. */
typedef struct {
    MkTrigger ring[MK_FIFO_SLOTS];
    uint64_t tail;
} HostBlock;

struct Proxy {
    ProxyFifo fifo;
    ProxyOps ops;
    CuContext ctx;
    CuStream stream;
    HostBlock *host;               /* cuMemHostAlloc'd */
    CuDevPtr dev;                  /* DevBlock */
    Net *net;                      /* borrowed: the comm's network transport, once routed */
    int rank;
    double spin_us;                /* MSCCLRT_PROXY_SPIN_US, read by proxy_create */
    pthread_t thread;
    bool running;
    _Atomic int stop;
    /* idle waits: the thread sleeps on cv (at most 50 us) until kicked; proxy_drain sleeps on
     * it until the thread took more triggers (the thread broadcasts while drainers > 0) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic int kicked;            /* work is coming: spin again (set by proxy_kick) */
    _Atomic int sleeping;          /* the thread is in (or entering) its timed wait */
    _Atomic int drainers;          /* threads in proxy_drain */
};

static int ops_copy(void *ctx, uint64_t dst, uint64_t src, uint64_t bytes, char *err, size_t n) {
    Proxy *p = ctx;
    CuResult r = cu.cuMemcpyAsync((CuDevPtr)dst, (CuDevPtr)src, (size_t)bytes, p->stream);
    if (r == CU_OK) return 0;
    const char *name = "?";
    cu.cuGetErrorName(r, &name);
    snprintf(err, n, "cuMemcpyAsync(0x%llx <- 0x%llx, %llu bytes) failed: %s",
             (unsigned long long)dst, (unsigned long long)src, (unsigned long long)bytes, name);
    return -1;
}

static int ops_write(void *ctx, uint64_t addr, uint64_t value, char *err, size_t n) {
    Proxy *p = ctx;
    CuResult r = cu.cuStreamWriteValue64(p->stream, (CuDevPtr)addr, value, 0);
    if (r == CU_OK) return 0;
    const char *name = "?";
    cu.cuGetErrorName(r, &name);
    snprintf(err, n, "cuStreamWriteValue64(0x%llx, %llu) failed: %s", (unsigned long long)addr,
             (unsigned long long)value, name);
    return -1;
}

/* ---- the network route: ProxyOps over a Net (errors carry net's message) ---------------- */
static int net_result(mscclrt_result r, char *err, size_t n) {
    if (r == MSCCLRT_SUCCESS) return 0;
    snprintf(err, n, "%s", mscclrt_last_error());
    return -1;
}

static int net_ops_copy(void *ctx, uint64_t dst, uint64_t src, uint64_t bytes, char *err,
                        size_t n) {
    return net_result(net_put(ctx, dst, src, bytes), err, n);
}

static int net_ops_write(void *ctx, uint64_t addr, uint64_t value, char *err, size_t n) {
    return net_result(net_signal(ctx, addr, value), err, n);
}

static int net_ops_copy_signal(void *ctx, uint64_t dst, uint64_t src, uint64_t bytes,
                               uint64_t addr, uint64_t value, char *err, size_t n) {
    return net_result(net_put_signal(ctx, dst, src, bytes, addr, value), err, n);
}

/* A plan's flush: the kernel may end and its caller reuse the put sources once they have been
 * read; the peers see the data before any signal that follows it, so no round trip to them */
static int net_ops_flush(void *ctx, char *err, size_t n) {
    return net_result(net_flush_sources(ctx), err, n);
}

mscclrt_result proxy_route_net(Proxy *p, Net *n) {
    if (p->net == n) return MSCCLRT_SUCCESS;
    if (p->net)
        return rt_fail(MSCCLRT_ERR_INTERNAL, "rank %d: port proxy already routes to another "
                       "network transport", p->rank);
    ProxyOps ops = {.ctx = n, .copy = net_ops_copy, .write = net_ops_write,
                    .flush = net_ops_flush, .copy_signal = net_ops_copy_signal,
                    .pair_max = net_put_signal_max(n)};
    /* every window address: the tag byte, any index and offset */
    TRY(proxy_fifo_route(&p->fifo, NET_WIN_TAG, NET_WIN_TAG + (1ull << 56), &ops));
    p->net = n;
    LOG_INFO(LOG_SUB_PROXY, "rank %d: port channels to other nodes go through the %s "
             "transport", p->rank, net_backend_name(n));
    return MSCCLRT_SUCCESS;
}

/* A monotonic deadline us microseconds from now (the condition variable uses CLOCK_MONOTONIC). */
static struct timespec mono_in(long us) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += us * 1000;
    while (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
    return ts;
}

/* On a launch's path: an atomic store, and the lock only when the thread sleeps. The store of
 * kicked before the load of sleeping, against the thread's store of sleeping before its load
 * of kicked (all sequentially consistent), means one side sees the other: a kick is never lost
 * for longer than one 50 us wait. */
void proxy_kick(Proxy *p) {
    if (!p) return;
    atomic_store(&p->kicked, 1);
    if (!atomic_load(&p->sleeping)) return;
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void *proxy_main(void *arg) {
    Proxy *p = arg;
    cu_capture_relaxed();   /* its copies and queries run beside users' graph captures */
    if (cu.cuCtxSetCurrent(p->ctx) != CU_OK) {
        snprintf(p->fifo.err, sizeof p->fifo.err, "port proxy of rank %d: cannot make the "
                 "device's context current", p->rank);
        atomic_store(&p->fifo.failed, 1);
        return NULL;
    }
    const double spin = p->spin_us;
    double idle_since = rt_now_s() * 1e6;
    while (!atomic_load_explicit(&p->stop, memory_order_acquire)) {
        int n = proxy_fifo_poll(&p->fifo, &p->ops, 64);
        if (n < 0) {
            LOG_WARN("rank %d: %s", p->rank, p->fifo.err);
            break;
        }
        if (n > 0) {
            idle_since = -1;
            if (atomic_load_explicit(&p->drainers, memory_order_acquire)) {
                pthread_mutex_lock(&p->mu);
                pthread_cond_broadcast(&p->cv);
                pthread_mutex_unlock(&p->mu);
            }
            continue;
        }
        double t = rt_now_s() * 1e6;
        if (atomic_exchange(&p->kicked, 0)) {   /* a launch is coming: spin for it afresh */
            idle_since = t;
        } else if (idle_since < 0) {
            idle_since = t;
        } else if (t - idle_since <= spin) {
            /* busy, but the core goes to any thread that wants it: mpirun binds each rank to
             * one core by default (np <= 2), so this thread shares it with the network's
             * receive threads and the application's own waiting, and a woken receive thread
             * would otherwise wait for the scheduler's tick */
            sched_yield();
        } else {
            pthread_mutex_lock(&p->mu);
            atomic_store(&p->sleeping, 1);
            if (!atomic_load(&p->kicked)) {
                struct timespec dl = mono_in(50);
                pthread_cond_timedwait(&p->cv, &p->mu, &dl);
            }
            atomic_store(&p->sleeping, 0);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

mscclrt_result proxy_create(Proxy **out, void *ctx, int rank) {
    *out = NULL;
    long long spin_us;   /* read here: the thread cannot report a bad value */
    TRY(param_int(PARAM_PROXY_SPIN_US, &spin_us));
    Proxy *p = calloc(1, sizeof *p);
    if (!p) return rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory for the port proxy", rank);
    p->spin_us = (double)spin_us;
    p->ctx = (CuContext)ctx;
    p->rank = rank;
    atomic_init(&p->stop, 0);
    atomic_init(&p->drainers, 0);
    atomic_init(&p->kicked, 0);
    atomic_init(&p->sleeping, 0);
    pthread_mutex_init(&p->mu, NULL);
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&p->cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    mscclrt_result res;
    void *h = NULL;
    TRY_GOTO(cu_check(cu.cuMemHostAlloc(&h, sizeof(HostBlock), CU_HOSTALLOC_PORTABLE |
                                        CU_HOSTALLOC_DEVICEMAP), "cuMemHostAlloc(proxy FIFO)"),
             res, fail);
    p->host = h;
    memset(p->host, 0, sizeof *p->host);
    CuDevPtr ring_d = 0;
    TRY_GOTO(cu_check(cu.cuMemHostGetDevicePointer(&ring_d, p->host, 0),
                      "cuMemHostGetDevicePointer(proxy FIFO)"), res, fail);
    TRY_GOTO(cu_check(cu.cuMemAlloc(&p->dev, sizeof(DevBlock)), "cuMemAlloc(proxy FIFO)"), res,
             fail);
    DevBlock d;
    memset(&d, 0, sizeof d);
    d.desc.ring = ring_d;
    d.desc.tail_host = ring_d + offsetof(HostBlock, tail);
    d.desc.head = p->dev + offsetof(DevBlock, head);
    d.desc.tail_cache = p->dev + offsetof(DevBlock, tail_cache);
    d.desc.flushed = p->dev + offsetof(DevBlock, flushed);
    TRY_GOTO(cu_check(cu.cuMemcpyHtoD(p->dev, &d, sizeof d), "cuMemcpyHtoD(proxy FIFO)"), res,
             fail);
    /* non-blocking: the copies must never wait for the legacy stream a kernel may occupy */
    TRY_GOTO(cu_check(cu.cuStreamCreate(&p->stream, CU_STREAM_FLAG_NON_BLOCKING),
                      "cuStreamCreate(proxy)"), res, fail);
    proxy_fifo_init(&p->fifo, p->host->ring, &p->host->tail, d.desc.flushed);
    p->ops = (ProxyOps){.ctx = p, .copy = ops_copy, .write = ops_write};
    int rc = pthread_create(&p->thread, NULL, proxy_main, p);
    if (rc != 0) {
        proxy_fifo_fini(&p->fifo);
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: cannot start the port proxy thread: %s",
                      rank, strerror(rc));
        goto fail;
    }
    p->running = true;
    {   /* the current context's GPU, for MSCCLRT_PROGRESS_CPUS=numa */
        CuDevice dev;
        char pci[32];
        const bool known = cu.cuCtxGetDevice(&dev) == CU_OK && cu_device_pci(dev, pci, sizeof pci);
        res = cpus_place_progress(p->thread, CPUS_PROXY, "port proxy thread", known ? pci : NULL);
    }
    if (res != MSCCLRT_SUCCESS) {
        proxy_destroy(p);
        return res;
    }
    LOG_INFO(LOG_SUB_PROXY, "rank %d: port proxy started (%u-slot FIFO)", rank, MK_FIFO_SLOTS);
    *out = p;
    return MSCCLRT_SUCCESS;
fail:
    if (p->stream) cu.cuStreamDestroy(p->stream);
    if (p->dev) cu.cuMemFree(p->dev);
    if (p->host) cu.cuMemFreeHost(p->host);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return res;
}

uint64_t proxy_fifo_addr(const Proxy *p) { return p->dev + offsetof(DevBlock, desc); }

mscclrt_result proxy_register(Proxy *p, const uint64_t *counters, int n) {
    proxy_kick(p);   /* a new context: its first launch follows */
    return proxy_fifo_register(&p->fifo, counters, n);
}

void proxy_unregister(Proxy *p, const uint64_t *counters, int n) {
    proxy_fifo_unregister(&p->fifo, counters, n);
}

mscclrt_result proxy_check(Proxy *p) {
    if (!atomic_load_explicit(&p->fifo.failed, memory_order_acquire)) return MSCCLRT_SUCCESS;
    return rt_fail(MSCCLRT_ERR_CUDA, "rank %d: %s", p->rank, p->fifo.err);
}

mscclrt_result proxy_drain(Proxy *p, double secs) {
    uint64_t head = 0;
    TRY(cu_check(cu.cuMemcpyDtoH(&head, p->dev + offsetof(DevBlock, head), sizeof head),
                 "cuMemcpyDtoH(proxy FIFO head)"));
    double t0 = rt_now_s();
    mscclrt_result res = MSCCLRT_SUCCESS;
    atomic_fetch_add(&p->drainers, 1);
    proxy_kick(p);
    pthread_mutex_lock(&p->mu);
    while (atomic_load_explicit(&p->fifo.taken, memory_order_acquire) < head) {
        if (atomic_load_explicit(&p->fifo.failed, memory_order_acquire)) break;
        if (rt_now_s() - t0 > secs) {
            res = rt_fail(MSCCLRT_ERR_TIMEOUT, "rank %d: the port proxy took %llu of %llu "
                          "triggers within %.0f s", p->rank,
                          (unsigned long long)atomic_load(&p->fifo.taken),
                          (unsigned long long)head, secs);
            break;
        }
        /* the thread broadcasts after each batch it takes; the bound covers a thread that
         * failed or stopped */
        struct timespec dl = mono_in(1000);
        pthread_cond_timedwait(&p->cv, &p->mu, &dl);
    }
    pthread_mutex_unlock(&p->mu);
    atomic_fetch_sub(&p->drainers, 1);
    TRY(res);
    TRY(proxy_check(p));
    /* every trigger is taken, so the proxy thread issues nothing more: the network's own
     * completion can be awaited from here */
    if (p->net) TRY(net_flush(p->net));
    return cu_check(cu.cuStreamSynchronize(p->stream), "cuStreamSynchronize(proxy)");
}

void proxy_destroy(Proxy *p) {
    if (!p) return;
    if (proxy_drain(p, 10) != MSCCLRT_SUCCESS)
        LOG_WARN("rank %d: port proxy stopped with work outstanding: %s", p->rank,
                 mscclrt_last_error());
    atomic_store_explicit(&p->stop, 1, memory_order_release);
    if (p->running) pthread_join(p->thread, NULL);
    proxy_fifo_fini(&p->fifo);
    cu.cuStreamDestroy(p->stream);
    cu.cuMemFree(p->dev);
    cu.cuMemFreeHost(p->host);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/*
 * proxy.h - the host side of port channels. A rank's kernels push triggers (plan_abi.h
 * MkTrigger) into a FIFO in host-mapped memory; one proxy thread per communicator takes them in
 * slot order and performs them with the copy engine on its own stream. Two layers:
 *   ProxyFifo (proxy_fifo.c): the consumer protocol and the per-channel signal counts, over a
 *     ProxyOps table; no CUDA, so the protocol is unit-tested on any machine;
 *   Proxy (proxy.c): the CUDA side: memory, the stream, the thread, registration of contexts.
 * Routing: a trigger goes to the ProxyOps of the first route whose address range holds its
 * destination, else to the default ops. Port channels to ranks on other nodes have window
 * addresses (net/net.h) as destinations; their route is the network transport's, added by
 * proxy_route_net, so same-node triggers keep using the copy engine unchanged.
 */
#ifndef MSCCLRT_PROXY_H
#define MSCCLRT_PROXY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "mscclrt.h"
#include "net/net.h"
#include "plan_abi.h"

/* ==== the consumer protocol (proxy_fifo.c) ==================================================== */
/* What a trigger does. Each returns 0 or writes a message into err (size errlen) and returns -1.
 * Operations of one FIFO must take effect in the order they are issued. */
typedef struct ProxyOps {
    void *ctx;
    int (*copy)(void *ctx, uint64_t dst, uint64_t src, uint64_t bytes, char *err, size_t errlen);
    /* writes value into the 8 bytes at addr once everything issued before has completed */
    int (*write)(void *ctx, uint64_t addr, uint64_t value, char *err, size_t errlen);
    /* routes only (may be NULL): returns once everything issued through these ops has landed.
     * A flush trigger runs every route's flush before the default ops write the flush mark,
     * because a route's completion is not ordered with the default ops' stream. */
    int (*flush)(void *ctx, char *err, size_t errlen);
    /* optional: copy, then write value into addr, as one operation (the network route hands
     * the pair to its transport at once: net_put_signal). The FIFO uses it for a put of at most
     * pair_max bytes whose next trigger is a signal on the same route, posted already or within
     * PROXY_PAIR_WAIT_US (a kernel posts a put's signal right after it, one system fence
     * later); pair_max 0: never. */
    int (*copy_signal)(void *ctx, uint64_t dst, uint64_t src, uint64_t bytes, uint64_t addr,
                       uint64_t value, char *err, size_t errlen);
    uint64_t pair_max;
} ProxyOps;
#define PROXY_PAIR_WAIT_US 2

/* Ordering across routes: a signal is ordered after the puts issued before it on the same
 * route (a peer is reached through one route only, so a channel's data and its signal share
 * it); a flush covers every route. */
#define PROXY_MAX_ROUTES 4
typedef struct ProxyRoute { uint64_t lo, hi; ProxyOps ops; } ProxyRoute;

typedef struct ProxyCount { uint64_t addr, sent; } ProxyCount;

typedef struct ProxyFifo {
    MkTrigger *ring;               /* MK_FIFO_SLOTS entries, written by the producer */
    volatile uint64_t *tail_pub;   /* where the taken count is published for producers */
    uint64_t flushed_addr;         /* the address flush marks are written to (through ops) */
    _Atomic uint64_t taken;        /* triggers taken and issued to ops so far (the next slot) */
    /* signal counts per registered peer counter (open addressing; addr 0 = empty) */
    pthread_mutex_t mu;
    ProxyCount *counts;
    size_t ncap, nused;
    char err[512];                 /* the first failure */
    _Atomic int failed;
    ProxyRoute routes[PROXY_MAX_ROUTES];   /* [0, nroutes) valid */
    _Atomic int nroutes;
} ProxyFifo;

/* ring and tail_pub are the caller's (zeroed); flushed_addr is passed to ops->write. */
void proxy_fifo_init(ProxyFifo *f, MkTrigger *ring, volatile uint64_t *tail_pub,
                     uint64_t flushed_addr);
void proxy_fifo_fini(ProxyFifo *f);
/* Takes and performs up to max ready triggers in slot order; returns how many, or -1 once a
 * trigger failed (f->err says which slot and why; later calls return -1 at once). */
int proxy_fifo_poll(ProxyFifo *f, const ProxyOps *ops, int max);
/* A context's port channels: the peers' inbound counters its kernels signal (0 entries are
 * skipped). Counts start at 0, as the counters do in a fresh context. */
mscclrt_result proxy_fifo_register(ProxyFifo *f, const uint64_t *counters, int n);
void proxy_fifo_unregister(ProxyFifo *f, const uint64_t *counters, int n);
/* Sends triggers whose destination lies in [lo, hi) to ops (copied). May run while the consumer
 * polls (the entry is published before the count). MSCCLRT_ERR_INTERNAL when the table is full. */
mscclrt_result proxy_fifo_route(ProxyFifo *f, uint64_t lo, uint64_t hi, const ProxyOps *ops);

/* ==== the CUDA proxy of one communicator (proxy.c) ========================================== */
typedef struct Proxy Proxy;

/* Allocates the FIFO (host-mapped ring, device descriptor), the stream and starts the thread.
 * ctx: the communicator's CUDA context, current in the caller. rank: for messages. */
mscclrt_result proxy_create(Proxy **out, void *ctx, int rank);
/* Drains (bounded wait), stops the thread and frees everything. NULL is a no-op. */
void proxy_destroy(Proxy *p);
/* Device address of the MkFifo descriptor (the kernel table's proxy entry). */
uint64_t proxy_fifo_addr(const Proxy *p);
/* Registers a context's channel counters (proxy_fifo_register); kicks the thread. */
mscclrt_result proxy_register(Proxy *p, const uint64_t *counters, int n);
/* Says a launch that pushes triggers is coming: an idle thread stops sleeping and spins for
 * MSCCLRT_PROXY_SPIN_US again. Cheap: an atomic store, and a lock and a broadcast only when
 * the thread sleeps (exec_launch calls it for every launch with a proxy); NULL is a no-op. */
void proxy_kick(Proxy *p);
void proxy_unregister(Proxy *p, const uint64_t *counters, int n);
/* Waits (at most secs) until every trigger reserved so far has been taken and completed. The
 * kernels that push must have finished (the caller synchronised the device). */
mscclrt_result proxy_drain(Proxy *p, double secs);
/* MSCCLRT_SUCCESS, or the proxy thread's failure (as an error with its message). */
mscclrt_result proxy_check(Proxy *p);
/* Routes triggers to window addresses through n (borrowed; must outlive the proxy's use of it):
 * puts become net_put, signals net_signal, and flushes (and proxy_drain) wait for net_flush.
 * Idempotent for the same n. */
mscclrt_result proxy_route_net(Proxy *p, Net *n);

#endif

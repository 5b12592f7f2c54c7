/*
 * proxy_fifo.c - the consumer side of the port-channel FIFO (plan_abi.h): takes triggers in slot
 * order once their sequence mark shows they are complete, performs them through ProxyOps, keeps
 * the count of signals sent on each registered peer counter, and publishes how many slots were
 * taken so producers can reuse them. A small put whose signal is posted right behind it (or
 * within PROXY_PAIR_WAIT_US), on a route with copy_signal (the network's), goes with that
 * signal as one operation. Pure C (no CUDA): tests drive it from host threads.
 */
#include "proxy/proxy.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void proxy_fifo_init(ProxyFifo *f, MkTrigger *ring, volatile uint64_t *tail_pub,
                     uint64_t flushed_addr) {
    memset(f, 0, sizeof *f);
    f->ring = ring;
    f->tail_pub = tail_pub;
    f->flushed_addr = flushed_addr;
    atomic_init(&f->taken, 0);
    atomic_init(&f->failed, 0);
    atomic_init(&f->nroutes, 0);
    pthread_mutex_init(&f->mu, NULL);
}

void proxy_fifo_fini(ProxyFifo *f) {
    pthread_mutex_destroy(&f->mu);
    free(f->counts);
    f->counts = NULL;
    f->ncap = f->nused = 0;
}

/* ---- signal counts: open addressing on the counter address ------------------------------------ */
static size_t slot_of(uint64_t addr, size_t cap) {
    uint64_t h = addr * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (cap - 1);
}

static ProxyCount *count_find(ProxyFifo *f, uint64_t addr) {
    if (!f->ncap) return NULL;
    for (size_t i = slot_of(addr, f->ncap), k = 0; k < f->ncap; i = (i + 1) & (f->ncap - 1), k++) {
        if (f->counts[i].addr == addr) return &f->counts[i];
        if (f->counts[i].addr == 0) return NULL;
    }
    return NULL;
}

static mscclrt_result count_grow(ProxyFifo *f) {
    size_t cap = f->ncap ? f->ncap * 2 : 64;
    ProxyCount *n = calloc(cap, sizeof *n);
    if (!n) return rt_fail(MSCCLRT_ERR_SYSTEM, "port proxy: out of memory for channel counts");
    for (size_t i = 0; i < f->ncap; i++) {
        if (!f->counts[i].addr) continue;
        size_t j = slot_of(f->counts[i].addr, cap);
        while (n[j].addr) j = (j + 1) & (cap - 1);
        n[j] = f->counts[i];
    }
    free(f->counts);
    f->counts = n;
    f->ncap = cap;
    return MSCCLRT_SUCCESS;
}

mscclrt_result proxy_fifo_register(ProxyFifo *f, const uint64_t *counters, int n) {
    mscclrt_result res = MSCCLRT_SUCCESS;
    pthread_mutex_lock(&f->mu);
    for (int i = 0; i < n && res == MSCCLRT_SUCCESS; i++) {
        if (!counters[i]) continue;
        ProxyCount *c = count_find(f, counters[i]);
        if (c) { /* a fresh context at an address an old one used: counters restart at 0 */
            c->sent = 0;
            continue;
        }
        if ((f->nused + 1) * 2 > f->ncap && (res = count_grow(f)) != MSCCLRT_SUCCESS) break;
        size_t j = slot_of(counters[i], f->ncap);
        while (f->counts[j].addr) j = (j + 1) & (f->ncap - 1);
        f->counts[j].addr = counters[i];
        f->counts[j].sent = 0;
        f->nused++;
    }
    pthread_mutex_unlock(&f->mu);
    return res;
}

void proxy_fifo_unregister(ProxyFifo *f, const uint64_t *counters, int n) {
    pthread_mutex_lock(&f->mu);
    for (int i = 0; i < n; i++) {
        ProxyCount *c = counters[i] ? count_find(f, counters[i]) : NULL;
        if (!c) continue;
        /* backward-shift deletion keeps every probe chain intact */
        size_t hole = (size_t)(c - f->counts), j = hole;
        for (;;) {
            j = (j + 1) & (f->ncap - 1);
            if (!f->counts[j].addr) break;
            size_t home = slot_of(f->counts[j].addr, f->ncap);
            /* move j into the hole unless its home lies cyclically in (hole, j] */
            bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
            if (stays) continue;
            f->counts[hole] = f->counts[j];
            hole = j;
        }
        f->counts[hole].addr = 0;
        f->counts[hole].sent = 0;
        f->nused--;
    }
    pthread_mutex_unlock(&f->mu);
}

mscclrt_result proxy_fifo_route(ProxyFifo *f, uint64_t lo, uint64_t hi, const ProxyOps *ops) {
    pthread_mutex_lock(&f->mu);
    int n = atomic_load_explicit(&f->nroutes, memory_order_relaxed);
    if (n == PROXY_MAX_ROUTES) {
        pthread_mutex_unlock(&f->mu);
        return rt_fail(MSCCLRT_ERR_INTERNAL, "port proxy: more than %d routes", PROXY_MAX_ROUTES);
    }
    f->routes[n] = (ProxyRoute){.lo = lo, .hi = hi, .ops = *ops};
    atomic_store_explicit(&f->nroutes, n + 1, memory_order_release);
    pthread_mutex_unlock(&f->mu);
    return MSCCLRT_SUCCESS;
}

/* ---- consuming -------------------------------------------------------------------------------- */
static int fail_at(ProxyFifo *f, uint64_t slot, const char *why) {
    snprintf(f->err, sizeof f->err, "port proxy: trigger #%" PRIu64 ": %s", slot, why);
    atomic_store_explicit(&f->failed, 1, memory_order_release);
    return -1;
}

/* The ops a destination address is routed to. */
static const ProxyOps *route_of(ProxyFifo *f, const ProxyOps *dflt, uint64_t addr) {
    int n = atomic_load_explicit(&f->nroutes, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (addr >= f->routes[i].lo && addr < f->routes[i].hi) return &f->routes[i].ops;
    return dflt;
}

/* The value of the next signal to the peer counter at addr (its count, raised), false when no
 * context of this rank registered that counter. */
static bool count_next(ProxyFifo *f, uint64_t addr, uint64_t *v) {
    pthread_mutex_lock(&f->mu);
    ProxyCount *c = count_find(f, addr);
    if (c) *v = ++c->sent;
    pthread_mutex_unlock(&f->mu);
    return c != NULL;
}

static int perform(ProxyFifo *f, const ProxyOps *dflt, uint64_t slot, const MkTrigger *t) {
    char err[400] = "";
    const ProxyOps *ops = t->kind == MK_TRIG_FLUSH ? dflt : route_of(f, dflt, t->dst);
    /* t: microseconds of CLOCK_MONOTONIC, as the network transport's trace lines */
    LOG_TRACE(LOG_SUB_PROXY, "trigger #%" PRIu64 ": kind %u dst 0x%" PRIx64 " src 0x%" PRIx64
              " bytes %" PRIu64 " taken t=%.1f", slot, t->kind, t->dst, t->src, t->bytes,
              rt_now_s() * 1e6);
    switch (t->kind) {
    case MK_TRIG_PUT:
        if (ops->copy(ops->ctx, t->dst, t->src, t->bytes, err, sizeof err) != 0)
            return fail_at(f, slot, err);
        return 0;
    case MK_TRIG_SIGNAL: {
        uint64_t v = 0;
        if (!count_next(f, t->dst, &v)) {
            snprintf(err, sizeof err, "signal to peer counter 0x%" PRIx64 ", which no context of "
                     "this rank registered", t->dst);
            return fail_at(f, slot, err);
        }
        if (ops->write(ops->ctx, t->dst, v, err, sizeof err) != 0) return fail_at(f, slot, err);
        return 0;
    }
    case MK_TRIG_FLUSH:
        for (int i = 0; i < atomic_load_explicit(&f->nroutes, memory_order_acquire); i++) {
            const ProxyOps *r = &f->routes[i].ops;
            if (r->flush && r->flush(r->ctx, err, sizeof err) != 0) return fail_at(f, slot, err);
        }
        if (ops->write(ops->ctx, f->flushed_addr, slot + 1, err, sizeof err) != 0)
            return fail_at(f, slot, err);
        LOG_TRACE(LOG_SUB_PROXY, "trigger #%" PRIu64 ": flush done t=%.1f", slot,
                  rt_now_s() * 1e6);
        return 0;
    default:
        snprintf(err, sizeof err, "unknown trigger kind %u", t->kind);
        return fail_at(f, slot, err);
    }
}

/* Reads the trigger of slot into t if the producer has posted it (its mark seen first: the
 * producer fences before the mark, so the body is read only after it). */
static bool take(ProxyFifo *f, uint64_t slot, MkTrigger *t) {
    MkTrigger *e = &f->ring[slot & (MK_FIFO_SLOTS - 1)];
    if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != (uint32_t)(slot + 1)) return false;
    const volatile MkTrigger *v = e;
    *t = (MkTrigger){v->dst, v->src, v->bytes, v->kind, v->seq};
    return true;
}

/* take, waiting up to PROXY_PAIR_WAIT_US for the producer to post the slot */
static bool take_soon(ProxyFifo *f, uint64_t slot, MkTrigger *t) {
    if (take(f, slot, t)) return true;
    const double until = rt_now_s() + PROXY_PAIR_WAIT_US * 1e-6;
    while (rt_now_s() < until)
        if (take(f, slot, t)) return true;
    return false;
}

/* A put (slot) and the signal after it (slot + 1) through r's copy_signal, when the signal's
 * counter is registered; otherwise each on its own (the signal then fails as it would alone).
 * 1: done as a pair; 0: not a pair (nothing done); -1: failed. */
static int perform_pair(ProxyFifo *f, const ProxyOps *r, uint64_t slot, const MkTrigger *put,
                        const MkTrigger *sig) {
    uint64_t v = 0;
    if (!count_next(f, sig->dst, &v)) return 0;
    LOG_TRACE(LOG_SUB_PROXY, "trigger #%" PRIu64 ": kind %u dst 0x%" PRIx64 " src 0x%" PRIx64
              " bytes %" PRIu64 " with #%" PRIu64 " (kind %u dst 0x%" PRIx64 ") taken t=%.1f",
              slot, put->kind, put->dst, put->src, put->bytes, slot + 1, sig->kind, sig->dst,
              rt_now_s() * 1e6);
    char err[400] = "";
    if (r->copy_signal(r->ctx, put->dst, put->src, put->bytes, sig->dst, v, err, sizeof err) != 0)
        return fail_at(f, slot, err);
    return 1;
}

int proxy_fifo_poll(ProxyFifo *f, const ProxyOps *ops, int max) {
    if (atomic_load_explicit(&f->failed, memory_order_acquire)) return -1;
    uint64_t slot = atomic_load_explicit(&f->taken, memory_order_relaxed);
    int n = 0;
    MkTrigger t, next;
    while (n < max && take(f, slot, &t)) {
        /* a put whose signal comes right behind it, on a route that can send both at once */
        const ProxyOps *r = t.kind == MK_TRIG_PUT ? route_of(f, ops, t.dst) : NULL;
        int pair = 0;
        if (r && r->copy_signal && t.bytes <= r->pair_max && n + 1 < max &&
            take_soon(f, slot + 1, &next) && next.kind == MK_TRIG_SIGNAL &&
            route_of(f, ops, next.dst) == r)
            pair = perform_pair(f, r, slot, &t, &next);
        if (pair < 0) return -1;
        if (pair == 0 && perform(f, ops, slot, &t) != 0) return -1;
        slot += pair ? 2 : 1;
        n += pair ? 2 : 1;
        atomic_store_explicit(&f->taken, slot, memory_order_release);
    }
    if (n) /* the slots before are free for producers again */
        __atomic_store_n(f->tail_pub, slot, __ATOMIC_RELEASE);
    return n;
}

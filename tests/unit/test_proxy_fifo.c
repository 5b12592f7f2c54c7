/*
 * test_proxy_fifo.c - the port-channel FIFO protocol (runtime/proxy/proxy_fifo.c) driven by host
 * threads that push triggers exactly as kernels do (kernels/mk_proxy.cuh: reserve a slot, wait
 * for room, write the body, fence, write the mark): order, wrap-around with several producers,
 * signal counts per registered counter, flush marks, and the failures a broken plan causes.
 */
#include "../harness.h"
#include "proxy/proxy.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- a producer with the kernel's protocol -------------------------------------------------- */
typedef struct {
    MkTrigger ring[MK_FIFO_SLOTS];
    volatile uint64_t tail;
    _Atomic uint64_t head;
} Shared;

static uint64_t push(Shared *s, uint64_t dst, uint64_t src, uint64_t bytes, uint32_t kind) {
    uint64_t slot = atomic_fetch_add(&s->head, 1);
    while (__atomic_load_n(&s->tail, __ATOMIC_ACQUIRE) + MK_FIFO_SLOTS <= slot) { }
    volatile MkTrigger *e = &s->ring[slot & (MK_FIFO_SLOTS - 1)];
    e->dst = dst;
    e->src = src;
    e->bytes = bytes;
    e->kind = kind;
    __atomic_store_n(&e->seq, (uint32_t)(slot + 1), __ATOMIC_RELEASE);
    return slot;
}

/* ---- host ops: memcpy and plain stores, with an ordering check ------------------------------- */
#define PRODUCERS 4
#define PER 3000                       /* puts per producer: the ring wraps many times */
static uint64_t dst_tok[PRODUCERS][PER], src_tok[PRODUCERS][PER];
static uint64_t counters[PRODUCERS];
static uint64_t flushed;
static _Atomic int order_errors;

static int host_copy(void *ctx, uint64_t d, uint64_t s, uint64_t n, char *err, size_t len) {
    (void)ctx; (void)err; (void)len;
    memcpy((void *)(uintptr_t)d, (const void *)(uintptr_t)s, (size_t)n);
    return 0;
}

static int host_write(void *ctx, uint64_t addr, uint64_t v, char *err, size_t len) {
    (void)ctx;
    if (addr == 0xdead) {
        snprintf(err, len, "write refused");
        return -1;
    }
    for (int p = 0; p < PRODUCERS; p++)
        if (addr == (uint64_t)(uintptr_t)&counters[p])
            /* the v-th signal of producer p follows its v-th put: that data must be there */
            for (uint64_t i = 0; i < v && i < PER; i++)
                if (dst_tok[p][i] != src_tok[p][i]) atomic_fetch_add(&order_errors, 1);
    __atomic_store_n((uint64_t *)(uintptr_t)addr, v, __ATOMIC_RELEASE);
    return 0;
}

static const ProxyOps host_ops = {.copy = host_copy, .write = host_write};

typedef struct { Shared *s; int p; } ProdArg;

static void *producer(void *arg) {
    ProdArg *a = arg;
    for (int i = 0; i < PER; i++) {
        push(a->s, (uint64_t)(uintptr_t)&dst_tok[a->p][i], (uint64_t)(uintptr_t)&src_tok[a->p][i],
             8, MK_TRIG_PUT);
        push(a->s, (uint64_t)(uintptr_t)&counters[a->p], 0, 0, MK_TRIG_SIGNAL);
    }
    return NULL;
}

typedef struct { ProxyFifo *f; _Atomic int stop; } ConsArg;

static void *consumer(void *arg) {
    ConsArg *c = arg;
    while (!atomic_load(&c->stop))
        if (proxy_fifo_poll(c->f, &host_ops, 64) < 0) break;
    return NULL;
}

static void t_order_wrap_counts(void) {
    Shared *s = calloc(1, sizeof *s);
    ProxyFifo f;
    proxy_fifo_init(&f, s->ring, &s->tail, (uint64_t)(uintptr_t)&flushed);
    uint64_t regs[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++) {
        regs[p] = (uint64_t)(uintptr_t)&counters[p];
        for (int i = 0; i < PER; i++) src_tok[p][i] = ((uint64_t)p << 32) | (uint64_t)(i + 1);
    }
    CHECK(proxy_fifo_register(&f, regs, PRODUCERS) == MSCCLRT_SUCCESS);
    ConsArg ca = {&f, 0};
    pthread_t ct, pt[PRODUCERS];
    ProdArg pa[PRODUCERS];
    pthread_create(&ct, NULL, consumer, &ca);
    for (int p = 0; p < PRODUCERS; p++) {
        pa[p] = (ProdArg){s, p};
        pthread_create(&pt[p], NULL, producer, &pa[p]);
    }
    for (int p = 0; p < PRODUCERS; p++) pthread_join(pt[p], NULL);
    uint64_t mark = push(s, 0, 0, 0, MK_TRIG_FLUSH) + 1;
    while (__atomic_load_n(&flushed, __ATOMIC_ACQUIRE) < mark) { }
    atomic_store(&ca.stop, 1);
    pthread_join(ct, NULL);
    CHECK_EQ_INT(0, atomic_load(&f.failed));
    CHECK_EQ_INT(PRODUCERS * PER * 2 + 1, atomic_load(&f.taken));
    CHECK_EQ_INT(PRODUCERS * PER * 2 + 1, s->tail);
    CHECK_EQ_INT(mark, flushed);
    CHECK_EQ_INT(0, atomic_load(&order_errors));
    for (int p = 0; p < PRODUCERS; p++) {
        CHECK_EQ_INT(PER, counters[p]);
        CHECK(memcmp(dst_tok[p], src_tok[p], sizeof dst_tok[p]) == 0);
    }
    /* a fresh context at the same counters starts counting at 0 again */
    CHECK(proxy_fifo_register(&f, regs, 1) == MSCCLRT_SUCCESS);
    push(s, regs[0], 0, 0, MK_TRIG_SIGNAL);
    CHECK_EQ_INT(1, proxy_fifo_poll(&f, &host_ops, 64));
    CHECK_EQ_INT(1, counters[0]);
    proxy_fifo_fini(&f);
    free(s);
}

static void t_incomplete_trigger_waits(void) {
    Shared *s = calloc(1, sizeof *s);
    ProxyFifo f;
    proxy_fifo_init(&f, s->ring, &s->tail, (uint64_t)(uintptr_t)&flushed);
    /* slot 0 reserved but its mark not written yet; slot 1 complete: nothing may run */
    atomic_store(&s->head, 1);
    push(s, 0, 0, 0, MK_TRIG_FLUSH);
    CHECK_EQ_INT(0, proxy_fifo_poll(&f, &host_ops, 64));
    s->ring[0].kind = MK_TRIG_FLUSH;
    s->ring[0].seq = 1;
    CHECK_EQ_INT(2, proxy_fifo_poll(&f, &host_ops, 64));
    CHECK_EQ_INT(2, flushed);
    /* a mark from the previous lap of the ring is not this slot's */
    s->ring[2].seq = 2 + 1 + MK_FIFO_SLOTS;
    CHECK_EQ_INT(0, proxy_fifo_poll(&f, &host_ops, 64));
    proxy_fifo_fini(&f);
    free(s);
}

static void t_failures(void) {
    Shared *s = calloc(1, sizeof *s);
    ProxyFifo f;
    proxy_fifo_init(&f, s->ring, &s->tail, (uint64_t)(uintptr_t)&flushed);
    push(s, 0x1234, 0, 0, MK_TRIG_SIGNAL);   /* nobody registered this counter */
    CHECK_EQ_INT(-1, proxy_fifo_poll(&f, &host_ops, 64));
    CHECK_CONTAINS(f.err, "trigger #0: signal to peer counter 0x1234, which no context");
    CHECK_EQ_INT(-1, proxy_fifo_poll(&f, &host_ops, 64));   /* stays failed */
    proxy_fifo_fini(&f);

    memset(s, 0, sizeof *s);
    proxy_fifo_init(&f, s->ring, &s->tail, 0xdead);
    push(s, 0, 0, 0, 7);
    CHECK_EQ_INT(-1, proxy_fifo_poll(&f, &host_ops, 64));
    CHECK_CONTAINS(f.err, "trigger #0: unknown trigger kind 7");
    proxy_fifo_fini(&f);

    memset(s, 0, sizeof *s);
    proxy_fifo_init(&f, s->ring, &s->tail, 0xdead);
    push(s, 0, 0, 0, MK_TRIG_FLUSH);
    CHECK_EQ_INT(-1, proxy_fifo_poll(&f, &host_ops, 64));
    CHECK_CONTAINS(f.err, "trigger #0: write refused");
    proxy_fifo_fini(&f);
    free(s);
}

static void t_register_many(void) {
    Shared *s = calloc(1, sizeof *s);
    ProxyFifo f;
    proxy_fifo_init(&f, s->ring, &s->tail, (uint64_t)(uintptr_t)&flushed);
    enum { N = 1000 };
    static uint64_t ctr[N];
    uint64_t addrs[N + 1];
    for (int i = 0; i < N; i++) addrs[i] = (uint64_t)(uintptr_t)&ctr[i];
    addrs[N] = 0; /* an unconnected channel: skipped */
    CHECK(proxy_fifo_register(&f, addrs, N + 1) == MSCCLRT_SUCCESS);
    CHECK_EQ_INT(N, f.nused);
    proxy_fifo_unregister(&f, addrs, N / 2);   /* the first half goes away */
    CHECK_EQ_INT(N - N / 2, f.nused);
    int ok = 1;
    for (int i = N / 2; i < N && ok; i++) {
        push(s, addrs[i], 0, 0, MK_TRIG_SIGNAL);
        ok = proxy_fifo_poll(&f, &host_ops, 64) == 1 && ctr[i] == 1;
    }
    CHECK(ok);
    push(s, addrs[0], 0, 0, MK_TRIG_SIGNAL);    /* unregistered now */
    CHECK_EQ_INT(-1, proxy_fifo_poll(&f, &host_ops, 64));
    proxy_fifo_fini(&f);
    free(s);
}

int main(void) {
    TEST("proxy_fifo_order_wrap_counts", t_order_wrap_counts());
    TEST("proxy_fifo_incomplete_trigger_waits", t_incomplete_trigger_waits());
    TEST("proxy_fifo_failures", t_failures());
    TEST("proxy_fifo_register_many", t_register_many());
    return harness_report();
}

/*
 * test_proxy_route.c - the proxy's per-destination routes: triggers to window addresses go to
 * the network route's ops, all others to the default (copy-engine) ops, in FIFO order; a flush
 * runs the route's flush before the default ops write the flush mark; a failing route op
 * stops the FIFO with its message; a put and the signal right behind it go to copy_signal as one
 * pair. Host threads only (no CUDA).
 */
#include "proxy/proxy.h"
#include "../harness.h"

#include <stdlib.h>

typedef struct Rec { char log[64][48]; int n; int fail_copy; } Rec;

static int rec_copy(void *ctx, uint64_t dst, uint64_t src, uint64_t bytes, char *err, size_t n) {
    Rec *r = ctx;
    if (r->fail_copy) { snprintf(err, n, "route copy failed for rank 7"); return -1; }
    snprintf(r->log[r->n++ & 63], 48, "copy %llx %llx %llu", (unsigned long long)dst,
             (unsigned long long)src, (unsigned long long)bytes);
    return 0;
}
static int rec_write(void *ctx, uint64_t addr, uint64_t v, char *err, size_t n) {
    (void)err, (void)n;
    Rec *r = ctx;
    snprintf(r->log[r->n++ & 63], 48, "write %llx %llu", (unsigned long long)addr,
             (unsigned long long)v);
    return 0;
}
static int rec_copy_signal(void *ctx, uint64_t dst, uint64_t src, uint64_t bytes, uint64_t addr,
                           uint64_t v, char *err, size_t n) {
    (void)err, (void)n;
    Rec *r = ctx;
    snprintf(r->log[r->n++ & 63], 48, "pair %llx %llx %llu %llx %llu", (unsigned long long)dst,
             (unsigned long long)src, (unsigned long long)bytes, (unsigned long long)addr,
             (unsigned long long)v);
    return 0;
}
static Rec *order_log;   /* one shared log to see the order across routes */
static int rec_flush(void *ctx, char *err, size_t n) {
    (void)ctx, (void)err, (void)n;
    snprintf(order_log->log[order_log->n++ & 63], 48, "flush");
    return 0;
}

static void push(MkTrigger *ring, uint64_t slot, uint32_t kind, uint64_t dst, uint64_t src,
                 uint64_t bytes) {
    MkTrigger *t = &ring[slot & (MK_FIFO_SLOTS - 1)];
    t->dst = dst, t->src = src, t->bytes = bytes, t->kind = kind;
    __atomic_store_n(&t->seq, (uint32_t)(slot + 1), __ATOMIC_RELEASE);
}

/* r's log holds exactly `from + n` entries, the last n being want[] */
static void expect_log(const Rec *r, int from, const char *const *want, int n) {
    CHECK_EQ_INT(from + n, r->n);
    for (int i = 0; i < n; i++) CHECK_STR(want[i], r->log[from + i]);
}

/* Pairs: a put of at most pair_max bytes and the signal right behind it on the network route
 * reach copy_signal once; not across routes, not on the default route, not when the signal is
 * not posted within PROXY_PAIR_WAIT_US, not when the poll may take one trigger, not for a
 * larger put, and not for an unregistered counter (which then fails alone). */
static void t_pairs(Rec *log) {
    const uint64_t win = NET_WIN_TAG | (1ull << NET_WIN_OFF_BITS);
    uint64_t counters[2] = {0x5000, win + 64};
    ProxyFifo g;
    volatile uint64_t gtail = 0;
    MkTrigger *gring = calloc(MK_FIFO_SLOTS, sizeof *gring);
    proxy_fifo_init(&g, gring, &gtail, 0xf2u);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, proxy_fifo_register(&g, counters, 2));
    Rec pl = {0}, other = {0};
    ProxyOps pnet = {.ctx = &pl, .copy = rec_copy, .write = rec_write, .flush = rec_flush,
                     .copy_signal = rec_copy_signal, .pair_max = 16};
    ProxyOps pd = {.ctx = &other, .copy = rec_copy, .write = rec_write};
    order_log = &pl;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, proxy_fifo_route(&g, NET_WIN_TAG, NET_WIN_TAG + (1ull << 56),
                                                   &pnet));
    push(gring, 0, MK_TRIG_PUT, win + 8, 0x200, 16);   /* paired */
    push(gring, 1, MK_TRIG_SIGNAL, win + 64, 0, 0);
    push(gring, 2, MK_TRIG_PUT, win + 8, 0x300, 8);     /* its signal on another route */
    push(gring, 3, MK_TRIG_SIGNAL, 0x5000, 0, 0);
    push(gring, 4, MK_TRIG_PUT, 0x4000, 0x100, 4);      /* the default route: no pairs */
    push(gring, 5, MK_TRIG_SIGNAL, 0x5000, 0, 0);
    push(gring, 6, MK_TRIG_PUT, win + 16, 0x400, 8);    /* its signal not posted in time */
    CHECK_EQ_INT(7, proxy_fifo_poll(&g, &pd, 64));
    static const char *const net_log[] = {"pair fe00010000000008 200 16 fe00010000000040 1",
                                           "copy fe00010000000008 300 8",
                                           "copy fe00010000000010 400 8"};
    static const char *const dflt_log[] = {"write 5000 1", "copy 4000 100 4", "write 5000 2"};
    expect_log(&pl, 0, net_log, 3);
    expect_log(&other, 0, dflt_log, 3);
    /* the late signal alone, its count continuing; a poll allowed one trigger never pairs */
    push(gring, 7, MK_TRIG_SIGNAL, win + 64, 0, 0);
    push(gring, 8, MK_TRIG_PUT, win + 8, 0x500, 8);
    push(gring, 9, MK_TRIG_SIGNAL, win + 64, 0, 0);
    CHECK_EQ_INT(1, proxy_fifo_poll(&g, &pd, 1));
    CHECK_EQ_INT(1, proxy_fifo_poll(&g, &pd, 1));
    CHECK_EQ_INT(1, proxy_fifo_poll(&g, &pd, 1));
    static const char *const late_log[] = {"write fe00010000000040 2", "copy fe00010000000008 500 8",
                                            "write fe00010000000040 3"};
    expect_log(&pl, 3, late_log, 3);
    /* a put larger than pair_max goes alone, its signal after it */
    push(gring, 10, MK_TRIG_PUT, win + 8, 0x700, 17);
    push(gring, 11, MK_TRIG_SIGNAL, win + 64, 0, 0);
    CHECK_EQ_INT(2, proxy_fifo_poll(&g, &pd, 64));
    static const char *const big_log[] = {"copy fe00010000000008 700 17", "write fe00010000000040 4"};
    expect_log(&pl, 6, big_log, 2);
    /* a signal to a counter no context registered: the put goes alone, the signal fails */
    push(gring, 12, MK_TRIG_PUT, win + 8, 0x600, 8);
    push(gring, 13, MK_TRIG_SIGNAL, win + 72, 0, 0);
    CHECK_EQ_INT(-1, proxy_fifo_poll(&g, &pd, 64));
    CHECK_STR("copy fe00010000000008 600 8", pl.log[8]);
    CHECK_CONTAINS(g.err, "trigger #13");
    CHECK_CONTAINS(g.err, "no context of this rank registered");
    order_log = log;
    proxy_fifo_fini(&g);
    free(gring);
}

int main(void) {
    MkTrigger *ring = calloc(MK_FIFO_SLOTS, sizeof *ring);
    volatile uint64_t tail = 0;
    ProxyFifo f;
    Rec log = {0};
    order_log = &log;
    proxy_fifo_init(&f, ring, &tail, 0xf1u);
    ProxyOps dflt = {.ctx = &log, .copy = rec_copy, .write = rec_write};
    ProxyOps net = {.ctx = &log, .copy = rec_copy, .write = rec_write, .flush = rec_flush};
    const uint64_t win = NET_WIN_TAG | (1ull << NET_WIN_OFF_BITS);
    uint64_t counters[2] = {0x5000, win + 64};
    CHECK_EQ_INT(MSCCLRT_SUCCESS, proxy_fifo_register(&f, counters, 2));
    TEST("proxy routes window destinations to the network ops", {
        CHECK_EQ_INT(MSCCLRT_SUCCESS, proxy_fifo_route(&f, NET_WIN_TAG, NET_WIN_TAG + (1ull << 56),
                                                       &net));
        Rec other = {0};   /* the default ops record separately to tell the routes apart */
        dflt.ctx = &other;
        push(ring, 0, MK_TRIG_PUT, 0x4000, 0x100, 32);
        push(ring, 1, MK_TRIG_PUT, win + 8, 0x200, 16);
        push(ring, 2, MK_TRIG_SIGNAL, win + 64, 0, 0);
        push(ring, 3, MK_TRIG_SIGNAL, 0x5000, 0, 0);
        push(ring, 4, MK_TRIG_FLUSH, 0, 0, 0);
        CHECK_EQ_INT(5, proxy_fifo_poll(&f, &dflt, 64));
        CHECK_EQ_INT(3, log.n);    /* net: copy, write, flush (the flush logs here too) */
        CHECK_STR("copy fe00010000000008 200 16", log.log[0]);
        CHECK_STR("write fe00010000000040 1", log.log[1]);
        CHECK_STR("flush", log.log[2]);
        CHECK_EQ_INT(3, other.n);
        CHECK_STR("copy 4000 100 32", other.log[0]);
        CHECK_STR("write 5000 1", other.log[1]);
        CHECK_STR("write f1 5", other.log[2]);   /* the flush mark, after the route's flush */
        dflt.ctx = &log;
    });
    TEST("a failing route stops the FIFO with its message", {
        log.fail_copy = 1;
        push(ring, 5, MK_TRIG_PUT, win, 0x300, 4);
        CHECK_EQ_INT(-1, proxy_fifo_poll(&f, &dflt, 64));
        CHECK_CONTAINS(f.err, "rank 7");
        CHECK_EQ_INT(-1, proxy_fifo_poll(&f, &dflt, 64));
    });
    TEST("a put and the signal posted right behind it on a route with copy_signal go as one pair",
         t_pairs(&log));
    TEST("the route table is bounded", {
        ProxyFifo g;
        proxy_fifo_init(&g, ring, &tail, 0);
        int ok = 0;
        for (int i = 0; i < PROXY_MAX_ROUTES + 2; i++)
            ok += proxy_fifo_route(&g, (uint64_t)i << 8, ((uint64_t)i + 1) << 8, &net) ==
                  MSCCLRT_SUCCESS;
        CHECK_EQ_INT(PROXY_MAX_ROUTES, ok);
        proxy_fifo_fini(&g);
    });
    proxy_fifo_fini(&f);
    free(ring);
    return harness_report();
}

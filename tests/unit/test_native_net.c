/*
 * test_native_net.c - the native context's incoming areas for peers on other nodes (packet
 * slots and Simple slots, runtime/algo/algo_native_net.c), without a GPU: ranks split into
 * "nodes" by MSCCLRT_HOSTID (re-executed children, tests/unit/test_net_util.h) on the socket
 * transport. In device mode on the fake CUDA driver every rank gets pinned host slots,
 * registered and exchanged with the ranks on other nodes: a put into a peer's window at a
 * sender's slot lands in that peer's host slots (the staging copy into device memory fails on
 * purpose, so nothing may take it), each before the signal after it, and a second area
 * (exchanged under its own tag) gets only its own puts; puts from an outgoing area go unstaged; a rank that keeps its slots in device
 * memory sends an empty descriptor and its peers get no window; a peer whose slots are smaller
 * than the layout is an error naming it; with host buffers (where the network stages nothing)
 * there are no host slots at all. The counters of the Simple pieces' signals (a third area) take
 * the receive thread's own stores, never a cuStreamWriteValue64, unless a staged piece before
 * the signal may still be on its copy stream.
 */
#define BIG 4096
#include "test_net_util.h"
#include "fake_cuda_ctx.h"
#include "algo/algo_native_net.h"

#define SLOTS (1u << 20)   /* the packet layout's bytes in these tests */
#define SLOT 4096          /* one sender's share of them: [sender][SLOT] at the front */

static int open_side(Side *s, int rank, int n, const BootId *id, bool dev) {
    CuContext ctx = NULL;
    if (dev && fake_cuda_context(&ctx)) return 1;
    NetOptions o = {.host_mem = !dev, .cu_ctx = ctx, .timeout_ms = 10000, .nsocks = 2,
                    .force = "socket", .ifname = "lo"};
    return side_open(s, rank, n, id, &o, "socket", NULL);
}

/* The side, and the communicator and executor context native_net_host_in sees: only the
 * rank, the count, the bootstrap and the network are set */
static int open_rank(Side *s, mscclrt_comm *c, ExecCtx *x, int rank, int n, const BootId *id,
                     bool dev) {
    if (open_side(s, rank, n, id, dev)) return 1;
    memset(c, 0, sizeof *c);
    memset(x, 0, sizeof *x);
    c->rank = rank;
    c->nranks = n;
    c->boot = s->boot;
    x->net = s->net;
    return 0;
}

/* Each rank puts a pattern (round k) into its slot at every peer with a window, then a signal
 * k; a rank with an area (host) finds every other node's pattern in it once the signals are
 * there. */
static void put_round(Side *s, void *host, const uint64_t *win, int k, unsigned char *out) {
    unsigned char stack[SLOT], *src = out ? out : stack;   /* out: a registered host source */
    for (int i = 0; i < SLOT; i++) src[i] = pat(s->rank, (uint64_t)i, k);
    for (int q = 0; q < s->n; q++) {
        if (!win[q]) continue;
        CHECK_OK(net_put(s->net, win[q] + (uint64_t)s->rank * SLOT, (uint64_t)(uintptr_t)src, SLOT));
        CHECK_OK(net_signal(s->net, s->win_ctr[q] + (uint64_t)s->rank * 8, (uint64_t)k));
    }
    CHECK_OK(net_flush(s->net));
    for (int q = 0; host && q < s->n; q++) {
        if (!net_peer_remote(s->net, q)) continue;   /* every sender had our window */
        CHECK(wait_ctr(s, q, (uint64_t)k));
        CHECK_EQ_INT(SLOT, (int)first_bad((unsigned char *)host + (size_t)q * SLOT, q, SLOT, k));
    }
}

/* mode "all": every rank wants host slots; "both": the Simple slots after the packet slots; "one-device": rank 1 keeps device slots; "short":
 * rank 1's slots are smaller than rank 0 expects; "hostmem": host buffers, no staging. */
static int rank_pkin(const char *mode, int rank, int n, const BootId *id) {
    const bool dev = strcmp(mode, "hostmem") != 0;
    Side s;
    mscclrt_comm c;
    ExecCtx x;
    if (open_rank(&s, &c, &x, rank, n, id, dev)) return 1;
    const bool want = !(strcmp(mode, "one-device") == 0 && rank == 1);
    const uint64_t bytes = strcmp(mode, "short") == 0 && rank == 1 ? SLOTS / 2 : SLOTS;
    uint64_t win[8] = {0};
    void *host = (void *)1;
    const mscclrt_result res = native_net_host_in(&c, &x, NATIVE_NET_PACKETS, bytes, want, &host, win);
    if (strcmp(mode, "short") == 0 && rank == 0) {   /* rank 1 offered half the layout */
        CHECK_EQ_INT(MSCCLRT_ERR_INTERNAL, res);
        CHECK_CONTAINS(mscclrt_last_error(), "rank 1's incoming packet slots hold 524288 bytes");
    } else {
        CHECK_OK(res);
    }
    CHECK_EQ_INT(want && dev, host != NULL);
    /* a window from every rank on another node that offered host slots at least as large as
     * this rank's layout, none from the others */
    for (int q = 0; q < n; q++) {
        const bool offers = !(strcmp(mode, "one-device") == 0 && q == 1);
        const uint64_t qbytes = strcmp(mode, "short") == 0 && q == 1 ? SLOTS / 2 : SLOTS;
        const bool has = dev && net_peer_remote(s.net, q) && offers && qbytes >= bytes;
        CHECK_EQ_INT(has, net_is_window(win[q]));
        if (!has) CHECK_EQ_INT(0, (int)(win[q] != 0));
    }
    /* "both": every put leaves from an outgoing area (native_net_host_out), which the network
     * sends unstaged: the staging copy out of device memory fails there too */
    void *out = NULL;
    if (strcmp(mode, "both") == 0) {
        CHECK_OK(native_net_host_out(&c, &x, NATIVE_NET_SLOTS, SLOT, &out));
        CHECK(out != NULL);
    }
    if (strcmp(mode, "short") != 0) put_round(&s, host, win, 1, out);
    /* "both": the Simple slots too, a second area exchanged under its own tag after the first:
     * a put into its window lands there, not in the packet slots */
    void *host2 = NULL;
    if (strcmp(mode, "both") == 0) {
        uint64_t win2[8] = {0};
        CHECK_OK(native_net_host_in(&c, &x, NATIVE_NET_SLOTS, 2 * SLOTS, true, &host2, win2));
        CHECK(host2 != NULL && host2 != host);
        for (int q = 0; q < n; q++) CHECK(win2[q] == 0 || win2[q] != win[q]);
        memset(host, 0, SLOTS);
        put_round(&s, host2, win2, 2, out);
        uint64_t stray = 0;   /* bytes of the second round in the packet slots */
        for (uint64_t i = 0; i < SLOTS; i++) stray += ((const unsigned char *)host)[i] != 0;
        CHECK_EQ_INT(0, (int)stray);
    }
    CHECK_OK(boot_barrier(s.boot));
    net_release(s.net, &x);   /* the host slots' registration and the windows */
    if (host) cu.cuMemFreeHost(host);
    if (host2) cu.cuMemFreeHost(host2);
    if (out) cu.cuMemFreeHost(out);
    side_close(&s);
    return h_failed ? 1 : 0;
}

/* The fake driver's count of calls of `fn` so far (-1 where the fake does not say) */
static long driver_calls(const char *fn) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    long (*calls)(const char *) = lib ? (long (*)(const char *))dlsym(lib, "fake_cuda_calls") : NULL;
    return calls ? calls(fn) : -1;
}

/* Waits until host counter *c reaches v (bounded) */
static bool wait_host(const uint64_t *c, uint64_t v) {
    double t0 = now_s();
    while (__atomic_load_n(c, __ATOMIC_ACQUIRE) < v) {
        if (now_s() - t0 > 20) return false;
        sched_yield();
    }
    return true;
}

/* The Simple pieces' counters in host memory (NATIVE_NET_COUNTERS). "counters": every rank
 * puts into its Simple slot at each peer on another node (host memory) and signals its counter
 * there, three rounds: each signal is visible only with its data, and no signal took
 * cuStreamWriteValue64 (the receive thread stored it; the staging copies into device memory
 * fail in this run, so no piece went through them either). "ordered": rank 0 puts into rank 1's
 * device buffer (staged through rank 1's copy stream) and signals rank 1's host counter: rank 1
 * sees the data with the signal, and asked its copy stream whether the piece was in (a signal
 * may not pass a copy still queued). */
static int rank_counters(const char *mode, int rank, int n, const BootId *id) {
    Side s;
    mscclrt_comm c;
    ExecCtx x;
    if (open_rank(&s, &c, &x, rank, n, id, true)) return 1;
    const bool ordered = strcmp(mode, "ordered") == 0;
    uint64_t win[8] = {0}, wc[8] = {0};
    void *slots = NULL, *ctrs = NULL;
    CHECK_OK(native_net_host_in(&c, &x, NATIVE_NET_SLOTS, SLOTS, !ordered, &slots, win));
    CHECK_OK(native_net_host_in(&c, &x, NATIVE_NET_COUNTERS, (uint64_t)n * 8, true, &ctrs, wc));
    CHECK(ctrs != NULL);
    for (int q = 0; q < n; q++) CHECK_EQ_INT(net_peer_remote(s.net, q), net_is_window(wc[q]));
    const uint64_t *ctr = ctrs;
    const long writes0 = driver_calls("cuStreamWriteValue64"), queries0 = driver_calls("cuStreamQuery");
    CHECK(writes0 >= 0 && queries0 >= 0);
    CHECK_OK(boot_barrier(s.boot));   /* every rank counted before any signal */
    if (!ordered) {
        unsigned char src[SLOT];
        for (int k = 1; k <= 3; k++) {
            for (int i = 0; i < SLOT; i++) src[i] = pat(rank, (uint64_t)i, k);
            for (int q = 0; q < n; q++) {
                if (!win[q]) continue;
                CHECK_OK(net_put(s.net, win[q] + (uint64_t)rank * SLOT, (uint64_t)(uintptr_t)src, SLOT));
                CHECK_OK(net_signal(s.net, wc[q] + (uint64_t)rank * 8, (uint64_t)k));
            }
            CHECK_OK(net_flush(s.net));
            for (int q = 0; q < n; q++) {
                if (!net_peer_remote(s.net, q)) continue;
                CHECK(wait_host(&ctr[q], (uint64_t)k));
                CHECK_EQ_INT(SLOT, (int)first_bad((unsigned char *)slots + (size_t)q * SLOT, q, SLOT, k));
            }
            CHECK_OK(boot_barrier(s.boot));   /* the slots are written again next round */
        }
        CHECK_EQ_INT(0, (int)(driver_calls("cuStreamWriteValue64") - writes0));
    } else if (rank == 0) {
        unsigned char src[BIG];
        for (int i = 0; i < BIG; i++) src[i] = pat(0, (uint64_t)i, 1);
        CHECK_OK(net_put(s.net, s.win_recv[1], (uint64_t)(uintptr_t)src, BIG));
        CHECK_OK(net_signal(s.net, wc[1], 1));
        /* no flush before rank 1 has looked: answering one also asks the copy stream */
        CHECK_OK(boot_barrier(s.boot));
        CHECK_OK(net_flush(s.net));
    } else {
        if (rank == 1) {
            CHECK(wait_host(&ctr[0], 1));
            CHECK_EQ_INT(BIG, (int)first_bad((const unsigned char *)s.recv, 0, BIG, 1));
            CHECK(driver_calls("cuStreamQuery") > queries0);
        }
        CHECK_OK(boot_barrier(s.boot));
    }
    CHECK_OK(boot_barrier(s.boot));
    net_release(s.net, &x);
    if (slots) cu.cuMemFreeHost(slots);
    cu.cuMemFreeHost(ctrs);
    side_close(&s);
    return h_failed ? 1 : 0;
}

static int rank_main(const char *scen, int rank, int n, const BootId *id) {
    if (strcmp(scen, "counters") == 0 || strcmp(scen, "ordered") == 0)
        return rank_counters(scen, rank, n, id);
    return rank_pkin(scen, rank, n, id);
}

static int run(const char *scen, int n, const char *const *hostids) {
    /* the socket backend's staging copy into device memory fails: a packet that took it would
     * not arrive (the fake driver comes first on LD_LIBRARY_PATH: fake_cuda_setup) */
    const char *const dev_env[] = {"FAKE_CUDA_FAIL",
                                   strcmp(scen, "both") == 0 ? "cuMemcpyHtoDAsync:1,cuMemcpyDtoHAsync:1"
                                                             : "cuMemcpyHtoDAsync:1", NULL};
    /* "ordered" stages on purpose */
    if (strcmp(scen, "ordered") == 0) return run_ranks(scen, n, hostids, NULL, -1, 0);
    return run_ranks(scen, n, hostids, strcmp(scen, "hostmem") ? dev_env : NULL, -1, 0);
}

int main(int argc, char **argv) {
    int rc = net_test_child(argc, argv, 60, rank_main);
    if (rc >= 0) return rc;
    static const char *const two[] = {"nodeA", "nodeB"};
    static const char *const four[] = {"nodeA", "nodeA", "nodeB", "nodeB"};
    if (!fake_cuda_setup("native net")) return harness_report();
    TEST("native net: packets from the other node land in pinned host slots (2 ranks, 2 nodes)",
         CHECK_EQ_INT(0, run("all", 2, two)));
    TEST("native net: host slots among 4 ranks on 2 nodes (windows only across nodes)",
         CHECK_EQ_INT(0, run("all", 4, four)));
    TEST("native net: packet and Simple slots apart, puts from an outgoing area unstaged",
         CHECK_EQ_INT(0, run("both", 2, two)));
    TEST("native net: a rank that keeps device slots gives its peers no window",
         CHECK_EQ_INT(0, run("one-device", 4, four)));
    TEST("native net: a peer's slots smaller than the layout are an error naming it",
         CHECK_EQ_INT(0, run("short", 2, two)));
    TEST("native net: host buffers (nothing staged): no host slots, no windows",
         CHECK_EQ_INT(0, run("hostmem", 2, two)));
    TEST("native net: signals into host counters are stored by the receive thread, after their data",
         CHECK_EQ_INT(0, run("counters", 2, two)));
    TEST("native net: host counters among 4 ranks on 2 nodes",
         CHECK_EQ_INT(0, run("counters", 4, four)));
    TEST("native net: a signal into host counters after a staged piece waits for its copy",
         CHECK_EQ_INT(0, run("ordered", 2, two)));
    return harness_report();
}

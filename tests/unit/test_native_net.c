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
 * there are no host slots at all.
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
    if (open_side(&s, rank, n, id, dev)) return 1;
    mscclrt_comm c;
    ExecCtx x;
    memset(&c, 0, sizeof c);
    memset(&x, 0, sizeof x);
    c.rank = rank;
    c.nranks = n;
    c.boot = s.boot;
    x.net = s.net;
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

static int rank_main(const char *scen, int rank, int n, const BootId *id) {
    return rank_pkin(scen, rank, n, id);
}

static int run(const char *scen, int n, const char *const *hostids) {
    /* the socket backend's staging copy into device memory fails: a packet that took it would
     * not arrive (the fake driver comes first on LD_LIBRARY_PATH: fake_cuda_setup) */
    const char *const dev_env[] = {"FAKE_CUDA_FAIL",
                                   strcmp(scen, "both") == 0 ? "cuMemcpyHtoDAsync:1,cuMemcpyDtoHAsync:1"
                                                             : "cuMemcpyHtoDAsync:1", NULL};
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
    return harness_report();
}

/*
 * test_native_net.c - the native context's incoming packet slots for peers on other nodes
 * (runtime/algo/algo_native_net.c), without a GPU: ranks split into "nodes" by MSCCLRT_HOSTID
 * (re-executed children, tests/unit/test_net_util.h) on the socket transport. In device mode on
 * the fake CUDA driver every rank gets pinned host slots, registered and exchanged with the ranks
 * on other nodes: a put into a peer's window at a sender's slot lands in that peer's host slots
 * (the staging copy into device memory fails on purpose, so nothing may take it), each before
 * the signal after it; a rank that keeps its slots in device memory sends an empty descriptor
 * and its peers get no window; a peer whose slots are smaller than the layout is an error naming
 * it; with host buffers (where the network stages nothing) there are no host slots at all.
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

/* mode "all": every rank wants host slots; "one-device": rank 1 keeps device slots; "short":
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
    const mscclrt_result res = native_net_pk_in(&c, &x, bytes, want, &host, win);
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
    /* each rank puts a pattern into its slot at every peer with a window, then a signal; the
     * receiver finds it in its host slots once the signal is there */
    unsigned char src[SLOT];
    for (int i = 0; i < SLOT; i++) src[i] = pat(rank, (uint64_t)i, 3);
    if (strcmp(mode, "short") != 0) {
        for (int q = 0; q < n; q++) {
            if (!win[q]) continue;
            CHECK_OK(net_put(s.net, win[q] + (uint64_t)rank * SLOT, (uint64_t)(uintptr_t)src, SLOT));
            CHECK_OK(net_signal(s.net, s.win_ctr[q] + (uint64_t)rank * 8, 1));
        }
        CHECK_OK(net_flush(s.net));
        for (int q = 0; host && q < n; q++) {
            if (!net_peer_remote(s.net, q)) continue;   /* every sender had our window */
            CHECK(wait_ctr(&s, q, 1));
            CHECK_EQ_INT(SLOT, (int)first_bad((unsigned char *)host + (size_t)q * SLOT, q, SLOT, 3));
        }
    }
    CHECK_OK(boot_barrier(s.boot));
    net_release(s.net, &x);   /* the host slots' registration and the windows */
    if (host) cu.cuMemFreeHost(host);
    side_close(&s);
    return h_failed ? 1 : 0;
}

static char fake_dir[PATH_MAX + 32];

static int rank_main(const char *scen, int rank, int n, const BootId *id) {
    return rank_pkin(scen, rank, n, id);
}

static int run(const char *scen, int n, const char *const *hostids) {
    /* the socket backend's staging copy into device memory fails: a packet that took it would
     * not arrive */
    const char *const dev_env[] = {"LD_LIBRARY_PATH", fake_dir, "FAKE_CUDA_FAIL",
                                   "cuMemcpyHtoDAsync:1", NULL};
    return run_ranks(scen, n, hostids, strcmp(scen, "hostmem") ? dev_env : NULL, -1, 0);
}

int main(int argc, char **argv) {
    int rc = net_test_child(argc, argv, 60, rank_main);
    if (rc >= 0) return rc;
    static const char *const two[] = {"nodeA", "nodeB"};
    static const char *const four[] = {"nodeA", "nodeA", "nodeB", "nodeB"};
    char lib[sizeof fake_dir + 16];
    fake_cuda_dir(fake_dir, sizeof fake_dir);
    snprintf(lib, sizeof lib, "%s/libcuda.so.1", fake_dir);
    TEST("native net: packets from the other node land in pinned host slots (2 ranks, 2 nodes)",
         CHECK(access(lib, R_OK) == 0); CHECK_EQ_INT(0, run("all", 2, two)));
    TEST("native net: host slots among 4 ranks on 2 nodes (windows only across nodes)",
         CHECK_EQ_INT(0, run("all", 4, four)));
    TEST("native net: a rank that keeps device slots gives its peers no window",
         CHECK_EQ_INT(0, run("one-device", 4, four)));
    TEST("native net: a peer's slots smaller than the layout are an error naming it",
         CHECK_EQ_INT(0, run("short", 2, two)));
    TEST("native net: host buffers (nothing staged): no host slots, no windows",
         CHECK_EQ_INT(0, run("hostmem", 2, two)));
    return harness_report();
}

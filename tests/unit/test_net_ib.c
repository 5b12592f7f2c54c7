/*
 * test_net_ib.c - the ib (RDMA) transport of port channels, against the fake libibverbs
 * (build/tests/libfake_ibverbs.so: RC queue pairs emulated between processes of this machine),
 * with host buffers: re-executed children are the ranks, split into "nodes" by MSCCLRT_HOSTID,
 * with MSCCLRT_IBVERBS_LIB pointing at the fake. Covers: GID choice; the automatic backend
 * choice (per process, and agreed over a group whose ranks differ); connection setup for 2 and 4 ranks (InfiniBand LIDs and RoCE GIDs); puts of 1 B to
 * 8 MiB at odd sizes and offsets, each followed by a signal the receiver checks the data
 * behind; more puts than a queue pair holds; flush waiting for completions the fake delays; a
 * wrong rkey (remote access error) and a peer that never connects, both naming the rank.
 * Nothing here touches a real NIC.
 */
#define BIG    (8u << 20)
#define NSMALL 700          /* small puts in a row: more than a QP's 256 requests */
#include "net/net_ib.h"
#include "test_net_util.h"

#include <libgen.h>
#include <limits.h>

static void gid_set(IbGidInfo *g, int type, const char *kind, int tail) {
    memset(g, 0, sizeof *g);
    g->type = type;
    if (strcmp(kind, "ll") == 0) { g->gid.raw[0] = 0xfe; g->gid.raw[1] = 0x80; }
    if (strcmp(kind, "v4") == 0) { g->gid.raw[10] = g->gid.raw[11] = 0xff; g->gid.raw[12] = 10; }
    if (strcmp(kind, "v6") == 0) { g->gid.raw[0] = 0x20; g->gid.raw[1] = 0x01; }
    if (strcmp(kind, "zero") != 0) g->gid.raw[15] = (uint8_t)tail;
}

static void test_gid_pick(void) {
    IbGidInfo g[6];
    gid_set(&g[0], IBV_GID_TYPE_ROCE_V1, "ll", 1);
    gid_set(&g[1], IBV_GID_TYPE_ROCE_V2, "ll", 1);
    gid_set(&g[2], IBV_GID_TYPE_ROCE_V1, "v4", 2);
    gid_set(&g[3], IBV_GID_TYPE_ROCE_V2, "v4", 2);
    gid_set(&g[4], IBV_GID_TYPE_ROCE_V2, "v6", 3);
    gid_set(&g[5], IBV_GID_TYPE_ROCE_V2, "zero", 0);
    CHECK_EQ_INT(3, ib_pick_gid(g, 6));   /* RoCEv2 IPv4-mapped */
    CHECK_EQ_INT(2, ib_pick_gid(g, 3));   /* no v2 IPv4: an IPv4-mapped v1 over link-local */
    IbGidInfo h[3] = {g[0], g[1], g[4]};
    CHECK_EQ_INT(2, ib_pick_gid(h, 3));   /* RoCEv2 routable IPv6 over link-local */
    IbGidInfo u[2];
    gid_set(&u[0], -1, "ll", 1);          /* types unknown (old library) */
    gid_set(&u[1], -1, "v4", 1);
    CHECK_EQ_INT(1, ib_pick_gid(u, 2));
    CHECK_EQ_INT(0, ib_pick_gid(u, 1));
    CHECK_EQ_INT(-1, ib_pick_gid(&g[5], 1));   /* only empty entries */
}

/* ---- ranks ------------------------------------------------------------------------------- */
/* Every descriptor a peer sends is an ib one with a key; with tamper_key, rank 0 imports rank 1's
 * receive area with a wrong key. */
static bool tamper_key;
static void check_desc(NetMemDesc *a, int rank, int from) {
    CHECK(a->rkey != 0 && a->backend == 2);
    if (tamper_key && rank == 0 && from == 1) a->rkey ^= 0x10;
}

static int ib_open(Side *s, int rank, int n, const BootId *id, int timeout_ms, bool tamper) {
    NetOptions o = {.host_mem = true, .timeout_ms = timeout_ms};   /* MSCCLRT_NET=ib */
    tamper_key = tamper;
    return side_open(s, rank, n, id, &o, "ib", check_desc);
}

static int rank_exchange(int rank, int n, const BootId *id) {
    Side s;
    if (ib_open(&s, rank, n, id, 10000, false)) return 1;
    static const uint64_t sizes[] = {1, 3, 8, 4095, 4097, 65537, (1u << 20) - 1, (1u << 20) + 7,
                                     (3u << 20) + 5, BIG};
    const int nsz = (int)(sizeof sizes / sizeof *sizes);
    unsigned char *src = malloc(BIG + 64);
    if (!src) return 1;
    /* 1: each size, then a signal; the receiver checks the data once the signal shows; the
     * even sizes again through net_put_signal (ib has no pair of its own: put, then signal) */
    for (int k = 0; k < nsz; k++)
        exchange_round(&s, src, sizes[k], (uint64_t)(k * 13) % 64, k);
    CHECK_EQ_INT(0, net_put_signal_max(s.net));   /* the proxy never pairs for ib */
    for (int k = 0; k < nsz; k += 2)
        exchange_round_as(&s, src, sizes[k], (uint64_t)(k * 13) % 64, nsz + 1 + k, true);
    /* 2: NSMALL 3-byte puts (more than a queue pair holds), no signal: flush alone must
     * guarantee they landed (the fake delays every write at the receiver) */
    const int round = 2 * nsz + 1;
    for (uint64_t i = 0; i < 3 * NSMALL; i++) src[i] = pat(rank, i, round);
    for (int q = 0; q < n; q++) {
        if (!net_peer_remote(s.net, q)) continue;
        for (int j = 0; j < NSMALL; j++)
            CHECK_OK(net_put(s.net, s.win_recv[q] + (uint64_t)rank * (BIG + 64) + 3u * (unsigned)j,
                             (uint64_t)(uintptr_t)(src + 3 * j), 3));
    }
    CHECK_OK(net_flush(s.net));
    CHECK_OK(boot_barrier(s.boot));   /* everyone's flush returned: everything has landed */
    for (int q = 0; q < n; q++) {
        if (!net_peer_remote(s.net, q)) continue;
        uint64_t bad = first_bad(s.recv + (size_t)q * (BIG + 64), q, 3 * NSMALL, round);
        if (bad != 3 * NSMALL)
            fprintf(stderr, "rank %d: small puts from rank %d: first bad byte %llu\n", rank, q,
                    (unsigned long long)bad);
        CHECK(bad == 3 * NSMALL);
    }
    CHECK_OK(boot_barrier(s.boot));
    free(src);
    side_close(&s);
    return h_failed ? 1 : 0;
}

/* Rank 0 writes to rank 1 with a wrong rkey: the flush fails naming rank 1. */
static int rank_badkey(int rank, int n, const BootId *id) {
    Side s;
    if (ib_open(&s, rank, n, id, 3000, true)) return 1;
    if (rank == 0) {
        unsigned char src[64] = {1};
        double t0 = now_s();
        mscclrt_result r = net_put(s.net, s.win_recv[1], (uint64_t)(uintptr_t)src, sizeof src);
        if (r == MSCCLRT_SUCCESS) r = net_flush(s.net);
        CHECK_EQ_INT(MSCCLRT_ERR_REMOTE, r);
        CHECK_CONTAINS(mscclrt_last_error(), "rank 1");
        CHECK_CONTAINS(mscclrt_last_error(), "put");
        CHECK_CONTAINS(mscclrt_last_error(), "remote access error");
        fprintf(stderr, "rank 0 saw after %.2f s: %s\n", now_s() - t0, mscclrt_last_error());
        /* later calls fail at once with the same error */
        CHECK_EQ_INT(MSCCLRT_ERR_REMOTE, net_signal(s.net, s.win_ctr[1], 1));
        CHECK_CONTAINS(mscclrt_last_error(), "rank 1");
        CHECK(now_s() - t0 < 5.0);
    }
    CHECK_OK(boot_barrier(s.boot));
    side_close(&s);
    return h_failed ? 1 : 0;
}

/* Rank 1 joins the group but never creates its Net: rank 0's creation fails naming it. */
static int rank_noconnect(int rank, int n, const BootId *id) {
    Boot *b = NULL;
    CHECK_OK(boot_init(&b, id, rank, n, 1500));
    if (!b) return 1;
    if (rank == 1) {
        sleep(30);   /* the parent kills us */
        _exit(0);
    }
    Net *net = NULL;
    NetOptions o = {.host_mem = true, .timeout_ms = 1500};
    double t0 = now_s();
    mscclrt_result r = net_create(&net, b, &o);
    double dt = now_s() - t0;
    CHECK(r == MSCCLRT_ERR_TIMEOUT || r == MSCCLRT_ERR_REMOTE);
    CHECK(net == NULL);
    CHECK_CONTAINS(mscclrt_last_error(), "rank 1");
    CHECK(dt < 10.0);
    fprintf(stderr, "rank 0 saw after %.2f s: %s\n", dt, mscclrt_last_error());
    boot_close(b);
    return h_failed ? 1 : 0;
}

/* The automatic choice over a group: want is the backend every rank must end up with; with
 * mix, rank 1's port is down, so all must take socket. */
static int rank_auto(int rank, int n, const BootId *id, bool mix) {
    unsetenv("MSCCLRT_NET");   /* before anything reads it */
    if (mix && rank == 1) setenv("FAKE_IBV_PORT_STATE", "down", 1);
    Boot *b = NULL;
    CHECK_OK(boot_init(&b, id, rank, n, 10000));
    if (!b) return 1;
    Net *net = NULL;
    NetOptions o = {.host_mem = true, .timeout_ms = 5000, .ifname = "lo"};
    CHECK_OK(net_create(&net, b, &o));
    if (net) CHECK_STR(mix ? "socket" : "ib", net_backend_name(net));
    net_destroy(net);
    boot_close(b);
    return h_failed ? 1 : 0;
}

/* The automatic choice: ib exactly when the library loads and a port is active. */
static int child_auto(const char *want) {
    CHECK_EQ_INT(strcmp(want, "ib") == 0, net_ib_usable());
    return h_failed ? 1 : 0;
}

/* ---- the parent: every rank loads the fake library and is forced onto ib ------------------ */
static char fake_lib[PATH_MAX];

/* "noconnect": rank 1 is the silent one, rank 0 decides. */
static int run(const char *scen, int n, const char *const *hostids, const char *const *env) {
    /* the scenario's variables come after ours, so they may override them */
    const char *all[32] = {"MSCCLRT_IBVERBS_LIB", fake_lib, "MSCCLRT_NET", "ib"};
    int k = 4;
    for (int i = 0; env && env[i] && k < 30; i += 2) {
        all[k++] = env[i];
        all[k++] = env[i + 1];
    }
    all[k] = NULL;
    return run_ranks(scen, n, hostids, all, strcmp(scen, "noconnect") == 0 ? 1 : -1, 0);
}

static int rank_main(const char *scen, int rank, int n, const BootId *id) {
    return strcmp(scen, "exchange") == 0 ? rank_exchange(rank, n, id)
           : strcmp(scen, "badkey") == 0 ? rank_badkey(rank, n, id)
           : strcmp(scen, "noconnect") == 0 ? rank_noconnect(rank, n, id)
           : strcmp(scen, "group-auto") == 0 ? rank_auto(rank, n, id, false)
           : strcmp(scen, "group-mixed") == 0 ? rank_auto(rank, n, id, true)
           : strncmp(scen, "auto-", 5) == 0 ? child_auto(scen + 5) : 2;
}

int main(int argc, char **argv) {
    int rc = net_test_child(argc, argv, 90, rank_main);
    if (rc >= 0) return rc;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", argv[0]);
    snprintf(fake_lib, sizeof fake_lib, "%s/libfake_ibverbs.so", dirname(dir));
    if (access(fake_lib, R_OK) != 0) {
        fprintf(stderr, "%s is missing: build it with 'make fake-ibverbs'\n", fake_lib);
        return 1;
    }
    TEST("net/ib GID choice (RoCEv2 IPv4 first)", test_gid_pick());
    static const char *const one[] = {"nodeA"};
    static const char *const two[] = {"nodeA", "nodeB"};
    static const char *const four[] = {"nodeA", "nodeA", "nodeB", "nodeB"};
    static const char *const four4[] = {"n0", "n1", "n2", "n3"};
    static const char *const down[] = {"FAKE_IBV_PORT_STATE", "down", NULL};
    static const char *const nolib[] = {"MSCCLRT_IBVERBS_LIB", "/nonexistent/libibverbs.so.1",
                                        NULL};
    static const char *const excl[] = {"MSCCLRT_IB_HCA", "^fake", NULL};
    static const char *const delay[] = {"FAKE_IBV_DELAY_US", "300", NULL};
    static const char *const roce[] = {"FAKE_IBV_LINK", "eth", "FAKE_IBV_DELAY_US", "100", NULL};
    TEST("net/ib automatic choice: an active port means ib",
         CHECK_EQ_INT(0, run("auto-ib", 1, one, NULL)));
    TEST("net/ib automatic choice: socket when the port is down, the library is missing or "
         "MSCCLRT_IB_HCA excludes the device",
         CHECK_EQ_INT(0, run("auto-socket", 1, one, down));
         CHECK_EQ_INT(0, run("auto-socket", 1, one, nolib));
         CHECK_EQ_INT(0, run("auto-socket", 1, one, excl)));
    TEST("net/ib automatic choice agrees across the group (ib everywhere; socket when one rank "
         "lacks RDMA)",
         CHECK_EQ_INT(0, run("group-auto", 2, two, NULL));
         CHECK_EQ_INT(0, run("group-mixed", 2, two, NULL)));
    TEST("net/ib puts 1 B..8 MiB, signals after data, flush waits for completions (2 ranks)",
         CHECK_EQ_INT(0, run("exchange", 2, two, delay)));
    TEST("net/ib all pairs across nodes (4 ranks, 2 nodes)",
         CHECK_EQ_INT(0, run("exchange", 4, four, NULL)));
    TEST("net/ib over RoCE GIDs (4 ranks, 4 nodes)",
         CHECK_EQ_INT(0, run("exchange", 4, four4, roce)));
    TEST("net/ib a wrong rkey is a remote access error naming the rank",
         CHECK_EQ_INT(0, run("badkey", 2, two, NULL)));
    TEST("net/ib a peer that never connects is named within the timeout",
         CHECK_EQ_INT(0, run("noconnect", 2, two, NULL)));
    return harness_report();
}

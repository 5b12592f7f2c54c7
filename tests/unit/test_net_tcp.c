/*
 * test_net_tcp.c - the socket transport of port channels between processes of this machine,
 * with host buffers: ranks are split into "nodes" by MSCCLRT_HOSTID in re-executed children
 * (the environment is read once per process). Puts of 1 B to 64 MiB at odd sizes and offsets,
 * each followed by a signal the receiver checks the data behind (ordering over 3 sockets),
 * flush; 4 ranks on 2 nodes; a peer that dies (closed sockets) and a peer that stops answering
 * (SIGSTOP) must give errors naming the rank within the timeout, never a hang.
 */
#define BIG (64u << 20)
#include "test_net_util.h"

static int tcp_open(Side *s, int rank, int n, const BootId *id, int nsocks, int timeout_ms) {
    NetOptions o = {.host_mem = true, .timeout_ms = timeout_ms, .nsocks = nsocks,
                    .force = "socket", .ifname = "lo"};
    return side_open(s, rank, n, id, &o, "socket", NULL);
}

/* ---- every rank puts to every remote rank at many sizes; checks what it receives ------------ */
static int rank_exchange(int rank, int n, const BootId *id) {
    Side s;
    if (tcp_open(&s, rank, n, id, 3, 10000)) return 1;
    static const uint64_t sizes[] = {1, 3, 8, 4095, 4097, 65537, (512u << 10) + 1,
                                     (1u << 20) + 7, (8u << 20) - 5, BIG};
    const int nsz = (int)(sizeof sizes / sizeof *sizes);
    unsigned char *src = malloc(BIG + 64);
    if (!src) return 1;
    for (int k = 0; k < nsz; k++)   /* odd destination offsets */
        exchange_round(&s, src, sizes[k], (uint64_t)(k * 13) % 64, k);
    /* bad input: out of range, not a window, misaligned signal; nothing crashes */
    for (int q = 0; q < n; q++) {
        if (!net_peer_remote(s.net, q)) continue;
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, net_put(s.net, s.win_recv[q] + (uint64_t)n *
                     (BIG + 64) - 4, (uint64_t)(uintptr_t)src, 8));
        CHECK_EQ_INT(MSCCLRT_ERR_INTERNAL, net_put(s.net, 0x1000, (uint64_t)(uintptr_t)src, 8));
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, net_signal(s.net, s.win_ctr[q] + 3, 1));
        break;
    }
    free(src);
    CHECK_OK(boot_barrier(s.boot));
    side_close(&s);
    return h_failed ? 1 : 0;
}

/* ---- faults ------------------------------------------------------------------------------- */
/* mode 1: rank 1 dies after the setup (its sockets close); mode 2: rank 1 stops (SIGSTOP).
 * Rank 0 puts and flushes: the error must name rank 1 within the 1.5 s timeout. */
static int rank_fault(int rank, int n, const BootId *id, int mode) {
    Side s;
    if (tcp_open(&s, rank, n, id, 2, 1500)) return 1;
    CHECK_OK(boot_barrier(s.boot));
    if (rank == 1) {
        if (mode == 1) _exit(0);      /* no goodbye: the kernel closes the sockets */
        raise(SIGSTOP);               /* the parent kills us once rank 0 is done */
        _exit(0);
    }
    usleep(100 * 1000);
    unsigned char *src = calloc(1, BIG);
    double t0 = now_s();
    mscclrt_result r = MSCCLRT_SUCCESS;
    for (int i = 0; i < 4 && r == MSCCLRT_SUCCESS; i++)
        r = net_put(s.net, s.win_recv[1], (uint64_t)(uintptr_t)src, BIG);
    if (r == MSCCLRT_SUCCESS) r = net_flush(s.net);
    double dt = now_s() - t0;
    CHECK(r != MSCCLRT_SUCCESS);
    CHECK_CONTAINS(mscclrt_last_error(), "rank 1");
    if (mode == 1) CHECK_EQ_INT(MSCCLRT_ERR_REMOTE, r);
    else CHECK(r == MSCCLRT_ERR_TIMEOUT || r == MSCCLRT_ERR_REMOTE);
    CHECK(dt < 5.0);
    fprintf(stderr, "rank 0 saw after %.2f s: %s\n", dt, mscclrt_last_error());
    /* later calls keep failing, at once */
    t0 = now_s();
    CHECK(net_put(s.net, s.win_recv[1], (uint64_t)(uintptr_t)src, 8) != MSCCLRT_SUCCESS ||
          net_flush(s.net) != MSCCLRT_SUCCESS);
    CHECK(now_s() - t0 < 5.0);
    free(src);
    side_close(&s);
    return h_failed ? 1 : 0;
}

/* ---- the parent: re-executes itself per rank with MSCCLRT_HOSTID set ---------------------- */
/* Rank 1 of a "fault" scenario is the faulty one: rank 0's verdict counts. */
static int run(const char *scen, int n, const char *const *hostids) {
    return run_ranks(scen, n, hostids, NULL, strncmp(scen, "fault", 5) == 0 ? 1 : -1, 0);
}

static int rank_main(const char *scen, int rank, int n, const BootId *id) {
    return strcmp(scen, "exchange") == 0 ? rank_exchange(rank, n, id)
           : strcmp(scen, "fault-close") == 0 ? rank_fault(rank, n, id, 1)
           : rank_fault(rank, n, id, 2);
}

int main(int argc, char **argv) {
    int rc = net_test_child(argc, argv, 60, rank_main);
    if (rc >= 0) return rc;
    static const char *const two[] = {"nodeA", "nodeB"};
    static const char *const four[] = {"nodeA", "nodeA", "nodeB", "nodeB"};
    static const char *const four4[] = {"n0", "n1", "n2", "n3"};
    TEST("net/tcp puts 1 B..64 MiB, signals after data, flush (2 ranks, 2 nodes)",
         CHECK_EQ_INT(0, run("exchange", 2, two)));
    TEST("net/tcp all pairs across nodes (4 ranks, 2 nodes)",
         CHECK_EQ_INT(0, run("exchange", 4, four)));
    TEST("net/tcp all pairs across nodes (4 ranks, 4 nodes)",
         CHECK_EQ_INT(0, run("exchange", 4, four4)));
    TEST("net/tcp a peer that closes its sockets is named", CHECK_EQ_INT(0, run("fault-close", 2, two)));
    TEST("net/tcp a peer that stops answering is named within the timeout",
         CHECK_EQ_INT(0, run("fault-silent", 2, two)));
    return harness_report();
}

/*
 * test_net_tcp.c - the socket transport of port channels between processes of this machine,
 * with host buffers: ranks are split into "nodes" by MSCCLRT_HOSTID in re-executed children
 * (the environment is read once per process). Puts of 1 B to 64 MiB at odd sizes and offsets,
 * each followed by a signal the receiver checks the data behind (ordering over 3 sockets),
 * flush; 4 ranks on 2 nodes; a peer that dies (closed sockets) and a peer that stops answering
 * (SIGSTOP) must give errors naming the rank within the timeout, never a hang.
 */
#include "net/net_internal.h"
#include "core/err.h"
#include "../harness.h"

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BIG      (64u << 20)
#define TAG_DESC 0x4e54

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

#define CHECK_OK(call) do { mscclrt_result r__ = (call); CHECK_EQ_INT(MSCCLRT_SUCCESS, r__); \
    if (r__ != MSCCLRT_SUCCESS) fprintf(stderr, "  -> %s\n", mscclrt_last_error()); } while (0)

static unsigned char pat(int from, uint64_t i, int round) {
    return (unsigned char)(from * 131 + i * 7 + (i >> 13) + round * 29);
}

/* Every rank owns: a receive area (BIG + 64 bytes per sender) and one 8-byte counter per sender;
 * it registers both and sends their descriptors to every remote rank. */
typedef struct Side {
    Net *net;
    Boot *boot;
    int rank, n;
    unsigned char *recv;          /* [n][BIG + 64] */
    volatile uint64_t *ctr;       /* [n] */
    uint64_t win_recv[16], win_ctr[16];
} Side;

static int side_open(Side *s, int rank, int n, const BootId *id, int nsocks, int timeout_ms) {
    memset(s, 0, sizeof *s);
    s->rank = rank;
    s->n = n;
    CHECK_OK(boot_init(&s->boot, id, rank, n, 10000));
    if (!s->boot) return 1;
    NetOptions o = {.host_mem = true, .timeout_ms = timeout_ms, .nsocks = nsocks,
                    .force = "socket", .ifname = "lo"};
    CHECK_OK(net_create(&s->net, s->boot, &o));
    if (!s->net) return 1;
    CHECK_STR("socket", net_backend_name(s->net));
    s->recv = calloc((size_t)n, BIG + 64);
    s->ctr = calloc((size_t)n, 8);
    if (!s->recv || !s->ctr) return 1;
    NetMemDesc dr, dc;
    CHECK_OK(net_reg(s->net, s, (uint64_t)(uintptr_t)s->recv, (size_t)n * (BIG + 64), &dr));
    CHECK_OK(net_reg(s->net, s, (uint64_t)(uintptr_t)s->ctr, (size_t)n * 8, &dc));
    for (int q = 0; q < n; q++) {
        if (!net_peer_remote(s->net, q)) continue;
        CHECK_OK(boot_send(s->boot, q, TAG_DESC, &dr, sizeof dr));
        CHECK_OK(boot_send(s->boot, q, TAG_DESC, &dc, sizeof dc));
    }
    for (int q = 0; q < n; q++) {
        if (!net_peer_remote(s->net, q)) continue;
        NetMemDesc a, b;
        CHECK_OK(boot_recv(s->boot, q, TAG_DESC, &a, sizeof a));
        CHECK_OK(boot_recv(s->boot, q, TAG_DESC, &b, sizeof b));
        CHECK_OK(net_import(s->net, s, q, &a, &s->win_recv[q]));
        CHECK_OK(net_import(s->net, s, q, &b, &s->win_ctr[q]));
        CHECK(net_is_window(s->win_recv[q]));
    }
    return h_failed ? 1 : 0;
}

static void side_close(Side *s) {
    if (s->net) net_release(s->net, s);
    net_destroy(s->net);
    boot_close(s->boot);
    free(s->recv);
    free((void *)s->ctr);
}

/* Waits until our counter for sender `from` reaches v (bounded). */
static bool wait_ctr(Side *s, int from, uint64_t v) {
    double t0 = now_s();
    while (__atomic_load_n(&s->ctr[from], __ATOMIC_ACQUIRE) < v) {
        if (now_s() - t0 > 20) return false;
        sched_yield();   /* two CPUs are shared by everything */
    }
    return true;
}

/* ---- every rank puts to every remote rank at many sizes; checks what it receives ------------ */
static int rank_exchange(int rank, int n, const BootId *id) {
    Side s;
    if (side_open(&s, rank, n, id, 3, 10000)) return 1;
    static const uint64_t sizes[] = {1, 3, 8, 4095, 4097, 65537, (512u << 10) + 1,
                                     (1u << 20) + 7, (8u << 20) - 5, BIG};
    const int nsz = (int)(sizeof sizes / sizeof *sizes);
    unsigned char *src = malloc(BIG + 64);
    if (!src) return 1;
    for (int k = 0; k < nsz; k++) {
        uint64_t off = (uint64_t)(k * 13) % 64;   /* odd destination offsets */
        for (uint64_t i = 0; i < sizes[k]; i++) src[i] = pat(rank, i, k);
        for (int q = 0; q < n; q++) {
            if (!net_peer_remote(s.net, q)) continue;
            uint64_t dst = s.win_recv[q] + (uint64_t)rank * (BIG + 64) + off;
            CHECK_OK(net_put(s.net, dst, (uint64_t)(uintptr_t)src, sizes[k]));
            CHECK_OK(net_signal(s.net, s.win_ctr[q] + (uint64_t)rank * 8, (uint64_t)k + 1));
        }
        /* the source is reused next round: flush first (data read only before flush returns) */
        CHECK_OK(net_flush(s.net));
        for (int q = 0; q < n; q++) {
            if (!net_peer_remote(s.net, q)) continue;
            CHECK(wait_ctr(&s, q, (uint64_t)k + 1));
            /* the signal is visible, so all of the data before it must be too */
            const unsigned char *got = s.recv + (size_t)q * (BIG + 64) + off;
            uint64_t bad = sizes[k];
            for (uint64_t i = 0; i < sizes[k] && bad == sizes[k]; i++)
                if (got[i] != pat(q, i, k)) bad = i;
            if (bad != sizes[k])
                fprintf(stderr, "rank %d: from rank %d size %llu: first bad byte %llu\n", rank,
                        q, (unsigned long long)sizes[k], (unsigned long long)bad);
            CHECK(bad == sizes[k]);
        }
        CHECK_OK(boot_barrier(s.boot));   /* nobody overwrites a buffer still being checked */
    }
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
    if (side_open(&s, rank, n, id, 2, 1500)) return 1;
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
    net_release(s.net, &s);
    net_destroy(s.net);
    boot_close(s.boot);
    return h_failed ? 1 : 0;
}

/* ---- the parent: re-executes itself per rank with MSCCLRT_HOSTID set ---------------------- */
static const char *self;

static pid_t spawn(const char *scen, int rank, int n, const BootId *id, const char *hostid) {
    char hex[2 * BOOT_ID_BYTES + 1], rs[16], ns[16];
    for (int i = 0; i < BOOT_ID_BYTES; i++) sprintf(hex + 2 * i, "%02x", id->bytes[i]);
    snprintf(rs, sizeof rs, "%d", rank);
    snprintf(ns, sizeof ns, "%d", n);
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0) {
        setenv("MSCCLRT_HOSTID", hostid, 1);
        execl(self, self, "child", scen, rs, ns, hex, (char *)NULL);
        _exit(127);
    }
    return p;
}

static int status_ok(int st) { return WIFEXITED(st) && WEXITSTATUS(st) == 0; }

static int run(const char *scen, int n, const char *const *hostids) {
    BootId id;
    if (boot_get_unique_id(&id) != MSCCLRT_SUCCESS) return n;
    pid_t pids[8];
    for (int r = 0; r < n; r++) pids[r] = spawn(scen, r, n, &id, hostids[r]);
    int bad = 0;
    bool fault = strncmp(scen, "fault", 5) == 0;
    for (int r = 0; r < n; r++) {
        int st = 0;
        if (fault && r == 1) {   /* rank 1 is the faulty one: rank 0's verdict counts */
            kill(pids[1], SIGKILL);
            waitpid(pids[1], &st, 0);
            continue;
        }
        if (waitpid(pids[r], &st, 0) != pids[r] || !status_ok(st)) {
            bad++;
            fprintf(stderr, "%s: rank %d %s %d\n", scen, r, WIFSIGNALED(st) ? "killed by signal"
                    : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        }
    }
    return bad;
}

int main(int argc, char **argv) {
    self = argv[0];
    if (argc == 6 && strcmp(argv[1], "child") == 0) {
        alarm(60);
        BootId id;
        for (int i = 0; i < BOOT_ID_BYTES; i++) {
            unsigned v = 0;
            sscanf(argv[5] + 2 * i, "%2x", &v);
            id.bytes[i] = (unsigned char)v;
        }
        int rank = atoi(argv[3]), n = atoi(argv[4]);
        int rc = strcmp(argv[2], "exchange") == 0 ? rank_exchange(rank, n, &id)
               : strcmp(argv[2], "fault-close") == 0 ? rank_fault(rank, n, &id, 1)
               : rank_fault(rank, n, &id, 2);
        harness_report();
        return rc;
    }
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

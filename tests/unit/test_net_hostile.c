/*
 * test_net_hostile.c - the socket transport against strangers and a hostile member, on
 * 127.0.0.1 with bounded counts and times. Two re-executed ranks on two "nodes"
 * (MSCCLRT_HOSTID); rank 1 accepts rank 0's connections. Setup: 300 idle connections (more than
 * NET_PENDING_MAX) or connections trickling a byte every 100 ms, opened at rank 1's listener
 * before rank 0 connects, must not delay the setup (and the refusals are logged a few lines,
 * not one each); with rank 0 stopped, rank 1's setup must fail within its timeout and say so.
 * Members: a fake rank 0 that knows the secret sends one forged header (region id 0x80000001 or
 * 0xffffffff, an offset that wraps, a count that goes back, per-socket counts that miss their
 * total); rank 1 must report it, naming rank 0, and never crash.
 */
#define BIG 4096u
#include "test_net_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/socket.h>

#define SETUP_MS 3000      /* rank 1's MSCCLRT_NET_TIMEOUT_MS in the setup cases */
#define IDLE 300           /* > NET_PENDING_MAX */
#define DRIPS 4

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* A blocking connection to a, or -1. */
static int stranger(const NetAddr *a) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (a->family == AF_INET6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(a->port);
        memcpy(&s6->sin6_addr, a->addr, 16);
        len = sizeof *s6;
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(a->port);
        memcpy(&s4->sin_addr, a->addr, 4);
        len = sizeof *s4;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&ss, len) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* ---- strangers at rank 1's listener during setup ------------------------------------------- */

typedef struct Strangers {
    const char *scen;
    NetAddr where;
    int fds[IDLE];
    int n;
    pthread_t drip;
    bool dripping;
    _Atomic int stop;
} Strangers;

/* DRIPS connections, each sent one byte (of a plausible header) every 100 ms: under a wait that
 * restarts on every byte, each would hold the setup for 72 x 100 ms. */
static void *drip_main(void *arg) {
    Strangers *st = arg;
    int fd[DRIPS];
    for (int i = 0; i < DRIPS; i++) fd[i] = stranger(&st->where);
    TcpHdr h = {.magic = TCP_MAGIC, .version = TCP_VERSION, .type = TCP_HELLO, .len = TCP_SECRET};
    const unsigned char *b = (const unsigned char *)&h;
    for (size_t k = 0; k < 200 && !atomic_load(&st->stop); k++) {
        for (int i = 0; i < DRIPS; i++)
            if (fd[i] >= 0) send(fd[i], b + k % sizeof h, 1, MSG_NOSIGNAL);
        sleep_ms(100);
    }
    for (int i = 0; i < DRIPS; i++)
        if (fd[i] >= 0) close(fd[i]);
    return NULL;
}

/* NetOptions.on_listen: rank 1 lets the strangers in before rank 0 connects; rank 0 waits a
 * little (so they are ahead of it in the backlog) or, in "stopped", stops for good. */
static void on_listen(void *arg, const struct NetAddr *mine) {
    Strangers *st = arg;
    int rank = atoi(getenv("TEST_RANK"));
    if (rank == 0) {
        if (strcmp(st->scen, "stopped") == 0) raise(SIGSTOP);   /* the parent kills it */
        sleep_ms(300);
        return;
    }
    st->where = *mine;
    if (strcmp(st->scen, "idle") == 0) {
        for (int i = 0; i < IDLE; i++)
            if ((st->fds[st->n] = stranger(mine)) >= 0) st->n++;
    } else {
        st->dripping = pthread_create(&st->drip, NULL, drip_main, st) == 0;
        sleep_ms(50);   /* the drips are connected */
    }
}

static int rank_setup(const char *scen, int rank, int n, const BootId *id) {
    static Strangers st;
    st.scen = scen;
    atomic_init(&st.stop, 0);
    NetOptions o = {.host_mem = true, .timeout_ms = SETUP_MS, .nsocks = 2, .force = "socket",
                    .ifname = "lo", .on_listen = on_listen, .on_listen_arg = &st};
    double t0 = now_s();
    if (strcmp(scen, "stopped") != 0) {   /* connects, and works: a put and a signal each way */
        Side s;
        int bad = side_open(&s, rank, n, id, &o, "socket", NULL);
        double took = now_s() - t0;
        if (rank == 1)
            fprintf(stderr, "%s: rank 1's setup took %.2f s with %d idle and %d trickling "
                    "connection(s)\n", scen, took, st.n, st.dripping ? DRIPS : 0);
        CHECK(took < 2.5);   /* SETUP_MS is 3 s; strangers ahead of rank 0 used to fail it */
        if (!bad) {
            unsigned char src[BIG];
            exchange_round(&s, src, BIG, 0, 0);
        }
        side_close(&s);
    } else if (rank == 1) {   /* rank 0 stopped before connecting: fail, on time, saying so */
        Boot *b = NULL;
        CHECK_OK(boot_init(&b, id, rank, n, 10000));
        Net *net = NULL;
        t0 = now_s();   /* the setup alone (its deadline starts after the address exchange) */
        mscclrt_result r = b ? net_create(&net, b, &o) : MSCCLRT_ERR_INTERNAL;
        double took = now_s() - t0;
        fprintf(stderr, "%s: rank 1's setup failed after %.2f s with %d trickling connection(s): "
                "%s\n", scen, took, st.dripping ? DRIPS : 0, mscclrt_last_error());
        CHECK_EQ_INT(MSCCLRT_ERR_TIMEOUT, r);
        CHECK_CONTAINS(mscclrt_last_error(), "net: rank 1: no connection from rank(s) 0 after");
        CHECK_CONTAINS(mscclrt_last_error(), "(MSCCLRT_NET_TIMEOUT_MS=3000)");
        CHECK(took >= SETUP_MS / 1000.0 - 0.1);
        CHECK(took < SETUP_MS / 1000.0 + 0.7);   /* within its own timeout, not the drips' */
        net_destroy(net);
        boot_close(b);
    } else {   /* rank 0 of "stopped": stops in on_listen; the parent kills it */
        Boot *b = NULL;
        Net *net = NULL;
        if (boot_init(&b, id, rank, n, 10000) == MSCCLRT_SUCCESS) net_create(&net, b, &o);
        return 1;
    }
    atomic_store(&st.stop, 1);
    if (st.dripping) pthread_join(st.drip, NULL);
    for (int i = 0; i < st.n; i++) close(st.fds[i]);
    return h_failed ? 1 : 0;
}

/* ---- a member that forges one header ------------------------------------------------------- */

/* Rank 1: a real Net with one registered region; waits until the forged header is reported. */
static int forge_victim(const char *scen, const BootId *id) {
    Boot *b = NULL;
    CHECK_OK(boot_init(&b, id, 1, 2, 10000));
    if (!b) return 1;
    NetOptions o = {.host_mem = true, .timeout_ms = 5000, .nsocks = 2, .force = "socket",
                    .ifname = "lo"};
    Net *net = NULL;
    CHECK_OK(net_create(&net, b, &o));
    if (!net) return 1;
    static uint64_t area[512];
    NetMemDesc d;
    CHECK_OK(net_reg(net, area, (uint64_t)(uintptr_t)area, sizeof area, &d));
    CHECK_EQ_INT(1, d.id);
    CHECK_OK(boot_barrier(b));   /* registered: the forger may send */
    double t0 = now_s();
    mscclrt_result r = MSCCLRT_SUCCESS;
    while ((r = net_check(net)) == MSCCLRT_SUCCESS && now_s() - t0 < 5) sleep_ms(10);
    fprintf(stderr, "%s: rank 1 reports: %s\n", scen, mscclrt_last_error());
    CHECK_EQ_INT(MSCCLRT_ERR_REMOTE, r);
    CHECK_CONTAINS(mscclrt_last_error(), "rank 0 sent a malformed message on socket 0");
    if (strcmp(scen, "forge-put") == 0)
        CHECK_CONTAINS(mscclrt_last_error(), "PUT of 8 bytes at offset 0 of region 2147483649");
    else if (strcmp(scen, "forge-signal") == 0)
        CHECK_CONTAINS(mscclrt_last_error(), "SIGNAL of offset 0 of region 4294967295");
    else if (strcmp(scen, "forge-wrap") == 0)
        CHECK_CONTAINS(mscclrt_last_error(), "PUT of 16 bytes at offset 18446744073709551608 of region 1");
    else if (strcmp(scen, "forge-split") == 0)
        CHECK_CONTAINS(mscclrt_last_error(), "the per-socket counts after a SIGNAL: they sum to 3, its header says 4");
    else
        CHECK_CONTAINS(mscclrt_last_error(), "SIGNAL counts 3 pieces sent before it, fewer than the 5");
    for (size_t i = 0; i < 512; i++) CHECK_EQ_INT(0, area[i]);   /* nothing was written */
    CHECK_OK(boot_barrier(b));
    net_release(net, area);
    net_destroy(net);
    boot_close(b);
    return h_failed ? 1 : 0;
}

/* Rank 0: speaks the setup protocol by hand (it knows the secret), then sends a forged header. */
static int forge_attacker(const char *scen, const BootId *id) {
    Boot *b = NULL;
    CHECK_OK(boot_init(&b, id, 0, 2, 10000));
    if (!b) return 1;
    NetAddr addrs[2];
    memset(addrs, 0, sizeof addrs);
    CHECK_OK(boot_allgather(b, addrs, sizeof *addrs));
    int fd[2] = {-1, -1};
    for (int i = 0; i < 2; i++) {
        CHECK_OK(net_sock_connect(&addrs[1], 1, 5000, &fd[i]));
        TcpHdr h = {.magic = TCP_MAGIC, .version = TCP_VERSION, .type = TCP_HELLO, .rank = 0,
                    .region = (uint32_t)i, .off = 2, .len = TCP_SECRET};
        CHECK_EQ_INT(0, net_sock_send_all(fd[i], &h, sizeof h, 5000));
        CHECK_EQ_INT(0, net_sock_send_all(fd[i], boot_secret(b), TCP_SECRET, 5000));
    }
    CHECK_OK(boot_barrier(b));
    TcpHdr h = {.magic = TCP_MAGIC, .version = TCP_VERSION, .rank = 0};
    uint64_t payload[2] = {~0ull, ~0ull};
    if (strcmp(scen, "forge-put") == 0) {
        h.type = TCP_PUT, h.region = 0x80000001u, h.len = 8;
    } else if (strcmp(scen, "forge-signal") == 0) {
        h.type = TCP_SIGNAL, h.region = 0xffffffffu, h.len = ~0ull;
    } else if (strcmp(scen, "forge-wrap") == 0) {   /* off + len wraps to 8: inside, if added */
        h.type = TCP_PUT, h.region = 1, h.off = ~0ull - 7, h.len = 16;
    } else if (strcmp(scen, "forge-split") == 0) {   /* per-socket counts of 3 under a total of 4 */
        h.type = TCP_SIGNAL, h.region = 1, h.len = 1, h.arg = 4;
    } else {   /* a signal whose count goes back (a flush of 5 first) */
        TcpHdr f = {.magic = TCP_MAGIC, .version = TCP_VERSION, .type = TCP_FLUSH, .arg = 5};
        const uint64_t counts[2] = {3, 2};   /* per socket, after every SIGNAL/FLUSH header */
        CHECK_EQ_INT(0, net_sock_send_all(fd[0], &f, sizeof f, 5000));
        CHECK_EQ_INT(0, net_sock_send_all(fd[0], counts, sizeof counts, 5000));
        h.type = TCP_SIGNAL, h.region = 1, h.len = 1, h.arg = 3;
    }
    CHECK_EQ_INT(0, net_sock_send_all(fd[0], &h, sizeof h, 5000));
    if (strcmp(scen, "forge-split") == 0) {
        const uint64_t counts[2] = {1, 2};
        CHECK_EQ_INT(0, net_sock_send_all(fd[0], counts, sizeof counts, 5000));
    }
    if (h.type == TCP_PUT) net_sock_send_all(fd[0], payload, h.len, 1000);
    CHECK_OK(boot_barrier(b));   /* rank 1 has reported it */
    close(fd[0]);
    close(fd[1]);
    boot_close(b);
    return h_failed ? 1 : 0;
}

/* ---- the parent ------------------------------------------------------------------------------ */

static char log_path[96];

/* Runs scenario scen with two ranks; "stopped" stops rank 0, whose verdict does not count. */
static int run(const char *scen) {
    static const char *const hostid[] = {"nodeA", "nodeB"};
    const char *env[] = {"MSCCLRT_DEBUG", "WARN", "MSCCLRT_DEBUG_FILE", log_path, NULL};
    return run_ranks(scen, 2, hostid, env, strcmp(scen, "stopped") == 0 ? 0 : -1, 1);
}

/* Lines of the ranks' log that contain what. */
static int log_lines(const char *what) {
    FILE *f = fopen(log_path, "r");
    int n = 0;
    char line[4096];
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, what)) n++;
    if (f) fclose(f);
    return n;
}

static int rank_main(const char *scen, int rank, int n, const BootId *id) {
    char rs[16];
    snprintf(rs, sizeof rs, "%d", rank);
    setenv("TEST_RANK", rs, 1);
    return strncmp(scen, "forge", 5) != 0 ? rank_setup(scen, rank, n, id)
           : rank == 0 ? forge_attacker(scen, id) : forge_victim(scen, id);
}

int main(int argc, char **argv) {
    int rc = net_test_child(argc, argv, 60, rank_main);
    if (rc >= 0) return rc;
    alarm(120);
    struct rlimit lim;   /* rank 1 holds the idle connections on both ends */
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < 2048 && lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max < 2048 ? lim.rlim_max : 2048;
        setrlimit(RLIMIT_NOFILE, &lim);
    }
    snprintf(log_path, sizeof log_path, "/tmp/mscclrt-test-net-hostile.%d.log", (int)getpid());
    unlink(log_path);
    TEST("net/setup with 300 idle connections at the listener (more than the pending cap)",
         CHECK_EQ_INT(0, run("idle")));
    int warns = log_lines(" WARN ");
    fprintf(stderr, "ranks' log: %d WARN lines, %d about the pending cap\n", warns,
            log_lines("connections are waiting to introduce themselves"));
    CHECK(log_lines("connections are waiting to introduce themselves") >= 1);
    CHECK(warns <= 5);   /* rate-limited: not one line per refused connection */
    TEST("net/setup with connections trickling a byte every 100 ms", CHECK_EQ_INT(0, run("drip")));
    TEST("net/setup fails within its timeout when a rank never connects, whatever trickles in",
         CHECK_EQ_INT(0, run("stopped")));
    TEST("net/forged PUT to region 0x80000001 is refused", CHECK_EQ_INT(0, run("forge-put")));
    TEST("net/forged SIGNAL to region 0xffffffff is refused", CHECK_EQ_INT(0, run("forge-signal")));
    TEST("net/forged PUT whose offset + length wraps is refused", CHECK_EQ_INT(0, run("forge-wrap")));
    TEST("net/forged SIGNAL whose count goes back is refused", CHECK_EQ_INT(0, run("forge-count")));
    TEST("net/forged SIGNAL whose per-socket counts miss its total is refused",
         CHECK_EQ_INT(0, run("forge-split")));
    if (!h_failed) unlink(log_path);
    return harness_report();
}

/*
 * test_boot.c - the bootstrap with real sockets on 127.0.0.1: forked processes (2, 3, 8 ranks)
 * doing allgather, tagged send/recv and barriers; a wrong secret and stray connections that
 * must not disturb the rendezvous; missing ranks named in timeout messages; environment init
 * (torchrun, Open MPI variables) and MSCCLRT_HOSTID node splitting in re-executed children;
 * and thread mode. Every child runs under alarm(), so no case can hang the suite.
 */
#include "bootstrap/boot_internal.h"
#include "core/err.h"
#include "../harness.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHILD_ALARM_S 30

typedef int (*RankFn)(int rank, int n, const BootId *id, void *arg);

static pid_t spawn(RankFn fn, int rank, int n, const BootId *id, void *arg) {
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0) {
        alarm(CHILD_ALARM_S);
        int rc = fn(rank, n, id, arg);
        fflush(stdout);
        fflush(stderr);
        _exit(rc ? rc : h_failed ? 1 : 0);
    }
    return p;
}

/* Waits for every child; returns how many did not exit 0 (and says why). */
static int wait_all(const pid_t *pids, int n) {
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int st = 0;
        if (pids[i] <= 0 || waitpid(pids[i], &st, 0) != pids[i]) { bad++; continue; }
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
        bad++;
        if (WIFSIGNALED(st)) fprintf(stderr, "child %d killed by signal %d\n", i, WTERMSIG(st));
        else fprintf(stderr, "child %d exited %d\n", i, WEXITSTATUS(st));
    }
    return bad;
}

static int run_group(int n, RankFn fn, void *arg) {
    BootId id;
    if (boot_get_unique_id(&id) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "boot_get_unique_id: %s\n", mscclrt_last_error());
        return n;
    }
    pid_t pids[16];
    for (int r = 0; r < n; r++) pids[r] = spawn(fn, r, n, &id, arg);
    return wait_all(pids, n);
}

#define CHECK_OK(call) do { mscclrt_result r__ = (call); CHECK_EQ_INT(MSCCLRT_SUCCESS, r__); \
    if (r__ != MSCCLRT_SUCCESS) fprintf(stderr, "  -> %s\n", mscclrt_last_error()); } while (0)

/* ---- the basic collective workout ------------------------------------------------------------ */

static int ring_above = -1;   /* >= 0: force the ring allgather above this many ranks */

static int rank_basic(int rank, int n, const BootId *id, void *arg) {
    size_t big = (size_t)(uintptr_t)arg;
    Boot *b = NULL;
    CHECK_OK(boot_init(&b, id, rank, n, 10000));
    if (!b) return 1;
    if (ring_above >= 0) boot_set_ring_above(b, ring_above);
    CHECK_EQ_INT(rank, boot_rank(b));
    CHECK_EQ_INT(n, boot_nranks(b));
    CHECK_EQ_INT(1, boot_nnodes(b));
    CHECK_EQ_INT(0, boot_node(b));
    CHECK_EQ_INT(rank, boot_local_rank(b));
    CHECK_EQ_INT(n, boot_local_size(b));
    CHECK_EQ_INT(getpid(), boot_pid_of(b, rank));

    /* allgather of small slices */
    int *v = calloc((size_t)n * 16, sizeof(int));
    for (int i = 0; i < 16; i++) v[rank * 16 + i] = rank * 1000 + i;
    CHECK_OK(boot_allgather(b, v, 16 * sizeof(int)));
    int bad = 0;
    for (int r = 0; r < n; r++)
        for (int i = 0; i < 16; i++) bad += v[r * 16 + i] != r * 1000 + i;
    CHECK_EQ_INT(0, bad);
    free(v);

    /* allgather of slices larger than socket buffers: sends must drain while they block */
    if (big) {
        unsigned char *g = malloc(big * (size_t)n);
        for (size_t i = 0; i < big; i++) g[(size_t)rank * big + i] = (unsigned char)(rank * 31 + i * 7);
        CHECK_OK(boot_allgather(b, g, big));
        bad = 0;
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < big; i++) bad += g[(size_t)r * big + i] != (unsigned char)(r * 31 + i * 7);
        CHECK_EQ_INT(0, bad);
        free(g);
    }

    /* tags: send tag 7 then tag 3 (twice, FIFO) to the next rank; receive in another order */
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    int a = 100 + rank, c1 = 300 + rank, c2 = 400 + rank, x = -1;
    CHECK_OK(boot_send(b, next, 7, &a, sizeof a));
    CHECK_OK(boot_send(b, next, 3, &c1, sizeof c1));
    CHECK_OK(boot_send(b, next, 3, &c2, sizeof c2));
    CHECK_OK(boot_recv(b, prev, 3, &x, sizeof x));
    CHECK_EQ_INT(300 + prev, x);
    CHECK_OK(boot_recv(b, prev, 7, &x, sizeof x));
    CHECK_EQ_INT(100 + prev, x);
    CHECK_OK(boot_recv(b, prev, 3, &x, sizeof x));
    CHECK_EQ_INT(400 + prev, x);
    /* to oneself */
    CHECK_OK(boot_send(b, rank, 5, &a, sizeof a));
    CHECK_OK(boot_recv(b, rank, 5, &x, sizeof x));
    CHECK_EQ_INT(a, x);
    /* a length mismatch is the peer's error, named */
    CHECK_OK(boot_send(b, next, 11, &a, sizeof a));
    long long wide;
    CHECK_EQ_INT(MSCCLRT_ERR_REMOTE, boot_recv(b, prev, 11, &wide, sizeof wide));
    CHECK_CONTAINS(mscclrt_last_error(), "sent 4 bytes for tag 11, expected 8");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, boot_send(b, n, 0, &a, sizeof a));
    for (int i = 0; i < 5; i++) CHECK_OK(boot_barrier(b));
    boot_close(b);
    return 0;
}

/* ---- wrong secret and strays ------------------------------------------------------------------- */

static int rank_impostor(int rank, int n, const BootId *id, void *arg) {
    BootId fake;
    BootIdWire w;
    memcpy(&w, id->bytes, sizeof w);
    w.secret[5] ^= 0x5a;
    memcpy(fake.bytes, &w, sizeof w);
    Boot *b = NULL;
    mscclrt_result r = boot_init(&b, &fake, rank, n, 3000);
    CHECK_EQ_INT(MSCCLRT_ERR_REMOTE, r);
    CHECK_CONTAINS(mscclrt_last_error(), "closed the connection without an answer");
    CHECK(b == NULL);
    return 0;
}

static int rank_barrier_only(int rank, int n, const BootId *id, void *arg) {
    Boot *b = NULL;
    CHECK_OK(boot_init(&b, id, rank, n, 10000));
    if (!b) return 1;
    int v[8] = {0};
    v[rank] = rank + 1;
    CHECK_OK(boot_allgather(b, v, sizeof(int)));
    for (int r = 0; r < n; r++) CHECK_EQ_INT(r + 1, v[r]);
    CHECK_OK(boot_barrier(b));
    boot_close(b);
    return 0;
}

/* A raw TCP connection to the root: silent, or sending junk. */
static int stray_connect(const BootId *id, const char *junk, size_t len) {
    const BootIdWire *w = (const BootIdWire *)id->bytes;
    int fd;
    if (boot_connect(&w->root, boot_now_ms() + 2000, "root", &fd) != MSCCLRT_SUCCESS) return -1;
    if (len) boot_write_all(fd, junk, len, boot_now_ms() + 1000, "root");
    return fd;
}

static void test_secret(void) {
    BootId id;
    CHECK_OK(boot_get_unique_id(&id));
    /* strays first: one says nothing, one sends a full-size hello of junk */
    char junk[sizeof(BootHello)];
    memset(junk, 'x', sizeof junk);
    int s1 = stray_connect(&id, NULL, 0), s2 = stray_connect(&id, junk, sizeof junk);
    CHECK(s1 >= 0);
    CHECK(s2 >= 0);
    pid_t imp = spawn(rank_impostor, 1, 2, &id, NULL);
    CHECK_EQ_INT(0, wait_all(&imp, 1));   /* refused before the real ranks even start */
    pid_t pids[2];
    for (int r = 0; r < 2; r++) pids[r] = spawn(rank_barrier_only, r, 2, &id, NULL);
    CHECK_EQ_INT(0, wait_all(pids, 2));
    if (s1 >= 0) close(s1);
    if (s2 >= 0) close(s2);
}

/* ---- missing ranks ----------------------------------------------------------------------------- */

static int rank_expect_missing(int rank, int n, const BootId *id, void *arg) {
    Boot *b = NULL;
    int64_t t0 = boot_now_ms();
    mscclrt_result r = boot_init(&b, id, rank, n, 1500);
    int64_t took = boot_now_ms() - t0;
    CHECK_EQ_INT(MSCCLRT_ERR_TIMEOUT, r);
    CHECK_CONTAINS(mscclrt_last_error(), (const char *)arg);
    CHECK(took < 1500 + 1000);
    return 0;
}

/* After joining, rank 2 stays alive but silent: allgather names it; recv names its peer. */
static int rank_silent_peer(int rank, int n, const BootId *id, void *arg) {
    Boot *b = NULL;
    CHECK_OK(boot_init(&b, id, rank, n, 1000));
    if (!b) return 1;
    if (ring_above >= 0) boot_set_ring_above(b, ring_above);
    if (rank == 2) {
        struct timespec ts = {3, 500000000};
        nanosleep(&ts, NULL);
        boot_close(b);
        return 0;
    }
    int v[3] = {0};
    CHECK_EQ_INT(MSCCLRT_ERR_TIMEOUT, boot_allgather(b, v, sizeof(int)));
    if (ring_above < 0 || rank == 0)   /* in a ring only rank 0 waits on rank 2 directly */
        CHECK_CONTAINS(mscclrt_last_error(), "no answer from rank 2");
    else
        CHECK_CONTAINS(mscclrt_last_error(), "at ring step 2 of 2: no answer from rank 0");
    if (rank == 0) {   /* rank 1 stays connected meanwhile, so this is a timeout, not a close */
        int x;
        CHECK_EQ_INT(MSCCLRT_ERR_TIMEOUT, boot_recv(b, 1, 9, &x, sizeof x));
        CHECK_CONTAINS(mscclrt_last_error(), "rank 1 did not send tag 9 within 1000 ms");
    } else {
        struct timespec ts = {2, 0};
        nanosleep(&ts, NULL);
    }
    boot_close(b);
    return 0;
}

static void test_missing(void) {
    static const char missing1[] = "rank 1 did not arrive (2 of 3 joined)";
    static const char missing3[] = "ranks 1-3 did not arrive (2 of 5 joined)";
    BootId id;
    CHECK_OK(boot_get_unique_id(&id));
    pid_t pids[2];
    pids[0] = spawn(rank_expect_missing, 0, 3, &id, (void *)missing1);
    pids[1] = spawn(rank_expect_missing, 2, 3, &id, (void *)missing1);
    CHECK_EQ_INT(0, wait_all(pids, 2));

    CHECK_OK(boot_get_unique_id(&id));
    pids[0] = spawn(rank_expect_missing, 0, 5, &id, (void *)missing3);
    pids[1] = spawn(rank_expect_missing, 4, 5, &id, (void *)missing3);
    CHECK_EQ_INT(0, wait_all(pids, 2));

    CHECK_EQ_INT(0, run_group(3, rank_silent_peer, NULL));
}

/* ---- environment init: re-executed children read a fresh environment ---------------------------- */

static int free_port(void) {
    BootAddr a = {.family = 4, .addr = {127, 0, 0, 1}}, bound;
    int fd;
    if (boot_listen(&a, false, &fd, &bound) != MSCCLRT_SUCCESS) return 0;
    close(fd);
    return bound.port_be[0] << 8 | bound.port_be[1];
}

/* env: NAME=VALUE strings (NULL-terminated) set in the child before exec. */
static pid_t spawn_env(char *const *env) {
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0) {
        alarm(CHILD_ALARM_S);
        for (const char *const *ev = (const char *const *)env; *ev; ev++) putenv((char *)*ev);
        static char name[] = "test_boot", flag[] = "--env-child";
        char *argv[] = {name, flag, NULL};
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    return p;
}

/* The child: joins from the environment; TEST_HOSTIDS="A,A,B,B" gives each rank's MSCCLRT_HOSTID
 * so it can check the node grouping. */
static int env_child(void) {
    /* TEST_ROUNDS=2: join a second group on the same port right after the first */
    int rounds = getenv("TEST_ROUNDS") ? atoi(getenv("TEST_ROUNDS")) : 1;
    for (int i = 1; i < rounds; i++) {
        Boot *b = NULL;
        CHECK_OK(boot_init_env(&b));
        if (b) CHECK_OK(boot_barrier(b));
        boot_close(b);
    }
    Boot *b = NULL;
    CHECK_OK(boot_init_env(&b));
    if (!b) return harness_report();
    int rank = boot_rank(b), n = boot_nranks(b);
    int v[16] = {0};
    v[rank] = 7 * rank + 1;
    CHECK_OK(boot_allgather(b, v, sizeof(int)));
    for (int r = 0; r < n && r < 16; r++) CHECK_EQ_INT(7 * r + 1, v[r]);
    const char *ids = getenv("TEST_HOSTIDS");
    if (ids) {
        char list[16][16];
        int k = 0;
        for (const char *p = ids; *p && k < 16; k++) {
            size_t l = strcspn(p, ",");
            snprintf(list[k], sizeof list[k], "%.*s", (int)l, p);
            p += l + (p[l] == ',');
        }
        int node_of[16], nnodes = 0, local = 0, lsize = 0;
        for (int r = 0; r < n; r++) {   /* nodes numbered by first appearance */
            node_of[r] = -1;
            for (int q = 0; q < r && node_of[r] < 0; q++)
                if (strcmp(list[q], list[r]) == 0) node_of[r] = node_of[q];
            if (node_of[r] < 0) node_of[r] = nnodes++;
            if (strcmp(list[r], list[rank]) == 0) {
                lsize++;
                if (r < rank) local++;
            }
        }
        int node = node_of[rank];
        CHECK_EQ_INT(nnodes, boot_nnodes(b));
        CHECK_EQ_INT(node, boot_node(b));
        CHECK_EQ_INT(local, boot_local_rank(b));
        CHECK_EQ_INT(lsize, boot_local_size(b));
    }
    CHECK_OK(boot_barrier(b));
    boot_close(b);
    return harness_report();
}

/* Launches n env children; style 0 = torchrun variables, 1 = Open MPI + MSCCLRT_MASTER_*,
 * 2 = Slurm + MSCCLRT_MASTER_* + MSCCLRT_BOOT_SECRET. hostids may be NULL. */
static int run_env_group(int n, int style, const char *hostids) {
    int port = free_port();
    if (!port) return n;
    static char envs[8][10][96];
    pid_t pids[8];
    for (int r = 0; r < n; r++) {
        char *env[10];
        int k = 0;
        const char *fmt[3][5] = {
            {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=%d", "RANK=%d", "WORLD_SIZE=%d", "LOCAL_RANK=%d"},
            {"MSCCLRT_MASTER_ADDR=localhost", "MSCCLRT_MASTER_PORT=%d", "OMPI_COMM_WORLD_RANK=%d",
             "OMPI_COMM_WORLD_SIZE=%d", "OMPI_COMM_WORLD_LOCAL_RANK=%d"},
            {"MSCCLRT_MASTER_ADDR=127.0.0.1", "MSCCLRT_MASTER_PORT=%d", "SLURM_PROCID=%d",
             "SLURM_NTASKS=%d", "SLURM_LOCALID=%d"},
        };
        snprintf(envs[r][k], 96, "%s", fmt[style][0]), env[k] = envs[r][k], k++;
        snprintf(envs[r][k], 96, fmt[style][1], port), env[k] = envs[r][k], k++;
        snprintf(envs[r][k], 96, fmt[style][2], r), env[k] = envs[r][k], k++;
        snprintf(envs[r][k], 96, fmt[style][3], n), env[k] = envs[r][k], k++;
        if (!hostids) snprintf(envs[r][k], 96, fmt[style][4], r), env[k] = envs[r][k], k++;
        snprintf(envs[r][k], 96, "MSCCLRT_BOOT_TIMEOUT_MS=10000"), env[k] = envs[r][k], k++;
        if (style == 0) snprintf(envs[r][k], 96, "TEST_ROUNDS=3"), env[k] = envs[r][k], k++;
        if (style == 2) snprintf(envs[r][k], 96, "MSCCLRT_BOOT_SECRET=s3cret"), env[k] = envs[r][k], k++;
        if (hostids) {
            const char *p = hostids;
            for (int q = 0; q < r; q++) p += strcspn(p, ",") + 1;
            snprintf(envs[r][k], 96, "MSCCLRT_HOSTID=%.*s", (int)strcspn(p, ","), p), env[k] = envs[r][k], k++;
            snprintf(envs[r][k], 96, "TEST_HOSTIDS=%s", hostids), env[k] = envs[r][k], k++;
        }
        env[k] = NULL;
        pids[r] = spawn_env(env);
        if (r == 0) {   /* let rank 0 come last sometimes: ranks must retry until the root is up */
            struct timespec ts = {0, 50 * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    return wait_all(pids, n);
}

static void test_env_missing(void) {
    const char *vars[] = {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", NULL};
    for (int i = 0; vars[i]; i++) unsetenv(vars[i]);
    Boot *b = (Boot *)1;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_USAGE, boot_init_env(&b));
    CHECK(b == NULL);
    CHECK_CONTAINS(mscclrt_last_error(), "missing: MSCCLRT_MASTER_ADDR/MASTER_ADDR");
}

/* ---- thread mode ------------------------------------------------------------------------------- */

typedef struct { const BootId *id; int rank, n, bad; } ThreadArg;

static void *thread_rank(void *p) {
    ThreadArg *t = p;
    Boot *b = NULL;
    if (boot_init(&b, t->id, t->rank, t->n, 10000) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "thread rank %d: %s\n", t->rank, mscclrt_last_error());
        t->bad++;
        return NULL;
    }
    int v[8] = {0};
    v[t->rank] = t->rank * 3;
    if (boot_allgather(b, v, sizeof(int)) != MSCCLRT_SUCCESS) t->bad++;
    for (int r = 0; r < t->n; r++) t->bad += v[r] != r * 3;
    int next = (t->rank + 1) % t->n, prev = (t->rank + t->n - 1) % t->n, x = -1;
    if (boot_send(b, next, 1, &t->rank, sizeof(int)) != MSCCLRT_SUCCESS) t->bad++;
    if (boot_recv(b, prev, 1, &x, sizeof x) != MSCCLRT_SUCCESS || x != prev) t->bad++;
    t->bad += boot_local_size(b) != t->n || boot_local_rank(b) != t->rank || boot_pid_of(b, prev) != getpid();
    if (boot_barrier(b) != MSCCLRT_SUCCESS) t->bad++;
    boot_close(b);
    return NULL;
}

static void test_threads(int n) {
    BootId id;
    CHECK_OK(boot_get_unique_id(&id));
    pthread_t th[8];
    ThreadArg args[8];
    for (int r = 0; r < n; r++) {
        args[r] = (ThreadArg){.id = &id, .rank = r, .n = n};
        pthread_create(&th[r], NULL, thread_rank, &args[r]);
    }
    int bad = 0;
    for (int r = 0; r < n; r++) {
        pthread_join(th[r], NULL);
        bad += args[r].bad;
    }
    CHECK_EQ_INT(0, bad);
}

/* ---- argument checks -------------------------------------------------------------------------- */

static void test_args(void) {
    BootId id;
    memset(&id, 0, sizeof id);
    Boot *b = (Boot *)1;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, boot_init(&b, &id, 0, 2, 100));
    CHECK(b == NULL);
    CHECK_CONTAINS(mscclrt_last_error(), "not a bootstrap id");
    CHECK_OK(boot_get_unique_id(&id));
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, boot_init(&b, &id, 2, 2, 100));
    CHECK_CONTAINS(mscclrt_last_error(), "rank 2 out of range [0, 2)");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, boot_init(&b, &id, 0, 0, 100));
    /* a one-rank group works, and consumes the id's root */
    CHECK_OK(boot_init(&b, &id, 0, 1, 2000));
    if (b) {
        int x = 42;
        CHECK_OK(boot_allgather(b, &x, sizeof x));
        CHECK_OK(boot_barrier(b));
        boot_close(b);
    }
    /* a root that is not there: the connect retries until the deadline, then names it */
    BootIdWire w;
    memcpy(&w, id.bytes, sizeof w);
    BootAddr lo = {.family = 4, .addr = {127, 0, 0, 1}};
    int fd;
    CHECK_OK(boot_listen(&lo, false, &fd, &w.root));
    close(fd);   /* the port is now (very likely) closed */
    memcpy(id.bytes, &w, sizeof w);
    int64_t t0 = boot_now_ms();
    CHECK_EQ_INT(MSCCLRT_ERR_TIMEOUT, boot_init(&b, &id, 0, 2, 300));
    CHECK(boot_now_ms() - t0 >= 250);
    CHECK_CONTAINS(mscclrt_last_error(), "the bootstrap root at 127.0.0.1:");
    CHECK_CONTAINS(mscclrt_last_error(), "did not accept a connection");
    char list[64];
    int rs[] = {1, 2, 3, 5, 7, 8};
    boot_rank_list(list, sizeof list, rs, 6);
    CHECK_STR("1-3, 5, 7-8", list);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--env-child") == 0) return env_child();
    alarm(240);
    setenv("MSCCLRT_SOCKET_IFNAME", "lo", 0);   /* roots on 127.0.0.1, whatever the host's network */
    TEST("boot/args", test_args());
    TEST("boot/fork2", CHECK_EQ_INT(0, run_group(2, rank_basic, (void *)(uintptr_t)0)));
    TEST("boot/fork3-large", CHECK_EQ_INT(0, run_group(3, rank_basic, (void *)(uintptr_t)(3u << 20))));
    TEST("boot/fork8", CHECK_EQ_INT(0, run_group(8, rank_basic, (void *)(uintptr_t)4096)));
    ring_above = 1;
    TEST("boot/fork8-ring", CHECK_EQ_INT(0, run_group(8, rank_basic, (void *)(uintptr_t)(1u << 20))));
    TEST("boot/ring-silent-peer", CHECK_EQ_INT(0, run_group(3, rank_silent_peer, NULL)));
    ring_above = -1;
    TEST("boot/wrong-secret", test_secret());
    TEST("boot/missing-rank", test_missing());
    TEST("boot/env-torchrun", CHECK_EQ_INT(0, run_env_group(3, 0, NULL)));
    TEST("boot/env-ompi-hostid", CHECK_EQ_INT(0, run_env_group(4, 1, "nodeA,nodeA,nodeB,nodeB")));
    TEST("boot/env-slurm-hostid-interleaved", CHECK_EQ_INT(0, run_env_group(4, 2, "x,y,x,y")));
    TEST("boot/env-missing", test_env_missing());
    TEST("boot/threads", test_threads(4));
    return harness_report();
}

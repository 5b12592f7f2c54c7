/*
 * test_boot_flood.c - the bootstrap against anyone who can reach its ports, on 127.0.0.1 with
 * bounded loops. The root runs in a re-executed "host" process (its own memory, CPU time,
 * descriptor limit and log), which reports its RSS and CPU time on request. Cases: connect/close
 * cycles must not grow the root's memory; idle connections are closed after the hello deadline;
 * genuine ranks complete init while hundreds of idle connections are open; with a descriptor
 * limit of 32 the root neither spins nor stays silent, and still serves the ranks; a rank the
 * root tells BK_BUSY connects again. The same for a rank's own listener, between two forked
 * ranks; and what an authenticated peer may make a rank hold: an announced 4 GiB message is
 * refused with a clear error, an announced 16 MiB one costs only the bytes that arrived, and
 * unrequested messages queue only up to the limit.
 */
#include "bootstrap/boot_internal.h"
#include "core/err.h"
#include "../harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHILD_ALARM_S 60

#define CHECK_OK(call) do { mscclrt_result r__ = (call); CHECK_EQ_INT(MSCCLRT_SUCCESS, r__); \
    if (r__ != MSCCLRT_SUCCESS) fprintf(stderr, "  -> %s\n", mscclrt_last_error()); } while (0)

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* ---- the host: a process that runs only a root ------------------------------------------------ */

/* argv: --host NOFILE. Writes the id on stdout, then answers each byte read from stdin with
 * "RSS_KB CPU_MS\n"; exits at EOF. */
static int host_main(int nofile) {
    if (nofile > 0) {
        struct rlimit lim = {(rlim_t)nofile, (rlim_t)nofile};
        if (setrlimit(RLIMIT_NOFILE, &lim) != 0) return 3;
    }
    BootId id;
    if (boot_get_unique_id(&id) != MSCCLRT_SUCCESS) return 2;
    if (write(1, &id, sizeof id) != (ssize_t)sizeof id) return 2;
    char c;
    while (read(0, &c, 1) == 1) {
        long rss = 0, pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (f) {
            if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
            fclose(f);
        }
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        long cpu = (long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
                   (long)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
        char line[64];
        int n = snprintf(line, sizeof line, "%ld %ld\n", rss * (sysconf(_SC_PAGESIZE) / 1024), cpu);
        if (write(1, line, (size_t)n) != n) return 2;
    }
    return 0;
}

typedef struct { pid_t pid; int to, from; BootId id; } Host;

/* Starts a host; log: MSCCLRT_DEBUG_FILE for it (with MSCCLRT_DEBUG=WARN), or NULL. */
static bool host_start(Host *h, int nofile, const char *log) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return false;
    fflush(stdout);
    fflush(stderr);
    h->pid = fork();
    if (h->pid == 0) {
        alarm(CHILD_ALARM_S);
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        setenv("MSCCLRT_BOOT_TIMEOUT_MS", "40000", 1);   /* the root outlives every case */
        if (log) {
            setenv("MSCCLRT_DEBUG", "WARN", 1);
            setenv("MSCCLRT_DEBUG_FILE", log, 1);
        }
        char arg[16], self[] = "test_boot_flood", flag[] = "--host";
        snprintf(arg, sizeof arg, "%d", nofile);
        char *argv[] = {self, flag, arg, NULL};
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    h->to = in[1];
    h->from = out[0];
    size_t got = 0;
    while (got < sizeof h->id) {
        ssize_t n = read(h->from, h->id.bytes + got, sizeof h->id - got);
        if (n <= 0) return false;
        got += (size_t)n;
    }
    return true;
}

static void host_stats(Host *h, long *rss_kb, long *cpu_ms) {
    char line[64] = "";
    size_t n = 0;
    *rss_kb = *cpu_ms = -1;
    if (write(h->to, "s", 1) != 1) return;
    while (n < sizeof line - 1 && read(h->from, line + n, 1) == 1 && line[n] != '\n') n++;
    line[n] = '\0';
    sscanf(line, "%ld %ld", rss_kb, cpu_ms);
}

static int host_stop(Host *h) {
    close(h->to);
    close(h->from);
    int st = 0;
    waitpid(h->pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- connections from nobody in particular --------------------------------------------------- */

/* A connected socket to a (blocking connect), or -1. */
static int raw_connect(const BootAddr *a) {
    BootSockAddr s;
    socklen_t len;
    boot_addr_to_sock(a, &s, &len);
    int fd = socket(s.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, &s.sa, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* n cycles of connect, then close with a reset (no TIME_WAIT left behind); returns how many
 * connected. */
static int cycles(const BootAddr *a, int n) {
    int ok = 0;
    for (int i = 0; i < n; i++) {
        int fd = raw_connect(a);
        if (fd < 0) continue;
        ok++;
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close(fd);
    }
    return ok;
}

/* Opens n idle connections into fds[]; returns how many. */
static int idle_open(const BootAddr *a, int *fds, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        int fd = raw_connect(a);
        if (fd >= 0) fds[k++] = fd;
    }
    return k;
}

/* How many of fds[] the other side has closed (EOF or reset, after a BK_BUSY answer or not),
 * waiting up to ms for at least want of them. */
static int idle_closed(const int *fds, int n, int want, int ms) {
    int64_t end = boot_now_ms() + ms;
    for (;;) {
        int closed = 0;
        for (int i = 0; i < n; i++) {
            char buf[64];
            ssize_t r;
            while ((r = recv(fds[i], buf, sizeof buf, MSG_DONTWAIT)) > 0) {}
            if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) closed++;
        }
        if (closed >= want || boot_now_ms() >= end) return closed;
        sleep_ms(50);
    }
}

static void idle_close(int *fds, int n) {
    for (int i = 0; i < n; i++) close(fds[i]);
}

/* Whether fd receives a BK_BUSY answer and then EOF within ms. */
static bool got_busy(int fd, int ms) {
    BootReply rep;
    if (boot_read_raw(fd, &rep, sizeof rep, boot_now_ms() + ms) != MSCCLRT_SUCCESS) return false;
    char b;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return rep.magic == BOOT_MAGIC && rep.version == BOOT_VERSION && rep.kind == BK_BUSY &&
           poll(&p, 1, 1000) == 1 && recv(fd, &b, 1, 0) == 0;
}

/* ---- genuine ranks ---------------------------------------------------------------------------- */

static int rank_init_barrier(int rank, int n, const BootId *id) {
    Boot *b = NULL;
    mscclrt_result r = boot_init(&b, id, rank, n, 15000);
    if (r != MSCCLRT_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", rank, mscclrt_last_error());
        return 1;
    }
    int v[8] = {0};
    v[rank] = rank + 1;
    r = boot_allgather(b, v, sizeof(int));
    for (int q = 0; q < n; q++)
        if (v[q] != q + 1) r = MSCCLRT_ERR_INTERNAL;
    if (r == MSCCLRT_SUCCESS) r = boot_barrier(b);
    if (r != MSCCLRT_SUCCESS) fprintf(stderr, "rank %d: %s\n", rank, mscclrt_last_error());
    boot_close(b);
    return r != MSCCLRT_SUCCESS;
}

static void ranks_start(pid_t *pids, int n, const BootId *id) {
    for (int r = 0; r < n; r++) {
        fflush(stdout);
        fflush(stderr);
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(CHILD_ALARM_S);
            _exit(rank_init_barrier(r, n, id));
        }
    }
}

static int ranks_wait(const pid_t *pids, int n) {
    int bad = 0;
    for (int r = 0; r < n; r++) {
        int st = 0;
        if (waitpid(pids[r], &st, 0) != pids[r] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
    }
    return bad;
}

/* ---- the root ---------------------------------------------------------------------------------- */

#define IDLE 300

static void test_root_flood(void) {
    Host h;
    CHECK(host_start(&h, 0, NULL));
    const BootAddr *root = &((const BootIdWire *)h.id.bytes)->root;
    long rss0, rss1, rss2, cpu0, cpu1;
    CHECK_EQ_INT(500, cycles(root, 500));   /* warm up: the root's thread and arena exist */
    sleep_ms(200);
    host_stats(&h, &rss0, &cpu0);
    int64_t t0 = boot_now_ms();
    CHECK_EQ_INT(10000, cycles(root, 10000));
    int64_t took = boot_now_ms() - t0;
    sleep_ms(300);   /* let the root catch up with the last ones */
    host_stats(&h, &rss1, &cpu1);
    fprintf(stderr, "root: 10000 connect/close cycles in %lld ms: RSS %ld -> %ld KiB, root CPU %ld ms\n",
            (long long)took, rss0, rss1, cpu1 - cpu0);
    CHECK(rss0 > 0);
    CHECK(rss1 - rss0 < 512);

    /* idle connections: each gets its hello deadline, then is closed */
    static int fds[2 * IDLE];
    int n = idle_open(root, fds, IDLE);
    CHECK_EQ_INT(IDLE, n);
    t0 = boot_now_ms();
    CHECK(got_busy(fds[0], 1500));       /* the oldest, evicted for a newer one: told to come back */
    int early = idle_closed(fds, n, IDLE - BOOT_PENDING_MAX, 1500);   /* beyond the cap: at once */
    CHECK(got_busy(fds[n - 1], 5000));   /* the newest, at its deadline: the same */
    int closed = idle_closed(fds, n, n, 8000);  /* the rest at their hello deadline */
    int64_t waited = boot_now_ms() - t0;
    fprintf(stderr, "root: %d idle connections: %d closed at once, all %d after %lld ms\n", n, early,
            closed, (long long)waited);
    CHECK(early >= IDLE - BOOT_PENDING_MAX);
    CHECK(early < n);
    CHECK_EQ_INT(n, closed);
    CHECK(waited >= BOOT_HELLO_WAIT_MS - 500);
    idle_close(fds, n);
    host_stats(&h, &rss2, &cpu1);
    fprintf(stderr, "root: RSS after %d idle connections %ld KiB\n", n, rss2);

    /* genuine ranks among idle connections opened before and while they join, and a flooder
     * cycling connections meanwhile */
    n = idle_open(root, fds, IDLE);
    fflush(stderr);
    pid_t cycler = fork();
    if (cycler == 0) {
        alarm(CHILD_ALARM_S);
        cycles(root, 3000);   /* some refused once the ranks are done: the root is gone */
        _exit(0);
    }
    pid_t pids[3];
    ranks_start(pids, 3, &h.id);
    n += idle_open(root, fds + n, IDLE);   /* likewise */
    CHECK(n >= IDLE);
    CHECK_EQ_INT(0, ranks_wait(pids, 3));
    CHECK_EQ_INT(0, ranks_wait(&cycler, 1));
    idle_close(fds, n);
    CHECK_EQ_INT(0, host_stop(&h));
}

/* The root's process may open 32 descriptors: the flood exhausts them. The root must not spin,
 * must say so at WARN (a few lines, not one per attempt), and must still serve the ranks. */
static void test_root_emfile(void) {
    char log[64];
    snprintf(log, sizeof log, "/tmp/mscclrt-test-flood.%d.log", (int)getpid());
    if (!h_failed) unlink(log);
    Host h;
    CHECK(host_start(&h, 32, log));
    const BootAddr *root = &((const BootIdWire *)h.id.bytes)->root;
    static int fds[100];
    int n = idle_open(root, fds, 100);
    CHECK_EQ_INT(100, n);
    long rss, cpu0, cpu1;
    sleep_ms(200);
    host_stats(&h, &rss, &cpu0);
    sleep_ms(1500);
    host_stats(&h, &rss, &cpu1);
    fprintf(stderr, "root with 32 descriptors and 100 idle connections: %ld ms of CPU in 1500 ms\n",
            cpu1 - cpu0);
    CHECK(cpu1 - cpu0 < 300);   /* spinning is ~1500 */
    pid_t pids[2];
    ranks_start(pids, 2, &h.id);
    n += idle_open(root, fds + n, 0);
    CHECK_EQ_INT(0, ranks_wait(pids, 2));
    idle_close(fds, n);
    CHECK_EQ_INT(0, host_stop(&h));
    FILE *f = fopen(log, "r");
    CHECK(f != NULL);
    int warn = 0, lines = 0;
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        lines++;
        if (strstr(line, " WARN ") && strstr(line, "file descriptors")) warn++;
        if (lines <= 3) fprintf(stderr, "  | %s", line);
    }
    if (f) fclose(f);
    fprintf(stderr, "root log: %d lines, %d about file descriptors\n", lines, warn);
    CHECK(warn >= 1);
    CHECK(lines <= 20);   /* rate-limited */
    if (!h_failed) unlink(log);
}

/* ---- a rank told BK_BUSY connects again -------------------------------------------------------- */

typedef struct { int fd; int hellos; } FakeRoot;

/* Accepts two connections: answers the first hello with BK_BUSY, the second with the table of a
 * one-rank group. */
static void *fake_root(void *arg) {
    FakeRoot *f = arg;
    for (int k = 0; k < 2; k++) {
        struct pollfd p = {.fd = f->fd, .events = POLLIN};
        if (poll(&p, 1, 5000) != 1) return NULL;
        int c = accept(f->fd, NULL, NULL);
        if (c < 0) return NULL;
        BootHello h;
        if (boot_read_raw(c, &h, sizeof h, boot_now_ms() + 5000) != MSCCLRT_SUCCESS) {
            close(c);
            return NULL;
        }
        f->hellos++;
        BootReply rep = {.magic = BOOT_MAGIC, .version = BOOT_VERSION, .kind = BK_BUSY};
        BootPeerWire tab;
        memset(&tab, 0, sizeof tab);
        if (k == 1) {
            rep.kind = BK_TABLE, rep.arg = 1, rep.len = sizeof tab;
            tab.listen = h.listen, tab.pid = h.pid;
            memcpy(tab.hostid, h.hostid, sizeof tab.hostid);
        }
        boot_write_all(c, &rep, sizeof rep, boot_now_ms() + 2000, "rank");
        if (k == 1) boot_write_all(c, &tab, sizeof tab, boot_now_ms() + 2000, "rank");
        close(c);
    }
    return NULL;
}

static void test_busy_retry(void) {
    BootAddr lo = {.family = 4, .addr = {127, 0, 0, 1}};
    BootIdWire w = {.magic = BOOT_MAGIC, .version = BOOT_VERSION};
    FakeRoot f = {.fd = -1};
    CHECK_OK(boot_listen(&lo, false, &f.fd, &w.root));
    boot_set_nonblock(f.fd, false);
    pthread_t t;
    pthread_create(&t, NULL, fake_root, &f);
    BootId id;
    memcpy(id.bytes, &w, sizeof w);
    Boot *b = NULL;
    CHECK_OK(boot_init(&b, &id, 0, 1, 5000));
    pthread_join(t, NULL);
    CHECK_EQ_INT(2, f.hellos);
    CHECK(b != NULL);
    if (b) CHECK_EQ_INT(1, boot_nranks(b));
    boot_close(b);
    close(f.fd);
}

/* ---- a rank's listener and its messages: two forked ranks ---------------------------------------- */

typedef int (*PairFn)(Boot *b);

static long cpu_ms_self(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
           (long)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

static long vm_kb_self(void) {
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld", &pages) != 1) pages = 0;
        fclose(f);
    }
    return pages * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Runs fn[r] as rank r of a forked pair (boot timeouts[r]); returns how many ranks failed. */
static int run_pair(PairFn f0, PairFn f1, int t0, int t1) {
    BootId id;
    if (boot_get_unique_id(&id) != MSCCLRT_SUCCESS) return 2;
    PairFn fn[2] = {f0, f1};
    int tmo[2] = {t0, t1};
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        fflush(stdout);
        fflush(stderr);
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(CHILD_ALARM_S);
            h_failed = 0;   /* this rank's own checks */
            Boot *b = NULL;
            if (boot_init(&b, &id, r, 2, tmo[r]) != MSCCLRT_SUCCESS) {
                fprintf(stderr, "rank %d: %s\n", r, mscclrt_last_error());
                _exit(1);
            }
            int rc = boot_barrier(b) == MSCCLRT_SUCCESS ? fn[r](b) : 1;   /* connections both ways */
            boot_close(b);
            fflush(stderr);
            _exit(rc || h_failed ? 1 : 0);
        }
    }
    return ranks_wait(pids, 2);
}


/* Rank 0 waits for tag 1 while rank 1 floods its listener: idle connections are closed (the
 * oldest beyond BOOT_PENDING_MAX at once, the rest at the deadline), cycles cost nothing, and
 * the genuine message on the established connection still arrives. */
static int peer_flood_victim(Boot *b) {
    int x = 0;
    CHECK_OK(boot_recv(b, 1, 1, &x, sizeof x));
    CHECK_EQ_INT(42, x);
    CHECK_OK(boot_barrier(b));
    return 0;
}

static int peer_flood_attacker(Boot *b) {
    const BootAddr *victim = boot_listen_addr(b, 0);
    static int fds[IDLE];
    int n = idle_open(victim, fds, IDLE);
    CHECK_EQ_INT(IDLE, n);
    CHECK_EQ_INT(2000, cycles(victim, 2000));
    int64_t t0 = boot_now_ms();
    int early = idle_closed(fds, n, IDLE - BOOT_PENDING_MAX, 1500);
    int closed = idle_closed(fds, n, n, 8000);
    fprintf(stderr, "rank listener: %d idle connections: %d closed at once, all %d after %lld ms\n", n,
            early, closed, (long long)(boot_now_ms() - t0));
    CHECK(early >= IDLE - BOOT_PENDING_MAX);   /* a cycle accepted before its reset may evict one more */
    CHECK(early < n);
    CHECK_EQ_INT(n, closed);
    idle_close(fds, n);
    int v = 42;
    CHECK_OK(boot_send(b, 0, 1, &v, sizeof v));
    CHECK_OK(boot_barrier(b));
    return 0;
}

/* Rank 0 runs out of descriptors while it waits for tag 2: it must not spin. */
static int peer_emfile_victim(Boot *b) {
    /* new descriptors take the lowest free numbers below the limit: leave exactly 8 of them
     * (open descriptors above the limit, say an inherited 251, do not count) */
    int limit = 0;
    for (int spare = 0; spare < 8; limit++)
        if (fcntl(limit, F_GETFD) < 0) spare++;
    struct rlimit lim = {(rlim_t)limit, (rlim_t)limit};
    CHECK_EQ_INT(0, setrlimit(RLIMIT_NOFILE, &lim));
    int go = 1;   /* the flood starts now, not while this rank still has descriptors to spare */
    CHECK_OK(boot_send(b, 1, 3, &go, sizeof go));
    long c0 = cpu_ms_self();
    int64_t t0 = boot_now_ms();
    int x = 0;
    CHECK_OK(boot_recv(b, 1, 2, &x, sizeof x));
    long cpu = cpu_ms_self() - c0;
    int64_t wall = boot_now_ms() - t0;
    fprintf(stderr, "rank listener with 8 spare descriptors and 100 idle connections: %ld ms of CPU "
            "in %lld ms\n", cpu, (long long)wall);
    CHECK_EQ_INT(7, x);
    CHECK(wall >= 1000);
    CHECK(cpu < 300);   /* spinning is ~wall */
    CHECK_OK(boot_barrier(b));
    return 0;
}

static int peer_emfile_attacker(Boot *b) {
    static int fds[100];
    int go = 0;
    CHECK_OK(boot_recv(b, 0, 3, &go, sizeof go));
    int n = idle_open(boot_listen_addr(b, 0), fds, 100);
    CHECK_EQ_INT(100, n);
    sleep_ms(1500);
    int v = 7;
    CHECK_OK(boot_send(b, 0, 2, &v, sizeof v));
    CHECK_OK(boot_barrier(b));
    idle_close(fds, n);
    return 0;
}

/* An authenticated peer announces sizes it does not send. */
static int huge_receiver(Boot *b) {
    int x = 0;
    int64_t t0 = boot_now_ms();
    CHECK_EQ_INT(MSCCLRT_ERR_REMOTE, boot_recv(b, 1, 7, &x, sizeof x));
    CHECK(boot_now_ms() - t0 < 2000);
    CHECK_CONTAINS(mscclrt_last_error(), "rank 1 announced a 4294967296-byte message (tag 7), more "
                   "than the 16777216 bytes a bootstrap message may carry; dropped its connection");
    return 0;
}

static int huge_sender(Boot *b) {
    BootMsgHdr h = {.magic = BOOT_MAGIC, .version = BOOT_VERSION, .kind = BK_USER, .src = 1, .tag = 7,
                    .len = 1ull << 32};
    static char junk[4096];
    CHECK_OK(boot_send_raw(b, 0, &h, sizeof h));
    CHECK_OK(boot_send_raw(b, 0, junk, sizeof junk));
    sleep_ms(2500);   /* and say nothing more */
    /* the sender is refused at once */
    static char big[BOOT_MAX_MSG + 1];
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, boot_send(b, 0, 8, big, sizeof big));
    CHECK_CONTAINS(mscclrt_last_error(), "boot_send: 16777217 bytes is more than a bootstrap message "
                   "may carry (16777216)");
    return 0;
}

/* A legal size (the maximum) of which 1 MiB arrives: the receiver holds about that much. */
static int partial_receiver(Boot *b) {
    long vm0 = vm_kb_self();
    int x;
    CHECK_EQ_INT(MSCCLRT_ERR_TIMEOUT, boot_recv(b, 1, 9, &x, sizeof x));   /* never completes */
    long vm1 = vm_kb_self();
    fprintf(stderr, "receiver of 1 MiB of an announced 16 MiB message: virtual size %ld -> %ld KiB\n",
            vm0, vm1);
    CHECK(vm1 - vm0 < 8 * 1024);
    return 0;
}

static int partial_sender(Boot *b) {
    BootMsgHdr h = {.magic = BOOT_MAGIC, .version = BOOT_VERSION, .kind = BK_USER, .src = 1, .tag = 9,
                    .len = BOOT_MAX_MSG};
    static char part[1 << 20];
    CHECK_OK(boot_send_raw(b, 0, &h, sizeof h));
    CHECK_OK(boot_send_raw(b, 0, part, sizeof part));
    sleep_ms(3000);   /* past the receiver's timeout */
    return 0;
}

/* Unrequested messages: rank 1 sends 64 x 256 KiB (16 MiB) that rank 0 does not ask for yet; rank 0
 * (queue limit 1 MiB) holds at most the limit plus one message, then asks for them all. */
#define Q_MSG ((size_t)256 << 10)
#define Q_N 64
#define Q_LIMIT ((size_t)1 << 20)

static int queue_receiver(Boot *b) {
    boot_set_limits(b, Q_MSG, Q_LIMIT);
    int x = 1;
    CHECK_OK(boot_send(b, 1, 3, &x, sizeof x));   /* the sender starts once the limit is set */
    CHECK_EQ_INT(MSCCLRT_ERR_TIMEOUT, boot_recv(b, 1, 5, &x, sizeof x));   /* 1.5 s: nobody asks */
    size_t held = boot_queued_bytes(b, 1), bound = Q_LIMIT + Q_MSG + 256;
    fprintf(stderr, "receiver with a 1 MiB queue limit, 16 MiB sent unasked: %zu bytes queued\n", held);
    CHECK(held >= Q_LIMIT);
    CHECK(held <= bound);
    static unsigned char buf[Q_MSG];
    size_t most = held;
    for (int i = 0; i < Q_N; i++) {   /* asked for, they flow again, in order */
        CHECK_OK(boot_recv(b, 1, 99, buf, sizeof buf));
        CHECK_EQ_INT(i & 0xff, buf[0]);
        CHECK_EQ_INT(i & 0xff, buf[Q_MSG - 1]);
        if (boot_queued_bytes(b, 1) > most) most = boot_queued_bytes(b, 1);
    }
    CHECK(most <= bound);
    CHECK_OK(boot_recv(b, 1, 5, &x, sizeof x));
    CHECK_EQ_INT(5, x);
    return 0;
}

static int queue_sender(Boot *b) {
    static unsigned char buf[Q_MSG];
    int go = 0;
    CHECK_OK(boot_recv(b, 0, 3, &go, sizeof go));
    for (int i = 0; i < Q_N; i++) {
        memset(buf, i & 0xff, sizeof buf);
        CHECK_OK(boot_send(b, 0, 99, buf, sizeof buf));
    }
    int v = 5;
    CHECK_OK(boot_send(b, 0, 5, &v, sizeof v));
    return 0;
}

static void test_peer_emfile(char *log) {
    CHECK_EQ_INT(0, run_pair(peer_emfile_victim, peer_emfile_attacker, 15000, 15000));
    FILE *f = fopen(log, "r");
    int warn = 0;
    char line[4096];
    int lines = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strstr(line, " WARN ") && strstr(line, "rank 0: out of file descriptors")) warn++;
        if (strstr(line, "rank 0: out of file descriptors") && warn == 1) fprintf(stderr, "  | %s", line);
        lines++;
    }
    if (f) fclose(f);
    fprintf(stderr, "ranks' log: %d lines, %d about rank 0's file descriptors\n", lines, warn);
    CHECK(warn >= 1);
    CHECK(warn <= 5);
}

/* ---- every rank's listener flooded at once: a group of threads ------------------------------- */

#define GROUP 3
#define GROUP_TIMEOUT_MS 6000
#define FLOOD_HOLD 64   /* connections a flooder keeps open per target before resetting the oldest */

typedef struct {
    BootAddr target[GROUP];
    _Atomic int stop;
    _Atomic long made;  /* connections started */
} Flood;

/* Hammers every listener: non-blocking connects, each reset (no TIME_WAIT) once FLOOD_HOLD newer
 * ones are open to the same target. A reset connection still occupies its slot in the listen
 * backlog until accepted, so a listener nobody serves stays full. */
static void *flooder(void *arg) {
    Flood *f = arg;
    static int ring[GROUP][FLOOD_HOLD];
    int at[GROUP] = {0};
    for (int t = 0; t < GROUP; t++)
        for (int k = 0; k < FLOOD_HOLD; k++) ring[t][k] = -1;
    while (!atomic_load(&f->stop)) {
        for (int t = 0; t < GROUP; t++) {
            BootSockAddr s;
            socklen_t len;
            boot_addr_to_sock(&f->target[t], &s, &len);
            int fd = socket(s.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0) continue;
            if (connect(fd, &s.sa, len) != 0 && errno != EINPROGRESS) {
                close(fd);
                continue;
            }
            atomic_fetch_add(&f->made, 1);
            int *slot = &ring[t][at[t]++ % FLOOD_HOLD];
            if (*slot >= 0) {
                struct linger lg = {1, 0};
                setsockopt(*slot, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
                close(*slot);
            }
            *slot = fd;
        }
    }
    for (int t = 0; t < GROUP; t++)
        for (int k = 0; k < FLOOD_HOLD; k++)
            if (ring[t][k] >= 0) close(ring[t][k]);
    return NULL;
}

typedef struct {
    const BootId *id;
    int rank;
    Boot *b;
    pthread_barrier_t *go;    /* every rank joined; the flood has run a while */
    mscclrt_result res;
    int64_t took_ms;          /* the first allgather (which opens the peer connections) */
    char err[512];
} GroupRank;

static void *group_rank(void *arg) {
    GroupRank *g = arg;
    g->res = boot_init(&g->b, g->id, g->rank, GROUP, GROUP_TIMEOUT_MS);
    if (g->res != MSCCLRT_SUCCESS) snprintf(g->err, sizeof g->err, "%s", mscclrt_last_error());
    pthread_barrier_wait(g->go);   /* main starts the flood and waits for it to fill the backlogs */
    pthread_barrier_wait(g->go);
    if (g->res != MSCCLRT_SUCCESS) return NULL;
    int v[GROUP] = {0};
    v[g->rank] = 100 + g->rank;
    int64_t t0 = boot_now_ms();
    g->res = boot_allgather(g->b, v, sizeof(int));
    g->took_ms = boot_now_ms() - t0;
    for (int q = 0; q < GROUP && g->res == MSCCLRT_SUCCESS; q++)
        if (v[q] != 100 + q) g->res = MSCCLRT_ERR_INTERNAL;
    if (g->res != MSCCLRT_SUCCESS) snprintf(g->err, sizeof g->err, "%s", mscclrt_last_error());
    return NULL;
}

/* Ranks that connect to each other while every listener is flooded: each keeps accepting (and
 * evicting the flood) while its own connect is under way, so the group's first allgather
 * completes. (Were a connecting rank to stop serving its listener, every rank would wait on a
 * peer that waits on another, and all would time out.) */
static void test_group_flood(void) {
    BootId id;
    CHECK_OK(boot_get_unique_id(&id));
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, GROUP + 1);
    GroupRank g[GROUP];
    pthread_t th[GROUP];
    for (int r = 0; r < GROUP; r++) {
        g[r] = (GroupRank){.id = &id, .rank = r, .go = &go};
        pthread_create(&th[r], NULL, group_rank, &g[r]);
    }
    pthread_barrier_wait(&go);
    static Flood f;
    atomic_init(&f.stop, 0);
    atomic_init(&f.made, 0);
    bool joined = g[0].res == MSCCLRT_SUCCESS;
    for (int r = 0; r < GROUP && joined; r++) f.target[r] = *boot_listen_addr(g[0].b, r);
    pthread_t ft;
    if (joined) pthread_create(&ft, NULL, flooder, &f);
    /* nobody serves the listeners yet: their backlogs (1024) fill */
    for (int64_t until = boot_now_ms() + 5000; f.made < 4 * 1024 * GROUP && boot_now_ms() < until;)
        sleep_ms(50);
    long before = f.made;
    int64_t t0 = boot_now_ms();
    pthread_barrier_wait(&go);
    for (int r = 0; r < GROUP; r++) pthread_join(th[r], NULL);
    int64_t took = boot_now_ms() - t0;
    atomic_store(&f.stop, 1);
    if (joined) pthread_join(ft, NULL);
    fprintf(stderr, "group of %d under a flood of every listener (%ld connections before the "
            "allgather, %ld during it): allgather took %lld ms (timeout %d)\n", GROUP, before,
            f.made - before, (long long)took, GROUP_TIMEOUT_MS);
    for (int r = 0; r < GROUP; r++) {
        CHECK_EQ_INT(MSCCLRT_SUCCESS, g[r].res);
        if (g[r].res != MSCCLRT_SUCCESS) fprintf(stderr, "  rank %d: %s\n", r, g[r].err);
        else CHECK(g[r].took_ms < GROUP_TIMEOUT_MS);
        boot_close(g[r].b);
    }
    CHECK(before >= 4 * 1024 * GROUP);   /* the backlogs were full when the allgather began */
    CHECK(f.made > before);              /* and the flood went on during it */
    pthread_barrier_destroy(&go);
}

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "--host") == 0) return host_main(atoi(argv[2]));
    alarm(240);
    setenv("MSCCLRT_SOCKET_IFNAME", "lo", 0);   /* roots on 127.0.0.1, whatever the host's network */
    struct rlimit lim;   /* the flooders hold up to 600 connections at once */
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < 2048 && lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max < 2048 ? lim.rlim_max : 2048;
        setrlimit(RLIMIT_NOFILE, &lim);
    }
    /* this process and its forked ranks log WARNs to one file (hosts set their own) */
    static char log[64];
    snprintf(log, sizeof log, "/tmp/mscclrt-test-flood.%d.ranks.log", (int)getpid());
    setenv("MSCCLRT_DEBUG", "WARN", 1);
    setenv("MSCCLRT_DEBUG_FILE", log, 1);
    unsetenv("MSCCLRT_DEBUG_SUBSYS");
    if (argc > 1 && strcmp(argv[1], "--group") == 0) {   /* that case alone, to reproduce it */
        TEST("boot/flood-every-rank-while-connecting", test_group_flood());
        return harness_report();
    }
    TEST("boot/flood-root", test_root_flood());
    TEST("boot/flood-root-emfile", test_root_emfile());
    TEST("boot/busy-root-retry", test_busy_retry());
    TEST("boot/flood-peer", CHECK_EQ_INT(0, run_pair(peer_flood_victim, peer_flood_attacker, 15000, 15000)));
    TEST("boot/flood-peer-emfile", test_peer_emfile(log));
    TEST("boot/msg-huge-announce", CHECK_EQ_INT(0, run_pair(huge_receiver, huge_sender, 10000, 10000)));
    TEST("boot/msg-grows-as-bytes-arrive", CHECK_EQ_INT(0, run_pair(partial_receiver, partial_sender, 1500, 10000)));
    TEST("boot/flood-every-rank-while-connecting", test_group_flood());
    TEST("boot/msg-queue-bound", CHECK_EQ_INT(0, run_pair(queue_receiver, queue_sender, 1500, 10000)));
    if (!h_failed) unlink(log);
    return harness_report();
}

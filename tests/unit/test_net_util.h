/*
 * test_net_util.h - what the network transport tests share (test_net_tcp.c, test_net_ib.c,
 * test_net_hostile.c): a rank's side of the exchange (a receive area and one counter per
 * sender, registered and imported by every remote rank), waiting on a counter, the byte
 * pattern and its check, and the re-executed children that are the ranks (MSCCLRT_HOSTID
 * splits them into "nodes"; the environment is read once per process): spawning and reaping
 * them (run_ranks) and a child's entry (net_test_child). Static functions: each
 * test includes it once.
 * The includer defines BIG (bytes per sender in the receive area) first.
 */
#ifndef TEST_NET_UTIL_H
#define TEST_NET_UTIL_H

#include "net/net_internal.h"
#include "core/err.h"
#include "../harness.h"

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static uint64_t first_bad(const unsigned char *got, int from, uint64_t len, int round) {
    for (uint64_t i = 0; i < len; i++)
        if (got[i] != pat(from, i, round)) return i;
    return len;
}

/* Every rank owns a receive area (BIG + 64 bytes per sender) and one 8-byte counter per sender;
 * it registers both and sends their descriptors to every remote rank. */
typedef struct Side {
    Net *net;
    Boot *boot;
    int rank, n;
    unsigned char *recv;          /* [n][BIG + 64] */
    volatile uint64_t *ctr;       /* [n] */
    uint64_t win_recv[16], win_ctr[16];
} Side;

/* Connects with options o (its backend must be `backend`) and exchanges descriptors.
 * tamper(a, from) may change a descriptor received from rank `from` before it is imported
 * (NULL: none). Returns nonzero on failure (checks already reported). */
static int side_open(Side *s, int rank, int n, const BootId *id, const NetOptions *o,
                     const char *backend, void (*tamper)(NetMemDesc *, int rank, int from)) {
    memset(s, 0, sizeof *s);
    s->rank = rank;
    s->n = n;
    CHECK_OK(boot_init(&s->boot, id, rank, n, 10000));
    if (!s->boot) return 1;
    CHECK_OK(net_create(&s->net, s->boot, o));
    if (!s->net) return 1;
    CHECK_STR(backend, net_backend_name(s->net));
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
        if (tamper) tamper(&a, rank, q);
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

/* The receiving half of round k: the sender's sources are flushed (they are reused next round;
 * data read only before flush returns), then each receiver waits for every remote rank's
 * signal k + 1 and checks the len bytes of pattern k at offset off behind it. */
static __attribute__((unused)) void exchange_check(Side *s, uint64_t len, uint64_t off, int k) {
    CHECK_OK(net_flush(s->net));
    for (int q = 0; q < s->n; q++) {
        if (!net_peer_remote(s->net, q)) continue;
        CHECK(wait_ctr(s, q, (uint64_t)k + 1));
        /* the signal is visible, so all of the data before it must be too */
        uint64_t bad = first_bad(s->recv + (size_t)q * (BIG + 64) + off, q, len, k);
        if (bad != len)
            fprintf(stderr, "rank %d: from rank %d size %llu: first bad byte %llu\n", s->rank, q,
                    (unsigned long long)len, (unsigned long long)bad);
        CHECK(bad == len);
    }
    CHECK_OK(boot_barrier(s->boot));   /* nobody overwrites a buffer still being checked */
}

/* Round k: `len` bytes of pattern k to every remote rank at offset off, then a signal (with
 * pair, both through one net_put_signal); once the sender flushed, each receiver waits for
 * every signal and checks the data behind it. */
static __attribute__((unused)) void exchange_round_as(Side *s, unsigned char *src, uint64_t len,
                                                      uint64_t off, int k, bool pair) {
    for (uint64_t i = 0; i < len; i++) src[i] = pat(s->rank, i, k);
    for (int q = 0; q < s->n; q++) {
        if (!net_peer_remote(s->net, q)) continue;
        uint64_t dst = s->win_recv[q] + (uint64_t)s->rank * (BIG + 64) + off;
        uint64_t ctr = s->win_ctr[q] + (uint64_t)s->rank * 8;
        if (pair) {
            CHECK_OK(net_put_signal(s->net, dst, (uint64_t)(uintptr_t)src, len, ctr, (uint64_t)k + 1));
            continue;
        }
        CHECK_OK(net_put(s->net, dst, (uint64_t)(uintptr_t)src, len));
        CHECK_OK(net_signal(s->net, ctr, (uint64_t)k + 1));
    }
    exchange_check(s, len, off, k);
}

static __attribute__((unused)) void exchange_round(Side *s, unsigned char *src, uint64_t len, uint64_t off, int k) {
    exchange_round_as(s, src, len, off, k, false);
}

/* ---- the parent: re-executes itself per rank ------------------------------------------------ */
static const char *net_test_self;

/* How many variables spawn_rank sets: MSCCLRT_HOSTID and the pairs of env (NAME, VALUE, ...,
 * NULL). */
static size_t child_env_count(const char *const *env) {
    size_t n = 1;
    while (env && env[2 * (n - 1)]) n++;
    return n;
}

/* This process's environment with MSCCLRT_HOSTID=hostid and env's pairs set in place of any
 * earlier values, those first (a name given twice takes its last value, as setenv in turn
 * would): a NULL-terminated array for execve (child_env_free), or NULL
 * when out of memory. */
static char **child_env(const char *hostid, const char *const *env) {
    extern char **environ;
    const size_t nset = child_env_count(env);
    size_t have = 0;
    while (environ[have]) have++;
    char **out = calloc(have + nset + 1, sizeof *out);
    if (!out) return NULL;
    for (size_t i = 0; i < nset; i++) {
        const char *name = i == 0 ? "MSCCLRT_HOSTID" : env[2 * (i - 1)];
        const char *value = i == 0 ? hostid : env[2 * (i - 1) + 1];
        for (size_t j = i + 1; j < nset; j++)   /* a name set twice takes its last value */
            if (strcmp(env[2 * (j - 1)], name) == 0) value = env[2 * (j - 1) + 1];
        const size_t len = strlen(name) + strlen(value) + 2;
        if (!(out[i] = malloc(len))) {
            while (i > 0) free(out[--i]);
            free(out);
            return NULL;
        }
        snprintf(out[i], len, "%s=%s", name, value);
    }
    size_t k = nset;
    for (size_t i = 0; i < have; i++) {   /* the rest, less the names set above */
        bool replaced = false;
        for (size_t j = 0; j < nset && !replaced; j++)
            replaced = strncmp(environ[i], out[j], strcspn(out[j], "=") + 1) == 0;
        if (!replaced) out[k++] = environ[i];
    }
    return out;
}

static void child_env_free(char **envp, const char *const *env) {
    for (size_t i = 0; i < child_env_count(env); i++) free(envp[i]);
    free(envp);
}

/* Rank `rank` of n as "SELF child SCEN RANK N ID" with MSCCLRT_HOSTID=hostid and the pairs of
 * env (NAME, VALUE, ..., NULL) set. */
static pid_t spawn_rank(const char *scen, int rank, int n, const BootId *id, const char *hostid,
                        const char *const *env) {
    char hex[2 * BOOT_ID_BYTES + 1], rs[16], ns[16];
    for (int i = 0; i < BOOT_ID_BYTES; i++) sprintf(hex + 2 * i, "%02x", id->bytes[i]);
    snprintf(rs, sizeof rs, "%d", rank);
    snprintf(ns, sizeof ns, "%d", n);
    /* the child's environment is made here: the child of a process with threads (the
     * bootstrap root's) must not allocate before exec (fork_ranks.h says why) */
    char **envp = child_env(hostid, env);
    if (!envp) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0) {
        char child[] = "child";
        char *const argv[] = {(char *)net_test_self, child, (char *)scen, rs, ns, hex, NULL};
        execve(net_test_self, argv, envp);
        _exit(127);
    }
    child_env_free(envp, env);
    return p;
}

static bool status_ok(int st) { return WIFEXITED(st) && WEXITSTATUS(st) == 0; }

/* Waits for pid; a failure is printed and counts 1. */
static int reap_rank(const char *scen, int r, pid_t pid) {
    int st = 0;
    if (pid < 0) {   /* never started: waitpid(-1) would reap another rank */
        fprintf(stderr, "%s: rank %d could not be started\n", scen, r);
        return 1;
    }
    if (waitpid(pid, &st, 0) == pid && status_ok(st)) return 0;
    fprintf(stderr, "%s: rank %d %s %d\n", scen, r, WIFSIGNALED(st) ? "killed by signal"
            : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    return 1;
}

/* In a child: the BootId of argv's hex form. */
static void parse_boot_id(const char *hex, BootId *id) {
    for (int i = 0; i < BOOT_ID_BYTES; i++) {
        unsigned v = 0;
        sscanf(hex + 2 * i, "%2x", &v);
        id->bytes[i] = (unsigned char)v;
    }
}

/* Runs scenario scen as n ranks (rank r with MSCCLRT_HOSTID hostids[r], env as for spawn_rank)
 * and returns how many failed. silent >= 0 names a rank whose own verdict does not count (it
 * stops or fails on purpose): it is killed once rank `decider`, whose verdict counts, has been
 * reaped, and before the others are (they may be waiting for it). */
static int run_ranks(const char *scen, int n, const char *const *hostids,
                     const char *const *env, int silent, int decider) {
    BootId id;
    pid_t pids[8];
    if (n > 8 || boot_get_unique_id(&id) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "%s: %d ranks: %s\n", scen, n,
                n > 8 ? "more than 8" : mscclrt_last_error());
        return n;
    }
    for (int r = 0; r < n; r++) pids[r] = spawn_rank(scen, r, n, &id, hostids[r], env);
    int bad = 0;
    if (silent >= 0) {
        bad += reap_rank(scen, decider, pids[decider]);
        if (pids[silent] > 0) {   /* kill(-1) would signal every process */
            kill(pids[silent], SIGKILL);
            waitpid(pids[silent], NULL, 0);
        }
    }
    for (int r = 0; r < n; r++)
        if (silent < 0 || (r != silent && r != decider)) bad += reap_rank(scen, r, pids[r]);
    return bad;
}

/* A rank's side of scenario scen; its exit status. */
typedef int (*NetRankFn)(const char *scen, int rank, int n, const BootId *id);

/* First thing in main: when this process is a rank that spawn_rank started, runs rank_main
 * under an alarm of alarm_s seconds (a hung rank dies instead of hanging the test) and returns
 * its exit status, after the harness's report; else -1 (this is the parent). */
static int net_test_child(int argc, char **argv, unsigned alarm_s, NetRankFn rank_main) {
    net_test_self = argv[0];
    if (argc != 6 || strcmp(argv[1], "child") != 0) return -1;
    alarm(alarm_s);
    BootId id;
    parse_boot_id(argv[5], &id);
    int rc = rank_main(argv[2], atoi(argv[3]), atoi(argv[4]), &id);
    harness_report();
    return rc;
}

#endif

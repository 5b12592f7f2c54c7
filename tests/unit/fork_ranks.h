/*
 * fork_ranks.h - runs n ranks as forked processes that rendezvous over a fresh bootstrap id,
 * without ever forking a process that has threads. boot_get_unique_id starts the bootstrap
 * root's thread in the caller; forking after it leaves a child with whatever locks that thread
 * held. glibc's malloc takes its locks across fork, but GCC 12's AddressSanitizer allocator does
 * not: 1 in 200 forks next to a thread that allocates hung in the child's first malloc, and
 * test_boot_fdpass's forked ranks hung so under ASan in CI ("rank 1 did not arrive"). So a
 * coordinator process is forked first; it forks the ranks, only then makes the id (its root
 * thread lives in the coordinator) and hands it to each rank through a pipe. The test process
 * itself never starts the root, so later rounds fork from a process without threads too.
 * Static functions: each test includes it once.
 */
#ifndef FORK_RANKS_H
#define FORK_RANKS_H

#include "bootstrap/bootstrap.h"

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORK_RANKS_MAX 16
#define FORK_RANKS_ALARM_S 100   /* a hung rank or coordinator ends instead of lingering */

/* one rank's body: returns its exit status (0 = all checks passed) */
typedef int (*ForkRankFn)(const BootId *id, int rank, int n, void *arg);

static int fork_ranks_read_id(int fd, BootId *id) {
    size_t got = 0;
    while (got < sizeof *id) {
        ssize_t k = read(fd, (char *)id + got, sizeof *id - got);
        if (k <= 0) return -1;    /* EOF: the coordinator could not make an id */
        got += (size_t)k;
    }
    return 0;
}

static int fork_ranks_write_id(int fd, const BootId *id) {
    size_t put = 0;
    while (put < sizeof *id) {
        ssize_t k = write(fd, (const char *)id + put, sizeof *id - put);
        if (k <= 0) return -1;
        put += (size_t)k;
    }
    return 0;
}

/* the coordinator: forks the ranks, makes the id, hands it out, reaps; returns how many ranks
 * failed */
static int fork_ranks_coordinate(int n, ForkRankFn fn, void *arg) {
    int wfd[FORK_RANKS_MAX];
    pid_t pids[FORK_RANKS_MAX];
    for (int r = 0; r < n; r++) {
        int p[2];
        pids[r] = -1;
        wfd[r] = -1;
        if (pipe(p) != 0) continue;
        fflush(stdout);
        fflush(stderr);
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(FORK_RANKS_ALARM_S);
            close(p[1]);
            for (int q = 0; q < r; q++)
                if (wfd[q] >= 0) close(wfd[q]);
            BootId id;
            const int ok = fork_ranks_read_id(p[0], &id) == 0;
            close(p[0]);
            if (!ok) {
                fprintf(stderr, "fork_ranks: rank %d got no bootstrap id\n", r);
                _exit(1);
            }
            const int rc = fn(&id, r, n, arg);
            fflush(stdout);
            fflush(stderr);
            _exit(rc);
        }
        close(p[0]);
        if (pids[r] < 0) close(p[1]);
        else wfd[r] = p[1];
    }
    BootId id;
    const bool have = boot_get_unique_id(&id) == MSCCLRT_SUCCESS;
    if (!have) fprintf(stderr, "fork_ranks: boot_get_unique_id: %s\n", mscclrt_last_error());
    for (int r = 0; r < n; r++) {
        if (wfd[r] < 0) continue;
        if (have) fork_ranks_write_id(wfd[r], &id);
        close(wfd[r]);    /* without an id the rank reads EOF and fails */
    }
    int bad = 0;
    for (int r = 0; r < n; r++) {
        int st = 0;
        if (pids[r] < 0 || waitpid(pids[r], &st, 0) != pids[r] || !WIFEXITED(st) || WEXITSTATUS(st))
            bad++;
    }
    return bad;
}

/* Runs fn as ranks 0..n-1 in forked processes; returns how many of them failed (n when the
 * coordinator itself could not run). */
static int fork_ranks(int n, ForkRankFn fn, void *arg) {
    if (n < 1 || n > FORK_RANKS_MAX) return n < 1 ? 1 : n;
    fflush(stdout);
    fflush(stderr);
    pid_t c = fork();
    if (c == 0) {
        alarm(FORK_RANKS_ALARM_S + 10);
        _exit(fork_ranks_coordinate(n, fn, arg));
    }
    int st = 0;
    if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st)) return n;
    return WEXITSTATUS(st);
}

#endif

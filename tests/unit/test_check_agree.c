/*
 * test_check_agree.c - the verdict exchange of mscclrt_gpu_check_rank (check_gpu_agree) over
 * the real bootstrap on 127.0.0.1, with forked ranks and no GPU: every rank returns the same
 * result (success with the largest time; else the lowest failing rank's code and message and the
 * list of failing ranks), a peer slower than the bootstrap timeout is still waited for, and a
 * peer that leaves without a verdict (after the ranks were connected, as in a communicator) is an
 * error at once, not the long wait for a live peer. Every child runs under alarm().
 */
#include "../harness.h"

#include "bootstrap/bootstrap.h"
#include "core/err.h"
#include "check/check_gpu.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int n;
    int fail_mask;                 /* ranks that fail locally */
    int slow_rank;                 /* sleeps 2 s (bootstrap timeout 500 ms) before its verdict */
    int leave_rank;                /* leaves without a verdict */
    int timeout_ms;                /* the Boot's (0: the default) */
    mscclrt_result want;           /* every other rank's result; -1: any failure */
    const char *want_msg;          /* ... and its exact message (NULL: only the code) */
    const char *want_part;         /* ... or a part of it */
} Case;

static const mscclrt_result codes[] = {MSCCLRT_ERR_INTERNAL, MSCCLRT_ERR_TIMEOUT,
                                       MSCCLRT_ERR_CUDA, MSCCLRT_ERR_SYSTEM};

static int rank_main(const Case *k, const BootId *id, int r) {
    Boot *b = NULL;
    if (boot_init(&b, id, r, k->n, k->timeout_ms) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", r, mscclrt_last_error());
        return 1;
    }
    /* as in a communicator after its creation, every pair of ranks is connected */
    if (boot_barrier(b) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", r, mscclrt_last_error());
        return 1;
    }
    if (r == k->leave_rank) {
        boot_close(b);
        return 0;
    }
    if (r == k->slow_rank) sleep(2);
    mscclrt_result mine = MSCCLRT_SUCCESS;
    if (k->fail_mask >> r & 1)
        mine = rt_fail(codes[r % 4], "local failure %d of %s", r, r % 2 ? "odd" : "even");
    double usec = -1;
    double t0 = (double)time(NULL);
    mscclrt_result res = check_gpu_agree(b, mine, 10.0 * (r + 1), &usec);
    int bad = 0;
    if ((int)k->want >= 0 ? res != k->want : res == MSCCLRT_SUCCESS) bad = 1;
    if ((int)k->want < 0 && mine != MSCCLRT_SUCCESS && res != mine) bad = 1;  /* keeps its own */
    if (res == MSCCLRT_SUCCESS && usec != 10.0 * k->n) bad = 1;
    if (k->want_msg && strcmp(mscclrt_last_error(), k->want_msg) != 0) bad = 1;
    if (k->want_part && !strstr(mscclrt_last_error(), k->want_part)) bad = 1;
    if (k->leave_rank >= 0 && (double)time(NULL) - t0 > 5) bad = 1;   /* no waiting in vain */
    if (bad)
        fprintf(stderr, "rank %d: want %d, got %d (usec %.1f): %s\n", r, (int)k->want, (int)res,
                usec, res ? mscclrt_last_error() : "");
    boot_close(b);
    return bad;
}

/* Forks the group; returns how many ranks did not get what the case wants. */
static int run_case(const Case *k) {
    BootId id;
    if (boot_get_unique_id(&id) != MSCCLRT_SUCCESS) return k->n;
    pid_t pids[16];
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < k->n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(60);
            _exit(rank_main(k, &id, r) ? 1 : 0);
        }
    }
    int bad = 0;
    for (int r = 0; r < k->n; r++) {
        int st = 0;
        if (pids[r] <= 0 || waitpid(pids[r], &st, 0) != pids[r] || !WIFEXITED(st) ||
            WEXITSTATUS(st) != 0) {
            bad++;
            if (WIFSIGNALED(st)) fprintf(stderr, "rank %d: killed by signal %d\n", r, WTERMSIG(st));
        }
    }
    return bad;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    Case all_ok = {3, 0, -1, -1, 0, MSCCLRT_SUCCESS, NULL, NULL};
    TEST("check_agree/all_pass_largest_time", CHECK_EQ_INT(0, run_case(&all_ok)));
    Case two = {3, 6, -1, -1, 0, MSCCLRT_ERR_TIMEOUT,
                "rank 1: local failure 1 of odd (2 of 3 ranks failed: 1, 2)", NULL};
    TEST("check_agree/lowest_failing_rank_wins", CHECK_EQ_INT(0, run_case(&two)));
    Case last = {8, 1 << 7, -1, -1, 0, MSCCLRT_ERR_SYSTEM, "rank 7: local failure 7 of odd", NULL};
    TEST("check_agree/eight_ranks_one_fails", CHECK_EQ_INT(0, run_case(&last)));
    Case first = {2, 1, -1, -1, 0, MSCCLRT_ERR_INTERNAL, "rank 0: local failure 0 of even", NULL};
    TEST("check_agree/rank0_fails", CHECK_EQ_INT(0, run_case(&first)));
    Case slow = {3, 0, 2, -1, 500, MSCCLRT_SUCCESS, NULL, NULL};
    TEST("check_agree/slow_peer_waited_for", CHECK_EQ_INT(0, run_case(&slow)));
    Case left = {3, 1, -1, 2, 1000, (mscclrt_result)-1, NULL,
                 "verdicts could not be exchanged: boot: rank "};
    TEST("check_agree/peer_left", CHECK_EQ_INT(0, run_case(&left)));
    return harness_report();
}

/*
 * test_gpu_check_rank.c - mscclrt_gpu_check_rank and mscclrt_comm_init_env. Everywhere: argument
 * errors, and on a host without a CUDA driver the clean MSCCLRT_ERR_UNAVAILABLE of both before
 * any rendezvous. With GPUs: two forked ranks (devices r % ndev) joined by a unique id check a
 * 2-rank plan of every collective but sendrecv; a rank whose seed differs makes both ranks
 * fail with the same verdict (rank 0's message, both ranks named); and two ranks joined through
 * torchrun's variables (mscclrt_comm_init_env, device from the local rank) pass the check.
 */
#include "../harness.h"

#include "cuda/cuda_driver.h"
#include "mscclrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* each in its own layout (the plan's "inplace"), as test_gpu_exec runs them */
static const char *const plans[] = {
    "tests/plans/compat/allreduce_packet.json",              /* in place */
    "tests/golden/stdlib/allreduce/rs_ag_read.N2.json",      /* in place */
    "tests/golden/stdlib/allreduce/allpair_packet.N2.json",
    "tests/golden/stdlib/allgather/fullmesh.N2.json",
    "tests/golden/stdlib/reducescatter/fullmesh_read.N2.json", /* in place */
    "tests/golden/stdlib/alltoall/fullmesh.N2.json",
    "tests/golden/stdlib/broadcast/direct.N2.json",
};

/* A check of about 1 MiB (a multiple of the plan's smallest legal size). */
static mscclrt_gpu_check check_of(const mscclrt_plan *plan, uint64_t seed) {
    mscclrt_plan_info info;
    mscclrt_plan_get_info(plan, &info);
    size_t unit = 16;
    mscclrt_plan_min_bytes(plan, &unit);
    size_t bytes = (size_t)1 << 20;
    bytes = bytes / unit > 0 ? bytes / unit * unit : unit;
    if (bytes > info.max_message_size || bytes < info.min_message_size) bytes = unit;
    mscclrt_gpu_check chk = {.bytes = bytes, .dtype = MSCCLRT_FLOAT16, .op = MSCCLRT_SUM,
                             .packet = MSCCLRT_LL16, .inplace = info.inplace,
                             .iters = 3, .graph_iters = 2, .seed = seed};
    return chk;
}

/* Rank r of the unique-id group: every plan must pass, the same usec on both ranks. */
static int rank_plans(mscclrt_comm *comm, int r) {
    int fails = 0;
    for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
        mscclrt_plan *plan = NULL;
        if (mscclrt_plan_load(&plan, plans[i]) != MSCCLRT_SUCCESS) {
            fprintf(stderr, "rank %d: %s\n", r, mscclrt_last_error());
            return fails + 1;
        }
        mscclrt_gpu_check chk = check_of(plan, 11);
        double usec = -1;
        mscclrt_result res = mscclrt_gpu_check_rank(comm, plan, &chk, &usec);
        if (res != MSCCLRT_SUCCESS || !(usec > 0)) {
            fprintf(stderr, "rank %d: %s (%s): %s\n", r, plans[i],
                    chk.inplace ? "in place" : "out of place", mscclrt_last_error());
            fails++;
        } else {
            printf("  rank %d: %s %zu B %s: %.1f us\n", r, plans[i], chk.bytes,
                   chk.inplace ? "in place" : "out of place", usec);
        }
        mscclrt_plan_free(plan);
        if (res == MSCCLRT_ERR_TIMEOUT) _exit(1);   /* a kernel still runs */
    }
    return fails;
}

/* Rank 1 fills with another seed: both ranks' checks fail, and both return rank 0's verdict. */
static int rank_disagree(mscclrt_comm *comm, int r) {
    mscclrt_plan *plan = NULL;
    if (mscclrt_plan_load(&plan, plans[0]) != MSCCLRT_SUCCESS) return 1;
    mscclrt_gpu_check chk = check_of(plan, r == 1 ? 12 : 11);
    mscclrt_result res = mscclrt_gpu_check_rank(comm, plan, &chk, NULL);
    const char *e = mscclrt_last_error();
    int bad = res != MSCCLRT_ERR_INTERNAL || strncmp(e, "rank 0: plan '", 14) != 0 ||
              !strstr(e, "wrong result: rank 0 element") ||
              !strstr(e, "(2 of 2 ranks failed: 0, 1)");
    if (bad) fprintf(stderr, "rank %d: want rank 0's verdict, got %d: %s\n", r, (int)res, e);
    mscclrt_plan_free(plan);
    return bad;
}

static int child_id(mscclrt_unique_id id, int r, int ndev, int what) {
    mscclrt_comm *comm = NULL;
    if (mscclrt_comm_init_rank(&comm, 2, id, r, r % ndev) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", r, mscclrt_last_error());
        return 1;
    }
    int fails = what == 0 ? rank_plans(comm, r) : rank_disagree(comm, r);
    mscclrt_comm_destroy(comm);
    return fails;
}

static int child_env(int r, int ndev, int port) {
    char rank[16], p[16];
    snprintf(rank, sizeof rank, "%d", r);
    snprintf(p, sizeof p, "%d", port);
    setenv("RANK", rank, 1);
    setenv("LOCAL_RANK", rank, 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", p, 1);
    mscclrt_comm *comm = NULL;
    if (mscclrt_comm_init_env(&comm, -1) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "rank %d: init_env: %s\n", r, mscclrt_last_error());
        return 1;
    }
    int dev = -1, got = -1, size = 0;
    mscclrt_comm_device(comm, &dev);
    mscclrt_comm_rank(comm, &got);
    mscclrt_comm_size(comm, &size);
    int fails = dev != r % ndev || got != r || size != 2;
    if (fails)
        fprintf(stderr, "rank %d: init_env gave rank %d of %d on device %d\n", r, got, size, dev);
    mscclrt_plan *plan = NULL;
    if (mscclrt_plan_load(&plan, plans[3]) != MSCCLRT_SUCCESS) return fails + 1;
    mscclrt_gpu_check chk = check_of(plan, 5);
    if (mscclrt_gpu_check_rank(comm, plan, &chk, NULL) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "rank %d: env group: %s\n", r, mscclrt_last_error());
        fails++;
    }
    mscclrt_plan_free(plan);
    mscclrt_comm_destroy(comm);
    return fails;
}

/* Forks the two ranks of one group and returns how many failed. */
static int group(int ndev, int what, int port) {
    mscclrt_unique_id id;
    if (what < 2 && mscclrt_get_unique_id(&id) != MSCCLRT_SUCCESS) return 2;
    pid_t kids[2];
    fflush(stdout);
    for (int r = 0; r < 2; r++) {
        kids[r] = fork();
        if (kids[r] == 0)
            _exit((what < 2 ? child_id(id, r, ndev, what) : child_env(r, ndev, port)) ? 1 : 0);
    }
    int bad = 0, st = 0;
    for (int r = 0; r < 2; r++) {
        waitpid(kids[r], &st, 0);
        bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    return bad;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    static char junk;
    mscclrt_comm *c = (mscclrt_comm *)(void *)&junk;   /* must be reset to NULL */
    TEST("gpu_check_rank/null_comm", {
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_gpu_check_rank(NULL, NULL, NULL, NULL));
        CHECK_CONTAINS(mscclrt_last_error(),
                       "mscclrt_gpu_check_rank: comm is not a live communicator");
    });
    TEST("gpu_check_rank/init_env_args", {
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_comm_init_env(NULL, -1));
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_comm_init_env(&c, -2));
        CHECK(c == NULL);
        CHECK_CONTAINS(mscclrt_last_error(), "mscclrt_comm_init_env: device -2");
    });
    /* the parent must not initialise CUDA before fork: probe in a child */
    pid_t probe = fork();
    if (probe == 0) {
        int n = 0;
        if (cu_load() != MSCCLRT_SUCCESS) _exit(78);
        _exit(cu.cuDeviceGetCount(&n) == CU_OK && n > 0 ? (n >= 2 ? 2 : 1) : 77);
    }
    int st = 0;
    waitpid(probe, &st, 0);
    int ndev = WIFEXITED(st) ? WEXITSTATUS(st) : 77;
    if (ndev == 78) {
        /* no driver: both joins fail at once, before any rendezvous (no peer is waited for) */
        TEST("gpu_check_rank/no_driver", {
            setenv("RANK", "0", 1);
            setenv("WORLD_SIZE", "2", 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            setenv("MASTER_PORT", "29500", 1);
            c = (mscclrt_comm *)(void *)&junk;
            CHECK_EQ_INT(MSCCLRT_ERR_UNAVAILABLE, mscclrt_comm_init_env(&c, -1));
            CHECK(c == NULL);
            CHECK_CONTAINS(mscclrt_last_error(), "CUDA driver not available");
            mscclrt_unique_id id;
            memset(&id, 0, sizeof id);
            CHECK_EQ_INT(MSCCLRT_ERR_UNAVAILABLE, mscclrt_comm_init_rank(&c, 2, id, 0, -1));
            CHECK_CONTAINS(mscclrt_last_error(), "CUDA driver not available");
        });
    }
    if (ndev == 77 || ndev == 78) {
        TEST_SKIP("gpu_check_rank/two_processes_every_collective", "a GPU");
        TEST_SKIP("gpu_check_rank/verdict_agreed", "a GPU");
        TEST_SKIP("gpu_check_rank/init_env", "a GPU");
        return harness_report();
    }
    TEST("gpu_check_rank/two_processes_every_collective", CHECK_EQ_INT(0, group(ndev, 0, 0)));
    TEST("gpu_check_rank/verdict_agreed", CHECK_EQ_INT(0, group(ndev, 1, 0)));
    TEST("gpu_check_rank/init_env", CHECK_EQ_INT(0, group(ndev, 2, 20000 + getpid() % 20000)));
    return harness_report();
}

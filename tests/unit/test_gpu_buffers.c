/*
 * test_gpu_buffers.c - user buffers the way applications place them, one process per rank
 * (ranks on GPUs r % ndev): what one shared GPU never showed and two H100s did.
 *   - sub-ranges: sendbuf and recvbuf inside one allocation, at offsets that differ between the
 *     ranks, through plans that read and write peers' buffers (allgather fullmesh, alltoall
 *     fullmesh, out of place): each rank's peers must address its own buffers, not its offset
 *     applied to their allocations;
 *   - reuse: the allocation freed (after mscclrt_window_deregister drops its contexts) and a new
 *     one made, most likely at the same address, three times: the peers' mappings of the freed
 *     one must be closed, or opening the new one fails with CUDA_ERROR_ALREADY_MAPPED;
 *   - growth: a plan whose scratch grows with the message (reducescatter fullmesh_put, 16 chunks
 *     of scratch) at 1 MiB, then 256 MiB and 1 GiB on the same communicator (refused above 64 MiB
 *     before: scratch is now set up again, larger, on every rank).
 * Skipped without a CUDA device.
 */
#include "../harness.h"
#include "gpu_probe.h"

#include "cuda/cuda_driver.h"
#include "mscclrt.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NR 2

/* byte i of rank q's input in round k */
static unsigned char pattern(int q, size_t i, int k) { return (unsigned char)(q * 37 + k * 11 + i * 7 + 1); }

/* One round: an allocation of 8 MiB, sendbuf and recvbuf at rank- and round-dependent offsets,
 * a window over it, the plan run, the output checked, the window dropped and the memory freed. */
static int round_of(mscclrt_comm *comm, int r, const char *path, int k) {
    mscclrt_plan *plan = NULL;
    if (mscclrt_plan_load(&plan, path) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", r, mscclrt_last_error());
        return 1;
    }
    mscclrt_plan_info info;
    mscclrt_plan_get_info(plan, &info);
    const bool ag = strcmp(info.collective, "allgather") == 0;
    const size_t in = 64 << 10, out = ag ? in * NR : in;
    const size_t total = 8 << 20;
    /* different per rank and per round, 256-byte aligned, never overlapping */
    const size_t soff = 256 * (size_t)(1 + r * 5 + k * 3), roff = (4 << 20) + 512 * (size_t)(r * 3 + k);
    CuDevPtr base = 0;
    CuStream st = NULL;
    mscclrt_window *win = NULL;
    unsigned char *host = malloc(out > in ? out : in);
    int bad = !host;
    if (!bad && (cu.cuMemAlloc(&base, total) != CU_OK || cu.cuStreamCreate(&st, CU_STREAM_FLAG_NON_BLOCKING) != CU_OK)) {
        fprintf(stderr, "rank %d: cuMemAlloc/cuStreamCreate failed\n", r);
        bad = 1;
    }
    if (!bad) {
        for (size_t i = 0; i < in; i++) host[i] = pattern(r, i, k);
        cu.cuMemcpyHtoD(base + soff, host, in);
        cu.cuMemsetD8(base + roff, 0xcd, out);
        cu.cuCtxSynchronize();
    }
    if (!bad && mscclrt_window_register(comm, (void *)(uintptr_t)base, total, &win) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "rank %d: window: %s\n", r, mscclrt_last_error());
        bad = 1;
    }
    for (int it = 0; it < 3 && !bad; it++) {
        if (mscclrt_execute(comm, plan, (void *)(uintptr_t)(base + soff), (void *)(uintptr_t)(base + roff),
                            in, out, MSCCLRT_UINT8, MSCCLRT_SUM, st) != MSCCLRT_SUCCESS) {
            fprintf(stderr, "rank %d: %s round %d call %d: %s\n", r, path, k, it, mscclrt_last_error());
            bad = 1;
        }
    }
    if (!bad && cu.cuStreamSynchronize(st) != CU_OK) {
        fprintf(stderr, "rank %d: the stream failed\n", r);
        bad = 1;
    }
    if (!bad) {
        cu.cuMemcpyDtoH(host, base + roff, out);
        const size_t blk = ag ? in : in / NR;
        for (size_t i = 0; i < out && !bad; i++) {
            /* allgather: block q is rank q's input; alltoall: block q is block r of rank q's */
            const int q = (int)(i / blk);
            const size_t src = ag ? i % blk : (size_t)r * blk + i % blk;
            if (host[i] != pattern(q, src, k)) {
                fprintf(stderr, "rank %d: %s round %d: byte %zu is %u, want %u (rank %d's byte %zu; "
                        "send at +%zu, recv at +%zu)\n", r, path, k, i, host[i], pattern(q, src, k), q,
                        src, soff, roff);
                bad = 1;
            }
        }
    }
    if (win && mscclrt_window_deregister(comm, win) != MSCCLRT_SUCCESS) bad = 1;
    if (st) cu.cuStreamDestroy(st);
    if (base) cu.cuMemFree(base);
    free(host);
    mscclrt_plan_free(plan);
    return bad;
}

/* Larger and larger messages through one unkeyed plan: checked by mscclrt_gpu_check_rank. */
static int growth(mscclrt_comm *comm, int r) {
    mscclrt_plan *plan = NULL;
    const char *path = "tests/golden/stdlib/reducescatter/fullmesh_put.N2.json";
    if (mscclrt_plan_load(&plan, path) != MSCCLRT_SUCCESS) return 1;
    int bad = 0;
    const size_t sizes[] = {1 << 20, (size_t)256 << 20, (size_t)1 << 30};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes && !bad; s++) {
        mscclrt_gpu_check chk = {.bytes = sizes[s], .dtype = MSCCLRT_FLOAT16, .op = MSCCLRT_SUM,
                                 .packet = MSCCLRT_LL16, .inplace = false, .iters = 2,
                                 .graph_iters = 0, .seed = 3 + s};
        if (mscclrt_gpu_check_rank(comm, plan, &chk, NULL) != MSCCLRT_SUCCESS) {
            fprintf(stderr, "rank %d: %s at %zu bytes: %s\n", r, path, sizes[s], mscclrt_last_error());
            bad = 1;
        } else {
            printf("  rank %d: %s at %zu bytes checked\n", r, path, sizes[s]);
        }
    }
    mscclrt_plan_free(plan);
    return bad;
}

static int child(mscclrt_unique_id id, int r, int ndev, int what) {
    mscclrt_comm *comm = NULL;
    if (mscclrt_comm_init_rank(&comm, NR, id, r, r % ndev) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", r, mscclrt_last_error());
        return 1;
    }
    int bad = 0;
    if (what == 0) {
        CuDevice dev;
        gpu_enter(r % ndev, &dev);
        const char *plans[] = {"tests/golden/stdlib/allgather/fullmesh.N2.json",
                               "tests/golden/stdlib/alltoall/fullmesh.N2.json"};
        for (int k = 0; k < 3 && !bad; k++)
            for (int p = 0; p < 2 && !bad; p++) bad = round_of(comm, r, plans[p], k);
        cu.cuDevicePrimaryCtxRelease(dev);
    } else {
        bad = growth(comm, r);
    }
    mscclrt_comm_destroy(comm);
    return bad;
}

static int group(int ndev, int what) {
    mscclrt_unique_id id;
    if (mscclrt_get_unique_id(&id) != MSCCLRT_SUCCESS) return NR;
    pid_t kids[NR];
    fflush(stdout);
    for (int r = 0; r < NR; r++) {
        kids[r] = fork();
        if (kids[r] == 0) {
            alarm(240);   /* a hang fails the test instead of the suite */
            _exit(child(id, r, ndev, what) ? 1 : 0);
        }
    }
    int bad = 0, st = 0;
    for (int r = 0; r < NR; r++) {
        waitpid(kids[r], &st, 0);
        bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    return bad;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const int ndev = gpu_probe_count(2);
    if (ndev == 0) {
        TEST_SKIP("gpu buffers: sub-ranges at per-rank offsets, freed and reallocated", "a GPU");
        TEST_SKIP("gpu buffers: scratch grows from 1 MiB to 1 GiB on one communicator", "a GPU");
        return 0;
    }
    TEST("gpu buffers: sub-ranges at per-rank offsets, freed and reallocated", CHECK_EQ_INT(0, group(ndev, 0)));
    TEST("gpu buffers: scratch grows from 1 MiB to 1 GiB on one communicator", CHECK_EQ_INT(0, group(ndev, 1)));
    return harness_report();
}

/*
 * test_gpu_direct.c - the direct path of the built-in collectives on users' own buffers, one
 * process per rank (argv[1] ranks, default 2, rank r on GPU r % ndev): allreduce,
 * reducescatter, reduce, allgather, alltoall and broadcast above MSCCLRT_NATIVE_DIRECT_BYTES,
 * in place (alltoall's swap of blocks between pairs) and out of place, with sendbuf and recvbuf inside one allocation at offsets that
 * differ between ranks (one of them only 4-byte aligned), each call made three times on the
 * same buffers (the first may take the slots while peers map the allocation; the later ones
 * must go direct: the kernel's counts say so), then the allocation freed and a new one made,
 * most likely at the same address, and everything again (a stale mapping would give peers'
 * old memory: wrong values), and once more on cuMem/VMM memory (shared by its POSIX fd), then
 * all_reduce and reduce_scatter of 8 Mi elements out of place (the forms by stores); the
 * processes also exchange buffers by send/recv in pairs (r, r ^ 1), directly; then the
 * collectives on the ranks of one process (mscclrt_comm_init_all, group calls). Element counts
 * are odd. Results are compared exactly (small integers in float32). Skips (77) without a GPU.
 */
#include "../harness.h"
#include "gpu_probe.h"

#include "algo/algo_native.h"
#include "cuda/cuda_driver.h"
#include "cuda/cumem.h"
#include "mscclrt.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXR 8
static int NR = 2;

enum { AR, RS, RD, AG, A2A, BC, SR, NCOLL };
static const char *const cname[NCOLL] = {"allreduce", "reducescatter", "reduce", "allgather",
                                         "alltoall", "broadcast", "sendrecv"};

static float value(int q, size_t i, int k) { return (float)((q + 1) * 3 + (int)(i % 97) + k); }

/* elements of the send and recv buffers for per-rank count c */
static void sizes(int coll, size_t c, size_t *ns, size_t *nr) {
    switch (coll) {
    case RS: *ns = c * (size_t)NR, *nr = c; break;
    case AG: *ns = c, *nr = c * (size_t)NR; break;
    case A2A: *ns = *nr = c * (size_t)NR; break;
    default: *ns = *nr = c; break;
    }
}

static float expect(int coll, int r, size_t j, size_t c, int k, int root) {
    float s = 0;
    switch (coll) {
    case AR: case RD:
        for (int q = 0; q < NR; q++) s += value(q, j, k);
        return s;
    case RS:
        for (int q = 0; q < NR; q++) s += value(q, (size_t)r * c + j, k);
        return s;
    case AG: return value((int)(j / c), j % c, k);
    case A2A: return value((int)(j / c), (size_t)r * c + j % c, k);
    case SR: return value(r ^ 1, j, k);   /* from the pair's other rank */
    default: return value(root, j, k);
    }
}

static mscclrt_result call(mscclrt_comm *comm, int coll, const float *s, float *d, size_t c,
                           int root, CuStream st) {
    switch (coll) {
    case AR: return mscclrt_allreduce(comm, s, d, c, MSCCLRT_FLOAT32, MSCCLRT_SUM, st);
    case RS: return mscclrt_reducescatter(comm, s, d, c, MSCCLRT_FLOAT32, MSCCLRT_SUM, st);
    case RD: return mscclrt_reduce(comm, s, d, c, MSCCLRT_FLOAT32, MSCCLRT_SUM, root, st);
    case AG: return mscclrt_allgather(comm, s, d, c, MSCCLRT_FLOAT32, st);
    case A2A: return mscclrt_alltoall(comm, s, d, c, MSCCLRT_FLOAT32, st);
    case SR: {   /* ranks in pairs (r, r ^ 1) exchange their buffers */
        int mate = 0;
        mscclrt_comm_rank(comm, &mate);
        mate ^= 1;
        mscclrt_result g = mscclrt_group_start();
        if (g == MSCCLRT_SUCCESS) g = mscclrt_send(comm, s, c, MSCCLRT_FLOAT32, mate, st);
        if (g == MSCCLRT_SUCCESS) g = mscclrt_recv(comm, d, c, MSCCLRT_FLOAT32, mate, st);
        const mscclrt_result e = mscclrt_group_end();
        return g != MSCCLRT_SUCCESS ? g : e;
    }
    default: return mscclrt_broadcast(comm, s, d, c, MSCCLRT_FLOAT32, root, st);
    }
}

/* One collective on buffers inside `mem`, three times; returns failures. */
static int run_case(mscclrt_comm *comm, int r, int coll, size_t c, bool inplace, int k,
                    CuDevPtr mem, size_t cap, CuStream st, float *host, int *direct_calls) {
    size_t ns, nr;
    sizes(coll, c, &ns, &nr);
    const int root = NR - 1;
    /* offsets that differ per rank and per round; round 1 puts the buffers 4 bytes past a
     * 16-byte boundary (the copies' scalar path) */
    const size_t base = 4096 * (size_t)(r + 1) + (k == 1 ? 4 : 0);
    float *sbuf = (float *)(uintptr_t)(mem + base);
    float *rbuf = (float *)(uintptr_t)(mem + base + ns * 4 + 256 * (size_t)(r + 2));
    if (inplace) {   /* as NCCL defines it for each collective */
        if (coll == AG) rbuf = (float *)(uintptr_t)(mem + base), sbuf = rbuf + (size_t)r * c;
        else if (coll == RS) rbuf = sbuf + (size_t)r * c;
        else rbuf = sbuf;
    }
    if ((CuDevPtr)(uintptr_t)(rbuf + nr) > mem + cap || (CuDevPtr)(uintptr_t)(sbuf + ns) > mem + cap)
        return 1;
    int bad = 0;
    for (int it = 0; it < 3 && !bad; it++) {
        /* input, then the output area poisoned (where it does not overlap the input) */
        for (size_t i = 0; i < ns; i++) host[i] = value(r, i, k + it);
        if (cu.cuMemsetD8((CuDevPtr)(uintptr_t)rbuf, 0xff, nr * 4) != CU_OK ||
            cu.cuMemcpyHtoD((CuDevPtr)(uintptr_t)sbuf, host, ns * 4) != CU_OK) return 1;
        uint64_t d0 = 0, s0 = 0, d1 = 0, s1 = 0;
        algo_native_direct_stats(comm, &d0, &s0);
        if (call(comm, coll, sbuf, rbuf, c, root, st) != MSCCLRT_SUCCESS) {
            fprintf(stderr, "rank %d: %s: %s\n", r, cname[coll], mscclrt_last_error());
            return 1;
        }
        if (cu.cuStreamSynchronize(st) != CU_OK) {
            fprintf(stderr, "rank %d: %s: the stream failed\n", r, cname[coll]);
            return 1;
        }
        algo_native_direct_stats(comm, &d1, &s1);
        if (d1 > d0) (*direct_calls)++;
        if (cu.cuMemcpyDtoH(host, (CuDevPtr)(uintptr_t)rbuf, nr * 4) != CU_OK) return 1;
        if (coll == RD && r != root) continue;   /* only the root's output is defined */
        for (size_t j = 0; j < nr && !bad; j++) {
            const float want = expect(coll, r, j, c, k + it, root);
            if (host[j] != want) {
                fprintf(stderr, "rank %d: %s count %zu %s round %d call %d: element %zu of %zu: "
                        "got %g, want %g (path: %s)\n", r, cname[coll], c,
                        inplace ? "in place" : "out of place", k, it, j, nr, host[j], want,
                        d1 > d0 ? "direct" : "slots");
                bad = 1;
            }
        }
    }
    return bad;
}

static int child(mscclrt_unique_id id, int r, int ndev) {
    mscclrt_comm *comm = NULL;
    if (mscclrt_comm_init_rank(&comm, NR, id, r, r % ndev) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", r, mscclrt_last_error());
        return 1;
    }
    CuDevice dev;
    gpu_enter(r % ndev, &dev);
    CuStream st = NULL;
    cu.cuStreamCreate(&st, 1);
    const size_t c = (1u << 20) + 3;   /* elements per rank: 4 MiB and odd */
    const size_t cap = 4 * c * (size_t)NR * 2 + (1u << 20);
    float *host = malloc(4 * c * (size_t)NR);
    int bad = !host, direct_calls = 0, calls = 0;
    /* three allocations: cuMemAlloc, another after freeing it (likely the same address), and
     * cuMem/VMM memory (its POSIX fd travels to the peers) */
    for (int k = 0; k < 3 && !bad; k++) {
        CuDevPtr mem = 0;
        size_t vmm_size = 0;
        if (k < 2 ? cu.cuMemAlloc(&mem, cap) != CU_OK
                  : cumem_alloc(&mem, &vmm_size, cap, r % ndev) != MSCCLRT_SUCCESS) {
            fprintf(stderr, "rank %d: allocation %d failed\n", r, k);
            bad = 1;
            break;
        }
        for (int coll = 0; coll < NCOLL && !bad; coll++)
            for (int ip = 0; ip < 2 && !bad; ip++) {
                if (coll == SR && ip) continue;   /* no in-place send/recv */
                if (coll == SR && NR % 2) continue;                 /* pairs need an even count */
                bad = run_case(comm, r, coll, c, ip, k, mem, cap, st, host, &direct_calls);
                calls += 3;
            }
        if (k < 2) cu.cuMemFree(mem);
        else cumem_free(mem, vmm_size);
    }
    /* the forms by stores (from 32 MiB out of place, whole 16-byte parts: all_reduce at any
     * rank count, reduce_scatter of 2 ranks in two roles of blocks), on 8 Mi elements per rank */
    const size_t cb = 8u << 20, capb = 4 * cb * (size_t)NR * 2 + (1u << 20);
    float *hb = bad ? NULL : malloc(4 * cb * (size_t)NR);
    CuDevPtr mb = 0;
    if (!bad && (!hb || cu.cuMemAlloc(&mb, capb) != CU_OK)) {
        fprintf(stderr, "rank %d: the 8 Mi-element case's buffers failed\n", r);
        bad = 1;
    }
    for (int coll = AR; coll <= RS && !bad; coll++) {
        bad = run_case(comm, r, coll, cb, false, 0, mb, capb, st, hb, &direct_calls);
        calls += 3;
    }
    if (mb) cu.cuMemFree(mb);
    free(hb);
    uint64_t d = 0, s = 0;
    algo_native_direct_stats(comm, &d, &s);
    printf("rank %d: %d of %d calls went direct (kernel counts: %llu direct, %llu slots)\n", r,
           direct_calls, calls, (unsigned long long)d, (unsigned long long)s);
    /* each buffer's later calls must go direct: at most one call of three takes the slots */
    if (!bad && direct_calls < calls * 2 / 3) {
        fprintf(stderr, "rank %d: only %d of %d calls went direct\n", r, direct_calls, calls);
        bad = 1;
    }
    free(host);
    cu.cuStreamDestroy(st);
    mscclrt_comm_destroy(comm);
    cu.cuDevicePrimaryCtxRelease(dev);
    return bad;
}

/* ---- the ranks of one process (mscclrt_comm_init_all), driven by one thread ---------------- */
typedef struct {
    mscclrt_comm *comm;
    CuContext ctx;
    CuStream st;
    CuDevPtr mem;
    float *s, *r;
    int direct_calls;
} OneRank;

/* one collective on every rank at once (a group), three times; returns failures */
static int group_case(OneRank *rk, int coll, size_t c, bool inplace, int k, float *host) {
    size_t ns, nr;
    sizes(coll, c, &ns, &nr);
    const int root = NR - 1;
    int bad = 0;
    for (int r = 0; r < NR; r++) {   /* per-rank offsets, as the processes' case */
        const size_t base = 4096 * (size_t)(r + 1);
        rk[r].s = (float *)(uintptr_t)(rk[r].mem + base);
        rk[r].r = (float *)(uintptr_t)(rk[r].mem + base + ns * 4 + 256 * (size_t)(r + 2));
        if (inplace) {
            if (coll == AG) rk[r].r = (float *)(uintptr_t)(rk[r].mem + base), rk[r].s = rk[r].r + (size_t)r * c;
            else if (coll == RS) rk[r].r = rk[r].s + (size_t)r * c;
            else rk[r].r = rk[r].s;
        }
    }
    for (int it = 0; it < 3 && !bad; it++) {
        uint64_t d0[MAXR], s0;
        for (int r = 0; r < NR; r++) {
            cu.cuCtxSetCurrent(rk[r].ctx);
            for (size_t i = 0; i < ns; i++) host[i] = value(r, i, k + it);
            if (cu.cuMemsetD8((CuDevPtr)(uintptr_t)rk[r].r, 0xff, nr * 4) != CU_OK ||
                cu.cuMemcpyHtoD((CuDevPtr)(uintptr_t)rk[r].s, host, ns * 4) != CU_OK) return 1;
            algo_native_direct_stats(rk[r].comm, &d0[r], &s0);
        }
        mscclrt_group_start();
        for (int r = 0; r < NR && !bad; r++)
            if (call(rk[r].comm, coll, rk[r].s, rk[r].r, c, root, rk[r].st) != MSCCLRT_SUCCESS) {
                fprintf(stderr, "rank %d: %s: %s\n", r, cname[coll], mscclrt_last_error());
                bad = 1;
            }
        if (mscclrt_group_end() != MSCCLRT_SUCCESS) {
            fprintf(stderr, "%s: group end: %s\n", cname[coll], mscclrt_last_error());
            return 1;
        }
        for (int r = 0; r < NR && !bad; r++) {
            cu.cuCtxSetCurrent(rk[r].ctx);
            if (cu.cuStreamSynchronize(rk[r].st) != CU_OK) {
                fprintf(stderr, "rank %d: %s: the stream failed\n", r, cname[coll]);
                return 1;
            }
            uint64_t d1 = 0, s1 = 0;
            algo_native_direct_stats(rk[r].comm, &d1, &s1);
            if (d1 > d0[r]) rk[r].direct_calls++;
            if (coll == RD && r != root) continue;
            if (cu.cuMemcpyDtoH(host, (CuDevPtr)(uintptr_t)rk[r].r, nr * 4) != CU_OK) return 1;
            for (size_t j = 0; j < nr && !bad; j++) {
                const float want = expect(coll, r, j, c, k + it, root);
                if (host[j] != want) {
                    fprintf(stderr, "one process: rank %d: %s count %zu %s call %d: element %zu: "
                            "got %g, want %g\n", r, cname[coll], c, inplace ? "in place" : "out of place",
                            it, j, host[j], want);
                    bad = 1;
                }
            }
        }
    }
    return bad;
}

/* every direct collective on NR ranks of this process (rank r on GPU r % ndev), twice on new
 * allocations; later calls on each buffer must go direct */
static int one_process(int ndev) {
    OneRank rk[MAXR];
    memset(rk, 0, sizeof rk);
    mscclrt_comm *comms[MAXR];
    int devs[MAXR];
    for (int r = 0; r < NR; r++) devs[r] = r % ndev;
    if (mscclrt_comm_init_all(comms, NR, devs) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "init_all: %s\n", mscclrt_last_error());
        return 1;
    }
    const size_t c = (1u << 20) + 3;
    const size_t cap = 4 * c * (size_t)NR * 2 + (1u << 20);
    float *host = malloc(4 * c * (size_t)NR);
    int bad = !host, calls = 0;
    for (int r = 0; r < NR; r++) {
        CuDevice dev;
        rk[r].comm = comms[r];
        cu.cuDeviceGet(&dev, devs[r]);
        cu.cuDevicePrimaryCtxRetain(&rk[r].ctx, dev);
        cu.cuCtxSetCurrent(rk[r].ctx);
        cu.cuStreamCreate(&rk[r].st, 1);
    }
    for (int k = 0; k < 2 && !bad; k++) {
        for (int r = 0; r < NR && !bad; r++) {
            cu.cuCtxSetCurrent(rk[r].ctx);
            bad = cu.cuMemAlloc(&rk[r].mem, cap) != CU_OK;
        }
        for (int coll = 0; coll < NCOLL && !bad; coll++)
            for (int ip = 0; ip < 2 && !bad; ip++) {
                if (coll == SR) continue;   /* send/recv inside the group call: not this case */
                bad = group_case(rk, coll, c, ip, k, host);
                calls += 3;
            }
        for (int r = 0; r < NR; r++) {
            cu.cuCtxSetCurrent(rk[r].ctx);
            if (rk[r].mem) cu.cuMemFree(rk[r].mem);
            rk[r].mem = 0;
        }
    }
    for (int r = 0; r < NR; r++) {
        printf("one process: rank %d: %d of %d calls went direct\n", r, rk[r].direct_calls, calls);
        if (!bad && rk[r].direct_calls < calls * 2 / 3) {
            fprintf(stderr, "one process: rank %d: only %d of %d calls went direct\n", r,
                    rk[r].direct_calls, calls);
            bad = 1;
        }
    }
    for (int r = 0; r < NR; r++) {
        cu.cuCtxSetCurrent(rk[r].ctx);
        cu.cuStreamDestroy(rk[r].st);
        mscclrt_comm_destroy(comms[r]);
    }
    for (int r = 0; r < NR; r++) {
        CuDevice dev;
        cu.cuDeviceGet(&dev, devs[r]);
        cu.cuDevicePrimaryCtxRelease(dev);
    }
    free(host);
    return bad;
}

static int group(int ndev) {
    mscclrt_unique_id id;
    if (mscclrt_get_unique_id(&id) != MSCCLRT_SUCCESS) return NR;
    pid_t kids[MAXR];
    fflush(stdout);
    for (int r = 0; r < NR; r++) {
        kids[r] = fork();
        if (kids[r] == 0) {
            alarm(240);   /* a hang fails the test instead of the suite */
            _exit(child(id, r, ndev) ? 1 : 0);
        }
    }
    int bad = 0, st = 0;
    for (int r = 0; r < NR; r++) {
        waitpid(kids[r], &st, 0);
        bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    return bad;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* the one-process direct path is opt-in (params.def says why); set before anything reads
     * the library's variables, which happens once per process and is inherited by children */
    setenv("MSCCLRT_NATIVE_DIRECT_LOCAL", "1", 1);
    /* reduce_scatter of 2 ranks by stores is opt-in until measured: its 8 Mi-element case
     * (64 MiB of input) runs it here unless the caller says otherwise */
    setenv("MSCCLRT_NATIVE_PUSH_RS_BYTES", "33554432", 0);
    if (argc > 1) NR = atoi(argv[1]);
    if (NR < 2 || NR > MAXR) {
        fprintf(stderr, "usage: %s [ranks 2..%d]\n", argv[0], MAXR);
        return 2;
    }
    char name[120];
    snprintf(name, sizeof name, "gpu direct: %d processes, every direct collective, users' "
             "buffers at per-rank offsets, reused", NR);
    const int ndev = gpu_probe_count(8);
    if (ndev == 0) {
        TEST_SKIP(name, "a GPU");
        TEST_SKIP("gpu direct: the ranks of one process (init_all), every direct collective", "a GPU");
        return 0;
    }
    TEST(name, CHECK_EQ_INT(0, group(ndev)));
    /* the ranks of one process, in a child (this process must not initialise CUDA first) */
    snprintf(name, sizeof name, "gpu direct: %d ranks of one process (init_all), every direct "
             "collective", NR);
    fflush(stdout);
    pid_t kid = fork();
    if (kid == 0) {
        alarm(240);
        if (cu_load() != MSCCLRT_SUCCESS) _exit(1);
        _exit(one_process(ndev) ? 1 : 0);
    }
    int kst = 0;
    waitpid(kid, &kst, 0);
    TEST(name, CHECK(WIFEXITED(kst) && WEXITSTATUS(kst) == 0));
    return harness_report();
}

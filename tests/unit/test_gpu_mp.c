/*
 * test_gpu_mp.c - one process per rank (fork, 2 ranks: devices 0 and 1, or both on device 0):
 * mscclrt_get_unique_id / mscclrt_comm_init_rank, collective setup over the bootstrap and CUDA
 * IPC, back-to-back executions checked against the host reference (allreduce and allgather:
 * every rank's output is the same, so each process checks its own), once with cuMemAlloc
 * buffers (CUDA IPC handles) and once with cuMem/VMM buffers (POSIX fds passed over the
 * bootstrap's Unix socket). Skips (77) without a GPU.
 */
#include "../harness.h"
#include "gpu_probe.h"

#include "check/check.h"
#include "cuda/cuda_driver.h"
#include "cuda/cumem.h"
#include "mscclrt.h"
#include "plan.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const plans[] = {
    "tests/plans/compat/allreduce_packet.json",
    "tests/plans/compat/allreduce.json",
    "tests/plans/compat/transfer_pack.json",
    "tests/golden/stdlib/allreduce/rs_ag_simple.N2.json",
    "tests/golden/stdlib/allgather/fullmesh.N2.json",
};

static int wait_stream(CuStream s) {
    time_t t0 = time(NULL);
    for (;;) {
        CuResult r = cu.cuStreamQuery(s);
        if (r == CU_OK) return 0;
        if (r != CU_ERR_NOT_READY || time(NULL) - t0 > 20) return -1;
        usleep(100);
    }
}

/* Device buffers of one run: cuMemAlloc, or cuMemCreate with a POSIX fd handle type mapped
 * at a reserved range (what PyTorch's expandable segments and NCCL's cuMem mode allocate). */
typedef struct { CuDevPtr ptr; size_t size; bool vmm; } Buf;
static Buf bufs[64];
static int nbufs;

static CuDevPtr buf_alloc(size_t bytes, bool vmm, int device) {
    Buf *b = &bufs[nbufs];
    if (nbufs == 64) return 0;
    b->vmm = vmm;
    if (vmm ? cumem_alloc(&b->ptr, &b->size, bytes, device) != MSCCLRT_SUCCESS
            : (b->size = bytes, cu.cuMemAlloc(&b->ptr, bytes) != CU_OK))
        return 0;
    nbufs++;
    return b->ptr;
}

/* after mscclrt_comm_destroy (its barrier): no peer maps these any more */
static void bufs_free(void) {
    for (int i = 0; i < nbufs; i++) {
        if (bufs[i].vmm) cumem_free(bufs[i].ptr, bufs[i].size);
        else cu.cuMemFree(bufs[i].ptr);
    }
    nbufs = 0;
}

/* one rank's whole test; returns the number of failures */
static int rank_main(mscclrt_unique_id id, int rank, int device, bool vmm) {
    mscclrt_comm *comm = NULL;
    if (mscclrt_comm_init_rank(&comm, 2, id, rank, device) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", rank, mscclrt_last_error());
        return 1;
    }
    int fails = 0;
    CuDevice dev;
    gpu_enter(device, &dev);
    CuStream st;
    cu.cuStreamCreate(&st, CU_STREAM_FLAG_NON_BLOCKING);
    for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
        mscclrt_plan *plan = NULL;
        if (access(plans[i], R_OK) != 0) continue;
        if (mscclrt_plan_load(&plan, plans[i]) != MSCCLRT_SUCCESS) {
            fails++;
            continue;
        }
        mscclrt_plan_info info;
        mscclrt_plan_get_info(plan, &info);
        PlanCollective coll;
        plan_coll_from_name(info.collective, &coll);
        size_t unit = 16;
        mscclrt_plan_min_bytes(plan, &unit);
        const size_t targets[] = {4096, 1 << 20};
        for (int si = 0; si < 2; si++) {
            size_t bytes = targets[si] / unit * unit, in, out;
            if (!bytes) bytes = unit;
            if (bytes > info.max_message_size) continue;
            mscclrt_plan_call_sizes(plan, bytes, &in, &out);
            const mscclrt_dtype dt = MSCCLRT_FLOAT32;
            const mscclrt_redop op = MSCCLRT_SUM;
            void *hin[2], *hout[2];
            for (int q = 0; q < 2; q++) {
                hin[q] = malloc(in);
                check_fill(dt, op, hin[q], in / 4, 99 + bytes, q);
            }
            hout[0] = hout[1] = malloc(out);
            size_t big = in > out ? in : out;
            CuDevPtr buf = buf_alloc(big, vmm, device), sbuf = 0, pristine = 0;
            cu.cuMemAlloc(&pristine, in);
            if (!info.inplace) sbuf = buf_alloc(in, vmm, device);
            if (!buf || (!info.inplace && !sbuf)) {
                fprintf(stderr, "rank %d: cannot allocate %s buffers\n", rank,
                        vmm ? "cuMem (VMM)" : "cuMemAlloc");
                _exit(fails + 1);
            }
            cu.cuMemsetD8(buf, 0xcd, big);
            CuDevPtr s = info.inplace ? buf : sbuf, d = buf;
            if (info.inplace && coll == PLAN_COLL_ALLGATHER) s = buf + (CuDevPtr)rank * in;
            cu.cuMemcpyHtoD(pristine, hin[rank], in);
            cu.cuMemcpyHtoD(s, hin[rank], in);
            cu.cuCtxSynchronize();
            mscclrt_result r = MSCCLRT_SUCCESS;
            for (int it = 0; it < 10 && r == MSCCLRT_SUCCESS; it++) {
                if (info.inplace) cu.cuMemcpyDtoDAsync(s, pristine, in, st);
                r = mscclrt_execute(comm, plan, (const void *)(uintptr_t)s, (void *)(uintptr_t)d,
                                    in, out, dt, op, st);
            }
            if (r != MSCCLRT_SUCCESS || wait_stream(st) != 0) {
                fprintf(stderr, "rank %d: %s %zu B: %s\n", rank, info.name, bytes,
                        r != MSCCLRT_SUCCESS ? mscclrt_last_error() : "kernel did not finish");
                fails++;
                _exit(fails); /* a stuck GPU: nothing else can run */
            }
            cu.cuMemcpyDtoH(hout[0], d, out);
            CheckMismatch mm;
            if (!check_collective(coll, 2, dt, op, (const void *const *)hin, in,
                                  (const void *const *)hout, out, &mm)) {
                fprintf(stderr, "rank %d: %s %zu B: wrong result: %s\n", rank, info.name, bytes, mm.msg);
                fails++;
            } else {
                printf("  rank %d ok %s %zu B (%s)\n", rank, info.name, bytes,
                       vmm ? "cuMem buffers" : "cuMemAlloc buffers");
            }
            cu.cuMemFree(pristine);   /* local only: no peer maps it */
            /* contexts are per allocation: free only after every rank is done (the destroy
             * barrier), so keep the buffers until the end of this plan */
            free(hin[0]);
            free(hin[1]);
            free(hout[0]);
        }
        mscclrt_plan_free(plan);
    }
    mscclrt_comm_destroy(comm);
    bufs_free();
    return fails;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* the parent must not initialise CUDA before fork: probe in a child */
    pid_t probe = fork();
    if (probe == 0) {
        int n = 0;
        _exit(cu_load() == MSCCLRT_SUCCESS && cu.cuDeviceGetCount(&n) == CU_OK && n > 0 ? (n >= 2 ? 2 : 1) : 77);
    }
    int st = 0;
    waitpid(probe, &st, 0);
    int ndev = WIFEXITED(st) ? WEXITSTATUS(st) : 77;
    if (ndev == 77) {
        return harness_skip("a GPU", "no CUDA device");
    }
    mscclrt_unique_id id;
    TEST("gpu mp unique id", CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_get_unique_id(&id)));
    for (int vmm = 0; vmm < 2; vmm++) {
        if (vmm) TEST("gpu mp unique id (second group)",
                      CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_get_unique_id(&id)));
        pid_t kids[2];
        for (int r = 0; r < 2; r++) {
            kids[r] = fork();
            if (kids[r] == 0) _exit(rank_main(id, r, ndev >= 2 ? r : 0, vmm) ? 1 : 0);
        }
        int ok = 1;
        for (int r = 0; r < 2; r++) {
            waitpid(kids[r], &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ok = 0;
        }
        TEST(vmm ? "gpu mp two processes run and check plans on cuMem (VMM) buffers, POSIX fds"
                 : "gpu mp two processes run and check plans on cuMemAlloc buffers, IPC handles",
             CHECK(ok));
    }
    return harness_report();
}

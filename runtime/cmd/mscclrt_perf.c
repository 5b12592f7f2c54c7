/*
 * mscclrt_perf.c - mscclrt-perf: nccl-tests style bandwidth/latency measurement of plans on
 * GPUs in one process (-t threads x -g GPUs each), with nccl-tests' flags, columns and
 * algbw/busbw formulas. --plan FILE (repeatable) gives the algorithms: for each size and
 * buffer mode the first plan whose rank count, size range and in-place mode fit. --lib nccl
 * times the real NCCL (dlopen'ed) with the identical harness; --lib both prints both tables.
 */
#include "mscclrt.h"
#include "check/check.h"
#include "cuda/cuda_driver.h"
#include "exec/exec.h"
#include "algo/algo.h"
#include "core/param.h"
#include "core/numarg.h"

#include <dlfcn.h>
#include <getopt.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the real NCCL, opened at run time (values as nccl.h) --------------------------------- */
typedef struct ncclComm *ncclComm_t;
typedef struct {
    int (*CommInitAll)(ncclComm_t *, int, const int *);
    int (*CommDestroy)(ncclComm_t);
    int (*GroupStart)(void);
    int (*GroupEnd)(void);
    int (*AllReduce)(const void *, void *, size_t, int, int, ncclComm_t, void *);
    int (*AllGather)(const void *, void *, size_t, int, ncclComm_t, void *);
    int (*ReduceScatter)(const void *, void *, size_t, int, int, ncclComm_t, void *);
    int (*Broadcast)(const void *, void *, size_t, int, int, ncclComm_t, void *);
    int (*Send)(const void *, size_t, int, int, ncclComm_t, void *);
    int (*Recv)(void *, size_t, int, int, ncclComm_t, void *);
    const char *(*GetErrorString)(int);
    int (*GetVersion)(int *);
    char path[512];
} Nccl;
static Nccl nccl;

static int nccl_open(void) {
    const char *env = param_str(PARAM_NCCL_LIB_PATH);
    char cands[4][600];
    int nc = 0;
    if (*env) {
        snprintf(cands[nc++], sizeof cands[0], "%s", env);
        snprintf(cands[nc++], sizeof cands[0], "%s/libnccl.so.2", env);
    }
    snprintf(cands[nc++], sizeof cands[0], "libnccl.so.2");
    FILE *py = popen("python3 -c 'import nvidia.nccl, os; print(os.path.dirname("
                     "nvidia.nccl.__path__[0] + \"/x\"))' 2>/dev/null", "r");
    if (py) {
        char dir[500] = "";
        if (fgets(dir, sizeof dir, py)) {
            dir[strcspn(dir, "\n")] = 0;
            if (*dir) snprintf(cands[nc++], sizeof cands[0], "%s/lib/libnccl.so.2", dir);
        }
        pclose(py);
    }
    void *lib = NULL;
    for (int i = 0; i < nc && !lib; i++)
        if ((lib = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL))) snprintf(nccl.path, sizeof nccl.path, "%s", cands[i]);
    if (!lib) {
        fprintf(stderr, "mscclrt-perf: cannot open the real NCCL (set MSCCLRT_NCCL_LIB_PATH): %s\n", dlerror());
        return -1;
    }
#define NS(f, s) if (!(*(void **)&nccl.f = dlsym(lib, s))) { fprintf(stderr, "mscclrt-perf: %s lacks %s\n", nccl.path, s); return -1; }
    NS(CommInitAll, "ncclCommInitAll") NS(CommDestroy, "ncclCommDestroy") NS(GroupStart, "ncclGroupStart")
    NS(GroupEnd, "ncclGroupEnd") NS(AllReduce, "ncclAllReduce") NS(AllGather, "ncclAllGather")
    NS(ReduceScatter, "ncclReduceScatter") NS(Broadcast, "ncclBroadcast") NS(Send, "ncclSend")
    NS(Recv, "ncclRecv") NS(GetErrorString, "ncclGetErrorString") NS(GetVersion, "ncclGetVersion")
#undef NS
    return 0;
}

/* ---- options and state ------------------------------------------------------------------------ */
typedef struct {
    size_t minb, maxb, stepb;
    double factor;
    int g, t, warm, iters, graphs, check;
    mscclrt_dtype dt;
    mscclrt_redop op;
    PlanCollective coll;
    bool coll_set;
    int lib;                       /* 0 mscclrt plans, 1 nccl, 2 libmscclrt's NCCL-shaped calls */
    int nplans;
    mscclrt_plan *plans[32];
    const char *plan_paths[32];
    int ndev;
    int devs[64];
} Opts;

typedef struct {
    CuStream stream;
    CuDevPtr sbuf, rbuf;           /* sbuf: max input; rbuf: max(input, output) */
    mscclrt_comm *comm;
    ncclComm_t ncomm;
    CuContext ctx;
    void *host_in[1];
} Rank;

static Opts O;
static Rank R[64];
static size_t max_in, max_out;
static pthread_barrier_t bar;
static double thread_time[64];
static int thread_err[64];
static double thread_first[64];   /* seconds of the first warm-up call (setup, kernel load) */
static double thread_host[64];    /* host seconds per eager call, all ranks of the thread */
static double thread_raw[64];     /* the same for bare cuLaunchKernel of the same kernels */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A number option's value (numarg.c: decimal only, overflow and range refused); false after
 * printing the message, which names the option and the value. */
static bool num_opt(int c, const char *text, const char *what, unsigned long long lo,
                    unsigned long long hi, bool suffixes, unsigned long long *out) {
    const char opt[3] = {'-', (char)c, 0};
    const NumArg spec = {what, lo, hi, suffixes};
    char msg[NUMARG_MSG];
    if (numarg_parse(&spec, opt, text, out, msg)) return true;
    fprintf(stderr, "mscclrt-perf: %s\n", msg);
    return false;
}

static void sizes_of(PlanCollective coll, int n, size_t bytes, size_t *in, size_t *out) {
    *in = *out = bytes;
    if (coll == PLAN_COLL_ALLGATHER) *in = bytes / (size_t)n;
    if (coll == PLAN_COLL_REDUCESCATTER) *out = bytes / (size_t)n;
}

static double bus_factor(PlanCollective c, int n) {
    switch (c) {
    case PLAN_COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
    case PLAN_COLL_ALLGATHER: case PLAN_COLL_REDUCESCATTER: case PLAN_COLL_ALLTOALL:
        return (double)(n - 1) / n;
    default: return 1.0;
    }
}

/* the plan for (bytes, in-place?), or NULL */
static mscclrt_plan *pick(size_t bytes, int inplace) {
    for (int i = 0; i < O.nplans; i++) {
        const Plan *p = exec_plan(O.plans[i]);
        if (p->ngpus != O.ndev || (int)p->inplace != inplace) continue;
        uint64_t in, out;
        plan_call_sizes(p, bytes, &in, &out);
        uint64_t checked = p->collective == PLAN_COLL_ALLGATHER ? out : in;
        if (checked < p->min_size || checked > p->max_size) continue;
        PlanGeom g;
        PlanErr e;
        if (!plan_geom(p, 0, in, out, &g, &e)) continue;
        return O.plans[i];
    }
    return NULL;
}

/* Buffers of rank r for a call of `bytes` in a mode. */
static void bufs(int r, size_t in, size_t out, int inplace, const void **s, void **d) {
    if (!inplace) {
        *s = (const void *)(uintptr_t)R[r].sbuf;
        *d = (void *)(uintptr_t)R[r].rbuf;
        return;
    }
    CuDevPtr b = R[r].rbuf, sp = b, dp = b;
    if (O.coll == PLAN_COLL_ALLGATHER) sp = b + (CuDevPtr)r * in;
    if (O.coll == PLAN_COLL_REDUCESCATTER) dp = b + (CuDevPtr)r * out;
    *s = (const void *)(uintptr_t)sp;
    *d = (void *)(uintptr_t)dp;
}

/* One collective on the ranks [r0, r1) of this thread, as one group. */
static int issue(int r0, int r1, const mscclrt_plan *plan, size_t bytes, int inplace) {
    size_t in, out;
    sizes_of(O.coll, O.ndev, bytes, &in, &out);
    size_t esz = mscclrt_dtype_size(O.dt);
    if (O.lib == 0) {
        const Plan *p = exec_plan(plan);
        uint64_t pin, pout;
        plan_call_sizes(p, bytes, &pin, &pout);
        /* one GPU per thread: no group, as applications call it (the library's hot path) */
        const bool group = r1 - r0 > 1;
        if (group) mscclrt_group_start();
        int err = 0;
        for (int r = r0; r < r1; r++) {
            const void *s;
            void *d;
            bufs(r, pin, pout, inplace, &s, &d);
            if (mscclrt_execute(R[r].comm, plan, s, d, pin, pout, O.dt, O.op, R[r].stream) != MSCCLRT_SUCCESS)
                err = 1;
        }
        if (group && mscclrt_group_end() != MSCCLRT_SUCCESS) err = 1;
        if (err) fprintf(stderr, "mscclrt-perf: %s\n", mscclrt_last_error());
        return err;
    }
    if (O.lib == 2) { /* mscclrt_allreduce & co.: the selector's choice, the drop-in's path */
        const bool group = r1 - r0 > 1 || O.coll == PLAN_COLL_ALLTOALL || O.coll == PLAN_COLL_SENDRECV;
        if (group) mscclrt_group_start();
        mscclrt_result e = MSCCLRT_SUCCESS;
        for (int r = r0; r < r1 && e == MSCCLRT_SUCCESS; r++) {
            const void *s;
            void *d;
            bufs(r, in, out, inplace, &s, &d);
            mscclrt_comm *c = R[r].comm;
            switch (O.coll) {
            case PLAN_COLL_ALLREDUCE: e = mscclrt_allreduce(c, s, d, in / esz, O.dt, O.op, R[r].stream); break;
            case PLAN_COLL_ALLGATHER: e = mscclrt_allgather(c, s, d, in / esz, O.dt, R[r].stream); break;
            case PLAN_COLL_REDUCESCATTER: e = mscclrt_reducescatter(c, s, d, out / esz, O.dt, O.op, R[r].stream); break;
            case PLAN_COLL_BROADCAST: e = mscclrt_broadcast(c, s, d, in / esz, O.dt, 0, R[r].stream); break;
            case PLAN_COLL_ALLTOALL: e = mscclrt_alltoall(c, s, d, in / esz / (size_t)O.ndev, O.dt, R[r].stream); break;
            default:
                e = mscclrt_send(c, s, in / esz, O.dt, (r + 1) % O.ndev, R[r].stream);
                if (e == MSCCLRT_SUCCESS)
                    e = mscclrt_recv(c, d, in / esz, O.dt, (r - 1 + O.ndev) % O.ndev, R[r].stream);
                break;
            }
        }
        mscclrt_result g = group ? mscclrt_group_end() : MSCCLRT_SUCCESS;
        if (e != MSCCLRT_SUCCESS || g != MSCCLRT_SUCCESS) {
            fprintf(stderr, "mscclrt-perf: %s\n", mscclrt_last_error());
            return 1;
        }
        return 0;
    }
    int rc = nccl.GroupStart();
    for (int r = r0; r < r1 && !rc; r++) {
        const void *s;
        void *d;
        bufs(r, in, out, inplace, &s, &d);
        switch (O.coll) {
        case PLAN_COLL_ALLREDUCE: rc = nccl.AllReduce(s, d, in / esz, O.dt, O.op, R[r].ncomm, R[r].stream); break;
        case PLAN_COLL_ALLGATHER: rc = nccl.AllGather(s, d, in / esz, O.dt, R[r].ncomm, R[r].stream); break;
        case PLAN_COLL_REDUCESCATTER: rc = nccl.ReduceScatter(s, d, out / esz, O.dt, O.op, R[r].ncomm, R[r].stream); break;
        case PLAN_COLL_BROADCAST: rc = nccl.Broadcast(s, d, in / esz, O.dt, 0, R[r].ncomm, R[r].stream); break;
        case PLAN_COLL_ALLTOALL: {
            size_t blk = in / (size_t)O.ndev;
            for (int q = 0; q < O.ndev && !rc; q++) {
                rc = nccl.Send((const char *)s + (size_t)q * blk, blk / esz, O.dt, q, R[r].ncomm, R[r].stream);
                if (!rc) rc = nccl.Recv((char *)d + (size_t)q * blk, blk / esz, O.dt, q, R[r].ncomm, R[r].stream);
            }
            break;
        }
        default: { /* sendrecv ring: receive from r-1, send to r+1 */
            rc = nccl.Send(s, in / esz, O.dt, (r + 1) % O.ndev, R[r].ncomm, R[r].stream);
            if (!rc) rc = nccl.Recv(d, in / esz, O.dt, (r - 1 + O.ndev) % O.ndev, R[r].ncomm, R[r].stream);
            break;
        }
        }
    }
    int rc2 = nccl.GroupEnd();
    if (rc || rc2) {
        fprintf(stderr, "mscclrt-perf: NCCL: %s\n", nccl.GetErrorString(rc ? rc : rc2));
        return 1;
    }
    return 0;
}

/* The previous call of ranks [r0, r1) again, as bare cuLaunchKernel of the kernel and arguments
 * the library chose (its hot-path state): the reference that shows the library's own host
 * time per call. The collective is complete (every rank launches), so it runs as usual. */
static int raw_launch(int r0, int r1) {
    for (int r = r0; r < r1; r++) {
        AlgoBareLaunch b;
        if (algo_last_launch(R[r].comm, &b) != MSCCLRT_SUCCESS) return 1;
        if (r1 - r0 > 1) cu.cuCtxSetCurrent(R[r].ctx);
        if (cu.cuLaunchKernel((CuFunction)b.fn, (unsigned)b.blocks, 1, 1, (unsigned)b.threads, 1, 1,
                              0, R[r].stream, b.params, NULL) != CU_OK)
            return 1;
    }
    return 0;
}

static void sync_ranks(int r0, int r1) {
    for (int r = r0; r < r1; r++) {
        cu.cuCtxSetCurrent(R[r].ctx);
        cu.cuStreamSynchronize(R[r].stream);
    }
}

typedef struct { int tid; const mscclrt_plan *plan; size_t bytes; int inplace; } Job;

static void *time_thread(void *arg) {
    Job *j = arg;
    int r0 = j->tid * O.g, r1 = r0 + O.g, err = 0;
    double tf = now_s();
    for (int i = 0; i < O.warm && !err; i++) {
        err = issue(r0, r1, j->plan, j->bytes, j->inplace);
        if (i == 0) thread_first[j->tid] = now_s() - tf;
    }
    sync_ranks(r0, r1);
    CuGraphExec gx[64] = {0};
    CuGraph gr[64] = {0};
    if (O.graphs > 0 && !err) {
        for (int r = r0; r < r1 && !err; r++) {
            cu.cuCtxSetCurrent(R[r].ctx);
            if (cu_check(cu.cuStreamBeginCapture(R[r].stream, CU_CAPTURE_MODE_RELAXED),
                         "cuStreamBeginCapture") != MSCCLRT_SUCCESS) {
                fprintf(stderr, "mscclrt-perf: %s\n", mscclrt_last_error());
                err = 1;
            }
        }
        for (int i = 0; i < O.iters && !err; i++) err = issue(r0, r1, j->plan, j->bytes, j->inplace);
        for (int r = r0; r < r1; r++) {
            cu.cuCtxSetCurrent(R[r].ctx);
            CuResult e = cu.cuStreamEndCapture(R[r].stream, &gr[r]);
            if (e == CU_OK && !err) e = cu.cuGraphInstantiate(&gx[r], gr[r], 0);
            if (e != CU_OK) {
                cu_check(e, "graph capture/instantiate");
                fprintf(stderr, "mscclrt-perf: rank %d: %s\n", r, mscclrt_last_error());
                err = 1;
            }
        }
    }
    pthread_barrier_wait(&bar);
    double t0 = now_s();
    if (!err) {
        if (O.graphs > 0) {
            for (int k = 0; k < O.graphs; k++)
                for (int r = r0; r < r1; r++) {
                    cu.cuCtxSetCurrent(R[r].ctx);
                    cu.cuGraphLaunch(gx[r], R[r].stream);
                }
        } else {
            for (int i = 0; i < O.iters && !err; i++) err = issue(r0, r1, j->plan, j->bytes, j->inplace);
            thread_host[j->tid] = (now_s() - t0) / O.iters;
        }
    }
    sync_ranks(r0, r1);
    double t = now_s() - t0;
    thread_raw[j->tid] = 0;
    if (O.graphs == 0 && O.lib != 1 && O.coll != PLAN_COLL_ALLTOALL && O.coll != PLAN_COLL_SENDRECV) {
        /* every thread takes this branch: barrier-safe */
        pthread_barrier_wait(&bar);
        double t1 = now_s();
        int rerr = err;
        for (int i = 0; i < O.iters && !rerr; i++) rerr = raw_launch(r0, r1);
        thread_raw[j->tid] = rerr ? 0 : (now_s() - t1) / O.iters;
        sync_ranks(r0, r1);
    }
    pthread_barrier_wait(&bar);
    for (int r = r0; r < r1; r++) {
        if (gx[r]) cu.cuGraphExecDestroy(gx[r]);
        if (gr[r]) cu.cuGraphDestroy(gr[r]);
    }
    double calls = (double)O.iters * (O.graphs > 0 ? O.graphs : 1);
    thread_time[j->tid] = t / calls;
    thread_err[j->tid] = err;
    return NULL;
}

/* One check call: fresh inputs, poisoned outputs; returns the number of wrong ranks (0/1 each) */
static long check_run(const mscclrt_plan *plan, size_t bytes, int inplace) {
    size_t in, out;
    sizes_of(O.coll, O.ndev, bytes, &in, &out);
    if (plan) {
        uint64_t a, b;
        plan_call_sizes(exec_plan(plan), bytes, &a, &b);
        in = a;
        out = b;
    }
    size_t esz = mscclrt_dtype_size(O.dt);
    void **hin = calloc((size_t)O.ndev, sizeof *hin), **hout = calloc((size_t)O.ndev, sizeof *hout);
    long wrong = 0;
    for (int r = 0; r < O.ndev; r++) {
        hin[r] = malloc(in ? in : 1);
        hout[r] = malloc(out ? out : 1);
        check_fill(O.dt, O.op, hin[r], in / esz, 7 + bytes, r);
        const void *s;
        void *d;
        bufs(r, in, out, inplace, &s, &d);
        cu.cuCtxSetCurrent(R[r].ctx);
        if (!inplace) cu.cuMemsetD8((CuDevPtr)(uintptr_t)d, 0xcd, out);
        else cu.cuMemsetD8(R[r].rbuf, 0xcd, in > out ? in : out);
        cu.cuMemcpyHtoD((CuDevPtr)(uintptr_t)s, hin[r], in);
        cu.cuCtxSynchronize();
    }
    if (issue(0, O.ndev, plan, bytes, inplace)) wrong = -1;
    sync_ranks(0, O.ndev);
    for (int r = 0; r < O.ndev; r++) {
        const void *s;
        void *d;
        bufs(r, in, out, inplace, &s, &d);
        cu.cuCtxSetCurrent(R[r].ctx);
        cu.cuMemcpyDtoH(hout[r], (CuDevPtr)(uintptr_t)d, out);
    }
    CheckMismatch mm;
    if (wrong == 0 && check_collective_known(O.coll) &&
        !check_collective(O.coll, O.ndev, O.dt, O.op, (const void *const *)hin, in,
                          (const void *const *)hout, out, &mm)) {
        wrong = 1;
        fprintf(stderr, "# %zu bytes %s: %s\n", bytes, inplace ? "in-place" : "out-of-place", mm.msg);
    }
    for (int r = 0; r < O.ndev; r++) {
        free(hin[r]);
        free(hout[r]);
    }
    free(hin);
    free(hout);
    return wrong;
}

static void measure(size_t bytes, int inplace, char *cell, size_t n) {
    const mscclrt_plan *plan = NULL;
    if (O.lib == 0 && !(plan = pick(bytes, inplace))) {
        snprintf(cell, n, "%10s %8s %8s %6s", "N/A", "N/A", "N/A", "N/A");
        return;
    }
    pthread_t th[64];
    Job jobs[64];
    for (int t = 0; t < O.t; t++) {
        jobs[t] = (Job){t, plan, bytes, inplace};
        pthread_create(&th[t], NULL, time_thread, &jobs[t]);
    }
    double sum = 0;
    int err = 0;
    for (int t = 0; t < O.t; t++) {
        pthread_join(th[t], NULL);
        sum += thread_time[t];
        err |= thread_err[t];
    }
    if (err) {
        snprintf(cell, n, "%10s %8s %8s %6s", "error", "-", "-", "-");
        return;
    }
    double us = sum / O.t * 1e6;
    if (thread_first[0] > 2e-3)
        fprintf(stderr, "# %zu B %s: first call of %s (setup, kernel generation/load) %.1f ms\n",
                bytes, inplace ? "in-place" : "out-of-place", O.lib == 1 ? "NCCL" : "libmscclrt",
                thread_first[0] * 1e3);
    if (O.graphs == 0 && thread_raw[0] > 0)
        fprintf(stderr, "# %zu B %s: host time to issue one call on %d GPUs: %.2f us (bare "
                "cuLaunchKernel of the same kernels: %.2f us; library: %.2f us)\n", bytes,
                inplace ? "in-place" : "out-of-place", O.g, thread_host[0] * 1e6,
                thread_raw[0] * 1e6, (thread_host[0] - thread_raw[0]) * 1e6);
    else if (O.graphs == 0)
        fprintf(stderr, "# %zu B %s: host time to issue one call on %d GPUs: %.2f us\n", bytes,
                inplace ? "in-place" : "out-of-place", O.g, thread_host[0] * 1e6);
    double algbw = (double)bytes / (us * 1e-6) / 1e9;
    double busbw = algbw * bus_factor(O.coll, O.ndev);
    char w[16] = "N/A";
    if (O.check) {
        long wr = check_run(plan, bytes, inplace);
        snprintf(w, sizeof w, "%ld", wr);
    }
    snprintf(cell, n, "%10.2f %8.2f %8.2f %6s", us, algbw, busbw, w);
}

/* The placeholders are those of mscclrt-perf(1)'s SYNOPSIS; every option here has an entry in
 * its OPTIONS (tests/cases/check_man.sh compares them). */
static const char *usage_text =
    "usage: mscclrt-perf [-b MINBYTES] [-e MAXBYTES] [-f FACTOR | -i STEP] [-g GPUS]\n"
    "         [-t THREADS] [-w WARMUP] [-n ITERS] [-G LAUNCHES] [-d DTYPE] [-o OP]\n"
    "         [-c 0|1] [-C COLLECTIVE] [--plan FILE]... [--lib mscclrt|api|nccl|both]\n"
    "       mscclrt-perf --version | --help\n";

static void usage(FILE *f) {
    fputs(usage_text, f);
}

static void help(void) {
    static const char *const lines[][2] = {
        {"-b MINBYTES", "smallest size (K, M, G suffixes; default 32M)"},
        {"-e MAXBYTES", "largest size (default 32M)"},
        {"-f FACTOR", "multiply the size by FACTOR between rows (default 2)"},
        {"-i STEP", "add STEP bytes between rows instead"},
        {"-g GPUS", "GPUs per thread (default 1)"},
        {"-t THREADS", "threads (default 1); ranks = GPUS x THREADS"},
        {"-w WARMUP", "warm-up calls per size (default 5)"},
        {"-n ITERS", "timed calls per size (default 20)"},
        {"-G LAUNCHES", "time LAUNCHES launches of a CUDA graph of the calls (default 0: eager)"},
        {"-d DTYPE", "data type (default float32)"},
        {"-o OP", "reduction operator (default sum)"},
        {"-c 0|1", "check one extra call per size (default 1)"},
        {"-C COLLECTIVE", "the collective (default: the first plan's)"},
        {"--plan FILE", "an algorithm, in order of preference (repeatable)"},
        {"--lib mscclrt|api|nccl|both", "what to time (default mscclrt: the plans)"},
        {"--version", "print the version"},
        {"--help", "print this help"},
    };
    fputs(usage_text, stdout);
    fputs("\nTimes collectives on GPUs with nccl-tests' flags and columns.\n\n", stdout);
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
        printf("  %-30s %s\n", lines[i][0], lines[i][1]);
}

static int run_table(void) {
    const char *collname = plan_coll_name(O.coll);
    if (O.lib == 1) {
        ncclComm_t nc[64];
        int rc = nccl.CommInitAll(nc, O.ndev, O.devs);
        if (rc) {
            fprintf(stderr, "mscclrt-perf: ncclCommInitAll: %s\n", nccl.GetErrorString(rc));
            return 1;
        }
        for (int r = 0; r < O.ndev; r++) R[r].ncomm = nc[r];
        int v = 0;
        nccl.GetVersion(&v);
        printf("# backend: NCCL %d (%s)\n", v, nccl.path);
    } else if (O.lib == 2) {
        printf("# backend: libmscclrt %s (NCCL-shaped calls: the selector's choice per size)\n",
               mscclrt_version());
    } else {
        printf("# backend: libmscclrt %s (generated kernels)\n", mscclrt_version());
    }
    printf("# collective %s, %d ranks (%d threads x %d GPUs), %s, %s, warmup %d, iters %d, graph launches %d\n",
           collname, O.ndev, O.t, O.g, mscclrt_dtype_name(O.dt), mscclrt_redop_name(O.op), O.warm,
           O.iters, O.graphs);
    printf("#\n#%12s %12s %8s %6s %6s   %10s %8s %8s %6s   %10s %8s %8s %6s\n", "size", "count",
           "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    printf("#%12s %12s %8s %6s %6s   %10s %8s %8s %6s   %10s %8s %8s %6s\n", "(B)", "(elements)", "", "",
           "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    size_t esz = mscclrt_dtype_size(O.dt);
    bool reduces = O.coll == PLAN_COLL_ALLREDUCE || O.coll == PLAN_COLL_REDUCESCATTER;
    for (size_t b = O.minb; b <= O.maxb;) {
        size_t count = b / esz;
        if (O.coll == PLAN_COLL_ALLGATHER || O.coll == PLAN_COLL_REDUCESCATTER || O.coll == PLAN_COLL_ALLTOALL)
            count /= (size_t)O.ndev;
        char oop[80], ip[80];
        measure(b, 0, oop, sizeof oop);
        measure(b, 1, ip, sizeof ip);
        printf(" %12zu %12zu %8s %6s %6d   %s   %s\n", b, count, mscclrt_dtype_name(O.dt),
               reduces ? mscclrt_redop_name(O.op) : "none", O.coll == PLAN_COLL_BROADCAST ? 0 : -1, oop, ip);
        fflush(stdout);
        /* the next size; one past what a size_t holds ends the table (no overflowing cast) */
        double nbf = (double)b * O.factor;
        if (!O.stepb && !(nbf < (double)SIZE_MAX)) break;
        size_t nb = O.stepb ? b + O.stepb : (size_t)nbf;
        if (nb <= b) break;
        b = nb;
    }
    if (O.lib == 1)
        for (int r = 0; r < O.ndev; r++) nccl.CommDestroy(R[r].ncomm);
    return 0;
}

int main(int argc, char **argv) {
    /* ranks sharing a GPU in this process each need their own hardware queues (a rank's stream
     * and its port proxy's): ask CUDA for all 32 before it starts, unless the user chose */
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    /* line-buffered: the table (stdout) and the notes (stderr) stay in order in one log file */
    setvbuf(stdout, NULL, _IOLBF, 0);
    O.minb = 32 << 20;
    O.maxb = 32 << 20;
    O.factor = 2;
    O.g = 1;
    O.t = 1;
    O.warm = 5;
    O.iters = 20;
    O.check = 1;
    O.dt = MSCCLRT_FLOAT32;
    O.op = MSCCLRT_SUM;
    O.coll = PLAN_COLL_ALLREDUCE;
    int both = 0;
    static const struct option lo[] = {{"plan", 1, 0, 'P'}, {"lib", 1, 0, 'L'}, {"help", 0, 0, 'h'},
                                       {"version", 0, 0, 'V'}, {0, 0, 0, 0}};
    /* getopt's own messages name argv[0]: the command's name, not the path it was run by */
    const char *base = argc > 0 && argv[0] ? strrchr(argv[0], '/') : NULL;
    if (base) argv[0] = (char *)base + 1;
    int c;
    unsigned long long u;
    while ((c = getopt_long(argc, argv, "b:e:f:i:g:t:w:n:G:d:o:c:C:h", lo, NULL)) != -1) {
        switch (c) {
        case 'b': case 'e': case 'i':
            if (!num_opt(c, optarg, "a positive byte count", 1, SIZE_MAX, true, &u)) return 2;
            *(c == 'b' ? &O.minb : c == 'e' ? &O.maxb : &O.stepb) = (size_t)u;
            break;
        case 'f': {
            char msg[NUMARG_MSG];
            if (!numarg_factor("-f", optarg, 1, 1024, &O.factor, msg)) {
                fprintf(stderr, "mscclrt-perf: %s\n", msg);
                return 2;
            }
            break;
        }
        case 'g': case 't':
            if (!num_opt(c, optarg, c == 'g' ? "a GPU count per thread" : "a thread count", 1, 64,
                         false, &u))
                return 2;
            *(c == 'g' ? &O.g : &O.t) = (int)u;
            break;
        case 'w': case 'n': case 'G':
            if (!num_opt(c, optarg, c == 'w' ? "a warm-up call count" : c == 'n' ? "a call count"
                         : "a graph launch count", c == 'n' ? 1 : 0, 1000000, false, &u))
                return 2;
            *(c == 'w' ? &O.warm : c == 'n' ? &O.iters : &O.graphs) = (int)u;
            break;
        case 'c':
            if (!num_opt(c, optarg, "a check flag", 0, 1, false, &u)) return 2;
            O.check = (int)u;
            break;
        case 'd':
            /* mscclrt_dtype_parse also takes nccl-tests' spellings (half, float, double, int) */
            if (mscclrt_dtype_parse(optarg, &O.dt) != MSCCLRT_SUCCESS) {
                fprintf(stderr, "mscclrt-perf: -d: %s\n", mscclrt_last_error());
                return 2;
            }
            break;
        case 'o':
            if (mscclrt_redop_parse(optarg, &O.op) != MSCCLRT_SUCCESS) {
                fprintf(stderr, "mscclrt-perf: unknown op '%s'\n", optarg);
                return 2;
            }
            break;
        case 'C':
            if (!plan_coll_from_name(optarg, &O.coll)) {
                fprintf(stderr, "mscclrt-perf: unknown collective '%s'\n", optarg);
                return 2;
            }
            O.coll_set = true;
            break;
        case 'P':
            if (O.nplans == 32) { fprintf(stderr, "mscclrt-perf: at most 32 plans\n"); return 2; }
            if (mscclrt_plan_load(&O.plans[O.nplans], optarg) != MSCCLRT_SUCCESS) {
                fprintf(stderr, "mscclrt-perf: %s\n", mscclrt_last_error());
                return 2;
            }
            O.plan_paths[O.nplans++] = optarg;
            break;
        case 'L':
            /* the last --lib wins (scripts append one to a default) */
            if (!strcmp(optarg, "nccl")) O.lib = 1, both = 0;
            else if (!strcmp(optarg, "both")) both = 1;
            else if (!strcmp(optarg, "mscclrt")) O.lib = 0, both = 0;
            else if (!strcmp(optarg, "api")) O.lib = 2, both = 0;
            else { fprintf(stderr, "mscclrt-perf: --lib mscclrt|api|nccl|both\n"); return 2; }
            break;
        case 'h': help(); return 0;
        case 'V': printf("mscclrt-perf %s\n", mscclrt_version()); return 0;
        default: usage(stderr); return 2;
        }
    }
    /* each is at most 64 (num_opt), so the product cannot overflow */
    if (O.g * O.t > 64) {
        fprintf(stderr, "mscclrt-perf: -g %d -t %d: %d ranks, more than 64\n", O.g, O.t, O.g * O.t);
        return 2;
    }
    if (O.maxb < O.minb) {
        fprintf(stderr, "mscclrt-perf: -e %zu is smaller than -b %zu\n", O.maxb, O.minb);
        return 2;
    }
    O.ndev = O.g * O.t;
    if (!O.coll_set && O.nplans > 0) O.coll = exec_plan(O.plans[0])->collective;
    if (O.lib == 0 && !both && O.nplans == 0) {
        fprintf(stderr, "mscclrt-perf: give at least one --plan (or --lib nccl)\n");
        return 2;
    }
    if (cu_load() != MSCCLRT_SUCCESS) {
        fprintf(stderr, "mscclrt-perf: %s\n", mscclrt_last_error());
        return 1;
    }
    int count = 0;
    cu.cuDeviceGetCount(&count);
    for (int r = 0; r < O.ndev; r++) O.devs[r] = count ? r % count : 0;
    if (O.ndev > count)
        printf("# note: %d ranks on %d GPUs (ranks share devices)\n", O.ndev, count);
    /* buffers sized for the largest call */
    sizes_of(O.coll, O.ndev, O.maxb, &max_in, &max_out);
    mscclrt_comm *comms[64];
    if (mscclrt_comm_init_all(comms, O.ndev, O.devs) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "mscclrt-perf: %s\n", mscclrt_last_error());
        return 1;
    }
    for (int r = 0; r < O.ndev; r++) {
        R[r].comm = comms[r];
        if (O.lib == 2) algo_record_launches(comms[r], true);   /* raw_launch's reference */
        R[r].ctx = comms[r]->ctx;
        cu.cuCtxSetCurrent(R[r].ctx);
        size_t big = max_in > max_out ? max_in : max_out;
        if (cu.cuStreamCreate(&R[r].stream, CU_STREAM_FLAG_NON_BLOCKING) != CU_OK ||
            cu.cuMemAlloc(&R[r].sbuf, max_in) != CU_OK || cu.cuMemAlloc(&R[r].rbuf, big) != CU_OK) {
            fprintf(stderr, "mscclrt-perf: rank %d: cannot allocate %zu + %zu bytes\n", r, max_in, big);
            return 1;
        }
        cu.cuMemsetD8(R[r].sbuf, 0x3c, max_in);
        cu.cuMemsetD8(R[r].rbuf, 0x3c, big);
    }
    pthread_barrier_init(&bar, NULL, (unsigned)O.t);
    int rc = 0;
    if ((O.lib == 0 && O.nplans > 0) || O.lib == 2) rc |= run_table();
    if (both || O.lib == 1) {
        if (nccl_open() != 0) return 1;
        O.lib = 1;
        rc |= run_table();
    }
    for (int r = 0; r < O.ndev; r++) {
        cu.cuCtxSetCurrent(R[r].ctx);
        cu.cuStreamSynchronize(R[r].stream);
        cu.cuMemFree(R[r].sbuf);
        cu.cuMemFree(R[r].rbuf);
        cu.cuStreamDestroy(R[r].stream);
        mscclrt_comm_destroy(comms[r]);
    }
    for (int i = 0; i < O.nplans; i++) mscclrt_plan_free(O.plans[i]);
    return rc;
}

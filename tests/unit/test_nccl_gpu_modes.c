/*
 * test_nccl_gpu_modes.c - the NCCL drop-in on GPUs through the NCCL API only, in the three ways
 * an application holds its GPUs: one process per rank (ncclGetUniqueId in the parent,
 * ncclCommInitRank in forked children), one thread per rank, and one thread driving every rank
 * (ncclCommInitAll and group calls). Each runs allreduce (1000 and 1M+3 floats, in place and
 * out of place), allgather and a send/recv ring, checked on the host (integer-valued floats: the
 * sums are exact), and asks ncclCommCount/UserRank/CuDevice/GetAsyncError. Then faults: a rank
 * killed mid-run (the survivors' ncclCommGetAsyncError must say so within 20 s, ncclCommAbort
 * must return within 15 s) and ncclCommAbort while a kernel waits for a peer that never comes
 * (it must return within 15 s and the kernel must stop).
 *
 * Ranks sit on GPU r mod count: on a one-GPU machine they all share GPU 0. Each rank has its own
 * non-blocking stream (the legacy default stream would serialise ranks that share a GPU, and
 * they would deadlock). Every sub-test runs in its own process group with its own deadline, and
 * every wait on the GPU polls cuStreamQuery with a deadline: a hang is a failure that is killed,
 * never waited out. The main process never initialises CUDA (children it forks could not use
 * it); a forked probe counts the GPUs, and the run exits 77 when there are none.
 *   test_nccl_gpu_modes [word...]   only the sub-tests whose names contain one of the words
 */
#include "../harness.h"

#include "cuda/cuda_driver.h"
#include "nccl/nccl_abi.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NR 3                            /* ranks of the mode tests and of the kill test */
#define MAXR 4
#define SMALL ((size_t)1000)
#define BIG (((size_t)1 << 20) + 3)     /* odd: no kernel may assume a round count */
#define GUARD ((size_t)64)              /* floats after each output that must stay untouched */
#define SENTINEL 0xA5A5A5A5u            /* every output word before a call */

/* Deadlines in seconds. Each sub-test has its own (in main), so a hang costs only its own. */
#define WAIT_S 45.0        /* one stream wait; covers peers' skew (their first kernels compile) */
#define ASYNC_ERR_S 20.0   /* a dead peer must show in ncclCommGetAsyncError within this */
#define ABORT_S 15.0       /* ncclCommAbort must return within this */
#define IDLE_S 10.0        /* and the aborted rank's stream must be idle within this after it */
#define RANKS_S 110.0      /* rank processes / threads of a mode test */
#define FAULT_RANKS_S 75.0 /* rank processes / threads of a fault test */

static int ngpu;           /* GPUs on this machine (the probe's answer) */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const char *cu_name(CuResult e) {
    const char *s = NULL;
    if (cu.cuGetErrorName(e, &s) != CU_OK || !s) s = "an unknown CUDA error";
    return s;
}

/* ---- one rank -------------------------------------------------------------------------------- */
typedef struct {
    int rank, nranks, device;
    const char *mode;              /* names the sub-test in messages */
    ncclComm_t comm;               /* NULL before init and after destroy/abort */
    CuContext ctx;                 /* the device's primary context, retained by rank_open */
    CuStream stream;               /* non-blocking; owned */
    CuDevPtr send, recv;           /* BIG + GUARD and nranks * BIG + GUARD floats; owned */
    float *hin, *hout;             /* pinned staging of the same sizes (cuMemHostAlloc); owned */
    const void *sp;                /* this step's sendbuff and recvbuff (device addresses) */
    void *rp;
    int fails;                     /* failures seen by this rank (threads count their own) */
    bool broken;                   /* a call failed or hung: abort the comm, do not destroy it */
} Rank;

static void rank_fail(Rank *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rank_fail(Rank *r, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "  %s: rank %d: FAILED: %s\n", r->mode, r->rank, msg);
    r->fails++;
}

static const char *nccl_name(ncclResult_t e) {
    static const char *const names[] = {
        "ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
        "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress",
    };
    return (unsigned)e < sizeof names / sizeof names[0] ? names[e] : "an unknown ncclResult_t";
}

static void nccl_failed(Rank *r, const char *what, const char *call, ncclResult_t e) {
    rank_fail(r, "%s: %s returned %s (%s): %s", what, call, nccl_name(e), ncclGetErrorString(e),
              ncclGetLastError(r->comm));
}

/* Context, stream and buffers of r->device, made current in the calling thread (which is what
 * ncclCommInitRank takes as the rank's device). */
static bool rank_open(Rank *r) {
    const size_t in = (BIG + GUARD) * sizeof(float);
    const size_t out = ((size_t)r->nranks * BIG + GUARD) * sizeof(float);
    CuDevice d;
    CuContext ctx = NULL;
    CuResult e = cu.cuDeviceGet(&d, r->device);
    if (e == CU_OK) e = cu.cuDevicePrimaryCtxRetain(&ctx, d);
    if (e == CU_OK) r->ctx = ctx;
    if (e == CU_OK) e = cu.cuCtxSetCurrent(r->ctx);
    if (e == CU_OK) e = cu.cuStreamCreate(&r->stream, CU_STREAM_FLAG_NON_BLOCKING);
    if (e == CU_OK) e = cu.cuMemAlloc(&r->send, in);
    if (e == CU_OK) e = cu.cuMemAlloc(&r->recv, out);
    /* portable: pinned for every context, so no copy falls back to a blocking pageable one */
    if (e == CU_OK) e = cu.cuMemHostAlloc((void **)&r->hin, in, CU_HOSTALLOC_PORTABLE);
    if (e == CU_OK) e = cu.cuMemHostAlloc((void **)&r->hout, out, CU_HOSTALLOC_PORTABLE);
    if (e != CU_OK) {
        rank_fail(r, "setting up GPU %d (context, stream, %zu + %zu bytes): %s", r->device, in, out,
                  cu_name(e));
        r->broken = true;
        return false;
    }
    return true;
}

/* Releases what rank_open made. Memory is freed only when free_mem says the GPU is idle: a
 * kernel still running (a failed abort) would make cuMemFree wait for it. */
static void rank_close(Rank *r, bool free_mem) {
    if (!r->ctx) return;
    cu.cuCtxSetCurrent(r->ctx);   /* ncclCommDestroy leaves no current context behind */
    if (free_mem) {
        if (r->hout) cu.cuMemFreeHost(r->hout);
        if (r->hin) cu.cuMemFreeHost(r->hin);
        if (r->recv) cu.cuMemFree(r->recv);
        if (r->send) cu.cuMemFree(r->send);
    }
    if (r->stream) cu.cuStreamDestroy(r->stream);
    CuDevice d;
    if (free_mem && cu.cuDeviceGet(&d, r->device) == CU_OK) cu.cuDevicePrimaryCtxRelease(d);
    cu.cuCtxSetCurrent(NULL);
    r->ctx = NULL;
}

/* Polls r's stream until it is idle; false, with the reason, after limit_s or on an error. */
static bool stream_wait(Rank *r, const char *what, double limit_s) {
    cu.cuCtxSetCurrent(r->ctx);
    const double t0 = now_s();
    CuResult e;
    while ((e = cu.cuStreamQuery(r->stream)) == CU_ERR_NOT_READY && now_s() - t0 < limit_s)
        usleep(200);
    if (e == CU_OK) return true;
    if (e == CU_ERR_NOT_READY)
        rank_fail(r, "%s: the stream is still busy after %.0f s: a hang", what, limit_s);
    else
        rank_fail(r, "%s: the stream failed: %s", what, cu_name(e));
    r->broken = true;
    return false;
}

/* The communicator's answers about itself, and a healthy async state. */
static void rank_queries(Rank *r) {
    int n = -1, me = -1, dev = -1;
    ncclResult_t e, async = ncclInternalError;
    if ((e = ncclCommCount(r->comm, &n)) != ncclSuccess)
        nccl_failed(r, "query", "ncclCommCount", e);
    else if (n != r->nranks) rank_fail(r, "ncclCommCount says %d, want %d", n, r->nranks);
    if ((e = ncclCommUserRank(r->comm, &me)) != ncclSuccess)
        nccl_failed(r, "query", "ncclCommUserRank", e);
    else if (me != r->rank) rank_fail(r, "ncclCommUserRank says %d, want %d", me, r->rank);
    if ((e = ncclCommCuDevice(r->comm, &dev)) != ncclSuccess)
        nccl_failed(r, "query", "ncclCommCuDevice", e);
    else if (dev != r->device) rank_fail(r, "ncclCommCuDevice says %d, want %d", dev, r->device);
    if ((e = ncclCommGetAsyncError(r->comm, &async)) != ncclSuccess)
        nccl_failed(r, "query", "ncclCommGetAsyncError", e);
    else if (async != ncclSuccess)
        rank_fail(r, "ncclCommGetAsyncError reports %s (%s) on a healthy communicator: %s",
                  nccl_name(async), ncclGetErrorString(async), ncclGetLastError(r->comm));
}

/* ncclCommAbort from a helper thread, so that a hang in it is reported instead of waited out.
 * true when it returned within limit_s (*res, *secs: its result and time); the comm is gone
 * either way. The job is on the heap: a hung thread keeps using it. */
typedef struct {
    ncclComm_t comm;
    ncclResult_t res;
    atomic_bool done;
} AbortJob;

static void *abort_thread(void *arg) {
    AbortJob *j = arg;
    j->res = ncclCommAbort(j->comm);
    atomic_store(&j->done, true);
    return NULL;
}

static bool timed_abort(Rank *r, double limit_s, ncclResult_t *res, double *secs) {
    AbortJob *j = calloc(1, sizeof *j);
    pthread_t th;
    const double t0 = now_s();
    *res = ncclSuccess;
    if (!j) {
        *res = ncclCommAbort(r->comm);
    } else {
        j->comm = r->comm;
        atomic_init(&j->done, false);
        if (pthread_create(&th, NULL, abort_thread, j) != 0) {
            abort_thread(j);
        } else {
            while (!atomic_load(&j->done) && now_s() - t0 < limit_s) usleep(1000);
            if (!atomic_load(&j->done)) {
                pthread_detach(th);
                *secs = now_s() - t0;
                r->comm = NULL;
                r->broken = true;
                rank_fail(r, "ncclCommAbort did not return within %.0f s: a hang", limit_s);
                return false;
            }
            pthread_join(th, NULL);
        }
        *res = j->res;
        free(j);
    }
    *secs = now_s() - t0;
    r->comm = NULL;
    return true;
}

/* The end of a rank's communicator: destroy when all went well, abort (bounded) otherwise. */
static void rank_finish(Rank *r) {
    if (!r->comm) return;
    if (r->broken) {
        ncclResult_t res;
        double secs;
        if (timed_abort(r, ABORT_S, &res, &secs))
            printf("  %s: rank %d: after the failure, ncclCommAbort returned %s in %.2f s\n",
                   r->mode, r->rank, nccl_name(res), secs);
        return;
    }
    const double t0 = now_s();
    const ncclResult_t e = ncclCommDestroy(r->comm);
    if (e != ncclSuccess) nccl_failed(r, "the end", "ncclCommDestroy", e);
    else printf("  %s: rank %d: ncclCommDestroy done in %.2f s\n", r->mode, r->rank, now_s() - t0);
    r->comm = NULL;
}

/* ---- the steps: what every mode runs, and how it is checked ---------------------------------- */
typedef enum { ALLREDUCE, ALLGATHER, SENDRECV } Kind;
typedef struct {
    Kind kind;
    size_t count;                  /* elements per rank (allgather: each rank's part) */
    bool inplace;
} Step;

static const Step steps[] = {
    {ALLREDUCE, SMALL, false}, {ALLREDUCE, SMALL, true},  {ALLREDUCE, BIG, false},
    {ALLREDUCE, BIG, true},    {ALLGATHER, SMALL, false}, {ALLGATHER, SMALL, true},
    {ALLGATHER, BIG, false},   {SENDRECV, SMALL, false},  {SENDRECV, BIG, false},
};
#define NSTEPS ((int)(sizeof steps / sizeof steps[0]))

/* Rank q's element i in the step with this seed: an integer below 2^18, so sums of a few ranks
 * are exact in float; the seed makes a stale result of an earlier step wrong, the rank term
 * tells which rank a value came from. */
static float val(int q, size_t i, unsigned seed) {
    return (float)((i + 7919u * (size_t)seed) % 65521u + 65536u * (unsigned)q + 1u);
}

static void step_name(const Step *s, char *buf, size_t len) {
    static const char *const names[] = {"allreduce", "allgather", "send/recv ring"};
    snprintf(buf, len, "%s %zu floats%s", names[s->kind], s->count,
             s->kind == SENDRECV ? " (in a group)" : s->inplace ? " in place" : " out of place");
}

static size_t out_count(const Rank *r, const Step *s) {
    return s->kind == ALLGATHER ? (size_t)r->nranks * s->count : s->count;
}

/* Fills the rank's input and poisons its whole output with SENTINEL, on its stream; sets sp, rp. */
static bool step_prepare(Rank *r, const Step *s, unsigned seed) {
    const size_t in = s->count * sizeof(float);
    for (size_t i = 0; i < s->count; i++) r->hin[i] = val(r->rank, i, seed);
    CuDevPtr src = r->send;
    if (s->inplace) src = r->recv + (s->kind == ALLGATHER ? (CuDevPtr)r->rank * in : 0);
    cu.cuCtxSetCurrent(r->ctx);
    CuResult e = cu.cuMemsetD32Async(r->recv, SENTINEL, out_count(r, s) + GUARD, r->stream);
    if (e == CU_OK) e = cu.cuMemcpyHtoDAsync(src, r->hin, in, r->stream);
    r->sp = (const void *)(uintptr_t)src;
    r->rp = (void *)(uintptr_t)r->recv;
    if (e != CU_OK) {
        rank_fail(r, "filling the buffers: %s", cu_name(e));
        r->broken = true;
    }
    return e == CU_OK;
}

/* The step's NCCL call(s) on this rank; *call names the one that failed. */
static ncclResult_t step_issue(Rank *r, const Step *s, const char **call) {
    const int next = (r->rank + 1) % r->nranks, prev = (r->rank + r->nranks - 1) % r->nranks;
    ncclResult_t e;
    switch (s->kind) {
    case ALLREDUCE:
        *call = "ncclAllReduce";
        return ncclAllReduce(r->sp, r->rp, s->count, ncclFloat, ncclSum, r->comm, r->stream);
    case ALLGATHER:
        *call = "ncclAllGather";
        return ncclAllGather(r->sp, r->rp, s->count, ncclFloat, r->comm, r->stream);
    case SENDRECV:
        *call = "ncclSend";
        if ((e = ncclSend(r->sp, s->count, ncclFloat, next, r->comm, r->stream)) != ncclSuccess)
            return e;
        *call = "ncclRecv";
        return ncclRecv(r->rp, s->count, ncclFloat, prev, r->comm, r->stream);
    }
    *call = "(no call)";
    return ncclInternalError;
}

/* Queues the copy of the output and its guard to the host, behind the step's call. */
static bool step_fetch(Rank *r, const Step *s) {
    cu.cuCtxSetCurrent(r->ctx);
    const CuResult e = cu.cuMemcpyDtoHAsync(r->hout, r->recv,
                                            (out_count(r, s) + GUARD) * sizeof(float), r->stream);
    if (e != CU_OK) {
        rank_fail(r, "copying the result to the host: %s", cu_name(e));
        r->broken = true;
    }
    return e == CU_OK;
}

/* Compares the fetched output with the host's expectation; the guard must still be SENTINEL. */
static void step_check(Rank *r, const Step *s, unsigned seed, const char *what) {
    const size_t n = out_count(r, s);
    const int prev = (r->rank + r->nranks - 1) % r->nranks;
    size_t bad = 0, first = 0;
    float got0 = 0, want0 = 0;
    for (size_t i = 0; i < n; i++) {
        float want = 0;
        switch (s->kind) {
        case ALLREDUCE:
            for (int q = 0; q < r->nranks; q++) want += val(q, i, seed);
            break;
        case ALLGATHER: want = val((int)(i / s->count), i % s->count, seed); break;
        case SENDRECV: want = val(prev, i, seed); break;
        }
        if (r->hout[i] != want && bad++ == 0) {
            first = i;
            got0 = r->hout[i];
            want0 = want;
        }
    }
    if (bad) {
        char part[48] = "";
        if (s->kind == ALLGATHER)
            snprintf(part, sizeof part, " (in rank %zu's part)", first / s->count);
        rank_fail(r, "%s: %zu of %zu output elements are wrong; the first, element %zu%s, is "
                  "%.9g, want %.9g", what, bad, n, first, part, (double)got0, (double)want0);
    }
    for (size_t g = 0; g < GUARD; g++) {
        uint32_t bits;
        memcpy(&bits, &r->hout[n + g], sizeof bits);
        if (bits != SENTINEL) {
            rank_fail(r, "%s: wrote past the end of recvbuff: float %zu after the %zu of the "
                      "output is %#x, was %#x", what, g, n, bits, SENTINEL);
            break;
        }
    }
}

/* One step on one rank alone (process and thread modes); false once the rank is broken. */
static bool rank_step(Rank *r, const Step *s, unsigned seed) {
    char what[96];
    step_name(s, what, sizeof what);
    const double t0 = now_s();
    if (!step_prepare(r, s, seed)) return false;
    const char *call = "ncclGroupStart";
    ncclResult_t e = ncclSuccess;
    if (s->kind == SENDRECV) e = ncclGroupStart();
    if (e == ncclSuccess) {
        e = step_issue(r, s, &call);
        if (s->kind == SENDRECV) {
            const ncclResult_t end = ncclGroupEnd();
            if (e == ncclSuccess && end != ncclSuccess) {
                e = end;
                call = "ncclGroupEnd";
            }
        }
    }
    if (e != ncclSuccess) {
        nccl_failed(r, what, call, e);
        r->broken = true;
        return false;
    }
    if (!step_fetch(r, s) || !stream_wait(r, what, WAIT_S)) return false;
    const int f0 = r->fails;
    step_check(r, s, seed, what);
    printf("  %s: rank %d: %s %s in %.2f s\n", r->mode, r->rank, what,
           r->fails == f0 ? "checked" : "WRONG", now_s() - t0);
    return true;
}

/* A rank of the process and thread modes: its device current, ncclCommInitRank, the queries,
 * every step, the end. */
static void rank_body(Rank *r, ncclUniqueId id) {
    if (!rank_open(r)) return;
    const double t0 = now_s();
    const ncclResult_t e = ncclCommInitRank(&r->comm, r->nranks, id, r->rank);
    if (e != ncclSuccess) {
        nccl_failed(r, "init", "ncclCommInitRank", e);
        r->comm = NULL;
        rank_close(r, true);
        return;
    }
    printf("  %s: rank %d: ncclCommInitRank done in %.2f s (GPU %d)\n", r->mode, r->rank,
           now_s() - t0, r->device);
    rank_queries(r);
    for (int k = 0; k < NSTEPS && rank_step(r, &steps[k], (unsigned)k + 1); k++) { }
    if (!r->broken) rank_queries(r);   /* still healthy after the work */
    rank_finish(r);
    rank_close(r, !r->broken);
}

/* ---- processes and threads ------------------------------------------------------------------- */
/* Waits for every pid with one deadline, polling every 10 ms, so that a dead child is reaped at
 * once: the library tells a dead peer by kill(pid, 0), which still succeeds on an unreaped
 * zombie. st[k] gets the wait status, hung[k] whether pids[k] was still running at the deadline;
 * those are killed (with their process group when group is set) and reaped. */
static void wait_pids(const pid_t *pids, int n, double limit_s, int *st, bool *hung, bool group) {
    bool done[MAXR] = {false};
    int left = n;
    const double t0 = now_s();
    while (left > 0 && now_s() - t0 < limit_s) {
        for (int k = 0; k < n; k++) {
            if (done[k]) continue;
            const pid_t w = waitpid(pids[k], &st[k], WNOHANG);
            if (w == pids[k] || (w < 0 && errno != EINTR)) {
                if (w < 0) st[k] = 255 << 8;   /* as exit status 255: not our child any more */
                done[k] = true;
                left--;
            }
        }
        if (left) usleep(10000);
    }
    for (int k = 0; k < n; k++) {
        hung[k] = !done[k];
        if (done[k]) continue;
        kill(group ? -pids[k] : pids[k], SIGKILL);
        waitpid(pids[k], &st[k], 0);
    }
}

static void status_text(int st, bool hung, double limit_s, char *buf, size_t len) {
    if (hung) snprintf(buf, len, "no result within %.0f s: a hang; killed", limit_s);
    else if (WIFEXITED(st)) snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else snprintf(buf, len, "wait status %#x", st);
}

/* Forks NR rank processes running fn(rank, id) (its result is the exit status) and waits for
 * them with a deadline; st and hung as wait_pids. false when a fork failed. */
static bool fork_ranks(int (*fn)(int, ncclUniqueId), ncclUniqueId id, double limit_s, int *st,
                       bool *hung) {
    pid_t pids[NR];
    for (int k = 0; k < NR; k++) {
        fflush(stdout);
        fflush(stderr);
        pids[k] = fork();
        if (pids[k] == 0) _exit(fn(k, id));
        if (pids[k] < 0) {
            fprintf(stderr, "  fork: %s\n", strerror(errno));
            for (int q = 0; q < k; q++) kill(pids[q], SIGKILL);
            for (int q = 0; q < k; q++) waitpid(pids[q], NULL, 0);
            return false;
        }
    }
    wait_pids(pids, NR, limit_s, st, hung, false);
    for (int k = 0; k < NR; k++) {
        char text[128];
        status_text(st[k], hung[k], limit_s, text, sizeof text);
        printf("  rank %d (process %d): %s\n", k, (int)pids[k], text);
    }
    return true;
}

typedef struct {
    Rank r;
    ncclUniqueId id;
    void (*fn)(Rank *, ncclUniqueId);
    atomic_bool done;
} RankThread;

static void *rank_thread(void *arg) {
    RankThread *t = arg;
    t->fn(&t->r, t->id);
    atomic_store(&t->done, true);
    return NULL;
}

/* Runs fn on n ranks (t[k].r filled in), one thread each, and waits for them with a
 * deadline; returns the failures, counting a thread that did not finish (left running: the
 * sub-test process ends soon). */
static int run_threads(RankThread *t, int n, void (*fn)(Rank *, ncclUniqueId), ncclUniqueId id,
                       double limit_s) {
    pthread_t th[MAXR];
    bool started[MAXR] = {false};
    int fails = 0;
    for (int k = 0; k < n; k++) {
        t[k].id = id;
        t[k].fn = fn;
        atomic_init(&t[k].done, false);
        started[k] = pthread_create(&th[k], NULL, rank_thread, &t[k]) == 0;
        if (!started[k]) {
            fprintf(stderr, "  rank %d: pthread_create failed\n", k);
            fails++;
        }
    }
    const double t0 = now_s();
    for (int k = 0; k < n; k++) {
        while (started[k] && !atomic_load(&t[k].done) && now_s() - t0 < limit_s) usleep(10000);
        if (!started[k]) continue;
        if (!atomic_load(&t[k].done)) {
            fprintf(stderr, "  %s: rank %d: its thread did not finish within %.0f s: a hang (its "
                    "last line above says where it was)\n", t[k].r.mode, k, limit_s);
            fails++;
            continue;
        }
        pthread_join(th[k], NULL);
        fails += t[k].r.fails;
    }
    return fails;
}

static bool get_id(ncclUniqueId *id) {
    const ncclResult_t e = ncclGetUniqueId(id);
    if (e != ncclSuccess)
        fprintf(stderr, "  ncclGetUniqueId returned %s: %s\n", nccl_name(e),
                ncclGetLastError(NULL));
    return e == ncclSuccess;
}

static bool cuda_up(void) {
    if (cu_load() == MSCCLRT_SUCCESS) return true;
    fprintf(stderr, "  cannot load the CUDA driver: %s\n", mscclrt_last_error());
    return false;
}

/* ---- 1a: one process per GPU ----------------------------------------------------------------- */
static int process_rank(int k, ncclUniqueId id) {
    Rank r = {.rank = k, .nranks = NR, .device = k % ngpu, .mode = "process per GPU"};
    if (!cuda_up()) return 1;
    rank_body(&r, id);
    fflush(stdout);
    return r.fails ? 1 : 0;
}

/* The parent made the id (its rendezvous thread runs here) and has not touched CUDA. */
static int sub_process_per_gpu(void) {
    ncclUniqueId id;
    int st[NR];
    bool hung[NR];
    if (!get_id(&id) || !fork_ranks(process_rank, id, RANKS_S, st, hung)) return 1;
    int fails = 0;
    for (int k = 0; k < NR; k++) fails += hung[k] || !WIFEXITED(st[k]) || WEXITSTATUS(st[k]) != 0;
    return fails;
}

/* ---- 1b: one thread per GPU ------------------------------------------------------------------ */
static int sub_thread_per_gpu(void) {
    ncclUniqueId id;
    if (!cuda_up() || !get_id(&id)) return 1;
    RankThread t[NR];
    memset(t, 0, sizeof t);
    for (int k = 0; k < NR; k++)
        t[k].r = (Rank){.rank = k, .nranks = NR, .device = k % ngpu, .mode = "thread per GPU"};
    return run_threads(t, NR, rank_body, id, RANKS_S);
}

/* ---- 1c: one thread, ncclCommInitAll, group calls -------------------------------------------- */
/* Every step with all ranks' calls in one group; all ranks are broken when anything fails. */
static void group_steps(Rank *rk, int n) {
    for (int k = 0; k < NSTEPS; k++) {
        const Step *s = &steps[k];
        const unsigned seed = (unsigned)k + 1;
        char what[96];
        step_name(s, what, sizeof what);
        const double t0 = now_s();
        bool ok = true;
        for (int q = 0; q < n && ok; q++) ok = step_prepare(&rk[q], s, seed);
        if (ok) {
            ncclResult_t e = ncclGroupStart();
            if (e != ncclSuccess) nccl_failed(&rk[0], what, "ncclGroupStart", e);
            for (int q = 0; q < n && e == ncclSuccess; q++) {
                const char *call = "";
                if ((e = step_issue(&rk[q], s, &call)) != ncclSuccess)
                    nccl_failed(&rk[q], what, call, e);
            }
            const ncclResult_t end = ncclGroupEnd();
            if (end != ncclSuccess) nccl_failed(&rk[0], what, "ncclGroupEnd", end);
            ok = e == ncclSuccess && end == ncclSuccess;
        }
        for (int q = 0; q < n && ok; q++) ok = step_fetch(&rk[q], s);
        for (int q = 0; q < n && ok; q++) {   /* one deadline for all: at least 1 s each */
            const double left = WAIT_S - (now_s() - t0);
            ok = stream_wait(&rk[q], what, left > 1 ? left : 1);
        }
        if (!ok) {
            for (int q = 0; q < n; q++) rk[q].broken = true;
            return;
        }
        int f0 = 0;
        for (int q = 0; q < n; q++) f0 += rk[q].fails;
        int f1 = 0;
        for (int q = 0; q < n; q++) {
            step_check(&rk[q], s, seed, what);
            f1 += rk[q].fails;
        }
        printf("  one thread: %s on %d ranks %s in %.2f s\n", what, n,
               f1 == f0 ? "checked" : "WRONG", now_s() - t0);
    }
}

static int sub_one_thread(void) {
    if (!cuda_up()) return 1;
    Rank rk[NR];
    ncclComm_t comms[NR] = {NULL};
    int devs[NR], fails = 0;
    bool broken = false;
    memset(rk, 0, sizeof rk);
    for (int k = 0; k < NR; k++) {
        devs[k] = k % ngpu;
        rk[k] = (Rank){.rank = k, .nranks = NR, .device = devs[k], .mode = "one thread"};
        if (!rank_open(&rk[k])) return 1;
    }
    const double t0 = now_s();
    const ncclResult_t e = ncclCommInitAll(comms, NR, devs);
    if (e != ncclSuccess) {
        nccl_failed(&rk[0], "init", "ncclCommInitAll", e);
        return 1;
    }
    printf("  one thread: ncclCommInitAll of %d ranks done in %.2f s\n", NR, now_s() - t0);
    for (int k = 0; k < NR; k++) {
        rk[k].comm = comms[k];
        rank_queries(&rk[k]);
    }
    group_steps(rk, NR);
    for (int k = 0; k < NR; k++) broken |= rk[k].broken;
    for (int k = 0; k < NR; k++) {
        if (!broken) rank_queries(&rk[k]);
        rk[k].broken = broken;   /* one broken rank: the group's state is unknown, abort all */
        rank_finish(&rk[k]);
    }
    for (int k = 0; k < NR; k++) {
        rank_close(&rk[k], !broken);
        fails += rk[k].fails;
    }
    return fails;
}

/* ---- the fault tests' helpers ---------------------------------------------------------------- */
/* Polls r's stream until idle, at most limit_s; the time it took in *secs. */
static bool stream_idle(Rank *r, double limit_s, double *secs) {
    cu.cuCtxSetCurrent(r->ctx);
    const double t0 = now_s();
    CuResult e;
    while ((e = cu.cuStreamQuery(r->stream)) == CU_ERR_NOT_READY && now_s() - t0 < limit_s)
        usleep(1000);
    *secs = now_s() - t0;
    if (e == CU_ERR_NOT_READY)
        rank_fail(r, "the stream is still busy %.0f s after ncclCommAbort returned: the kernel "
                  "did not stop", limit_s);
    else if (e != CU_OK)
        rank_fail(r, "after ncclCommAbort the stream reports %s", cu_name(e));
    return e == CU_OK;
}

/* Aborts r (bounded), checks it returned ncclSuccess within ABORT_S, says how long it took. */
static bool abort_checked(Rank *r, const char *context) {
    ncclResult_t res;
    double secs;
    if (!timed_abort(r, ABORT_S, &res, &secs)) return false;
    printf("  %s: rank %d: ncclCommAbort %s returned %s in %.2f s\n", r->mode, r->rank, context,
           nccl_name(res), secs);
    if (res != ncclSuccess)
        rank_fail(r, "ncclCommAbort returned %s (%s): %s", nccl_name(res), ncclGetErrorString(res),
                  ncclGetLastError(NULL));
    return true;
}

/* ---- 2a: a rank killed mid-run --------------------------------------------------------------- */
/* Rank k of 3: init, a barrier allreduce; then rank 2 dies, and 0 and 1 issue an allreduce that
 * cannot finish, watch ncclCommGetAsyncError until it reports the loss, and abort. */
static int killed_rank(int k, ncclUniqueId id) {
    Rank r = {.rank = k, .nranks = NR, .device = k % ngpu, .mode = "rank killed"};
    const Step barrier = {ALLREDUCE, SMALL, false};
    if (!cuda_up() || !rank_open(&r)) return 1;
    ncclResult_t e = ncclCommInitRank(&r.comm, NR, id, k);
    if (e != ncclSuccess) {
        nccl_failed(&r, "init", "ncclCommInitRank", e);
        return 1;
    }
    /* a barrier all three complete: the kill then comes mid-run, not during the init */
    if (!rank_step(&r, &barrier, 1) || r.fails) {
        rank_fail(&r, "the barrier allreduce before the kill failed; giving up");
        if (r.comm) abort_checked(&r, "after the failed barrier");
        fflush(stdout);
        return k == NR - 1 ? 3 : 1;
    }
    if (k == NR - 1) {
        printf("  rank killed: rank %d: the barrier allreduce is done; killing myself "
               "(SIGKILL)\n", k);
        fflush(stdout);
        raise(SIGKILL);
        return 4;
    }
    /* the survivors: an allreduce on the barrier's buffers that rank 2 will never join */
    e = ncclAllReduce(r.sp, r.rp, SMALL, ncclFloat, ncclSum, r.comm, r.stream);
    if (e != ncclSuccess)
        printf("  rank killed: rank %d: the allreduce after the kill returned %s at once (%s)\n",
               k, nccl_name(e), ncclGetLastError(r.comm));
    const double t0 = now_s();
    ncclResult_t async = ncclSuccess;
    for (;;) {
        const ncclResult_t q = ncclCommGetAsyncError(r.comm, &async);
        if (q != ncclSuccess) {
            nccl_failed(&r, "watching the communicator", "ncclCommGetAsyncError", q);
            break;
        }
        if ((async != ncclSuccess && async != ncclInProgress) || now_s() - t0 > ASYNC_ERR_S) break;
        usleep(100000);
    }
    const double dt = now_s() - t0;
    cu.cuCtxSetCurrent(r.ctx);
    const CuResult sq = cu.cuStreamQuery(r.stream);
    if (async == ncclSuccess || async == ncclInProgress) {
        rank_fail(&r, "ncclCommGetAsyncError still says %s %.1f s after the allreduce, although "
                  "rank %d is dead", nccl_name(async), dt, NR - 1);
    } else {
        printf("  rank killed: rank %d: ncclCommGetAsyncError reported %s after %.2f s: %s\n",
               k, nccl_name(async), dt, ncclGetLastError(r.comm));
        printf("  rank killed: rank %d: the allreduce %s\n", k,
               sq == CU_ERR_NOT_READY ? "was still waiting for rank 2 then"
               : sq == CU_OK ? "had ended by then" : "had failed by then");
    }
    bool ok = abort_checked(&r, "with rank 2 dead");
    if (ok) {   /* for the log only: a peer's death may leave a CUDA error behind, not ours */
        cu.cuCtxSetCurrent(r.ctx);
        const CuResult after = cu.cuStreamQuery(r.stream);
        printf("  rank killed: rank %d: after the abort its stream is %s\n", k,
               after == CU_OK ? "idle" : after == CU_ERR_NOT_READY ? "STILL BUSY" : cu_name(after));
        ok = after == CU_OK;
    }
    rank_close(&r, ok);
    fflush(stdout);
    return r.fails ? 1 : 0;
}

static int sub_rank_killed(void) {
    ncclUniqueId id;
    int st[NR];
    bool hung[NR];
    if (!get_id(&id) || !fork_ranks(killed_rank, id, FAULT_RANKS_S, st, hung)) return 1;
    int fails = 0;
    for (int k = 0; k < NR - 1; k++)
        if (hung[k] || !WIFEXITED(st[k]) || WEXITSTATUS(st[k]) != 0) {
            fprintf(stderr, "  rank killed: rank %d should have exited 0 (see its lines "
                    "above)\n", k);
            fails++;
        }
    if (hung[NR - 1] || !WIFSIGNALED(st[NR - 1]) || WTERMSIG(st[NR - 1]) != SIGKILL) {
        fprintf(stderr, "  rank killed: rank %d should have died by SIGKILL after the barrier\n",
                NR - 1);
        fails++;
    }
    return fails;
}

/* ---- 2b: ncclCommAbort with a kernel still waiting ------------------------------------------- */
static atomic_int warm_arrived;    /* ranks past the warm-up (well or not) */
static atomic_int warm_ok;         /* ranks whose warm-up allreduce was right */
static atomic_int rank0_done;      /* 1: rank 0 has aborted or given up; rank 1 may abort */

/* Waits until *v >= want, at most limit_s. */
static bool wait_count(atomic_int *v, int want, double limit_s) {
    const double t0 = now_s();
    while (atomic_load(v) < want) {
        if (now_s() - t0 > limit_s) return false;
        usleep(1000);
    }
    return true;
}

/* Rank 0 issues an allreduce rank 1 never joins and aborts it after 1 s; rank 1 waits, then
 * aborts. A warm-up allreduce first, which both join: kernels compiled, buffers known, so the
 * lone call only launches. */
static void abort_rank(Rank *r, ncclUniqueId id) {
    const Step warm = {ALLREDUCE, SMALL, false};
    bool ok = rank_open(r);
    if (ok) {
        const ncclResult_t e = ncclCommInitRank(&r->comm, r->nranks, id, r->rank);
        if (e != ncclSuccess) {
            nccl_failed(r, "init", "ncclCommInitRank", e);
            r->comm = NULL;
            ok = false;
        }
    }
    ok = ok && rank_step(r, &warm, 1) && r->fails == 0;
    if (ok) atomic_fetch_add(&warm_ok, 1);
    atomic_fetch_add(&warm_arrived, 1);
    if (r->rank == 1) {
        if (!wait_count(&rank0_done, 1, 45))
            rank_fail(r, "rank 0 did not finish its abort within 45 s");
        if (r->comm) abort_checked(r, "(rank 1, which never joined)");
        rank_close(r, ok && !r->broken);
        return;
    }
    if (!wait_count(&warm_arrived, 2, WAIT_S)) rank_fail(r, "rank 1 did not finish its warm-up");
    bool idle = false;
    if (ok && atomic_load(&warm_ok) == 2) {
        const ncclResult_t e = ncclAllReduce(r->sp, r->rp, SMALL, ncclFloat, ncclSum, r->comm,
                                             r->stream);
        if (e != ncclSuccess) {
            nccl_failed(r, "the allreduce rank 1 does not join", "ncclAllReduce", e);
        } else {
            usleep(1000000);
            cu.cuCtxSetCurrent(r->ctx);
            const CuResult sq = cu.cuStreamQuery(r->stream);
            if (sq == CU_OK)
                rank_fail(r, "the allreduce finished without rank 1");
            else if (sq != CU_ERR_NOT_READY)
                rank_fail(r, "the allreduce failed before the abort: %s", cu_name(sq));
            else
                printf("  abort waiting: rank 0: the allreduce still waits for rank 1 after 1 s; "
                       "aborting\n");
        }
        double secs = 0;
        idle = abort_checked(r, "with its kernel waiting") && stream_idle(r, IDLE_S, &secs);
        if (idle) printf("  abort waiting: rank 0: its stream idle %.2f s after the abort (the "
                         "kernel stopped)\n", secs);
    } else if (r->comm) {
        rank_fail(r, "the warm-up failed on a rank; aborting without the test");
        abort_checked(r, "after the failed warm-up");
    }
    atomic_store(&rank0_done, 1);
    rank_close(r, idle);
}

static int sub_abort_waiting(void) {
    ncclUniqueId id;
    if (!cuda_up() || !get_id(&id)) return 1;
    RankThread t[2];
    memset(t, 0, sizeof t);
    for (int k = 0; k < 2; k++)
        t[k].r = (Rank){.rank = k, .nranks = 2, .device = k % ngpu, .mode = "abort waiting"};
    atomic_init(&warm_arrived, 0);
    atomic_init(&warm_ok, 0);
    atomic_init(&rank0_done, 0);
    return run_threads(t, 2, abort_rank, id, FAULT_RANKS_S);
}

/* ---- the driver ------------------------------------------------------------------------------ */
/* Runs body in its own process and process group, so that a hang is killed with everything it
 * started; prints the sub-test's line. */
static void run_sub(const char *name, int (*body)(void), int limit_s) {
    const double t0 = now_s();
    printf("  -- %s (deadline %d s)\n", name, limit_s);
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        const int fails = body();
        fflush(stdout);
        _exit(fails ? 1 : 0);
    }
    bool passed = false;
    if (pid < 0) {
        fprintf(stderr, "  %s: fork: %s\n", name, strerror(errno));
    } else {
        setpgid(pid, pid);   /* here too: the kill below must find the group whoever runs first */
        int st = 0;
        bool hung = false;
        wait_pids(&pid, 1, limit_s, &st, &hung, true);
        kill(-pid, SIGKILL);   /* strays: rank processes a failed sub-test left behind */
        passed = !hung && WIFEXITED(st) && WEXITSTATUS(st) == 0;
        if (hung)
            fprintf(stderr, "  %s: no result within %d s: a hang; killed with its processes (its "
                    "last lines above say where it was)\n", name, limit_s);
        else if (!passed) {
            char text[128];
            status_text(st, false, limit_s, text, sizeof text);
            fprintf(stderr, "  %s: %s\n", name, text);
        }
    }
    printf("  (%.1f s)\n", now_s() - t0);
    TEST(name, CHECK(passed));
}

/* The GPU count, from a child: CUDA must stay uninitialised here (forked children could not use
 * it). 0 when there is no driver or no device; -1 when the probe itself failed. */
static int probe_gpus(void) {
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        int n = 0;
        if (cu_load() != MSCCLRT_SUCCESS) {
            fprintf(stderr, "no CUDA driver: %s\n", mscclrt_last_error());
            _exit(0);
        }
        if (cu.cuDeviceGetCount(&n) != CU_OK) n = 0;
        _exit(n > 100 ? 100 : n);
    }
    if (pid < 0) return -1;
    int st = 0;
    bool hung = false;
    wait_pids(&pid, 1, 60, &st, &hung, false);
    return !hung && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool selected(int argc, char **argv, const char *name) {
    if (argc < 2) return true;
    for (int i = 1; i < argc; i++)
        if (strstr(name, argv[i])) return true;
    return false;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    ngpu = probe_gpus();
    if (ngpu < 0) {
        fprintf(stderr, "the GPU probe (cu_load, cuDeviceGetCount in a child) failed or hung\n");
        return 1;
    }
    if (ngpu == 0) {
        return harness_skip("a GPU", "no CUDA device");
    }
    printf("  %d GPU(s): rank r on GPU r mod %d\n", ngpu, ngpu);
    static const struct {
        const char *name;
        int (*body)(void);
        int limit_s;               /* the sub-test's whole deadline */
    } subs[] = {
        {"nccl modes: process per GPU (3 processes, ncclCommInitRank)", sub_process_per_gpu, 125},
        {"nccl modes: thread per GPU (3 threads, ncclCommInitRank)", sub_thread_per_gpu, 125},
        {"nccl modes: one thread (ncclCommInitAll, group calls)", sub_one_thread, 90},
        {"nccl faults: a rank killed mid-run (ncclCommGetAsyncError, ncclCommAbort)",
         sub_rank_killed, 90},
        {"nccl faults: ncclCommAbort with a kernel still waiting", sub_abort_waiting, 90},
    };
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (selected(argc, argv, subs[i].name))
            run_sub(subs[i].name, subs[i].body, subs[i].limit_s);
    return harness_report();
}

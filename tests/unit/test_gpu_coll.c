/*
 * test_gpu_coll.c - the NCCL-shaped collectives of libmscclrt on GPUs (tests/gpu/run.sh runs it;
 * `make test` skips it with 77 where there is no GPU): one single-process group of N ranks
 * (argv[1], default 4) on the machine's GPUs (rank r on GPU r mod count: several ranks share a
 * GPU where there are fewer), one thread driving every rank through group calls, each rank on
 * its own stream. Every collective (allreduce, allgather, reducescatter, broadcast, reduce,
 * alltoall, gather, scatter) for odd and large element counts, several dtypes and operators
 * (avg and PreMulSum with host and device scalars included), in place and out of place, every
 * root; grouped send/recv in an all-to-all-v pattern with uneven sizes and self sends; then a
 * captured CUDA graph replayed. Results are compared with a host reference computed in the
 * element type's precision, in rank order; a hang is reported after a deadline.
 * GPU_COLL_TRACE=1 prints each case and its time; GPU_COLL_P2P_ONLY=1 runs the send/recv cases alone.
 */
#include "../harness.h"

#include "check/check.h"
#include "cuda/cuda_driver.h"
#include "mscclrt.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXR 16
static int n = 4;
static mscclrt_comm *comms[MAXR];
static CuStream streams[MAXR];
static CuContext ctxs[MAXR];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Waits for every rank's stream, at most 60 s; false on a hang or an error. */
static bool wait_all(const char *what) {
    const double dl = now() + 60;
    for (int r = 0; r < n; r++) {
        cu.cuCtxSetCurrent(ctxs[r]);
        CuResult e;
        while ((e = cu.cuStreamQuery(streams[r])) == CU_ERR_NOT_READY && now() < dl) { }
        if (e != CU_OK) {
            fprintf(stderr, "%s: rank %d: stream %s (%d)\n", what, r,
                    e == CU_ERR_NOT_READY ? "still busy after 60 s: hang" : "failed", e);
            return false;
        }
    }
    return true;
}

typedef struct {
    CuDevPtr send[MAXR], recv[MAXR];
    void *hin[MAXR], *hout[MAXR];
    size_t in_bytes, out_bytes;
} Bufs;

static bool bufs_alloc(Bufs *b, size_t in, size_t out, mscclrt_dtype dt, mscclrt_redop op,
                       uint64_t seed) {
    memset(b, 0, sizeof *b);
    b->in_bytes = in;
    b->out_bytes = out;
    const size_t es = mscclrt_dtype_size(dt);
    for (int r = 0; r < n; r++) {
        cu.cuCtxSetCurrent(ctxs[r]);
        b->hin[r] = malloc(in + 16);
        b->hout[r] = malloc(out + 16);
        if (cu.cuMemAlloc(&b->send[r], in + 64) != CU_OK || cu.cuMemAlloc(&b->recv[r], out + 64) != CU_OK)
            return false;
        check_fill(dt, op, b->hin[r], in / es, seed, r);
        cu.cuMemcpyHtoD(b->send[r], b->hin[r], in);
        cu.cuMemsetD8(b->recv[r], 0xA5, out + 64);
    }
    return true;
}

static void bufs_free(Bufs *b) {
    for (int r = 0; r < n; r++) {
        cu.cuCtxSetCurrent(ctxs[r]);
        if (b->send[r]) cu.cuMemFree(b->send[r]);
        if (b->recv[r]) cu.cuMemFree(b->recv[r]);
        free(b->hin[r]);
        free(b->hout[r]);
    }
}

/* Tolerance of reduced elements: plans may combine contributions in any order, each pairwise
 * step rounding once in the type (mscclrt-run(1) CHECKING), so a float result may differ from
 * the exact result by (N+1) u sum|x| (u: the type's unit roundoff; prod: (N+1) u |result|), and
 * so does the rank-order reference: the two may differ by twice that. mag: per element, sum over ranks of |contribution|; NULL
 * for collectives that move data (bit-exact). A fixed relative tolerance once failed a correct
 * fp8 allreduce (rs_ag_packet reduces from the owner's contribution, not from rank 0). */
static double unit_roundoff(mscclrt_dtype dt) {
    switch (dt) {
    case MSCCLRT_FLOAT16: return 1.0 / 2048;
    case MSCCLRT_BFLOAT16: return 1.0 / 256;
    case MSCCLRT_FLOAT32: return 1.0 / 16777216;
    case MSCCLRT_FP8_E4M3: return 1.0 / 16;
    case MSCCLRT_FP8_E5M2: return 1.0 / 8;
    default: return 1.0 / 9007199254740992.0;   /* float64 */
    }
}

/* got vs want, elementwise: integers and moved data exactly, reduced floats within the bound */
static bool same(mscclrt_dtype dt, const void *got, const void *want, const double *mag,
                 size_t elems, const char *what, int rank) {
    const double u = 2 * unit_roundoff(dt) * (n + 1);
    for (size_t i = 0; i < elems; i++) {
        const double g = dtype_load(dt, got, i), w = dtype_load(dt, want, i);
        const double tol = mag && dtype_is_float(dt) ? u * mag[i] : 0;
        const bool ok = g == w || (g - w <= tol && w - g <= tol);
        if (!ok) {
            fprintf(stderr, "%s: rank %d: element %zu of %zu: got %g, want %g (tolerance %g)\n",
                    what, rank, i, elems, g, w, tol);
            return false;
        }
    }
    return true;
}

/* reference reduction in rank order in the type's precision; scale: PreMulSum scalar (or NULL);
 * mag (or NULL): per element, the sum over ranks of |contribution| (same()'s bound) */
static void ref_reduce(mscclrt_dtype dt, mscclrt_redop op, void *acc, void *const *in, size_t off,
                       size_t elems, const void *scale, double *mag) {
    const size_t es = mscclrt_dtype_size(dt);
    void *tmp = malloc(elems * es + 16), *sv = malloc(elems * es + 16);
    if (scale)
        for (size_t i = 0; i < elems; i++) memcpy((char *)sv + i * es, scale, es);
    if (mag) memset(mag, 0, elems * sizeof *mag);
    for (int q = 0; q < n; q++) {
        void *dst = q == 0 ? acc : tmp;
        memcpy(dst, (char *)in[q] + off, elems * es);
        if (scale) dtype_reduce(dt, MSCCLRT_PROD, dst, sv, elems);
        for (size_t i = 0; mag && i < elems; i++) {
            const double v = dtype_load(dt, dst, i);
            mag[i] += v < 0 ? -v : v;
        }
        if (q > 0) dtype_reduce(dt, op == MSCCLRT_AVG || scale ? MSCCLRT_SUM : op, acc, tmp, elems);
    }
    if (op == MSCCLRT_AVG) dtype_avg_finish(dt, acc, elems, n);
    for (size_t i = 0; mag && op == MSCCLRT_AVG && i < elems; i++) mag[i] /= n;
    for (size_t i = 0; mag && op == MSCCLRT_PROD && !scale && i < elems; i++) {
        const double v = dtype_load(dt, acc, i);   /* prod: relative to the result */
        mag[i] = v < 0 ? -v : v;
    }
    if (mag && (op == MSCCLRT_MAX || op == MSCCLRT_MIN)) memset(mag, 0, elems * sizeof *mag);
    free(tmp);
    free(sv);
}

enum { ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST, REDUCE, ALLTOALL, GATHER, SCATTER };
static const char *const cname[] = {"allreduce", "allgather", "reducescatter", "broadcast",
                                    "reduce", "alltoall", "gather", "scatter"};

/* one case: collective k, count elements, dtype/op (op < 0: PreMulSum with scalar 0.5 or 3),
 * root, in place, PreMulSum scalar residence */
static void run_case(int k, size_t count, mscclrt_dtype dt, int opi, int root, bool inplace,
                     int residence) {
    const size_t es = mscclrt_dtype_size(dt);
    const bool premul = opi < 0;
    const mscclrt_redop op = premul ? MSCCLRT_SUM : (mscclrt_redop)opi;
    size_t in = count * es, out = count * es;
    if (k == ALLGATHER || k == GATHER) out = in * n;
    if (k == REDUCESCATTER || k == SCATTER) in = out * n;
    if (k == ALLTOALL) in = out = count * es * n;
    char what[200];
    snprintf(what, sizeof what, "%s count %zu %s %s root %d %s", cname[k], count,
             mscclrt_dtype_name(dt), premul ? (residence ? "premulsum(host)" : "premulsum(device)")
                                            : mscclrt_redop_name(op), root,
             inplace ? "in place" : "out of place");
    /* GPU_COLL_TRACE=1: each case's name and time on stderr, so a run cut short by a time limit
     * shows whether a case hangs or the cases only compile slowly */
    static int trace = -1;
    if (trace < 0) trace = getenv("GPU_COLL_TRACE") != NULL;
    const double t0 = now();
    if (trace) fprintf(stderr, "case %s ...\n", what);
    Bufs b;
    if (!bufs_alloc(&b, in, out, dt, op, 1000 + k * 31 + count)) {
        CHECK(!"allocation");
        bufs_free(&b);
        return;
    }
    /* the scalar: 0.5 for floats, 3 for integers */
    unsigned char scal[16] = {0};
    dtype_store(dt, scal, 0, dtype_is_float(dt) ? 0.5 : 3);
    int ops[MAXR];
    CuDevPtr dscal[MAXR] = {0};
    for (int r = 0; r < n; r++) {
        ops[r] = op;
        if (!premul) continue;
        cu.cuCtxSetCurrent(ctxs[r]);
        const void *s = scal;
        if (!residence) {
            cu.cuMemAlloc(&dscal[r], 16);
            cu.cuMemcpyHtoD(dscal[r], scal, es);
            s = (const void *)(uintptr_t)dscal[r];
        }
        CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_redop_create_premulsum(comms[r], &ops[r], s, dt,
                                                                     (mscclrt_scalar_residence)residence));
    }
    /* in place: the input where the collective reads it inside the output (or the output inside
     * the input), filled with the same data */
    const void *sp[MAXR];
    void *rp[MAXR];
    for (int r = 0; r < n; r++) {
        sp[r] = (const void *)(uintptr_t)b.send[r];
        rp[r] = (void *)(uintptr_t)b.recv[r];
        if (!inplace) continue;
        cu.cuCtxSetCurrent(ctxs[r]);
        size_t at = 0;
        if (k == ALLGATHER || k == GATHER) at = (size_t)r * in;
        if (k == REDUCESCATTER || k == SCATTER) {   /* output inside the input */
            rp[r] = (char *)(uintptr_t)b.send[r] + (size_t)r * out;
            continue;
        }
        cu.cuMemcpyHtoD(b.recv[r] + at, b.hin[r], in);
        sp[r] = (const char *)(uintptr_t)b.recv[r] + at;
    }
    mscclrt_result res = mscclrt_group_start();
    for (int r = 0; r < n && res == MSCCLRT_SUCCESS; r++) {
        void *s = streams[r];
        switch (k) {
        case ALLREDUCE: res = mscclrt_allreduce(comms[r], sp[r], rp[r], count, dt, ops[r], s); break;
        case ALLGATHER: res = mscclrt_allgather(comms[r], sp[r], rp[r], count, dt, s); break;
        case REDUCESCATTER: res = mscclrt_reducescatter(comms[r], sp[r], rp[r], count, dt, ops[r], s); break;
        case BROADCAST: res = mscclrt_broadcast(comms[r], sp[r], rp[r], count, dt, root, s); break;
        case REDUCE: res = mscclrt_reduce(comms[r], sp[r], rp[r], count, dt, ops[r], root, s); break;
        case ALLTOALL: res = mscclrt_alltoall(comms[r], sp[r], rp[r], count, dt, s); break;
        case GATHER: res = mscclrt_gather(comms[r], sp[r], rp[r], count, dt, root, s); break;
        case SCATTER: res = mscclrt_scatter(comms[r], sp[r], rp[r], count, dt, root, s); break;
        }
    }
    mscclrt_result end = mscclrt_group_end();
    if (res != MSCCLRT_SUCCESS || end != MSCCLRT_SUCCESS)
        fprintf(stderr, "%s: %s\n", what, mscclrt_last_error());
    CHECK_EQ_INT(MSCCLRT_SUCCESS, res);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, end);
    bool ok = res == MSCCLRT_SUCCESS && end == MSCCLRT_SUCCESS && wait_all(what);
    CHECK(ok);
    const size_t blk = count * es;
    void *want = malloc(out * n + in + 64);
    double *mag = malloc((count + 1) * sizeof *mag);   /* reductions' bound (same()) */
    for (int r = 0; r < n && ok; r++) {
        cu.cuCtxSetCurrent(ctxs[r]);
        cu.cuMemcpyDtoH(b.hout[r], (CuDevPtr)(uintptr_t)rp[r], out);
        size_t check_bytes = out;
        switch (k) {
        case ALLREDUCE: ref_reduce(dt, op, want, b.hin, 0, count, premul ? scal : NULL, mag); break;
        case REDUCE:
            if (r != root) { check_bytes = 0; break; }
            ref_reduce(dt, op, want, b.hin, 0, count, premul ? scal : NULL, mag);
            break;
        case REDUCESCATTER: ref_reduce(dt, op, want, b.hin, (size_t)r * blk, count, premul ? scal : NULL, mag); break;
        case ALLGATHER:
        case GATHER:
            if (k == GATHER && r != root) { check_bytes = 0; break; }
            for (int q = 0; q < n; q++) memcpy((char *)want + (size_t)q * blk, b.hin[q], blk);
            break;
        case BROADCAST: memcpy(want, b.hin[root], blk); break;
        case ALLTOALL:
            for (int q = 0; q < n; q++) memcpy((char *)want + (size_t)q * blk, (char *)b.hin[q] + (size_t)r * blk, blk);
            break;
        case SCATTER: memcpy(want, (char *)b.hin[root] + (size_t)r * blk, blk); break;
        }
        const bool reduced = k == ALLREDUCE || k == REDUCE || k == REDUCESCATTER;
        if (check_bytes) ok = same(dt, b.hout[r], want, reduced ? mag : NULL, check_bytes / es, what, r);
    }
    CHECK(ok);
    free(want);
    free(mag);
    for (int r = 0; r < n && premul; r++) {
        mscclrt_redop_destroy(comms[r], ops[r]);
        cu.cuCtxSetCurrent(ctxs[r]);
        if (dscal[r]) cu.cuMemFree(dscal[r]);
    }
    bufs_free(&b);
    if (trace) fprintf(stderr, "case %s: %.0f ms\n", what, (now() - t0) * 1e3);
}

/* all-to-all-v from grouped send/recv: rank r sends (r + q + 1) * unit elements to rank q
 * (itself included), reps sends to each peer in a row (the pairing keeps their order; a block
 * holding three packet messages to one peer in one direction counts them one at a time, one
 * or two take their flags in one pass) */
static void run_alltoallv(size_t unit, mscclrt_dtype dt, int reps) {
    const size_t es = mscclrt_dtype_size(dt);
    size_t tot = 0;
    for (int q = 0; q < 2 * n + 2; q++) tot += (size_t)(q + 1) * unit;
    Bufs b;
    if (!bufs_alloc(&b, tot * es * reps, tot * es * reps, dt, MSCCLRT_SUM, 77 + unit)) {
        CHECK(!"allocation");
        bufs_free(&b);
        return;
    }
    mscclrt_result res = mscclrt_group_start();
    for (int r = 0; r < n && res == MSCCLRT_SUCCESS; r++) {
        size_t so = 0, ro = 0;
        for (int q = 0; q < n && res == MSCCLRT_SUCCESS; q++) {
            const size_t c = (size_t)(r + q + 1) * unit;   /* r -> q, and q -> r */
            for (int k = 0; k < reps && res == MSCCLRT_SUCCESS; k++) {
                res = mscclrt_send(comms[r], (char *)(uintptr_t)b.send[r] + so * es, c, dt, q, streams[r]);
                if (res == MSCCLRT_SUCCESS)
                    res = mscclrt_recv(comms[r], (char *)(uintptr_t)b.recv[r] + ro * es, c, dt, q, streams[r]);
                so += c;
                ro += c;
            }
        }
    }
    mscclrt_result end = mscclrt_group_end();
    if (res != MSCCLRT_SUCCESS || end != MSCCLRT_SUCCESS) fprintf(stderr, "alltoallv: %s\n", mscclrt_last_error());
    CHECK_EQ_INT(MSCCLRT_SUCCESS, res);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, end);
    bool ok = res == MSCCLRT_SUCCESS && end == MSCCLRT_SUCCESS && wait_all("alltoallv");
    for (int r = 0; r < n && ok; r++) {
        cu.cuCtxSetCurrent(ctxs[r]);
        size_t ro = 0;
        for (int q = 0; q < n && ok; q++) {
            const size_t c = (size_t)(r + q + 1) * unit;
            /* what q sent to r: its pieces start after q's sends to ranks < r */
            size_t qo = 0;
            for (int p = 0; p < r; p++) qo += (size_t)reps * (size_t)(q + p + 1) * unit;
            char *got = malloc(reps * c * es);
            cu.cuMemcpyDtoH(got, b.recv[r] + ro * es, reps * c * es);
            char what[100];
            snprintf(what, sizeof what, "alltoallv unit %zu x%d from rank %d", unit, reps, q);
            ok = same(dt, got, (char *)b.hin[q] + qo * es, NULL, reps * c, what, r);
            free(got);
            ro += reps * c;
        }
    }
    CHECK(ok);
    bufs_free(&b);
}

/* capture one allreduce per rank into a graph per rank, replay it, check */
static void run_graph(size_t count) {
    const mscclrt_dtype dt = MSCCLRT_FLOAT32;
    Bufs b;
    if (!bufs_alloc(&b, count * 4, count * 4, dt, MSCCLRT_SUM, 5)) {
        CHECK(!"allocation");
        bufs_free(&b);
        return;
    }
    CuGraph g[MAXR];
    CuGraphExec e[MAXR];
    bool ok = true;
    for (int r = 0; r < n; r++) {
        cu.cuCtxSetCurrent(ctxs[r]);
        ok = ok && cu.cuStreamBeginCapture(streams[r], CU_CAPTURE_MODE_RELAXED) == CU_OK;
    }
    mscclrt_group_start();
    for (int r = 0; r < n; r++)
        ok = ok && mscclrt_allreduce(comms[r], (void *)(uintptr_t)b.send[r], (void *)(uintptr_t)b.recv[r],
                                     count, dt, MSCCLRT_SUM, streams[r]) == MSCCLRT_SUCCESS;
    ok = mscclrt_group_end() == MSCCLRT_SUCCESS && ok;
    if (!ok) fprintf(stderr, "graph capture: %s\n", mscclrt_last_error());
    for (int r = 0; r < n; r++) {
        cu.cuCtxSetCurrent(ctxs[r]);
        ok = cu.cuStreamEndCapture(streams[r], &g[r]) == CU_OK && ok;
        ok = ok && cu.cuGraphInstantiate(&e[r], g[r], 0) == CU_OK;
    }
    CHECK(ok);
    for (int it = 0; it < 20 && ok; it++)
        for (int r = 0; r < n; r++) {
            cu.cuCtxSetCurrent(ctxs[r]);
            ok = cu.cuGraphLaunch(e[r], streams[r]) == CU_OK && ok;
        }
    ok = ok && wait_all("graph replay");
    CHECK(ok);
    void *want = malloc(count * 4);
    double *mag = malloc(count * sizeof *mag);
    ref_reduce(dt, MSCCLRT_SUM, want, b.hin, 0, count, NULL, mag);
    for (int r = 0; r < n && ok; r++) {
        cu.cuCtxSetCurrent(ctxs[r]);
        cu.cuMemcpyDtoH(b.hout[r], b.recv[r], count * 4);
        ok = same(dt, b.hout[r], want, mag, count, "graph replay", r);
    }
    CHECK(ok);
    free(want);
    free(mag);
    bufs_free(&b);
}

int main(int argc, char **argv) {
    if (argc > 1) n = atoi(argv[1]);
    if (n < 1 || n > MAXR) {
        fprintf(stderr, "usage: test_gpu_coll [nranks 1..%d]\n", MAXR);
        return 2;
    }
    int count = 0;
    if (cu_load() != MSCCLRT_SUCCESS || cu.cuDeviceGetCount(&count) != CU_OK || count < 1) {
        return harness_skip("a GPU", mscclrt_last_error());
    }
    int devs[MAXR];
    for (int r = 0; r < n; r++) devs[r] = r % count;
    if (mscclrt_comm_init_all(comms, n, devs) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "init: %s\n", mscclrt_last_error());
        return 1;
    }
    for (int r = 0; r < n; r++) {
        CuDevice d;
        cu.cuDeviceGet(&d, devs[r]);
        cu.cuDevicePrimaryCtxRetain(&ctxs[r], d);
        cu.cuCtxSetCurrent(ctxs[r]);
        cu.cuStreamCreate(&streams[r], 1 /* non-blocking */);
    }
    const bool quick = getenv("MSCCLRT_TEST_QUICK") != NULL;
    const size_t counts[] = {1, 7, 1000, 65539, 1 << 20};
    const int ncounts = quick ? 3 : 5;
    struct { mscclrt_dtype dt; int op; } combos[] = {
        {MSCCLRT_FLOAT32, MSCCLRT_SUM}, {MSCCLRT_BFLOAT16, MSCCLRT_MAX}, {MSCCLRT_INT32, MSCCLRT_PROD},
        {MSCCLRT_FLOAT16, MSCCLRT_AVG}, {MSCCLRT_INT64, MSCCLRT_MIN}, {MSCCLRT_FP8_E4M3, MSCCLRT_SUM},
        {MSCCLRT_FLOAT64, -1}, {MSCCLRT_UINT8, MSCCLRT_SUM}, {MSCCLRT_INT8, MSCCLRT_AVG},
        {MSCCLRT_FP8_E5M2, MSCCLRT_MAX}, {MSCCLRT_UINT64, MSCCLRT_SUM}, {MSCCLRT_UINT32, -1},
    };
    const int ncombos = (int)(sizeof combos / sizeof combos[0]);
    /* GPU_COLL_P2P_ONLY=1: only the send/recv cases (their kernel's change checked in a minute:
     * the collectives compile a module per dtype and operator) */
    const bool p2p_only = getenv("GPU_COLL_P2P_ONLY") != NULL;
    for (int k = 0; k < 8 && !p2p_only; k++) {
        const int f0 = h_failed;
        const bool reduces = k == ALLREDUCE || k == REDUCESCATTER || k == REDUCE;
        for (int ci = 0; ci < ncounts; ci++)
            for (int m = 0; m < (reduces ? ncombos : 3); m++) {
                const int root = (ci + m) % n;
                const bool inplace = (ci + m) % 2 == 1;
                run_case(k, counts[ci], combos[m].dt, reduces ? combos[m].op : MSCCLRT_SUM, root,
                         inplace, m % 2);
            }
        printf("testing gpu coll %s N=%d ... %s\n", cname[k], n, h_failed == f0 ? "passed" : "failed");
        fflush(stdout);   /* a run killed by a time limit shows how far it got */
    }
    TEST("gpu coll send/recv all-to-all-v", (run_alltoallv(1, MSCCLRT_FLOAT32, 2), run_alltoallv(3001, MSCCLRT_BFLOAT16, 2), run_alltoallv(70001, MSCCLRT_INT8, 2)));
    TEST("gpu coll send/recv one message per pair", (run_alltoallv(1, MSCCLRT_FLOAT32, 1), run_alltoallv(3001, MSCCLRT_BFLOAT16, 1), run_alltoallv(300001, MSCCLRT_INT8, 1)));
    TEST("gpu coll send/recv three messages per pair", (run_alltoallv(1, MSCCLRT_FLOAT32, 3), run_alltoallv(3001, MSCCLRT_BFLOAT16, 3)));
    if (!p2p_only) TEST("gpu coll graph replay", (run_graph(1000), run_graph(1 << 20)));
    for (int r = 0; r < n; r++) {
        cu.cuCtxSetCurrent(ctxs[r]);
        cu.cuStreamDestroy(streams[r]);
        mscclrt_comm_destroy(comms[r]);
    }
    return harness_report();
}

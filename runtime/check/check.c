/*
 * check.c - deterministic inputs and the collective postcondition checker against float64 /
 * exact-integer references (see check.h); the arithmetic is the data types' (runtime/dtype).
 */
#include "check/check.h"
#include "core/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- inputs ---------------------------------------------------------------------------------- */
static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void check_fill_range(mscclrt_dtype t, mscclrt_redop op, void *buf, size_t first, size_t n,
                      uint64_t seed, int rank) {
    uint64_t base = mix64(seed ^ ((uint64_t)(rank + 1) << 40));
    for (size_t k = 0; k < n; k++) {
        size_t i = first + k;             /* element i depends on (seed, rank, i) only */
        uint64_t h = mix64(base + i);
        double v;
        if (op == MSCCLRT_PROD) {
            /* |v| in [1, 1.375]: products over 8 ranks stay below 13, even in e4m3 */
            v = (1.0 + (double)(h % 4) / 8.0) * ((h >> 8) & 1 ? -1.0 : 1.0);
            if (i == 0) v = rank % 2 ? -1.0 : 1.0;
        } else if (dtype_is_float(t)) {
            v = ((double)(h % 17) - 8.0) / 4.0;          /* [-2, 2] in quarters */
            if (i == 0) v = 1.0 + rank % 3;              /* never all zeros */
        } else if (dtype_is_signed_int(t)) {
            v = (double)(h % 41) - 20.0;
            if (i == 0) v = 1.0 + rank % 3;
        } else {
            v = (double)(h % 41);
            if (i == 0) v = 1.0 + rank % 3;
        }
        dtype_store(t, buf, k, v);
    }
}

typedef struct {
    mscclrt_dtype t;
    mscclrt_redop op;
    char *buf;
    size_t n, per;
    uint64_t seed;
    int rank;
} FillJobs;

static void fill_job(void *arg, int i) {
    FillJobs *f = arg;
    size_t lo = (size_t)i * f->per, hi = lo + f->per < f->n ? lo + f->per : f->n;
    if (lo < hi)
        check_fill_range(f->t, f->op, f->buf + lo * dtype_size(f->t), lo, hi - lo, f->seed,
                         f->rank);
}

mscclrt_result check_fill(mscclrt_dtype t, mscclrt_redop op, void *buf, size_t n, uint64_t seed,
                          int rank) {
    int nt;
    TRY(check_threads(n, &nt));
    FillJobs f = {t, op, buf, n, (n + (size_t)nt - 1) / (size_t)nt, seed, rank};
    check_run_threads(nt, fill_job, &f);
    return MSCCLRT_SUCCESS;
}

/* ---- postconditions ------------------------------------------------------------------------ */
bool check_collective_known(PlanCollective coll) {
    return coll == PLAN_COLL_ALLREDUCE || coll == PLAN_COLL_ALLGATHER ||
           coll == PLAN_COLL_REDUCESCATTER || coll == PLAN_COLL_ALLTOALL ||
           coll == PLAN_COLL_BROADCAST || coll == PLAN_COLL_SENDRECV ||
           coll == PLAN_COLL_REDUCE || coll == PLAN_COLL_GATHER || coll == PLAN_COLL_SCATTER;
}

/* Unit roundoff and smallest subnormal of a float type (constants: this runs per element). */
static void float_limits(mscclrt_dtype t, double *u, double *tiny) {
    switch (t) {
    case MSCCLRT_FLOAT16: *u = 0x1p-11; *tiny = 0x1p-24; break;
    case MSCCLRT_BFLOAT16: *u = 0x1p-8; *tiny = 0x1p-133; break;
    case MSCCLRT_FP8_E4M3: *u = 0x1p-4; *tiny = 0x1p-9; break;
    case MSCCLRT_FP8_E5M2: *u = 0x1p-3; *tiny = 0x1p-16; break;
    case MSCCLRT_FLOAT32: *u = 0x1p-24; *tiny = 0x1p-149; break;
    default: *u = 0x1p-53; *tiny = 0x1p-1074; break;
    }
}

static void mismatch(CheckMismatch *mm, int rank, size_t elem, double got, double want,
                     double tol, mscclrt_dtype t, const char *what) {
    if (!mm) return;
    mm->rank = rank;
    mm->elem = elem;
    mm->got = got;
    mm->expected = want;
    mm->tolerance = tol;
    snprintf(mm->msg, sizeof mm->msg,
             "rank %d element %zu (%s): got %.9g, expected %.9g (tolerance %.3g; %s)", rank, elem,
             dtype_name(t), got, want, tol, what);
}

/* Reduced element `e` over all ranks' inputs (element index into each input) vs got. */
static bool check_reduced(int nranks, mscclrt_dtype t, mscclrt_redop op,
                          const void *const *inputs, size_t e, const void *out, size_t oe,
                          int rank, CheckMismatch *mm) {
    if (!dtype_is_float(t)) {
        uint64_t acc = dtype_load_int(t, inputs[0], e);
        for (int r = 1; r < nranks; r++) acc = dtype_int_op(t, op, acc, dtype_load_int(t, inputs[r], e));
        if (op == MSCCLRT_AVG) acc = dtype_int_div(t, acc, nranks);
        unsigned char want[8], got[8];
        dtype_store_int(t, want, 0, acc);
        size_t es = dtype_size(t);
        memcpy(got, (const unsigned char *)out + oe * es, es);
        if (memcmp(want, got, es) == 0) return true;
        mismatch(mm, rank, oe, dtype_load(t, got, 0), dtype_load(t, want, 0), 0, t,
                 "exact integer reference, wrapping");
        return false;
    }
    double u, tiny, ref = dtype_load(t, inputs[0], e), mag = fabs(ref);
    for (int r = 1; r < nranks; r++) {
        double x = dtype_load(t, inputs[r], e);
        ref = dtype_double_op(op, ref, x);
        mag = op == MSCCLRT_PROD ? fabs(ref) : mag + fabs(x);
    }
    float_limits(t, &u, &tiny);
    double tol;
    switch (op) {
    case MSCCLRT_MIN: case MSCCLRT_MAX: tol = 0; break;
    case MSCCLRT_AVG: ref /= nranks; tol = (nranks + 2) * u * mag / nranks + u * fabs(ref); break;
    default: tol = (nranks + 1) * u * mag; break;
    }
    tol += nranks * tiny;
    double got = dtype_load(t, out, oe);
    if (!isnan(got) && fabs(got - ref) <= tol) return true;
    mismatch(mm, rank, oe, got, ref, tol, t, "float64 reference");
    return false;
}

static bool check_copy(const void *want, const void *got, size_t n, mscclrt_dtype t, int rank,
                       size_t first_elem, const char *what, CheckMismatch *mm) {
    size_t es = dtype_size(t);
    if (memcmp(want, got, n * es) == 0) return true;
    for (size_t k = 0; k < n; k++)
        if (memcmp((const char *)want + k * es, (const char *)got + k * es, es) != 0) {
            mismatch(mm, rank, first_elem + k, dtype_load(t, got, k), dtype_load(t, want, k), 0, t,
                     what);
            return false;
        }
    return false;
}

/* Elements [first, first + n) of every rank's input, n at most `blk`: a block each. */
static bool read_slices(CheckInputFn in, void *ctx, int nranks, size_t first, size_t n,
                        const void **slices) {
    for (int q = 0; q < nranks; q++)
        if (!(slices[q] = in(ctx, q, first, n))) return false;
    return true;
}

/* Input source of check_collective: every rank's whole input is in memory. */
typedef struct { const void *const *inputs; size_t es; } MemInputs;

static const void *mem_input(void *ctx, int rank, size_t first, size_t n) {
    const MemInputs *m = ctx;
    (void)n;
    return (const char *)m->inputs[rank] + first * m->es;
}

static bool no_input(int rank, CheckMismatch *mm) {
    if (mm) {
        memset(mm, 0, sizeof *mm);
        mm->rank = -1;
        snprintf(mm->msg, sizeof mm->msg, "rank %d: cannot check: the reference input is not "
                 "available (out of memory?)", rank);
    }
    return false;
}

/* The element-to-element map of a collective's postcondition, seen from one rank's output:
 * output elements [0, span) are checked in segments, each taken from one source: one rank's
 * input (copies) or the same elements of every rank's input (reductions). The rooted reduce
 * and gather (root 0) check the root's output only: the others' span is 0. */
typedef struct {
    PlanCollective coll;
    int nranks, rank;
    size_t nin, nout, span;
} CheckMap;

static CheckMap check_map(PlanCollective coll, int nranks, int rank, size_t nin, size_t nout) {
    CheckMap m = {coll, nranks, rank, nin, nout, 0};
    switch (coll) {
    case PLAN_COLL_ALLREDUCE: m.span = nout < nin ? nout : nin; break;
    case PLAN_COLL_REDUCE: m.span = rank != 0 ? 0 : nout < nin ? nout : nin; break;
    case PLAN_COLL_REDUCESCATTER: m.span = nout; break;
    case PLAN_COLL_SCATTER: m.span = nout < nin / (size_t)nranks ? nout : nin / (size_t)nranks; break;
    case PLAN_COLL_ALLGATHER: m.span = (size_t)nranks * nin; break;
    case PLAN_COLL_GATHER: m.span = rank != 0 ? 0 : (size_t)nranks * nin; break;
    case PLAN_COLL_ALLTOALL: m.span = (size_t)nranks * (nin / (size_t)nranks); break;
    default: m.span = nout < nin ? nout : nin; break;          /* broadcast, sendrecv */
    }
    return m;
}

/* Output element o: the source rank (-1: every rank), the first source element, the number
 * of elements left in this segment, and what the segment must hold (for messages). */
static size_t check_segment(const CheckMap *m, size_t o, int *src, size_t *first, char *what,
                            size_t what_len) {
    switch (m->coll) {
    case PLAN_COLL_ALLREDUCE:
    case PLAN_COLL_REDUCE:
    case PLAN_COLL_REDUCESCATTER:
        *src = -1;
        *first = (m->coll == PLAN_COLL_REDUCESCATTER ? (size_t)m->rank * m->nout : 0) + o;
        return m->span - o;
    case PLAN_COLL_SCATTER:
        *src = 0;
        *first = (size_t)m->rank * m->nout + o;
        snprintf(what, what_len, "scatter: must be block %d of root 0's input", m->rank);
        return m->span - o;
    case PLAN_COLL_ALLGATHER:
    case PLAN_COLL_GATHER: {
        size_t s = o / m->nin;
        *src = (int)s;
        *first = o % m->nin;
        snprintf(what, what_len, "%s: block %zu must be rank %zu's input",
                 m->coll == PLAN_COLL_GATHER ? "gather to root 0" : "allgather", s, s);
        return m->nin - *first;
    }
    case PLAN_COLL_ALLTOALL: {
        size_t part = m->nin / (size_t)m->nranks, s = o / part;
        *src = (int)s;
        *first = (size_t)m->rank * part + o % part;
        snprintf(what, what_len, "alltoall: block %zu must be block %d of rank %zu's input", s,
                 m->rank, s);
        return part - o % part;
    }
    default:
        *src = m->coll == PLAN_COLL_BROADCAST ? 0 : (m->rank - 1 + m->nranks) % m->nranks;
        *first = o;
        if (m->coll == PLAN_COLL_BROADCAST)
            snprintf(what, what_len, "broadcast: must be root 0's input");
        else
            snprintf(what, what_len, "sendrecv: must be rank %d's input", *src);
        return m->span - o;
    }
}

/* Output elements [lo, hi) of one rank, read `blk` elements at a time through `in`. */
static bool check_range(const CheckMap *m, mscclrt_dtype t, mscclrt_redop op, CheckInputFn in,
                        void *ctx, size_t blk, const char *out, size_t lo, size_t hi,
                        CheckMismatch *mm) {
    size_t es = dtype_size(t);
    const void **slices = malloc((size_t)m->nranks * sizeof *slices);
    if (!slices) return no_input(m->rank, mm);
    bool ok = true;
    char what[96] = "";
    for (size_t o = lo; ok && o < hi;) {
        int src;
        size_t first, left = check_segment(m, o, &src, &first, what, sizeof what);
        size_t bn = hi - o < blk ? hi - o : blk;
        if (bn > left) bn = left;
        if (src < 0) {
            if (!read_slices(in, ctx, m->nranks, first, bn, slices)) {
                ok = no_input(m->rank, mm);
                break;
            }
            for (size_t k = 0; ok && k < bn; k++)
                ok = check_reduced(m->nranks, t, op, slices, k, out, o + k, m->rank, mm);
        } else {
            const void *want = in(ctx, src, first, bn);
            if (!want) {
                ok = no_input(m->rank, mm);
                break;
            }
            ok = check_copy(want, out + o * es, bn, t, m->rank, o, what, mm);
        }
        o += bn;
    }
    free(slices);
    return ok;
}

typedef struct {
    const CheckMap *m;
    mscclrt_dtype t;
    mscclrt_redop op;
    CheckInputFn in;
    void *const *ctxs;
    size_t blk, per;
    const char *out;
    bool *ok;
    CheckMismatch *mms;
} RangeJobs;

static void range_job(void *arg, int i) {
    RangeJobs *j = arg;
    size_t lo = (size_t)i * j->per, hi = lo + j->per < j->m->span ? lo + j->per : j->m->span;
    j->ok[i] = lo >= hi || check_range(j->m, j->t, j->op, j->in, j->ctxs[i], j->blk, j->out, lo,
                                       hi, &j->mms[i]);
}

bool check_rank_threads(PlanCollective coll, int nranks, int rank, mscclrt_dtype t,
                        mscclrt_redop op, CheckInputFn in, void *const *ctxs, int nthreads,
                        size_t block_bytes, size_t in_bytes, const void *output,
                        size_t out_bytes, CheckMismatch *mm) {
    size_t es = dtype_size(t);
    if (!es) {
        if (mm) snprintf(mm->msg, sizeof mm->msg, "check: bad dtype %d", (int)t);
        return false;
    }
    size_t blk = block_bytes / es ? block_bytes / es : 1;
    if (!check_collective_known(coll)) {
        if (mm) snprintf(mm->msg, sizeof mm->msg, "collective '%s' has no known postcondition",
                         plan_coll_name(coll));
        return false;
    }
    CheckMap m = check_map(coll, nranks, rank, in_bytes / es, out_bytes / es);
    if (nthreads < 1) nthreads = 1;
    /* whole blocks per thread, so every thread reads the blocks one thread would have read */
    size_t per = (m.span + (size_t)nthreads - 1) / (size_t)nthreads;
    per = (per + blk - 1) / blk * blk;
    bool *oks = calloc((size_t)nthreads, sizeof *oks);
    CheckMismatch *mms = calloc((size_t)nthreads, sizeof *mms);
    bool ok = oks && mms;
    if (ok) {
        RangeJobs j = {&m, t, op, in, ctxs, blk, per ? per : 1, output, oks, mms};
        check_run_threads(nthreads, range_job, &j);
        for (int i = 0; i < nthreads && ok; i++) /* the first failing range: the first mismatch */
            if (!oks[i]) {
                ok = false;
                if (mm) *mm = mms[i];
            }
    } else {
        no_input(rank, mm);
    }
    free(oks);
    free(mms);
    return ok;
}

bool check_rank_from(PlanCollective coll, int nranks, int rank, mscclrt_dtype t, mscclrt_redop op,
                     CheckInputFn in, void *ctx, size_t block_bytes, size_t in_bytes,
                     const void *output, size_t out_bytes, CheckMismatch *mm) {
    void *const ctxs[1] = {ctx};
    return check_rank_threads(coll, nranks, rank, t, op, in, ctxs, 1, block_bytes, in_bytes,
                              output, out_bytes, mm);
}

bool check_collective(PlanCollective coll, int nranks, mscclrt_dtype t, mscclrt_redop op,
                      const void *const *inputs, size_t in_bytes, const void *const *outputs,
                      size_t out_bytes, CheckMismatch *mm) {
    MemInputs m = {inputs, dtype_size(t)};
    if (!check_collective_known(coll)) {
        if (mm) snprintf(mm->msg, sizeof mm->msg, "collective '%s' has no known postcondition",
                         plan_coll_name(coll));
        return false;
    }
    size_t es = dtype_size(t);
    void *ctxs[MAX_CHECK_THREADS];
    for (int r = 0; r < nranks; r++) {
        /* a bad dtype (es 0) is reported by check_rank_threads */
        size_t span = es ? check_map(coll, nranks, r, in_bytes / es, out_bytes / es).span : 0;
        int nt;
        if (check_threads(span, &nt) != MSCCLRT_SUCCESS) {
            if (mm) {
                memset(mm, 0, sizeof *mm);
                mm->rank = -1;
                snprintf(mm->msg, sizeof mm->msg, "%s", mscclrt_last_error());
            }
            return false;
        }
        for (int i = 0; i < nt; i++) ctxs[i] = &m;
        if (!check_rank_threads(coll, nranks, r, t, op, mem_input, ctxs, nt, CHECK_BLOCK_BYTES,
                                in_bytes, outputs[r], out_bytes, mm))
            return false;
    }
    return true;
}

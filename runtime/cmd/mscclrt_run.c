/*
 * mscclrt_run.c - mscclrt-run: runs one MSCCL++ execution plan on a backend for a message
 * size, data type and operator, optionally checks the collective's postcondition against a
 * float64 reference (--check) and saves every rank's input and output (--save).
 * Backends are rows of a table; a backend this build lacks is a clear error.
 */
#include "check/check.h"
#include "mscclrt.h"
#include "plan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *usage_text =
    "usage: mscclrt-run PLAN.json [--ranks N] [--size BYTES] [--dtype T] [--op OP]\n"
    "                   [--backend cpu|gpu] [--iters K] [--seed S] [--check] [--save DIR]\n"
    "                   [--inplace|--outofplace] [--packet ll16|ll8]\n";

/* ---- backends ----------------------------------------------------------------------------- */
typedef struct {
    const char *name;
    const char *unavailable;            /* non-NULL: why this build cannot run it */
    mscclrt_result (*open)(void **state, int nranks);
    mscclrt_result (*exec)(void *state, const mscclrt_plan *plan, void *const *send,
                           void *const *recv, size_t in, size_t out, mscclrt_dtype t,
                           mscclrt_redop op, mscclrt_packet pk);
    void (*close)(void *state);
} Backend;

static mscclrt_result cpu_open(void **state, int nranks) {
    return mscclrt_cpu_comm_create((mscclrt_cpu_comm **)state, nranks);
}

static mscclrt_result cpu_exec(void *state, const mscclrt_plan *plan, void *const *send,
                               void *const *recv, size_t in, size_t out, mscclrt_dtype t,
                               mscclrt_redop op, mscclrt_packet pk) {
    return mscclrt_cpu_execute(state, plan, send, recv, in, out, t, op, pk);
}

static void cpu_close(void *state) {
    mscclrt_cpu_comm_destroy(state);
}

static const Backend backends[] = {
    {"cpu", NULL, cpu_open, cpu_exec, cpu_close},
    /* the GPU backend runs through mscclrt_gpu_check_plan (device buffers), see run_gpu() */
    {"gpu", NULL, NULL, NULL, NULL},
};

static const Backend *backend_find(const char *name) {
    for (size_t i = 0; i < sizeof backends / sizeof *backends; i++)
        if (strcmp(backends[i].name, name) == 0) return &backends[i];
    return NULL;
}

/* ---- options ------------------------------------------------------------------------------- */
typedef struct {
    const char *plan, *dtype, *op, *backend, *save, *packet;
    int ranks;                          /* 0: the plan's */
    unsigned long long size;            /* 0: the plan's smallest legal size */
    long iters;
    unsigned long long seed;
    bool check;
    int inplace;                        /* -1: the plan's "inplace" */
} Opts;

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "mscclrt-run: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage_text);
    return 2;
}

static bool parse_u64(const char *s, unsigned long long *out, bool suffixes) {
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-') return false;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno) return false;
    unsigned long long mul = 1;
    if (suffixes && *end) {
        switch (*end) {
        case 'k': case 'K': mul = 1ull << 10; break;
        case 'm': case 'M': mul = 1ull << 20; break;
        case 'g': case 'G': mul = 1ull << 30; break;
        default: return false;
        }
        end++;
    }
    if (*end || (mul > 1 && v > ~0ull / mul)) return false;
    *out = v * mul;
    return true;
}

static int parse_opts(int argc, char **argv, Opts *o) {
    memset(o, 0, sizeof *o);
    o->dtype = "float32";
    o->op = "sum";
    o->backend = "cpu";
    o->packet = "ll16";
    o->iters = 1;
    o->seed = 1;
    o->inplace = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned long long x;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage_text, stdout);
            exit(0);
        } else if (strcmp(a, "--check") == 0) {
            o->check = true;
        } else if (strcmp(a, "--inplace") == 0) {
            o->inplace = 1;
        } else if (strcmp(a, "--outofplace") == 0) {
            o->inplace = 0;
        } else if (a[0] == '-' && a[1] == '-') {
            if (!v) return usage_error("option %s needs a value", a);
            i++;
            if (strcmp(a, "--ranks") == 0) {
                if (!parse_u64(v, &x, false) || x < 1 || x > 4096)
                    return usage_error("--ranks '%s': expected a rank count in [1, 4096]", v);
                o->ranks = (int)x;
            } else if (strcmp(a, "--size") == 0) {
                if (!parse_u64(v, &o->size, true) || o->size == 0)
                    return usage_error("--size '%s': expected a positive byte count (K, M, G "
                                       "suffixes allowed)", v);
            } else if (strcmp(a, "--iters") == 0) {
                if (!parse_u64(v, &x, false) || x < 1 || x > 1000000)
                    return usage_error("--iters '%s': expected a count in [1, 1000000]", v);
                o->iters = (long)x;
            } else if (strcmp(a, "--seed") == 0) {
                if (!parse_u64(v, &o->seed, false))
                    return usage_error("--seed '%s': expected a non-negative integer", v);
            } else if (strcmp(a, "--dtype") == 0) {
                o->dtype = v;
            } else if (strcmp(a, "--op") == 0) {
                o->op = v;
            } else if (strcmp(a, "--backend") == 0) {
                o->backend = v;
            } else if (strcmp(a, "--save") == 0) {
                o->save = v;
            } else if (strcmp(a, "--packet") == 0) {
                o->packet = v;
            } else {
                return usage_error("unknown option %s", a);
            }
        } else if (!o->plan) {
            o->plan = a;
        } else {
            return usage_error("unexpected argument '%s' (one plan file only)", a);
        }
    }
    if (!o->plan) return usage_error("%s", "no plan file given");
    return 0;
}

/* ---- output files --------------------------------------------------------------------------- */
static bool save_file(const char *dir, int rank, const char *kind, const void *data, size_t n) {
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/rank%d.%s.bin", dir, rank, kind);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        fprintf(stderr, "mscclrt-run: cannot write %s: %s\n", tmp, strerror(errno));
        return false;
    }
    bool ok = fwrite(data, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "mscclrt-run: cannot write %s: %s\n", path, strerror(errno));
        remove(tmp);
        return false;
    }
    return true;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail_api(const char *what);

/* --backend gpu: one process drives one GPU per rank (devices 0..N-1); inputs are made on the
 * host from the seed, copied to device buffers, run `iters` times back to back plus once more
 * under CUDA-graph replay, and checked against the float64 reference on every iteration. */
static int run_gpu(const mscclrt_plan *plan, int n, size_t bytes, mscclrt_dtype dt,
                   mscclrt_redop op, mscclrt_packet pk, bool inplace, const Opts *o) {
    if (o->save) {
        fprintf(stderr, "mscclrt-run: --save is available with --backend cpu only\n");
        return 1;
    }
    mscclrt_comm **comms = calloc((size_t)n, sizeof *comms);
    if (!comms) return fail_api("out of memory");
    int rc = 1;
    if (mscclrt_comm_init_all(comms, n, NULL) != MSCCLRT_SUCCESS) {
        rc = fail_api("--backend gpu: cannot create one communicator per GPU");
        goto out;
    }
    mscclrt_gpu_check chk = {.bytes = bytes, .dtype = dt, .op = op, .packet = pk,
                             .inplace = inplace, .iters = (int)o->iters, .graph_iters = 1,
                             .seed = o->seed};
    double usec = 0;
    if (mscclrt_gpu_check_plan(comms, n, plan, &chk, &usec) != MSCCLRT_SUCCESS) {
        rc = fail_api(o->check ? "--backend gpu: check failed" : "--backend gpu");
        goto out;
    }
    printf("%d ranks on %d GPUs, %zu bytes, %s %s, %s, %s: %ld iteration%s + 1 graph replay, "
           "%.2f us per call, check passed\n", n, n, bytes, mscclrt_dtype_name(dt),
           mscclrt_redop_name(op), inplace ? "in-place" : "out-of-place",
           pk == MSCCLRT_LL8 ? "LL8" : "LL16", o->iters, o->iters == 1 ? "" : "s", usec);
    rc = 0;
out:
    for (int r = 0; r < n; r++) mscclrt_comm_destroy(comms[r]);
    free(comms);
    return rc;
}

static int fail_api(const char *what) {
    fprintf(stderr, "mscclrt-run: %s: %s\n", what, mscclrt_last_error());
    return 1;
}

int main(int argc, char **argv) {
    Opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc) return rc;
    mscclrt_dtype dt;
    mscclrt_redop op;
    mscclrt_packet pk;
    if (mscclrt_dtype_parse(o.dtype, &dt) != MSCCLRT_SUCCESS)
        return usage_error("--dtype '%s': expected float16, bfloat16, float32, float64, int8, "
                           "uint8, int32, uint32, int64, uint64, fp8_e4m3 or fp8_e5m2", o.dtype);
    if (mscclrt_redop_parse(o.op, &op) != MSCCLRT_SUCCESS)
        return usage_error("--op '%s': expected sum, prod, max, min or avg", o.op);
    if (strcmp(o.packet, "ll16") == 0) pk = MSCCLRT_LL16;
    else if (strcmp(o.packet, "ll8") == 0) pk = MSCCLRT_LL8;
    else return usage_error("--packet '%s': expected ll16 or ll8", o.packet);
    const Backend *be = backend_find(o.backend);
    if (!be) return usage_error("--backend '%s': expected cpu or gpu", o.backend);
    if (be->unavailable) {
        fprintf(stderr, "mscclrt-run: %s\n", be->unavailable);
        return 1;
    }

    mscclrt_plan *plan = NULL;
    if (mscclrt_plan_load(&plan, o.plan) != MSCCLRT_SUCCESS) return fail_api("cannot load plan");
    mscclrt_plan_info info;
    if (mscclrt_plan_get_info(plan, &info) != MSCCLRT_SUCCESS) {
        mscclrt_plan_free(plan);
        return fail_api("plan info");
    }
    int n = info.nranks;
    PlanCollective coll = PLAN_COLL_CUSTOM;
    plan_coll_from_name(info.collective, &coll);
    size_t bytes = (size_t)o.size, in = 0, out = 0, es = mscclrt_dtype_size(dt);
    int result = 1;
    void *state = NULL;
    unsigned char **bufs = NULL, **sbufs = NULL, **inputs = NULL;
    void **send = NULL, **recv = NULL;
    if (o.ranks && o.ranks != n) {
        fprintf(stderr, "mscclrt-run: --ranks %d, but plan '%s' is for %d ranks\n", o.ranks,
                info.name, n);
        goto out;
    }
    if (!bytes && mscclrt_plan_min_bytes(plan, &bytes) != MSCCLRT_SUCCESS) {
        fail_api("no legal message size");
        goto out;
    }
    if (mscclrt_plan_call_sizes(plan, bytes, &in, &out) != MSCCLRT_SUCCESS) {
        fail_api("--size");
        goto out;
    }
    if (in % es || out % es) {
        fprintf(stderr, "mscclrt-run: --size %zu: per-rank sizes %zu/%zu are not whole %s "
                "elements\n", bytes, in, out, mscclrt_dtype_name(dt));
        goto out;
    }
    if (o.check && !check_collective_known(coll)) {
        fprintf(stderr, "mscclrt-run: --check: collective '%s' of plan '%s' has no known "
                "postcondition\n", info.collective, info.name);
        goto out;
    }
    bool inplace = o.inplace < 0 ? info.inplace != 0 : o.inplace != 0;
    if (strcmp(be->name, "gpu") == 0) {
        result = run_gpu(plan, n, bytes, dt, op, pk, inplace, &o);
        goto out;
    }

    /* buffers: spec §3.7 layouts for in-place calls */
    bufs = calloc((size_t)n, sizeof *bufs);
    sbufs = calloc((size_t)n, sizeof *sbufs);
    inputs = calloc((size_t)n, sizeof *inputs);
    send = calloc((size_t)n, sizeof *send);
    recv = calloc((size_t)n, sizeof *recv);
    if (!bufs || !sbufs || !inputs || !send || !recv) goto oom;
    for (int r = 0; r < n; r++) {
        size_t big = in > out ? in : out;
        inputs[r] = malloc(in ? in : 1);
        if (!inputs[r]) goto oom;
        if (!inplace) {
            bufs[r] = malloc(out ? out : 1);
            sbufs[r] = malloc(in ? in : 1);
            if (!bufs[r] || !sbufs[r]) goto oom;
            send[r] = sbufs[r];
            recv[r] = bufs[r];
        } else {
            bufs[r] = malloc(big ? big : 1);
            if (!bufs[r]) goto oom;
            if (coll == PLAN_COLL_ALLGATHER) {
                recv[r] = bufs[r];
                send[r] = bufs[r] + (size_t)r * in;
            } else if (coll == PLAN_COLL_REDUCESCATTER) {
                send[r] = bufs[r];
                recv[r] = bufs[r] + (size_t)r * out;
            } else {
                send[r] = recv[r] = bufs[r];
            }
        }
    }
    if (be->open(&state, n) != MSCCLRT_SUCCESS) {
        fail_api("backend");
        goto out;
    }
    double t0 = now_s(), busy = 0;
    for (long it = 0; it < o.iters; it++) {
        for (int r = 0; r < n; r++) {
            memset(recv[r], 0xa5, out);   /* outputs the plan forgets to write show up */
            check_fill(dt, op, send[r], in / es, o.seed + (unsigned long long)it, r);
            memcpy(inputs[r], send[r], in);
        }
        double t1 = now_s();
        if (be->exec(state, plan, send, recv, in, out, dt, op, pk) != MSCCLRT_SUCCESS) {
            fprintf(stderr, "mscclrt-run: iteration %ld: %s\n", it, mscclrt_last_error());
            goto out;
        }
        busy += now_s() - t1;
        if (o.check) {
            CheckMismatch mm;
            if (!check_collective(coll, n, dt, op, (const void *const *)inputs, in,
                                  (const void *const *)recv, out, &mm)) {
                fprintf(stderr, "mscclrt-run: check failed (plan '%s', %s, %zu bytes, %s %s, %s, "
                        "iteration %ld): %s\n", info.name, info.collective, bytes,
                        mscclrt_dtype_name(dt), mscclrt_redop_name(op),
                        inplace ? "in-place" : "out-of-place", it, mm.msg);
                goto out;
            }
        }
    }
    (void)t0;
    if (o.save) {
        if (mkdir(o.save, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "mscclrt-run: cannot create %s: %s\n", o.save, strerror(errno));
            goto out;
        }
        for (int r = 0; r < n; r++)
            if (!save_file(o.save, r, "in", inputs[r], in) ||
                !save_file(o.save, r, "out", recv[r], out))
                goto out;
    }
    printf("%s: %s, %d ranks, %zu bytes (%zu in, %zu out per rank), %s %s, %s, %s, backend %s: "
           "%ld iteration%s, %.3f ms per call%s\n", info.name, info.collective, n, bytes, in, out,
           mscclrt_dtype_name(dt), mscclrt_redop_name(op), inplace ? "in-place" : "out-of-place",
           pk == MSCCLRT_LL8 ? "LL8" : "LL16", be->name, o.iters, o.iters == 1 ? "" : "s",
           busy * 1e3 / (double)o.iters, o.check ? ", check passed" : "");
    result = 0;
    goto out;
oom:
    fprintf(stderr, "mscclrt-run: out of memory for %d ranks x %zu bytes\n", n, in > out ? in : out);
out:
    if (state) be->close(state);
    for (int r = 0; r < n; r++) {
        if (bufs) free(bufs[r]);
        if (sbufs) free(sbufs[r]);
        if (inputs) free(inputs[r]);
    }
    free(bufs);
    free(sbufs);
    free(inputs);
    free(send);
    free(recv);
    mscclrt_plan_free(plan);
    return result;
}

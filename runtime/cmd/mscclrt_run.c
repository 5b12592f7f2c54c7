/*
 * mscclrt_run.c - mscclrt-run: runs one MSCCL++ execution plan on a backend for a message
 * size, data type and operator, optionally checks the collective's postcondition against a
 * float64 reference (--check) and saves every rank's input and output (--save).
 * Backends are rows of a table; a backend this build lacks is a clear error. The GPU backend
 * runs all ranks in this process (--launch single), forks one process per rank (procs) or is
 * one rank of a group a launcher started (env: torchrun, mpirun, srun).
 */
#include "check/check.h"
#include "core/api_plan.h"
#include "core/numarg.h"
#include "mscclc.h"
#include "mscclrt.h"
#include "plan.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUN_VERSION "0.1.0"

static const char *usage_text =
    "usage: mscclrt-run PLAN.json [--ranks N] [--size BYTES] [--dtype T] [--op OP]\n"
    "                   [--backend cpu|gpu] [--iters K] [--seed S] [--check [--no-static-check]]\n"
    "                   [--save DIR] [--inplace|--outofplace] [--packet ll16|ll8]\n"
    "                   [--launch single|procs|env] [--timeout SECONDS] [--alloc device|cumem]\n"
    "                   [--gpus K] [--schedules K]\n"
    "       mscclrt-run --version | --help\n";

/* Every option, with what --help says of it (mscclrt-run(1) OPTIONS has the same list; the
 * man-page check compares them). `arg` is NULL for a flag. */
static const struct { const char *name, *arg, *help; } options[] = {
    {"--ranks", "N", "the plan's rank count, as a check (default: the plan's)"},
    {"--size", "BYTES", "message size (K, M, G suffixes; 0 runs an empty call; default: the "
                        "plan's smallest)"},
    {"--dtype", "T", "float16, bfloat16, float32 (default), float64, int8, uint8, int32, uint32, "
                     "int64, uint64, fp8_e4m3, fp8_e5m2"},
    {"--op", "OP", "sum (default), prod, max, min, avg; for collectives that reduce"},
    {"--backend", "cpu|gpu", "the CPU reference backend (default) or the GPUs"},
    {"--iters", "K", "calls to make (default 1)"},
    {"--seed", "S", "seed of the input pattern (default 1)"},
    {"--check", NULL, "check every rank's output against a float64 reference, after the "
                      "static checks of mscclc --check (races, deadlocks, entry handshakes)"},
    {"--no-static-check", NULL, "with --check: skip the static checks (a plan known to fail them)"},
    {"--save", "DIR", "write DIR/rankR.in.bin and rankR.out.bin (cpu backend)"},
    {"--inplace", NULL, "run in place (default: the plan's \"inplace\")"},
    {"--outofplace", NULL, "run out of place"},
    {"--packet", "ll16|ll8", "LL packet format of LL plans (default ll16)"},
    {"--launch", "single|procs|env", "gpu: ranks in this process, one process per rank, or one "
                                     "rank of a launcher's group"},
    {"--timeout", "SECONDS", "gpu, --launch procs: deadline (default 600)"},
    {"--alloc", "device|cumem", "gpu: buffers from cuMemAlloc (default) or cuMem"},
    {"--gpus", "K", "gpu: put rank r on device r mod K"},
    {"--schedules", "K", "cpu: K fresh groups on the serial scheduler, seeds S..S+K-1 (S: "
                         "--seed); a failing one is named with the command that replays it"},
    {"--version", NULL, "print the version"},
    {"--help", NULL, "print this help"},
};

static void help(void) {
    fputs(usage_text, stdout);
    fputs("\nRuns an execution plan and, with --check, checks the collective's result.\n\n", stdout);
    for (size_t i = 0; i < sizeof options / sizeof *options; i++) {
        char lhs[64];
        snprintf(lhs, sizeof lhs, "%s%s%s", options[i].name, options[i].arg ? " " : "",
                 options[i].arg ? options[i].arg : "");
        printf("  %-26s %s\n", lhs, options[i].help);
    }
}

/* The option table's entry of `a`, or -1. */
static int option_index(const char *a) {
    for (size_t i = 0; i < sizeof options / sizeof *options; i++)
        if (strcmp(a, options[i].name) == 0) return (int)i;
    return -1;
}

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
    const char *launch;                 /* NULL: env under a launcher, else procs */
    long timeout;                       /* --launch procs: deadline in seconds; 0: default */
    const char *alloc;                  /* --backend gpu buffers: NULL/"device" or "cumem" */
    int gpus;                           /* --gpus: ranks on devices r mod gpus; 0: device r */
    int ranks;                          /* 0: the plan's */
    unsigned long long size;            /* with size_set; else the plan's smallest legal size */
    bool size_set;
    long iters;
    unsigned long long seed;
    long schedules;                     /* --schedules: serial CPU schedules to run; 0: threads */
    bool check;
    bool no_static;                     /* --no-static-check: --check without mscclc's checks */
    int inplace;                        /* -1: the plan's "inplace" */
} Opts;

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "mscclrt-run: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage_text);
    return 2;
}

/* A number option's value (numarg.c: decimal only, overflow and range refused). */
static bool num_opt(const char *opt, const char *v, const char *what, unsigned long long lo,
                    unsigned long long hi, bool suffixes, unsigned long long *out, int *rc) {
    const NumArg spec = {what, lo, hi, suffixes};
    char msg[NUMARG_MSG];
    if (numarg_parse(&spec, opt, v, out, msg)) return true;
    *rc = usage_error("%s", msg);
    return false;
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
        int rc = 0;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            help();
            exit(0);
        } else if (strcmp(a, "--version") == 0) {
            puts("mscclrt-run " RUN_VERSION);
            exit(0);
        } else if (strcmp(a, "--check") == 0) {
            o->check = true;
        } else if (strcmp(a, "--no-static-check") == 0) {
            o->no_static = true;
        } else if (strcmp(a, "--inplace") == 0) {
            o->inplace = 1;
        } else if (strcmp(a, "--outofplace") == 0) {
            o->inplace = 0;
        } else if (a[0] == '-' && a[1]) {
            int k = option_index(a);
            if (k < 0) return usage_error("unknown option %s", a);
            if (!v) return usage_error("option %s needs a value", a);
            i++;
            if (strcmp(a, "--ranks") == 0) {
                if (!num_opt(a, v, "a rank count", 1, 4096, false, &x, &rc)) return rc;
                o->ranks = (int)x;
            } else if (strcmp(a, "--size") == 0) {
                if (!num_opt(a, v, "a byte count", 0, ULLONG_MAX, true, &o->size, &rc))
                    return rc;
                o->size_set = true;
            } else if (strcmp(a, "--iters") == 0) {
                if (!num_opt(a, v, "a count", 1, 1000000, false, &x, &rc)) return rc;
                o->iters = (long)x;
            } else if (strcmp(a, "--seed") == 0) {
                if (!num_opt(a, v, "a non-negative integer", 0, ULLONG_MAX, false, &o->seed, &rc))
                    return rc;
            } else if (strcmp(a, "--schedules") == 0) {
                if (!num_opt(a, v, "a count", 1, 1000000, false, &x, &rc)) return rc;
                o->schedules = (long)x;
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
            } else if (strcmp(a, "--launch") == 0) {
                if (strcmp(v, "single") != 0 && strcmp(v, "procs") != 0 && strcmp(v, "env") != 0)
                    return usage_error("--launch '%s': expected single, procs or env", v);
                o->launch = v;
            } else if (strcmp(a, "--gpus") == 0) {
                if (!num_opt(a, v, "a GPU count", 1, 1024, false, &x, &rc)) return rc;
                o->gpus = (int)x;
            } else if (strcmp(a, "--alloc") == 0) {
                if (strcmp(v, "device") != 0 && strcmp(v, "cumem") != 0)
                    return usage_error("--alloc '%s': expected device or cumem", v);
                o->alloc = v;
            } else if (strcmp(a, "--timeout") == 0) {
                if (!num_opt(a, v, "seconds", 1, 86400, false, &x, &rc)) return rc;
                o->timeout = (long)x;
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
    if (o->no_static && !o->check) return usage_error("%s: only with --check", "--no-static-check");
    return 0;
}

/* ---- static checks ------------------------------------------------------------------------- */
/* --check: mscclc --check's static checks on the loaded plan, before it runs. A run tries a few
 * schedules; a race or a missing entry handshake that they happen to hide must still keep the
 * run from printing "check passed". Diagnostics name the ops by rank, thread block and index. */
static bool static_check(const mscclrt_plan *plan, const char *path) {
    int errors = 0;
    if (mscclc_check_plan(api_plan_model(plan), path, stderr, 0, &errors) < 0) {
        fprintf(stderr, "mscclrt-run: --check: out of memory in the static checks of %s\n", path);
        return false;
    }
    if (errors == 0) return true;
    fprintf(stderr, "mscclrt-run: --check: the static checks (those of mscclc --check) found %d "
            "error%s in %s, so it was not run; --no-static-check runs it anyway\n", errors,
            errors == 1 ? "" : "s", path);
    return false;
}

/* ---- output files --------------------------------------------------------------------------- */
/* Writes all of buf (retrying after signals); false on an error, with errno set. */
static bool write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len) {
        ssize_t k = write(fd, p, len);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return false;
        if (k == 0) {
            errno = EIO;
            return false;
        }
        p += k;
        len -= (size_t)k;
    }
    return true;
}

/* Reads len bytes into buf (retrying after signals); false at an error or end of file first. */
static bool read_all(int fd, void *buf, size_t len) {
    char *p = buf;
    while (len) {
        ssize_t k = read(fd, p, len);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        len -= (size_t)k;
    }
    return true;
}

/* Writes DIR/rankR.KIND.bin: into a new file of an unpredictable name in DIR (mkostemp creates it
 * with O_EXCL, so nothing planted there is followed or overwritten), then renamed to the final
 * name (rename replaces a symlink found there; it does not follow it). So no partial file is
 * left and nothing outside DIR is written. mode: the new file's permissions (0666 & ~umask). */
static bool save_file(const char *dir, int rank, const char *kind, const void *data, size_t n,
                      mode_t mode) {
    char path[4096], tmp[4096];
    int lp = snprintf(path, sizeof path, "%s/rank%d.%s.bin", dir, rank, kind);
    int lt = snprintf(tmp, sizeof tmp, "%s/.rank%d.%s.bin.XXXXXX", dir, rank, kind);
    if (lp < 0 || lt < 0 || (size_t)lp >= sizeof path || (size_t)lt >= sizeof tmp) {
        fprintf(stderr, "mscclrt-run: --save %s: path too long\n", dir);
        return false;
    }
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "mscclrt-run: cannot create a file in %s: %s\n", dir, strerror(errno));
        return false;
    }
    const char *what = NULL;            /* the step that failed; err: its errno */
    int err = 0;
    if (fchmod(fd, mode) != 0) what = "set the permissions of";
    else if (!write_all(fd, data, n)) what = "write";
    if (what) err = errno;
    if (close(fd) != 0 && !what) {
        what = "write";
        err = errno;
    }
    if (!what && rename(tmp, path) != 0) {
        what = "rename a file to";
        err = errno;
    }
    if (what) {
        fprintf(stderr, "mscclrt-run: cannot %s %s: %s\n", what, path, strerror(err));
        unlink(tmp);
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

/* "float32 sum, in-place, LL16": the data type, the operator where the collective reduces (or
 * its postcondition is unknown), the placement, and the protocol the plan uses. */
static void describe_call(char *buf, size_t len, PlanCollective coll, mscclrt_dtype dt,
                          mscclrt_redop op, bool inplace, bool ll, mscclrt_packet pk) {
    bool reduces = plan_coll_reduces(coll) || !check_collective_known(coll);
    snprintf(buf, len, "%s%s%s, %s, %s", mscclrt_dtype_name(dt), reduces ? " " : "",
             reduces ? mscclrt_redop_name(op) : "", inplace ? "in-place" : "out-of-place",
             !ll ? "Simple" : pk == MSCCLRT_LL8 ? "LL8" : "LL16");
}

/* Prints the command line that reruns schedule `seed` alone: argv with --schedules and --seed
 * replaced, each word shell-quoted where needed. */
static void print_replay(int argc, char **argv, unsigned long long seed) {
    fputs("mscclrt-run: replay it with:", stderr);
    for (int i = 0; i < argc; i++) {
        const char *a = i == 0 ? "mscclrt-run" : argv[i];
        if (i > 0 && (strcmp(a, "--schedules") == 0 || strcmp(a, "--seed") == 0)) {
            i++;
            continue;
        }
        bool plain = *a != 0;
        for (const char *c = a; *c; c++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%",
                        *c))
                plain = false;
        fputc(' ', stderr);
        if (plain) {
            fputs(a, stderr);
            continue;
        }
        fputc('\'', stderr);
        for (const char *c = a; *c; c++)
            if (*c == '\'') fputs("'\\''", stderr);
            else fputc(*c, stderr);
        fputc('\'', stderr);
    }
    fprintf(stderr, " --schedules 1 --seed %llu\n", seed);
}

/* ---- --backend gpu -------------------------------------------------------------------------- */
typedef struct {
    const mscclrt_plan *plan;
    const char *name;                   /* the plan's, escaped for printing */
    int n;
    size_t bytes;
    mscclrt_gpu_check chk;
    int gpus;                           /* ranks on devices r mod gpus; 0: device r */
    PlanCollective coll;
    bool ll;                            /* the plan's protocol is LL */
} GpuRun;

static int gpu_of(const GpuRun *g, int r) { return g->gpus ? r % g->gpus : r; }

static void gpu_summary(const GpuRun *g, const Opts *o, const char *how, double usec) {
    char call[160];
    describe_call(call, sizeof call, g->coll, g->chk.dtype, g->chk.op, g->chk.inplace, g->ll,
                  g->chk.packet);
    printf("%d ranks on %d GPUs%s, %zu bytes, %s%s: %ld iteration%s + 1 graph "
           "replay, %.2f us per call, check passed\n", g->n,
           g->gpus && g->gpus < g->n ? g->gpus : g->n, how, g->bytes, call,
           g->chk.cumem ? ", cuMem buffers" : "", o->iters, o->iters == 1 ? "" : "s", usec);
}

/* --launch single: this process drives one GPU per rank (devices 0..N-1, or r mod --gpus) through
 * mscclrt_gpu_check_plan. */
static int gpu_single(const GpuRun *g, const Opts *o) {
    mscclrt_comm **comms = calloc((size_t)g->n, sizeof *comms);
    if (!comms) return fail_api("out of memory");
    int rc = 1, n = g->n;
    double usec = 0;
    int *devs = o->gpus ? calloc((size_t)n, sizeof *devs) : NULL;
    for (int r = 0; devs && r < n; r++) devs[r] = gpu_of(g, r);
    if (o->gpus && !devs) {
        free(comms);
        return fail_api("out of memory");
    }
    if (mscclrt_comm_init_all(comms, n, devs) != MSCCLRT_SUCCESS) {
        rc = fail_api("--backend gpu: cannot create one communicator per GPU");
        goto out;
    }
    if (mscclrt_gpu_check_plan(comms, n, g->plan, &g->chk, &usec) != MSCCLRT_SUCCESS) {
        rc = fail_api(o->check ? "--backend gpu: check failed" : "--backend gpu");
        goto out;
    }
    gpu_summary(g, o, "", usec);
    rc = 0;
out:
    for (int r = 0; r < n; r++) mscclrt_comm_destroy(comms[r]);
    free(comms);
    free(devs);
    return rc;
}

/* "0-3, 5" for the ranks r with pick[r] set. */
static void rank_list(char *buf, size_t len, const bool *pick, int n) {
    size_t at = 0;
    buf[0] = 0;
    for (int r = 0; r < n; r++) {
        if (!pick[r]) continue;
        int e = r;
        while (e + 1 < n && pick[e + 1]) e++;
        int k = e == r ? snprintf(buf + at, len - at, "%s%d", at ? ", " : "", r)
                       : snprintf(buf + at, len - at, "%s%d-%d", at ? ", " : "", r, e);
        if (k < 0 || (size_t)k >= len - at) {
            snprintf(buf + (len > 4 ? len - 4 : 0), len > 4 ? 4 : len, "...");
            return;
        }
        at += (size_t)k;
        r = e;
    }
}

/* What a child of --launch procs tells the parent through its pipe before it exits. */
typedef struct {
    int32_t stage;                      /* 1: could not create its comm; 2: the check ran */
    int32_t res;                        /* mscclrt_result */
    double usec;
    char msg[2048];
} ChildReport;

#define PROCS_DEFAULT_TIMEOUT_S 600
#define PROCS_GRACE_S 10.0              /* after a rank's check failed, the others' time to end */
#define PROCS_INIT_GRACE_S 2.0          /* after a rank could not join, the others' time to fail */

/* Rank r's process: waits for the id, which comes once every rank is forked (end of file: the
 * parent could not make one, and says why), joins through it, checks, reports. */
static _Noreturn void procs_child(const GpuRun *g, int r, int idfd, int report, pid_t parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);   /* the ranks never outlive mscclrt-run */
    if (getppid() != parent) _exit(1);
    mscclrt_unique_id id;
    if (!read_all(idfd, &id, sizeof id)) _exit(1);
    close(idfd);
    ChildReport rep;
    memset(&rep, 0, sizeof rep);
    mscclrt_comm *comm = NULL;
    if (mscclrt_comm_init_rank(&comm, g->n, id, r, gpu_of(g, r)) != MSCCLRT_SUCCESS) {
        rep.stage = 1;
        rep.res = MSCCLRT_ERR_UNAVAILABLE;
        snprintf(rep.msg, sizeof rep.msg, "%s", mscclrt_last_error());
    } else {
        mscclrt_result res = mscclrt_gpu_check_rank(comm, g->plan, &g->chk, &rep.usec);
        rep.stage = 2;
        rep.res = (int32_t)res;
        if (res != MSCCLRT_SUCCESS) snprintf(rep.msg, sizeof rep.msg, "%s", mscclrt_last_error());
        if (res != MSCCLRT_ERR_TIMEOUT) mscclrt_comm_destroy(comm);  /* else a kernel still runs */
    }
    write_all(report, &rep, sizeof rep);
    close(report);
    _exit(rep.res == MSCCLRT_SUCCESS ? 0 : 1);
}

typedef struct {
    pid_t pid;
    int fd;                             /* read end of its report pipe */
    int idfd;                           /* write end of its id pipe, until the id is sent */
    bool done;
    int status;                         /* waitpid's */
    const char *killed;                 /* why we killed it, or NULL */
    ChildReport rep;
    bool have_rep;
} Child;

static void procs_kill(Child *k, int n, const char *why) {
    for (int r = 0; r < n; r++)
        if (k[r].pid > 0 && !k[r].done) {
            kill(k[r].pid, SIGKILL);
            if (!k[r].killed) k[r].killed = why;
        }
}

/* Reaps every child; after SIGKILL a process in the driver may take a moment to go. */
static void procs_reap(Child *k, int n, bool block, double give_up) {
    for (;;) {
        int left = 0;
        for (int r = 0; r < n; r++) {
            if (k[r].pid <= 0 || k[r].done) continue;
            pid_t w = waitpid(k[r].pid, &k[r].status, WNOHANG);
            if (w == k[r].pid || (w < 0 && errno == ECHILD)) {
                k[r].done = true;
                k[r].have_rep = read_all(k[r].fd, &k[r].rep, sizeof k[r].rep);
                if (k[r].have_rep) k[r].rep.msg[sizeof k[r].rep.msg - 1] = 0;
            } else {
                left++;
            }
        }
        if (!left || !block || now_s() > give_up) return;
        usleep(10000);
    }
}

/* Closes the write ends of the id pipes not closed yet (a rank waiting on one reads its end). */
static void procs_close_ids(Child *k, int n) {
    for (int r = 0; r < n; r++)
        if (k[r].idfd >= 0) {
            close(k[r].idfd);
            k[r].idfd = -1;
        }
}

/* --launch procs: one child per rank (device = rank, or rank mod --gpus), joined through a
 * unique id made here once every rank is forked and sent to each through a pipe. Making it
 * starts the rendezvous thread, and a child forked beside a thread inherits whatever locks that
 * thread held (malloc's under ASan, stdio's): no rank is forked after it. CUDA is never touched
 * in this process. */
static int gpu_procs(const GpuRun *g, const Opts *o) {
    const int n = g->n;
    double limit = o->timeout ? (double)o->timeout : PROCS_DEFAULT_TIMEOUT_S;
    Child *k = calloc((size_t)n, sizeof *k);
    if (!k) return fail_api("out of memory");
    for (int r = 0; r < n; r++) k[r].idfd = -1;
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    int rc = 1, started = 0;
    for (int r = 0; r < n; r++) {
        int rp[2], ip[2];
        if (pipe(rp) != 0) {
            fprintf(stderr, "mscclrt-run: pipe: %s\n", strerror(errno));
            break;
        }
        if (pipe(ip) != 0) {
            fprintf(stderr, "mscclrt-run: pipe: %s\n", strerror(errno));
            close(rp[0]);
            close(rp[1]);
            break;
        }
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "mscclrt-run: fork (rank %d): %s\n", r, strerror(errno));
            close(rp[0]);
            close(rp[1]);
            close(ip[0]);
            close(ip[1]);
            break;
        }
        if (pid == 0) {
            close(rp[0]);
            close(ip[1]);
            for (int q = 0; q < r; q++) {
                close(k[q].fd);
                close(k[q].idfd);
            }
            procs_child(g, r, ip[0], rp[1], parent);
        }
        close(rp[1]);
        close(ip[0]);
        k[r].pid = pid;
        k[r].fd = rp[0];
        k[r].idfd = ip[1];
        started++;
    }
    mscclrt_unique_id id;
    if (started < n || mscclrt_get_unique_id(&id) != MSCCLRT_SUCCESS) {
        if (started == n) fail_api("--backend gpu: cannot start the rendezvous of the ranks");
        procs_kill(k, n, NULL);
        procs_close_ids(k, n);
        procs_reap(k, n, true, now_s() + 10);
        goto out;
    }
    /* all forked: the ranks start. A rank already gone (its failure is reported below) closed
     * its end: EPIPE, not SIGPIPE */
    struct sigaction ign = {.sa_handler = SIG_IGN}, was;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &was);
    for (int r = 0; r < n; r++)
        if (!write_all(k[r].idfd, &id, sizeof id) && errno != EPIPE)
            fprintf(stderr, "mscclrt-run: sending rank %d the id: %s\n", r, strerror(errno));
    sigaction(SIGPIPE, &was, NULL);
    procs_close_ids(k, n);
    double t0 = now_s(), grace = 0, init_grace = 0;
    bool stop = false;
    for (;;) {
        procs_reap(k, n, false, 0);
        int left = 0;
        bool init_failed = false, failed = false;
        for (int r = 0; r < n; r++) {
            if (!k[r].done) {
                left++;
                continue;
            }
            bool ok = WIFEXITED(k[r].status) && WEXITSTATUS(k[r].status) == 0;
            if (!ok) failed = true;
            if (k[r].have_rep && k[r].rep.stage == 1) init_failed = true;
        }
        if (!left) break;
        double t = now_s();
        if (!stop && init_failed && init_grace == 0) {
            init_grace = t + PROCS_INIT_GRACE_S;   /* ranks failing alike go by themselves */
        } else if (!stop && init_grace > 0 && t > init_grace) {
            /* the group can never form: the others wait in the rendezvous in vain */
            procs_kill(k, n, "stopped: the group cannot form without the ranks that failed");
            stop = true;
        } else if (!stop && failed && grace == 0) {
            grace = t + PROCS_GRACE_S;
        } else if (!stop && grace > 0 && t > grace) {
            procs_kill(k, n, "stopped: still running 10 s after other ranks failed");
            stop = true;
        } else if (!stop && t - t0 > limit) {
            procs_kill(k, n, "did not finish within the deadline (--timeout); killed");
            stop = true;
        }
        if (stop) {
            procs_reap(k, n, true, now_s() + 10);
            break;
        }
        usleep(20000);
    }
    /* one line per distinct outcome, naming its ranks */
    char (*line)[2300] = calloc((size_t)n, sizeof *line);
    bool *pick = calloc((size_t)n, sizeof *pick), all_ok = true;
    if (!line || !pick) {
        free(line);
        free(pick);
        fail_api("out of memory");
        goto out;
    }
    for (int r = 0; r < n; r++) {
        Child *c = &k[r];
        if (c->done && WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0 && c->have_rep) continue;
        all_ok = false;
        if (!c->done)
            snprintf(line[r], sizeof line[r], "%s", "did not exit after SIGKILL");
        else if (c->killed)
            snprintf(line[r], sizeof line[r], "%s", c->killed);
        else if (c->have_rep && c->rep.stage == 1)
            snprintf(line[r], sizeof line[r], "cannot create one communicator per GPU: %s",
                     c->rep.msg);
        else if (c->have_rep)
            snprintf(line[r], sizeof line[r], "%s%s", o->check ? "check failed: " : "", c->rep.msg);
        else if (WIFSIGNALED(c->status))
            snprintf(line[r], sizeof line[r], "killed by signal %d (%s)", WTERMSIG(c->status),
                     strsignal(WTERMSIG(c->status)));
        else
            snprintf(line[r], sizeof line[r], "exited with status %d without a report",
                     WIFEXITED(c->status) ? WEXITSTATUS(c->status) : -1);
    }
    if (all_ok) {
        gpu_summary(g, o, " (one process per rank)", k[0].rep.usec);
        rc = 0;
    } else {   /* the ranks' own failures first, then those stopped because of them */
        for (int pass = 0; pass < 2; pass++) {
            for (int r = 0; r < n; r++) {
                if (!line[r][0] || (k[r].killed != NULL) != (pass == 1)) continue;
                int cnt = 0;
                for (int q = 0; q < n; q++) {
                    pick[q] = q >= r && strcmp(line[q], line[r]) == 0;
                    cnt += pick[q];
                }
                char ranks[256];
                rank_list(ranks, sizeof ranks, pick, n);
                if (cnt == n) fprintf(stderr, "mscclrt-run: --backend gpu: %s\n", line[r]);
                else fprintf(stderr, "mscclrt-run: --backend gpu: %s (rank%s %s)\n", line[r],
                             cnt == 1 ? "" : "s", ranks);
                for (int q = r + 1; q < n; q++)
                    if (pick[q]) line[q][0] = 0;
            }
        }
    }
    free(line);
    free(pick);
out:
    for (int r = 0; r < n; r++)
        if (k[r].pid > 0) close(k[r].fd);
    free(k);
    return rc;
}

/* The first set variable of names[] (torchrun's, then Open MPI's, then Slurm's). */
static const char *env_first(const char *const *names, const char **which) {
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) {
            *which = names[i];
            return v;
        }
    }
    return NULL;
}

/* Whether a launcher started this process as one rank of a group. */
static bool under_launcher(void) {
    const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE");
    const char *orr = getenv("OMPI_COMM_WORLD_RANK"), *ow = getenv("OMPI_COMM_WORLD_SIZE");
    return (r && *r && w && *w) || (orr && *orr && ow && *ow);
}

/* --launch env: this process is one rank of the group the environment describes; rank 0
 * prints the outcome. */
static int gpu_env(const GpuRun *g, const Opts *o) {
    static const char *const size_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS",
                                            NULL};
    static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", NULL};
    const char *which = NULL, *size = env_first(size_vars, &which);
    if (size) {
        char *end;
        errno = 0;
        long v = strtol(size, &end, 10);
        if (errno || *end || v != g->n) {
            fprintf(stderr, "mscclrt-run: --launch env: %s=%s, but plan '%s' is for %d ranks\n",
                    which, size, g->name, g->n);
            return 1;
        }
    }
    const char *rank_text = env_first(rank_vars, &which);
    mscclrt_comm *comm = NULL;
    if (mscclrt_comm_init_env(&comm, -1) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "mscclrt-run: --backend gpu: %s%s%scannot join the group of the "
                "environment: %s\n", rank_text ? "rank " : "", rank_text ? rank_text : "",
                rank_text ? ": " : "", mscclrt_last_error());
        return 1;
    }
    int rank = 0;
    mscclrt_comm_rank(comm, &rank);
    double usec = 0;
    mscclrt_result res = mscclrt_gpu_check_rank(comm, g->plan, &g->chk, &usec);
    if (rank == 0) {
        if (res == MSCCLRT_SUCCESS) gpu_summary(g, o, " (one process per rank)", usec);
        else fail_api(o->check ? "--backend gpu: check failed" : "--backend gpu");
    }
    if (res == MSCCLRT_ERR_TIMEOUT) {   /* a kernel may still run: leave without waiting for it */
        fflush(stdout);
        fflush(stderr);
        _exit(1);
    }
    mscclrt_comm_destroy(comm);
    return res == MSCCLRT_SUCCESS ? 0 : 1;
}

/* The launch mode: --launch, else env under a launcher, else procs. */
static const char *launch_mode(const Opts *o) {
    return o->launch ? o->launch : under_launcher() ? "env" : "procs";
}

/* --backend gpu: inputs are made from the seed, the plan runs `iters` times back to back plus
 * once more under CUDA-graph replay, and every rank's output is checked against the float64
 * reference. */
static int run_gpu(const mscclrt_plan *plan, const char *name, int n, size_t bytes,
                   mscclrt_dtype dt, mscclrt_redop op, mscclrt_packet pk, bool inplace,
                   PlanCollective coll, bool ll, const Opts *o) {
    if (o->save) {
        fprintf(stderr, "mscclrt-run: --save is available with --backend cpu only\n");
        return 1;
    }
    GpuRun g = {plan, name, n, bytes,
                {.bytes = bytes, .dtype = dt, .op = op, .packet = pk, .inplace = inplace,
                 .iters = (int)o->iters, .graph_iters = 1, .seed = o->seed,
                 .cumem = o->alloc && strcmp(o->alloc, "cumem") == 0}, o->gpus, coll, ll};
    const char *mode = launch_mode(o);
    if (strcmp(mode, "single") == 0) return gpu_single(&g, o);
    if (strcmp(mode, "env") == 0) return gpu_env(&g, o);
    return gpu_procs(&g, o);
}

static int fail_api(const char *what) {
    fprintf(stderr, "mscclrt-run: %s: %s\n", what, mscclrt_last_error());
    return 1;
}

int main(int argc, char **argv) {
    /* ranks sharing a GPU in this process each need their own hardware queues (a rank's stream
     * and its port proxy's): ask CUDA for all 32 before it starts, unless the user chose */
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
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
    if (o.schedules && strcmp(be->name, "cpu") != 0)
        return usage_error("%s: only with --backend cpu", "--schedules");
    if (o.schedules && o.seed == 0)
        return usage_error("%s: the seeds of schedules start at --seed, which must be at least 1",
                           "--schedules");
    if ((o.launch || o.timeout || o.alloc || o.gpus) && strcmp(be->name, "gpu") != 0)
        return usage_error("%s: only with --backend gpu", o.launch ? "--launch" :
                           o.timeout ? "--timeout" : o.alloc ? "--alloc" : "--gpus");
    if (o.gpus && strcmp(launch_mode(&o), "env") == 0)
        return usage_error("%s: --gpus is for --launch single and procs (under a launcher each "
                           "rank's device is its local rank)", "--launch env");
    if (o.timeout && strcmp(launch_mode(&o), "procs") != 0)
        return usage_error("--timeout: only with --launch procs (this run is --launch %s)",
                           launch_mode(&o));
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
    /* the plan's strings as printed (escaped: they come from the file) */
    char name[PLAN_ESC_MAX], coll_name[PLAN_ESC_MAX];
    plan_escape(name, sizeof name, info.name);
    plan_escape(coll_name, sizeof coll_name, info.collective);
    size_t bytes = (size_t)o.size, in = 0, out = 0, es = mscclrt_dtype_size(dt);
    int result = 1;
    void *state = NULL;
    CheckBufs b = {0};
    if (o.ranks && o.ranks != n) {
        fprintf(stderr, "mscclrt-run: --ranks %d, but plan '%s' is for %d ranks\n", o.ranks,
                name, n);
        goto out;
    }
    if (!o.size_set && mscclrt_plan_min_bytes(plan, &bytes) != MSCCLRT_SUCCESS) {
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
                "postcondition\n", coll_name, name);
        goto out;
    }
    if (o.check && !o.no_static && !static_check(plan, o.plan)) goto out;
    bool inplace = o.inplace < 0 ? info.inplace != 0 : o.inplace != 0;
    if (bytes == 0) {
        /* an empty collective, as NCCL's count 0: nothing moves, so nothing runs or is wrong */
        char call[160];
        describe_call(call, sizeof call, coll, dt, op, inplace, info.protocol_ll != 0, pk);
        printf("%s: %s, %d ranks, 0 bytes, %s, backend %s: an empty call, nothing to run%s\n",
               name, coll_name, n, call, be->name, o.check ? ", check passed" : "");
        result = 0;
        goto out;
    }
    if (strcmp(be->name, "gpu") == 0) {
        result = run_gpu(plan, name, n, bytes, dt, op, pk, inplace, coll, info.protocol_ll != 0, &o);
        goto out;
    }

    /* buffers: spec §3.7 layouts for in-place calls (check/check_bufs.c) */
    if (!check_bufs_alloc(&b, coll, n, in, out, inplace)) goto oom;
    double t0 = now_s(), busy = 0;
    long nsched = o.schedules ? o.schedules : 1;
    for (long k = 0; k < nsched; k++) {
        /* --schedules: schedule k is a fresh group on the serial scheduler with seed S+k, its
         * inputs made from that seed too, so `--schedules 1 --seed S+k` replays it exactly */
        unsigned long long seed = o.seed + (unsigned long long)k;
        if (state && o.schedules) {
            be->close(state);
            state = NULL;
        }
        if (!state) {
            if (be->open(&state, n) != MSCCLRT_SUCCESS) {
                fail_api("backend");
                goto out;
            }
            if (o.schedules && mscclrt_cpu_comm_set_seed(state, seed) != MSCCLRT_SUCCESS) {
                fail_api("backend");
                goto out;
            }
        }
        for (long it = 0; it < o.iters; it++) {
            if (check_bufs_fill(&b, dt, op, seed + (unsigned long long)it) != MSCCLRT_SUCCESS) {
                fail_api("inputs");
                goto out;
            }
            double t1 = now_s();
            if (be->exec(state, plan, b.send, b.recv, in, out, dt, op, pk) != MSCCLRT_SUCCESS) {
                fprintf(stderr, "mscclrt-run: iteration %ld: %s\n", it, mscclrt_last_error());
                goto sched_failed;
            }
            busy += now_s() - t1;
            if (o.check) {
                CheckMismatch mm;
                if (!check_collective(coll, n, dt, op, (const void *const *)b.inputs, in,
                                      (const void *const *)b.recv, out, &mm)) {
                    char call[160], why[1024] = "";
                    describe_call(call, sizeof call, coll, dt, op, inplace, info.protocol_ll != 0, pk);
                    if (mm.rank >= 0)
                        check_explain(api_plan_model(plan), inplace, mm.rank, mm.elem, es,
                                      (const unsigned char *)b.recv[mm.rank] + mm.elem * es,
                                      CHECK_FILL_BYTE, in, out, why, sizeof why);
                    fprintf(stderr, "mscclrt-run: check failed (plan '%s', %s, %zu bytes, %s, "
                            "iteration %ld): %s%s\n", name, coll_name, bytes, call, it, mm.msg, why);
                    goto sched_failed;
                }
            }
        }
        continue;
    sched_failed:
        if (o.schedules) {
            fprintf(stderr, "mscclrt-run: schedule %ld of %ld (seed %llu) failed: the plan's "
                    "result depends on the order its thread blocks run in\n", k + 1, nsched,
                    seed);
            print_replay(argc, argv, seed);
        }
        goto out;
    }
    (void)t0;
    if (o.save) {
        mode_t save_mode = umask(0);    /* fopen's permissions: 0666 less the umask */
        umask(save_mode);
        save_mode = 0666 & ~save_mode;
        if (mkdir(o.save, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "mscclrt-run: cannot create %s: %s\n", o.save, strerror(errno));
            goto out;
        }
        for (int r = 0; r < n; r++)
            if (!save_file(o.save, r, "in", b.inputs[r], in, save_mode) ||
                !save_file(o.save, r, "out", b.recv[r], out, save_mode))
                goto out;
    }
    char call[160], scheds[64] = "";
    describe_call(call, sizeof call, coll, dt, op, inplace, info.protocol_ll != 0, pk);
    if (o.schedules)
        snprintf(scheds, sizeof scheds, " under %ld serial schedule%s (seeds %llu..%llu)",
                 o.schedules, o.schedules == 1 ? "" : "s", o.seed,
                 o.seed + (unsigned long long)o.schedules - 1);
    printf("%s: %s, %d ranks, %zu bytes (%zu in, %zu out per rank), %s, backend %s: "
           "%ld iteration%s%s, %.3f ms per call%s\n", name, coll_name, n, bytes, in, out, call,
           be->name, o.iters, o.iters == 1 ? "" : "s", scheds,
           busy * 1e3 / (double)(o.iters * nsched), o.check ? ", check passed" : "");
    result = 0;
    goto out;
oom:
    fprintf(stderr, "mscclrt-run: out of memory for %d ranks x %zu bytes\n", n, in > out ? in : out);
out:
    if (state) be->close(state);
    check_bufs_free(&b);
    mscclrt_plan_free(plan);
    return result;
}

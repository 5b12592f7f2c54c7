/*
 * test_codegen.c - code generation without a GPU: generates the CUDA source of every rank of
 * every compat plan (or of the plan files given as arguments) for several data types,
 * operators and packet types, and compiles it with NVRTC for sm_90 (NVRTC needs no GPU).
 * Sources of one plan are compiled together as one translation unit to keep CI fast; plan
 * files given as arguments (the stdlib sweep) are generated for every rank and combination and
 * compiled to PTX (NVRTC front end, no ptxas): every rank with float32 sum, rank 0 with all.
 * The cubin cache on disk (through core/disk_cache.c, issue 22 item 4): a warm run compiles
 * nothing; a truncated entry, one that others may write, a link to /dev/zero is a miss that is
 * compiled and rewritten; a directory others may write is not used at all (each step a fresh
 * process: this program with --warm).
 * Exits 77 (skip) when NVRTC cannot be loaded.
 */
#include "../harness.h"
#include "test_plan_util.h"

#include "codegen/codegen.h"
#include "cuda/cuda_driver.h"
#include "mscclrt.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct { char *s; size_t len, cap; } Buf;

static void buf_add(Buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->len + n + 1) cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) exit(1);
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

/* append src with its kernel and table names made unique by suffix k */
static void add_renamed(Buf *b, const char *src, int k) {
    const char *p = src;
    char suf[32];
    snprintf(suf, sizeof suf, "_%d", k);
    for (;;) {
        const char *a = strstr(p, "MkTab"), *c = strstr(p, CG_KERNEL_NAME);
        const char *q = a && (!c || a < c) ? a : c;
        if (!q) break;
        size_t n = (size_t)(q - p) + (q == a ? 5 : strlen(CG_KERNEL_NAME));
        buf_add(b, p, n);
        buf_add(b, suf, strlen(suf));
        p += n;
    }
    buf_add(b, p, strlen(p));
}

typedef struct { mscclrt_dtype dt; mscclrt_redop op; mscclrt_packet pk; } Combo;

static void compile_plan(const char *path, bool sweep, bool ptx_only) {
    PlanErr err;
    Plan *p = plan_load_file(path, &err);
    CHECK(p != NULL);
    if (!p) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return;
    }
    Combo combos[64];
    int nc = 0;
    combos[nc++] = (Combo){MSCCLRT_FLOAT32, MSCCLRT_SUM, MSCCLRT_LL16};
    if (sweep) {
        for (int d = 0; d < MSCCLRT_DTYPE_COUNT; d++)
            if (d != MSCCLRT_FLOAT32) combos[nc++] = (Combo){(mscclrt_dtype)d, MSCCLRT_SUM, MSCCLRT_LL16};
        for (int o = 1; o < MSCCLRT_REDOP_COUNT; o++) {
            combos[nc++] = (Combo){MSCCLRT_FLOAT16, (mscclrt_redop)o, MSCCLRT_LL16};
            combos[nc++] = (Combo){MSCCLRT_BFLOAT16, (mscclrt_redop)o, MSCCLRT_LL8};
            combos[nc++] = (Combo){MSCCLRT_FP8_E4M3, (mscclrt_redop)o, MSCCLRT_LL8};
            combos[nc++] = (Combo){MSCCLRT_INT64, (mscclrt_redop)o, MSCCLRT_LL16};
        }
        combos[nc++] = (Combo){MSCCLRT_INT32, MSCCLRT_SUM, MSCCLRT_LL8};
    }
    bool nvls = false;
    for (int r = 0; r < p->ngpus; r++) nvls = nvls || p->gpus[r].nswitch > 0;
    Buf all = {0};
    int k = 0;
    for (int r = 0; r < p->ngpus; r++)
        for (int c = 0; c < nc; c++) {
            char *src = NULL;
            mscclrt_result res = cg_generate(p, r, combos[c].dt, combos[c].op, combos[c].pk, &src);
            /* multimem reduces only some dtype/operator pairs: a clear refusal is correct */
            if (res == MSCCLRT_ERR_PLAN && nvls && strstr(mscclrt_last_error(), "multimem")) continue;
            if (res != MSCCLRT_SUCCESS)
                fprintf(stderr, "%s rank %d combo %d: %s\n", path, r, c, mscclrt_last_error());
            CHECK_EQ_INT(MSCCLRT_SUCCESS, res);
            if (!src) continue;
            CHECK_CONTAINS(src, CG_KERNEL_NAME);
            /* the PTX sweep compiles every rank's kernel for the first combination and rank 0's
             * for all of them (every combination of every rank is generated and checked above) */
            if (!ptx_only || r == 0 || c == 0) add_renamed(&all, src, k++);
            free(src);
        }
    void *cubin = NULL;
    size_t len = 1;
    mscclrt_result res = ptx_only ? cg_check_source(all.s, 90, path)
                                  : cg_compile(all.s, 90, path, &cubin, &len, NULL);
    if (res != MSCCLRT_SUCCESS) fprintf(stderr, "%s\n", mscclrt_last_error());
    CHECK_EQ_INT(MSCCLRT_SUCCESS, res);
    CHECK(len > 0);
    free(cubin);
    free(all.s);
    plan_free(p);
}

/* --warm PLAN...: fill $MSCCLRT_CACHE_DIR with the sm_90 kernels test_gpu_exec uses, one
 * compile per kernel, so a GPU machine's run needs no NVRTC time (same NVRTC version there). */
static int warm(int argc, char **argv) {
    const Combo combos[] = {
        {MSCCLRT_FLOAT32, MSCCLRT_SUM, MSCCLRT_LL16}, {MSCCLRT_FLOAT16, MSCCLRT_SUM, MSCCLRT_LL8},
        {MSCCLRT_BFLOAT16, MSCCLRT_MAX, MSCCLRT_LL16}, {MSCCLRT_INT32, MSCCLRT_PROD, MSCCLRT_LL8},
        {MSCCLRT_UINT8, MSCCLRT_MIN, MSCCLRT_LL16}, {MSCCLRT_FP8_E4M3, MSCCLRT_SUM, MSCCLRT_LL16},
        {MSCCLRT_FLOAT64, MSCCLRT_AVG, MSCCLRT_LL16}, {MSCCLRT_INT64, MSCCLRT_SUM, MSCCLRT_LL16},
        {MSCCLRT_FP8_E5M2, MSCCLRT_AVG, MSCCLRT_LL8}, {MSCCLRT_FLOAT32, MSCCLRT_AVG, MSCCLRT_LL8},
        {MSCCLRT_FLOAT16, MSCCLRT_SUM, MSCCLRT_LL16}, {MSCCLRT_BFLOAT16, MSCCLRT_SUM, MSCCLRT_LL16},
    };
    int n = 0;
    for (int i = 2; i < argc; i++) {
        PlanErr err;
        Plan *p = plan_load_file(argv[i], &err);
        if (!p) { fprintf(stderr, "%s\n", err.msg); continue; }
        for (int r = 0; r < p->ngpus; r++)
            for (int c = 0; c < (int)(sizeof combos / sizeof combos[0]); c++) {
                mscclrt_packet pk = combos[c].pk;
                if (pk == MSCCLRT_LL8 && (combos[c].dt == MSCCLRT_FLOAT64 || combos[c].dt == MSCCLRT_INT64))
                    pk = MSCCLRT_LL16;
                char *src = NULL;
                if (cg_generate(p, r, combos[c].dt, combos[c].op, pk, &src) != MSCCLRT_SUCCESS) continue;
                void *cubin = NULL;
                size_t len = 0;
                bool cached = false;
                if (cg_compile(src, 90, argv[i], &cubin, &len, &cached) == MSCCLRT_SUCCESS && !cached) n++;
                free(cubin);
                free(src);
            }
        plan_free(p);
    }
    printf("warmed %d kernels\n", n);
    return 0;
}

/* `test_codegen --time PLAN...`: rank 0's kernel (float32 sum, LL16) of each plan: its source
 * size and its NVRTC compile to a cubin for sm_90, cache off. How long blocks cost: a plan for
 * libmscclrt may put any number of ops in one thread block, and each op is unrolled into the
 * kernel's source. */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int time_plans(int argc, char **argv) {
    int rc = 0;
    for (int i = 2; i < argc; i++) {
        PlanErr err;
        Plan *p = plan_load_file(argv[i], &err);
        if (!p) { fprintf(stderr, "%s\n", err.msg); rc = 1; continue; }
        int ops = 0;
        for (int t = 0; t < p->gpus[0].ntbs; t++) ops += plan_tb_flat_ops(&p->gpus[0].tbs[t]);
        char *src = NULL;
        double t0 = now_s();
        if (cg_generate(p, 0, MSCCLRT_FLOAT32, MSCCLRT_SUM, MSCCLRT_LL16, &src) != MSCCLRT_SUCCESS) {
            fprintf(stderr, "%s: %s\n", argv[i], mscclrt_last_error());
            plan_free(p);
            rc = 1;
            continue;
        }
        double t1 = now_s();
        size_t lines = 0;
        for (const char *c = src; *c; c++) lines += *c == '\n';
        void *cubin = NULL;
        size_t len = 0;
        mscclrt_result r = cg_compile(src, 90, argv[i], &cubin, &len, NULL);
        double t2 = now_s();
        printf("%s: rank 0: %d thread block%s, %d ops; source %zu bytes, %zu lines (generated in "
               "%.1f ms); NVRTC sm_90 cubin %zu bytes in %.2f s%s\n", argv[i], p->gpus[0].ntbs,
               p->gpus[0].ntbs == 1 ? "" : "s", ops, strlen(src), lines, (t1 - t0) * 1e3, len,
               t2 - t1, r == MSCCLRT_SUCCESS ? "" : " (failed)");
        if (r != MSCCLRT_SUCCESS) { fprintf(stderr, "%s\n", mscclrt_last_error()); rc = 1; }
        free(cubin);
        free(src);
        plan_free(p);
    }
    return rc;
}

/* Pairs of a fused put/ppkt that read one source are emitted as one loop, and only those. */
static void t_fanout_groups(void) {
    static const struct { const char *plan, *want, *unwanted; } cases[] = {
        {"tests/golden/ok/fanout_put.json", "mk::copy_multi<2>(D, (B0 + o0), z1);", "mk::copy("
         "(((char *)t.v[0]"},
        {"tests/golden/ok/fanout_packets.json", "mk::to_packets<16, 2>(D, (B0 + o0), z0, flag)",
         "mk::to_packets<16, 1>"},
        {"tests/golden/stdlib/allreduce/allpair_packet.N8.json", "mk::to_packets<16, 7>(D,",
         "mk::to_packets<16, 1>"},
        /* N=2: one peer, nothing to group; the output is what it was before fan-out */
        {"tests/golden/stdlib/allgather/fullmesh.N2.json", "mk::copy(", "copy_multi"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        PlanErr err;
        Plan *p = plan_load_file(cases[i].plan, &err);
        CHECK(p != NULL);
        char *src = NULL;
        if (p) CHECK_EQ_INT(MSCCLRT_SUCCESS, cg_generate(p, 0, MSCCLRT_FLOAT16, MSCCLRT_SUM,
                                                         MSCCLRT_LL16, &src));
        if (src) {
            CHECK_CONTAINS(src, cases[i].want);
            if (strstr(src, cases[i].unwanted))
                CHECK_STR("(absent)", cases[i].unwanted);
        }
        free(src);
        plan_free(p);
    }
}

/* Runs --warm over a 2-rank plan with the cache in dir: how many kernels it compiled, -1 when
 * the run failed. */
static int warm_run(const char *self, const char *dir) {
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "MSCCLRT_CACHE_DIR='%s' '%s' --warm "
             "tests/golden/stdlib/allgather/fullmesh.N2.json 2>/dev/null", dir, self);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "warmed %d kernels", &n) != 1) n = -1;
    if (p && pclose(p) != 0) n = -1;
    return n;
}

/* The first cubin entry of dir (path into out). */
static bool first_entry(const char *dir, char *out, size_t n) {
    DIR *d = opendir(dir);
    bool found = false;
    for (struct dirent *e; d && !found && (e = readdir(d));)
        if (strstr(e->d_name, ".cubin")) {
            snprintf(out, n, "%s/%s", dir, e->d_name);
            found = true;
        }
    if (d) closedir(d);
    return found;
}

static void t_kernel_cache(const char *self) {
    char dir[] = "/tmp/test_codegen_cache_XXXXXX", f[4200];
    CHECK(mkdtemp(dir) != NULL);
    const int all = warm_run(self, dir);
    CHECK(all > 0);
    CHECK_EQ_INT(0, warm_run(self, dir));                 /* warm: everything from the cache */
    CHECK(first_entry(dir, f, sizeof f));
    CHECK_EQ_INT(0, truncate(f, 100));                    /* truncated: compiled, rewritten */
    CHECK_EQ_INT(1, warm_run(self, dir));
    CHECK_EQ_INT(0, warm_run(self, dir));
    CHECK_EQ_INT(0, chmod(f, 0666));                      /* others may write it: not read */
    CHECK_EQ_INT(1, warm_run(self, dir));
    struct stat st;
    CHECK(stat(f, &st) == 0 && !(st.st_mode & 022));      /* rewritten private */
    CHECK_EQ_INT(0, unlink(f));                           /* a link to /dev/zero: not followed */
    CHECK_EQ_INT(0, symlink("/dev/zero", f));
    CHECK_EQ_INT(1, warm_run(self, dir));
    CHECK(lstat(f, &st) == 0 && S_ISREG(st.st_mode));
    CHECK_EQ_INT(0, chmod(dir, 0777));                    /* an open directory: no cache */
    CHECK_EQ_INT(all, warm_run(self, dir));
    CHECK_EQ_INT(0, chmod(dir, 0700));
    CHECK_EQ_INT(0, warm_run(self, dir));                 /* private again: the entries serve */
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ_INT(0, system(cmd));
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--warm")) return nvrtc_load() == MSCCLRT_SUCCESS ? warm(argc, argv) : 77;
    if (argc > 1 && !strcmp(argv[1], "--time") && !setenv("MSCCLRT_CACHE_DIR", "none", 1))
        return nvrtc_load() == MSCCLRT_SUCCESS ? time_plans(argc, argv) : 77;
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = 0;
    setenv("MSCCLRT_CACHE_DIR", "none", 1);
    if (nvrtc_load() != MSCCLRT_SUCCESS) {
        return harness_skip("NVRTC (the CUDA toolkit's libnvrtc)", mscclrt_last_error());
    }
    if (argc == 1) TEST("codegen kernel cache on disk", t_kernel_cache(self));
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            char name[600];
            snprintf(name, sizeof name, "codegen %s", argv[i]);
            TEST(name, compile_plan(argv[i], false, true));
        }
        return harness_report();
    }
    for (int i = 0; i < NCOMPAT; i++) {
        char path[256], name[300];
        snprintf(path, sizeof path, COMPAT_DIR "%s.json", compat_plans[i]);
        snprintf(name, sizeof name, "codegen compat %s", compat_plans[i]);
        bool sweep = !strcmp(compat_plans[i], "reduce_pack") || !strcmp(compat_plans[i], "reduce");
        TEST(name, compile_plan(path, sweep, false));
    }
    /* port channels through the proxy: every port op, to cubin (ptxas sees the inline PTX) */
    static const char *const port_plans[] = {
        "tests/golden/ok/port_ops.json", "tests/golden/ok/port_packets.json",
        "tests/golden/stdlib/allreduce/hier.N4.json", "tests/golden/stdlib/allgather/copyengine.N4.json"};
    for (size_t i = 0; i < sizeof port_plans / sizeof *port_plans; i++) {
        char name[300];
        snprintf(name, sizeof name, "codegen port proxy %s", port_plans[i]);
        TEST(name, compile_plan(port_plans[i], i == 0, false));
    }
    /* fan-out: pairs of a fused put/ppkt with one source become one loop (to cubin: ptxas
     * sees copy_multi and the multi-destination packet writes) */
    static const char *const fanout_plans[] = {"tests/golden/ok/fanout_put.json",
                                               "tests/golden/ok/fanout_packets.json",
                                               "tests/golden/stdlib/allgather/fullmesh.N8.json"};
    for (size_t i = 0; i < sizeof fanout_plans / sizeof *fanout_plans; i++) {
        char name[300];
        snprintf(name, sizeof name, "codegen fan-out %s", fanout_plans[i]);
        TEST(name, compile_plan(fanout_plans[i], false, false));
    }
    TEST("codegen groups the pairs that share a source, and only those", t_fanout_groups());
    TEST("codegen refuses LL8 reductions of 8-byte types", {
        PlanErr err;
        Plan *p = plan_load_file(COMPAT_DIR "allreduce_packet.json", &err);
        CHECK(p != NULL);
        char *src = NULL;
        if (p) {
            CHECK_EQ_INT(MSCCLRT_ERR_PLAN, cg_generate(p, 0, MSCCLRT_FLOAT64, MSCCLRT_SUM, MSCCLRT_LL8, &src));
            CHECK_CONTAINS(mscclrt_last_error(), "LL8");
            CHECK(src == NULL);
        }
        plan_free(p);
    });
    TEST("codegen layout pairs the k-th channel with the k-th", {
        PlanErr err;
        Plan *p = plan_load_file(COMPAT_DIR "allreduce.json", &err);
        CHECK(p != NULL);
        if (p) {
            CgLayout l;
            CHECK_EQ_INT(MSCCLRT_SUCCESS, cg_layout(p, 0, &l));
            CHECK_EQ_INT(8, l.nchan[0]);
            CHECK_EQ_INT(8, l.nslots);
            for (int k = 0; k < 8; k++) CHECK_EQ_INT(k, cg_inbound_slot(p, 1, 0, 0, k));
            CHECK_EQ_INT(-1, cg_inbound_slot(p, 1, 0, 0, 8));
        }
        plan_free(p);
    });
    return harness_report();
}

/*
 * test_mscclc.c - white-box tests of libmscclc (mscclc.h): compiling from memory, -D overrides,
 * collected diagnostics, error limits, the caller's loop-iteration bound, fusion switch, and the numbering rules of lowering
 * (channels, TB-local indices, remote buffers, in-place aliasing, scratch layout, barriers).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../harness.h"
#include "mscclc.h"

static MscclcResult compile(const char *src, const MscclcDefine *defs, int ndefs, bool no_fusion, int limit) {
    MscclcOptions opt = {.filename = "t.coll", .defines = defs, .ndefines = ndefs, .no_fusion = no_fusion,
                         .error_limit = limit};
    MscclcResult r;
    mscclc_compile(src, strlen(src), &opt, &r);
    return r;
}

static const char *HDR = "program t {\n collective allreduce\n ranks N\n inplace\n}\n";

/* a + b in one of a few rotating buffers (so cat(x, cat(y, z)) works) */
static char *cat(const char *a, const char *b) {
    static char bufs[4][4096];
    static int k;
    char *buf = bufs[k++ % 4];
    size_t la = strlen(a), lb = strlen(b);
    if (la + lb >= sizeof bufs[0]) abort();
    memcpy(buf, a, la);
    memcpy(buf + la, b, lb + 1);
    return buf;
}

/* numbering: two memory channels 0->1 (GPU-level 0 and 1), one port channel 0->1; TB-local
 * indices by first use; remote buffers per (peer, type) in first-use order */
static const char *num = "param N = 2\nprogram t {\n collective allgather\n ranks N\n inplace\n fusion off\n}\n"
                  "scratch a[1]\nscratch b[2]\n"
                  "channel m[0] = memory(0 -> 1)\nchannel m[1] = memory(0 -> 1)\n"
                  "channel q = port(0 -> 1)\nchannel qb = port(1 -> 0)\nchannel back = memory(1 -> 0)\n"
                  "m[1].put(rank(1).b[1], rank(0).input[0]) @ tb(2)\n"
                  "m[0].put(rank(1).output[0], rank(0).output[1]) @ tb(2)\n"
                  "q.put(rank(1).a[0], rank(0).input[0]) @ tb(2)\n"
                  "m[0].signal() @ tb(2)\n"
                  "back.wait() @ tb(0)\n"
                  "barrier(rank = 1, tbs = [0, 1])\nbarrier(rank = 1, tbs = [1, 2])\n"
                  "barrier(rank = 1, tbs = [0, 1])\n";
static const char *fuse = "param N = 2\nprogram t {\n collective allreduce\n ranks N\n inplace\n}\n"
                   "channel c[0] = memory(0 -> 1)\n"
                   "c[0].reduce(rank(0).input[0], rank(0).input[0], [rank(1).input[0]])\n"
                   "c[0].put(rank(1).input[0], rank(0).input[0])\n";

static void t_compile_from_memory(void) {
    MscclcResult r = compile(cat("param N = 2\n", HDR), NULL, 0, false, 0);
    CHECK_EQ_INT(MSCCLC_OK, r.status);
    CHECK(r.plan != NULL);
    if (r.plan) {
        CHECK_EQ_INT(2, r.plan->ngpus);
        CHECK_EQ_INT(2, r.plan->gpus[1].input_chunks);
        CHECK(r.plan->inplace);
    }
    CHECK_STR("", r.diagnostics);
    mscclc_result_free(&r);
}

static void t_define_overrides_param(void) {
    MscclcDefine d = {"N", 5};
    MscclcResult r = compile(cat("param N = 2\n", HDR), &d, 1, false, 0);
    CHECK_EQ_INT(MSCCLC_OK, r.status);
    if (r.plan) CHECK_EQ_INT(5, r.plan->ngpus);
    mscclc_result_free(&r);
}

static void t_undeclared_define(void) {
    MscclcDefine d = {"M", 5};
    MscclcResult r = compile(cat("param N = 2\n", HDR), &d, 1, false, 0);
    CHECK_EQ_INT(MSCCLC_ERR_INPUT, r.status);
    CHECK(r.plan == NULL);
    CHECK_CONTAINS(r.diagnostics, "t.coll: error: -D M: the program declares no 'param M'");
    mscclc_result_free(&r);
}

static void t_collected_diagnostic_with_caret(void) {
    MscclcResult r = compile(cat("param N = 2\n", cat(HDR, "copy(rank(0).output[0:1], rank(0).input[3:4])\n")),
                             NULL, 0, false, 0);
    CHECK_EQ_INT(MSCCLC_ERR_INPUT, r.status);
    CHECK_EQ_INT(1, r.errors);
    CHECK_CONTAINS(r.diagnostics, "t.coll:7:27: error: chunk input[3:4] is outside rank 0's input (2 chunks)");
    CHECK_CONTAINS(r.diagnostics, "                          ^~~~~~~~~~~~~~~~~~");
    mscclc_result_free(&r);
}

static void t_syntax_errors_recover(void) {
    MscclcResult r = compile("let a = 1 +* 2\nlet b = )\nlet c = 3\n", NULL, 0, false, 0);
    CHECK_EQ_INT(MSCCLC_ERR_INPUT, r.status);
    CHECK_EQ_INT(2, r.errors);
    CHECK_CONTAINS(r.diagnostics, "t.coll:1:12: error: syntax error");
    CHECK_CONTAINS(r.diagnostics, "t.coll:2:9: error: syntax error");
    mscclc_result_free(&r);
}

static void t_error_limit(void) {
    MscclcResult r = compile("param N = 2\nprogram t {\n collective allreduce\n ranks N\n}\n"
                             "let a = x\nlet b = y\nlet c = z\n",
                             NULL, 0, false, 1);
    CHECK_EQ_INT(2, r.errors);   /* the one shown and the one that stopped the compile */
    CHECK_CONTAINS(r.diagnostics, "'x'");
    CHECK(strstr(r.diagnostics, "'y'") == NULL);
    mscclc_result_free(&r);
}

/* Past the error limit the compile stops: neither the parser nor the evaluator goes on (one
 * program reported 137,856 errors and took 1 GB before). */
static void t_error_limit_stops(void) {
    size_t cap = 64 << 20, n = 0;
    char *src = malloc(cap);
    CHECK(src != NULL);
    if (!src) return;
    n += (size_t)sprintf(src, "program t {\n collective allreduce\n ranks 2\n}\n");
    for (int i = 0; i < 200000; i++) n += (size_t)sprintf(src + n, "let v%d = u%d +\n", i, i);
    MscclcOptions opt = {.filename = "t.coll", .error_limit = 5};
    MscclcResult r;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    mscclc_compile(src, n, &opt, &r);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("benchmark: error limit 5 on 200,000 erroneous lines: %.3f s\n", sec);
    CHECK(sec < 10);
    CHECK_EQ_INT(MSCCLC_ERR_INPUT, r.status);
    CHECK_EQ_INT(6, r.errors);
    CHECK_CONTAINS(r.diagnostics, "fatal error: too many errors emitted, stopping now [-ferror-limit=5]");
    CHECK(strlen(r.diagnostics) < 4096);
    mscclc_result_free(&r);
    /* the same with the evaluator's errors: a loop that fails at a new position each time */
    n = (size_t)sprintf(src, "program t {\n collective allreduce\n ranks 2\n}\n");
    for (int i = 0; i < 100000; i++) n += (size_t)sprintf(src + n, "for i in 0..1000 { let a%d = x }\n", i);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    mscclc_compile(src, n, &opt, &r);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("benchmark: error limit 5 on 100,000 failing loops: %.3f s\n", sec);
    CHECK(sec < 10);
    CHECK_EQ_INT(6, r.errors);
    mscclc_result_free(&r);
    free(src);
}

/* The compiler refuses a source text above MSCCLC_MAX_INPUT before looking at it. */
static void t_input_limit(void) {
    size_t n = MSCCLC_MAX_INPUT + 1;
    char *src = malloc(n);
    CHECK(src != NULL);
    if (!src) return;
    memset(src, ' ', n);
    MscclcOptions opt = {.filename = "big.coll"};
    MscclcResult r;
    mscclc_compile(src, n, &opt, &r);
    CHECK_EQ_INT(MSCCLC_ERR_INPUT, r.status);
    CHECK_CONTAINS(r.diagnostics, "big.coll: error: the program is 67108865 bytes, more than the limit of "
                                  "67108864 bytes (64 MiB)");
    mscclc_result_free(&r);
    free(src);
}

static void t_not_nul_terminated(void) {
    const char *src = "param N = 2\nprogram t {\n collective allreduce\n ranks N\n}\nGARBAGE(";
    MscclcOptions opt = {.filename = "t.coll"};
    MscclcResult r;
    mscclc_compile(src, strlen(src) - strlen("GARBAGE("), &opt, &r);
    CHECK_EQ_INT(MSCCLC_OK, r.status);
    mscclc_result_free(&r);
}

static void t_lowering_numbering(void) {
    MscclcResult r = compile(num, NULL, 0, false, 0);
    CHECK_EQ_INT(MSCCLC_OK, r.status);
    if (r.status != MSCCLC_OK) fputs(r.diagnostics, stderr);
    if (r.plan) {
        const PlanGpu *g = &r.plan->gpus[0];
        CHECK_EQ_INT(3, g->scratch_chunks);
        CHECK_EQ_INT(2, g->npeers[PLAN_CHAN_MEMORY]);
        CHECK_EQ_INT(1, g->npeers[PLAN_CHAN_PORT]);
        CHECK_EQ_INT(3, g->ntbs);                /* tbs 0 and 1 exist, empty */
        CHECK_EQ_INT(0, g->tbs[0].nops);
        const PlanTb *t = &g->tbs[2];
        CHECK_EQ_INT(2, t->nchan[PLAN_CHAN_MEMORY]);
        CHECK_EQ_INT(1, t->chan[PLAN_CHAN_MEMORY][0]);  /* m[1] first used */
        CHECK_EQ_INT(0, t->chan[PLAN_CHAN_MEMORY][1]);
        CHECK_EQ_INT(2, g->nremotes);                   /* (rank 1, s) is shared by memory and port */
        CHECK_EQ_INT(PLAN_BUF_SCRATCH, g->remotes[0].type);
        CHECK_EQ_INT(PLAN_BUF_OUTPUT, g->remotes[1].type);
        CHECK(g->remotes[0].access[PLAN_CHAN_PORT] && g->remotes[0].access[PLAN_CHAN_MEMORY]);
        int seen_put = 0;
        for (int i = 0; i < t->nops; i++) {
            const PlanOp *op = &t->ops[i];
            if (op->kind == PLAN_OP_PUT && seen_put == 0) {
                CHECK_EQ_INT(0, op->nchan);             /* memory put: no channel id */
                CHECK_EQ_INT(2, op->dst[0].index);      /* b[1] = scratch chunk 1 + 1 */
                CHECK_EQ_INT(0, op->src[0].index);      /* in-place input of rank 0 = o[0] */
                CHECK_EQ_INT(PLAN_BUF_OUTPUT, op->src[0].type);
            }
            if (op->kind == PLAN_OP_PUT && seen_put == 2) {
                CHECK_EQ_INT(1, op->nchan);             /* port put names its channel */
                CHECK_EQ_INT(PLAN_CHAN_PORT, op->chan_type);
                CHECK_EQ_INT(0, op->dst[0].index);
            }
            if (op->kind == PLAN_OP_SIGNAL) CHECK_EQ_INT(1, op->chan_ids[0]);  /* m[0] is local 1 */
            if (op->kind == PLAN_OP_PUT) seen_put++;
        }
        CHECK_EQ_INT(3, seen_put);
        const PlanGpu *g1 = &r.plan->gpus[1];
        CHECK_EQ_INT(3, g1->ntbs);
        CHECK_EQ_INT(PLAN_OP_BARRIER, g1->tbs[2].ops[0].kind);
        CHECK_EQ_INT(1, g1->tbs[2].ops[0].barrier_id);
        int ids = 0;
        for (int i = 0; i < g1->tbs[0].nops; i++)
            if (g1->tbs[0].ops[i].kind == PLAN_OP_BARRIER) ids += 1 + g1->tbs[0].ops[i].barrier_id * 10;
        CHECK_EQ_INT(2, ids);                        /* two barriers with id 0 */
    }
    mscclc_result_free(&r);
}

static void t_fusion_switch(void) {
    MscclcResult a = compile(fuse, NULL, 0, false, 0), b = compile(fuse, NULL, 0, true, 0);
    CHECK_EQ_INT(MSCCLC_OK, a.status);
    CHECK_EQ_INT(MSCCLC_OK, b.status);
    if (a.plan && b.plan) {
        CHECK_EQ_INT(PLAN_OP_RRES, a.plan->gpus[0].tbs[0].ops[0].kind);
        CHECK_EQ_INT(PLAN_OP_RRE, b.plan->gpus[0].tbs[0].ops[0].kind);
    }
    mscclc_result_free(&a);
    mscclc_result_free(&b);
}

static void t_loc_and_data_sync(void) {
    MscclcResult r = compile("param N = 2\nprogram t {\n collective sendrecv\n ranks N\n fusion off\n}\n"
                             "channel c[0] = memory(0 -> 1)\nchannel c[1] = memory(1 -> 0)\n"
                             "c[0].signal(sync = none)\nc[1].wait(sync = after)\n",
                             NULL, 0, false, 0);
    CHECK_EQ_INT(MSCCLC_OK, r.status);
    if (r.plan) {
        const PlanTb *t0 = &r.plan->gpus[0].tbs[0], *t1 = &r.plan->gpus[1].tbs[0];
        CHECK_EQ_INT(1, t0->nops);              /* sync = none: no nops */
        CHECK_EQ_INT(9, t0->ops[0].loc.line);
        CHECK_EQ_INT(2, t1->nops);              /* wait, nop */
        CHECK_EQ_INT(PLAN_OP_NOP, t1->ops[1].kind);
    }
    mscclc_result_free(&r);
}

static void t_instances(void) {
    MscclcResult r = compile("param N = 2\nprogram t {\n collective allreduce\n ranks N\n instances 3\n}\n"
                             "copy(rank(0).output[1], rank(0).input[0]) @ tb(1)\n",
                             NULL, 0, false, 0);
    CHECK_EQ_INT(MSCCLC_OK, r.status);
    if (r.plan) {
        CHECK_EQ_INT(6, r.plan->gpus[0].input_chunks);
        CHECK_EQ_INT(6, r.plan->gpus[0].ntbs);
    }
    mscclc_result_free(&r);
}

/* libmscclc keeps no global state: compiles on several threads give the same plan */
static void *compile_thread(void *arg) {
    char **out = arg;
    MscclcResult r = compile(num, NULL, 0, false, 0);
    *out = r.plan ? plan_to_json(r.plan, true, NULL) : NULL;
    mscclc_result_free(&r);
    return NULL;
}

static void t_threads(void) {
    pthread_t th[4];
    char *json[4] = {0};
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(0, pthread_create(&th[i], NULL, compile_thread, &json[i]));
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        CHECK(json[i] != NULL);
        if (json[i] && json[0]) CHECK_STR(json[0], json[i]);
    }
    for (int i = 0; i < 4; i++) free(json[i]);
}

/* MscclcOptions.max_iterations: a lower bound of the caller's applies; 0 and values above the
 * compiler's own 20 million leave that one */
static void t_max_iterations(void) {
    const char *src = "param N = 2\nprogram t {\n collective allreduce\n ranks N\n}\n"
                      "for a in 0..100 {\n for b in 0..100 if a + b < 0 {\n  let c = a\n }\n}\n";
    MscclcOptions opt = {.filename = "t.coll", .max_iterations = 5000};
    MscclcResult r;
    mscclc_compile(src, strlen(src), &opt, &r);
    CHECK_EQ_INT(MSCCLC_ERR_INPUT, r.status);
    CHECK_CONTAINS(r.diagnostics, "t.coll:7:6: error: the program runs more than 5000 loop iterations");
    mscclc_result_free(&r);
    opt.max_iterations = 10100;   /* 100 + 100 x 100: exactly enough */
    mscclc_compile(src, strlen(src), &opt, &r);
    CHECK(strstr(r.diagnostics, "loop iterations") == NULL);
    mscclc_result_free(&r);
    opt.max_iterations = 10099;
    mscclc_compile(src, strlen(src), &opt, &r);
    CHECK_CONTAINS(r.diagnostics, "more than 10099 loop iterations");
    mscclc_result_free(&r);
    for (int k = 0; k < 2; k++) {   /* 0, and one above the compiler's own: that one */
        opt.max_iterations = k ? 30000000 : 0;
        mscclc_compile(src, strlen(src), &opt, &r);
        CHECK(strstr(r.diagnostics, "loop iterations") == NULL);
        mscclc_result_free(&r);
    }
}

int main(void) {
    TEST("mscclc/compile-from-memory", t_compile_from_memory());
    TEST("mscclc/define-overrides-param", t_define_overrides_param());
    TEST("mscclc/undeclared-define", t_undeclared_define());
    TEST("mscclc/collected-diagnostic-with-caret", t_collected_diagnostic_with_caret());
    TEST("mscclc/syntax-errors-recover", t_syntax_errors_recover());
    TEST("mscclc/error-limit", t_error_limit());
    TEST("mscclc/error-limit-stops", t_error_limit_stops());
    TEST("mscclc/max-iterations", t_max_iterations());
    TEST("mscclc/input-limit", t_input_limit());
    TEST("mscclc/not-nul-terminated", t_not_nul_terminated());
    TEST("mscclc/lowering-numbering", t_lowering_numbering());
    TEST("mscclc/fusion-switch", t_fusion_switch());
    TEST("mscclc/loc-and-data-sync", t_loc_and_data_sync());
    TEST("mscclc/instances", t_instances());
    TEST("mscclc/threads", t_threads());
    return harness_report();
}

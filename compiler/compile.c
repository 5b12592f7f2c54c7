/*
 * compile.c - libmscclc's entry point (mscclc.h): parse -> sema + lower -> the passes of passes.h
 * in their required order -> plan_validate. Owns the compile's arena and Diag; hands the Plan to
 * the caller. An out-of-memory anywhere in the arena lands here and becomes an internal error.
 */
#include "mscclc.h"

#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ast.h"
#include "diag.h"
#include "passes.h"
#include "sema.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *dup_text(const char *t) {
    size_t n = strlen(t) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, t, n);
    return d;
}

/* The passes after lowering, in the order passes.h requires (see the reasons there). */
/* Before pass_auto_sync allocates its nops: the op count the plan will have (the nops to come,
 * then replicate's instances) against the plan loader's limit, with check_loader_limits' own
 * message. A plan whose copies all conflict gets a nop before each; without this check it was
 * built at twice its size (1.3 GB for a million ops) before being refused. */
static bool check_sync_growth(Sema *s, Diag *d) {
    const Plan *p = s->plan;
    long ops = 0, added = pass_auto_sync_count(p);
    if (added < 0) {
        diag_error(d, s->program_loc.at, "out of memory counting data-dependency syncs");
        return false;
    }
    for (int r = 0; r < p->ngpus; r++)
        for (int t = 0; t < p->gpus[r].ntbs; t++) ops += plan_tb_flat_ops(&p->gpus[r].tbs[t]);
    long total = (ops + added) * (s->instances > 0 ? s->instances : 1);
    if (total <= PLAN_MAX_TOTAL_OPS) return true;
    diag_error(d, s->program_loc.at, "the plan has %ld operations (pipelines flattened, synchronisation "
               "included), more than %ld, the plan loader's limit", total, PLAN_MAX_TOTAL_OPS);
    return false;
}

static bool run_passes(Sema *s, Diag *d) {
    Plan *p = s->plan;
    p->target = s->opt->target == PLAN_TARGET_NONE ? PLAN_TARGET_MSCCLRT : s->opt->target;
    if (!pass_check_signals(p, d)) return false;
    if (s->fusion && !s->opt->no_fusion && !pass_fuse(p, d)) return false;
    if (!pass_data_sync(p, d)) return false;
    if (s->auto_sync && !check_sync_growth(s, d)) return false;
    if (s->auto_sync && !pass_auto_sync(p, d)) return false;
    if (!pass_replicate(p, s->instances, d)) return false;
    if (!pass_check_limits(p, d)) return false;
    if (!pass_mscclpp_sizes(p, s->program_loc.at, d)) return false;
    if (!pass_check_deadlock(p, d)) return false;
    if (!pass_check_races(p, d)) return false;
    return diag_errors(d) == 0;
}

/* The final plan, as it will be written, must fit the plan loader's limits that plan_validate
 * does not check: its size and its flattened op count. Lowering kept running counts (ops as
 * lowered, before fusion and the synchronisation nops); these are the exact figures after every
 * pass. */
static bool check_loader_limits(Sema *s, Diag *d) {
    const Plan *p = s->plan;
    long ops = 0;
    for (int r = 0; r < p->ngpus; r++)
        for (int t = 0; t < p->gpus[r].ntbs; t++) ops += plan_tb_flat_ops(&p->gpus[r].tbs[t]);
    if (ops > PLAN_MAX_TOTAL_OPS) {
        diag_error(d, s->program_loc.at, "the plan has %ld operations (pipelines flattened, synchronisation "
                   "included), more than %ld, the plan loader's limit", ops, PLAN_MAX_TOTAL_OPS);
        return false;
    }
    size_t n = plan_json_size(p, s->opt->compact, MSCCLC_PRODUCER) + 1;   /* + newline */
    if (n <= PLAN_MAX_FILE_BYTES) return true;
    diag_error(d, s->program_loc.at, "the plan is %zu bytes of JSON%s, more than %zu bytes (256 MiB), the plan "
               "loader's limit", n, s->opt->compact ? "" : " (indented; --compact writes less)",
               PLAN_MAX_FILE_BYTES);
    return false;
}

typedef struct {
    Sema *s;
    const char *src;
    size_t len;
    MscclcResult *res;
    bool oom;           /* the arena ran out of memory; the job was abandoned */
} Job;

static void job_run(Job *j) {
    Sema *s = j->s;
    Diag *d = s->diag;
    MscclcResult *res = j->res;
    double t0 = now();
    AstProgram prog;
    bool ok = ast_parse(s->arena, d, j->src, j->len, &prog);
    double t1 = now();
    res->seconds[0] = t1 - t0;
    /* after a syntax error the tree has holes (a dropped `for` leaves its body at the top level):
     * evaluating it would only add follow-on errors, so stop with the syntax errors */
    if (ok) ok = sema_run(s, &prog);
    double t2 = now();
    res->seconds[1] = t2 - t1;
    if (!ok || diag_errors(d) > 0) {
        res->status = MSCCLC_ERR_INPUT;
        return;
    }
    diag_call_notes_on(d);   /* sema is done: later errors in function bodies name the call */
    ok = run_passes(s, d) && check_loader_limits(s, d);
    double t3 = now();
    res->seconds[2] = t3 - t2;
    if (!ok) {
        res->status = MSCCLC_ERR_INPUT;
        return;
    }
    PlanErr perr;
    if (!plan_validate(s->plan, s->opt->filename ? s->opt->filename : "<input>", &perr)) {
        diag_error(d, (PlanLoc){0, 0}, "internal error: the compiled plan is invalid: %s (please report)",
                   perr.msg);
        res->status = MSCCLC_ERR_INTERNAL;
        return;
    }
    res->seconds[3] = now() - t3;
    res->status = MSCCLC_OK;
    res->plan = s->plan;
    s->plan = NULL;
}

/* Runs the job with the arena's out-of-memory jump pointing here. */
static void job_guarded(Job *job) {
    Job *volatile j = job;
    jmp_buf env;
    if (setjmp(env)) {
        j->oom = true;
        return;
    }
    arena_on_oom(j->s->arena, &env);
    job_run(j);
}

MscclcStatus mscclc_compile(const char *src, size_t len, const MscclcOptions *options, MscclcResult *res) {
    static const MscclcOptions defaults = {0};
    memset(res, 0, sizeof *res);
    const MscclcOptions *opt = options ? options : &defaults;
    int limit = opt->error_limit == 0 ? 20 : opt->error_limit < 0 ? 0 : opt->error_limit;
    Diag *d = diag_new(opt->filename, src, len, opt->diag_out, limit);
    Arena *arena = arena_new();
    Sema *s = calloc(1, sizeof *s);
    if (!d || !arena || !s) {
        diag_free(d);
        arena_free(arena);
        free(s);
        res->status = MSCCLC_ERR_INTERNAL;
        res->diagnostics = dup_text("mscclc: out of memory\n");
        return res->status;
    }
    s->arena = arena;
    s->diag = d;
    s->opt = opt;
    Job job = {s, src, len, res, false};
    if (len > MSCCLC_MAX_INPUT) {
        diag_error(d, (PlanLoc){0, 0}, "the program is %zu bytes, more than the limit of %zu bytes (64 MiB)", len,
                   MSCCLC_MAX_INPUT);
        res->status = MSCCLC_ERR_INPUT;
    } else {
        job_guarded(&job);
    }
    arena_on_oom(arena, NULL);
    if (job.oom) {
        diag_error(d, (PlanLoc){0, 0}, "internal error: out of memory");
        res->status = MSCCLC_ERR_INTERNAL;
        plan_free(res->plan);
        res->plan = NULL;
    }
    lower_release(s);
    plan_free(s->plan);
    res->errors = diag_errors(d);
    res->warnings = diag_warnings(d);
    res->diagnostics = dup_text(diag_text(d));
    diag_free(d);
    arena_free(arena);
    free(s);
    return res->status;
}

int mscclc_check_plan(const Plan *p, const char *filename, FILE *diag_out, int error_limit, int *errors) {
    int limit = error_limit == 0 ? 20 : error_limit < 0 ? 0 : error_limit;
    Diag *d = diag_new(filename, NULL, 0, diag_out, limit);
    if (!d) return -1;
    /* the order of run_passes: each check assumes the ones before it passed */
    (void)(pass_check_signals(p, d) && pass_check_limits(p, d) && pass_check_deadlock(p, d) &&
           pass_check_races(p, d));
    int n = diag_errors(d);
    if (errors) *errors = n;
    diag_free(d);
    return n;
}

void mscclc_result_free(MscclcResult *res) {
    if (!res) return;
    plan_free(res->plan);
    free(res->diagnostics);
    res->plan = NULL;
    res->diagnostics = NULL;
}

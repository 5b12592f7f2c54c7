/*
 * test_cpu_stdlib_matrix.c - the full correctness matrix of the standard library on the CPU
 * backend, in process: every stdlib/<collective>/<name>.coll x N in {2, 3, 4, 8} (an N the
 * program refuses with a `require` is skipped) x every dtype x every operator the collective
 * takes x the smallest legal size and an odd multiple of it, in-place or out-of-place as the
 * plan says, checked against the float64 reference. Plans go through the JSON writer and the
 * public loader, so compiler, writer, loader and backend are exercised together.
 */
#include "../harness.h"
#include "test_plan_util.h"

#include "check/check.h"
#include "mscclc.h"
#include "mscclrt.h"
#include "plan.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>

/* Compiles src for n ranks into a loaded public plan; *refused when a require rejects n. */
static mscclrt_plan *compile_for(const char *path, const char *src, size_t len, int n,
                                 bool *refused) {
    MscclcDefine def = {"N", n};
    MscclcOptions opt = {.filename = path, .defines = &def, .ndefines = 1};
    MscclcResult res;
    *refused = false;
    if (mscclc_compile(src, len, &opt, &res) != MSCCLC_OK) {
        *refused = res.status == MSCCLC_ERR_INPUT;
        if (!*refused) fprintf(stderr, "%s N=%d: %s\n", path, n, res.diagnostics);
        mscclc_result_free(&res);
        return NULL;
    }
    char *json = plan_to_json(res.plan, true, NULL);
    mscclrt_plan *plan = NULL;
    if (!json || mscclrt_plan_parse(&plan, json, strlen(json), path) != MSCCLRT_SUCCESS)
        fprintf(stderr, "%s N=%d: %s\n", path, n, mscclrt_last_error());
    free(json);
    mscclc_result_free(&res);
    return plan;
}

/* One checked call; returns false (with a message) on any failure. */
static bool run_case(mscclrt_cpu_comm *comm, const mscclrt_plan *plan, PlanCollective coll,
                     CheckBufs *b, mscclrt_dtype t, mscclrt_redop op, mscclrt_packet pk,
                     uint64_t seed, const char *what) {
    size_t in = b->in_bytes, out = b->out_bytes;
    if (check_bufs_fill(b, t, op, seed) != MSCCLRT_SUCCESS ||
        mscclrt_cpu_execute(comm, plan, b->send, b->recv, in, out, t, op, pk) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "%s: %s\n", what, mscclrt_last_error());
        return false;
    }
    CheckMismatch mm;
    if (!check_collective(coll, b->nranks, t, op, (const void *const *)b->inputs, in,
                          (const void *const *)b->recv, out, &mm)) {
        fprintf(stderr, "%s: %s\n", what, mm.msg);
        return false;
    }
    return true;
}

/* The whole matrix of one compiled plan (n ranks); failures are counted by CHECK. */
static void check_plan(const mscclrt_plan *plan, int n, const char *name) {
    CHECK(plan != NULL);
    mscclrt_plan_info info;
    size_t min = 0;
    mscclrt_cpu_comm *comm = NULL;
    CheckBufs b = {0};
    if (plan && mscclrt_plan_get_info(plan, &info) == MSCCLRT_SUCCESS &&
        mscclrt_plan_min_bytes(plan, &min) == MSCCLRT_SUCCESS &&
        mscclrt_cpu_comm_create(&comm, n) == MSCCLRT_SUCCESS) {
        PlanCollective coll = PLAN_COLL_CUSTOM;
        plan_coll_from_name(info.collective, &coll);
        int nops = plan_coll_reduces(coll) ? MSCCLRT_REDOP_COUNT : 1;
        const size_t sizes[2] = {min, 3 * min};
        int k = 0;
        for (int si = 0; si < 2; si++) {
            size_t in = 0, out = 0;
            if (mscclrt_plan_call_sizes(plan, sizes[si], &in, &out) != MSCCLRT_SUCCESS)
                continue;   /* 3x the smallest size is past the plan's maximum */
            CHECK(check_bufs_alloc(&b, coll, n, in, out, info.inplace != 0));
            for (int t = 0; t < MSCCLRT_DTYPE_COUNT && b.send; t++) {
                size_t es = mscclrt_dtype_size((mscclrt_dtype)t);
                if (in % es || out % es) continue;   /* not whole elements */
                for (int op = 0; op < nops; op++, k++) {
                    char what[640];
                    mscclrt_packet pk = k % 2 ? MSCCLRT_LL8 : MSCCLRT_LL16;
                    snprintf(what, sizeof what, "%s: %zu bytes, %s %s, %s", name,
                             sizes[si], mscclrt_dtype_name((mscclrt_dtype)t),
                             mscclrt_redop_name((mscclrt_redop)op),
                             pk == MSCCLRT_LL8 ? "LL8" : "LL16");
                    CHECK(run_case(comm, plan, coll, &b, (mscclrt_dtype)t, (mscclrt_redop)op,
                                   pk, (uint64_t)k + 1, what));
                }
            }
            check_bufs_free(&b);
        }
    } else {
        CHECK(!"plan info, smallest size or CPU communicator");
    }
    check_bufs_free(&b);
    mscclrt_cpu_comm_destroy(comm);
}

static void run_program(const char *path) {
    size_t len = 0;
    char *src = tp_read_file(path, &len);
    CHECK(src != NULL);
    if (!src) return;
    static const int ns[] = {2, 3, 4, 8};
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
        int n = ns[ni];
        char name[512];
        snprintf(name, sizeof name, "stdlib_matrix/%s N=%d", path, n);
        bool refused;
        mscclrt_plan *plan = compile_for(path, src, len, n, &refused);
        if (!plan && refused) {
            printf("testing %s ... skipped\n", name);
            continue;
        }
        TEST(name, check_plan(plan, n, name));
        mscclrt_plan_free(plan);
    }
    free(src);
}

int main(void) {
    glob_t g;
    if (glob("stdlib/*/*.coll", 0, NULL, &g) != 0 || g.gl_pathc == 0) {
        return harness_skip("stdlib/*/*.coll: run from the repository root", NULL);
    }
    for (size_t i = 0; i < g.gl_pathc; i++) run_program(g.gl_pathv[i]);
    globfree(&g);
    return harness_report();
}

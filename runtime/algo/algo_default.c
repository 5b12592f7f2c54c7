/*
 * algo_default.c - the default collection. A communicator's default collection is built once,
 * for its real layout (world size, ranks per node): every program of the stdlib, embedded in the
 * library at build time, that accepts N = world is compiled in process through libmscclc (or
 * found in the plan cache, algo_plan_cache.c) and wrapped as a plan-based algorithm
 * "stdlib/<collective>/<name>"; on one node the built-in native algorithms (algo_native.c)
 * follow. Across nodes only the multi-node programs (a `param G`, compiled with G = ranks per
 * node) are compiled, a plan that would reach another node over a memory or switch channel is
 * refused (only port channels cross), and of the native algorithms only native/sendrecv
 * (its context maps one host's ranks and reaches the others through the port proxy). The
 * default selector is algo_select_default.c.
 */
#include "algo/algo.h"
#include "algo/algo_plan_cache.h"
#include "codegen/codegen.h"
#include "core/api_plan.h"
#include "core/clock.h"
#include "core/disk_cache.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "exec/exec.h"
#include "mscclc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* build/gen/stdlib_sources.c (runtime/codegen/tools/embed.c --stdlib) */
typedef struct { const char *name; const char *text; } StdlibFile;
extern const StdlibFile mscclrt_stdlib_files[];  /* "allreduce/allpair_packet.coll", text */
extern const int mscclrt_stdlib_nfiles;
extern const char mscclrt_stdlib_compiler_id[];  /* hash of the compiler's sources */


/* ---- sets ------------------------------------------------------------------------------------- */

mscclrt_result algo_set_add(AlgoSet *s, const mscclrt_algo *a) {
    if ((s->n & (s->n - 1)) == 0) { /* 0 or a power of two: the array is full */
        size_t cap = s->n ? 2 * (size_t)s->n : 8;
        const mscclrt_algo **v = realloc(s->v, cap * sizeof *v);
        if (!v) {
            algo_release(a);
            return rt_fail(MSCCLRT_ERR_SYSTEM, "algorithm set: out of memory");
        }
        s->v = v;
    }
    s->v[s->n++] = a;
    return MSCCLRT_SUCCESS;
}

void algo_set_free(AlgoSet *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) algo_release(s->v[i]);
    free(s->v);
    free(s);
}

/* ---- the embedded stdlib ---------------------------------------------------------------------- */

/* Splits "allreduce/allpair_packet.coll" into its collective and program name. */
static bool stdlib_split(const char *file, char *coll, size_t cn, char *name, size_t nn) {
    const char *slash = strchr(file, '/'), *dot = strrchr(file, '.');
    if (!slash || !dot || dot < slash || (size_t)(slash - file) >= cn ||
        (size_t)(dot - slash - 1) >= nn)
        return false;
    memcpy(coll, file, (size_t)(slash - file));
    coll[slash - file] = 0;
    memcpy(name, slash + 1, (size_t)(dot - slash - 1));
    name[dot - slash - 1] = 0;
    return true;
}

bool algo_stdlib_has(const char *coll_slash_name) {
    size_t n = strlen(coll_slash_name);
    for (int i = 0; i < mscclrt_stdlib_nfiles; i++) {
        const char *f = mscclrt_stdlib_files[i].name;
        if (strncmp(f, coll_slash_name, n) == 0 && strcmp(f + n, ".coll") == 0) return true;
    }
    return false;
}

/* Whether the program declares `param <p>` (a line "param P ..."). */
static bool declares_param(const char *text, const char *p) {
    size_t pl = strlen(p);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        while (*l == ' ' || *l == '\t') l++;
        if (strncmp(l, "param", 5) != 0 || (l[5] != ' ' && l[5] != '\t')) continue;
        l += 5;
        while (*l == ' ' || *l == '\t') l++;
        if (strncmp(l, p, pl) == 0 && !(l[pl] == '_' || (l[pl] >= 'a' && l[pl] <= 'z') ||
                                        (l[pl] >= 'A' && l[pl] <= 'Z') ||
                                        (l[pl] >= '0' && l[pl] <= '9')))
            return true;
    }
    return false;
}

/* ---- the default collection ------------------------------------------------------------------- */

bool algo_plan_crosses_nodes(const Plan *p, int rpn, char *why, size_t n) {
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        for (int k = 0; k < g->npeers[PLAN_CHAN_MEMORY]; k++)
            if (g->peers[PLAN_CHAN_MEMORY][k] / rpn != r / rpn) {
                snprintf(why, n, "rank %d has a memory channel to rank %d on another node", r,
                         g->peers[PLAN_CHAN_MEMORY][k]);
                return true;
            }
        for (int k = 0; k < g->nremotes; k++)
            if (g->remotes[k].access[PLAN_CHAN_MEMORY] && g->remotes[k].rank / rpn != r / rpn) {
                snprintf(why, n, "rank %d maps a buffer of rank %d on another node", r,
                         g->remotes[k].rank);
                return true;
            }
        for (int k = 0; k < g->nswitch; k++)
            for (int i = 0; i < g->switches[k].nranks; i++)
                if (g->switches[k].ranks[i] / rpn != r / rpn) {
                    snprintf(why, n, "rank %d shares a switch channel with rank %d on another "
                             "node", r, g->switches[k].ranks[i]);
                    return true;
                }
    }
    return false;
}

/* Wraps one compiled stdlib plan (takes plan) and adds it to set. */
static mscclrt_result add_stdlib_algo(AlgoSet *set, mscclrt_plan *plan, const char *coll,
                                      const char *prog, bool hier, int world, int rpn) {
    const Plan *p = api_plan_model(plan);
    mscclrt_coll c;
    if (!algo_coll_from_name(coll, &c)) {
        mscclrt_plan_free(plan);
        return rt_fail(MSCCLRT_ERR_INTERNAL, "default collection: stdlib directory '%s' is not a "
                       "collective", coll);
    }
    char name[320], tags[512];
    snprintf(name, sizeof name, "stdlib/%s/%s", coll, prog);
    /* a rooted stdlib program is for root 0: say so unless its plan names the root itself */
    bool rooted = c == MSCCLRT_COLL_BROADCAST || c == MSCCLRT_COLL_REDUCE ||
                  c == MSCCLRT_COLL_GATHER || c == MSCCLRT_COLL_SCATTER;
    for (int i = 0; i < p->ntags && rooted; i++)
        if (!strncmp(p->tags[i], "root=", 5)) rooted = false;
    int w = snprintf(tags, sizeof tags, "default=1%s", rooted ? ",root=0" : "");
    for (int i = 0; i < p->ntags && w > 0 && (size_t)w < sizeof tags; i++)
        w += snprintf(tags + w, sizeof tags - (size_t)w, ",%s", p->tags[i]);
    /* out-of-place stdlib plans also run in place (stdlib/README.md; test_algo_default checks
     * each on the CPU backend), except alltoall and sendrecv, which need distinct buffers */
    mscclrt_buffer_mode mode = p->inplace ? MSCCLRT_BUFFER_INPLACE
                               : c == MSCCLRT_COLL_ALLTOALL || c == MSCCLRT_COLL_SENDRECV
                                   ? MSCCLRT_BUFFER_OUTOFPLACE
                                   : MSCCLRT_BUFFER_ANY;
    mscclrt_algo_desc d = {.name = name, .collective = c, .world_size = world,
                           .ranks_per_node = hier ? rpn : world, .buffer_mode = mode,
                           .tags = tags};
    mscclrt_algo *a;
    mscclrt_result res = mscclrt_algo_from_plan(&a, plan, &d);
    if (res != MSCCLRT_SUCCESS) {
        mscclrt_plan_free(plan);
        return res;
    }
    a->own_plan = true;
    a->desc.buffer_mode = mode; /* from_plan never widens a plan to any buffers: we vouch here */
    return algo_set_add(set, a);
}

mscclrt_result algo_default_build_plans(int world, int ranks_per_node, int arch,
                                        const char *cache_dir, AlgoSet *set,
                                        AlgoBuildStats *stats) {
    AlgoBuildStats st = {0};
    double t0 = rt_now_s();
    if (world < 1 || ranks_per_node < 0 || ranks_per_node > world)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "default collection: %d ranks with %d per node is "
                       "not a layout", world, ranks_per_node);
    if (!set || !cache_dir)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "default collection: %s is NULL",
                       set ? "cache_dir" : "set");
    const bool multi = ranks_per_node > 0 && ranks_per_node < world;
    DiskCache cache;
    dcache_open(&cache, cache_dir, "plans");   /* fd -1 (logged) when off or untrusted */
    mscclrt_result res = MSCCLRT_SUCCESS;
    for (int i = 0; i < mscclrt_stdlib_nfiles && ranks_per_node > 0; i++) {
        const StdlibFile *f = &mscclrt_stdlib_files[i];
        char coll[64], prog[128];
        if (!stdlib_split(f->name, coll, sizeof coll, prog, sizeof prog)) {
            res = rt_fail(MSCCLRT_ERR_INTERNAL, "default collection: embedded stdlib file '%s' "
                          "is not <collective>/<name>.coll", f->name);
            goto out;
        }
        /* hierarchical programs (a `param G`) serve several nodes, the others one node */
        const bool hier = declares_param(f->text, "G");
        if (hier != multi) continue;
        MscclcDefine defs[2] = {{"N", world}, {"G", ranks_per_node}};
        PlanJob job = {f->name, f->text, coll, defs, hier ? 2 : 1, &cache};
        mscclrt_plan *plan;
        bool cached;
        TRY_GOTO(algo_plan_for(&job, &plan, &cached), res, out);
        if (!plan) {
            st.skipped++;
            continue;
        }
        if (cached) st.cached++;
        else st.compiled++;
        char why[128];
        if (multi && algo_plan_crosses_nodes(api_plan_model(plan), ranks_per_node, why, sizeof why)) {
            LOG_INFO(LOG_SUB_PLAN, "default collection: stdlib/%s skipped for %d ranks, %d per "
                     "node: %s", f->name, world, ranks_per_node, why);
            mscclrt_plan_free(plan);
            st.skipped++;
            continue;
        }
        TRY_GOTO(add_stdlib_algo(set, plan, coll, prog, hier, world, ranks_per_node), res, out);
    }
    st.seconds = rt_now_s() - t0;
    LOG_INFO(LOG_SUB_INIT, "default collection for %d ranks (%d per node, sm_%d): %d stdlib plans "
             "(%d compiled, %d from cache), %d programs refused N, %.3f s", world, ranks_per_node,
             arch, st.compiled + st.cached, st.compiled, st.cached, st.skipped, st.seconds);
    if (stats) *stats = st;
out:
    dcache_close(&cache);
    return res;
}

mscclrt_result algo_default_build(int world, int ranks_per_node, int arch, AlgoSet **out) {
    *out = NULL;
    AlgoSet *s = calloc(1, sizeof *s);
    if (!s) return rt_fail(MSCCLRT_ERR_SYSTEM, "default collection: out of memory");
    char dir[PATH_MAX];
    algo_plan_cache_dir(param_str(PARAM_CACHE_DIR), dir, sizeof dir);
    mscclrt_result res;
    TRY_GOTO(algo_default_build_plans(world, ranks_per_node, arch, dir, s, NULL), res, fail);
    TRY_GOTO(algo_native_builtins(s, world, ranks_per_node), res, fail);
    *out = s;
    return MSCCLRT_SUCCESS;
fail:
    algo_set_free(s);
    return res;
}

mscclrt_result algo_default_set(mscclrt_comm *comm, const AlgoSet **out) {
    AlgoComm *ac = algo_comm(comm);
    if (!ac) return MSCCLRT_ERR_SYSTEM;
    if (!ac->defaults)
        TRY(algo_default_build(comm->nranks, ac->ranks_per_node, comm->arch, &ac->defaults));
    *out = ac->defaults;
    return MSCCLRT_SUCCESS;
}


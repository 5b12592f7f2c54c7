/*
 * algo_default.c - the default collection and the default selector. A communicator's default
 * collection is built once, for its real layout (world size, ranks per node): every program of
 * the stdlib, embedded in the library at build time, that accepts N = world is compiled in
 * process through libmscclc and wrapped as a plan-based algorithm "stdlib/<collective>/<name>";
 * on one node the built-in native algorithms (algo_native.c) follow. Across nodes only the
 * multi-node programs (a `param G`, compiled with G = ranks per node) are compiled, a plan that
 * would reach another node over a memory or switch channel is refused (only port channels
 * cross), and there are no native algorithms (their context reaches one host only). Compiled
 * plans are cached in memory (per process) and on disk ($MSCCLRT_CACHE_DIR/plans/<key>.json,
 * through core/disk_cache.c: trusted directories and entries only, written atomically,
 * validated on every read), keyed by the program's text, the defines and the compiler's
 * identity (a hash of its sources taken at build time), so a changed compiler never reads an
 * older plan.
 *
 * The default selector: the tuning table first, then the first registered candidate, then size
 * heuristics from BENCHMARKS.md, then native/<collective> (on one node), then the first
 * candidate.
 */
#include "algo/algo.h"
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

#define PLAN_CACHE_FORMAT "mscclrt-plan-cache 1"
#define PLAN_CACHE_MAX_BYTES ((size_t)256 << 20)

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

/* ---- the plan cache --------------------------------------------------------------------------- */

void algo_plan_cache_dir(const char *setting, char *out, size_t n) {
    dcache_root(setting, out, n);
}

typedef struct { uint64_t k[2]; } PlanKey;

static PlanKey plan_key(const char *src, const MscclcDefine *defs, int ndefs) {
    PlanKey key;
    for (int i = 0; i < 2; i++) {
        uint64_t h = cg_hash(PLAN_CACHE_FORMAT, strlen(PLAN_CACHE_FORMAT), (uint64_t)i + 1);
        h = cg_hash(MSCCLC_VERSION, strlen(MSCCLC_VERSION), h);
        h = cg_hash(mscclrt_stdlib_compiler_id, strlen(mscclrt_stdlib_compiler_id), h);
        h = cg_hash(src, strlen(src), h ^ (i ? 0x9e3779b97f4a7c15ull : 0));
        for (int d = 0; d < ndefs; d++) {
            char kv[96];
            int l = snprintf(kv, sizeof kv, ";%s=%" PRId64, defs[d].name, defs[d].value);
            h = cg_hash(kv, (size_t)l, h);
        }
        key.k[i] = h;
    }
    return key;
}

/* In memory: the JSON text of every plan this process compiled or read, so that the comms of
 * one process (comm_init_all: one per GPU) compile each program once. */
typedef struct MemPlan {
    PlanKey key;
    char *json;
    struct MemPlan *next;
} MemPlan;
static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;
static MemPlan *mem_plans;

static char *mem_get(PlanKey key) {
    char *json = NULL;
    pthread_mutex_lock(&mem_mu);
    for (MemPlan *m = mem_plans; m; m = m->next)
        if (m->key.k[0] == key.k[0] && m->key.k[1] == key.k[1]) {
            size_t n = strlen(m->json) + 1;
            if ((json = malloc(n))) memcpy(json, m->json, n);
            break;
        }
    pthread_mutex_unlock(&mem_mu);
    return json;
}

static void mem_put(PlanKey key, const char *json) {
    MemPlan *m = malloc(sizeof *m);
    size_t n = strlen(json) + 1;
    char *copy = malloc(n);
    if (!m || !copy) {
        free(m);
        free(copy);
        return;
    }
    memcpy(copy, json, n);
    *m = (MemPlan){key, copy, NULL};
    pthread_mutex_lock(&mem_mu);
    for (MemPlan *o = mem_plans; o; o = o->next)
        if (o->key.k[0] == key.k[0] && o->key.k[1] == key.k[1]) { /* another thread was first */
            pthread_mutex_unlock(&mem_mu);
            free(copy);
            free(m);
            return;
        }
    m->next = mem_plans;
    mem_plans = m;
    pthread_mutex_unlock(&mem_mu);
}

/* Wraps a validated model into a public handle (takes pl). */
static mscclrt_result wrap_plan(Plan *pl, mscclrt_plan **out) {
    mscclrt_plan *h = calloc(1, sizeof *h);
    if (!h) {
        plan_free(pl);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "default collection: out of memory");
    }
    h->magic = API_PLAN_MAGIC;
    h->plan = pl;
    *out = h;
    return MSCCLRT_SUCCESS;
}

/* A cached plan's text as a handle when it is the plan we expect (valid, the program's
 * collective, world ranks); NULL otherwise, with the reason at INFO. */
static mscclrt_plan *cached_plan(const char *json, const char *what, const char *coll, int world) {
    PlanErr e;
    Plan *pl = plan_parse(json, strlen(json), what, &e);
    if (!pl) {
        LOG_INFO(LOG_SUB_PLAN, "plan cache: ignoring %s", e.msg);
        return NULL;
    }
    if (pl->ngpus != world || strcmp(pl->collective_name, coll) != 0) {
        LOG_INFO(LOG_SUB_PLAN, "plan cache: ignoring %s: a %s plan for %d ranks, expected %s for %d",
                 what, pl->collective_name, pl->ngpus, coll, world);
        plan_free(pl);
        return NULL;
    }
    mscclrt_plan *h = NULL;
    return wrap_plan(pl, &h) == MSCCLRT_SUCCESS ? h : NULL;
}

typedef struct {
    const char *file;             /* "allreduce/allpair_packet.coll" */
    const char *text;
    const char *coll;             /* "allreduce" */
    const MscclcDefine *defs;
    int ndefs;
    const DiskCache *cache;       /* <cache root>/plans; fd -1: no disk cache */
} PlanJob;

/* The compiled plan of one program: from memory, from disk, or compiled now (then stored in
 * both). *out NULL with success: the program refuses these defines (logged). */
static mscclrt_result plan_for(const PlanJob *j, mscclrt_plan **out, bool *from_cache) {
    *out = NULL;
    *from_cache = false;
    int world = (int)j->defs[0].value;
    PlanKey key = plan_key(j->text, j->defs, j->ndefs);
    char name[48];
    snprintf(name, sizeof name, "%016" PRIx64 "%016" PRIx64 ".json", key.k[0], key.k[1]);
    char *json = mem_get(key);
    if (json) {
        *out = cached_plan(json, j->file, j->coll, world);
        free(json);
        if (*out) {
            *from_cache = true;
            return MSCCLRT_SUCCESS;
        }
    }
    size_t n;
    if ((json = dcache_read(j->cache, name, PLAN_CACHE_MAX_BYTES, &n))) {
        char path[sizeof j->cache->path + sizeof name];
        snprintf(path, sizeof path, "%s/%s", j->cache->path, name);
        *out = strlen(json) == n ? cached_plan(json, path, j->coll, world) : NULL;
        if (*out) {
            mem_put(key, json);
            free(json);
            *from_cache = true;
            LOG_INFO(LOG_SUB_PLAN, "stdlib/%s N=%d: plan from cache %s", j->file, world, path);
            return MSCCLRT_SUCCESS;
        }
        free(json); /* corrupt or foreign: compiled and rewritten below */
    }
    char fname[PATH_MAX];
    snprintf(fname, sizeof fname, "stdlib/%s", j->file);
    MscclcOptions opt = {.filename = fname, .defines = j->defs, .ndefines = j->ndefs,
                         .error_limit = 1};
    MscclcResult r;
    double t0 = rt_now_s();
    MscclcStatus st = mscclc_compile(j->text, strlen(j->text), &opt, &r);
    if (st != MSCCLC_OK) {
        const char *d = r.diagnostics ? r.diagnostics : "";
        int l = (int)strcspn(d, "\n");
        if (st == MSCCLC_ERR_INPUT)
            LOG_INFO(LOG_SUB_PLAN, "default collection: %s skipped for N=%d: %.*s", fname, world,
                     l, d);
        else
            LOG_WARN("default collection: %s skipped for N=%d: internal compiler error: %.*s",
                     fname, world, l, d);
        mscclc_result_free(&r);
        return MSCCLRT_SUCCESS;
    }
    json = plan_to_json(r.plan, true, MSCCLC_PRODUCER);
    mscclc_result_free(&r);
    if (!json) return rt_fail(MSCCLRT_ERR_SYSTEM, "default collection: %s: out of memory", fname);
    /* the handle comes from the text, as on a cache hit: a hit and a miss give the same model */
    PlanErr e;
    Plan *pl = plan_parse(json, strlen(json), fname, &e);
    if (!pl) {
        free(json);
        return rt_fail(MSCCLRT_ERR_INTERNAL, "default collection: mscclc's plan does not load: %s",
                       e.msg);
    }
    LOG_INFO(LOG_SUB_PLAN, "default collection: compiled %s for N=%d in %.3f s", fname, world,
             rt_now_s() - t0);
    mem_put(key, json);
    dcache_write(j->cache, name, json, strlen(json));   /* false (logged) when off */
    free(json);
    return wrap_plan(pl, out);
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
        TRY_GOTO(plan_for(&job, &plan, &cached), res, out);
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

/* ---- the default selector --------------------------------------------------------------------- */

#define KB (1ull << 10)
#define MB (1ull << 20)

/* Size heuristics, in order of preference (BENCHMARKS.md: 2 and 4 x H200): the first row whose
 * collective and size band (max 0: unbounded) match and whose algorithm is a candidate wins.
 * Each algorithm's own rules (buffer mode, symmetric buffers, root, plan geometry) have already
 * filtered the candidates. */
static const struct {
    mscclrt_coll coll;
    uint64_t min, max;
    const char *name;
} prefer[] = {
    /* one-shot packets for small messages, two-phase packets up to 1 MB */
    {MSCCLRT_COLL_ALLREDUCE, 0, 64 * KB, "stdlib/allreduce/allpair_packet"},
    {MSCCLRT_COLL_ALLREDUCE, 0, 256 * KB, "stdlib/allreduce/hier_packet"},
    {MSCCLRT_COLL_ALLREDUCE, 0, 1 * MB, "stdlib/allreduce/rs_ag_packet"},
    /* large: read-reduce-write on peers' buffers (in place, symmetric), the 1 GiB winner */
    {MSCCLRT_COLL_ALLREDUCE, 16 * MB, 0, "stdlib/allreduce/rs_ag_read"},
    {MSCCLRT_COLL_ALLREDUCE, 0, 0, "stdlib/allreduce/rs_ag_simple"},
    {MSCCLRT_COLL_ALLREDUCE, 0, 0, "stdlib/allreduce/rs_ag_read"},
    {MSCCLRT_COLL_ALLREDUCE, 0, 0, "stdlib/allreduce/hier"},
    /* across nodes (only the multi-node programs are candidates there): one cross-node packet
     * hop while small, the two-level Simple plans above, the packet plan up to its 1 MB for
     * buffers the Simple plans cannot use (not symmetric, out of place) */
    {MSCCLRT_COLL_ALLREDUCE, 0, 0, "stdlib/allreduce/hier_packet"},
    {MSCCLRT_COLL_ALLGATHER, 0, 0, "stdlib/allgather/hier"},
    {MSCCLRT_COLL_REDUCESCATTER, 0, 0, "stdlib/reducescatter/hier"},
    {MSCCLRT_COLL_BROADCAST, 0, 0, "stdlib/broadcast/hier"},
    {MSCCLRT_COLL_REDUCE, 0, 0, "stdlib/reduce/hier"},
    {MSCCLRT_COLL_ALLTOALL, 0, 0, "stdlib/alltoall/hier"},
    {MSCCLRT_COLL_GATHER, 0, 0, "stdlib/gather/hier"},
    {MSCCLRT_COLL_SCATTER, 0, 0, "stdlib/scatter/hier"},
    {MSCCLRT_COLL_ALLGATHER, 0, 64 * KB, "stdlib/allgather/packet"},
    /* from 64 MB the copy engines beat SM copies (BENCHMARKS: they meet between 16 and 64 MB) */
    {MSCCLRT_COLL_ALLGATHER, 64 * MB, 0, "stdlib/allgather/copyengine"},
    {MSCCLRT_COLL_ALLGATHER, 0, 0, "stdlib/allgather/fullmesh"},
    {MSCCLRT_COLL_REDUCESCATTER, 0, 0, "stdlib/reducescatter/fullmesh_read"},
    {MSCCLRT_COLL_BROADCAST, 0, 64 * KB, "stdlib/broadcast/packet"},
    {MSCCLRT_COLL_BROADCAST, 0, 0, "stdlib/broadcast/direct"},
    {MSCCLRT_COLL_ALLTOALL, 0, 0, "stdlib/alltoall/fullmesh"},
};

static int find_cand(const char *name, const mscclrt_algo *const *cand, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(cand[i]->desc.name, name) == 0) return i;
    return -1;
}

bool algo_default_select_with(const AlgoTuning *t, const mscclrt_request *req,
                              const mscclrt_algo *const *cand, int n, mscclrt_choice *choice) {
    if (n <= 0) return false;
    if (t && algo_tuning_choose(t, req, cand, n, choice)) return true;
    *choice = (mscclrt_choice){0};
    /* the user's own algorithms come first: plan-based, then native */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if (cand[i]->kind == (pass ? MSCCLRT_ALGO_NATIVE : MSCCLRT_ALGO_PLAN) &&
                algo_is_registered(cand[i])) {
                choice->algo = cand[i];
                return true;
            }
    const uint64_t b = req->message_bytes;
    for (size_t r = 0; r < sizeof prefer / sizeof *prefer; r++) {
        if (prefer[r].coll != req->collective || b < prefer[r].min ||
            (prefer[r].max && b > prefer[r].max))
            continue;
        int i = find_cand(prefer[r].name, cand, n);
        if (i >= 0) {
            choice->algo = cand[i];
            return true;
        }
    }
    /* across nodes there are no built-in native algorithms (algo_native_builtins): the first
     * candidate */
    int i = -1;
    if (req->ranks_per_node == req->world_size) {
        char native[64];
        snprintf(native, sizeof native, "native/%s", mscclrt_coll_name(req->collective));
        i = find_cand(native, cand, n);
    }
    choice->algo = cand[i >= 0 ? i : 0];
    return true;
}

bool algo_default_select(const mscclrt_request *req, const mscclrt_algo *const *cand, int n,
                         mscclrt_choice *choice) {
    const AlgoTuning *t = NULL;
    if (algo_tuning_process(&t) != MSCCLRT_SUCCESS) t = NULL; /* algo_select_from reports it */
    return algo_default_select_with(t, req, cand, n, choice);
}

/*
 * algo_plan_cache.c - the default collection's compiled plans, cached in memory (per process)
 * and on disk ($MSCCLRT_CACHE_DIR/plans/<key>.json, through core/disk_cache.c: trusted
 * directories and entries only, written atomically, validated on every read), keyed by the
 * program's text, the defines and the compiler's identity (a hash of its sources taken at build
 * time), so a changed compiler never reads an older plan.
 */
#include "algo/algo.h"
#include "algo/algo_plan_cache.h"
#include "codegen/codegen.h"
#include "core/api_plan.h"
#include "core/clock.h"
#include "core/disk_cache.h"
#include "core/err.h"
#include "core/log.h"
#include "mscclc.h"

#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char mscclrt_stdlib_compiler_id[];  /* build/gen/stdlib_sources.c: hash of the
                                                    compiler's sources */

#define PLAN_CACHE_FORMAT "mscclrt-plan-cache 1"
#define PLAN_CACHE_MAX_BYTES ((size_t)256 << 20)

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

/* The name a program gives its plans: the identifier after `program` at the start of a line
 * (coll(5)); false when the text has none (then only the collective and size are compared). */
static bool program_name(const char *text, char *out, size_t n) {
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        while (*l == ' ' || *l == '\t') l++;
        if (strncmp(l, "program", 7) != 0 || (l[7] != ' ' && l[7] != '\t')) continue;
        l += 7;
        while (*l == ' ' || *l == '\t') l++;
        size_t k = 0;
        while ((l[k] == '_' || (l[k] >= 'a' && l[k] <= 'z') || (l[k] >= 'A' && l[k] <= 'Z') ||
                (k && l[k] >= '0' && l[k] <= '9')) && k + 1 < n) {
            out[k] = l[k];
            k++;
        }
        out[k] = '\0';
        return k > 0;
    }
    return false;
}

/* A cached plan's text as a handle when it is the plan we expect (valid, the program's name
 * when known, its collective, world ranks): another program's plan of the same collective and
 * size is valid too, but would run under this program's name; NULL otherwise, with the reason
 * at INFO. */
static mscclrt_plan *cached_plan(const char *json, const char *what, const char *prog,
                                 const char *coll, int world) {
    PlanErr e;
    Plan *pl = plan_parse(json, strlen(json), what, &e);
    if (!pl) {
        LOG_INFO(LOG_SUB_PLAN, "plan cache: ignoring %s", e.msg);
        return NULL;
    }
    if (pl->ngpus != world || strcmp(pl->collective_name, coll) != 0 ||
        (prog && strcmp(pl->name, prog) != 0)) {
        LOG_INFO(LOG_SUB_PLAN, "plan cache: ignoring %s: %s's %s plan for %d ranks, expected "
                 "%s's %s for %d", what, pl->name, pl->collective_name, pl->ngpus,
                 prog ? prog : "any program", coll, world);
        plan_free(pl);
        return NULL;
    }
    mscclrt_plan *h = NULL;
    return api_plan_wrap(pl, &h, "default collection") == MSCCLRT_SUCCESS ? h : NULL;
}


/* The compiled plan of one program: from memory, from disk, or compiled now (then stored in
 * both). *out NULL with success: the program refuses these defines (logged). */
mscclrt_result algo_plan_for(const PlanJob *j, mscclrt_plan **out, bool *from_cache) {
    *out = NULL;
    *from_cache = false;
    int world = (int)j->defs[0].value;
    PlanKey key = plan_key(j->text, j->defs, j->ndefs);
    char name[48];
    snprintf(name, sizeof name, "%016" PRIx64 "%016" PRIx64 ".json", key.k[0], key.k[1]);
    char prog[128];
    const char *pn = program_name(j->text, prog, sizeof prog) ? prog : NULL;
    char *json = mem_get(key);
    if (json) {
        *out = cached_plan(json, j->file, pn, j->coll, world);
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
        *out = strlen(json) == n ? cached_plan(json, path, pn, j->coll, world) : NULL;
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
    return api_plan_wrap(pl, out, "default collection");
}


/*
 * algo_tuning.c - the default selector's tuning table: a JSON file (MSCCLRT_TUNING_FILE, format
 * in libmscclrt(3) TUNING TABLE) that an autotuner writes, mapping (collective, layout,
 * architecture, data type, operator, message size) to an algorithm with its block and thread
 * counts. Validated completely when read, with errors naming the file, the entry and the field.
 * Read once per process: a missing or bad MSCCLRT_TUNING_FILE is one warning naming the file,
 * and selection goes on with its defaults (a tuner that failed must not stop every collective);
 * mscclrt_tuning_load, the application's own call, still fails on a bad file.
 * mscclrt_tuning_validate applies the same rules without installing anything: python/mscclrt
 * checks the tables it reads and writes with it, so the rules live here only.
 * Costs are O(n log n) in the file's size (the duplicate-key check sorts).
 */
#include "algo/algo.h"
#include "dtype/dtype.h"
#include "core/disk_cache.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TUNING_MAX_FILE_BYTES ((size_t)16 << 20)
#define TUNING_MAX_ENTRIES 100000
#define TUNING_MAX_BYTES 9007199254740992.0   /* 2^53: every size a JSON number holds exactly */

typedef struct {
    mscclrt_coll coll;
    int world_size, ranks_per_node, arch;  /* 0: any */
    int dtype;                     /* mscclrt_dtype, -1: any */
    int op;                        /* mscclrt_redop, -1: any */
    uint64_t min_bytes, max_bytes; /* max 0: no upper bound */
    char *algorithm;               /* owned */
    int blocks, threads;           /* 0: the algorithm's own */
} TuneEntry;

struct AlgoTuning {
    int n;
    TuneEntry *v;                  /* owned; [n], in file order (the first match wins) */
};

void algo_tuning_free(AlgoTuning *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) free(t->v[i].algorithm);
    free(t->v);
    free(t);
}

int algo_tuning_count(const AlgoTuning *t) {
    return t ? t->n : 0;
}

__attribute__((format(printf, 4, 5))) static mscclrt_result efail(const char *what, int idx,
                                                                  const char *field,
                                                                  const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (idx < 0) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: %s%s%s", what, field,
                                *field ? ": " : "", msg);
    return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: entries[%d]%s%s: %s", what, idx,
                   *field ? "." : "", field, msg);
}

static const char *json_type(const cJSON *x) {
    return cJSON_IsNumber(x) ? "a number" : cJSON_IsString(x) ? "a string"
           : cJSON_IsBool(x) ? "a boolean" : cJSON_IsNull(x) ? "null"
           : cJSON_IsArray(x) ? "an array" : "an object";
}

/* A whole number in [0, max]. */
static mscclrt_result get_count(const cJSON *x, double max, uint64_t *out, const char *what,
                                int idx) {
    if (!cJSON_IsNumber(x))
        return efail(what, idx, x->string, "expected a number, got %s", json_type(x));
    double d = x->valuedouble;
    if (d < 0) return efail(what, idx, x->string, "%.17g is negative", d);
    if (d > TUNING_MAX_BYTES) return efail(what, idx, x->string, "%.17g is larger than 2^53", d);
    if (d != (double)(uint64_t)d) return efail(what, idx, x->string, "%.17g is not an integer", d);
    if (d > max) return efail(what, idx, x->string, "%.17g is larger than %.17g", d, max);
    *out = (uint64_t)d;
    return MSCCLRT_SUCCESS;
}

static mscclrt_result get_string(const cJSON *x, const char **out, const char *what, int idx) {
    if (!cJSON_IsString(x) || !x->valuestring)
        return efail(what, idx, x->string, "expected a string, got %s", json_type(x));
    *out = x->valuestring;
    return MSCCLRT_SUCCESS;
}

static int cmp_key(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Keys may not repeat (cJSON keeps both; which one counts would be a guess). Sorted, not
 * compared pair by pair: a 16 MiB table may hold an object of 10^6 keys, and all pairs of those
 * took minutes at the first collective of every process. Few keys (every entry): pairs. */
static mscclrt_result no_duplicates(const cJSON *o, const char *what, int idx) {
    size_t n = 0;
    for (const cJSON *a = o->child; a; a = a->next) n++;
    if (n <= 16) {
        for (const cJSON *a = o->child; a; a = a->next)
            for (const cJSON *b = a->next; b; b = b->next)
                if (a->string && b->string && !strcmp(a->string, b->string))
                    return efail(what, idx, a->string, "appears twice");
        return MSCCLRT_SUCCESS;
    }
    const char **keys = malloc(n * sizeof *keys);
    if (!keys) return rt_fail(MSCCLRT_ERR_SYSTEM, "%s: out of memory", what);
    size_t k = 0;
    for (const cJSON *a = o->child; a; a = a->next)
        if (a->string) keys[k++] = a->string;
    qsort(keys, k, sizeof *keys, cmp_key);
    mscclrt_result res = MSCCLRT_SUCCESS;
    for (size_t i = 1; i < k && res == MSCCLRT_SUCCESS; i++)
        if (!strcmp(keys[i - 1], keys[i])) res = efail(what, idx, keys[i], "appears twice");
    free(keys);
    return res;
}

/* Checks an algorithm name against what the library can know now: the stdlib programs (all of
 * them, whatever the layout) and the native built-ins' "native/<collective>..." pattern; any
 * other name is a user's algorithm, registered later. */
static mscclrt_result check_algorithm(const char *name, mscclrt_coll coll, const char *what,
                                      int idx) {
    const char *cn = mscclrt_coll_name(coll);
    size_t cl = strlen(cn);
    if (!*name) return efail(what, idx, "algorithm", "empty name");
    if (!strncmp(name, "stdlib/", 7)) {
        if (!algo_stdlib_has(name + 7))
            return efail(what, idx, "algorithm", "unknown algorithm '%s' (no such stdlib program)",
                         name);
        if (strncmp(name + 7, cn, cl) != 0 || name[7 + cl] != '/')
            return efail(what, idx, "algorithm", "'%s' does not serve %s", name, cn);
    }
    if (!strncmp(name, "native/", 7) && strncmp(name + 7, cn, cl) != 0)
        return efail(what, idx, "algorithm", "'%s' does not serve %s (native algorithms are "
                     "named native/<collective>)", name, cn);
    return MSCCLRT_SUCCESS;
}

static mscclrt_result parse_entry(const cJSON *o, TuneEntry *e, const char *what, int idx) {
    if (!cJSON_IsObject(o)) return efail(what, idx, "", "expected an object, got %s", json_type(o));
    TRY(no_duplicates(o, what, idx));
    *e = (TuneEntry){.dtype = -1, .op = -1};
    bool have_coll = false;
    const char *algorithm = NULL, *s = NULL;
    uint64_t v = 0;
    for (const cJSON *x = o->child; x; x = x->next) {
        const char *k = x->string;
        if (!strcmp(k, "collective")) {
            TRY(get_string(x, &s, what, idx));
            if (!algo_coll_from_name(s, &e->coll))
                return efail(what, idx, k, "unknown collective '%s' (expected allreduce, "
                             "allgather, reducescatter, broadcast, reduce, alltoall, gather, "
                             "scatter or sendrecv)", s);
            have_coll = true;
        } else if (!strcmp(k, "algorithm")) {
            TRY(get_string(x, &algorithm, what, idx));
        } else if (!strcmp(k, "dtype")) {
            TRY(get_string(x, &s, what, idx));
            mscclrt_dtype t;
            if (strcmp(s, "any") != 0 && !dtype_parse(s, &t))
                return efail(what, idx, k, "unknown data type '%s' (expected any, float16, "
                             "bfloat16, float32, float64, int8, uint8, int32, uint32, int64, "
                             "uint64, fp8_e4m3 or fp8_e5m2)", s);
            e->dtype = strcmp(s, "any") ? (int)t : -1;
        } else if (!strcmp(k, "op")) {
            TRY(get_string(x, &s, what, idx));
            mscclrt_redop op;
            if (strcmp(s, "any") != 0 && !dtype_redop_parse(s, &op))
                return efail(what, idx, k, "unknown operator '%s' (expected any, sum, prod, max, "
                             "min or avg)", s);
            e->op = strcmp(s, "any") ? (int)op : -1;
        } else if (!strcmp(k, "world_size") || !strcmp(k, "ranks_per_node")) {
            TRY(get_count(x, 1 << 20, &v, what, idx));
            *(k[0] == 'w' ? &e->world_size : &e->ranks_per_node) = (int)v;
        } else if (!strcmp(k, "arch")) {
            TRY(get_count(x, 10000, &v, what, idx));
            e->arch = (int)v;
        } else if (!strcmp(k, "min_bytes")) {
            TRY(get_count(x, TUNING_MAX_BYTES, &e->min_bytes, what, idx));
        } else if (!strcmp(k, "max_bytes")) {
            TRY(get_count(x, TUNING_MAX_BYTES, &e->max_bytes, what, idx));
        } else if (!strcmp(k, "blocks")) {
            TRY(get_count(x, 1024, &v, what, idx));
            e->blocks = (int)v;
        } else if (!strcmp(k, "threads")) {
            TRY(get_count(x, 1024, &v, what, idx));
            if (v % 32) return efail(what, idx, k, "%" PRIu64 " is not a multiple of 32", v);
            e->threads = (int)v;
        } else {
            return efail(what, idx, "", "unknown field '%s' (expected collective, algorithm, "
                         "world_size, ranks_per_node, arch, dtype, op, min_bytes, max_bytes, "
                         "blocks or threads)", k);
        }
    }
    if (!have_coll) return efail(what, idx, "collective", "missing");
    if (!algorithm) return efail(what, idx, "algorithm", "missing");
    if (e->max_bytes && e->min_bytes > e->max_bytes)
        return efail(what, idx, "min_bytes", "%" PRIu64 " is above max_bytes %" PRIu64,
                     e->min_bytes, e->max_bytes);
    if (e->world_size && e->ranks_per_node &&
        (e->ranks_per_node > e->world_size || e->world_size % e->ranks_per_node))
        return efail(what, idx, "ranks_per_node", "%d does not divide world_size %d",
                     e->ranks_per_node, e->world_size);
    TRY(check_algorithm(algorithm, e->coll, what, idx));
    size_t n = strlen(algorithm) + 1;
    if (!(e->algorithm = malloc(n))) return rt_fail(MSCCLRT_ERR_SYSTEM, "%s: out of memory", what);
    memcpy(e->algorithm, algorithm, n);
    return MSCCLRT_SUCCESS;
}

static mscclrt_result parse_root(const cJSON *root, AlgoTuning *t, const char *what) {
    if (!cJSON_IsObject(root))
        return efail(what, -1, "", "expected a JSON object at the top level, got %s",
                     json_type(root));
    TRY(no_duplicates(root, what, -1));
    const cJSON *entries = NULL;
    bool have_version = false;
    for (const cJSON *x = root->child; x; x = x->next) {
        if (!strcmp(x->string, "version")) {
            uint64_t v;
            TRY(get_count(x, 1 << 30, &v, what, -1));
            if (v != 1) return efail(what, -1, "version", "%" PRIu64 " is not supported "
                                     "(this library reads version 1)", v);
            have_version = true;
        } else if (!strcmp(x->string, "entries")) {
            if (!cJSON_IsArray(x))
                return efail(what, -1, "entries", "expected an array, got %s", json_type(x));
            entries = x;
        } else if (strcmp(x->string, "meta") != 0) {   /* "meta": the tuner's notes, any JSON */
            return efail(what, -1, "", "unknown field '%s' (expected version, entries or meta)",
                         x->string);
        }
    }
    if (!have_version) return efail(what, -1, "version", "missing");
    if (!entries) return efail(what, -1, "entries", "missing");
    int n = cJSON_GetArraySize(entries);
    if (n > TUNING_MAX_ENTRIES)
        return efail(what, -1, "entries", "%d entries, more than the limit of %d", n,
                     TUNING_MAX_ENTRIES);
    if (n > 0 && !(t->v = calloc((size_t)n, sizeof *t->v)))
        return rt_fail(MSCCLRT_ERR_SYSTEM, "%s: out of memory", what);
    int i = 0;
    for (const cJSON *x = entries->child; x; x = x->next, i++) {
        TRY(parse_entry(x, &t->v[i], what, i));
        t->n = i + 1;
    }
    return MSCCLRT_SUCCESS;
}

mscclrt_result algo_tuning_parse(const char *text, size_t len, const char *what,
                                 AlgoTuning **out) {
    *out = NULL;
    if (!what) what = "<tuning table>";
    if (memchr(text, 0, len))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: contains a NUL byte (not JSON)", what);
    char *buf = malloc(len + 1);
    AlgoTuning *t = calloc(1, sizeof *t);
    if (!buf || !t) {
        free(buf);
        free(t);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "%s: out of memory", what);
    }
    memcpy(buf, text, len);
    buf[len] = 0;
    const char *end = NULL;
    cJSON *root = plan_cjson_parse(buf, len + 1, &end);
    mscclrt_result res;
    if (!root) {
        size_t off = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : len;
        int line = 1, col = 1;
        for (size_t i = 0; i < off; i++) {
            if (buf[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        res = rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s:%d:%d: not JSON (syntax error%s)", what, line,
                      col, off >= len ? " at the end of the text" : "");
        goto out;
    }
    res = parse_root(root, t, what);
out:
    cJSON_Delete(root);
    free(buf);
    if (res != MSCCLRT_SUCCESS) {
        algo_tuning_free(t);
        return res;
    }
    *out = t;
    return MSCCLRT_SUCCESS;
}

/* The file is read by the one bounded reader of the library (core/disk_cache.h), so a table
 * path follows the rules of mscclrt_read_file, which python/mscclrt reads tables with. */
mscclrt_result algo_tuning_load(const char *path, AlgoTuning **out) {
    *out = NULL;
    size_t n = 0;
    const char *why = NULL;
    char *buf = dcache_read_path(path, TUNING_MAX_FILE_BYTES, &n, &why);
    if (!buf) {
        if (errno == EFBIG)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "tuning table %s: larger than 16 MiB", path);
        return rt_fail(errno == ENOMEM || errno == EIO ? MSCCLRT_ERR_SYSTEM
                       : MSCCLRT_ERR_INVALID_ARG, "tuning table %s: cannot read: %s", path,
                       why ? why : "unknown reason");
    }
    mscclrt_result res = algo_tuning_parse(buf, n, path, out);
    free(buf);
    return res;
}

bool algo_tuning_choose(const AlgoTuning *t, const mscclrt_request *req,
                        const mscclrt_algo *const *cand, int n, mscclrt_choice *choice) {
    for (int i = 0; t && i < t->n; i++) {
        const TuneEntry *e = &t->v[i];
        if (e->coll != req->collective || (e->world_size && e->world_size != req->world_size) ||
            (e->ranks_per_node && e->ranks_per_node != req->ranks_per_node) ||
            (e->arch && e->arch != req->arch) || (e->dtype >= 0 && e->dtype != (int)req->dtype) ||
            (e->op >= 0 && e->op != req->op) || req->message_bytes < e->min_bytes ||
            (e->max_bytes && req->message_bytes > e->max_bytes))
            continue;
        for (int c = 0; c < n; c++)
            if (strcmp(cand[c]->desc.name, e->algorithm) == 0) {
                *choice = (mscclrt_choice){cand[c], e->blocks, e->threads};
                return true;
            }
    }
    return false;
}

/* ---- the process's table ----------------------------------------------------------------------- */

static pthread_once_t proc_once = PTHREAD_ONCE_INIT;
static AlgoTuning *_Atomic proc_table;   /* the table in use; NULL: none */
/* Tables replaced by mscclrt_tuning_load: kept until the process exits, because a selection on
 * another thread may still be reading the old one (replacing is rare: once per tuning run). */
static pthread_mutex_t proc_mu = PTHREAD_MUTEX_INITIALIZER;
static AlgoTuning **proc_old;
static int proc_nold;

/* Once per process (pthread_once): so the warning below is printed once, not per collective. */
static void proc_load(void) {
    const char *path = param_str(PARAM_TUNING_FILE);
    if (!*path) return;
    AlgoTuning *t = NULL;
    if (algo_tuning_load(path, &t) != MSCCLRT_SUCCESS) {
        /* rt_fail has logged the reason (file, entry, field) at WARN; say what happens next,
         * and leave no error behind (the selection that triggered the read succeeds) */
        LOG_WARN("MSCCLRT_TUNING_FILE=%s is not used (the reason is above); the default "
                 "selector goes on without a tuning table", path);
        rt_clear_error();
        return;
    }
    atomic_store(&proc_table, t);
    LOG_INFO(LOG_SUB_INIT, "tuning table %s: %d entries", path, t->n);
}

mscclrt_result algo_tuning_process(const AlgoTuning **out) {
    pthread_once(&proc_once, proc_load);
    *out = atomic_load(&proc_table);
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API mscclrt_result mscclrt_tuning_load(const char *path) {
    pthread_once(&proc_once, proc_load);   /* the environment's table never lands after ours */
    AlgoTuning *t = NULL;
    if (path && *path) TRY(algo_tuning_load(path, &t));
    pthread_mutex_lock(&proc_mu);
    AlgoTuning **grown = realloc(proc_old, (size_t)(proc_nold + 1) * sizeof *grown);
    if (!grown) {
        pthread_mutex_unlock(&proc_mu);
        algo_tuning_free(t);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "mscclrt_tuning_load: out of memory");
    }
    proc_old = grown;
    AlgoTuning *prev = atomic_exchange(&proc_table, t);
    if (prev) proc_old[proc_nold++] = prev;
    pthread_mutex_unlock(&proc_mu);
    algo_registry_bump_epoch();   /* cached selections were made with the old table */
    if (t)
        LOG_INFO(LOG_SUB_INIT, "tuning table %s: %d entries (loaded by the application)", path, t->n);
    else
        LOG_INFO(LOG_SUB_INIT, "tuning table dropped by the application");
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API mscclrt_result mscclrt_tuning_validate(const char *path, const char *text,
                                                   size_t len, int *entries) {
    if (entries) *entries = 0;
    if (!text && (!path || !*path))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_tuning_validate: neither a text nor a "
                       "path to read");
    AlgoTuning *t = NULL;
    TRY(text ? algo_tuning_parse(text, len, path, &t) : algo_tuning_load(path, &t));
    if (entries) *entries = t->n;
    algo_tuning_free(t);   /* validated only: the process's table is not touched */
    return MSCCLRT_SUCCESS;
}

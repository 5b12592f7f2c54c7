/*
 * plan_load.c - MSCCL++ JSON execution plan -> plan model (plan.h). Everything in the file is
 * checked before anything is used: a hostile plan gets one message naming the JSON path and the
 * value, never a crash, an out-of-bounds read or an allocation that the file's own size does not
 * bound. This file parses (types, strings, counts that size the model's fixed arrays);
 * plan_validate.c validates the model (index spaces, limits, pairing), which is all the compiler
 * needs for its in-memory plans.
 */
#include "plan.h"
#include "plan_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Loader limits beyond the executor's (plan.h, shared with the compiler): they bound memory
 * for hostile input. */
#define LOAD_MAX_FILE_BYTES PLAN_MAX_FILE_BYTES
#define LOAD_MAX_RANKS      PLAN_MAX_RANKS
#define LOAD_MAX_TBS        PLAN_MAX_TBS
#define LOAD_MAX_TOTAL_OPS  PLAN_MAX_TOTAL_OPS


/* cJSON_ParseWithLengthOpts also records failures in a process-global variable (the one
 * cJSON_GetErrorPtr reads); parses are serialised so concurrent loads do not race on it. */
static pthread_mutex_t cjson_lock = PTHREAD_MUTEX_INITIALIZER;

struct cJSON *plan_cjson_parse(const char *buf, size_t len, const char **end) {
    pthread_mutex_lock(&cjson_lock);
    cJSON *root = cJSON_ParseWithLengthOpts(buf, len, end, 1);
    pthread_mutex_unlock(&cjson_lock);
    return root;
}

/* A number whose text is needed because double cannot hold it exactly (> 2^53). */
typedef struct {
    const cJSON *node;
    const char *text;          /* start of the number in the source */
} BigNum;

typedef struct {
    const char *what;          /* file name for messages */
    PlanErr *err;
    bool failed;               /* the first message is kept */
    BigNum *big;               /* owned; sorted by node */
    size_t nbig;
    long total_ops;
    long max_tb_ops;           /* ops per thread block (flattened): MSCCL++'s 64 for plans that
                                  target it, else only the plan-wide LOAD_MAX_TOTAL_OPS */
} Ld;

/* ---- messages -------------------------------------------------------------------------------- */

bool plan_vfail(PlanErr *err, const char *what, const char *path, const char *fmt, va_list ap) {
    if (!err) return false;
    int n = snprintf(err->msg, sizeof err->msg, "%s: ", what ? what : "<memory>");
    if (n < 0 || (size_t)n >= sizeof err->msg) return false;
    if (path && *path) {
        int m = snprintf(err->msg + n, sizeof err->msg - (size_t)n, "%s: ", path);
        if (m < 0) return false;
        n += m;
        if ((size_t)n >= sizeof err->msg) return false;
    }
    vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
    return false;
}

static bool lfail(Ld *L, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool lfail(Ld *L, const char *path, const char *fmt, ...) {
    if (L->failed) return false;
    L->failed = true;
    va_list ap;
    va_start(ap, fmt);
    plan_vfail(L->err, L->what, path, fmt, ap);
    va_end(ap);
    return false;
}

/* snprintf into a PLAN_PATH_MAX buffer; paths are short by construction, truncation is harmless */
void plan_path_fmt(char *dst, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, PLAN_PATH_MAX, fmt, ap);
    va_end(ap);
}

void plan_path_key(char *dst, const char *base, const char *key) {
    char tmp[PLAN_PATH_MAX];
    plan_path_fmt(tmp, "%s%s%s", base, *base ? "." : "", key);
    memcpy(dst, tmp, PLAN_PATH_MAX);
}

void plan_path_idx(char *dst, const char *base, int i) {
    char tmp[PLAN_PATH_MAX];
    plan_path_fmt(tmp, "%s[%d]", base, i);
    memcpy(dst, tmp, PLAN_PATH_MAX);
}

static const char *json_type_name(const cJSON *it) {
    if (cJSON_IsNumber(it)) return "a number";
    if (cJSON_IsString(it)) return "a string";
    if (cJSON_IsArray(it)) return "an array";
    if (cJSON_IsObject(it)) return "an object";
    if (cJSON_IsBool(it)) return "a boolean";
    if (cJSON_IsNull(it)) return "null";
    return "an invalid value";
}

/* Writes a JSON number for a message: integers exactly, anything else with %g. */
static const char *num_text(double v, char buf[40]) {
    if (v == floor(v) && fabs(v) < 1e18) snprintf(buf, 40, "%.0f", v);
    else snprintf(buf, 40, "%.17g", v);
    return buf;
}

/* ---- exact big integers ------------------------------------------------------------------------
 * cJSON keeps numbers as double. uint64 fields (max_message_size is 2^64-1 in DSL plans) need
 * the digits: number tokens appear in the text in the same order as number nodes in a
 * depth-first walk of the tree, so the k-th long token belongs to the k-th number node. */

static size_t skip_string(const char *s, size_t i, size_t len) {
    for (i++; i < len; i++) {
        if (s[i] == '\\') i++;
        else if (s[i] == '"') return i + 1;
    }
    return len;
}

typedef struct {
    size_t ordinal;            /* index among all number tokens */
    const char *text;
} LongTok;

static bool collect_nodes(const cJSON *n, size_t *ordinal, const LongTok *toks, size_t ntoks,
                          size_t *next, BigNum *out, size_t *nout) {
    for (; n; n = n->next) {
        if (cJSON_IsNumber(n)) {
            if (*next < ntoks && toks[*next].ordinal == *ordinal) {
                out[*nout].node = n;
                out[*nout].text = toks[*next].text;
                (*nout)++;
                (*next)++;
            }
            (*ordinal)++;
        } else if (n->child && !collect_nodes(n->child, ordinal, toks, ntoks, next, out, nout)) {
            return false;
        }
    }
    return true;
}

static int bignum_cmp(const void *a, const void *b) {
    const cJSON *x = ((const BigNum *)a)->node, *y = ((const BigNum *)b)->node;
    return x < y ? -1 : x > y;
}

/* Builds L->big. On a count mismatch (never expected) the table stays empty and big numbers
 * are read from their double value. false only on OOM. */
static bool index_big_numbers(Ld *L, const cJSON *root, const char *s, size_t len) {
    size_t ntok = 0, nlong = 0, cap = 0;
    LongTok *toks = NULL;
    for (size_t i = 0; i < len;) {
        char c = s[i];
        if (c == '"') {
            i = skip_string(s, i, len);
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t j = i;
            while (j < len && (strchr("0123456789+-.eE", s[j]) != NULL) && s[j]) j++;
            if (j - i > 15) {
                if (nlong == cap) {
                    size_t nc = cap ? cap * 2 : 16;
                    LongTok *t = realloc(toks, nc * sizeof *t);
                    if (!t) {
                        free(toks);
                        return false;
                    }
                    toks = t;
                    cap = nc;
                }
                toks[nlong].ordinal = ntok;
                toks[nlong].text = s + i;
                nlong++;
            }
            ntok++;
            i = j;
        } else {
            i++;
        }
    }
    if (nlong == 0) return true;
    L->big = malloc(nlong * sizeof *L->big);
    if (!L->big) {
        free(toks);
        return false;
    }
    size_t ordinal = 0, next = 0, nout = 0;
    collect_nodes(root, &ordinal, toks, nlong, &next, L->big, &nout);
    free(toks);
    if (ordinal != ntok || nout != nlong) { /* should not happen: fall back to doubles */
        free(L->big);
        L->big = NULL;
        return true;
    }
    L->nbig = nout;
    qsort(L->big, L->nbig, sizeof *L->big, bignum_cmp);
    return true;
}

static const char *bignum_text(const Ld *L, const cJSON *n) {
    BigNum key = {.node = n};
    const BigNum *b = L->big ? bsearch(&key, L->big, L->nbig, sizeof *L->big, bignum_cmp) : NULL;
    return b ? b->text : NULL;
}

/* ---- typed access ------------------------------------------------------------------------------ */

/* The member `key` of obj, NULL if absent. A key given twice is an error, since JSON readers
 * disagree on which one wins. `required` reports a missing key. */
static const cJSON *get(Ld *L, const cJSON *obj, const char *path, const char *key, bool required) {
    const cJSON *found = NULL;
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (!c->string || strcmp(c->string, key) != 0) continue;
        if (found) {
            lfail(L, path, "key '%s' appears twice", key);
            return NULL;
        }
        found = c;
    }
    if (!found && required) lfail(L, path, "missing required key '%s'", key);
    return found;
}

static bool want(Ld *L, const cJSON *it, const char *path, bool ok, const char *expected) {
    if (ok) return true;
    return lfail(L, path, "expected %s, got %s", expected, json_type_name(it));
}

static const cJSON *get_obj(Ld *L, const cJSON *obj, const char *path, const char *key,
                            bool required, char *kpath) {
    plan_path_key(kpath, path, key);
    const cJSON *it = get(L, obj, path, key, required);
    if (!it) return NULL;
    return want(L, it, kpath, cJSON_IsObject(it), "an object") ? it : NULL;
}

/* An array member; *n = its length. Absent optional: returns NULL with *n = 0. */
static const cJSON *get_arr(Ld *L, const cJSON *obj, const char *path, const char *key,
                            bool required, char *kpath, int *n) {
    *n = 0;
    plan_path_key(kpath, path, key);
    const cJSON *it = get(L, obj, path, key, required);
    if (!it) return NULL;
    if (!want(L, it, kpath, cJSON_IsArray(it), "an array")) return NULL;
    *n = cJSON_GetArraySize(it);
    return it;
}

static bool get_bool(Ld *L, const cJSON *obj, const char *path, const char *key, bool required,
                     bool def, bool *out) {
    char kp[PLAN_PATH_MAX];
    plan_path_key(kp, path, key);
    *out = def;
    const cJSON *it = get(L, obj, path, key, required);
    if (!it) return !L->failed;
    if (!want(L, it, kp, cJSON_IsBool(it), "true or false")) return false;
    *out = cJSON_IsTrue(it);
    return true;
}

static const char *get_str(Ld *L, const cJSON *obj, const char *path, const char *key,
                           bool required) {
    char kp[PLAN_PATH_MAX];
    plan_path_key(kp, path, key);
    const cJSON *it = get(L, obj, path, key, required);
    if (!it) return NULL;
    if (!want(L, it, kp, cJSON_IsString(it) && it->valuestring, "a string")) return NULL;
    return it->valuestring;
}

/* An integral number in [lo, hi] (item form; path names the item). */
static bool int_item(Ld *L, const cJSON *it, const char *path, long long lo, long long hi,
                     long long *out) {
    char b[40];
    if (!want(L, it, path, cJSON_IsNumber(it), "an integer")) return false;
    double v = it->valuedouble;
    if (v != floor(v) || !isfinite(v)) return lfail(L, path, "%s is not an integer", num_text(v, b));
    if (v < (double)lo || v > (double)hi)
        return lfail(L, path, "%s is out of range [%lld, %lld]", num_text(v, b), lo, hi);
    *out = (long long)v;
    return true;
}

static bool get_int(Ld *L, const cJSON *obj, const char *path, const char *key, bool required,
                    long long def, long long lo, long long hi, long long *out) {
    char kp[PLAN_PATH_MAX];
    plan_path_key(kp, path, key);
    *out = def;
    const cJSON *it = get(L, obj, path, key, required);
    if (!it) return !L->failed;
    return int_item(L, it, kp, lo, hi, out);
}

/* An unsigned integer up to `hi`, read exactly even above 2^53. */
static bool u64_item(Ld *L, const cJSON *it, const char *path, uint64_t hi, uint64_t *out) {
    char b[40];
    if (!want(L, it, path, cJSON_IsNumber(it), "an integer")) return false;
    double v = it->valuedouble;
    if (v != floor(v) || !isfinite(v)) return lfail(L, path, "%s is not an integer", num_text(v, b));
    if (v < 0) return lfail(L, path, "%s is negative", num_text(v, b));
    uint64_t u;
    const char *t = v >= 9007199254740992.0 ? bignum_text(L, it) : NULL;
    if (t && *t >= '0' && *t <= '9') {
        u = 0;
        size_t i = 0;
        bool digits_only = true;
        for (; t[i] >= '0' && t[i] <= '9'; i++) {
            unsigned d = (unsigned)(t[i] - '0');
            if (u > (UINT64_MAX - d) / 10)
                return lfail(L, path, "%.*s is larger than %" PRIu64, (int)(i + 1) > 30 ? 30 :
                             (int)(i + 1), t, UINT64_MAX);
            u = u * 10 + d;
        }
        if (t[i] == '.' || t[i] == 'e' || t[i] == 'E') digits_only = false;
        if (!digits_only) {  /* 1.8e19 and the like: the double is all we have */
            if (v >= 18446744073709551616.0)
                return lfail(L, path, "%s is larger than %" PRIu64, num_text(v, b), UINT64_MAX);
            u = (uint64_t)v;
        }
    } else {
        if (v >= 18446744073709551616.0)
            return lfail(L, path, "%s is larger than %" PRIu64, num_text(v, b), UINT64_MAX);
        u = (uint64_t)v;
    }
    if (u > hi) return lfail(L, path, "%" PRIu64 " is larger than %" PRIu64, u, hi);
    *out = u;
    return true;
}

static bool get_u64(Ld *L, const cJSON *obj, const char *path, const char *key, bool required,
                    uint64_t def, uint64_t hi, uint64_t *out) {
    char kp[PLAN_PATH_MAX];
    plan_path_key(kp, path, key);
    *out = def;
    const cJSON *it = get(L, obj, path, key, required);
    if (!it) return !L->failed;
    return u64_item(L, it, kp, hi, out);
}

static bool get_u32(Ld *L, const cJSON *obj, const char *path, const char *key, bool required,
                    uint32_t *out) {
    uint64_t v;
    if (!get_u64(L, obj, path, key, required, 0, UINT32_MAX, &v)) return false;
    *out = (uint32_t)v;
    return true;
}

/* An array of ints (within int range) into out[max]; `limit` explains max in the message. */
static bool int_list(Ld *L, const cJSON *arr, const char *path, int *out, int max, int *n,
                     const char *limit) {
    int cnt = cJSON_GetArraySize(arr);
    if (cnt > max)
        return lfail(L, path, "%d entries, more than the limit of %d %s", cnt, max, limit);
    int i = 0;
    for (const cJSON *c = arr->child; c; c = c->next, i++) {
        char ip[PLAN_PATH_MAX];
        long long v;
        plan_path_idx(ip, path, i);
        if (!int_item(L, c, ip, INT_MIN, INT_MAX, &v)) return false;
        out[*n + i] = (int)v;
    }
    *n += cnt;
    return true;
}

/* ---- enums ----------------------------------------------------------------------------------- */

static bool parse_buf(Ld *L, const char *s, const char *path, PlanBuf *out) {
    for (int b = 0; b < PLAN_BUF_COUNT; b++)
        if (strcmp(s, plan_buf_name((PlanBuf)b)) == 0) {
            *out = (PlanBuf)b;
            return true;
        }
    return lfail(L, path, "unknown buffer type '%s' (expected \"i\", \"o\" or \"s\")",
                 PLAN_ESC(s));
}

/* "memory", "port", "switch", and "none" where allow_none. */
static bool parse_chan(Ld *L, const char *s, const char *path, bool allow_none, PlanChanType *out) {
    for (int t = 0; t <= PLAN_CHAN_NONE; t++)
        if (strcmp(s, plan_chan_name((PlanChanType)t)) == 0 && (allow_none || t != PLAN_CHAN_NONE)) {
            *out = (PlanChanType)t;
            return true;
        }
    return lfail(L, path, "unknown channel type '%s' (expected \"memory\", \"port\"%s)",
                 PLAN_ESC(s), allow_none ? ", \"switch\" or \"none\"" : " or \"switch\"");
}

/* ---- ops ------------------------------------------------------------------------------------- */

static bool parse_ref(Ld *L, const cJSON *e, const char *path, PlanRef *r) {
    char kp[PLAN_PATH_MAX];
    if (!want(L, e, path, cJSON_IsObject(e), "an object")) return false;
    const cJSON *type = get(L, e, path, "type", false);
    const cJSON *bid = get(L, e, path, "buffer_id", false);
    const cJSON *sid = get(L, e, path, "switch_channel_id", false);
    if (L->failed) return false;
    int kinds = (type != NULL) + (bid != NULL) + (sid != NULL);
    if (kinds == 0)
        return lfail(L, path, "needs one of 'type' (local), 'buffer_id' (remote) or "
                              "'switch_channel_id' (switch)");
    if (kinds > 1)
        return lfail(L, path, "has more than one of 'type', 'buffer_id' and 'switch_channel_id'");
    long long v;
    if (type) {
        plan_path_key(kp, path, "type");
        if (!want(L, type, kp, cJSON_IsString(type) && type->valuestring, "a string")) return false;
        if (!parse_buf(L, type->valuestring, kp, &r->type)) return false;
        r->kind = PLAN_REF_LOCAL;
    } else {
        const cJSON *it = bid ? bid : sid;
        plan_path_key(kp, path, bid ? "buffer_id" : "switch_channel_id");
        if (!int_item(L, it, kp, INT_MIN, INT_MAX, &v)) return false;
        r->id = (int)v;
        r->kind = bid ? PLAN_REF_REMOTE : PLAN_REF_SWITCH;
    }
    if (!get_u32(L, e, path, "index", true, &r->index)) return false;
    if (!get_u32(L, e, path, "size", true, &r->size)) return false;
    if (!get_int(L, e, path, "rank", false, -1, INT_MIN, INT_MAX, &v)) return false;
    r->rank = (int)v;
    return true;
}

static bool parse_refs(Ld *L, const cJSON *op, const char *path, const char *key, PlanRef *refs,
                       int *n) {
    char kp[PLAN_PATH_MAX];
    int cnt;
    const cJSON *arr = get_arr(L, op, path, key, false, kp, &cnt);
    if (!arr) return !L->failed;
    if (cnt > PLAN_MAX_OP_ENTRIES)
        return lfail(L, kp, "%d entries, more than the executor's limit of %d", cnt,
                     PLAN_MAX_OP_ENTRIES);
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        char ep[PLAN_PATH_MAX];
        plan_path_idx(ep, kp, i);
        if (!parse_ref(L, e, ep, &refs[i])) return false;
    }
    *n = cnt;
    return true;
}

static bool parse_op(Ld *L, const cJSON *o, const char *path, PlanOp *op, bool inner);

static bool parse_pipeline(Ld *L, const cJSON *o, const char *path, PlanOp *op) {
    char kp[PLAN_PATH_MAX];
    const cJSON *ic = get_obj(L, o, path, "iter_context", true, kp);
    if (!ic) return false;
    if (!get_u64(L, ic, kp, "unit_size", true, 0, UINT64_MAX, &op->unit_size)) return false;
    if (!get_u32(L, ic, kp, "num_chunks", true, &op->num_chunks)) return false;
    int n;
    const cJSON *arr = get_arr(L, o, path, "ops", true, kp, &n);
    if (!arr) return false;
    if (n > L->max_tb_ops - 1)
        return lfail(L, kp, "%d ops, more than a thread block of MSCCL++'s executor can hold (%d "
                            "including the pipeline itself; the plan's \"target\" is \"mscclpp\")",
                     n, PLAN_MAX_OPS_PER_TB);
    if (n > 0) {
        op->inner = calloc((size_t)n, sizeof *op->inner);
        if (!op->inner) return lfail(L, kp, "out of memory");
        op->ninner = n;
        for (int i = 0; i < n; i++) plan_op_init(&op->inner[i], PLAN_OP_NOP);
    }
    int i = 0;
    for (const cJSON *c = arr->child; c; c = c->next, i++) {
        char ip[PLAN_PATH_MAX];
        plan_path_idx(ip, kp, i);
        if (!parse_op(L, c, ip, &op->inner[i], true)) return false;
    }
    return true;
}

static bool parse_op(Ld *L, const cJSON *o, const char *path, PlanOp *op, bool inner) {
    char kp[PLAN_PATH_MAX];
    if (!want(L, o, path, cJSON_IsObject(o), "an object")) return false;
    const char *name = get_str(L, o, path, "name", true);
    if (!name) return false;
    PlanOpKind kind;
    plan_path_key(kp, path, "name");
    if (strcmp(name, "glre") == 0)
        return lfail(L, kp, "op 'glre' is not supported: MSCCL++'s executor only runs it fused "
                            "with a following gstore as 'glres' (\"Invalid operation type: glre\")");
    if (!plan_op_from_name(name, &kind)) return lfail(L, kp, "unknown op '%s'", PLAN_ESC(name));
    plan_op_init(op, kind);
    if (kind == PLAN_OP_PIPELINE && inner)
        return lfail(L, kp, "nested pipelines are not supported");

    const char *ct = get_str(L, o, path, "channel_type", false);
    if (L->failed) return false;
    if (ct) {
        plan_path_key(kp, path, "channel_type");
        if (!parse_chan(L, ct, kp, true, &op->chan_type)) return false;
    }
    int n;
    const cJSON *arr = get_arr(L, o, path, "channel_ids", false, kp, &n);
    if (arr && !int_list(L, arr, kp, op->chan_ids, PLAN_MAX_OP_CHANNELS, &op->nchan,
                         "channels per op"))
        return false;
    arr = get_arr(L, o, path, "semaphore_ids", kind == PLAN_OP_SEM_ACQUIRE ||
                  kind == PLAN_OP_SEM_RELEASE, kp, &n);
    if (arr && !int_list(L, arr, kp, op->sem_ids, PLAN_MAX_OP_SEMAPHORES, &op->nsem,
                         "semaphores per op"))
        return false;
    if (L->failed) return false;
    if (!parse_refs(L, o, path, "src_buff", op->src, &op->nsrc)) return false;
    if (!parse_refs(L, o, path, "dst_buff", op->dst, &op->ndst)) return false;

    long long v;
    bool is_barrier = kind == PLAN_OP_BARRIER;
    if (!get_int(L, o, path, "barrier_id", is_barrier, 0, INT_MIN, INT_MAX, &v)) return false;
    op->barrier_id = (int)v;
    if (!get_int(L, o, path, "num_threadblocks", is_barrier, 0, INT_MIN, INT_MAX, &v)) return false;
    op->num_threadblocks = (int)v;

    const cJSON *tbg = get_obj(L, o, path, "tbg_info", false, kp);
    if (tbg) {
        if (!get_int(L, tbg, kp, "tb_id", true, 0, INT_MIN, INT_MAX, &v)) return false;
        op->tbg_id = (int)v;
        if (!get_int(L, tbg, kp, "tbg_size", true, 0, INT_MIN, INT_MAX, &v)) return false;
        op->tbg_size = (int)v;
        if (op->tbg_size <= 0) {
            plan_path_key(kp, kp, "tbg_size");
            return lfail(L, kp, "%d must be at least 1", op->tbg_size);
        }
    }
    if (L->failed) return false;

    const char *ro = get_str(L, o, path, "reduce_op", false);
    if (L->failed) return false;
    if (ro && !plan_redop_from_name(ro, &op->reduce_op)) {
        plan_path_key(kp, path, "reduce_op");
        return lfail(L, kp, "unknown reduce_op '%s' (expected sum, prod, min, max or avg)",
                     PLAN_ESC(ro));
    }
    if (kind == PLAN_OP_PIPELINE) return parse_pipeline(L, o, path, op);
    return true;
}

/* ---- thread blocks, GPUs ----------------------------------------------------------------------- */

/* An entry's required "id" must equal its position in the list `list` (why: the reason). */
static bool id_is_position(Ld *L, const cJSON *o, const char *path, int pos, const char *list,
                           const char *why) {
    char kp[PLAN_PATH_MAX];
    long long v;
    if (!get_int(L, o, path, "id", true, 0, INT_MIN, INT_MAX, &v)) return false;
    if (v == pos) return true;
    plan_path_key(kp, path, "id");
    return lfail(L, kp, "%lld must equal the position %d in '%s' (%s)", v, pos, list, why);
}

/* A thread block's list of {TYPE_KEY: "memory"|"port"|..., IDS_KEY: [ids]} objects: the ids
 * appended to ids[type] (nids[type] counting them, at most `max` per type). One parser for the
 * two lists of this shape, "channels" and "remote_buffer_refs". Other keys ("buff", legacy) are
 * ignored, as MSCCL++ does. */
typedef struct {
    const char *key;           /* the list's key in the thread block */
    bool required;
    const char *type_key, *ids_key;
    bool no_switch;            /* remote buffers are reached through memory or port channels */
    int max;
    const char *noun;          /* "channels": in the over-the-limit message */
    const char *what;          /* int_list's name of the limit */
} TypedIds;

static bool parse_typed_ids(Ld *L, const cJSON *t, const char *path, const TypedIds *spec,
                            int ids[][spec->max], int *nids) {
    char kp[PLAN_PATH_MAX];
    int n;
    const cJSON *arr = get_arr(L, t, path, spec->key, spec->required, kp, &n);
    if (L->failed) return false;
    int i = 0;
    for (const cJSON *e = arr ? arr->child : NULL; e; e = e->next, i++) {
        char ep[PLAN_PATH_MAX], ip[PLAN_PATH_MAX];
        plan_path_idx(ep, kp, i);
        if (!want(L, e, ep, cJSON_IsObject(e), "an object")) return false;
        const char *ct = get_str(L, e, ep, spec->type_key, true);
        if (!ct) return false;
        PlanChanType type;
        plan_path_key(ip, ep, spec->type_key);
        if (!parse_chan(L, ct, ip, false, &type)) return false;
        if (spec->no_switch && type == PLAN_CHAN_SWITCH)
            return lfail(L, ip, "remote buffers are accessed through \"memory\" or \"port\", "
                                "not \"switch\"");
        int m;
        const cJSON *list = get_arr(L, e, ep, spec->ids_key, true, ip, &m);
        if (!list) return false;
        if (m > spec->max - nids[type])
            return lfail(L, ip, "%d %s %s in this thread block, more than the executor's limit "
                                "of %d", nids[type] + m, ct, spec->noun, spec->max);
        if (!int_list(L, list, ip, ids[type], spec->max - nids[type], &nids[type], spec->what))
            return false;
    }
    return true;
}

static bool parse_tb(Ld *L, const cJSON *t, const char *path, int pos, PlanTb *tb) {
    char kp[PLAN_PATH_MAX];
    if (!want(L, t, path, cJSON_IsObject(t), "an object")) return false;
    if (!id_is_position(L, t, path, pos, "threadblocks",
                        "the block index is the position, channel tables are keyed by id"))
        return false;
    tb->id = pos;

    /* channels, and the remote buffers they reach: entries of one type concatenate; the
     * position is the TB-local index */
    static const TypedIds chans = {"channels", true, "channel_type", "channel_ids", false,
                                   PLAN_MAX_TB_CHANNELS, "channels",
                                   "channels per thread block"};
    static const TypedIds remotes = {"remote_buffer_refs", false, "access_channel_type",
                                     "remote_buffer_ids", true, PLAN_MAX_TB_REMOTES,
                                     "remote buffers", "remote buffers per thread block"};
    if (!parse_typed_ids(L, t, path, &chans, tb->chan, tb->nchan) ||
        !parse_typed_ids(L, t, path, &remotes, tb->remote, tb->nremote))
        return false;

    /* ops: count flattened slots from the array sizes before allocating anything */
    int n;
    const cJSON *arr = get_arr(L, t, path, "ops", true, kp, &n);
    if (!arr) return false;
    long flat = 0;
    int i = 0;
    for (const cJSON *o = arr->child; o; o = o->next, i++) {
        flat++;
        const cJSON *inner = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "ops") : NULL;
        if (cJSON_IsArray(inner)) flat += cJSON_GetArraySize(inner);
        if (flat > L->max_tb_ops) {
            char op_path[PLAN_PATH_MAX];
            plan_path_idx(op_path, kp, i);
            return lfail(L, kp, "more than %d ops after flattening pipelines (reached at %s): "
                                "exceeds MSCCL++'s executor's device plan (the plan's \"target\" "
                                "is \"mscclpp\")", PLAN_MAX_OPS_PER_TB, op_path);
        }
    }
    L->total_ops += flat;
    if (L->total_ops > LOAD_MAX_TOTAL_OPS)
        return lfail(L, kp, "the plan has more than %ld ops in total", LOAD_MAX_TOTAL_OPS);
    if (n > 0) {
        tb->ops = calloc((size_t)n, sizeof *tb->ops);
        if (!tb->ops) return lfail(L, kp, "out of memory");
        tb->cap_ops = n;
    }
    i = 0;
    for (const cJSON *o = arr->child; o; o = o->next, i++) {
        char op_path[PLAN_PATH_MAX];
        plan_path_idx(op_path, kp, i);
        plan_op_init(&tb->ops[i], PLAN_OP_NOP);
        tb->nops = i + 1;  /* owned from here on, even if parsing fails */
        if (!parse_op(L, o, op_path, &tb->ops[i], false)) return false;
    }
    return true;
}

/* gpus[r].channels: memory/port peers (concatenated per type) and switch groups. */
static bool parse_gpu_channels(Ld *L, const cJSON *arr, const char *kp, PlanGpu *g) {
    int count[2] = {0, 0}, nsw = 0;
    int i = 0;
    /* pass 1: types and sizes, so each table is allocated once */
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        char ep[PLAN_PATH_MAX], ip[PLAN_PATH_MAX];
        plan_path_idx(ep, kp, i);
        if (!want(L, e, ep, cJSON_IsObject(e), "an object")) return false;
        const char *ct = get_str(L, e, ep, "channel_type", true);
        if (!ct) return false;
        PlanChanType type;
        plan_path_key(ip, ep, "channel_type");
        if (!parse_chan(L, ct, ip, false, &type)) return false;
        int m;
        if (type == PLAN_CHAN_SWITCH) {
            if (!get_arr(L, e, ep, "rank_groups", true, ip, &m)) return false;
            nsw += m;
        } else {
            if (!get_arr(L, e, ep, "connected_to", true, ip, &m)) return false;
            count[type] += m;
        }
    }
    for (int t = 0; t < 2; t++)
        if (count[t] > 0) {
            g->peers[t] = calloc((size_t)count[t], sizeof(int));
            if (!g->peers[t]) return lfail(L, kp, "out of memory");
        }
    if (nsw > 0) {
        g->switches = calloc((size_t)nsw, sizeof *g->switches);
        if (!g->switches) return lfail(L, kp, "out of memory");
    }
    i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        char ep[PLAN_PATH_MAX], ip[PLAN_PATH_MAX];
        plan_path_idx(ep, kp, i);
        const char *ct = cJSON_GetObjectItemCaseSensitive(e, "channel_type")->valuestring;
        PlanChanType type;
        parse_chan(L, ct, ep, false, &type);  /* checked in pass 1 */
        int m;
        if (type != PLAN_CHAN_SWITCH) {
            const cJSON *to = get_arr(L, e, ep, "connected_to", true, ip, &m);
            if (!int_list(L, to, ip, g->peers[type], count[type] - g->npeers[type],
                          &g->npeers[type], "peers"))
                return false;
            continue;
        }
        const char *bt = get_str(L, e, ep, "buffer_type", true);
        if (!bt) return false;
        PlanBuf buf = PLAN_BUF_INPUT;
        plan_path_key(ip, ep, "buffer_type");
        if (!parse_buf(L, bt, ip, &buf)) return false;
        const cJSON *groups = get_arr(L, e, ep, "rank_groups", true, ip, &m);
        int j = 0;
        for (const cJSON *gr = groups->child; gr; gr = gr->next, j++) {
            char gp[PLAN_PATH_MAX], rp[PLAN_PATH_MAX];
            plan_path_idx(gp, ip, j);
            if (!want(L, gr, gp, cJSON_IsObject(gr), "an object")) return false;
            long long sz;
            /* "size" is parsed but unused by MSCCL++ (the DSL writes len(ranks)) */
            if (!get_int(L, gr, gp, "size", false, 0, INT_MIN, INT_MAX, &sz)) return false;
            int nr;
            const cJSON *ranks = get_arr(L, gr, gp, "ranks", true, rp, &nr);
            if (!ranks) return false;
            PlanSwitch *sw = &g->switches[g->nswitch];
            sw->buf = buf;
            sw->ranks = calloc((size_t)(nr > 0 ? nr : 1), sizeof(int));
            if (!sw->ranks) return lfail(L, rp, "out of memory");
            g->nswitch++;
            if (!int_list(L, ranks, rp, sw->ranks, nr, &sw->nranks, "ranks")) return false;
        }
    }
    return true;
}

static bool parse_gpu(Ld *L, const cJSON *gj, const char *path, int pos, PlanGpu *g) {
    char kp[PLAN_PATH_MAX];
    long long v;
    if (!want(L, gj, path, cJSON_IsObject(gj), "an object")) return false;
    if (!id_is_position(L, gj, path, pos, "gpus", "\"GPU rank does not match\"")) return false;
    g->id = pos;
    if (!get_u32(L, gj, path, "input_chunks", true, &g->input_chunks)) return false;
    if (!get_u32(L, gj, path, "output_chunks", true, &g->output_chunks)) return false;
    if (!get_u32(L, gj, path, "scratch_chunks", true, &g->scratch_chunks)) return false;

    int n;
    const cJSON *arr = get_arr(L, gj, path, "channels", true, kp, &n);
    if (!arr || !parse_gpu_channels(L, arr, kp, g)) return false;

    arr = get_arr(L, gj, path, "remote_buffers", true, kp, &n);
    if (!arr) return false;
    if (n > 0) {
        g->remotes = calloc((size_t)n, sizeof *g->remotes);
        if (!g->remotes) return lfail(L, kp, "out of memory");
    }
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        char ep[PLAN_PATH_MAX], ip[PLAN_PATH_MAX];
        plan_path_idx(ep, kp, i);
        if (!want(L, e, ep, cJSON_IsObject(e), "an object")) return false;
        PlanRemote *r = &g->remotes[i];
        if (!get_int(L, e, ep, "rank", true, 0, INT_MIN, INT_MAX, &v)) return false;
        r->rank = (int)v;
        const char *bt = get_str(L, e, ep, "type", true);
        if (!bt) return false;
        plan_path_key(ip, ep, "type");
        if (!parse_buf(L, bt, ip, &r->type)) return false;
        int m;
        const cJSON *acc = get_arr(L, e, ep, "access_channel_types", true, ip, &m);
        if (!acc) return false;
        int j = 0;
        for (const cJSON *a = acc->child; a; a = a->next, j++) {
            char ap[PLAN_PATH_MAX];
            plan_path_idx(ap, ip, j);
            if (!want(L, a, ap, cJSON_IsString(a) && a->valuestring, "a string")) return false;
            PlanChanType t;
            if (!parse_chan(L, a->valuestring, ap, false, &t)) return false;
            if (t == PLAN_CHAN_SWITCH)
                return lfail(L, ap, "remote buffers are accessed through \"memory\" or \"port\", "
                                    "not \"switch\"");
            r->access[t] = true;
        }
        g->nremotes = i + 1;
    }

    arr = get_arr(L, gj, path, "semaphores", false, kp, &n);
    if (L->failed) return false;
    if (n > 0) {
        g->sem_init = calloc((size_t)n, sizeof(int));
        if (!g->sem_init) return lfail(L, kp, "out of memory");
    }
    i = 0;
    for (const cJSON *e = arr ? arr->child : NULL; e; e = e->next, i++) {
        char ep[PLAN_PATH_MAX];
        plan_path_idx(ep, kp, i);
        if (!want(L, e, ep, cJSON_IsObject(e), "an object")) return false;
        if (!get_int(L, e, ep, "init_value", true, 0, INT_MIN, INT_MAX, &v)) return false;
        g->sem_init[i] = (int)v;
        g->nsems = i + 1;
    }

    arr = get_arr(L, gj, path, "threadblocks", true, kp, &n);
    if (!arr) return false;
    if (n > LOAD_MAX_TBS)
        return lfail(L, kp, "%d thread blocks, more than the limit of %d", n, LOAD_MAX_TBS);
    if (n > 0 && !plan_gpu_ensure_tbs(g, n)) return lfail(L, kp, "out of memory");
    i = 0;
    for (const cJSON *t = arr->child; t; t = t->next, i++) {
        char tp[PLAN_PATH_MAX];
        plan_path_idx(tp, kp, i);
        if (!parse_tb(L, t, tp, i, &g->tbs[i])) return false;
    }
    return true;
}

/* ---- top level ----------------------------------------------------------------------------------- */

static char *dup_cstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static Plan *parse_root(Ld *L, const cJSON *root) {
    char kp[PLAN_PATH_MAX];
    if (!want(L, root, "", cJSON_IsObject(root), "a JSON object at the top level")) return NULL;
    const char *name = get_str(L, root, "", "name", true);
    if (!name) return NULL;
    const char *coll = get_str(L, root, "", "collective", true);
    if (!coll) return NULL;
    PlanCollective c;
    if (!plan_coll_from_name(coll, &c)) {
        lfail(L, "collective", "unknown collective '%s' (expected allreduce, allgather, "
              "reducescatter, alltoall, broadcast, sendrecv, reduce, gather, scatter, test or "
              "custom)", PLAN_ESC(coll));
        return NULL;
    }
    const char *proto = get_str(L, root, "", "protocol", true);
    if (!proto) return NULL;
    if (strcmp(proto, "LL") != 0 && strcmp(proto, "Simple") != 0) {
        lfail(L, "protocol", "unknown protocol '%s' (expected \"LL\" or \"Simple\")",
              PLAN_ESC(proto));
        return NULL;
    }
    int ngpus;
    const cJSON *gpus = get_arr(L, root, "", "gpus", true, kp, &ngpus);
    if (!gpus) return NULL;
    if (ngpus > LOAD_MAX_RANKS) {
        lfail(L, "gpus", "%d ranks, more than the limit of %d", ngpus, LOAD_MAX_RANKS);
        return NULL;
    }
    Plan *p = plan_new(name, c, ngpus);
    if (!p) {
        lfail(L, "", "out of memory");
        return NULL;
    }
    free(p->collective_name);
    p->collective_name = dup_cstr(coll);
    if (!p->collective_name) {
        lfail(L, "", "out of memory");
        goto fail;
    }
    p->protocol_ll = strcmp(proto, "LL") == 0;
    long long v;
    uint64_t u;
    if (!get_bool(L, root, "", "inplace", true, false, &p->inplace)) goto fail;
    if (!get_bool(L, root, "", "reuse_resources", false, false, &p->reuse_resources)) goto fail;
    if (!get_int(L, root, "", "num_threads_per_block", false, 1024, INT_MIN, INT_MAX, &v))
        goto fail;
    p->threads = (int)v;
    if (!get_bool(L, root, "", "use_double_scratch_buffer", false, false, &p->double_scratch))
        goto fail;
    if (!get_u64(L, root, "", "buffer_alignment", false, 16, UINT32_MAX, &u)) goto fail;
    p->alignment = (uint32_t)u;
    if (!get_u64(L, root, "", "min_message_size", false, 0, UINT64_MAX, &p->min_size)) goto fail;
    if (!get_u64(L, root, "", "max_message_size", false, UINT64_MAX, UINT64_MAX, &p->max_size))
        goto fail;

    /* "tags" (our extension): an array of strings; any other shape is ignored */
    const cJSON *tags = get(L, root, "", "tags", false);
    if (L->failed) goto fail;
    if (cJSON_IsArray(tags)) {
        int nt = cJSON_GetArraySize(tags);
        if (nt > 0) {
            p->tags = calloc((size_t)nt, sizeof *p->tags);
            if (!p->tags) {
                lfail(L, "tags", "out of memory");
                goto fail;
            }
        }
        int i = 0;
        for (const cJSON *t = tags->child; t; t = t->next, i++) {
            char tp[PLAN_PATH_MAX];
            plan_path_idx(tp, "tags", i);
            if (!want(L, t, tp, cJSON_IsString(t) && t->valuestring, "a string")) goto fail;
            p->tags[i] = dup_cstr(t->valuestring);
            if (!p->tags[i]) {
                lfail(L, tp, "out of memory");
                goto fail;
            }
            p->ntags = i + 1;
        }
    }
    if (!get_str(L, root, "", "producer", false) && L->failed) goto fail;
    /* "target" (our extension): absent in MSCCL++'s own plans */
    const char *target = get_str(L, root, "", "target", false);
    if (L->failed) goto fail;
    if (target && !plan_target_from_name(target, &p->target)) {
        lfail(L, "target", "unknown target \"%.64s\" (mscclrt or mscclpp)", target);
        goto fail;
    }
    L->max_tb_ops = p->target == PLAN_TARGET_MSCCLPP ? PLAN_MAX_OPS_PER_TB : LOAD_MAX_TOTAL_OPS;

    int r = 0;
    for (const cJSON *gj = gpus->child; gj; gj = gj->next, r++) {
        char gp[PLAN_PATH_MAX];
        plan_path_idx(gp, "gpus", r);
        if (!parse_gpu(L, gj, gp, r, &p->gpus[r])) goto fail;
    }
    return p;
fail:
    plan_free(p);
    return NULL;
}

/* Line and column (from 1; columns count bytes) of offset `off` in text. */
static void line_col(const char *text, size_t off, int *line, int *col) {
    *line = 1;
    size_t start = 0;
    for (size_t i = 0; i < off; i++)
        if (text[i] == '\n') {
            (*line)++;
            start = i + 1;
        }
    *col = (int)(off - start) + 1;
}

Plan *plan_parse(const char *text, size_t len, const char *what, PlanErr *err) {
    PlanErr dummy;
    if (!err) err = &dummy;
    err->msg[0] = '\0';
    if (!what) what = "<memory>";
    Ld L = {.what = what, .err = err, .max_tb_ops = LOAD_MAX_TOTAL_OPS};
    if (!text) {
        lfail(&L, "", "no plan text");
        return NULL;
    }
    if (len > LOAD_MAX_FILE_BYTES) {
        lfail(&L, "", "%zu bytes, larger than the limit of %zu bytes", len, LOAD_MAX_FILE_BYTES);
        return NULL;
    }
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        int line, col;
        line_col(text, (size_t)(nul - text), &line, &col);
        snprintf(err->msg, sizeof err->msg, "%s:%d:%d: NUL byte in the plan text", what, line, col);
        return NULL;
    }
    /* cJSON wants the terminating NUL inside the length when it must check for trailing junk */
    char *buf = malloc(len + 1);
    if (!buf) {
        lfail(&L, "", "out of memory (%zu bytes)", len);
        return NULL;
    }
    memcpy(buf, text, len);
    buf[len] = '\0';
    const char *end = NULL;
    cJSON *root = plan_cjson_parse(buf, len + 1, &end);
    if (!root) {
        size_t off = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : len;
        int line, col;
        line_col(buf, off, &line, &col);
        size_t k = 0;
        while (off + k < len && k < 16 && buf[off + k] != '\n') k++;
        if (len == 0 || off >= len) {
            snprintf(err->msg, sizeof err->msg, "%s:%d:%d: JSON syntax error at the end of the "
                     "text (truncated file?)", what, line, col);
        } else {   /* the text near the error, escaped like every string of a plan */
            char near[17];
            memcpy(near, buf + off, k);
            near[k] = 0;
            snprintf(err->msg, sizeof err->msg, "%s:%d:%d: JSON syntax error near '%s' (or "
                     "nesting deeper than %d)", what, line, col, PLAN_ESC(near),
                     CJSON_NESTING_LIMIT);
        }
        free(buf);
        return NULL;
    }
    Plan *p = NULL;
    if (!index_big_numbers(&L, root, buf, len)) lfail(&L, "", "out of memory");
    else p = parse_root(&L, root);
    cJSON_Delete(root);
    free(L.big);
    free(buf);
    if (p && !plan_validate(p, what, err)) {
        plan_free(p);
        p = NULL;
    }
    return p;
}

/* What a file that is not a regular one is, for the message that refuses it. */
static const char *file_kind(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "a special file";
}

Plan *plan_load_file(const char *path, PlanErr *err) {
    PlanErr dummy;
    if (!err) err = &dummy;
    /* O_NONBLOCK: open() of a FIFO would wait for a writer forever; what is not a regular file
     * is refused below, before any read, and a regular file's reads ignore the flag. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err->msg, sizeof err->msg, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err->msg, sizeof err->msg, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err->msg, sizeof err->msg, "%s: %s, not a regular file", path,
                 file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    if ((uint64_t)st.st_size > LOAD_MAX_FILE_BYTES) {
        snprintf(err->msg, sizeof err->msg, "%s: %lld bytes, larger than the limit of %zu bytes",
                 path, (long long)st.st_size, LOAD_MAX_FILE_BYTES);
        close(fd);
        return NULL;
    }
    size_t cap = (size_t)st.st_size + 1, len = 0;
    char *text = malloc(cap);
    if (!text) {
        snprintf(err->msg, sizeof err->msg, "%s: out of memory (%zu bytes)", path, cap);
        close(fd);
        return NULL;
    }
    for (;;) {  /* read to EOF, even if the file changed size since fstat (bounded by cap) */
        if (len == cap) {
            snprintf(err->msg, sizeof err->msg, "%s: file grew while being read", path);
            free(text);
            close(fd);
            return NULL;
        }
        ssize_t r = read(fd, text + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err->msg, sizeof err->msg, "%s: read failed: %s", path, strerror(errno));
            free(text);
            close(fd);
            return NULL;
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    close(fd);
    Plan *p = plan_parse(text, len, path, err);
    free(text);
    return p;
}


/*
 * plan_load.c - MSCCL++ JSON execution plan -> plan model (plan.h), and the complete
 * validation of a model (spec §2, §2.7, §2.8, §6.2). Everything in the file is checked before
 * anything is used: a hostile plan gets one message naming the JSON path and the value, never a
 * crash, an out-of-bounds read or an allocation that the file's own size does not bound.
 * Parsing (types, strings, counts that size the model's fixed arrays) and validation (index
 * spaces, limits, pairing) are separate, so the compiler validates its in-memory plans the same way.
 */
#include "plan.h"

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

#define PATH_MAX_LEN 256

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

static bool vfail(PlanErr *err, const char *what, const char *path, const char *fmt, va_list ap) {
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
    vfail(L->err, L->what, path, fmt, ap);
    va_end(ap);
    return false;
}

/* snprintf into a PATH_MAX_LEN buffer; paths are short by construction, truncation is harmless */
static void pfmt(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pfmt(char *dst, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, PATH_MAX_LEN, fmt, ap);
    va_end(ap);
}

/* path + "." + key, or key at the top level. dst may alias base. */
static void pkey(char *dst, const char *base, const char *key) {
    char tmp[PATH_MAX_LEN];
    pfmt(tmp, "%s%s%s", base, *base ? "." : "", key);
    memcpy(dst, tmp, PATH_MAX_LEN);
}

static void pidx(char *dst, const char *base, int i) {
    char tmp[PATH_MAX_LEN];
    pfmt(tmp, "%s[%d]", base, i);
    memcpy(dst, tmp, PATH_MAX_LEN);
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
    pkey(kpath, path, key);
    const cJSON *it = get(L, obj, path, key, required);
    if (!it) return NULL;
    return want(L, it, kpath, cJSON_IsObject(it), "an object") ? it : NULL;
}

/* An array member; *n = its length. Absent optional: returns NULL with *n = 0. */
static const cJSON *get_arr(Ld *L, const cJSON *obj, const char *path, const char *key,
                            bool required, char *kpath, int *n) {
    *n = 0;
    pkey(kpath, path, key);
    const cJSON *it = get(L, obj, path, key, required);
    if (!it) return NULL;
    if (!want(L, it, kpath, cJSON_IsArray(it), "an array")) return NULL;
    *n = cJSON_GetArraySize(it);
    return it;
}

static bool get_bool(Ld *L, const cJSON *obj, const char *path, const char *key, bool required,
                     bool def, bool *out) {
    char kp[PATH_MAX_LEN];
    pkey(kp, path, key);
    *out = def;
    const cJSON *it = get(L, obj, path, key, required);
    if (!it) return !L->failed;
    if (!want(L, it, kp, cJSON_IsBool(it), "true or false")) return false;
    *out = cJSON_IsTrue(it);
    return true;
}

static const char *get_str(Ld *L, const cJSON *obj, const char *path, const char *key,
                           bool required) {
    char kp[PATH_MAX_LEN];
    pkey(kp, path, key);
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
    char kp[PATH_MAX_LEN];
    pkey(kp, path, key);
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
    char kp[PATH_MAX_LEN];
    pkey(kp, path, key);
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
        char ip[PATH_MAX_LEN];
        long long v;
        pidx(ip, path, i);
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
    char kp[PATH_MAX_LEN];
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
        pkey(kp, path, "type");
        if (!want(L, type, kp, cJSON_IsString(type) && type->valuestring, "a string")) return false;
        if (!parse_buf(L, type->valuestring, kp, &r->type)) return false;
        r->kind = PLAN_REF_LOCAL;
    } else {
        const cJSON *it = bid ? bid : sid;
        pkey(kp, path, bid ? "buffer_id" : "switch_channel_id");
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
    char kp[PATH_MAX_LEN];
    int cnt;
    const cJSON *arr = get_arr(L, op, path, key, false, kp, &cnt);
    if (!arr) return !L->failed;
    if (cnt > PLAN_MAX_OP_ENTRIES)
        return lfail(L, kp, "%d entries, more than the executor's limit of %d", cnt,
                     PLAN_MAX_OP_ENTRIES);
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        char ep[PATH_MAX_LEN];
        pidx(ep, kp, i);
        if (!parse_ref(L, e, ep, &refs[i])) return false;
    }
    *n = cnt;
    return true;
}

static bool parse_op(Ld *L, const cJSON *o, const char *path, PlanOp *op, bool inner);

static bool parse_pipeline(Ld *L, const cJSON *o, const char *path, PlanOp *op) {
    char kp[PATH_MAX_LEN];
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
        char ip[PATH_MAX_LEN];
        pidx(ip, kp, i);
        if (!parse_op(L, c, ip, &op->inner[i], true)) return false;
    }
    return true;
}

static bool parse_op(Ld *L, const cJSON *o, const char *path, PlanOp *op, bool inner) {
    char kp[PATH_MAX_LEN];
    if (!want(L, o, path, cJSON_IsObject(o), "an object")) return false;
    const char *name = get_str(L, o, path, "name", true);
    if (!name) return false;
    PlanOpKind kind;
    pkey(kp, path, "name");
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
        pkey(kp, path, "channel_type");
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
            pkey(kp, kp, "tbg_size");
            return lfail(L, kp, "%d must be at least 1", op->tbg_size);
        }
    }
    if (L->failed) return false;

    const char *ro = get_str(L, o, path, "reduce_op", false);
    if (L->failed) return false;
    if (ro && !plan_redop_from_name(ro, &op->reduce_op)) {
        pkey(kp, path, "reduce_op");
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
    char kp[PATH_MAX_LEN];
    long long v;
    if (!get_int(L, o, path, "id", true, 0, INT_MIN, INT_MAX, &v)) return false;
    if (v == pos) return true;
    pkey(kp, path, "id");
    return lfail(L, kp, "%lld must equal the position %d in '%s' (%s)", v, pos, list, why);
}

static bool parse_tb(Ld *L, const cJSON *t, const char *path, int pos, PlanTb *tb) {
    char kp[PATH_MAX_LEN];
    if (!want(L, t, path, cJSON_IsObject(t), "an object")) return false;
    if (!id_is_position(L, t, path, pos, "threadblocks",
                        "the block index is the position, channel tables are keyed by id"))
        return false;
    tb->id = pos;

    /* channels: entries of one type concatenate; the position is the TB-local index */
    int n;
    const cJSON *arr = get_arr(L, t, path, "channels", true, kp, &n);
    if (!arr) return false;
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        char ep[PATH_MAX_LEN], ip[PATH_MAX_LEN];
        pidx(ep, kp, i);
        if (!want(L, e, ep, cJSON_IsObject(e), "an object")) return false;
        const char *ct = get_str(L, e, ep, "channel_type", true);
        if (!ct) return false;
        PlanChanType type;
        pkey(ip, ep, "channel_type");
        if (!parse_chan(L, ct, ip, false, &type)) return false;
        int m;
        const cJSON *ids = get_arr(L, e, ep, "channel_ids", true, ip, &m);
        if (!ids) return false;
        if (m > PLAN_MAX_TB_CHANNELS - tb->nchan[type])
            return lfail(L, ip, "%d %s channels in this thread block, more than the executor's "
                                "limit of %d", tb->nchan[type] + m, ct, PLAN_MAX_TB_CHANNELS);
        if (!int_list(L, ids, ip, tb->chan[type], PLAN_MAX_TB_CHANNELS - tb->nchan[type],
                      &tb->nchan[type], "channels per thread block"))
            return false;
        /* "buff" (legacy) and any other key are ignored, as MSCCL++ does */
    }

    arr = get_arr(L, t, path, "remote_buffer_refs", false, kp, &n);
    if (L->failed) return false;
    i = 0;
    for (const cJSON *e = arr ? arr->child : NULL; e; e = e->next, i++) {
        char ep[PATH_MAX_LEN], ip[PATH_MAX_LEN];
        pidx(ep, kp, i);
        if (!want(L, e, ep, cJSON_IsObject(e), "an object")) return false;
        const char *ct = get_str(L, e, ep, "access_channel_type", true);
        if (!ct) return false;
        PlanChanType type;
        pkey(ip, ep, "access_channel_type");
        if (!parse_chan(L, ct, ip, false, &type)) return false;
        if (type == PLAN_CHAN_SWITCH)
            return lfail(L, ip, "remote buffers are accessed through \"memory\" or \"port\", "
                                "not \"switch\"");
        int m;
        const cJSON *ids = get_arr(L, e, ep, "remote_buffer_ids", true, ip, &m);
        if (!ids) return false;
        if (m > PLAN_MAX_TB_REMOTES - tb->nremote[type])
            return lfail(L, ip, "%d %s remote buffers in this thread block, more than the "
                                "executor's limit of %d", tb->nremote[type] + m, ct,
                         PLAN_MAX_TB_REMOTES);
        if (!int_list(L, ids, ip, tb->remote[type], PLAN_MAX_TB_REMOTES - tb->nremote[type],
                      &tb->nremote[type], "remote buffers per thread block"))
            return false;
    }

    /* ops: count flattened slots from the array sizes before allocating anything */
    arr = get_arr(L, t, path, "ops", true, kp, &n);
    if (!arr) return false;
    long flat = 0;
    i = 0;
    for (const cJSON *o = arr->child; o; o = o->next, i++) {
        flat++;
        const cJSON *inner = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "ops") : NULL;
        if (cJSON_IsArray(inner)) flat += cJSON_GetArraySize(inner);
        if (flat > L->max_tb_ops) {
            char op_path[PATH_MAX_LEN];
            pidx(op_path, kp, i);
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
        char op_path[PATH_MAX_LEN];
        pidx(op_path, kp, i);
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
        char ep[PATH_MAX_LEN], ip[PATH_MAX_LEN];
        pidx(ep, kp, i);
        if (!want(L, e, ep, cJSON_IsObject(e), "an object")) return false;
        const char *ct = get_str(L, e, ep, "channel_type", true);
        if (!ct) return false;
        PlanChanType type;
        pkey(ip, ep, "channel_type");
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
        char ep[PATH_MAX_LEN], ip[PATH_MAX_LEN];
        pidx(ep, kp, i);
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
        pkey(ip, ep, "buffer_type");
        if (!parse_buf(L, bt, ip, &buf)) return false;
        const cJSON *groups = get_arr(L, e, ep, "rank_groups", true, ip, &m);
        int j = 0;
        for (const cJSON *gr = groups->child; gr; gr = gr->next, j++) {
            char gp[PATH_MAX_LEN], rp[PATH_MAX_LEN];
            pidx(gp, ip, j);
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
    char kp[PATH_MAX_LEN];
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
        char ep[PATH_MAX_LEN], ip[PATH_MAX_LEN];
        pidx(ep, kp, i);
        if (!want(L, e, ep, cJSON_IsObject(e), "an object")) return false;
        PlanRemote *r = &g->remotes[i];
        if (!get_int(L, e, ep, "rank", true, 0, INT_MIN, INT_MAX, &v)) return false;
        r->rank = (int)v;
        const char *bt = get_str(L, e, ep, "type", true);
        if (!bt) return false;
        pkey(ip, ep, "type");
        if (!parse_buf(L, bt, ip, &r->type)) return false;
        int m;
        const cJSON *acc = get_arr(L, e, ep, "access_channel_types", true, ip, &m);
        if (!acc) return false;
        int j = 0;
        for (const cJSON *a = acc->child; a; a = a->next, j++) {
            char ap[PATH_MAX_LEN];
            pidx(ap, ip, j);
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
        char ep[PATH_MAX_LEN];
        pidx(ep, kp, i);
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
        char tp[PATH_MAX_LEN];
        pidx(tp, kp, i);
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
    char kp[PATH_MAX_LEN];
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
            char tp[PATH_MAX_LEN];
            pidx(tp, "tags", i);
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
        char gp[PATH_MAX_LEN];
        pidx(gp, "gpus", r);
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

/* ---- validation of a model ------------------------------------------------------------------------
 * Paths are those of the JSON the model came from (or would be written as): ops and entries
 * have the same positions; channel tables are named by type and TB-local index. */

typedef struct {
    const Plan *p;
    const char *what;
    PlanErr *err;
} Va;

static bool vf(Va *V, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool vf(Va *V, const char *path, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(V->err, V->what, path, fmt, ap);
    va_end(ap);
    return false;
}

static uint32_t buf_chunks(const PlanGpu *g, PlanBuf b) {
    switch (b) {
    case PLAN_BUF_INPUT: return g->input_chunks;
    case PLAN_BUF_OUTPUT: return g->output_chunks;
    default: return g->scratch_chunks;
    }
}

/* How an entry is used: as data, or as LL packets (twice the bytes at twice the offset). */
typedef enum { USE_DATA, USE_PACKET } RefUse;

/* Checks chunks [index, index+size) of buffer b of rank `owner` (rank `self` reads it). */
static bool check_range(Va *V, const char *path, const PlanRef *r, int self, int owner, PlanBuf b,
                        RefUse use) {
    const PlanGpu *g = &V->p->gpus[owner];
    uint64_t chunks = buf_chunks(g, b);
    char whose[64] = "";
    if (owner != self) snprintf(whose, sizeof whose, "rank %d's ", owner);
    if (use == USE_PACKET) {
        /* packets double offsets and sizes; only LL plans double the scratch (spec §4.4) */
        uint64_t room = chunks * ((b == PLAN_BUF_SCRATCH && V->p->protocol_ll) ? 2 : 1);
        if (2 * ((uint64_t)r->index + r->size) > room)
            return vf(V, path, "packets of chunks %u..%" PRIu64 " need %" PRIu64 " chunks of "
                      "%s%s, which has %" PRIu64 "%s", r->index, (uint64_t)r->index + r->size,
                      2 * ((uint64_t)r->index + r->size), whose, plan_buf_long_name(b), room,
                      b == PLAN_BUF_SCRATCH && !V->p->protocol_ll ?
                      " (scratch is doubled only for protocol \"LL\")" : "");
        return true;
    }
    char kp[PATH_MAX_LEN];
    if (r->index >= chunks && !(r->size == 0 && r->index == chunks)) {
        pkey(kp, path, "index");
        return vf(V, kp, "%u is outside %s%s (%" PRIu64 " chunks)", r->index, whose,
                  plan_buf_long_name(b), chunks);
    }
    if ((uint64_t)r->index + r->size > chunks) {
        pkey(kp, path, "size");
        return vf(V, kp, "%u chunks from index %u go past the end of %s%s (%" PRIu64 " chunks)",
                  r->size, r->index, whose, plan_buf_long_name(b), chunks);
    }
    return true;
}

/* Resolves and bounds-checks one entry of an op of rank r, TB tb. want_kind is the kind the op
 * needs at this position; want_scratch requires scratch (packet buffers). */
static bool check_ref(Va *V, const char *path, const PlanOp *op, const PlanRef *ref, int r,
                      const PlanTb *tb, PlanRefKind want_kind, bool want_scratch, RefUse use) {
    static const char *kind_names[] = {"a local entry ('type')", "a remote entry ('buffer_id')",
                                       "a switch entry ('switch_channel_id')"};
    const Plan *p = V->p;
    const PlanGpu *g = &p->gpus[r];
    if ((unsigned)ref->kind > PLAN_REF_SWITCH) return vf(V, path, "invalid entry kind");
    if (ref->kind != want_kind)
        return vf(V, path, "'%s' needs %s here, not %s", plan_op_name(op->kind),
                  kind_names[want_kind], kind_names[ref->kind]);
    char kp[PATH_MAX_LEN];
    PlanBuf b;
    switch (ref->kind) {
    case PLAN_REF_LOCAL:
        if ((unsigned)ref->type >= PLAN_BUF_COUNT) return vf(V, path, "invalid buffer type");
        b = ref->type;
        if (want_scratch && b != PLAN_BUF_SCRATCH) {
            pkey(kp, path, "type");
            return vf(V, kp, "'%s' needs scratch (\"s\") here, not %s", plan_op_name(op->kind),
                      plan_buf_long_name(b));
        }
        return check_range(V, path, ref, r, r, b, use);
    case PLAN_REF_REMOTE: {
        pkey(kp, path, "buffer_id");
        if (op->chan_type != PLAN_CHAN_MEMORY && op->chan_type != PLAN_CHAN_PORT)
            return vf(V, kp, "a remote entry needs the op's channel_type to be \"memory\" or "
                             "\"port\" (it selects the remote table), not \"%s\"",
                      plan_chan_name(op->chan_type));
        int a = op->chan_type;
        if (ref->id < 0 || ref->id >= tb->nremote[a])
            return vf(V, kp, "%d is outside the thread block's %d %s remote buffer ref(s)",
                      ref->id, tb->nremote[a], plan_chan_name(op->chan_type));
        const PlanRemote *rb = &g->remotes[tb->remote[a][ref->id]];
        b = rb->type;
        if (want_scratch && b != PLAN_BUF_SCRATCH)
            return vf(V, kp, "'%s' needs a remote scratch (\"s\") buffer here, but remote buffer "
                      "%d is rank %d's %s", plan_op_name(op->kind), tb->remote[a][ref->id],
                      rb->rank, plan_buf_long_name(b));
        return check_range(V, path, ref, r, rb->rank, b, use);
    }
    case PLAN_REF_SWITCH: {
        pkey(kp, path, "switch_channel_id");
        if (op->chan_type != PLAN_CHAN_SWITCH)
            return vf(V, kp, "a switch entry needs channel_type \"switch\", not \"%s\"",
                      plan_chan_name(op->chan_type));
        if (ref->id < 0 || ref->id >= tb->nchan[PLAN_CHAN_SWITCH])
            return vf(V, kp, "%d is outside the thread block's %d switch channel(s)", ref->id,
                      tb->nchan[PLAN_CHAN_SWITCH]);
        const PlanSwitch *sw = &g->switches[tb->chan[PLAN_CHAN_SWITCH][ref->id]];
        b = sw->buf;
        if (want_scratch && b != PLAN_BUF_SCRATCH)
            return vf(V, kp, "'%s' needs a switch channel on scratch here, not on %s",
                      plan_op_name(op->kind), plan_buf_long_name(b));
        /* a multicast address reaches the same offset in every member's buffer */
        for (int m = 0; m < sw->nranks; m++)
            if (!check_range(V, path, ref, sw->ranks[m], sw->ranks[m], b, use)) return false;
        return true;
    }
    }
    return true;
}

/* Entry list rule: entries [0, lead) are local, the rest are `rest`; count in [lo, hi]. */
typedef struct {
    int lo, hi;
    int lead;                  /* leading local entries */
    PlanRefKind rest;
} ListShape;

static bool check_list_shape(Va *V, const char *path, const PlanOp *op, const char *key, int n,
                             ListShape s) {
    char kp[PATH_MAX_LEN];
    pkey(kp, path, key);
    if (n < s.lo || n > s.hi) {
        if (s.lo == s.hi)
            return vf(V, s.lo == 0 || n == 0 ? path : kp, "'%s' needs exactly %d %s entr%s, "
                      "got %d", plan_op_name(op->kind), s.lo, key, s.lo == 1 ? "y" : "ies", n);
        return vf(V, n == 0 ? path : kp, "'%s' needs %d to %d %s entries, got %d",
                  plan_op_name(op->kind), s.lo, s.hi, key, n);
    }
    return true;
}

static PlanRefKind shape_kind(ListShape s, int i) { return i < s.lead ? PLAN_REF_LOCAL : s.rest; }

/* Checks an op's entries against its kind (spec §5) and bounds every one of them. */
static bool check_entries(Va *V, const char *path, const PlanOp *op, int r, const PlanTb *tb) {
    const int M = PLAN_MAX_OP_ENTRIES;
    ListShape src = {0, 0, 0, PLAN_REF_LOCAL}, dst = {0, 0, 0, PLAN_REF_LOCAL};
    /* which entries are LL packet buffers (must be scratch, bounded in packet space) */
    int src_pkt_from = M, dst_pkt_from = M, dst_pkt_to = M; /* [from, to) */
    int src_pkt_to = M;
    switch (op->kind) {
    case PLAN_OP_COPY: src = dst = (ListShape){1, 1, 1, PLAN_REF_LOCAL}; break;
    case PLAN_OP_CPKT:
        src = dst = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        dst_pkt_from = 0;
        break;
    case PLAN_OP_UPKT:
        src = dst = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        src_pkt_from = 0;
        break;
    case PLAN_OP_PUT: case PLAN_OP_PWS: case PLAN_OP_PWSF:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){1, M, 0, PLAN_REF_REMOTE};
        break;
    case PLAN_OP_GET:
        src = (ListShape){1, M, 0, PLAN_REF_REMOTE};
        dst = (ListShape){1, M, M, PLAN_REF_LOCAL};
        break;
    case PLAN_OP_PPKT:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){1, M, 0, PLAN_REF_REMOTE};
        dst_pkt_from = 0;
        if (op->chan_type == PLAN_CHAN_PORT) { /* port ppkt copies packets that already exist */
            src_pkt_from = 0;
        }
        break;
    case PLAN_OP_RPPKT:
        src = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        dst = (ListShape){1, M, 0, PLAN_REF_REMOTE};
        src_pkt_from = 0;
        dst_pkt_from = 0;
        break;
    case PLAN_OP_RE:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        break;
    case PLAN_OP_RES:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){1, M, 1, PLAN_REF_REMOTE};
        break;
    case PLAN_OP_RRE:
        src = (ListShape){1, M, 1, PLAN_REF_REMOTE};
        dst = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        break;
    case PLAN_OP_RRES:
        src = (ListShape){1, M, 1, PLAN_REF_REMOTE};
        dst = (ListShape){1, M, 1, PLAN_REF_REMOTE};
        break;
    case PLAN_OP_REPKT:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        src_pkt_from = 1;
        break;
    case PLAN_OP_RESPKT:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){1, M, 1, PLAN_REF_REMOTE};
        src_pkt_from = 1;
        dst_pkt_from = 1;
        break;
    case PLAN_OP_RECPKT:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){2, 2, 2, PLAN_REF_LOCAL};
        src_pkt_from = 1;
        dst_pkt_from = 1;
        break;
    case PLAN_OP_RECSPKT:
        src = (ListShape){1, M, M, PLAN_REF_LOCAL};
        dst = (ListShape){2, M, 2, PLAN_REF_REMOTE};
        src_pkt_from = 1;
        dst_pkt_from = 1;
        break;
    case PLAN_OP_GLRES:
        src = dst = (ListShape){1, 1, 0, PLAN_REF_SWITCH};
        break;
    case PLAN_OP_GSTORE:
        src = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        dst = (ListShape){1, 1, 0, PLAN_REF_SWITCH};
        break;
    case PLAN_OP_GSTOREPKT:
        src = (ListShape){1, 1, 1, PLAN_REF_LOCAL};
        dst = (ListShape){1, 1, 0, PLAN_REF_SWITCH};
        src_pkt_from = 0;
        dst_pkt_from = 0;
        break;
    default: /* sync ops and pipeline: no entries */
        break;
    }
    if (!check_list_shape(V, path, op, "src_buff", op->nsrc, src)) return false;
    if (!check_list_shape(V, path, op, "dst_buff", op->ndst, dst)) return false;
    char kp[PATH_MAX_LEN], ep[PATH_MAX_LEN];
    pkey(kp, path, "src_buff");
    for (int i = 0; i < op->nsrc; i++) {
        pidx(ep, kp, i);
        bool pkt = i >= src_pkt_from && i < src_pkt_to;
        /* port ppkt sources are packets in any buffer; the others must be scratch */
        bool scratch = pkt && !(op->kind == PLAN_OP_PPKT);
        if (!check_ref(V, ep, op, &op->src[i], r, tb, shape_kind(src, i), scratch,
                       pkt ? USE_PACKET : USE_DATA))
            return false;
    }
    pkey(kp, path, "dst_buff");
    for (int i = 0; i < op->ndst; i++) {
        pidx(ep, kp, i);
        bool pkt = i >= dst_pkt_from && i < dst_pkt_to;
        if (!check_ref(V, ep, op, &op->dst[i], r, tb, shape_kind(dst, i), pkt,
                       pkt ? USE_PACKET : USE_DATA))
            return false;
    }
    /* every entry moves the same amount of data: the executor takes it from one entry */
    for (int i = 0; i < op->nsrc + op->ndst; i++) {
        const PlanRef *e = i < op->nsrc ? &op->src[i] : &op->dst[i - op->nsrc];
        if (e->size != op->src[0].size) {
            pkey(kp, path, i < op->nsrc ? "src_buff" : "dst_buff");
            pidx(ep, kp, i < op->nsrc ? i : i - op->nsrc);
            pkey(kp, ep, "size");
            return vf(V, kp, "%u differs from src_buff[0].size %u (all entries of an op move "
                      "the same number of chunks)", e->size, op->src[0].size);
        }
    }
    /* get reads the peer at the local entry's offset and writes at the remote entry's offset
     * (spec §5.4): both offsets must fit both buffers */
    if (op->kind == PLAN_OP_GET && op->chan_type == PLAN_CHAN_MEMORY) {
        for (int m = 0; m < op->nsrc; m++) {
            const PlanRemote *rb = &V->p->gpus[r].remotes[tb->remote[PLAN_CHAN_MEMORY][op->src[m].id]];
            pkey(kp, path, "dst_buff");
            pidx(ep, kp, m);
            if (!check_range(V, ep, &op->dst[m], r, rb->rank, rb->type, USE_DATA)) return false;
            pkey(kp, path, "src_buff");
            pidx(ep, kp, m);
            if (!check_range(V, ep, &op->src[m], r, r, op->dst[m].type, USE_DATA)) return false;
        }
    }
    return true;
}

/* k-th occurrence of `peer` in rank r's list of type t, for channel index c (0-based). */
static int occurrence(const PlanGpu *g, int t, int c) {
    int k = 0;
    for (int i = 0; i < c; i++)
        if (g->peers[t][i] == g->peers[t][c]) k++;
    return k;
}

static int count_peer(const PlanGpu *g, int t, int peer) {
    int k = 0;
    for (int i = 0; i < g->npeers[t]; i++)
        if (g->peers[t][i] == peer) k++;
    return k;
}

/* The op's channel_type and channel_ids (spec §2.7, §5). */
static bool check_op_channels(Va *V, const char *path, const PlanOp *op, int r, const PlanTb *tb) {
    const Plan *p = V->p;
    const PlanGpu *g = &p->gpus[r];
    int flags = plan_op_flags(op->kind);
    const char *name = plan_op_name(op->kind);
    char kp[PATH_MAX_LEN];
    pkey(kp, path, "channel_type");
    if ((unsigned)op->chan_type > PLAN_CHAN_NONE) return vf(V, kp, "invalid channel type");
    PlanChanType ct = op->chan_type;
    if (!(flags & OPF_CHANNEL)) {
        if (ct != PLAN_CHAN_NONE)
            return vf(V, kp, "'%s' uses no channel, but channel_type is \"%s\"", name,
                      plan_chan_name(ct));
        if (op->nchan > 0)
            return vf(V, path, "'%s' uses no channel, but has channel_ids", name);
        return true;
    }
    /* which channel types each op accepts */
    bool mem = true, port = true, sw = false;
    switch (op->kind) {
    case PLAN_OP_GET: case PLAN_OP_RES: case PLAN_OP_RRE: case PLAN_OP_RRES:
    case PLAN_OP_RESPKT: case PLAN_OP_RECSPKT:
        port = false;
        break;
    case PLAN_OP_GLRES: case PLAN_OP_GSTORE: case PLAN_OP_GSTOREPKT:
        mem = port = false;
        sw = true;
        break;
    default:
        break;
    }
    if (!((ct == PLAN_CHAN_MEMORY && mem) || (ct == PLAN_CHAN_PORT && port) ||
          (ct == PLAN_CHAN_SWITCH && sw))) {
        if (ct == PLAN_CHAN_NONE)
            return vf(V, path, "'%s' needs channel_type %s", name,
                      sw ? "\"switch\"" : port ? "\"memory\" or \"port\"" : "\"memory\"");
        return vf(V, kp, "'%s' cannot use a \"%s\" channel (expected %s)", name,
                  plan_chan_name(ct), sw ? "\"switch\"" : port ? "\"memory\" or \"port\"" :
                  "\"memory\"");
    }
    pkey(kp, path, "channel_ids");
    if (op->nchan < 0 || op->nchan > PLAN_MAX_OP_CHANNELS)
        return vf(V, kp, "%d channels, more than the executor's limit of %d", op->nchan,
                  PLAN_MAX_OP_CHANNELS);
    for (int i = 0; i < op->nchan; i++) {
        char ip[PATH_MAX_LEN];
        pidx(ip, kp, i);
        int c = op->chan_ids[i];
        if (c < 0 || c >= tb->nchan[ct])
            return vf(V, ip, "%d is outside the thread block's %d %s channel(s)", c,
                      tb->nchan[ct], plan_chan_name(ct));
        if (ct == PLAN_CHAN_SWITCH) continue;
        /* a channel that is used must have a partner on the peer (spec §6.2) */
        int gc = tb->chan[ct][c];
        int peer = g->peers[ct][gc];
        int k = occurrence(g, ct, gc);
        int back = count_peer(&p->gpus[peer], ct, r);
        if (k >= back)
            return vf(V, ip, "%s channel %d (to rank %d) has no partner: rank %d declares %d %s "
                      "channel(s) to rank %d, and the k-th channel pairs with the k-th "
                      "(spec §6.2)", plan_chan_name(ct), gc, peer, peer, back,
                      plan_chan_name(ct), r);
    }
    bool sync = flags & OPF_SYNC;
    if (sync && op->nchan == 0) return vf(V, path, "'%s' needs at least one channel in channel_ids", name);
    /* port data ops push one request per destination, on channel_ids[m] (spec §5.5) */
    if (ct == PLAN_CHAN_PORT && !sync) {
        if (op->nchan != op->ndst)
            return vf(V, kp, "port '%s' needs one channel per dst_buff entry: %d channel(s), "
                      "%d entries", name, op->nchan, op->ndst);
        for (int m = 0; m < op->ndst; m++) {
            const PlanRef *d = &op->dst[m];
            if (d->kind != PLAN_REF_REMOTE || d->id < 0 || d->id >= tb->nremote[PLAN_CHAN_PORT])
                continue; /* reported by the entry checks */
            int owner = g->remotes[tb->remote[PLAN_CHAN_PORT][d->id]].rank;
            int peer = g->peers[PLAN_CHAN_PORT][tb->chan[PLAN_CHAN_PORT][op->chan_ids[m]]];
            if (owner != peer) {
                char ip[PATH_MAX_LEN];
                pidx(ip, kp, m);
                return vf(V, ip, "port channel to rank %d carries dst_buff[%d], a buffer of "
                          "rank %d", peer, m, owner);
            }
        }
    }
    return true;
}

static bool check_op(Va *V, const char *path, const PlanOp *op, int r, const PlanTb *tb,
                     bool inner) {
    const PlanGpu *g = &V->p->gpus[r];
    if ((unsigned)op->kind >= PLAN_OP_COUNT) return vf(V, path, "invalid op kind %d", op->kind);
    const char *name = plan_op_name(op->kind);
    char kp[PATH_MAX_LEN];
    if (op->nsrc < 0 || op->nsrc > PLAN_MAX_OP_ENTRIES || op->ndst < 0 ||
        op->ndst > PLAN_MAX_OP_ENTRIES)
        return vf(V, path, "more than %d src or dst entries", PLAN_MAX_OP_ENTRIES);
    if (!check_op_channels(V, path, op, r, tb)) return false;
    if (!check_entries(V, path, op, r, tb)) return false;

    if (op->kind == PLAN_OP_SEM_ACQUIRE || op->kind == PLAN_OP_SEM_RELEASE) {
        pkey(kp, path, "semaphore_ids");
        if (op->nsem <= 0) return vf(V, path, "'%s' needs at least one semaphore id", name);
    } else if (op->nsem != 0) {
        return vf(V, path, "'%s' takes no semaphore_ids", name);
    }
    if (op->nsem > PLAN_MAX_OP_SEMAPHORES)
        return vf(V, path, "%d semaphores, more than the executor's limit of %d", op->nsem,
                  PLAN_MAX_OP_SEMAPHORES);
    for (int i = 0; i < op->nsem; i++) {
        char ip[PATH_MAX_LEN];
        pkey(kp, path, "semaphore_ids");
        pidx(ip, kp, i);
        if (op->sem_ids[i] < 0 || op->sem_ids[i] >= g->nsems)
            return vf(V, ip, "%d is outside the rank's %d semaphore(s)", op->sem_ids[i], g->nsems);
    }
    if (op->kind == PLAN_OP_BARRIER) {
        pkey(kp, path, "barrier_id");
        if (op->barrier_id < 0 || op->barrier_id >= PLAN_MAX_BARRIERS)
            return vf(V, kp, "%d is outside 0..%d (the executor has %d grid barriers)",
                      op->barrier_id, PLAN_MAX_BARRIERS - 1, PLAN_MAX_BARRIERS);
        pkey(kp, path, "num_threadblocks");
        if (op->num_threadblocks < 1 || op->num_threadblocks > g->ntbs)
            return vf(V, kp, "%d is outside 1..%d (the rank's thread blocks)",
                      op->num_threadblocks, g->ntbs);
    }
    if (op->tbg_size != 0) {
        pkey(kp, path, "tbg_info");
        char ip[PATH_MAX_LEN];
        if (op->tbg_size < 1 || op->tbg_size > g->ntbs) {
            pkey(ip, kp, "tbg_size");
            return vf(V, ip, "%d is outside 1..%d (the rank's thread blocks)", op->tbg_size,
                      g->ntbs);
        }
        if (op->tbg_id < 0 || op->tbg_id >= op->tbg_size) {
            pkey(ip, kp, "tb_id");
            return vf(V, ip, "%d is outside 0..%d (tbg_size is %d)", op->tbg_id,
                      op->tbg_size - 1, op->tbg_size);
        }
    }
    if ((unsigned)op->reduce_op > PLAN_RED_AVG) return vf(V, path, "invalid reduce_op");

    if (op->kind == PLAN_OP_PIPELINE) {
        if (inner) return vf(V, path, "nested pipelines are not supported");
        pkey(kp, path, "iter_context");
        char ip[PATH_MAX_LEN];
        if (op->unit_size == 0 || op->unit_size > UINT32_MAX) {
            pkey(ip, kp, "unit_size");
            return vf(V, ip, "%" PRIu64 " is outside 1..%u bytes", op->unit_size, UINT32_MAX);
        }
        if (op->num_chunks == 0) {
            pkey(ip, kp, "num_chunks");
            return vf(V, ip, "must be at least 1");
        }
        if (op->ninner <= 0 || !op->inner) return vf(V, path, "pipeline has no ops");
        pkey(kp, path, "ops");
        for (int i = 0; i < op->ninner; i++) {
            pidx(ip, kp, i);
            if (!check_op(V, ip, &op->inner[i], r, tb, true)) return false;
        }
    } else if (op->ninner != 0) {
        return vf(V, path, "'%s' has inner ops; only a pipeline does", name);
    }
    return true;
}

/* Every participant of a barrier must agree on its size and run it equally often. */
static bool check_barriers(Va *V, const char *gpath, const PlanGpu *g) {
    for (int id = 0; id < PLAN_MAX_BARRIERS; id++) {
        int users = 0, want = -1, first_tb = -1, first_count = 0;
        for (int t = 0; t < g->ntbs; t++) {
            const PlanTb *tb = &g->tbs[t];
            int count = 0;
            for (int i = 0; i < tb->nops; i++) {
                const PlanOp *op = &tb->ops[i];
                for (int j = -1; j < op->ninner; j++) {
                    const PlanOp *o = j < 0 ? op : &op->inner[j];
                    if (o->kind != PLAN_OP_BARRIER || o->barrier_id != id) continue;
                    count++;
                    if (want < 0) want = o->num_threadblocks;
                    else if (o->num_threadblocks != want)
                        return vf(V, gpath, "barrier %d is used with num_threadblocks %d and %d",
                                  id, want, o->num_threadblocks);
                }
            }
            if (count == 0) continue;
            if (first_tb < 0) {
                first_tb = t;
                first_count = count;
            } else if (count != first_count) {
                return vf(V, gpath, "barrier %d runs %d time(s) in thread block %d but %d in "
                          "thread block %d (participants would hang)", id, first_count,
                          first_tb, count, t);
            }
            users++;
        }
        if (users > 0 && users != want)
            return vf(V, gpath, "barrier %d has num_threadblocks %d but %d thread block(s) use "
                      "it (participants would hang)", id, want, users);
    }
    return true;
}

/* Switch groups: every member declares the same groups in the same order (spec §2.3, §6.6). */
static bool check_switches(Va *V, const char *gpath, int r) {
    const Plan *p = V->p;
    const PlanGpu *g = &p->gpus[r];
    for (int s = 0; s < g->nswitch; s++) {
        const PlanSwitch *sw = &g->switches[s];
        char sp[PATH_MAX_LEN];
        pfmt(sp, "%s switch channel %d", gpath, s);
        if ((unsigned)sw->buf >= PLAN_BUF_COUNT) return vf(V, sp, "invalid buffer type");
        if (sw->nranks < 1) return vf(V, sp, "rank group is empty");
        bool self = false;
        for (int i = 0; i < sw->nranks; i++) {
            int m = sw->ranks[i];
            if (m < 0 || m >= p->ngpus)
                return vf(V, sp, "rank %d is outside 0..%d", m, p->ngpus - 1);
            for (int j = 0; j < i; j++)
                if (sw->ranks[j] == m) return vf(V, sp, "rank %d is listed twice", m);
            if (m == r) self = true;
        }
        if (!self) return vf(V, sp, "group does not contain rank %d itself", r);
        for (int i = 0; i < sw->nranks; i++) {
            int m = sw->ranks[i];
            if (m == r) continue;
            /* this is the k-th group of r containing m; it must be m's k-th group containing r */
            int k = 0;
            for (int s2 = 0; s2 < s; s2++)
                for (int j = 0; j < g->switches[s2].nranks; j++)
                    if (g->switches[s2].ranks[j] == m) k++;
            const PlanGpu *gm = &p->gpus[m];
            const PlanSwitch *match = NULL;
            for (int s2 = 0; s2 < gm->nswitch && !match; s2++)
                for (int j = 0; j < gm->switches[s2].nranks; j++)
                    if (gm->switches[s2].ranks[j] == r) {
                        if (k-- == 0) match = &gm->switches[s2];
                        break;
                    }
            bool same = match && match->nranks == sw->nranks && match->buf == sw->buf;
            for (int j = 0; same && j < sw->nranks; j++) same = match->ranks[j] == sw->ranks[j];
            if (!same)
                return vf(V, sp, "rank %d does not declare the same switch channel (same ranks, "
                          "same buffer, same order): multicast groups are created collectively",
                          m);
        }
    }
    return true;
}

bool plan_validate(const Plan *p, const char *what, PlanErr *err) {
    PlanErr dummy;
    if (!err) err = &dummy;
    Va V = {.p = p, .what = what ? what : "<memory>", .err = err};
    if (!p) return vf(&V, "", "no plan");
    if (!p->name || !*p->name) return vf(&V, "name", "must not be empty");
    if ((unsigned)p->collective >= PLAN_COLL_COUNT) return vf(&V, "collective", "invalid value");
    if ((unsigned)p->target >= PLAN_TARGET_COUNT) return vf(&V, "target", "invalid value");
    if (p->threads < 1 || p->threads > PLAN_MAX_THREADS)
        return vf(&V, "num_threads_per_block", "%d is outside 1..%d", p->threads,
                  PLAN_MAX_THREADS);
    if (p->alignment < 4 || (p->alignment & (p->alignment - 1)) != 0)
        return vf(&V, "buffer_alignment", "%u must be a power of two, at least 4", p->alignment);
    if (p->min_size > p->max_size)
        return vf(&V, "min_message_size", "%" PRIu64 " is larger than max_message_size %" PRIu64,
                  p->min_size, p->max_size);
    if (p->ngpus < 1 || !p->gpus) return vf(&V, "gpus", "the plan has no ranks");
    for (int i = 0; i < p->ntags; i++)
        if (!p->tags || !p->tags[i]) return vf(&V, "tags", "missing tag text");

    /* rank-level tables of every rank first: thread blocks of one rank look into the others */
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        char gp[PATH_MAX_LEN], kp[PATH_MAX_LEN], ip[PATH_MAX_LEN];
        pidx(gp, "gpus", r);
        if (g->id != r) {
            pkey(kp, gp, "id");
            return vf(&V, kp, "%d must equal the position %d", g->id, r);
        }
        if (g->input_chunks == 0) {
            pkey(kp, gp, "input_chunks");
            return vf(&V, kp, "must be at least 1 (the executor divides by it)");
        }
        if (g->output_chunks == 0) {
            pkey(kp, gp, "output_chunks");
            return vf(&V, kp, "must be at least 1 (the executor divides by it)");
        }
        /* memory/port peers */
        pkey(kp, gp, "channels");
        for (int t = 0; t < 2; t++)
            for (int c = 0; c < g->npeers[t]; c++) {
                int peer = g->peers[t][c];
                if (peer < 0 || peer >= p->ngpus)
                    return vf(&V, kp, "%s channel %d connects to rank %d, outside 0..%d",
                              plan_chan_name((PlanChanType)t), c, peer, p->ngpus - 1);
                if (peer == r)
                    return vf(&V, kp, "%s channel %d connects rank %d to itself",
                              plan_chan_name((PlanChanType)t), c, r);
            }
        if (!check_switches(&V, gp, r)) return false;
        /* remote buffers */
        pkey(kp, gp, "remote_buffers");
        for (int b = 0; b < g->nremotes; b++) {
            const PlanRemote *rb = &g->remotes[b];
            pidx(ip, kp, b);
            if (rb->rank < 0 || rb->rank >= p->ngpus)
                return vf(&V, ip, "rank %d is outside 0..%d", rb->rank, p->ngpus - 1);
            if (rb->rank == r) return vf(&V, ip, "rank %d names itself", r);
            if ((unsigned)rb->type >= PLAN_BUF_COUNT) return vf(&V, ip, "invalid buffer type");
            if (!rb->access[0] && !rb->access[1])
                return vf(&V, ip, "access_channel_types is empty (expected \"memory\" and/or "
                                  "\"port\")");
        }
    }
    /* then the thread blocks, which refer to every rank's tables */
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        char gp[PATH_MAX_LEN], kp[PATH_MAX_LEN], ip[PATH_MAX_LEN];
        pidx(gp, "gpus", r);
        if (g->ntbs < 0 || (g->ntbs > 0 && !g->tbs)) return vf(&V, gp, "invalid thread blocks");
        if (g->ntbs > LOAD_MAX_TBS)
            return vf(&V, gp, "%d thread blocks, more than the limit of %d", g->ntbs, LOAD_MAX_TBS);
        for (int t = 0; t < g->ntbs; t++) {
            const PlanTb *tb = &g->tbs[t];
            char tp[PATH_MAX_LEN];
            pkey(kp, gp, "threadblocks");
            pidx(tp, kp, t);
            if (tb->id != t) {
                pkey(kp, tp, "id");
                return vf(&V, kp, "%d must equal the position %d", tb->id, t);
            }
            pkey(kp, tp, "channels");
            int have[PLAN_CHAN_TYPES] = {g->npeers[0], g->npeers[1], g->nswitch};
            for (int ct = 0; ct < PLAN_CHAN_TYPES; ct++) {
                if (tb->nchan[ct] < 0 || tb->nchan[ct] > PLAN_MAX_TB_CHANNELS)
                    return vf(&V, kp, "%d %s channels, outside 0..%d", tb->nchan[ct],
                              plan_chan_name((PlanChanType)ct), PLAN_MAX_TB_CHANNELS);
                for (int j = 0; j < tb->nchan[ct]; j++)
                    if (tb->chan[ct][j] < 0 || tb->chan[ct][j] >= have[ct])
                        return vf(&V, kp, "%s channel_ids: %d is outside the rank's %d %s "
                                  "channel(s)", plan_chan_name((PlanChanType)ct), tb->chan[ct][j],
                                  have[ct], plan_chan_name((PlanChanType)ct));
            }
            pkey(kp, tp, "remote_buffer_refs");
            for (int a = 0; a < PLAN_REMOTE_TYPES; a++) {
                if (tb->nremote[a] < 0 || tb->nremote[a] > PLAN_MAX_TB_REMOTES)
                    return vf(&V, kp, "%d %s refs, outside 0..%d", tb->nremote[a],
                              plan_chan_name((PlanChanType)a), PLAN_MAX_TB_REMOTES);
                for (int j = 0; j < tb->nremote[a]; j++) {
                    int id = tb->remote[a][j];
                    if (id < 0 || id >= g->nremotes)
                        return vf(&V, kp, "%s remote_buffer_ids: %d is outside the rank's %d "
                                  "remote buffer(s)", plan_chan_name((PlanChanType)a), id,
                                  g->nremotes);
                    if (!g->remotes[id].access[a])
                        return vf(&V, kp, "%s remote_buffer_ids: remote buffer %d is not "
                                  "accessible through \"%s\" (its access_channel_types lack it)",
                                  plan_chan_name((PlanChanType)a), id,
                                  plan_chan_name((PlanChanType)a));
                }
            }
            if (tb->nops < 0 || (tb->nops > 0 && !tb->ops)) return vf(&V, tp, "invalid ops");
            int flat = plan_tb_flat_ops(tb);
            if (p->target == PLAN_TARGET_MSCCLPP && flat > PLAN_MAX_OPS_PER_TB)
                return vf(&V, tp, "%d ops after flattening pipelines, more than MSCCL++'s "
                          "executor's limit of %d", flat, PLAN_MAX_OPS_PER_TB);
            pkey(kp, tp, "ops");
            for (int i = 0; i < tb->nops; i++) {
                pidx(ip, kp, i);
                if (!check_op(&V, ip, &tb->ops[i], r, tb, false)) return false;
            }
        }
        if (!check_barriers(&V, gp, g)) return false;
    }
    return true;
}

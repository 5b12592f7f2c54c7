/*
 * api_plan.c - public entry points for plans (mscclrt_plan_*) and the names of data types and
 * reduction operators. Argument checks happen here; the plan module does the loading and the
 * geometry, and its messages become this thread's error text (MSCCLRT_ERR_PLAN).
 */
#include "core/api_plan.h"
#include "dtype/dtype.h"
#include "core/err.h"
#include "core/intmath.h"
#include "core/log.h"

#include <stdlib.h>
#include <string.h>

const Plan *api_plan_model(const mscclrt_plan *p) {
    if (!p || p->magic != API_PLAN_MAGIC) return NULL;
    return p->plan;
}

mscclrt_result api_plan_wrap(Plan *pl, mscclrt_plan **out, const char *what) {
    mscclrt_plan *h = calloc(1, sizeof *h);
    if (!h) {
        plan_free(pl);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "%s: out of memory", what);
    }
    h->magic = API_PLAN_MAGIC;
    h->plan = pl;
    *out = h;
    return MSCCLRT_SUCCESS;
}

/* Wraps a freshly loaded model into a handle (takes ownership of pl). */
static mscclrt_result wrap(mscclrt_plan **out, Plan *pl, const char *fn) {
    TRY(api_plan_wrap(pl, out, fn));
    LOG_INFO(LOG_SUB_PLAN, "loaded plan '%s' (%s, %d ranks, protocol %s)", PLAN_ESC(pl->name),
             PLAN_ESC(pl->collective_name), pl->ngpus, pl->protocol_ll ? "LL" : "Simple");
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API mscclrt_result mscclrt_plan_load(mscclrt_plan **out, const char *path) {
    if (!out) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_plan_load: out argument is NULL");
    *out = NULL;
    if (!path) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_plan_load: path argument is NULL");
    PlanErr e;
    Plan *pl = plan_load_file(path, &e);
    if (!pl) return rt_fail(MSCCLRT_ERR_PLAN, "%s", e.msg);
    return wrap(out, pl, "mscclrt_plan_load");
}

MSCCLRT_API mscclrt_result mscclrt_plan_parse(mscclrt_plan **out, const char *text, size_t len,
                                              const char *what) {
    if (!out) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_plan_parse: out argument is NULL");
    *out = NULL;
    if (!text && len > 0)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_plan_parse: text argument is NULL");
    PlanErr e;
    Plan *pl = plan_parse(text ? text : "", len, what ? what : "<memory>", &e);
    if (!pl) return rt_fail(MSCCLRT_ERR_PLAN, "%s", e.msg);
    return wrap(out, pl, "mscclrt_plan_parse");
}

MSCCLRT_API void mscclrt_plan_free(mscclrt_plan *plan) {
    if (!plan || plan->magic != API_PLAN_MAGIC) return;
    plan->magic = 0;
    plan_free(plan->plan);
    plan->plan = NULL;
    free(plan);
}

MSCCLRT_API mscclrt_result mscclrt_plan_get_info(const mscclrt_plan *plan, mscclrt_plan_info *info) {
    const Plan *p = api_plan_model(plan);
    if (!p) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_plan_get_info: plan argument is %s",
                           plan ? "not a live plan" : "NULL");
    if (!info) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_plan_get_info: info argument is NULL");
    memset(info, 0, sizeof *info);
    info->name = p->name;
    info->collective = p->collective_name;
    info->nranks = p->ngpus;
    info->inplace = p->inplace;
    info->protocol_ll = p->protocol_ll;
    info->threads_per_block = p->threads;
    info->alignment = p->alignment;
    info->min_message_size = p->min_size;
    info->max_message_size = p->max_size;
    return MSCCLRT_SUCCESS;
}

/* Checks one call of `bytes` against every rank's geometry; sizes out on success. */
static mscclrt_result check_call(const Plan *p, uint64_t bytes, uint64_t *in, uint64_t *out,
                                 const char *fn) {
    plan_call_sizes(p, bytes, in, out);
    /* a message the executor runs as pieces (plan_pieces.c) is served: its pieces fit */
    if (*in == *out && plan_piece_bytes(p, *in)) return MSCCLRT_SUCCESS;
    for (int r = 0; r < p->ngpus; r++) {
        PlanGeom g;
        PlanErr e;
        if (!plan_geom(p, r, *in, *out, &g, &e))
            return rt_fail(MSCCLRT_ERR_PLAN, "%s: message of %llu bytes: %s", fn,
                           (unsigned long long)bytes, e.msg);
    }
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API mscclrt_result mscclrt_plan_call_sizes(const mscclrt_plan *plan, size_t bytes,
                                                   size_t *in_bytes, size_t *out_bytes) {
    const Plan *p = api_plan_model(plan);
    if (!p) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_plan_call_sizes: plan argument is %s",
                           plan ? "not a live plan" : "NULL");
    if (!in_bytes || !out_bytes)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_plan_call_sizes: %s argument is NULL",
                       in_bytes ? "out_bytes" : "in_bytes");
    uint64_t in, out;
    TRY(check_call(p, bytes, &in, &out, "mscclrt_plan_call_sizes"));
    if (in > SIZE_MAX || out > SIZE_MAX)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_plan_call_sizes: sizes overflow size_t");
    *in_bytes = (size_t)in;
    *out_bytes = (size_t)out;
    return MSCCLRT_SUCCESS;
}

MSCCLRT_API mscclrt_result mscclrt_plan_min_bytes(const mscclrt_plan *plan, size_t *bytes) {
    const Plan *p = api_plan_model(plan);
    if (!p) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_plan_min_bytes: plan argument is %s",
                           plan ? "not a live plan" : "NULL");
    if (!bytes) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_plan_min_bytes: bytes argument is NULL");
    /* `bytes` must split into aligned chunks of the buffer(s) it measures, on every rank */
    uint64_t A = p->alignment, unit = 1;
    const bool out_only = p->collective == PLAN_COLL_ALLGATHER || p->collective == PLAN_COLL_GATHER;
    const bool in_only = p->collective == PLAN_COLL_REDUCESCATTER || p->collective == PLAN_COLL_SCATTER;
    for (int r = 0; r < p->ngpus && unit; r++) {
        const PlanGpu *g = &p->gpus[r];
        if (!out_only) unit = rt_lcm(unit, A * g->input_chunks);
        if (!in_only && unit) unit = rt_lcm(unit, A * g->output_chunks);
    }
    if (unit == 0)
        return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s': the chunk counts of its ranks have no common "
                       "message size below 2^64", PLAN_ESC(p->name));
    uint64_t b = p->min_size <= unit ? unit : (p->min_size + unit - 1) / unit * unit;
    if (b < p->min_size || b > p->max_size)
        return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s': no message size in [%llu, %llu] is a multiple "
                       "of %llu bytes (alignment x chunks)", PLAN_ESC(p->name),
                       (unsigned long long)p->min_size, (unsigned long long)p->max_size,
                       (unsigned long long)unit);
    uint64_t in, out;
    TRY(check_call(p, b, &in, &out, "mscclrt_plan_min_bytes"));
    if (b > SIZE_MAX) return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s': smallest size overflows size_t",
                                     PLAN_ESC(p->name));
    *bytes = (size_t)b;
    return MSCCLRT_SUCCESS;
}

/* ---- names of data types and operators (values are NCCL's) ------------------------------------ */

/* The names and sizes themselves live in one table, runtime/dtype (dtype_*). */
/* Common spellings accepted by the parse functions besides the canonical names. */
static const struct { const char *alias; mscclrt_dtype t; } dtype_aliases[] = {
    {"half", MSCCLRT_FLOAT16},  {"fp16", MSCCLRT_FLOAT16}, {"f16", MSCCLRT_FLOAT16},
    {"float", MSCCLRT_FLOAT32}, {"fp32", MSCCLRT_FLOAT32}, {"f32", MSCCLRT_FLOAT32},
    {"double", MSCCLRT_FLOAT64}, {"fp64", MSCCLRT_FLOAT64}, {"f64", MSCCLRT_FLOAT64},
    {"bf16", MSCCLRT_BFLOAT16}, {"int", MSCCLRT_INT32},    {"char", MSCCLRT_INT8},
};

MSCCLRT_API const char *mscclrt_dtype_name(mscclrt_dtype t) {
    return (unsigned)t < MSCCLRT_DTYPE_COUNT ? dtype_name(t) : "invalid";
}

MSCCLRT_API size_t mscclrt_dtype_size(mscclrt_dtype t) {
    return dtype_size(t);
}

MSCCLRT_API mscclrt_result mscclrt_dtype_parse(const char *name, mscclrt_dtype *out) {
    if (!name || !out)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_dtype_parse: %s argument is NULL",
                       name ? "out" : "name");
    if (dtype_parse(name, out)) return MSCCLRT_SUCCESS;
    for (size_t i = 0; i < sizeof dtype_aliases / sizeof dtype_aliases[0]; i++)
        if (strcmp(name, dtype_aliases[i].alias) == 0) {
            *out = dtype_aliases[i].t;
            return MSCCLRT_SUCCESS;
        }
    return rt_fail(MSCCLRT_ERR_INVALID_ARG, "unknown data type '%s' (expected float16, bfloat16, "
                   "float32, float64, int8, uint8, int32, uint32, int64, uint64, fp8_e4m3 or "
                   "fp8_e5m2)", name);
}

MSCCLRT_API const char *mscclrt_redop_name(mscclrt_redop op) {
    return (unsigned)op < MSCCLRT_REDOP_COUNT ? dtype_redop_name(op) : "invalid";
}

MSCCLRT_API mscclrt_result mscclrt_redop_parse(const char *name, mscclrt_redop *out) {
    if (!name || !out)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_redop_parse: %s argument is NULL",
                       name ? "out" : "name");
    if (dtype_redop_parse(name, out)) return MSCCLRT_SUCCESS;
    return rt_fail(MSCCLRT_ERR_INVALID_ARG, "unknown reduction operator '%s' (expected sum, prod, "
                   "max, min or avg)", name);
}

/*
 * mscclc_api.c - the exported C ABI of libmscclc.so: one call from .coll source text and
 * parameter overrides to plan JSON text plus the diagnostics, in plain C types only (no Plan,
 * no FILE), so that other languages (the Python package, through ctypes) can compile in
 * process. Everything else in the compiler stays hidden behind the version script.
 */
#include "mscclc.h"

#include <stdlib.h>
#include <string.h>

#define MSCCLC_API __attribute__((visibility("default")))

/* Strings the library returns are malloc'd; callers in other languages free them here so that
 * the allocator that made them also releases them. */
MSCCLC_API void mscclc_free(void *p) {
    free(p);
}

MSCCLC_API const char *mscclc_version(void) {
    return MSCCLC_VERSION;
}

static char *dup_text(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Contract in mscclc.h. */
MSCCLC_API int mscclc_compile_json(const char *src, size_t len, const char *filename,
                                   const char *const *names, const long long *values,
                                   int ndefines, int flags, char **plan_json,
                                   char **diagnostics, int *errors, int *warnings) {
    if (plan_json) *plan_json = NULL;
    if (diagnostics) *diagnostics = NULL;
    if (errors) *errors = 0;
    if (warnings) *warnings = 0;
    const char *bad = NULL;
    if (!plan_json) bad = "mscclc_compile_json: plan_json is NULL";
    else if (!src && len) bad = "mscclc_compile_json: src is NULL";
    else if (ndefines < 0 || ndefines > 4096) bad = "mscclc_compile_json: ndefines out of range 0..4096";
    else if (ndefines > 0 && (!names || !values)) bad = "mscclc_compile_json: names or values is NULL";
    else if (flags & ~(MSCCLC_FLAG_NO_FUSION | MSCCLC_FLAG_COMPACT | MSCCLC_FLAG_TARGET_MSCCLPP))
        bad = "mscclc_compile_json: unknown flag bits";
    for (int i = 0; !bad && i < ndefines; i++)
        if (!names[i] || !names[i][0]) bad = "mscclc_compile_json: a parameter name is NULL or empty";
    if (bad) {
        if (diagnostics) *diagnostics = dup_text(bad);
        return 2;
    }
    MscclcDefine *defs = NULL;
    if (ndefines > 0) {
        defs = calloc((size_t)ndefines, sizeof *defs);
        if (!defs) return 3;
        for (int i = 0; i < ndefines; i++) defs[i] = (MscclcDefine){names[i], (int64_t)values[i]};
    }
    MscclcOptions opt = {
        .filename = filename, .defines = defs, .ndefines = ndefines,
        .no_fusion = (flags & MSCCLC_FLAG_NO_FUSION) != 0,
        .compact = (flags & MSCCLC_FLAG_COMPACT) != 0,
        .target = (flags & MSCCLC_FLAG_TARGET_MSCCLPP) ? PLAN_TARGET_MSCCLPP : PLAN_TARGET_MSCCLRT,
    };
    MscclcResult res;
    mscclc_compile(src ? src : "", len, &opt, &res);
    free(defs);
    if (errors) *errors = res.errors;
    if (warnings) *warnings = res.warnings;
    int rc = res.status == MSCCLC_OK ? 0 : res.status == MSCCLC_ERR_INPUT ? 1 : 3;
    if (rc == 0) {
        *plan_json = plan_to_json(res.plan, opt.compact, MSCCLC_PRODUCER);
        if (!*plan_json) rc = 3;
    }
    if (diagnostics) {
        /* take the collected text as it is: the caller frees it with mscclc_free */
        *diagnostics = res.diagnostics ? res.diagnostics : dup_text("");
        res.diagnostics = NULL;
    }
    mscclc_result_free(&res);
    return rc;
}

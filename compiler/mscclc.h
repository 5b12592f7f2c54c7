/*
 * mscclc.h - libmscclc, the compiler as a library: .coll source text + parameter overrides +
 * options -> a Plan (plan.h) or NULL, plus the diagnostics text. Runs parse -> sema -> lower ->
 * the passes of passes.h -> plan_validate. Reentrant: no global state; one call per thread.
 */
#ifndef MSCCLC_H
#define MSCCLC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "plan.h"

#define MSCCLC_VERSION "0.1.0"
#define MSCCLC_PRODUCER "mscclc " MSCCLC_VERSION   /* the plan's "producer" field */
/* The largest source text mscclc_compile accepts (64 MiB; the mscclc command stops reading
 * there). Far beyond any real program; it bounds the time and memory hostile input can take. */
#define MSCCLC_MAX_INPUT ((size_t)64 << 20)

/* A `-D NAME=VALUE` override of a `param` declaration. */
typedef struct {
    const char *name;
    int64_t value;
} MscclcDefine;

typedef struct {
    const char *filename;          /* for diagnostics ("<input>" when NULL) */
    const MscclcDefine *defines;   /* [ndefines], borrowed */
    int ndefines;
    bool no_fusion;                /* --no-fusion: skip fusion whatever the program says */
    int error_limit;               /* stop reporting after this many errors; 0 = 20, < 0 = none */
    FILE *diag_out;                /* diagnostics stream; NULL = collect into the result */
    bool compact;                  /* the plan will be written compact (plan_to_json): the
                                      loader's size limit is checked against that form */
    PlanTarget target;             /* --target: the runtime the plan is for (the plan's
                                      "target"); PLAN_TARGET_NONE means PLAN_TARGET_MSCCLRT.
                                      Only PLAN_TARGET_MSCCLPP applies MSCCL++'s executor's
                                      64 operations per thread block */
    int64_t max_iterations;        /* loop iterations one compile may run (a bound on its time:
                                      about 75 ns each without sanitizers); 0 or more than the
                                      compiler's own limit (20 million): that limit */
} MscclcOptions;

typedef enum {
    MSCCLC_OK = 0,                 /* plan produced */
    MSCCLC_ERR_INPUT = 1,          /* errors in the source (diagnostics say which) */
    MSCCLC_ERR_INTERNAL = 3,       /* compiler bug or out of memory */
} MscclcStatus;

typedef struct {
    MscclcStatus status;
    Plan *plan;                    /* owned by the caller (plan_free); NULL unless MSCCLC_OK */
    char *diagnostics;             /* owned (free()); collected text, "" when diag_out was set */
    int errors, warnings;
    double seconds[4];             /* time spent in parse, sema+lower, passes, validate */
} MscclcResult;

/* Compiles `src` (len bytes, at most MSCCLC_MAX_INPUT; need not be NUL-terminated). Always fills
 * *res; returns res->status. */
MscclcStatus mscclc_compile(const char *src, size_t len, const MscclcOptions *opt, MscclcResult *res);
/* Frees the plan and text of a result (safe on a zeroed or already freed result). */
void mscclc_result_free(MscclcResult *res);

/* The checks of the compiler's last passes on a plan from anywhere (a JSON file: diagnostics have
 * no source position and name ops by rank, thread block and index): signal balance, executor
 * limits, deadlock, data races and the entry handshake (passes.h); it only reads the plan
 * (mscclrt-run --check runs them on a loaded plan's model). Diagnostics go to diag_out
 * (NULL: discarded) under `filename`, at most error_limit errors (0 = 20, < 0 = no limit).
 * Returns the number of errors (0: the plan passed), -1 when out of memory. */
int mscclc_check_plan(const Plan *p, const char *filename, FILE *diag_out, int error_limit, int *errors);

/* ---- the exported C ABI of libmscclc.so (mscclc_api.c), in plain C types for other languages ----
 * mscclc_compile_json compiles src (len bytes; filename names it in diagnostics, NULL:
 * "<input>") with ndefines parameter overrides names[i] = values[i] and flags MSCCLC_FLAG_*.
 * Returns 0 with *plan_json (the plan's JSON), 1 when the source has errors, 2 on bad arguments
 * (the diagnostics say which), 3 on an internal error or out of memory. *diagnostics (may be
 * NULL) always gets the diagnostics text ("file:line:col: error: ..." lines, possibly empty);
 * errors/warnings (may be NULL) get the counts. Strings returned are freed with mscclc_free. */
enum { MSCCLC_FLAG_NO_FUSION = 1, MSCCLC_FLAG_COMPACT = 2, MSCCLC_FLAG_TARGET_MSCCLPP = 4 };
int mscclc_compile_json(const char *src, size_t len, const char *filename,
                        const char *const *names, const long long *values, int ndefines,
                        int flags, char **plan_json, char **diagnostics, int *errors,
                        int *warnings);
void mscclc_free(void *p);
const char *mscclc_version(void);   /* MSCCLC_VERSION */

#endif

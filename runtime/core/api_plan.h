/*
 * api_plan.h - the opaque public plan handle (mscclrt_plan) and the way other runtime modules
 * (CPU backend, GPU execution) reach the validated plan model inside it.
 */
#ifndef MSCCLRT_API_PLAN_H
#define MSCCLRT_API_PLAN_H

#include "mscclrt.h"
#include "plan.h"

#define API_PLAN_MAGIC 0x4e414c50u /* "PLAN"; cleared by mscclrt_plan_free */

struct mscclrt_plan {
    uint32_t magic;            /* API_PLAN_MAGIC while the handle is live */
    Plan *plan;                /* owned; validated at load and never modified afterwards */
};

/* The plan model of a live handle, or NULL for NULL or a handle that is not a plan (bad magic).
 * Borrowed: valid until mscclrt_plan_free. Callers report NULL as MSCCLRT_ERR_INVALID_ARG. */
const Plan *api_plan_model(const mscclrt_plan *p);
/* A handle for a validated model (takes pl, freed on failure); `what` names the caller in the
 * out-of-memory error. */
mscclrt_result api_plan_wrap(Plan *pl, mscclrt_plan **out, const char *what);

#endif

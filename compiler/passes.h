/*
 * passes.h - the compiler's passes over the lowered plan (plan.h: per-rank, per-TB op lists).
 * Each pass is one file compiler/pass_<name>.c with one entry point; it keeps no state, reports
 * located errors through the Diag (at PlanOp.loc) and leaves the plan valid. false = stop.
 *
 * REQUIRED ORDER (compile.c calls them in this order and stops at the first that returns false):
 *   1. pass_check_signals  before anything moves or merges ops, so errors point at the
 *                          statements as written (spec §8.5 step 1);
 *   2. pass_fuse           optional (`fusion off` = do not call it). Must run before
 *                          pass_data_sync: it strips data_sync bits that would only produce
 *                          redundant nops and relies on nops not yet being inserted (§8.5 step 2);
 *   3. pass_data_sync      turns data_sync bits into nops, then clears them (§8.5 step 3);
 *   4. pass_auto_sync      needs the nops of step 3, which end its dependency windows (§8.7);
 *   5. pass_replicate      once, with the program's `instances` (§8.8); after every pass that
 *                          looks at chunk indices or channels as the user wrote them;
 *   6. pass_check_limits   on the final shape: executor limits (§2.8) and what the executor
 *                          would misread (§9); the simulation below assumes a plan that passed;
 *   7. pass_check_deadlock simulates the final plan (all ranks, all TBs).
 *
 * Conventions the lowering must follow (the plan model has no op kind for these):
 *   - `sw.reduce(dst, src)` (DSL glre) is a PLAN_OP_GLRES whose src[0] is the switch entry
 *     (load range) and whose dst[0] is a PLAN_REF_LOCAL entry (the local dst chunk), with
 *     chan_type PLAN_CHAN_SWITCH. pass_fuse turns it plus a following gstore of that chunk into a
 *     real glres (dst[0] = the gstore's switch entry); pass_check_limits rejects any left over
 *     ("standalone glre"). pass_is_glre() tells the two forms apart.
 *   - sync ops (signal, wait, rlx*, flush, sem_*) carry data_sync (PLAN_SYNC_* bits); everything
 *     else has data_sync 0. Every op carries loc.
 *   - memory put/ppkt/rppkt/rre/... may leave nchan 0; ops that signal or wait must list
 *     chan_ids (TB-local indices of chan_type).
 */
#ifndef MSCCLC_PASSES_H
#define MSCCLC_PASSES_H

#include <stdbool.h>

#include "diag.h"
#include "plan.h"

/* §6.2: every signal/rlxsignal (and port pws/pwsf) on r's k-th channel to p must be consumed by
 * a wait/rlxwait on p's k-th channel to r, per channel type; counts must be equal. */
bool pass_check_signals(Plan *p, Diag *d);

/* §8.6 fusion, including nop/barrier/sync-op interactions. Never exceeds the executor limits
 * (8 channel ids, 10 entries, 16 semaphores), never fuses memory puts/ppkts whose sources lie in
 * different buffer types (§5.4 quirk), writes the correct glres dst index. */
bool pass_fuse(Plan *p, Diag *d);

/* §8.5 step 3: nop before/after each sync op per its data_sync, inside pipelines too; then
 * data_sync is cleared everywhere. */
bool pass_data_sync(Plan *p, Diag *d);

/* §8.7: a nop before an op whose local accesses conflict (read/write overlap on i/o/s) with an
 * earlier op since the last nop/barrier. */
bool pass_auto_sync(Plan *p, Diag *d);

/* §8.8 interleaved replication by `instances` (>= 1; 1 leaves the plan unchanged), applied once. */
bool pass_replicate(Plan *p, int instances, Diag *d);

/* §2.8 limits and §9 misreads, each a located error. */
bool pass_check_limits(Plan *p, Diag *d);

/* Runs every TB of every rank as a sequential process (signal/wait counters per paired channel,
 * barriers, semaphores, LL packet arrival); if they cannot all finish, reports the wait cycle.
 * Also reports signals or semaphore counts left unbalanced at the end of a launch. */
bool pass_check_deadlock(Plan *p, Diag *d);

/* True for the lowering's representation of an unfused glre (see above). */
bool pass_is_glre(const PlanOp *op);

#endif

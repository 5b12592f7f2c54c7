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
 *   4. pass_auto_sync      optional (the DSL's auto_sync=False skips it); needs the nops of
 *                          step 3, which end its dependency windows (§8.7);
 *   5. pass_replicate      once, with the program's `instances` (§8.8); after every pass that
 *                          looks at chunk indices or channels as the user wrote them;
 *   6. pass_check_limits   on the final shape: executor limits (§2.8) and what the executor
 *                          would misread (§9); the simulation below assumes a plan that passed;
 *   7. pass_check_deadlock simulates the final plan (all ranks, all TBs; launch_sim.h);
 *   8. pass_check_races    happens-before analysis of the final plan, following the same
 *                          simulation; assumes it finishes (step 7), so it cannot get stuck.
 * Op numbers in messages ("rank 0 tb 1 op 3", "op 3.1" = inner op 1 of pipeline op 3) are
 * positions in the TB's op list at that pass: for passes 6-7, the positions in the emitted plan.
 * Every pass tolerates an invalid plan without crashing (it may then report nonsense); only
 * the order above gives the guarantees stated.
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
#include <stdint.h>

#include "diag.h"
#include "plan.h"

/* §6.2: every signal/rlxsignal (and port pws/pwsf) on r's k-th channel to p must be consumed by
 * a wait/rlxwait on p's k-th channel to r, per channel type; counts must be equal. */
bool pass_check_signals(const Plan *p, Diag *d);

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
/* How many nops pass_auto_sync would insert (pipelines' inner lists included), allocating no
 * op: the compile checks the final op count against the loader's limit before the pass
 * doubles the plan's memory (issue 22: 1.3 GB for a plan the loader refuses anyway). -1 on
 * out of memory. */
long pass_auto_sync_count(const Plan *p);

/* §8.8 interleaved replication by `instances` (>= 1; 1 leaves the plan unchanged), applied once. */
bool pass_replicate(Plan *p, int instances, Diag *d);

/* §2.8 limits and §9 misreads, each a located error. */
bool pass_check_limits(const Plan *p, Diag *d);

/* Plans for MSCCL++'s executor (target mscclpp) only: raises min_message_size to the smallest
 * size at which every block of every thread-block group gets part of each buffer its operation
 * names (MSCCL++ mis-executes empty slices); an error at `at` when no size of the range does.
 * Runs after pass_replicate (the final thread-block groups). */
bool pass_mscclpp_sizes(Plan *p, PlanLoc at, Diag *d);

/* Runs every TB of every rank as a sequential process (signal/wait counters per paired channel,
 * barriers, semaphores, LL packet arrival); if they cannot all finish, reports the wait cycle.
 * Also reports signals or semaphore counts left unbalanced at the end of a launch. */
bool pass_check_deadlock(const Plan *p, Diag *d);

/* Happens-before analysis of one launch (vector clocks per rank x TB): two accesses of
 * overlapping chunks, at least one a write, by different TBs or ranks, that no strict
 * signal/wait, semaphore, barrier, LL packet or TB order separates are a race (relaxed
 * signal/wait order execution only); a write into another rank's buffer that rank also uses,
 * with no sign in this launch that it has entered (the entry handshake), is an error too.
 * Errors name both ops (rank, TB, op index, chunks) at both source positions. */
bool pass_check_races(const Plan *p, Diag *d);

/* ---- helpers shared by the passes (pass_util.c); also handy for lowering and tests ---------- */

/* True for the lowering's representation of an unfused glre (see above). */
bool pass_is_glre(const PlanOp *op);
/* signal, rlxsignal, wait, rlxwait, flush, sem_acquire, sem_release: the ops with data_sync. */
bool pass_is_sync_op(PlanOpKind k);
/* Same entry: kind, buffer type (local) or id (remote/switch), index and size. */
bool pass_ref_eq(const PlanRef *a, const PlanRef *b);
/* GPU-level channel index behind TB-local channel `local` of type t (memory/port/switch) of TB
 * `tb`, or -1 when the TB has no such entry or the GPU has no such channel. */
int pass_gpu_channel(const PlanGpu *g, const PlanTb *tb, PlanChanType t, int local);
/* GPU-level channels that op signals (want_signal) or waits on (ch[PLAN_MAX_OP_CHANNELS]),
 * their type in *t; returns how many. */
int pass_sync_channels(const PlanGpu *g, const PlanTb *tb, const PlanOp *op, bool want_signal,
                       int *ch, PlanChanType *t);
/* §6.2 pairing: the GPU-level channel of the peer that pairs with rank r's memory/port channel
 * `ch` (k-th occurrence of p in r's list <-> k-th occurrence of r in p's list). Sets *peer.
 * Returns -1 when the pair is one of the peer's unpaired fillers (or the input is invalid). */
int pass_paired_channel(const Plan *p, int r, PlanChanType t, int ch, int *peer);
/* Owner rank and buffer type of a remote entry of `op` in TB `tb` of rank r (resolved through
 * the TB's refs for the op's channel type and gpus[r].remote_buffers). false if invalid. */
bool pass_remote_target(const Plan *p, int r, const PlanTb *tb, const PlanOp *op,
                        const PlanRef *ref, int *owner, PlanBuf *type);
/* The entries of op that are LL packets in scratch which the op waits for (reads) and that it
 * writes as packets (local scratch, remote scratch, or multicast), as indices into op->src /
 * op->dst; return how many (at most PLAN_MAX_OP_ENTRIES). */
int pass_packet_reads(const PlanOp *op, int *src_idx);
int pass_packet_writes(const PlanOp *op, int *dst_idx);
/* Largest chunk size in bytes over the plan's message-size range for rank r (§3.3); false when
 * unbounded (max_message_size is 2^64-1) or the chunk counts are 0. */
bool pass_max_chunk_bytes(const Plan *p, int r, uint64_t *out);
/* Largest iteration count a pipeline op of rank r can have (§3.6) over the plan's message-size
 * range, in *out; false when it cannot be bounded (no finite max_message_size, unit_size 0). */
bool pass_pipeline_max_iterations(const Plan *p, int r, const PlanOp *pipe, uint64_t *out);

#endif

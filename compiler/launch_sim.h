/*
 * launch_sim.h - one launch of a plan, run as the executor runs it: every thread block of every
 * rank a sequential process, with the state that decides when an op can complete (signal counters
 * per §6.2-paired channel, barriers with their participant counts, semaphores with their initial
 * values, LL packet arrival in scratch). The deadlock check (pass_check_deadlock.c) reads that
 * state when the processes get stuck or finish; the race check (pass_check_races.c) follows each
 * op as it completes through an observer, which carries its clocks along the same edges. One
 * simulation for both, so the two checks cannot disagree on which interleaving they analyse.
 */
#ifndef MSCCLC_LAUNCH_SIM_H
#define MSCCLC_LAUNCH_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "plan.h"

#define SIM_SCALE 720720ull   /* lcm(1..16): positions inside a chunk, so TB-group slices and
                                 pipeline halves are exact */

typedef struct {
    const PlanOp *op;
    int top, inner;     /* position: ops[top], or ops[top].inner[inner] when inner >= 0 */
    int iter, niter;    /* pipeline iteration modelled, of niter (1 outside pipelines) */
    uint32_t pipe_k;    /* the pipeline's num_chunks (0 outside pipelines) */
} SimStep;

typedef struct {
    SimStep *steps;     /* the TB's ops, pipelines unrolled: once when the plan bounds them to one
                           iteration, else twice */
    int n, pc;          /* pc: the op to complete next; pc == n: finished */
    bool arrived;       /* at a barrier, counted, waiting for the others */
    int joined_gen;     /* that barrier's generation when this TB arrived */
} SimProc;

typedef struct {
    uint64_t lo, hi;    /* [lo, hi) in chunks times SIM_SCALE */
} SimSpan;

typedef struct {
    SimSpan *s;         /* disjoint, sorted, merged when they touch */
    int n, cap;
} SimSpanSet;

typedef struct {
    SimProc *procs;                 /* [ntbs] */
    int *inbound[2], *consumed[2];  /* per GPU-level memory/port channel: signals arrived, taken */
    int *sem;                       /* current values */
    int bar_arrived[PLAN_MAX_BARRIERS], bar_gen[PLAN_MAX_BARRIERS];
    SimSpanSet pkts;                /* scratch packet ranges written in this launch */
} SimRank;

/* What an analysis sees of each op that completes, in this order: the acquire side (the signals
 * a wait takes, barrier arrival and release, semaphore acquires, the packets read), then the op
 * itself, then the release side (signals sent, semaphore releases, packets written). The op at
 * sim->rs[r].procs[t].steps[pc] is the one completing throughout. Any member may be NULL. */
typedef struct {
    void *ctx;
    /* (r, t) takes the next signal on r's channel ch of type ct */
    void (*wait)(void *ctx, int r, int t, PlanChanType ct, int ch);
    void (*barrier_arrive)(void *ctx, int r, int t, int id);
    void (*barrier_open)(void *ctx, int r, int id);     /* the last participant arrived */
    void (*barrier_leave)(void *ctx, int r, int t, int id);
    void (*sem_acquire)(void *ctx, int r, int t, int id);
    void (*packet_read)(void *ctx, int r, int t, SimSpan sp);      /* of r's scratch, all written */
    void (*op)(void *ctx, int r, int t);
    /* (r, t) signals: it arrives on rank q's channel qch of type ct */
    void (*signal)(void *ctx, int r, int t, int q, PlanChanType ct, int qch);
    void (*sem_release)(void *ctx, int r, int t, int id);
    void (*packet_write)(void *ctx, int r, int t, int owner, SimSpan sp);  /* owner's scratch */
    bool (*stop)(void *ctx);        /* true: end the run now (out of memory, error limit) */
} SimObserver;

typedef struct {
    const Plan *p;
    SimRank *rs;            /* [ngpus] */
    const SimObserver *obs; /* NULL: none */
    bool oom;
} LaunchSim;

/* Sets up every process at its first op; false when out of memory (sim_free cleans up either
 * way). obs is borrowed. */
bool sim_init(LaunchSim *sim, const Plan *p, const SimObserver *obs);
void sim_free(LaunchSim *sim);
/* Runs the processes until none can move: forward, ranks and TBs in order, each as far as it
 * gets; backward, in reverse order, one op at a time. Each is a legal interleaving. True when
 * every process finished; false when some are stuck, out of memory (sim->oom) or stopped. */
bool sim_run(LaunchSim *sim, bool backward);

/* The scaled range entry e covers for op: its TB-group slice (spec §3.4 step 4). */
SimSpan sim_entry_span(const PlanOp *op, const PlanRef *e);
/* First position in [lo, hi) that set does not cover, or hi when it covers all. */
uint64_t sim_span_first_gap(const SimSpanSet *set, uint64_t lo, uint64_t hi);

/* The (rank, scratch span) pairs into which op, on rank r in TB tb, writes LL packets. */
typedef struct {
    int rank[PLAN_MAX_OP_ENTRIES * 8];
    SimSpan span[PLAN_MAX_OP_ENTRIES * 8];
    int n;
} SimTargets;
void sim_packet_targets(const Plan *p, int r, const PlanTb *tb, const PlanOp *op, SimTargets *out);

#endif

/*
 * test_launch_sim.c - the launch simulation that the deadlock and race checks share
 * (compiler/launch_sim.h): which ops complete under each schedule, what blocks, and the observer
 * contract the race check relies on (the acquire side before the op, the release side after it,
 * a barrier arrival recorded while the TB still waits, a stop request honoured at once). The
 * checks' messages are tested in test_passes.c.
 */
#include "launch_sim.h"
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"

/* ---- a recording observer --------------------------------------------------------------------- */

typedef struct {
    char log[2048];
    int ops, stop_after;    /* stop_after > 0: ask to stop once that many ops completed */
} Rec;

static void rec(Rec *x, const char *fmt, int a, int b, int c, int d) {
    size_t n = strlen(x->log);
    snprintf(x->log + n, sizeof x->log - n, "%s", n ? " " : "");
    n = strlen(x->log);
    snprintf(x->log + n, sizeof x->log - n, fmt, a, b, c, d);
}

static LaunchSim *g_sim;    /* the simulation being observed: the op's position is read from it */

static void r_wait(void *c, int r, int t, PlanChanType ct, int ch) {
    (void)ct;
    rec(c, "wait%d.%d<%d", r, t, ch, 0);
}
static void r_arrive(void *c, int r, int t, int id) { rec(c, "arrive%d.%d:%d", r, t, id, 0); }
static void r_open(void *c, int r, int id) { rec(c, "open%d:%d", r, id, 0, 0); }
static void r_leave(void *c, int r, int t, int id) { rec(c, "leave%d.%d:%d", r, t, id, 0); }
static void r_acquire(void *c, int r, int t, int id) { rec(c, "acquire%d.%d:%d", r, t, id, 0); }
static void r_release(void *c, int r, int t, int id) { rec(c, "release%d.%d:%d", r, t, id, 0); }
static void r_pread(void *c, int r, int t, SimSpan sp) {
    rec(c, "read%d.%d[%d,%d)", r, t, (int)(sp.lo / SIM_SCALE), (int)(sp.hi / SIM_SCALE));
}
static void r_pwrite(void *c, int r, int t, int owner, SimSpan sp) {
    rec(c, "write%d.%d>%d:%d", r, t, owner, (int)(sp.lo / SIM_SCALE));
}
static void r_op(void *c, int r, int t) {
    Rec *x = c;
    x->ops++;
    rec(c, "op%d.%d@%d", r, t, g_sim->rs[r].procs[t].pc, 0);
}
static void r_signal(void *c, int r, int t, int q, PlanChanType ct, int qch) {
    (void)ct;
    rec(c, "signal%d.%d>%d:%d", r, t, q, qch);
}
static bool r_stop(void *c) {
    const Rec *x = c;
    return x->stop_after > 0 && x->ops >= x->stop_after;
}

/* Runs p under one schedule with a recording observer; the log in x, the result returned. */
static bool run(const Plan *p, bool backward, Rec *x, LaunchSim *sim) {
    const SimObserver obs = {
        .ctx = x, .wait = r_wait, .barrier_arrive = r_arrive, .barrier_open = r_open,
        .barrier_leave = r_leave, .sem_acquire = r_acquire, .packet_read = r_pread, .op = r_op,
        .signal = r_signal, .sem_release = r_release, .packet_write = r_pwrite, .stop = r_stop,
    };
    g_sim = sim;
    CHECK(sim_init(sim, p, &obs));
    bool done = sim_run(sim, backward);
    sim->obs = NULL;            /* obs lives on this stack frame only */
    return done;
}

/* ---- plans ---------------------------------------------------------------------------------- */

static Plan *mkplan(int ngpus, int ntbs) {
    Plan *p = plan_new("t", PLAN_COLL_ALLREDUCE, ngpus);
    for (int r = 0; r < ngpus; r++) {
        p->gpus[r].input_chunks = p->gpus[r].output_chunks = p->gpus[r].scratch_chunks = 4;
        plan_gpu_ensure_tbs(&p->gpus[r], ntbs);
    }
    return p;
}

static void add(Plan *p, int r, int t, PlanOp op) {
    plan_tb_append(&p->gpus[r].tbs[t], &op);
}

static PlanOp mk(PlanOpKind k) {
    PlanOp op;
    plan_op_init(&op, k);
    return op;
}

static PlanOp sync_op(PlanOpKind k, int c) {
    PlanOp op = mk(k);
    op.chan_type = PLAN_CHAN_MEMORY;
    op.nchan = 1;
    op.chan_ids[0] = c;
    return op;
}

static PlanOp local_op(PlanOpKind k, PlanBuf from, PlanBuf to) {
    PlanOp op = mk(k);
    op.nsrc = op.ndst = 1;
    op.src[0] = (PlanRef){.kind = PLAN_REF_LOCAL, .type = from, .index = 0, .size = 1, .rank = -1};
    op.dst[0] = (PlanRef){.kind = PLAN_REF_LOCAL, .type = to, .index = 0, .size = 1, .rank = -1};
    return op;
}

static PlanOp sem_op(PlanOpKind k) {
    PlanOp op = mk(k);
    op.nsem = 1;
    op.sem_ids[0] = 0;
    return op;
}

/* rank 0: copy, signal; rank 1: wait, copy (over one memory channel each way) */
static Plan *signal_plan(bool with_signal) {
    Plan *p = mkplan(2, 1);
    for (int r = 0; r < 2; r++)
        plan_tb_use_channel(&p->gpus[r].tbs[0], PLAN_CHAN_MEMORY,
                            plan_gpu_add_peer(&p->gpus[r], PLAN_CHAN_MEMORY, 1 - r));
    add(p, 0, 0, local_op(PLAN_OP_COPY, PLAN_BUF_INPUT, PLAN_BUF_OUTPUT));
    if (with_signal) add(p, 0, 0, sync_op(PLAN_OP_SIGNAL, 0));
    add(p, 1, 0, sync_op(PLAN_OP_WAIT, 0));
    add(p, 1, 0, local_op(PLAN_OP_COPY, PLAN_BUF_INPUT, PLAN_BUF_OUTPUT));
    return p;
}

/* ---- tests ------------------------------------------------------------------------------------ */

static void t_signal_wait(void) {
    Plan *p = signal_plan(true);
    for (int backward = 0; backward < 2; backward++) {
        Rec x = {0};
        LaunchSim sim;
        CHECK(run(p, backward, &x, &sim));
        /* the same order either way: rank 1's wait cannot complete before rank 0's signal */
        CHECK_STR("op0.0@0 op0.0@1 signal0.0>1:0 wait1.0<0 op1.0@0 op1.0@1", x.log);
        CHECK_EQ_INT(1, sim.rs[1].inbound[PLAN_CHAN_MEMORY][0]);
        CHECK_EQ_INT(1, sim.rs[1].consumed[PLAN_CHAN_MEMORY][0]);
        CHECK_EQ_INT(2, sim.rs[1].procs[0].pc);
        sim_free(&sim);
    }
    plan_free(p);
}

static void t_stuck_wait_leaves_no_trace(void) {
    Plan *p = signal_plan(false);
    Rec x = {0};
    LaunchSim sim;
    CHECK(!run(p, false, &x, &sim));
    CHECK_STR("op0.0@0", x.log);                /* nothing of rank 1's blocked wait */
    CHECK_EQ_INT(0, sim.rs[1].procs[0].pc);
    CHECK_EQ_INT(0, sim.rs[1].consumed[PLAN_CHAN_MEMORY][0]);
    sim_free(&sim);
    plan_free(p);
}

static void t_barrier_and_semaphore(void) {
    /* tb 0: sem_release, barrier; tb 1: barrier, sem_acquire (semaphore 0 starts at 0) */
    Plan *p = mkplan(1, 2);
    plan_gpu_add_semaphore(&p->gpus[0], 0);
    PlanOp b = mk(PLAN_OP_BARRIER);
    b.num_threadblocks = 2;
    add(p, 0, 0, sem_op(PLAN_OP_SEM_RELEASE));
    add(p, 0, 0, b);
    add(p, 0, 1, b);
    add(p, 0, 1, sem_op(PLAN_OP_SEM_ACQUIRE));
    Rec x = {0};
    LaunchSim sim;
    CHECK(run(p, false, &x, &sim));
    /* tb 0 arrives and waits; tb 1's arrival opens the barrier; tb 0 leaves in the next round */
    CHECK_STR("op0.0@0 release0.0:0 arrive0.0:0 arrive0.1:0 open0:0 leave0.1:0 op0.1@0 "
              "acquire0.1:0 op0.1@1 leave0.0:0 op0.0@1", x.log);
    CHECK_EQ_INT(0, sim.rs[0].sem[0]);
    CHECK_EQ_INT(1, sim.rs[0].bar_gen[0]);
    sim_free(&sim);
    plan_free(p);
}

static void t_packets(void) {
    /* tb 0 unpacks scratch chunk 0, which tb 1 writes as packets */
    Plan *p = mkplan(1, 2);
    p->protocol_ll = true;
    add(p, 0, 0, local_op(PLAN_OP_UPKT, PLAN_BUF_SCRATCH, PLAN_BUF_OUTPUT));
    add(p, 0, 1, local_op(PLAN_OP_CPKT, PLAN_BUF_INPUT, PLAN_BUF_SCRATCH));
    Rec x = {0};
    LaunchSim sim;
    CHECK(run(p, false, &x, &sim));
    CHECK_STR("op0.1@0 write0.1>0:0 read0.0[0,1) op0.0@0", x.log);
    CHECK_EQ_INT(1, sim.rs[0].pkts.n);
    sim_free(&sim);
    plan_free(p);
}

static void t_stop(void) {
    Plan *p = signal_plan(true);
    Rec x = {.stop_after = 1};
    LaunchSim sim;
    CHECK(!run(p, false, &x, &sim));            /* stopped, not finished */
    CHECK_STR("op0.0@0", x.log);
    sim_free(&sim);
    plan_free(p);
}

int main(void) {
    TEST("launch_sim/signal_wait", t_signal_wait());
    TEST("launch_sim/stuck_wait_leaves_no_trace", t_stuck_wait_leaves_no_trace());
    TEST("launch_sim/barrier_and_semaphore", t_barrier_and_semaphore());
    TEST("launch_sim/packets", t_packets());
    TEST("launch_sim/stop", t_stop());
    return harness_report();
}

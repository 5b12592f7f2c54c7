/*
 * launch_sim.c - the simulation of one launch shared by the deadlock and race checks
 * (launch_sim.h). An op completes only when all it waits for is there (packet sources covered,
 * enough signals on every channel it waits on, its barrier released, its semaphores positive);
 * the check comes before any state changes, so a blocked op leaves no trace (but the barrier
 * arrival it records, as the executor's counter does). The observer is called as each completing
 * op takes and gives, so the race check's clocks follow exactly the edges this state follows.
 */
#include "launch_sim.h"

#include "passes.h"

#include <stdlib.h>
#include <string.h>

/* ---- packet coverage ---------------------------------------------------------------------- */

static void span_add(LaunchSim *sim, SimSpanSet *set, uint64_t lo, uint64_t hi) {
    if (lo >= hi) return;
    /* merge with every overlapping or touching span, then insert in order */
    int w = 0;
    for (int i = 0; i < set->n; i++) {
        SimSpan x = set->s[i];
        if (x.hi < lo || x.lo > hi) {
            set->s[w++] = x;
        } else {
            if (x.lo < lo) lo = x.lo;
            if (x.hi > hi) hi = x.hi;
        }
    }
    set->n = w;
    if (set->n == set->cap) {
        int cap = set->cap ? set->cap * 2 : 16;
        SimSpan *s = realloc(set->s, (size_t)cap * sizeof *s);
        if (!s) {
            sim->oom = true;
            return;
        }
        set->s = s;
        set->cap = cap;
    }
    int at = 0;
    while (at < set->n && set->s[at].lo < lo) at++;
    memmove(&set->s[at + 1], &set->s[at], (size_t)(set->n - at) * sizeof *set->s);
    set->s[at] = (SimSpan){lo, hi};
    set->n++;
}

uint64_t sim_span_first_gap(const SimSpanSet *set, uint64_t lo, uint64_t hi) {
    for (int i = 0; i < set->n && lo < hi; i++)
        if (set->s[i].lo <= lo && set->s[i].hi > lo) lo = set->s[i].hi;
    return lo < hi ? lo : hi;
}

SimSpan sim_entry_span(const PlanOp *op, const PlanRef *e) {
    uint64_t base = (uint64_t)e->index * SIM_SCALE, len = (uint64_t)e->size * SIM_SCALE;
    if (op->tbg_size > 0) {
        uint64_t g = (uint64_t)op->tbg_size, t = (uint64_t)op->tbg_id;
        return (SimSpan){base + len * t / g, base + len * (t + 1) / g};
    }
    return (SimSpan){base, base + len};
}

void sim_packet_targets(const Plan *p, int r, const PlanTb *tb, const PlanOp *op, SimTargets *out) {
    int idx[PLAN_MAX_OP_ENTRIES];
    int n = pass_packet_writes(op, idx);
    out->n = 0;
    const PlanGpu *g = &p->gpus[r];
    for (int i = 0; i < n; i++) {
        const PlanRef *e = &op->dst[idx[i]];
        SimSpan sp = sim_entry_span(op, e);
        if (e->kind == PLAN_REF_LOCAL) {
            if (e->type != PLAN_BUF_SCRATCH) continue;
            out->rank[out->n] = r;
            out->span[out->n++] = sp;
        } else if (e->kind == PLAN_REF_REMOTE) {
            int owner;
            PlanBuf type;
            if (!pass_remote_target(p, r, tb, op, e, &owner, &type) || type != PLAN_BUF_SCRATCH)
                continue;
            out->rank[out->n] = owner;
            out->span[out->n++] = sp;
        } else {
            int s = pass_gpu_channel(g, tb, PLAN_CHAN_SWITCH, e->id);
            if (s < 0 || g->switches[s].buf != PLAN_BUF_SCRATCH) continue;
            int room = (int)(sizeof out->rank / sizeof *out->rank);
            for (int k = 0; k < g->switches[s].nranks && out->n < room; k++) {
                int q = g->switches[s].ranks[k];
                if (q < 0 || q >= p->ngpus) continue;
                out->rank[out->n] = q;
                out->span[out->n++] = sp;
            }
        }
    }
}

/* ---- processes ---------------------------------------------------------------------------- */

static bool build_steps(const Plan *p, int r, const PlanTb *tb, SimProc *pr) {
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            pr->steps = malloc((size_t)(n > 0 ? n : 1) * sizeof *pr->steps);
            if (!pr->steps) return false;
            pr->n = n;
            n = 0;
        }
        for (int i = 0; i < tb->nops; i++) {
            const PlanOp *op = &tb->ops[i];
            if (op->kind != PLAN_OP_PIPELINE) {
                if (pass == 1) pr->steps[n] = (SimStep){op, i, -1, 0, 1, 0};
                n++;
                continue;
            }
            uint64_t it;
            int reps = 2;
            if (op->num_chunks == 0) reps = 0;
            else if (pass_pipeline_max_iterations(p, r, op, &it) && it <= 1) reps = (int)it;
            for (int k = 0; k < reps; k++)
                for (int j = 0; j < op->ninner; j++) {
                    if (pass == 1)
                        pr->steps[n] = (SimStep){&op->inner[j], i, j, k, reps, op->num_chunks};
                    n++;
                }
        }
    }
    return true;
}

bool sim_init(LaunchSim *sim, const Plan *p, const SimObserver *obs) {
    *sim = (LaunchSim){.p = p, .obs = obs};
    sim->rs = calloc((size_t)(p->ngpus > 0 ? p->ngpus : 1), sizeof *sim->rs);
    if (!sim->rs) return false;
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        SimRank *rs = &sim->rs[r];
        rs->procs = calloc((size_t)(g->ntbs > 0 ? g->ntbs : 1), sizeof *rs->procs);
        if (!rs->procs) return false;
        for (int k = 0; k < 2; k++) {
            size_t n = (size_t)(g->npeers[k] > 0 ? g->npeers[k] : 1);
            rs->inbound[k] = calloc(n, sizeof(int));
            rs->consumed[k] = calloc(n, sizeof(int));
            if (!rs->inbound[k] || !rs->consumed[k]) return false;
        }
        rs->sem = malloc((size_t)(g->nsems > 0 ? g->nsems : 1) * sizeof(int));
        if (!rs->sem) return false;
        for (int s = 0; s < g->nsems; s++) rs->sem[s] = g->sem_init[s];
        for (int t = 0; t < g->ntbs; t++)
            if (!build_steps(p, r, &g->tbs[t], &rs->procs[t])) return false;
    }
    return true;
}

void sim_free(LaunchSim *sim) {
    if (!sim->rs) return;
    for (int r = 0; r < sim->p->ngpus; r++) {
        SimRank *rs = &sim->rs[r];
        if (rs->procs)
            for (int t = 0; t < sim->p->gpus[r].ntbs; t++) free(rs->procs[t].steps);
        free(rs->procs);
        for (int k = 0; k < 2; k++) {
            free(rs->inbound[k]);
            free(rs->consumed[k]);
        }
        free(rs->sem);
        free(rs->pkts.s);
    }
    free(sim->rs);
    sim->rs = NULL;
}

/* ---- stepping ------------------------------------------------------------------------------ */

/* Calls observer member f with the arguments after ctx, when there is one. */
#define OBSERVE(sim, f, ...) \
    do { if ((sim)->obs && (sim)->obs->f) (sim)->obs->f((sim)->obs->ctx, __VA_ARGS__); } while (0)

/* Whether the op at (r, t)'s pc can complete now: the packets it reads have arrived, every channel
 * it waits on has a signal for it, its semaphores are positive. Changes nothing. */
static bool can_take(const LaunchSim *sim, int r, int t, const int *ch, int nch, PlanChanType ct) {
    const SimRank *rs = &sim->rs[r];
    const PlanGpu *g = &sim->p->gpus[r];
    const PlanOp *op = rs->procs[t].steps[rs->procs[t].pc].op;
    int idx[PLAN_MAX_OP_ENTRIES];
    int n = pass_packet_reads(op, idx);
    for (int i = 0; i < n; i++) {
        SimSpan sp = sim_entry_span(op, &op->src[idx[i]]);
        if (sim_span_first_gap(&rs->pkts, sp.lo, sp.hi) < sp.hi) return false;
    }
    for (int i = 0; i < nch; i++) {
        int need = 0;
        for (int j = 0; j < nch; j++) need += ch[j] == ch[i];
        if (rs->inbound[ct][ch[i]] - rs->consumed[ct][ch[i]] < need) return false;
    }
    if (op->kind == PLAN_OP_SEM_ACQUIRE)
        for (int i = 0; i < op->nsem; i++) {
            int need = 0;
            for (int j = 0; j < op->nsem; j++) need += op->sem_ids[j] == op->sem_ids[i];
            int s = op->sem_ids[i];
            if (s >= 0 && s < g->nsems && rs->sem[s] < need) return false;
        }
    return true;
}

/* Tries to complete the current op of process (r, t); true if it did. */
static bool step(LaunchSim *sim, int r, int t) {
    const Plan *p = sim->p;
    SimRank *rs = &sim->rs[r];
    SimProc *pr = &rs->procs[t];
    const PlanGpu *g = &p->gpus[r];
    const PlanTb *tb = &g->tbs[t];
    const PlanOp *op = pr->steps[pr->pc].op;
    int ch[PLAN_MAX_OP_CHANNELS];
    PlanChanType ct = PLAN_CHAN_NONE;
    int nch = op->kind == PLAN_OP_WAIT || op->kind == PLAN_OP_RLXWAIT
                  ? pass_sync_channels(g, tb, op, false, ch, &ct) : 0;
    if (!can_take(sim, r, t, ch, nch, ct)) return false;
    /* the acquire side */
    for (int i = 0; i < nch; i++) {
        rs->consumed[ct][ch[i]]++;
        OBSERVE(sim, wait, r, t, ct, ch[i]);
    }
    int id = op->barrier_id;
    bool barrier = op->kind == PLAN_OP_BARRIER && op->num_threadblocks > 1;
    if (barrier && id >= 0 && id < PLAN_MAX_BARRIERS) {
        if (!pr->arrived) {
            pr->arrived = true;
            pr->joined_gen = rs->bar_gen[id];
            OBSERVE(sim, barrier_arrive, r, t, id);
            if (++rs->bar_arrived[id] >= op->num_threadblocks) {
                rs->bar_arrived[id] = 0;
                rs->bar_gen[id]++;
                OBSERVE(sim, barrier_open, r, id);
            }
        }
        if (rs->bar_gen[id] == pr->joined_gen) return false;
        pr->arrived = false;
        OBSERVE(sim, barrier_leave, r, t, id);
    }
    if (op->kind == PLAN_OP_SEM_ACQUIRE)
        for (int i = 0; i < op->nsem; i++) {
            int s = op->sem_ids[i];
            if (s < 0 || s >= g->nsems) continue;
            rs->sem[s]--;
            OBSERVE(sim, sem_acquire, r, t, s);
        }
    int idx[PLAN_MAX_OP_ENTRIES];
    int n = pass_packet_reads(op, idx);
    for (int i = 0; i < n; i++) {
        SimSpan sp = sim_entry_span(op, &op->src[idx[i]]);
        if (sp.lo < sp.hi) OBSERVE(sim, packet_read, r, t, sp);
    }
    OBSERVE(sim, op, r, t);
    /* the release side: signals, semaphore releases, packet writes */
    n = pass_sync_channels(g, tb, op, true, ch, &ct);
    for (int i = 0; i < n; i++) {
        int q, pc = pass_paired_channel(p, r, ct, ch[i], &q);
        if (pc < 0) continue;
        sim->rs[q].inbound[ct][pc]++;
        OBSERVE(sim, signal, r, t, q, ct, pc);
    }
    if (op->kind == PLAN_OP_SEM_RELEASE)
        for (int i = 0; i < op->nsem; i++) {
            int s = op->sem_ids[i];
            if (s < 0 || s >= g->nsems) continue;
            rs->sem[s]++;
            OBSERVE(sim, sem_release, r, t, s);
        }
    SimTargets tg;
    sim_packet_targets(p, r, tb, op, &tg);
    for (int i = 0; i < tg.n; i++) {
        span_add(sim, &sim->rs[tg.rank[i]].pkts, tg.span[i].lo, tg.span[i].hi);
        if (tg.span[i].lo < tg.span[i].hi) OBSERVE(sim, packet_write, r, t, tg.rank[i], tg.span[i]);
    }
    pr->pc++;
    return true;
}

static bool halted(const LaunchSim *sim) {
    return sim->oom || (sim->obs && sim->obs->stop && sim->obs->stop(sim->obs->ctx));
}

bool sim_run(LaunchSim *sim, bool backward) {
    const Plan *p = sim->p;
    bool progress = true, done = false;
    while (progress && !halted(sim)) {
        progress = false;
        done = true;
        for (int i = 0; i < p->ngpus; i++) {
            int r = backward ? p->ngpus - 1 - i : i;
            for (int j = 0; j < p->gpus[r].ntbs; j++) {
                int t = backward ? p->gpus[r].ntbs - 1 - j : j;
                SimProc *pr = &sim->rs[r].procs[t];
                while (pr->pc < pr->n && !halted(sim) && step(sim, r, t)) {
                    progress = true;
                    if (backward) break;
                }
                if (pr->pc < pr->n) done = false;
            }
        }
    }
    return done && !halted(sim);
}

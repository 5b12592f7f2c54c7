/*
 * pass_check_deadlock.c - runs the whole plan as the executor would (launch_sim.h: every TB of
 * every rank a sequential process) to prove one launch finishes. Modelled: signal/wait counters
 * per §6.2-paired channel, barriers with their participant counts, semaphores with their initial
 * values, LL packet arrival (a packet reader waits until packet writers — local cpkt/recpkt,
 * remote ppkt/rppkt/respkt/recspkt, multicast gstorepkt — have covered its range). Pipelines run
 * once when the plan bounds them to one iteration, else twice. If the processes get stuck, the
 * error names the cycle of blocked ops (or the op nobody can unblock); if they finish, signals and
 * semaphores must be back in balance, since the executor never resets them between launches.
 * The processes advance round-robin under two schedules (forward, each TB as far as it gets;
 * backward, one op at a time), each a legal interleaving: a stuck state either reaches is a
 * deadlock the GPU can really hit (e.g. two TBs acquiring one semaphore in either order), but
 * one that only other interleavings reach can go unnoticed.
 */
#include "launch_sim.h"
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- explaining a stuck state ----------------------------------------------------------------- */

typedef enum { BLK_WAIT, BLK_BARRIER, BLK_SEM, BLK_PACKET } BlockKind;

typedef struct {
    BlockKind kind;
    int rank;            /* whose signal/release/packet write is needed */
    PlanChanType ct;     /* BLK_WAIT: channel type and the sender's GPU-level channel */
    int send_ch;         /* -1: the channel pairs with an unpaired filler */
    int id;              /* barrier or semaphore id */
    uint64_t point;      /* BLK_PACKET: first missing scaled position in rank's scratch */
} Blocker;

/* Why process (r, t) cannot proceed. */
static Blocker blocker_of(const LaunchSim *sim, int r, int t) {
    const Plan *p = sim->p;
    const SimRank *rs = &sim->rs[r];
    const SimProc *pr = &rs->procs[t];
    const PlanGpu *g = &p->gpus[r];
    const PlanOp *op = pr->steps[pr->pc].op;
    Blocker b = {.kind = BLK_PACKET, .rank = r, .send_ch = -1};
    int ch[PLAN_MAX_OP_CHANNELS];
    PlanChanType ct;
    int n;
    switch (op->kind) {
    case PLAN_OP_WAIT: case PLAN_OP_RLXWAIT:
        n = pass_sync_channels(g, &g->tbs[t], op, false, ch, &ct);
        for (int i = 0; i < n; i++) {
            int need = 0;
            for (int j = 0; j < n; j++) need += ch[j] == ch[i];
            if (rs->inbound[ct][ch[i]] - rs->consumed[ct][ch[i]] < need) {
                b.kind = BLK_WAIT;
                b.ct = ct;
                b.send_ch = pass_paired_channel(p, r, ct, ch[i], &b.rank);
                b.id = ch[i];
                return b;
            }
        }
        break;
    case PLAN_OP_BARRIER:
        if (pr->arrived) {
            b.kind = BLK_BARRIER;
            b.id = op->barrier_id;
            return b;
        }
        break;
    case PLAN_OP_SEM_ACQUIRE:
        for (int i = 0; i < op->nsem; i++) {
            int s = op->sem_ids[i], need = 0;
            for (int j = 0; j < op->nsem; j++) need += op->sem_ids[j] == s;
            if (s >= 0 && s < g->nsems && rs->sem[s] < need) {
                b.kind = BLK_SEM;
                b.id = s;
                return b;
            }
        }
        break;
    default:
        break;
    }
    int idx[PLAN_MAX_OP_ENTRIES];
    n = pass_packet_reads(op, idx);
    for (int i = 0; i < n; i++) {
        SimSpan sp = sim_entry_span(op, &op->src[idx[i]]);
        uint64_t gap = sim_span_first_gap(&rs->pkts, sp.lo, sp.hi);
        if (gap < sp.hi) {
            b.point = gap;
            return b;
        }
    }
    return b;
}

/* Would `op` (a not yet completed op of rank q's TB u) unblock b? */
static bool helps(const LaunchSim *sim, const Blocker *b, int q, int u, const SimProc *pu, int at,
                  const PlanOp *op) {
    const Plan *p = sim->p;
    const PlanGpu *g = &p->gpus[q];
    if (q != b->rank) return false;
    switch (b->kind) {
    case BLK_WAIT: {
        int ch[PLAN_MAX_OP_CHANNELS];
        PlanChanType ct;
        int n = pass_sync_channels(g, &g->tbs[u], op, true, ch, &ct);
        for (int i = 0; i < n; i++)
            if (ct == b->ct && ch[i] == b->send_ch) return true;
        return false;
    }
    case BLK_BARRIER:
        /* a TB that will reach this barrier but has not arrived yet */
        return op->kind == PLAN_OP_BARRIER && op->barrier_id == b->id &&
               !(at == pu->pc && pu->arrived);
    case BLK_SEM:
        if (op->kind != PLAN_OP_SEM_RELEASE) return false;
        for (int i = 0; i < op->nsem; i++)
            if (op->sem_ids[i] == b->id) return true;
        return false;
    case BLK_PACKET:
        return false;   /* handled by writes_point */
    }
    return false;
}

static bool writes_point(const LaunchSim *sim, const Blocker *b, int q, int u, const PlanOp *op) {
    SimTargets tg;
    sim_packet_targets(sim->p, q, &sim->p->gpus[q].tbs[u], op, &tg);
    for (int i = 0; i < tg.n; i++)
        if (tg.rank[i] == b->rank && tg.span[i].lo <= b->point && b->point < tg.span[i].hi)
            return true;
    return false;
}

/* The process (rank, tb) that must move before (r, t) can, or false if none will. */
static bool find_helper(const LaunchSim *sim, int r, int t, int *hr, int *ht) {
    Blocker b = blocker_of(sim, r, t);
    if (b.kind == BLK_WAIT && b.send_ch < 0) return false;
    for (int q = 0; q < sim->p->ngpus; q++) {
        if (b.kind != BLK_PACKET && q != b.rank) continue;
        for (int u = 0; u < sim->p->gpus[q].ntbs; u++) {
            const SimProc *pu = &sim->rs[q].procs[u];
            if (b.kind == BLK_BARRIER && q == r && u == t) continue;
            for (int k = pu->pc; k < pu->n; k++) {
                const PlanOp *op = pu->steps[k].op;
                if (b.kind == BLK_PACKET ? writes_point(sim, &b, q, u, op)
                                         : helps(sim, &b, q, u, pu, k, op)) {
                    *hr = q;
                    *ht = u;
                    return true;
                }
            }
        }
    }
    return false;
}

/* "rank 0 tb 1 op 3 (wait on memory channel to rank 1)" */
static void describe(const LaunchSim *sim, int r, int t, char *buf, size_t len) {
    const Plan *p = sim->p;
    const SimRank *rs = &sim->rs[r];
    const SimProc *pr = &rs->procs[t];
    const SimStep *st = &pr->steps[pr->pc];
    const PlanOp *op = st->op;
    const PlanGpu *g = &p->gpus[r];
    char pos[32];
    if (st->inner >= 0) snprintf(pos, sizeof pos, "%d.%d", st->top, st->inner);
    else snprintf(pos, sizeof pos, "%d", st->top);
    Blocker b = blocker_of(sim, r, t);
    char what[160];
    switch (b.kind) {
    case BLK_WAIT: {
        int peer = g->peers[b.ct][b.id], nth = 0, count = 0;
        for (int i = 0; i < g->npeers[b.ct]; i++)
            if (g->peers[b.ct][i] == peer) {
                count++;
                if (i < b.id) nth++;
            }
        if (count > 1)
            snprintf(what, sizeof what, "%s on %s channel #%d to rank %d", plan_op_name(op->kind),
                     plan_chan_name(b.ct), nth, peer);
        else
            snprintf(what, sizeof what, "%s on %s channel to rank %d", plan_op_name(op->kind),
                     plan_chan_name(b.ct), peer);
        break;
    }
    case BLK_BARRIER:
        snprintf(what, sizeof what, "barrier %d of %d thread blocks", b.id, op->num_threadblocks);
        break;
    case BLK_SEM:
        snprintf(what, sizeof what, "sem_acquire of semaphore %d", b.id);
        break;
    case BLK_PACKET:
        snprintf(what, sizeof what, "%s waiting for packets in scratch chunk %llu",
                 plan_op_name(op->kind), (unsigned long long)(b.point / SIM_SCALE));
        break;
    }
    snprintf(buf, len, "rank %d tb %d op %s (%s)", r, t, pos, what);
}

/* Why nobody can help (r, t): the end of a chain. */
static void dead_end(const LaunchSim *sim, int r, int t, char *buf, size_t len) {
    Blocker b = blocker_of(sim, r, t);
    switch (b.kind) {
    case BLK_WAIT:
        if (b.send_ch < 0)
            snprintf(buf, len, "a signal that can never come: the channel has no counterpart on rank %d",
                     b.rank);
        else
            snprintf(buf, len, "a signal that no remaining op of rank %d sends", b.rank);
        break;
    case BLK_BARRIER:
        snprintf(buf, len, "thread blocks that never reach barrier %d", b.id);
        break;
    case BLK_SEM:
        snprintf(buf, len, "a release of semaphore %d that no remaining op of rank %d performs",
                 b.id, r);
        break;
    case BLK_PACKET:
        snprintf(buf, len, "packets for scratch chunk %llu of rank %d that no remaining op writes",
                 (unsigned long long)(b.point / SIM_SCALE), r);
        break;
    }
}

/* Appends to a growing message; false on OOM. */
static bool cat(char **msg, size_t *len, const char *s) {
    size_t n = strlen(s);
    char *m = realloc(*msg, *len + n + 1);
    if (!m) return false;
    memcpy(m + *len, s, n + 1);
    *msg = m;
    *len += n;
    return true;
}

static PlanLoc loc_of(const LaunchSim *sim, int r, int t) {
    const SimProc *pr = &sim->rs[r].procs[t];
    return pr->steps[pr->pc].op->loc;
}

/* Reports the stuck state: a wait cycle if there is one, else the longest chain. */
static void report_stuck(LaunchSim *sim, Diag *d) {
    const Plan *p = sim->p;
    int total = 0;
    for (int r = 0; r < p->ngpus; r++) total += p->gpus[r].ntbs;
    int *path_r = malloc((size_t)total * sizeof(int)), *path_t = malloc((size_t)total * sizeof(int));
    int *seen = calloc((size_t)total, sizeof(int));
    int *base = calloc((size_t)p->ngpus + 1, sizeof(int));
    if (!path_r || !path_t || !seen || !base) {
        diag_error(d, (PlanLoc){0, 0}, "deadlock: the plan cannot finish (out of memory describing it)");
        goto out;
    }
    for (int r = 0; r < p->ngpus; r++) base[r + 1] = base[r] + p->gpus[r].ntbs;
    int first_r = -1, first_t = -1;
    /* walk from each stuck process in order; the first walk that closes a cycle is reported */
    for (int r0 = 0; r0 < p->ngpus; r0++)
        for (int t0 = 0; t0 < p->gpus[r0].ntbs; t0++) {
            const SimProc *pr = &sim->rs[r0].procs[t0];
            if (pr->pc >= pr->n) continue;
            if (first_r < 0) {
                first_r = r0;
                first_t = t0;
            }
            memset(seen, 0, (size_t)total * sizeof(int));
            int n = 0, r = r0, t = t0;
            bool cycle = false;
            for (;;) {
                if (seen[base[r] + t]) {
                    cycle = true;
                    break;
                }
                seen[base[r] + t] = n + 1;
                path_r[n] = r;
                path_t[n++] = t;
                int hr, ht;
                if (!find_helper(sim, r, t, &hr, &ht)) break;
                r = hr;
                t = ht;
            }
            if (!cycle) continue;
            /* cycle: from the node revisited to the end of the path */
            int start = seen[base[r] + t] - 1;
            char *msg = NULL;
            size_t len = 0;
            char buf[256];
            bool ok = cat(&msg, &len, "deadlock: ");
            for (int k = start; k < n && ok; k++) {
                describe(sim, path_r[k], path_t[k], buf, sizeof buf);
                ok = cat(&msg, &len, buf) && cat(&msg, &len, k == start ? " waits for " : ", which waits for ");
            }
            if (ok) {
                if (n - start == 1)
                    snprintf(buf, sizeof buf, "a later op of its own thread block");
                else {
                    const SimProc *ps = &sim->rs[path_r[start]].procs[path_t[start]];
                    const SimStep *st = &ps->steps[ps->pc];
                    if (st->inner >= 0)
                        snprintf(buf, sizeof buf, "rank %d tb %d op %d.%d again", path_r[start],
                                 path_t[start], st->top, st->inner);
                    else
                        snprintf(buf, sizeof buf, "rank %d tb %d op %d again", path_r[start],
                                 path_t[start], st->top);
                }
                ok = cat(&msg, &len, buf);
            }
            diag_error(d, loc_of(sim, path_r[start], path_t[start]), "%s",
                       ok ? msg : "deadlock (out of memory describing the cycle)");
            for (int k = start + 1; k < n; k++) {
                describe(sim, path_r[k], path_t[k], buf, sizeof buf);
                diag_note(d, loc_of(sim, path_r[k], path_t[k]), "%s is blocked here", buf);
            }
            free(msg);
            goto out;
        }
    /* no cycle: report the chain from the first stuck process to its dead end */
    {
        char *msg = NULL;
        size_t len = 0;
        char buf[256];
        int r = first_r, t = first_t, n = 0;
        memset(seen, 0, (size_t)total * sizeof(int));
        bool ok = cat(&msg, &len, "deadlock: ");
        while (ok && r >= 0 && !seen[base[r] + t]) {
            seen[base[r] + t] = 1;
            path_r[n] = r;
            path_t[n++] = t;
            describe(sim, r, t, buf, sizeof buf);
            ok = cat(&msg, &len, buf) && cat(&msg, &len, n == 1 ? " waits for " : ", which waits for ");
            int hr, ht;
            if (!find_helper(sim, r, t, &hr, &ht)) break;
            r = hr;
            t = ht;
        }
        if (ok && n > 0) {
            dead_end(sim, path_r[n - 1], path_t[n - 1], buf, sizeof buf);
            ok = cat(&msg, &len, buf);
        }
        diag_error(d, first_r >= 0 ? loc_of(sim, first_r, first_t) : (PlanLoc){0, 0}, "%s",
                   ok ? msg : "deadlock (out of memory describing it)");
        for (int k = 1; k < n; k++) {
            describe(sim, path_r[k], path_t[k], buf, sizeof buf);
            diag_note(d, loc_of(sim, path_r[k], path_t[k]), "%s is blocked here", buf);
        }
        free(msg);
    }
out:
    free(path_r);
    free(path_t);
    free(seen);
    free(base);
}

/* ---- end-of-launch balance ------------------------------------------------------------------ */

/* First op of rank r (any TB) that uses semaphore s, or that signals GPU-level channel ch of
 * type ct (s < 0). */
static PlanLoc first_use(const LaunchSim *sim, int r, int s, PlanChanType ct, int ch) {
    const PlanGpu *g = &sim->p->gpus[r];
    const SimRank *rs = &sim->rs[r];
    for (int t = 0; t < g->ntbs; t++)
        for (int k = 0; k < rs->procs[t].n; k++) {
            const PlanOp *op = rs->procs[t].steps[k].op;
            if (s >= 0) {
                for (int i = 0; i < op->nsem; i++)
                    if ((op->kind == PLAN_OP_SEM_ACQUIRE || op->kind == PLAN_OP_SEM_RELEASE) &&
                        op->sem_ids[i] == s)
                        return op->loc;
            } else {
                int chs[PLAN_MAX_OP_CHANNELS];
                PlanChanType t2;
                int n = pass_sync_channels(g, &g->tbs[t], op, true, chs, &t2);
                for (int i = 0; i < n; i++)
                    if (t2 == ct && chs[i] == ch) return op->loc;
            }
        }
    return (PlanLoc){0, 0};
}

static bool check_balance(LaunchSim *sim, Diag *d) {
    const Plan *p = sim->p;
    bool ok = true;
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        SimRank *rs = &sim->rs[r];
        for (int ct = 0; ct < 2; ct++)
            for (int c = 0; c < g->npeers[ct]; c++) {
                int extra = rs->inbound[ct][c] - rs->consumed[ct][c];
                if (extra <= 0) continue;
                int q = g->peers[ct][c], qc = -1;
                pass_paired_channel(p, r, (PlanChanType)ct, c, &q);
                /* the sender is the peer: find its channel paired with ours */
                for (int k = 0; q >= 0 && k < p->gpus[q].npeers[ct]; k++) {
                    int back;
                    if (pass_paired_channel(p, q, (PlanChanType)ct, k, &back) == c && back == r) qc = k;
                }
                diag_error(d, q >= 0 && qc >= 0 ? first_use(sim, q, -1, (PlanChanType)ct, qc) : (PlanLoc){0, 0},
                           "rank %d sends %d more signal%s on its %s channel to rank %d than rank "
                           "%d waits for in one launch (pipelines repeat their ops): signals are "
                           "never reset, so the next launch would start out of step", q, extra,
                           extra == 1 ? "" : "s", plan_chan_name((PlanChanType)ct), r, r);
                ok = false;
            }
        for (int s = 0; s < g->nsems; s++)
            if (rs->sem[s] != g->sem_init[s]) {
                diag_error(d, first_use(sim, r, s, PLAN_CHAN_NONE, -1),
                           "semaphore %d of rank %d ends the launch at %d but starts at %d: "
                           "semaphores are not reset between launches, so acquires and releases "
                           "must balance", s, r, rs->sem[s], g->sem_init[s]);
                ok = false;
            }
    }
    return ok;
}

/* ---- driver ---------------------------------------------------------------------------------- */

/* One run under a schedule (launch_sim.h: forward, or backward one op at a time). Returns false
 * after reporting a problem. */
static bool simulate(const Plan *p, Diag *d, bool backward) {
    LaunchSim sim;
    if (!sim_init(&sim, p, NULL)) {
        sim_free(&sim);
        diag_error(d, (PlanLoc){0, 0}, "out of memory simulating the plan");
        return false;
    }
    bool done = sim_run(&sim, backward);
    bool ok;
    if (sim.oom) {
        diag_error(d, (PlanLoc){0, 0}, "out of memory simulating the plan");
        ok = false;
    } else if (!done) {
        report_stuck(&sim, d);
        ok = false;
    } else {
        ok = check_balance(&sim, d);
    }
    sim_free(&sim);
    return ok;
}

bool pass_check_deadlock(const Plan *p, Diag *d) {
    return simulate(p, d, false) && simulate(p, d, true);
}

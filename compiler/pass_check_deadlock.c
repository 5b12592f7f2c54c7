/*
 * pass_check_deadlock.c - last pass: runs the whole plan as the executor would (every TB of
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
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PKT_SCALE 720720ull   /* lcm(1..16): positions inside a chunk, so TB-group slices are exact */

typedef struct {
    const PlanOp *op;
    int top, inner;     /* position: ops[top], or ops[top].inner[inner] when inner >= 0 */
} Step;

typedef struct {
    Step *steps;
    int n, pc;
    bool arrived;       /* at a barrier, counted, waiting for the others */
    int joined_gen;     /* that barrier's generation when this TB arrived */
} Proc;

typedef struct {
    uint64_t lo, hi;
} Span;

typedef struct {
    Span *s;
    int n, cap;
} SpanSet;

typedef struct {
    Proc *procs;                    /* [ntbs] */
    int *inbound[2], *consumed[2];  /* per GPU-level memory/port channel */
    int *sem;                       /* current values */
    int bar_arrived[PLAN_MAX_BARRIERS], bar_gen[PLAN_MAX_BARRIERS];
    SpanSet pkts;                   /* scratch packet ranges written in this launch */
} RankState;

typedef struct {
    const Plan *p;
    RankState *rs;
    bool oom;
} Sim;

/* ---- packet coverage ---------------------------------------------------------------------- */

static void span_add(Sim *sim, SpanSet *set, uint64_t lo, uint64_t hi) {
    if (lo >= hi) return;
    /* merge with every overlapping or touching span, then insert in order */
    int w = 0;
    for (int i = 0; i < set->n; i++) {
        Span x = set->s[i];
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
        Span *s = realloc(set->s, (size_t)cap * sizeof *s);
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
    set->s[at] = (Span){lo, hi};
    set->n++;
}

/* First position in [lo, hi) not covered, or hi when all is. */
static uint64_t span_first_gap(const SpanSet *set, uint64_t lo, uint64_t hi) {
    for (int i = 0; i < set->n && lo < hi; i++)
        if (set->s[i].lo <= lo && set->s[i].hi > lo) lo = set->s[i].hi;
    return lo < hi ? lo : hi;
}

/* The scaled range an entry covers for this op (its TB-group slice, spec §3.4 step 4). */
static Span entry_span(const PlanOp *op, const PlanRef *e) {
    uint64_t base = (uint64_t)e->index * PKT_SCALE, len = (uint64_t)e->size * PKT_SCALE;
    if (op->tbg_size > 0) {
        uint64_t g = (uint64_t)op->tbg_size, t = (uint64_t)op->tbg_id;
        return (Span){base + len * t / g, base + len * (t + 1) / g};
    }
    return (Span){base, base + len};
}

/* Calls back for each (rank, span) into whose scratch `op` (on rank r, TB tb) writes packets. */
typedef struct {
    int rank[PLAN_MAX_OP_ENTRIES * 8];
    Span span[PLAN_MAX_OP_ENTRIES * 8];
    int n;
} Targets;

static void packet_targets(const Plan *p, int r, const PlanTb *tb, const PlanOp *op, Targets *out) {
    int idx[PLAN_MAX_OP_ENTRIES];
    int n = pass_packet_writes(op, idx);
    out->n = 0;
    const PlanGpu *g = &p->gpus[r];
    for (int i = 0; i < n; i++) {
        const PlanRef *e = &op->dst[idx[i]];
        Span sp = entry_span(op, e);
        if (e->kind == PLAN_REF_LOCAL) {
            if (e->type != PLAN_BUF_SCRATCH) continue;
            out->rank[out->n] = r;
            out->span[out->n++] = sp;
        } else if (e->kind == PLAN_REF_REMOTE) {
            int owner;
            PlanBuf type;
            if (!pass_remote_target(p, r, tb, op, e, &owner, &type) || type != PLAN_BUF_SCRATCH) continue;
            out->rank[out->n] = owner;
            out->span[out->n++] = sp;
        } else {
            int s = pass_gpu_channel(g, tb, PLAN_CHAN_SWITCH, e->id);
            if (s < 0 || g->switches[s].buf != PLAN_BUF_SCRATCH) continue;
            for (int k = 0; k < g->switches[s].nranks && out->n < (int)(sizeof out->rank / sizeof *out->rank); k++) {
                int q = g->switches[s].ranks[k];
                if (q < 0 || q >= p->ngpus) continue;
                out->rank[out->n] = q;
                out->span[out->n++] = sp;
            }
        }
    }
}

/* ---- ops and channels ----------------------------------------------------------------------- */

static bool build_steps(const Plan *p, int r, const PlanTb *tb, Proc *pr) {
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
                if (pass == 1) pr->steps[n] = (Step){op, i, -1};
                n++;
                continue;
            }
            uint64_t it;
            int reps = 2;
            if (op->num_chunks == 0) reps = 0;
            else if (pass_pipeline_max_iterations(p, r, op, &it) && it <= 1) reps = (int)it;
            for (int k = 0; k < reps; k++)
                for (int j = 0; j < op->ninner; j++) {
                    if (pass == 1) pr->steps[n] = (Step){&op->inner[j], i, j};
                    n++;
                }
        }
    }
    return true;
}

/* ---- stepping --------------------------------------------------------------------------------- */

/* Tries to complete the current op of process (r, t); true if it did. */
static bool step(Sim *sim, int r, int t) {
    const Plan *p = sim->p;
    RankState *rs = &sim->rs[r];
    Proc *pr = &rs->procs[t];
    const PlanGpu *g = &p->gpus[r];
    const PlanTb *tb = &g->tbs[t];
    const PlanOp *op = pr->steps[pr->pc].op;
    int ch[PLAN_MAX_OP_CHANNELS];
    PlanChanType ct;
    /* packet sources must have arrived (always read from local scratch, §5.3); checked before
     * any state changes, so a blocked op leaves no trace */
    int idx[PLAN_MAX_OP_ENTRIES];
    int n = pass_packet_reads(op, idx);
    for (int i = 0; i < n; i++) {
        Span sp = entry_span(op, &op->src[idx[i]]);
        if (span_first_gap(&rs->pkts, sp.lo, sp.hi) < sp.hi) return false;
    }
    switch (op->kind) {
    case PLAN_OP_WAIT: case PLAN_OP_RLXWAIT:
        n = pass_sync_channels(g, tb, op, false, ch, &ct);
        for (int i = 0; i < n; i++) {
            int need = 0;
            for (int j = 0; j < n; j++) need += ch[j] == ch[i];
            if (rs->inbound[ct][ch[i]] - rs->consumed[ct][ch[i]] < need) return false;
        }
        for (int i = 0; i < n; i++) rs->consumed[ct][ch[i]]++;
        break;
    case PLAN_OP_BARRIER: {
        int id = op->barrier_id;
        if (op->num_threadblocks > 1 && id >= 0 && id < PLAN_MAX_BARRIERS) {
            if (!pr->arrived) {
                pr->arrived = true;
                pr->joined_gen = rs->bar_gen[id];
                if (++rs->bar_arrived[id] >= op->num_threadblocks) {
                    rs->bar_arrived[id] = 0;
                    rs->bar_gen[id]++;
                }
            }
            if (rs->bar_gen[id] == pr->joined_gen) return false;
            pr->arrived = false;
        }
        break;
    }
    case PLAN_OP_SEM_ACQUIRE:
        for (int i = 0; i < op->nsem; i++) {
            int need = 0;
            for (int j = 0; j < op->nsem; j++) need += op->sem_ids[j] == op->sem_ids[i];
            int s = op->sem_ids[i];
            if (s >= 0 && s < g->nsems && rs->sem[s] < need) return false;
        }
        for (int i = 0; i < op->nsem; i++)
            if (op->sem_ids[i] >= 0 && op->sem_ids[i] < g->nsems) rs->sem[op->sem_ids[i]]--;
        break;
    case PLAN_OP_SEM_RELEASE:
        for (int i = 0; i < op->nsem; i++)
            if (op->sem_ids[i] >= 0 && op->sem_ids[i] < g->nsems) rs->sem[op->sem_ids[i]]++;
        break;
    default:
        break;
    }
    /* effects: signals and packet writes */
    n = pass_sync_channels(g, tb, op, true, ch, &ct);
    for (int i = 0; i < n; i++) {
        int q, pc = pass_paired_channel(p, r, ct, ch[i], &q);
        if (pc >= 0) sim->rs[q].inbound[ct][pc]++;
    }
    Targets tg;
    packet_targets(p, r, tb, op, &tg);
    for (int i = 0; i < tg.n; i++) span_add(sim, &sim->rs[tg.rank[i]].pkts, tg.span[i].lo, tg.span[i].hi);
    pr->pc++;
    return true;
}

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
static Blocker blocker_of(const Sim *sim, int r, int t) {
    const Plan *p = sim->p;
    const RankState *rs = &sim->rs[r];
    const Proc *pr = &rs->procs[t];
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
        Span sp = entry_span(op, &op->src[idx[i]]);
        uint64_t gap = span_first_gap(&rs->pkts, sp.lo, sp.hi);
        if (gap < sp.hi) {
            b.point = gap;
            return b;
        }
    }
    return b;
}

/* Would `op` (a not yet completed op of rank q's TB u) unblock b? */
static bool helps(const Sim *sim, const Blocker *b, int q, int u, const Proc *pu, int at,
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

static bool writes_point(const Sim *sim, const Blocker *b, int q, int u, const PlanOp *op) {
    Targets tg;
    packet_targets(sim->p, q, &sim->p->gpus[q].tbs[u], op, &tg);
    for (int i = 0; i < tg.n; i++)
        if (tg.rank[i] == b->rank && tg.span[i].lo <= b->point && b->point < tg.span[i].hi)
            return true;
    return false;
}

/* The process (rank, tb) that must move before (r, t) can, or false if none will. */
static bool find_helper(const Sim *sim, int r, int t, int *hr, int *ht) {
    Blocker b = blocker_of(sim, r, t);
    if (b.kind == BLK_WAIT && b.send_ch < 0) return false;
    for (int q = 0; q < sim->p->ngpus; q++) {
        if (b.kind != BLK_PACKET && q != b.rank) continue;
        for (int u = 0; u < sim->p->gpus[q].ntbs; u++) {
            const Proc *pu = &sim->rs[q].procs[u];
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
static void describe(const Sim *sim, int r, int t, char *buf, size_t len) {
    const Plan *p = sim->p;
    const RankState *rs = &sim->rs[r];
    const Proc *pr = &rs->procs[t];
    const Step *st = &pr->steps[pr->pc];
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
                 plan_op_name(op->kind), (unsigned long long)(b.point / PKT_SCALE));
        break;
    }
    snprintf(buf, len, "rank %d tb %d op %s (%s)", r, t, pos, what);
}

/* Why nobody can help (r, t): the end of a chain. */
static void dead_end(const Sim *sim, int r, int t, char *buf, size_t len) {
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
                 (unsigned long long)(b.point / PKT_SCALE), r);
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

static PlanLoc loc_of(const Sim *sim, int r, int t) {
    const Proc *pr = &sim->rs[r].procs[t];
    return pr->steps[pr->pc].op->loc;
}

/* Reports the stuck state: a wait cycle if there is one, else the longest chain. */
static void report_stuck(Sim *sim, Diag *d) {
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
            const Proc *pr = &sim->rs[r0].procs[t0];
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
                    const Proc *ps = &sim->rs[path_r[start]].procs[path_t[start]];
                    const Step *st = &ps->steps[ps->pc];
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
static PlanLoc first_use(const Sim *sim, int r, int s, PlanChanType ct, int ch) {
    const PlanGpu *g = &sim->p->gpus[r];
    const RankState *rs = &sim->rs[r];
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

static bool check_balance(Sim *sim, Diag *d) {
    const Plan *p = sim->p;
    bool ok = true;
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        RankState *rs = &sim->rs[r];
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

static void free_sim(Sim *sim) {
    if (!sim->rs) return;
    for (int r = 0; r < sim->p->ngpus; r++) {
        RankState *rs = &sim->rs[r];
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
}

static bool init_sim(Sim *sim) {
    const Plan *p = sim->p;
    sim->rs = calloc((size_t)(p->ngpus > 0 ? p->ngpus : 1), sizeof *sim->rs);
    if (!sim->rs) return false;
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        RankState *rs = &sim->rs[r];
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

/* One run under a schedule: 0 = ranks and TBs in order, each as far as it gets; 1 = in reverse
 * order, one op at a time. Returns false after reporting a problem. */
static bool simulate(const Plan *p, Diag *d, int schedule) {
    Sim sim = {.p = p};
    if (!init_sim(&sim)) {
        free_sim(&sim);
        diag_error(d, (PlanLoc){0, 0}, "out of memory simulating the plan");
        return false;
    }
    bool progress = true, done = false;
    while (progress && !sim.oom) {
        progress = false;
        done = true;
        for (int i = 0; i < p->ngpus; i++) {
            int r = schedule == 0 ? i : p->ngpus - 1 - i;
            for (int j = 0; j < p->gpus[r].ntbs; j++) {
                int t = schedule == 0 ? j : p->gpus[r].ntbs - 1 - j;
                Proc *pr = &sim.rs[r].procs[t];
                if (schedule == 0) {
                    while (pr->pc < pr->n && step(&sim, r, t)) progress = true;
                } else if (pr->pc < pr->n && step(&sim, r, t)) {
                    progress = true;
                }
                if (pr->pc < pr->n) done = false;
            }
        }
    }
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
    free_sim(&sim);
    return ok;
}

bool pass_check_deadlock(const Plan *p, Diag *d) {
    return simulate(p, d, 0) && simulate(p, d, 1);
}

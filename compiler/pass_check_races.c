/*
 * pass_check_races.c - after pass_check_deadlock: a happens-before analysis of one launch.
 * Follows the deadlock pass's forward schedule of the shared simulation (launch_sim.h: every TB of
 * every rank a sequential process) as its observer, and keeps two vector clocks per process,
 * indexed by (rank, TB):
 *   - the data clock, advanced by thread-block program order and joined along the edges that
 *     order memory on a GPU: strict signal -> its wait (per §6.2-paired channel, k-th signal to
 *     k-th wait, with the earlier signals of that channel), sem_release -> sem_acquire, barrier
 *     generations, and LL packets (a packet read waits for the flag, so it is ordered after the
 *     packet writes that covered its range);
 *   - the execution clock, which also follows relaxed signal/wait (they order execution, never
 *     data: libmscclrt(3)).
 * Every data access (rank, buffer, chunk range; puts write the peer's buffer, gets and remote
 * reduces read it, switch ops touch every member) is checked against the earlier accesses of the
 * same place, FastTrack style: per (rank, buffer) a sorted map of disjoint intervals, each holding
 * its last write and the last read of each TB, so the cost grows with the accesses, not with
 * their pairs. Two accesses of different TBs (or ranks), at least one a write, with no data-clock
 * order between them are a race: an error naming both ops. If only relaxed edges order them, the
 * message says so.
 * The entry handshake: a write into another rank's buffer needs a sign, in the execution clock,
 * that the owner has entered this launch (any of its ops before the write) whenever the owner
 * itself accesses those chunks: otherwise the write can land while the owner's previous launch
 * still uses them. LL packet writes into scratch are exempt when the plan double-buffers scratch
 * (consecutive launches use different halves, spec §4.3).
 * Pipelines are modelled as in the deadlock pass (one iteration when the plan bounds them to one,
 * else two); iteration j of two covers the j-th half of each entry's pipelined range (packet ops
 * always cover their whole entry, §5.0). Port puts complete at issue, as on the CPU backend.
 * Plans of more than RACE_MAX_TBS thread blocks in all are not analysed (clocks grow with their
 * square): a warning says so.
 */
#include "launch_sim.h"
#include "passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RACE_MAX_TBS 4096
#define RACE_MAX_REPORTS 64


/* One access of an op: its place (owner rank's buffer, scaled span) and kind. */
typedef struct {
    int r, t, step;     /* who: rank, TB, step index */
    int gtb, epoch;     /* global TB index and its clock value at the access */
    int owner;
    PlanBuf buf;
    uint64_t lo, hi;
    bool write, packet, evidence;
} Access;

typedef struct {
    uint64_t lo, hi;
    int w;              /* last write (access id) or -1 */
    int nr, cap;
    int *rd;            /* last read of each TB (access ids) */
} Seg;

typedef struct {
    Seg *s;
    int n, cap;
} SegMap;

typedef struct {
    uint64_t lo, hi;    /* launch_sim.h's scale (not doubled like packet accesses) */
    int *clk;           /* [2T] of the writer at the write */
} PktWrite;

typedef struct {
    int **q;            /* signals' cumulative clocks, in arrival order (consumed ones freed
                           unless `multi`) */
    int n, cap, head;
    int *last;          /* cumulative clock of the last signal, or NULL */
    int waiter;         /* the TB that waits on this channel (-1: none yet) */
    bool multi;         /* several TBs wait on it: which signal a wait takes is not fixed */
    int *wgtb, *wepoch; /* multi: the waits so far (global TB, epoch) */
    int nw, capw;
} Queue;

typedef struct {
    int *acc, *rel;             /* the current generation's arrivals joined; the last released */
} Barrier;

typedef struct {
    Queue *queue[2];            /* per GPU-level channel of this rank: signals arriving on it */
    Barrier bar[PLAN_MAX_BARRIERS];
    int **sem_clk;              /* join of the releases so far, or NULL */
    PktWrite *pk;
    int npk, cappk;
    SegMap maps[PLAN_BUF_COUNT];
} Rank;

typedef struct {
    int a, b;                   /* access ids */
    PlanLoc la, lb;
} Reported;

typedef struct {
    const Plan *p;
    Diag *d;
    int T;                      /* thread blocks in all */
    int *base;                  /* [ngpus + 1]: global index of rank r's TB 0 */
    LaunchSim ls;               /* the processes and what blocks them */
    int **clk;                  /* [T][2T]: each TB's data clock, then its execution clock */
    Rank *rk;
    Access *acc;
    int nacc, capacc;
    int *cand;                  /* remote writes without entry evidence (access ids) */
    int ncand, capcand;
    Reported rep[RACE_MAX_REPORTS];
    int nrep, more;
    bool oom;
} Sim;

static void *grow(Sim *s, void *ptr, int *cap, int need, size_t size) {
    if (need <= *cap) return ptr;
    int c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void *n = realloc(ptr, (size_t)c * size);
    if (!n) {
        s->oom = true;
        return NULL;
    }
    *cap = c;
    return n;
}

static int *clk_new(Sim *s) {
    int *c = calloc((size_t)2 * (size_t)s->T, sizeof(int));
    if (!c) s->oom = true;
    return c;
}

/* dst = max(dst, src) over the data half (both = false) or both halves. */
static void clk_join(const Sim *s, int *dst, const int *src, bool data, bool exec) {
    int T = s->T;
    if (data)
        for (int i = 0; i < T; i++)
            if (src[i] > dst[i]) dst[i] = src[i];
    if (exec)
        for (int i = T; i < 2 * T; i++)
            if (src[i] > dst[i]) dst[i] = src[i];
}


/* ---- accesses of an op --------------------------------------------------------------------- */

/* The scaled span of entry e of the op at step st: its TB-group slice (§3.4), the pipeline
 * iteration's part of it (§5.0), doubled for packets (§4.1). false when it touches nothing. */
static bool step_span(const SimStep *st, const PlanRef *e, bool packet, uint64_t *lo, uint64_t *hi) {
    const PlanOp *op = st->op;
    uint64_t base = (uint64_t)e->index * SIM_SCALE, len = (uint64_t)e->size * SIM_SCALE;
    uint64_t a = base, b = base + len;
    if (op->tbg_size > 0) {
        uint64_t g = (uint64_t)op->tbg_size, t = (uint64_t)op->tbg_id;
        a = base + len * t / g;
        b = base + len * (t + 1) / g;
    }
    if (st->niter > 1 && !packet) {
        uint64_t unit = (uint64_t)st->pipe_k * SIM_SCALE / (uint64_t)st->niter;
        uint64_t x = a + unit * (uint64_t)st->iter, y = x + unit;
        if (st->iter == st->niter - 1 || y > b) y = b;
        if (x >= b) return false;
        a = x;
        b = y;
    }
    if (packet) {
        a *= 2;
        b *= 2;
    }
    *lo = a;
    *hi = b;
    return a < b;
}

typedef struct {
    int owner;
    PlanBuf buf;
    uint64_t lo, hi;
    bool write, packet, remote_write;
} Touch;

typedef struct {
    Touch t[PLAN_MAX_OP_ENTRIES * 2 * 8];
    int n;
} Touches;

static bool in_list(const int *idx, int n, int v) {
    for (int i = 0; i < n; i++)
        if (idx[i] == v) return true;
    return false;
}

/* Adds the places entry e of (rank r, TB tb) touches. */
static void add_entry(const Sim *s, int r, const PlanTb *tb, const SimStep *st, const PlanRef *e,
                      bool write, bool packet, bool packet_read, Touches *out) {
    const Plan *p = s->p;
    const PlanOp *op = st->op;
    uint64_t lo, hi;
    if (!step_span(st, e, packet, &lo, &hi)) return;
    int owners[64], n = 0;
    PlanBuf buf = e->type;
    if (packet_read) {
        owners[n++] = r;                  /* packet sources are always local scratch (§5.3) */
        buf = PLAN_BUF_SCRATCH;
    } else if (e->kind == PLAN_REF_LOCAL) {
        if ((unsigned)e->type >= PLAN_BUF_COUNT) return;
        owners[n++] = r;
    } else if (e->kind == PLAN_REF_REMOTE) {
        int q;
        if (!pass_remote_target(p, r, tb, op, e, &q, &buf)) return;
        owners[n++] = q;
    } else {
        const PlanGpu *g = &p->gpus[r];
        int sw = pass_gpu_channel(g, tb, PLAN_CHAN_SWITCH, e->id);
        if (sw < 0) return;
        buf = g->switches[sw].buf;
        for (int k = 0; k < g->switches[sw].nranks && n < 64; k++) {
            int q = g->switches[sw].ranks[k];
            if (q >= 0 && q < p->ngpus) owners[n++] = q;
        }
    }
    if ((unsigned)buf >= PLAN_BUF_COUNT) return;
    for (int k = 0; k < n && out->n < (int)(sizeof out->t / sizeof *out->t); k++)
        out->t[out->n++] = (Touch){owners[k], buf, lo, hi, write, packet, write && owners[k] != r};
}

static void op_touches(const Sim *s, int r, const PlanTb *tb, const SimStep *st, Touches *out) {
    const PlanOp *op = st->op;
    int rd[PLAN_MAX_OP_ENTRIES], wr[PLAN_MAX_OP_ENTRIES];
    int nrd = pass_packet_reads(op, rd), nwr = pass_packet_writes(op, wr);
    out->n = 0;
    int nsrc = 0, ndst = 0;
    switch (op->kind) {
    case PLAN_OP_COPY: case PLAN_OP_CPKT: case PLAN_OP_UPKT: case PLAN_OP_GSTORE:
    case PLAN_OP_GSTOREPKT:
        nsrc = op->nsrc > 0 ? 1 : 0;
        ndst = op->ndst > 0 ? 1 : 0;
        break;
    case PLAN_OP_GLRES:
        if (pass_is_glre(op)) return;
        nsrc = op->nsrc > 0 ? 1 : 0;
        ndst = op->ndst > 0 ? 1 : 0;
        break;
    case PLAN_OP_PUT: case PLAN_OP_PWS: case PLAN_OP_PWSF: case PLAN_OP_GET: case PLAN_OP_PPKT:
        nsrc = ndst = op->nsrc < op->ndst ? op->nsrc : op->ndst;
        break;
    case PLAN_OP_RPPKT:
        nsrc = op->nsrc > 0 ? 1 : 0;
        ndst = op->ndst;
        break;
    case PLAN_OP_RE: case PLAN_OP_RES: case PLAN_OP_RRE: case PLAN_OP_RRES: case PLAN_OP_REPKT:
    case PLAN_OP_RESPKT: case PLAN_OP_RECPKT: case PLAN_OP_RECSPKT:
        nsrc = op->nsrc;
        ndst = op->ndst;
        break;
    default:
        return;
    }
    bool port_ppkt = op->kind == PLAN_OP_PPKT && op->chan_type == PLAN_CHAN_PORT;
    for (int i = 0; i < nsrc && i < PLAN_MAX_OP_ENTRIES; i++) {
        bool pr = in_list(rd, nrd, i);
        add_entry(s, r, tb, st, &op->src[i], false, pr || port_ppkt, pr, out);
    }
    for (int i = 0; i < ndst && i < PLAN_MAX_OP_ENTRIES; i++)
        add_entry(s, r, tb, st, &op->dst[i], true, in_list(wr, nwr, i), false, out);
}

/* ---- reporting ---------------------------------------------------------------------------- */

static void step_pos(const Sim *s, int r, int t, int k, char *buf, size_t n) {
    const SimStep *st = &s->ls.rs[r].procs[t].steps[k];
    char it[32] = "";
    if (st->niter > 1) snprintf(it, sizeof it, ", pipeline iteration %d", st->iter);
    if (st->inner >= 0)
        snprintf(buf, n, "rank %d tb %d op %d.%d (%s%s)", r, t, st->top, st->inner,
                 plan_op_name(st->op->kind), it);
    else
        snprintf(buf, n, "rank %d tb %d op %d (%s)", r, t, st->top, plan_op_name(st->op->kind));
}

static PlanLoc loc_of(const Sim *s, const Access *a) {
    return s->ls.rs[a->r].procs[a->t].steps[a->step].op->loc;
}

/* "rank 1's output[0:1]" for the scaled span [lo, hi) (packet spans are halved back). */
static void place(const Access *a, uint64_t lo, uint64_t hi, char *buf, size_t n) {
    if (a->packet) {
        lo /= 2;
        hi = (hi + 1) / 2;
    }
    unsigned long long c0 = lo / SIM_SCALE, c1 = (hi + SIM_SCALE - 1) / SIM_SCALE;
    const char *part = lo % SIM_SCALE || hi % SIM_SCALE ? " (part of it)" : "";
    if (c1 == c0 + 1)
        snprintf(buf, n, "rank %d's %s chunk %llu%s%s", a->owner, plan_buf_long_name(a->buf), c0,
                 a->packet ? " as packets" : "", part);
    else
        snprintf(buf, n, "rank %d's %s chunks %llu..%llu%s%s", a->owner, plan_buf_long_name(a->buf),
                 c0, c1 - 1, a->packet ? " as packets" : "", part);
}

static bool already(Sim *s, int a, int b) {
    PlanLoc la = loc_of(s, &s->acc[a]), lb = loc_of(s, &s->acc[b]);
    bool located = la.line > 0 && lb.line > 0;
    for (int i = 0; i < s->nrep; i++) {
        const Reported *x = &s->rep[i];
        if (located ? x->la.line == la.line && x->la.col == la.col && x->lb.line == lb.line &&
                          x->lb.col == lb.col
                    : x->a == a && x->b == b)
            return true;
    }
    if (s->nrep == RACE_MAX_REPORTS) {
        s->more++;
        return true;
    }
    s->rep[s->nrep++] = (Reported){a, b, la, lb};
    return false;
}

/* Earlier access a and the current access b (of the process whose clock is clk) race. */
static void report_race(Sim *s, int a, int b, const int *clk) {
    if (already(s, a, b)) return;
    const Access *x = &s->acc[a], *y = &s->acc[b];
    bool relaxed = clk[s->T + x->gtb] >= x->epoch;
    char pa[96], pb[96], where[128];
    step_pos(s, x->r, x->t, x->step, pa, sizeof pa);
    step_pos(s, y->r, y->t, y->step, pb, sizeof pb);
    uint64_t lo = x->lo > y->lo ? x->lo : y->lo, hi = x->hi < y->hi ? x->hi : y->hi;
    place(y, lo, hi, where, sizeof where);
    if (relaxed)
        diag_error(s->d, loc_of(s, y),
                   "data race: %s %s %s, which %s %s, and only relaxed signal/wait order them: "
                   "relaxed signals order execution, not data, on GPUs (use signal()/wait() "
                   "without relaxed)", pb, y->write ? "writes" : "reads", where, pa,
                   x->write ? "writes" : "reads");
    else
        diag_error(s->d, loc_of(s, y),
                   "data race: %s %s %s, which %s %s, and no signal/wait, semaphore, barrier, "
                   "packet or thread-block order puts one before the other", pb,
                   y->write ? "writes" : "reads", where, pa, x->write ? "writes" : "reads");
    diag_note(s->d, loc_of(s, x), "%s %s it here", pa, x->write ? "writes" : "reads");
}

/* ---- the interval maps ------------------------------------------------------------------------ */

/* Index of the first segment with hi > x. */
static int seg_find(const SegMap *m, uint64_t x) {
    int lo = 0, hi = m->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (m->s[mid].hi <= x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Inserts an empty segment [lo, hi) at position at. */
static bool seg_insert(Sim *s, SegMap *m, int at, uint64_t lo, uint64_t hi) {
    Seg *ns = grow(s, m->s, &m->cap, m->n + 1, sizeof *m->s);
    if (!ns) return false;
    m->s = ns;
    memmove(&m->s[at + 1], &m->s[at], (size_t)(m->n - at) * sizeof *m->s);
    m->s[at] = (Seg){lo, hi, -1, 0, 0, NULL};
    m->n++;
    return true;
}

/* Splits segment i at x (lo < x < hi): the right part gets a copy of its accesses. */
static bool seg_split(Sim *s, SegMap *m, int i, uint64_t x) {
    Seg old = m->s[i];
    int *rd = NULL;
    if (old.nr) {
        rd = malloc((size_t)old.nr * sizeof *rd);
        if (!rd) {
            s->oom = true;
            return false;
        }
        memcpy(rd, old.rd, (size_t)old.nr * sizeof *rd);
    }
    if (!seg_insert(s, m, i + 1, x, old.hi)) {
        free(rd);
        return false;
    }
    m->s[i].hi = x;
    m->s[i + 1].w = old.w;
    m->s[i + 1].rd = rd;
    m->s[i + 1].nr = m->s[i + 1].cap = old.nr;
    return true;
}

/* Makes [lo, hi) exactly a run of segments; returns the index of the first, -1 on OOM. */
static int seg_cover(Sim *s, SegMap *m, uint64_t lo, uint64_t hi) {
    int i = seg_find(m, lo);
    if (i < m->n && m->s[i].lo < lo && !seg_split(s, m, i, lo)) return -1;
    if (i < m->n && m->s[i].lo < lo) i++;
    int first = i;
    uint64_t x = lo;
    while (x < hi) {
        if (i == m->n || m->s[i].lo >= hi) {
            if (!seg_insert(s, m, i, x, hi)) return -1;
            x = hi;
        } else if (m->s[i].lo > x) {
            if (!seg_insert(s, m, i, x, m->s[i].lo)) return -1;
            x = m->s[i + 1].lo;
        } else {
            if (m->s[i].hi > hi && !seg_split(s, m, i, hi)) return -1;
            x = m->s[i].hi;
        }
        i++;
    }
    return first;
}

/* Checks access id x (of the process with clock clk) against the map and records it. */
static void check_access(Sim *s, int x, const int *clk) {
    Access *a = &s->acc[x];
    SegMap *m = &s->rk[a->owner].maps[a->buf];
    int i = seg_cover(s, m, a->lo, a->hi);
    if (i < 0) return;
    for (; i < m->n && m->s[i].lo < a->hi; i++) {
        Seg *g = &m->s[i];
        if (g->w >= 0 && g->w != x) {
            const Access *w = &s->acc[g->w];
            if (clk[w->gtb] < w->epoch) report_race(s, g->w, x, clk);
        }
        if (a->write) {
            for (int k = 0; k < g->nr; k++) {
                const Access *r = &s->acc[g->rd[k]];
                if (g->rd[k] != x && clk[r->gtb] < r->epoch) report_race(s, g->rd[k], x, clk);
            }
            g->w = x;
            g->nr = 0;
        } else {
            int k = 0;
            while (k < g->nr && s->acc[g->rd[k]].gtb != a->gtb) k++;
            if (k == g->nr) {
                int *nr = grow(s, g->rd, &g->cap, g->nr + 1, sizeof *g->rd);
                if (!nr) return;
                g->rd = nr;
                g->nr++;
            }
            g->rd[k] = x;
        }
    }
}

/* ---- following the simulation (launch_sim.h's observer) ------------------------------------ */

static Queue *queue_of(Sim *s, int r, PlanChanType ct, int ch) {
    return &s->rk[r].queue[ct][ch];
}

static const SimStep *cur_step(const Sim *s, int r, int t) {
    const SimProc *pr = &s->ls.rs[r].procs[t];
    return &pr->steps[pr->pc];
}

static int *clk_of(const Sim *s, int r, int t) {
    return s->clk[s->base[r] + t];
}

/* A wait takes a signal: its clock joins the signal's (the data half only when both sides are
 * strict). */
static void on_wait(void *ctx, int r, int t, PlanChanType ct, int ch) {
    Sim *s = ctx;
    const PlanOp *op = cur_step(s, r, t)->op;
    int *clk = clk_of(s, r, t);
    Queue *q = queue_of(s, r, ct, ch);
    /* a relaxed wait acquires nothing (a port wait is strict either way, §5.2); the signal side
     * stored only its execution clock if it was relaxed */
    bool strict = op->kind == PLAN_OP_WAIT || ct == PLAN_CHAN_PORT;
    int take = q->head;
    if (q->multi) {
        /* waits of several TBs take their counts in any order: this one is sure only of the
         * signals up to one past the waits ordered before it */
        int before = 0;
        for (int w = 0; w < q->nw; w++)
            if (clk[s->T + q->wgtb[w]] >= q->wepoch[w]) before++;
        take = before < take ? before : take;
        int *gw = grow(s, q->wgtb, &q->capw, q->nw + 1, sizeof *q->wgtb);
        if (!gw) return;
        q->wgtb = gw;
        int cap = q->capw, *e = realloc(q->wepoch, (size_t)cap * sizeof *e);
        if (!e) {
            s->oom = true;
            return;
        }
        q->wepoch = e;
        q->wgtb[q->nw] = s->base[r] + t;
        q->wepoch[q->nw++] = s->ls.rs[r].procs[t].pc + 1;
    }
    if (take >= q->n) {
        /* a signal the simulation counted but on_signal could not keep: only after an
         * allocation failed, which already ends the run */
        s->oom = true;
        return;
    }
    clk_join(s, clk, q->q[take], strict, true);
    if (!q->multi) {
        free(q->q[q->head]);
        q->q[q->head] = NULL;
    }
    q->head++;
}

static Barrier *barrier_of(Sim *s, int r, int id) {
    Barrier *b = &s->rk[r].bar[id];
    if (!b->acc && !(b->acc = clk_new(s))) return NULL;
    if (!b->rel && !(b->rel = clk_new(s))) return NULL;
    return b;
}

/* Barrier generations: the arrivals' clocks join, and each TB leaves with the join. */
static void on_barrier_arrive(void *ctx, int r, int t, int id) {
    Sim *s = ctx;
    Barrier *b = barrier_of(s, r, id);
    if (b) clk_join(s, b->acc, clk_of(s, r, t), true, true);
}

static void on_barrier_open(void *ctx, int r, int id) {
    Sim *s = ctx;
    Barrier *b = barrier_of(s, r, id);
    if (!b) return;
    memcpy(b->rel, b->acc, (size_t)2 * (size_t)s->T * sizeof(int));
    memset(b->acc, 0, (size_t)2 * (size_t)s->T * sizeof(int));
}

static void on_barrier_leave(void *ctx, int r, int t, int id) {
    Sim *s = ctx;
    Barrier *b = barrier_of(s, r, id);
    if (b) clk_join(s, clk_of(s, r, t), b->rel, true, true);
}

/* sem_release -> sem_acquire: an acquire is ordered after every release so far. */
static void on_sem_acquire(void *ctx, int r, int t, int id) {
    Sim *s = ctx;
    if (s->rk[r].sem_clk[id]) clk_join(s, clk_of(s, r, t), s->rk[r].sem_clk[id], true, true);
}

static void on_sem_release(void *ctx, int r, int t, int id) {
    Sim *s = ctx;
    Rank *rk = &s->rk[r];
    if (!rk->sem_clk[id] && !(rk->sem_clk[id] = clk_new(s))) return;
    clk_join(s, rk->sem_clk[id], clk_of(s, r, t), true, true);
}

/* A packet read waits for the flags of the packet writes that cover its range: it is ordered
 * after each of them. */
static void on_packet_read(void *ctx, int r, int t, SimSpan sp) {
    Sim *s = ctx;
    Rank *rk = &s->rk[r];
    int *clk = clk_of(s, r, t);
    for (int i = 0; i < rk->npk; i++)
        if (rk->pk[i].lo < sp.hi && rk->pk[i].hi > sp.lo)
            clk_join(s, clk, rk->pk[i].clk, true, true);
}

static void on_packet_write(void *ctx, int r, int t, int owner, SimSpan sp) {
    Sim *s = ctx;
    Rank *o = &s->rk[owner];
    PktWrite *np = grow(s, o->pk, &o->cappk, o->npk + 1, sizeof *o->pk);
    if (!np) return;
    o->pk = np;
    int *c = clk_new(s);
    if (!c) return;
    memcpy(c, clk_of(s, r, t), (size_t)2 * (size_t)s->T * sizeof(int));
    o->pk[o->npk++] = (PktWrite){sp.lo, sp.hi, c};
}

/* A signal carries the sender's clock (the data half only when strict: relaxed signals order
 * execution, not data), joined with the channel's earlier signals. */
static void on_signal(void *ctx, int r, int t, int q, PlanChanType ct, int qch) {
    Sim *s = ctx;
    const PlanOp *op = cur_step(s, r, t)->op;
    Queue *qu = queue_of(s, q, ct, qch);
    int *c = clk_new(s);
    if (!c) return;
    bool strict = op->kind != PLAN_OP_RLXSIGNAL || ct == PLAN_CHAN_PORT;
    clk_join(s, c, clk_of(s, r, t), strict, true);
    if (qu->last) clk_join(s, c, qu->last, true, true);
    else if (!(qu->last = clk_new(s))) {
        free(c);
        return;
    }
    memcpy(qu->last, c, (size_t)2 * (size_t)s->T * sizeof(int));
    int **nq = grow(s, qu->q, &qu->cap, qu->n + 1, sizeof *qu->q);
    if (!nq) {
        free(c);
        return;
    }
    qu->q = nq;
    qu->q[qu->n++] = c;
}

/* Whether rank q has an op that execution-happens-before the current point of clk. */
static bool entered(const Sim *s, int q, const int *clk) {
    for (int i = s->base[q]; i < s->base[q + 1]; i++)
        if (clk[s->T + i] > 0) return true;
    return false;
}

/* The op itself: advances its TB's clocks and checks each of its accesses. */
static void on_op(void *ctx, int r, int t) {
    Sim *s = ctx;
    int pc = s->ls.rs[r].procs[t].pc;
    int *clk = clk_of(s, r, t);
    int gtb = s->base[r] + t;
    int epoch = pc + 1;
    clk[gtb] = epoch;
    clk[s->T + gtb] = epoch;
    Touches tc;
    op_touches(s, r, &s->p->gpus[r].tbs[t], cur_step(s, r, t), &tc);
    for (int i = 0; i < tc.n && !s->oom; i++) {
        const Touch *x = &tc.t[i];
        Access *na = grow(s, s->acc, &s->capacc, s->nacc + 1, sizeof *s->acc);
        if (!na) break;
        s->acc = na;
        int id = s->nacc++;
        bool ev = true;
        if (x->remote_write && !(x->packet && x->buf == PLAN_BUF_SCRATCH && s->p->double_scratch))
            ev = entered(s, x->owner, clk);
        s->acc[id] = (Access){r, t, pc, gtb, epoch, x->owner, x->buf, x->lo, x->hi, x->write,
                              x->packet, ev};
        if (!ev) {
            int *nc = grow(s, s->cand, &s->capcand, s->ncand + 1, sizeof *s->cand);
            if (nc) {
                s->cand = nc;
                s->cand[s->ncand++] = id;
            }
        }
        check_access(s, id, clk);
    }
}

static bool on_stop(void *ctx) {
    const Sim *s = ctx;
    return s->oom || diag_stopped(s->d);
}

/* ---- the entry handshake ------------------------------------------------------------------- */

typedef struct {
    int owner;
    PlanBuf buf;
    uint64_t lo, hi;
    int id;
} Own;

static int cmp_own(const void *a, const void *b) {
    const Own *x = a, *y = b;
    if (x->owner != y->owner) return x->owner < y->owner ? -1 : 1;
    if (x->buf != y->buf) return x->buf < y->buf ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The join of rank r's execution clocks at the end of the launch, into out[T..2T). */
static void end_clock(const Sim *s, int r, int *out) {
    memset(out, 0, (size_t)2 * (size_t)s->T * sizeof(int));
    for (int t = 0; t < s->p->gpus[r].ntbs; t++)
        clk_join(s, out, s->clk[s->base[r] + t], false, true);
}

/* Reports each remote write without entry evidence into chunks its owner also accesses, unless
 * that access is ordered before the end of the writer's launch (then the writer's next launch,
 * whose write this is, cannot start before the owner is done with them: an exit handshake). */
static void check_handshakes(Sim *s) {
    if (!s->ncand) return;
    int n = 0;
    Own *own = malloc((size_t)(s->nacc > 0 ? s->nacc : 1) * sizeof *own);
    int *end = clk_new(s);
    if (!own || !end) {
        free(own);
        free(end);
        s->oom = true;
        return;
    }
    for (int i = 0; i < s->nacc; i++) {
        const Access *a = &s->acc[i];
        if (a->r == a->owner) own[n++] = (Own){a->owner, a->buf, a->lo, a->hi, i};
    }
    qsort(own, (size_t)n, sizeof *own, cmp_own);
    int reported = 0, end_of = -1;
    for (int c = 0; c < s->ncand && reported < RACE_MAX_REPORTS; c++) {
        const Access *w = &s->acc[s->cand[c]];
        if (end_of != w->r) {
            end_clock(s, w->r, end);
            end_of = w->r;
        }
        /* first own access of (owner, buf) */
        int lo = 0, hi = n;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            const Own *o = &own[mid];
            if (o->owner < w->owner || (o->owner == w->owner && o->buf < w->buf)) lo = mid + 1;
            else hi = mid;
        }
        int hit = -1;
        for (int i = lo; i < n && own[i].owner == w->owner && own[i].buf == w->buf &&
                         own[i].lo < w->hi; i++) {
            const Access *a = &s->acc[own[i].id];
            if (own[i].hi > w->lo && end[s->T + a->gtb] < a->epoch) {
                hit = own[i].id;
                break;
            }
        }
        if (hit < 0) continue;
        PlanLoc lw = loc_of(s, w);
        bool dup = false;
        for (int k = 0; k < c && lw.line > 0 && !dup; k++) {
            PlanLoc lk = loc_of(s, &s->acc[s->cand[k]]);
            dup = lk.line == lw.line && lk.col == lw.col;
        }
        if (dup) continue;
        reported++;
        const Access *a = &s->acc[hit];
        char pw[96], pa[96], where[128];
        step_pos(s, w->r, w->t, w->step, pw, sizeof pw);
        step_pos(s, a->r, a->t, a->step, pa, sizeof pa);
        uint64_t l = w->lo > a->lo ? w->lo : a->lo, h = w->hi < a->hi ? w->hi : a->hi;
        place(w, l, h, where, sizeof where);
        diag_error(s->d, lw,
                   "no entry handshake: %s writes %s with no sign that rank %d has entered "
                   "this launch, and rank %d uses that data itself: rank %d's next launch can "
                   "overwrite it while rank %d's previous one still uses it (fix: rank %d "
                   "signals rank %d when it starts, relaxed is enough, and the writer waits for "
                   "that before writing)", pw, where, w->owner, w->owner, w->r, w->owner,
                   w->owner, w->r);
        diag_note(s->d, loc_of(s, a), "%s %s it here", pa, a->write ? "writes" : "reads");
    }
    free(own);
    free(end);
}


/* ---- driver ------------------------------------------------------------------------------------ */

static void free_sim(Sim *s) {
    const Plan *p = s->p;
    sim_free(&s->ls);
    if (s->rk)
        for (int r = 0; r < p->ngpus; r++) {
            Rank *rk = &s->rk[r];
            for (int k = 0; k < 2; k++) {
                if (rk->queue[k])
                    for (int c = 0; c < p->gpus[r].npeers[k]; c++) {
                        Queue *q = &rk->queue[k][c];
                        for (int i = 0; i < q->n; i++) free(q->q[i]);
                        free(q->q);
                        free(q->last);
                        free(q->wgtb);
                        free(q->wepoch);
                    }
                free(rk->queue[k]);
            }
            for (int b = 0; b < PLAN_MAX_BARRIERS; b++) {
                free(rk->bar[b].acc);
                free(rk->bar[b].rel);
            }
            if (rk->sem_clk)
                for (int i = 0; i < p->gpus[r].nsems; i++) free(rk->sem_clk[i]);
            free(rk->sem_clk);
            for (int i = 0; i < rk->npk; i++) free(rk->pk[i].clk);
            free(rk->pk);
            for (int b = 0; b < PLAN_BUF_COUNT; b++) {
                for (int i = 0; i < rk->maps[b].n; i++) free(rk->maps[b].s[i].rd);
                free(rk->maps[b].s);
            }
        }
    if (s->clk)
        for (int i = 0; i < s->T; i++) free(s->clk[i]);
    free(s->clk);
    free(s->rk);
    free(s->base);
    free(s->acc);
    free(s->cand);
}

static bool init_sim(Sim *s, const SimObserver *obs) {
    const Plan *p = s->p;
    s->base = calloc((size_t)p->ngpus + 1, sizeof(int));
    s->rk = calloc((size_t)(p->ngpus > 0 ? p->ngpus : 1), sizeof *s->rk);
    if (!s->base || !s->rk) return false;
    for (int r = 0; r < p->ngpus; r++) s->base[r + 1] = s->base[r] + p->gpus[r].ntbs;
    s->T = s->base[p->ngpus];
    if (s->T > RACE_MAX_TBS) return true;
    s->clk = calloc((size_t)(s->T > 0 ? s->T : 1), sizeof *s->clk);
    if (!s->clk) return false;
    for (int i = 0; i < s->T; i++)
        if (!(s->clk[i] = clk_new(s))) return false;
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        Rank *rk = &s->rk[r];
        for (int k = 0; k < 2; k++) {
            rk->queue[k] = calloc((size_t)(g->npeers[k] > 0 ? g->npeers[k] : 1), sizeof(Queue));
            if (!rk->queue[k]) return false;
        }
        rk->sem_clk = calloc((size_t)(g->nsems > 0 ? g->nsems : 1), sizeof(int *));
        if (!rk->sem_clk) return false;
        for (int k = 0; k < 2; k++)
            for (int c = 0; c < g->npeers[k]; c++) rk->queue[k][c].waiter = -1;
        for (int t = 0; t < g->ntbs; t++)
            for (int i = 0; i < g->tbs[t].nops; i++) {
                const PlanOp *op = &g->tbs[t].ops[i];
                int nin = op->kind == PLAN_OP_PIPELINE ? op->ninner : 1;
                for (int j = 0; j < nin; j++) {
                    const PlanOp *o = op->kind == PLAN_OP_PIPELINE ? &op->inner[j] : op;
                    int ch[PLAN_MAX_OP_CHANNELS];
                    PlanChanType ct;
                    int n = pass_sync_channels(g, &g->tbs[t], o, false, ch, &ct);
                    for (int m = 0; m < n; m++) {
                        Queue *q = &rk->queue[ct][ch[m]];
                        if (q->waiter >= 0 && q->waiter != t) q->multi = true;
                        q->waiter = t;
                    }
                }
            }
    }
    return sim_init(&s->ls, p, obs);
}

bool pass_check_races(const Plan *p, Diag *d) {
    Sim s = {.p = p, .d = d};
    const SimObserver obs = {
        .ctx = &s, .wait = on_wait, .barrier_arrive = on_barrier_arrive,
        .barrier_open = on_barrier_open, .barrier_leave = on_barrier_leave,
        .sem_acquire = on_sem_acquire, .packet_read = on_packet_read, .op = on_op,
        .signal = on_signal, .sem_release = on_sem_release, .packet_write = on_packet_write,
        .stop = on_stop,
    };
    int errors = diag_errors(d);
    if (!init_sim(&s, &obs)) {
        free_sim(&s);
        diag_error(d, (PlanLoc){0, 0}, "out of memory checking the plan for races");
        return false;
    }
    if (s.T > RACE_MAX_TBS) {
        diag_warning(d, (PlanLoc){0, 0}, "the plan has %d thread blocks in all, more than %d: it "
                     "was not checked for data races", s.T, RACE_MAX_TBS);
        free_sim(&s);
        return true;
    }
    /* the deadlock pass's forward schedule: ranks and TBs in order, each as far as it gets */
    (void)sim_run(&s.ls, false);
    if (!s.oom && !s.ls.oom) check_handshakes(&s);
    bool oom = s.oom || s.ls.oom;
    if (s.more > 0 && !oom)
        diag_note(d, (PlanLoc){0, 0}, "%d more pairs of racing accesses not shown", s.more);
    free_sim(&s);
    if (oom) {
        diag_error(d, (PlanLoc){0, 0}, "out of memory checking the plan for races");
        return false;
    }
    return diag_errors(d) == errors;
}

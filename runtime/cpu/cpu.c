/*
 * cpu.c - the CPU reference backend: every thread block of every rank is one host thread, the
 * ranks' buffers are host memory, and each op of spec §5 is carried out with its intended
 * meaning (the operator given at execution, a real get, fused puts from each source's own
 * buffer, emulated LL packets and switch channels). Cross-thread ordering uses C11 atomics
 * (release on signal/packet/semaphore/barrier publication, acquire on the consuming side), so
 * a correct plan runs race-free under ThreadSanitizer. A watchdog turns a stall into
 * MSCCLRT_ERR_TIMEOUT naming the blocked rank, thread block, op and what it waits for.
 */
#include "cpu/cpu.h"
#include "dtype/dtype.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CPU_MAGIC 0x43505543u           /* "CPUC" */
#define CPU_BLOCK 4096                  /* bytes per reduction/packet step */
#define CPU_MAX_RANKS 4096

/* One side of a paired connection (spec §6.2): signals from the peer land in `inbound`;
 * `expected` counts this side's waits. Both only grow. */
typedef struct {
    _Atomic uint64_t inbound;
    _Atomic uint64_t expected;
} CpuConn;

typedef struct {
    int peer, occ;                      /* GPU-level channel -> (peer, k-th occurrence) */
} CpuChan;

typedef struct {
    uint8_t *scratch;                   /* zeroed at creation; both halves when doubled */
    uint64_t scratch_bytes;             /* whole allocation (spec §3.5) */
    uint64_t chunk;                     /* S/C of this rank */
    uint64_t scs;                       /* reuse_resources scratch chunk (§3.5), 0 if unused */
    _Atomic int *sems;                  /* counting semaphores, set once to init_value */
    int nsems;
    int nconn[2];
    CpuConn *conns[2];                  /* memory, port: per peer, max(cnt(r->p), cnt(p->r)) */
    int *conn_base[2];                  /* [peer] -> first connection to that peer */
    CpuChan *chans[2];                  /* GPU-level channel -> (peer, occurrence) */
} CpuRankCtx;

typedef struct CpuCtx {
    struct CpuCtx *next;
    const Plan *plan;                   /* key only: never dereferenced after creation */
    uint64_t fingerprint;
    void **send, **recv;                /* [nranks] copies of the key's pointers */
    size_t in_bytes, out_bytes;
    CpuRankCtx *ranks;
} CpuCtx;

typedef struct {
    _Atomic uint32_t count;
    _Atomic uint32_t gen;
} CpuBarrier;

struct mscclrt_cpu_comm {
    uint32_t magic;
    int nranks;
    uint32_t flag;                      /* LL flag of the last call (§4.3), per comm */
    long long timeout_ms;
    CpuBarrier (*barriers)[PLAN_MAX_BARRIERS];  /* [nranks][16], persistent (§6.7) */
    CpuCtx *ctxs;
    int nctx;
    unsigned long long seed;            /* 0: a thread per rank; else the serial scheduler's seed */
    long long schedules;                /* MSCCLRT_CPU_SCHEDULES: runs of each call to compare */
    unsigned long long calls;           /* calls so far: call k is scheduled from (seed, k) */
};

/* ---- one call ------------------------------------------------------------------------------ */
typedef struct {
    uint8_t *base[PLAN_BUF_COUNT];      /* i, o, s (s: this launch's half) */
    uint64_t size[PLAN_BUF_COUNT];
} CpuBufs;

typedef struct Exec Exec;

/* Op status: ST_FAILED is 0 (false) and ST_DONE 1 (true), so bool helpers compose. */
enum { ST_FAILED = 0, ST_DONE = 1, ST_BLOCKED = 2 };

/* One thread block: where it is and the state of a wait it is in the middle of. */
typedef struct {
    Exec *ex;
    int rank, tb;
    int op_idx, inner_idx;              /* top-level op; inner op of a pipeline or -1 */
    uint64_t iter;                      /* pipeline iteration */
    PlanOpKind kind;
    bool done;
    int sub;                            /* channel/semaphore position inside a multi-id op */
    bool armed;                         /* wait: `need` taken; barrier: arrived at `gen` */
    uint64_t need;
    uint32_t gen;
    bool last_blocked;                  /* the last step was blocked */
    bool describe;                      /* set once stopped: blocked paths record `why` */
    mscclrt_result res;                 /* written by the rank thread, read after join */
    bool blocked;                       /* stopped while waiting (timeout) */
    char why[640];
} TbRun;

/* One rank: a host thread that steps its thread blocks round-robin, one op per step, so
 * the blocks of a rank advance together as on a GPU and each makes progress on its own. */
typedef struct {
    Exec *ex;
    int rank;
    TbRun *tbs;
    int ntbs;
    _Atomic uint64_t progress;          /* read by the watchdog */
    pthread_t th;
    bool started;
} RankRun;

struct Exec {
    mscclrt_cpu_comm *comm;
    const Plan *plan;
    CpuCtx *ctx;
    mscclrt_dtype dt;
    size_t esz;
    mscclrt_redop op;
    unsigned payload;                   /* data bytes per packet: 8 (LL16) or 4 (LL8) */
    bool ll8;
    uint32_t flag;
    CpuBufs *bufs;                      /* [nranks] */
    _Atomic int abort;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running;
};

/* An op entry resolved to a buffer (spec §3.4): the owner's buffer `buf` at byte `off`, or a
 * switch channel (all members' `buf`). */
typedef struct {
    bool sw;
    int owner;
    PlanBuf buf;
    int sw_gpu;                         /* GPU-level switch index when sw */
    uint64_t off, sz;
} Ent;

/* ---- failure and waiting -------------------------------------------------------------------- */
static int tb_where(TbRun *t, char *buf, size_t n) {
    if (t->inner_idx >= 0)
        return snprintf(buf, n, "rank %d tb %d op %d.%d (%s): ", t->rank, t->tb, t->op_idx,
                        t->inner_idx, plan_op_name(t->kind));
    return snprintf(buf, n, "rank %d tb %d op %d (%s): ", t->rank, t->tb, t->op_idx,
                    plan_op_name(t->kind));
}

static bool tb_vrecord(TbRun *t, mscclrt_result code, bool blocked, const char *fmt, va_list ap) {
    int k = tb_where(t, t->why, sizeof t->why);
    if (k > 0 && (size_t)k < sizeof t->why) vsnprintf(t->why + k, sizeof t->why - (size_t)k, fmt, ap);
    t->res = code;
    t->blocked = blocked;
    atomic_store_explicit(&t->ex->abort, 1, memory_order_release);
    return false;
}

/* Records a plan/usage error of this thread block and stops the run. Returns false. */
static bool tb_fail(TbRun *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool tb_fail(TbRun *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tb_vrecord(t, MSCCLRT_ERR_PLAN, false, fmt, ap);
    va_end(ap);
    return false;
}

/* The op cannot proceed yet. Once the run is stopped (describe), records what it waits
 * for. Returns ST_BLOCKED. */
static int tb_block(TbRun *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int tb_block(TbRun *t, const char *fmt, ...) {
    if (t->describe) {
        va_list ap;
        va_start(ap, fmt);
        tb_vrecord(t, MSCCLRT_ERR_TIMEOUT, true, fmt, ap);
        va_end(ap);
    }
    return ST_BLOCKED;
}

/* ---- entries and spans ------------------------------------------------------------------------ */
static uint64_t split(uint64_t size, uint64_t k, uint64_t n, uint64_t a) {
    uint64_t units = size / a;
    return a * (k * (units / n) + (k < units % n ? k : units % n));
}

static bool ent_resolve(TbRun *t, const PlanOp *op, const PlanRef *r, const char *side, int idx,
                        Ent *e) {
    const Exec *ex = t->ex;
    const PlanGpu *g = &ex->plan->gpus[t->rank];
    const PlanTb *tb = &g->tbs[t->tb];
    const CpuRankCtx *rc = &ex->ctx->ranks[t->rank];
    memset(e, 0, sizeof *e);
    e->owner = t->rank;
    switch (r->kind) {
    case PLAN_REF_LOCAL:
        if ((unsigned)r->type >= PLAN_BUF_COUNT)
            return tb_fail(t, "%s entry %d: bad buffer type %d", side, idx, (int)r->type);
        e->buf = r->type;
        break;
    case PLAN_REF_REMOTE: {
        int ty = op->chan_type;
        if (ty != PLAN_CHAN_MEMORY && ty != PLAN_CHAN_PORT)
            return tb_fail(t, "%s entry %d: buffer_id needs channel_type memory or port, not %s",
                           side, idx, plan_chan_name(op->chan_type));
        if (r->id < 0 || r->id >= tb->nremote[ty])
            return tb_fail(t, "%s entry %d: buffer_id %d out of range [0, %d) of the %s "
                           "remote_buffer_refs", side, idx, r->id, tb->nremote[ty],
                           plan_chan_name(op->chan_type));
        int gid = tb->remote[ty][r->id];
        if (gid < 0 || gid >= g->nremotes)
            return tb_fail(t, "%s entry %d: remote buffer %d out of range [0, %d)", side, idx, gid,
                           g->nremotes);
        e->owner = g->remotes[gid].rank;
        e->buf = g->remotes[gid].type;
        if (e->owner < 0 || e->owner >= ex->comm->nranks)
            return tb_fail(t, "%s entry %d: remote buffer %d names rank %d of %d", side, idx, gid,
                           e->owner, ex->comm->nranks);
        break;
    }
    case PLAN_REF_SWITCH: {
        if (r->id < 0 || r->id >= tb->nchan[PLAN_CHAN_SWITCH])
            return tb_fail(t, "%s entry %d: switch_channel_id %d out of range [0, %d)", side, idx,
                           r->id, tb->nchan[PLAN_CHAN_SWITCH]);
        int gs = tb->chan[PLAN_CHAN_SWITCH][r->id];
        if (gs < 0 || gs >= g->nswitch)
            return tb_fail(t, "%s entry %d: switch channel %d out of range [0, %d)", side, idx, gs,
                           g->nswitch);
        e->sw = true;
        e->sw_gpu = gs;
        e->buf = g->switches[gs].buf;
        break;
    }
    }
    uint64_t chunk = rc->chunk;
    e->off = (uint64_t)r->index * chunk;
    if (rc->scs && e->buf == PLAN_BUF_SCRATCH && rc->scs < chunk) e->off = (uint64_t)r->index * rc->scs;
    e->sz = (uint64_t)r->size * chunk;
    if (op->tbg_size > 0) {
        uint64_t a = ex->plan->alignment ? ex->plan->alignment : 1;
        uint64_t lo = split(e->sz, (uint64_t)op->tbg_id, (uint64_t)op->tbg_size, a);
        uint64_t hi = split(e->sz, (uint64_t)op->tbg_id + 1, (uint64_t)op->tbg_size, a);
        e->off += lo;
        e->sz = hi - lo;
    }
    return true;
}

/* Pipeline offset of an entry (spec §5.0): scratch entries of reuse plans wrap. */
static uint64_t ent_pipe_off(const TbRun *t, const Ent *e, uint64_t offset) {
    uint64_t scs = t->ex->ctx->ranks[t->rank].scs;
    if (scs && e->buf == PLAN_BUF_SCRATCH) return offset % scs;
    return offset;
}

/* Bytes an op processes at pipeline `offset` (spec §5.0), 0 when the entry is used up. */
static uint64_t pipe_bytes(uint64_t size, uint64_t offset, uint64_t unit) {
    if (offset >= size) return 0;
    return size - offset < unit ? size - offset : unit;
}

/* Host pointer to bytes [off, off+n) of `owner`'s buffer b, checked against its size. */
static uint8_t *span(TbRun *t, int owner, PlanBuf b, uint64_t off, uint64_t n, const char *side,
                     int idx) {
    const CpuBufs *cb = &t->ex->bufs[owner];
    if (off > cb->size[b] || n > cb->size[b] - off)
        return tb_fail(t, "%s entry %d addresses bytes [%llu, %llu) of rank %d's %s buffer, which "
                       "has %llu bytes%s", side, idx, (unsigned long long)off,
                       (unsigned long long)(off + n), owner, plan_buf_long_name(b),
                       (unsigned long long)cb->size[b],
                       b == PLAN_BUF_SCRATCH ? " (this launch's half)" : ""),
               NULL;
    return cb->base[b] + off;
}

/* Packet-space span of an entry: 2x its data offset and size (spec §4.1), 8-byte aligned. */
static uint8_t *pkt_span(TbRun *t, int owner, PlanBuf b, uint64_t off, uint64_t n,
                         const char *side, int idx) {
    uint8_t *p = span(t, owner, b, 2 * off, 2 * n, side, idx);
    if (p && ((uintptr_t)p & 7))
        return tb_fail(t, "%s entry %d: packets at byte %llu of rank %d's %s buffer are not "
                       "8-byte aligned", side, idx, (unsigned long long)(2 * off), owner,
                       plan_buf_long_name(b)), NULL;
    return p;
}

/* ---- LL packets (spec §4): LL16 = [d0,flag,d1,flag], LL8 = [d,flag]; 64-bit atomic words ---- */
static void pk_write(const Exec *ex, uint8_t *pkt, const uint8_t *data, uint64_t n) {
    _Atomic uint64_t *w = (_Atomic uint64_t *)(void *)pkt;
    uint64_t f = (uint64_t)ex->flag << 32;
    for (uint64_t k = 0; k < n / 4; k++) {
        uint32_t d;
        memcpy(&d, data + 4 * k, 4);
        atomic_store_explicit(&w[k], (uint64_t)d | f, memory_order_release);
    }
}

/* Whether every packet carrying data bytes [0, n) at pkt has this launch's flag
 * (owner/buf/off only name the place in messages). */
static int pk_ready(TbRun *t, const uint8_t *pkt, uint64_t n, int owner, PlanBuf b,
                    uint64_t pkt_off) {
    const Exec *ex = t->ex;
    _Atomic uint64_t *w = (_Atomic uint64_t *)(void *)pkt;
    for (uint64_t k = 0; k < n / 4; k++) {
        uint64_t v = atomic_load_explicit(&w[k], memory_order_acquire);
        if ((uint32_t)(v >> 32) != ex->flag)
            return tb_block(t, "waiting for %s packet %llu at byte %llu of rank %d's %s buffer "
                            "(flag %u, found %u)", ex->ll8 ? "LL8" : "LL16",
                            (unsigned long long)(k * 4 / ex->payload),
                            (unsigned long long)(pkt_off + 8 * (k - k % (ex->payload / 4))),
                            owner, plan_buf_long_name(b), ex->flag, (uint32_t)(v >> 32));
    }
    return ST_DONE;
}

/* The data of packets already known to be ready (pk_ready). */
static void pk_take(const uint8_t *pkt, uint8_t *data, uint64_t n) {
    _Atomic uint64_t *w = (_Atomic uint64_t *)(void *)pkt;
    for (uint64_t k = 0; k < n / 4; k++) {
        uint32_t d = (uint32_t)atomic_load_explicit(&w[k], memory_order_acquire);
        memcpy(data + 4 * k, &d, 4);
    }
}

/* ---- signals, flush, semaphores, barriers --------------------------------------------------- */
static CpuConn *conn_of(const CpuRankCtx *rc, int ty, int peer, int occ) {
    return &rc->conns[ty][rc->conn_base[ty][peer] + occ];
}

static bool chan_lookup(TbRun *t, const PlanOp *op, int k, int *gch, CpuChan *ch) {
    const PlanGpu *g = &t->ex->plan->gpus[t->rank];
    const PlanTb *tb = &g->tbs[t->tb];
    int ty = op->chan_type;
    if (ty != PLAN_CHAN_MEMORY && ty != PLAN_CHAN_PORT)
        return tb_fail(t, "needs channel_type memory or port, not %s", plan_chan_name(op->chan_type));
    int local = op->chan_ids[k];
    if (local < 0 || local >= tb->nchan[ty])
        return tb_fail(t, "channel_ids[%d] = %d out of range [0, %d) of the thread block's %s "
                       "channels", k, local, tb->nchan[ty], plan_chan_name(op->chan_type));
    *gch = tb->chan[ty][local];
    if (*gch < 0 || *gch >= g->npeers[ty])
        return tb_fail(t, "%s channel %d out of range [0, %d)", plan_chan_name(op->chan_type), *gch,
                       g->npeers[ty]);
    *ch = t->ex->ctx->ranks[t->rank].chans[ty][*gch];
    return true;
}

/* Signal channel_ids[k]: one more on the paired connection of the peer (release: the data
 * this thread wrote before is visible to the peer's matching wait). */
static bool do_signal(TbRun *t, const PlanOp *op, int k) {
    int gch;
    CpuChan ch;
    if (!chan_lookup(t, op, k, &gch, &ch)) return false;
    CpuConn *c = conn_of(&t->ex->ctx->ranks[ch.peer], op->chan_type, t->rank, ch.occ);
    atomic_fetch_add_explicit(&c->inbound, 1, memory_order_release);
    return true;
}

/* Wait on channel_ids[k]: take the next count once, then poll (acquire) until it arrived. */
static int do_wait(TbRun *t, const PlanOp *op, int k) {
    int gch;
    CpuChan ch;
    if (!chan_lookup(t, op, k, &gch, &ch)) return ST_FAILED;
    CpuConn *c = conn_of(&t->ex->ctx->ranks[t->rank], op->chan_type, ch.peer, ch.occ);
    if (!t->armed) {
        t->need = atomic_fetch_add_explicit(&c->expected, 1, memory_order_relaxed) + 1;
        t->armed = true;
    }
    uint64_t got = atomic_load_explicit(&c->inbound, memory_order_acquire);
    if (got >= t->need) {
        t->armed = false;
        return ST_DONE;
    }
    return tb_block(t, "waiting for a signal on %s channel %d from rank %d (received %llu, need "
                    "%llu)", plan_chan_name(op->chan_type), gch, ch.peer, (unsigned long long)got,
                    (unsigned long long)t->need);
}

/* A counting semaphore: take one when the value is positive. */
static int do_sem_acquire(TbRun *t, int id) {
    _Atomic int *s = &t->ex->ctx->ranks[t->rank].sems[id];
    int v = atomic_load_explicit(s, memory_order_relaxed);
    while (v > 0)
        if (atomic_compare_exchange_weak_explicit(s, &v, v - 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return ST_DONE;
    return tb_block(t, "waiting on semaphore %d (value %d, needs a release)", id, v);
}

/* Grid-subset barrier (spec §5.2) on the rank's persistent barrier object: the last of
 * num_threadblocks arrivals opens the next generation. */
static int do_barrier(TbRun *t, const PlanOp *op) {
    if (op->barrier_id < 0 || op->barrier_id >= PLAN_MAX_BARRIERS)
        return tb_fail(t, "barrier_id %d out of range [0, %d)", op->barrier_id, PLAN_MAX_BARRIERS);
    int n = op->num_threadblocks;
    if (n <= 1) return ST_DONE;
    CpuBarrier *b = &t->ex->comm->barriers[t->rank][op->barrier_id];
    if (!t->armed) {
        uint32_t gen = atomic_load_explicit(&b->gen, memory_order_acquire);
        uint32_t arrived = atomic_fetch_add_explicit(&b->count, 1, memory_order_acq_rel) + 1;
        if (arrived >= (uint32_t)n) {
            atomic_store_explicit(&b->count, 0, memory_order_relaxed);
            atomic_fetch_add_explicit(&b->gen, 1, memory_order_release);
            return ST_DONE;
        }
        t->armed = true;
        t->gen = gen;
    }
    if (atomic_load_explicit(&b->gen, memory_order_acquire) != t->gen) {
        t->armed = false;
        return ST_DONE;
    }
    return tb_block(t, "waiting at barrier %d for %d thread blocks (%u arrived)", op->barrier_id,
                    n, atomic_load_explicit(&b->count, memory_order_relaxed));
}

/* ---- data movement ------------------------------------------------------------------------------ */
/* Members of the switch channel of e (validated at context creation). */
static const PlanSwitch *ent_switch(const TbRun *t, const Ent *e) {
    return &t->ex->plan->gpus[t->rank].switches[e->sw_gpu];
}

static int op_copy_like(TbRun *t, const PlanOp *op, uint64_t offset, uint64_t unit) {
    /* copy: src[0] -> dst[0]; put/pws/pwsf: src[m] -> dst[m]; get: src[m] (remote) -> dst[m] */
    int n = op->kind == PLAN_OP_COPY ? 1 : op->nsrc;
    if (op->ndst < n)
        return tb_fail(t, "has %d src_buff entries but %d dst_buff entries", op->nsrc, op->ndst);
    if (n < 1) return tb_fail(t, "has no src_buff entry");
    for (int m = 0; m < n; m++) {
        Ent s, d;
        if (!ent_resolve(t, op, &op->src[m], "src", m, &s) ||
            !ent_resolve(t, op, &op->dst[m], "dst", m, &d))
            return false;
        if (s.sw || d.sw) return tb_fail(t, "switch entries are only valid in glres/gstore");
        uint64_t sz = op->kind == PLAN_OP_COPY ? s.sz : op->kind == PLAN_OP_GET ? s.sz : d.sz;
        uint64_t nb = pipe_bytes(sz, offset, unit);
        if (!nb) continue;
        uint8_t *sp = span(t, s.owner, s.buf, s.off + ent_pipe_off(t, &s, offset), nb, "src", m);
        uint8_t *dp = sp ? span(t, d.owner, d.buf, d.off + ent_pipe_off(t, &d, offset), nb, "dst", m)
                         : NULL;
        if (!dp) return false;
        memmove(dp, sp, nb);
        if ((op->kind == PLAN_OP_PWS || op->kind == PLAN_OP_PWSF) && m < op->nchan &&
            !do_signal(t, op, m))
            return false;
    }
    return true;
}

/* Every source and destination entry of a combining op (at least one of each). */
static bool ent_resolve_all(TbRun *t, const PlanOp *op, Ent *src, Ent *dst) {
    if (op->nsrc < 1 || op->ndst < 1) return tb_fail(t, "needs a source and a destination");
    for (int m = 0; m < op->nsrc; m++)
        if (!ent_resolve(t, op, &op->src[m], "src", m, &src[m])) return false;
    for (int m = 0; m < op->ndst; m++)
        if (!ent_resolve(t, op, &op->dst[m], "dst", m, &dst[m])) return false;
    return true;
}

/* re, res, rre, rres: acc = src0 (op) src1 (op) ...; acc to every dst (spec §5.3-5.4). */
static int op_reduce(TbRun *t, const PlanOp *op, uint64_t offset, uint64_t unit) {
    const Exec *ex = t->ex;
    Ent src[PLAN_MAX_OP_ENTRIES], dst[PLAN_MAX_OP_ENTRIES];
    uint8_t *sp[PLAN_MAX_OP_ENTRIES], *dp[PLAN_MAX_OP_ENTRIES];
    if (!ent_resolve_all(t, op, src, dst)) return false;
    uint64_t nb = pipe_bytes(src[0].sz, offset, unit);
    if (!nb) return true;
    if (nb % ex->esz)
        return tb_fail(t, "reduces %llu bytes, not a multiple of the %zu-byte %s element",
                       (unsigned long long)nb, ex->esz, dtype_name(ex->dt));
    for (int m = 0; m < op->nsrc; m++)
        if (src[m].sw || !(sp[m] = span(t, src[m].owner, src[m].buf,
                                        src[m].off + ent_pipe_off(t, &src[m], offset), nb, "src", m)))
            return src[m].sw ? tb_fail(t, "switch entries are only valid in glres/gstore") : false;
    for (int m = 0; m < op->ndst; m++)
        if (dst[m].sw || !(dp[m] = span(t, dst[m].owner, dst[m].buf,
                                        dst[m].off + ent_pipe_off(t, &dst[m], offset), nb, "dst", m)))
            return dst[m].sw ? tb_fail(t, "switch entries are only valid in glres/gstore") : false;
    uint8_t acc[CPU_BLOCK];
    for (uint64_t pos = 0; pos < nb; pos += CPU_BLOCK) {
        uint64_t b = nb - pos < CPU_BLOCK ? nb - pos : CPU_BLOCK;
        memcpy(acc, sp[0] + pos, b);
        for (int m = 1; m < op->nsrc; m++) dtype_reduce(ex->dt, ex->op, acc, sp[m] + pos, b / ex->esz);
        for (int m = 0; m < op->ndst; m++) memcpy(dp[m] + pos, acc, b);
    }
    return true;
}

/* Packet form of a local or remote (non-switch) entry. */
static uint8_t *ent_pkt(TbRun *t, const Ent *e, uint64_t n, const char *side, int idx) {
    if (e->sw) return tb_fail(t, "switch entries are only valid in glres/gstore/gstorepkt"), NULL;
    return pkt_span(t, e->owner, e->buf, e->off, n, side, idx);
}

static uint8_t *ent_data(TbRun *t, const Ent *e, uint64_t n, const char *side, int idx) {
    if (e->sw) return tb_fail(t, "switch entries are only valid in glres/gstore/gstorepkt"), NULL;
    return span(t, e->owner, e->buf, e->off, n, side, idx);
}

static bool pkt_size_ok(TbRun *t, uint64_t n, uint64_t gran) {
    if (n % gran == 0) return true;
    return tb_fail(t, "moves %llu bytes as %s packets, not a multiple of %llu bytes",
                   (unsigned long long)n, t->ex->ll8 ? "LL8" : "LL16", (unsigned long long)gran);
}

/* cpkt, upkt, ppkt (memory: data -> packets; port: packets copied as they are), rppkt.
 * Packet ops ignore pipeline offset/unit (spec §5.0). */
static int op_packets(TbRun *t, const PlanOp *op) {
    const Exec *ex = t->ex;
    if (op->nsrc < 1 || op->ndst < 1) return tb_fail(t, "needs a source and a destination");
    uint8_t buf[CPU_BLOCK];
    switch (op->kind) {
    case PLAN_OP_CPKT: case PLAN_OP_UPKT: {
        Ent s, d;
        if (!ent_resolve(t, op, &op->src[0], "src", 0, &s) ||
            !ent_resolve(t, op, &op->dst[0], "dst", 0, &d))
            return false;
        uint64_t n = s.sz;
        if (!pkt_size_ok(t, n, ex->payload)) return false;
        bool unpack = op->kind == PLAN_OP_UPKT;
        uint8_t *sp = unpack ? ent_pkt(t, &s, n, "src", 0) : ent_data(t, &s, n, "src", 0);
        uint8_t *dp = !sp ? NULL : unpack ? ent_data(t, &d, n, "dst", 0) : ent_pkt(t, &d, n, "dst", 0);
        if (!dp) return false;
        if (!unpack) {
            pk_write(ex, dp, sp, n);
            return true;
        }
        int st = pk_ready(t, sp, n, s.owner, s.buf, 2 * s.off);
        if (st != ST_DONE) return st;
        for (uint64_t pos = 0; pos < n; pos += CPU_BLOCK) {
            uint64_t b = n - pos < CPU_BLOCK ? n - pos : CPU_BLOCK;
            pk_take(sp + 2 * pos, buf, b);
            memcpy(dp + pos, buf, b);
        }
        return true;
    }
    case PLAN_OP_PPKT:
        for (int m = 0; m < op->nsrc && m < op->ndst; m++) {
            Ent s, d;
            if (!ent_resolve(t, op, &op->src[m], "src", m, &s) ||
                !ent_resolve(t, op, &op->dst[m], "dst", m, &d))
                return false;
            uint64_t n = s.sz;
            if (!pkt_size_ok(t, n, ex->payload)) return false;
            uint8_t *dp = ent_pkt(t, &d, n, "dst", m);
            if (!dp) return false;
            if (op->chan_type == PLAN_CHAN_PORT) {
                /* port ppkt: the source is already in packet form (spec §5.5); copy it as is */
                uint8_t *sp = ent_pkt(t, &s, n, "src", m);
                if (!sp) return false;
                _Atomic uint64_t *sw = (_Atomic uint64_t *)(void *)sp, *dw = (_Atomic uint64_t *)(void *)dp;
                for (uint64_t k = 0; k < 2 * n / 8; k++)
                    atomic_store_explicit(&dw[k], atomic_load_explicit(&sw[k], memory_order_acquire),
                                          memory_order_release);
            } else {
                uint8_t *sp = ent_data(t, &s, n, "src", m);
                if (!sp) return false;
                pk_write(ex, dp, sp, n);
            }
        }
        return true;
    case PLAN_OP_RPPKT: {
        Ent s, d[PLAN_MAX_OP_ENTRIES];
        uint8_t *dp[PLAN_MAX_OP_ENTRIES];
        if (!ent_resolve(t, op, &op->src[0], "src", 0, &s)) return false;
        uint64_t n = s.sz;
        if (!pkt_size_ok(t, n, ex->payload)) return false;
        uint8_t *sp = ent_pkt(t, &s, n, "src", 0);
        if (!sp) return false;
        for (int m = 0; m < op->ndst; m++)
            if (!ent_resolve(t, op, &op->dst[m], "dst", m, &d[m]) ||
                !(dp[m] = ent_pkt(t, &d[m], n, "dst", m)))
                return false;
        int st = pk_ready(t, sp, n, s.owner, s.buf, 2 * s.off);
        if (st != ST_DONE) return st;
        for (uint64_t pos = 0; pos < n; pos += CPU_BLOCK) {
            uint64_t b = n - pos < CPU_BLOCK ? n - pos : CPU_BLOCK;
            pk_take(sp + 2 * pos, buf, b);
            for (int m = 0; m < op->ndst; m++) pk_write(ex, dp[m] + 2 * pos, buf, b);
        }
        return true;
    }
    default:
        return tb_fail(t, "internal: not a packet copy op");
    }
}

/* repkt, respkt, recpkt, recspkt: acc = p1 (op) p2 ... (op) src0, in MSCCL++'s operand order
 * (packet sources first, the local value last); plain store to dst[0], packets to the rest. */
static int op_reduce_packets(TbRun *t, const PlanOp *op) {
    const Exec *ex = t->ex;
    Ent src[PLAN_MAX_OP_ENTRIES], dst[PLAN_MAX_OP_ENTRIES];
    uint8_t *sp[PLAN_MAX_OP_ENTRIES], *dp[PLAN_MAX_OP_ENTRIES];
    if (!ent_resolve_all(t, op, src, dst)) return false;
    uint64_t n = src[0].sz;
    uint64_t gran = ex->payload > ex->esz ? ex->payload : ex->esz;
    if (!pkt_size_ok(t, n, gran)) return false;
    if (!(sp[0] = ent_data(t, &src[0], n, "src", 0))) return false;
    for (int m = 1; m < op->nsrc; m++)
        if (!(sp[m] = ent_pkt(t, &src[m], n, "src", m))) return false;
    if (!(dp[0] = ent_data(t, &dst[0], n, "dst", 0))) return false;
    for (int m = 1; m < op->ndst; m++)
        if (!(dp[m] = ent_pkt(t, &dst[m], n, "dst", m))) return false;
    for (int m = 1; m < op->nsrc; m++) {
        int st = pk_ready(t, sp[m], n, src[m].owner, src[m].buf, 2 * src[m].off);
        if (st != ST_DONE) return st;
    }
    uint8_t acc[CPU_BLOCK], tmp[CPU_BLOCK];
    for (uint64_t pos = 0; pos < n; pos += CPU_BLOCK) {
        uint64_t b = n - pos < CPU_BLOCK ? n - pos : CPU_BLOCK;
        if (op->nsrc > 1) {
            pk_take(sp[1] + 2 * pos, acc, b);
            for (int m = 2; m < op->nsrc; m++) {
                pk_take(sp[m] + 2 * pos, tmp, b);
                dtype_reduce(ex->dt, ex->op, acc, tmp, b / ex->esz);
            }
            dtype_reduce(ex->dt, ex->op, acc, sp[0] + pos, b / ex->esz);
        } else {
            memcpy(acc, sp[0] + pos, b);
        }
        memcpy(dp[0] + pos, acc, b);
        for (int m = 1; m < op->ndst; m++) pk_write(ex, dp[m] + 2 * pos, acc, b);
    }
    return true;
}

/* Switch emulation: glres reduces over every member's buffer and stores to every member of
 * the destination group; gstore and gstorepkt store to every member (the sender included). */
static int op_switch(TbRun *t, const PlanOp *op, uint64_t offset, uint64_t unit) {
    const Exec *ex = t->ex;
    Ent s, d;
    if (op->nsrc < 1 || op->ndst < 1) return tb_fail(t, "needs a source and a destination");
    if (!ent_resolve(t, op, &op->src[0], "src", 0, &s) ||
        !ent_resolve(t, op, &op->dst[0], "dst", 0, &d))
        return false;
    if (!d.sw) return tb_fail(t, "dst_buff[0] must be a switch_channel_id entry");
    const PlanSwitch *dg = ent_switch(t, &d);
    uint8_t acc[CPU_BLOCK], *dp[64];
    if (dg->nranks > 64) return tb_fail(t, "switch group of %d ranks (at most 64)", dg->nranks);
    if (op->kind == PLAN_OP_GSTOREPKT) {
        uint64_t n = s.sz;
        if (s.sw) return tb_fail(t, "src_buff[0] must be a local entry");
        if (!pkt_size_ok(t, n, ex->payload)) return false;
        uint8_t *sp = ent_pkt(t, &s, n, "src", 0);
        if (!sp) return false;
        for (int m = 0; m < dg->nranks; m++)
            if (!(dp[m] = pkt_span(t, dg->ranks[m], d.buf, d.off, n, "dst", 0))) return false;
        int st = pk_ready(t, sp, n, s.owner, s.buf, 2 * s.off);
        if (st != ST_DONE) return st;
        for (uint64_t pos = 0; pos < n; pos += CPU_BLOCK) {
            uint64_t b = n - pos < CPU_BLOCK ? n - pos : CPU_BLOCK;
            pk_take(sp + 2 * pos, acc, b);
            for (int m = 0; m < dg->nranks; m++) pk_write(ex, dp[m] + 2 * pos, acc, b);
        }
        return true;
    }
    uint64_t nb = pipe_bytes(s.sz, offset, unit);
    if (!nb) return true;
    uint64_t doff = d.off + ent_pipe_off(t, &d, offset), soff = s.off + ent_pipe_off(t, &s, offset);
    for (int m = 0; m < dg->nranks; m++)
        if (!(dp[m] = span(t, dg->ranks[m], d.buf, doff, nb, "dst", 0))) return false;
    if (op->kind == PLAN_OP_GSTORE) {
        if (s.sw) return tb_fail(t, "src_buff[0] must be a local entry");
        uint8_t *sp = span(t, s.owner, s.buf, soff, nb, "src", 0);
        if (!sp) return false;
        for (int m = 0; m < dg->nranks; m++)
            if (dp[m] != sp) memmove(dp[m], sp, nb);
        return true;
    }
    /* glres */
    if (!s.sw) return tb_fail(t, "src_buff[0] must be a switch_channel_id entry");
    if (nb % ex->esz)
        return tb_fail(t, "reduces %llu bytes, not a multiple of the %zu-byte %s element",
                       (unsigned long long)nb, ex->esz, dtype_name(ex->dt));
    const PlanSwitch *sg = ent_switch(t, &s);
    uint8_t *sp[64];
    if (sg->nranks > 64 || sg->nranks < 1)
        return tb_fail(t, "switch group of %d ranks (1 to 64)", sg->nranks);
    for (int m = 0; m < sg->nranks; m++)
        if (!(sp[m] = span(t, sg->ranks[m], s.buf, soff, nb, "src", 0))) return false;
    for (uint64_t pos = 0; pos < nb; pos += CPU_BLOCK) {
        uint64_t b = nb - pos < CPU_BLOCK ? nb - pos : CPU_BLOCK;
        memcpy(acc, sp[0] + pos, b);
        for (int m = 1; m < sg->nranks; m++) dtype_reduce(ex->dt, ex->op, acc, sp[m] + pos, b / ex->esz);
        for (int m = 0; m < dg->nranks; m++) memcpy(dp[m] + pos, acc, b);
    }
    return true;
}

/* Runs op, or reports ST_BLOCKED without side effects beyond the recorded wait state
 * (t->sub, t->armed) so that the next step resumes it. */
static int op_run(TbRun *t, const PlanOp *op, uint64_t offset, uint64_t unit) {
    t->kind = op->kind;
    int st = ST_DONE;
    CpuRankCtx *rc = &t->ex->ctx->ranks[t->rank];
    switch (op->kind) {
    case PLAN_OP_NOP:
        break;
    case PLAN_OP_BARRIER:
        st = do_barrier(t, op);
        break;
    case PLAN_OP_SIGNAL: case PLAN_OP_RLXSIGNAL:
        for (int k = 0; st == ST_DONE && k < op->nchan; k++) st = do_signal(t, op, k);
        break;
    case PLAN_OP_WAIT: case PLAN_OP_RLXWAIT:
        for (; st == ST_DONE && t->sub < op->nchan; t->sub += st == ST_DONE)
            st = do_wait(t, op, t->sub);
        break;
    case PLAN_OP_FLUSH:
        /* puts complete in the issuing thread, so every earlier request is already done */
        for (int k = 0; st == ST_DONE && k < op->nchan; k++) {
            int g;
            CpuChan ch;
            st = chan_lookup(t, op, k, &g, &ch);
        }
        break;
    case PLAN_OP_SEM_ACQUIRE: case PLAN_OP_SEM_RELEASE:
        for (int k = 0; k < op->nsem; k++)
            if (op->sem_ids[k] < 0 || op->sem_ids[k] >= rc->nsems)
                return tb_fail(t, "semaphore_ids[%d] = %d out of range [0, %d)", k, op->sem_ids[k],
                               rc->nsems);
        if (op->kind == PLAN_OP_SEM_RELEASE) {
            for (int k = 0; k < op->nsem; k++)
                atomic_fetch_add_explicit(&rc->sems[op->sem_ids[k]], 1, memory_order_release);
        } else {
            for (; st == ST_DONE && t->sub < op->nsem; t->sub += st == ST_DONE)
                st = do_sem_acquire(t, op->sem_ids[t->sub]);
        }
        break;
    case PLAN_OP_COPY: case PLAN_OP_PUT: case PLAN_OP_PWS: case PLAN_OP_PWSF: case PLAN_OP_GET:
        st = op_copy_like(t, op, offset, unit);
        break;
    case PLAN_OP_CPKT: case PLAN_OP_UPKT: case PLAN_OP_PPKT: case PLAN_OP_RPPKT:
        st = op_packets(t, op);
        break;
    case PLAN_OP_RE: case PLAN_OP_RES: case PLAN_OP_RRE: case PLAN_OP_RRES:
        st = op_reduce(t, op, offset, unit);
        break;
    case PLAN_OP_REPKT: case PLAN_OP_RESPKT: case PLAN_OP_RECPKT: case PLAN_OP_RECSPKT:
        st = op_reduce_packets(t, op);
        break;
    case PLAN_OP_GLRES: case PLAN_OP_GSTORE: case PLAN_OP_GSTOREPKT:
        st = op_switch(t, op, offset, unit);
        break;
    case PLAN_OP_PIPELINE:
        st = tb_fail(t, "nested pipeline");
        break;
    default:
        st = tb_fail(t, "unknown op kind %d", (int)op->kind);
        break;
    }
    if (st == ST_DONE) {
        t->sub = 0;
        t->armed = false;
    }
    return st;
}

/* One step of a thread block: its next op (or pipeline inner op) runs or reports blocked. */
static int tb_step(TbRun *t) {
    const PlanTb *tb = &t->ex->plan->gpus[t->rank].tbs[t->tb];
    if (t->op_idx >= tb->nops) {
        t->done = true;
        return ST_DONE;
    }
    const PlanOp *op = &tb->ops[t->op_idx];
    int st;
    if (op->kind != PLAN_OP_PIPELINE) {
        t->inner_idx = -1;
        st = op_run(t, op, 0, UINT64_MAX);
        if (st == ST_DONE) t->op_idx++;
    } else {
        /* spec §3.6: ub = per-chunk bytes, nIterations = ceil(K*ub/U) */
        t->kind = op->kind;
        if (op->unit_size == 0) return tb_fail(t, "pipeline unit_size is 0");
        uint64_t chunk = t->ex->ctx->ranks[t->rank].chunk;
        uint64_t iters = ((uint64_t)op->num_chunks * chunk + op->unit_size - 1) / op->unit_size;
        if (t->iter >= iters || op->ninner == 0) {
            st = ST_DONE;
        } else {
            if (t->inner_idx < 0) t->inner_idx = 0;
            st = op_run(t, &op->inner[t->inner_idx], t->iter * op->unit_size, op->unit_size);
            if (st == ST_DONE && ++t->inner_idx == op->ninner) {
                t->inner_idx = 0;
                t->iter++;
            }
        }
        if (st == ST_DONE && (t->iter >= iters || op->ninner == 0)) {
            t->op_idx++;
            t->iter = 0;
            t->inner_idx = -1;
        }
    }
    if (st == ST_DONE && t->op_idx >= tb->nops) t->done = true;
    return st;
}

/* The rank thread: round-robin over its thread blocks, one op each per round; when a whole
 * round is blocked it spins briefly, then yields, then sleeps 50 us between rounds. */
static void *rank_main(void *arg) {
    RankRun *rr = arg;
    Exec *ex = rr->ex;
    int left = 0;
    unsigned idle = 0;
    for (int b = 0; b < rr->ntbs; b++) {
        const PlanTb *tb = &ex->plan->gpus[rr->rank].tbs[b];
        if (tb->nops == 0) rr->tbs[b].done = true;
        else left++;
    }
    while (left > 0) {
        bool moved = false;
        for (int b = 0; b < rr->ntbs; b++) {
            TbRun *t = &rr->tbs[b];
            if (t->done) continue;
            int st = tb_step(t);
            if (st == ST_FAILED) goto stop;
            t->last_blocked = st == ST_BLOCKED;
            if (st == ST_DONE) {
                moved = true;
                if (t->done) left--;
            }
        }
        if (atomic_load_explicit(&ex->abort, memory_order_acquire)) goto stop;
        if (moved) {
            idle = 0;
            atomic_fetch_add_explicit(&rr->progress, 1, memory_order_relaxed);
        } else if (++idle > 2000) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        } else if (idle > 16) {
            sched_yield();
        }
    }
    goto out;
stop:
    /* stopped (timeout or another block's error): record what each blocked block waits for */
    for (int b = 0; b < rr->ntbs; b++) {
        TbRun *t = &rr->tbs[b];
        if (t->done || t->res != MSCCLRT_SUCCESS || !t->last_blocked) continue;
        t->describe = true;
        tb_step(t);
    }
out:
    pthread_mutex_lock(&ex->mu);
    ex->running--;
    pthread_cond_signal(&ex->cv);
    pthread_mutex_unlock(&ex->mu);
    return NULL;
}

/* ---- the serial scheduler (MSCCLRT_CPU_SEED, mscclrt_cpu_comm_set_seed) -------------------
 * Every thread block of every rank runs in the calling thread, one op per step, in an order
 * drawn from the seed: the same seed gives the same interleaving, so a failure replays exactly.
 * The order is PCT's (probabilistic concurrency testing): each block gets a random priority, the
 * highest-priority block that can move runs one op, and at a few random steps the block that
 * just moved drops to the lowest priority. A plan whose result depends on which of two blocks
 * goes first fails in about half the seeds; one that waits correctly never does. */
static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define PCT_CHANGES 3                   /* priority change points per call */

/* Runs the call; returns true when it finished, false when a block failed (its res is set) or
 * every unfinished block is blocked (then each records what it waits for: *stuck). */
static bool exec_serial(Exec *ex, TbRun *runs, int nruns, uint64_t seed, bool *stuck) {
    *stuck = false;
    int *order = malloc((size_t)(nruns > 0 ? nruns : 1) * sizeof *order);
    uint64_t *prio = malloc((size_t)(nruns > 0 ? nruns : 1) * sizeof *prio);
    if (!order || !prio) {
        free(order);
        free(prio);
        rt_fail(MSCCLRT_ERR_SYSTEM, "cpu: out of memory (schedule of %d thread blocks)", nruns);
        return false;
    }
    uint64_t x = seed;
    long long est = 1;
    for (int k = 0; k < nruns; k++) {
        const PlanTb *tb = &ex->plan->gpus[runs[k].rank].tbs[runs[k].tb];
        runs[k].done = tb->nops == 0;
        est += plan_tb_flat_ops(tb);
        order[k] = k;
        prio[k] = splitmix(&x);
    }
    /* highest priority first (insertion sort: nruns is at most a few thousand) */
    for (int i = 1; i < nruns; i++) {
        int v = order[i], j = i;
        while (j > 0 && prio[order[j - 1]] < prio[v]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
    long long change[PCT_CHANGES];
    for (int c = 0; c < PCT_CHANGES; c++) change[c] = 1 + (long long)(splitmix(&x) % (uint64_t)est);
    long long steps = 0;
    bool ok = true;
    for (;;) {
        bool any = false, moved = false;
        for (int k = 0; k < nruns && !moved; k++) {
            TbRun *t = &runs[order[k]];
            if (t->done) continue;
            any = true;
            int st = tb_step(t);
            if (st == ST_FAILED) {
                ok = false;
                goto out;
            }
            if (st != ST_DONE) continue;
            moved = true;
            steps++;
            for (int c = 0; c < PCT_CHANGES; c++)
                if (change[c] == steps) {
                    int v = order[k];
                    memmove(&order[k], &order[k + 1], (size_t)(nruns - 1 - k) * sizeof *order);
                    order[nruns - 1] = v;
                }
        }
        if (!any) break;
        if (!moved) {
            for (int k = 0; k < nruns; k++)
                if (!runs[k].done) {
                    runs[k].describe = true;
                    tb_step(&runs[k]);
                }
            *stuck = true;
            ok = false;
            break;
        }
    }
out:
    free(order);
    free(prio);
    return ok;
}

/* ---- contexts ---------------------------------------------------------------------------------- */
static uint64_t fnv(uint64_t h, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Everything a context's layout depends on (scratch, semaphores, connections per type), so a
 * different plan at a reused address gets its own context unless the layouts are identical. */
static uint64_t plan_fingerprint(const Plan *p) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *s = p->name; s && *s; s++) h = fnv(h, (unsigned char)*s);
    h = fnv(h, (uint64_t)p->ngpus);
    h = fnv(h, (uint64_t)p->protocol_ll | (uint64_t)p->double_scratch << 1 |
                   (uint64_t)p->reuse_resources << 2 | (uint64_t)p->alignment << 8);
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        h = fnv(h, g->input_chunks);
        h = fnv(h, g->output_chunks);
        h = fnv(h, g->scratch_chunks);
        h = fnv(h, (uint64_t)g->ntbs);
        h = fnv(h, (uint64_t)g->nswitch);
        h = fnv(h, (uint64_t)g->nremotes);
        h = fnv(h, (uint64_t)g->nsems);
        for (int k = 0; k < g->nsems; k++) h = fnv(h, (uint64_t)(uint32_t)g->sem_init[k]);
        for (int ty = 0; ty < 2; ty++) {
            h = fnv(h, (uint64_t)ty << 32 | (uint32_t)g->npeers[ty]);
            for (int k = 0; k < g->npeers[ty]; k++) h = fnv(h, (uint64_t)(uint32_t)g->peers[ty][k]);
        }
    }
    return h;
}

static void ctx_free(CpuCtx *c, int nranks) {
    if (!c) return;
    if (c->ranks)
        for (int r = 0; r < nranks; r++) {
            CpuRankCtx *rc = &c->ranks[r];
            free(rc->scratch);
            free(rc->sems);
            for (int ty = 0; ty < 2; ty++) {
                free(rc->conns[ty]);
                free(rc->conn_base[ty]);
                free(rc->chans[ty]);
            }
        }
    free(c->ranks);
    free(c->send);
    free(c->recv);
    free(c);
}

/* The call's chunk geometry and scratch size (spec §3.2-3.5): the one implementation in
 * plan_geom.c, which the GPU runtime uses too. */
static mscclrt_result geom_check(const Plan *p, int r, uint64_t in, uint64_t out, PlanGeom *geo) {
    PlanErr err;
    if (!plan_geom(p, r, in, out, geo, &err))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s", err.msg);
    return MSCCLRT_SUCCESS;
}

static mscclrt_result ctx_rank_init(CpuCtx *c, const Plan *p, int r, int nranks) {
    const PlanGpu *g = &p->gpus[r];
    CpuRankCtx *rc = &c->ranks[r];
    uint64_t a = p->alignment ? p->alignment : 1;
    PlanGeom geo;
    TRY(geom_check(p, r, c->in_bytes, c->out_bytes, &geo));
    rc->chunk = geo.chunk_bytes;
    /* scratch (spec §3.5), sized from the message sizes (a host buffer has no larger range);
     * reuse_resources plans get 64 MiB and wrap their scratch entries at scs bytes */
    uint64_t sz = geo.scratch_bytes;
    if (p->reuse_resources && g->scratch_chunks > 0) {
        uint64_t x = p->double_scratch ? sz / 2 : sz;
        rc->scs = (x + g->scratch_chunks - 1) / g->scratch_chunks;
        rc->scs = (rc->scs + a - 1) / a * a;
    }
    sz = (sz + a - 1) / a * a;
    rc->scratch_bytes = sz;
    if (sz) {
        rc->scratch = calloc(1, (size_t)sz);
        if (!rc->scratch)
            return rt_fail(MSCCLRT_ERR_SYSTEM, "cpu: cannot allocate %llu bytes of scratch for rank %d",
                           (unsigned long long)sz, r);
    }
    rc->nsems = g->nsems;
    if (g->nsems) {
        rc->sems = calloc((size_t)g->nsems, sizeof *rc->sems);
        if (!rc->sems) return rt_fail(MSCCLRT_ERR_SYSTEM, "cpu: out of memory (semaphores)");
        for (int k = 0; k < g->nsems; k++) atomic_init(&rc->sems[k], g->sem_init[k]);
    }
    /* connections and channel pairing (spec §6.2) */
    for (int ty = 0; ty < 2; ty++) {
        rc->conn_base[ty] = calloc((size_t)nranks + 1, sizeof(int));
        rc->chans[ty] = calloc((size_t)g->npeers[ty] + 1, sizeof(CpuChan));
        if (!rc->conn_base[ty] || !rc->chans[ty])
            return rt_fail(MSCCLRT_ERR_SYSTEM, "cpu: out of memory (channels)");
        int total = 0;
        for (int q = 0; q < nranks; q++) {
            int mine = 0, theirs = 0;
            for (int k = 0; k < g->npeers[ty]; k++) mine += g->peers[ty][k] == q;
            for (int k = 0; k < p->gpus[q].npeers[ty]; k++) theirs += p->gpus[q].peers[ty][k] == r;
            rc->conn_base[ty][q] = total;
            total += mine > theirs ? mine : theirs;
        }
        rc->conn_base[ty][nranks] = total;
        rc->nconn[ty] = total;
        rc->conns[ty] = calloc((size_t)total + 1, sizeof(CpuConn));
        if (!rc->conns[ty]) return rt_fail(MSCCLRT_ERR_SYSTEM, "cpu: out of memory (connections)");
        for (int k = 0; k < g->npeers[ty]; k++) {
            int q = g->peers[ty][k];
            if (q < 0 || q >= nranks || q == r)
                return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s': gpus[%d] %s channel %d connects to "
                               "rank %d (valid: [0, %d) except %d)", PLAN_ESC(p->name), r,
                               plan_chan_name((PlanChanType)ty), k, q, nranks, r);
            int occ = 0;
            for (int j = 0; j < k; j++) occ += g->peers[ty][j] == q;
            rc->chans[ty][k] = (CpuChan){q, occ};
        }
    }
    for (int k = 0; k < g->nswitch; k++)
        for (int m = 0; m < g->switches[k].nranks; m++) {
            int q = g->switches[k].ranks[m];
            if (q < 0 || q >= nranks)
                return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s': gpus[%d] switch channel %d names rank %d "
                               "of %d", PLAN_ESC(p->name), r, k, q, nranks);
        }
    return MSCCLRT_SUCCESS;
}

static mscclrt_result ctx_get(mscclrt_cpu_comm *comm, const Plan *p, void *const *send,
                              void *const *recv, size_t in, size_t out, CpuCtx **outc) {
    int n = comm->nranks;
    uint64_t fp = plan_fingerprint(p);
    for (CpuCtx *c = comm->ctxs; c; c = c->next)
        if (c->plan == p && c->fingerprint == fp && c->in_bytes == in && c->out_bytes == out &&
            memcmp(c->send, send, (size_t)n * sizeof *send) == 0 &&
            memcmp(c->recv, recv, (size_t)n * sizeof *recv) == 0) {
            *outc = c;
            return MSCCLRT_SUCCESS;
        }
    mscclrt_result res = MSCCLRT_SUCCESS;
    CpuCtx *c = calloc(1, sizeof *c);
    if (!c) return rt_fail(MSCCLRT_ERR_SYSTEM, "cpu: out of memory (context)");
    c->plan = p;
    c->fingerprint = fp;
    c->in_bytes = in;
    c->out_bytes = out;
    c->send = malloc((size_t)n * sizeof *c->send);
    c->recv = malloc((size_t)n * sizeof *c->recv);
    c->ranks = calloc((size_t)n, sizeof *c->ranks);
    if (!c->send || !c->recv || !c->ranks) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "cpu: out of memory (context)");
        goto fail;
    }
    memcpy(c->send, send, (size_t)n * sizeof *send);
    memcpy(c->recv, recv, (size_t)n * sizeof *recv);
    for (int r = 0; r < n; r++) TRY_GOTO(ctx_rank_init(c, p, r, n), res, fail);
    c->next = comm->ctxs;
    comm->ctxs = c;
    comm->nctx++;
    LOG_INFO(LOG_SUB_CPU, "cpu: new context %d for plan '%s' (%zu/%zu bytes)", comm->nctx,
             PLAN_ESC(p->name), in, out);
    *outc = c;
    return MSCCLRT_SUCCESS;
fail:
    ctx_free(c, n);
    return res;
}

static void comm_reset(mscclrt_cpu_comm *comm) {
    while (comm->ctxs) {
        CpuCtx *c = comm->ctxs;
        comm->ctxs = c->next;
        ctx_free(c, comm->nranks);
    }
    comm->nctx = 0;
    for (int r = 0; r < comm->nranks; r++)
        for (int b = 0; b < PLAN_MAX_BARRIERS; b++) {
            atomic_store(&comm->barriers[r][b].count, 0);
            atomic_store(&comm->barriers[r][b].gen, 0);
        }
}

/* ---- communicator ------------------------------------------------------------------------------ */
mscclrt_result cpu_comm_create(mscclrt_cpu_comm **out, int nranks) {
    *out = NULL;
    if (nranks < 1 || nranks > CPU_MAX_RANKS)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "mscclrt_cpu_comm_create: nranks %d out of range "
                       "[1, %d]", nranks, CPU_MAX_RANKS);
    long long timeout_ms, seed;
    TRY(param_int(PARAM_CPU_TIMEOUT_MS, &timeout_ms));
    long long schedules;
    TRY(param_int(PARAM_CPU_SEED, &seed));
    TRY(param_int(PARAM_CPU_SCHEDULES, &schedules));
    mscclrt_cpu_comm *c = calloc(1, sizeof *c);
    if (c) c->barriers = calloc((size_t)nranks, sizeof *c->barriers);
    if (!c || !c->barriers) {
        free(c);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "mscclrt_cpu_comm_create: out of memory");
    }
    for (int r = 0; r < nranks; r++)
        for (int b = 0; b < PLAN_MAX_BARRIERS; b++) {
            atomic_init(&c->barriers[r][b].count, 0);
            atomic_init(&c->barriers[r][b].gen, 0);
        }
    c->magic = CPU_MAGIC;
    c->nranks = nranks;
    c->timeout_ms = timeout_ms;
    c->seed = (unsigned long long)seed;
    c->schedules = schedules;
    *out = c;
    return MSCCLRT_SUCCESS;
}

void cpu_comm_destroy(mscclrt_cpu_comm *comm) {
    if (!comm || comm->magic != CPU_MAGIC) return;
    comm_reset(comm);
    free(comm->barriers);
    comm->magic = 0;
    free(comm);
}

bool cpu_comm_valid(const mscclrt_cpu_comm *comm) {
    return comm && comm->magic == CPU_MAGIC;
}

int cpu_comm_nranks(const mscclrt_cpu_comm *comm) {
    return comm->nranks;
}

int cpu_comm_contexts(const mscclrt_cpu_comm *comm) {
    return comm->nctx;
}

void cpu_comm_set_seed(mscclrt_cpu_comm *comm, unsigned long long seed) {
    comm->seed = seed;
    comm->calls = 0;
}

/* ---- one call ------------------------------------------------------------------------------------ */
/* Waits for every thread; stops them all when none made progress for the timeout. */
static bool exec_watch(Exec *ex, RankRun *rr, int n, long long timeout_ms) {
    uint64_t last = 0;
    double changed = rt_now_s() * 1e3;
    bool timed_out = false;
    pthread_mutex_lock(&ex->mu);
    while (ex->running > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 5 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&ex->cv, &ex->mu, &ts);
        if (ex->running == 0) break;
        pthread_mutex_unlock(&ex->mu);
        uint64_t sum = 0;
        for (int i = 0; i < n; i++)
            sum += atomic_load_explicit(&rr[i].progress, memory_order_relaxed);
        double t = rt_now_s() * 1e3;
        if (sum != last) {
            last = sum;
            changed = t;
        } else if (!timed_out && t - changed > (double)timeout_ms) {
            timed_out = true;
            atomic_store_explicit(&ex->abort, 1, memory_order_release);
        }
        pthread_mutex_lock(&ex->mu);
    }
    pthread_mutex_unlock(&ex->mu);
    return timed_out;
}

/* One run of a call with LL flag `flag`: on threads, or (serial) on the serial scheduler with
 * seed `sched`; `under` (may be "") is added to failure messages. Leaves the comm as it is. */
static mscclrt_result exec_once(mscclrt_cpu_comm *comm, const Plan *p, CpuCtx *ctx,
                                void *const *send, void *const *recv, size_t in_bytes,
                                size_t out_bytes, mscclrt_dtype dtype, mscclrt_redop op,
                                mscclrt_packet packet, uint32_t flag, bool serial, uint64_t sched,
                                const char *under) {
    int n = comm->nranks;
    mscclrt_result res = MSCCLRT_SUCCESS;
    Exec ex;
    memset(&ex, 0, sizeof ex);
    ex.comm = comm;
    ex.plan = p;
    ex.ctx = ctx;
    ex.dt = dtype;
    ex.esz = dtype_size(dtype);
    ex.op = op;
    ex.ll8 = packet == MSCCLRT_LL8;
    ex.payload = ex.ll8 ? 4 : 8;
    ex.flag = flag;
    atomic_init(&ex.abort, 0);
    int nruns = 0;
    for (int r = 0; r < n; r++) nruns += p->gpus[r].ntbs;
    ex.bufs = calloc((size_t)n, sizeof *ex.bufs);
    TbRun *runs = calloc((size_t)nruns + 1, sizeof *runs);
    RankRun *rr = calloc((size_t)n, sizeof *rr);
    if (!ex.bufs || !runs || !rr) {
        free(ex.bufs);
        free(runs);
        free(rr);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "cpu: out of memory (%d thread blocks)", nruns);
    }
    for (int r = 0; r < n; r++) {
        CpuRankCtx *rc = &ctx->ranks[r];
        uint64_t half = p->double_scratch ? rc->scratch_bytes / 2 : 0;
        ex.bufs[r].base[PLAN_BUF_INPUT] = send[r];
        ex.bufs[r].size[PLAN_BUF_INPUT] = in_bytes;
        ex.bufs[r].base[PLAN_BUF_OUTPUT] = recv[r];
        ex.bufs[r].size[PLAN_BUF_OUTPUT] = out_bytes;
        /* double scratch: even flags use the upper half (spec §3.5) */
        ex.bufs[r].base[PLAN_BUF_SCRATCH] = rc->scratch ? rc->scratch + (ex.flag % 2 == 0 ? half : 0)
                                                        : NULL;
        ex.bufs[r].size[PLAN_BUF_SCRATCH] = p->double_scratch ? half : rc->scratch_bytes;
    }
    pthread_mutex_init(&ex.mu, NULL);
    pthread_cond_init(&ex.cv, NULL);
    int k = 0;
    for (int r = 0; r < n; r++) {
        rr[r].ex = &ex;
        rr[r].rank = r;
        rr[r].tbs = runs + k;
        rr[r].ntbs = p->gpus[r].ntbs;
        atomic_init(&rr[r].progress, 0);
        for (int b = 0; b < p->gpus[r].ntbs; b++, k++) {
            runs[k].ex = &ex;
            runs[k].rank = r;
            runs[k].tb = b;
            runs[k].inner_idx = -1;
        }
    }
    bool timed_out = false;
    if (serial) {
        if (!exec_serial(&ex, runs, nruns, sched, &timed_out) && !timed_out) {
            bool recorded = false;
            for (k = 0; k < nruns; k++) recorded |= runs[k].res != MSCCLRT_SUCCESS;
            if (!recorded) res = MSCCLRT_ERR_SYSTEM;
        }
    } else {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 1 << 20);
        for (int r = 0; r < n; r++) {
            pthread_mutex_lock(&ex.mu);
            ex.running++;
            pthread_mutex_unlock(&ex.mu);
            int e = pthread_create(&rr[r].th, &attr, rank_main, &rr[r]);
            if (e) {
                pthread_mutex_lock(&ex.mu);
                ex.running--;
                pthread_mutex_unlock(&ex.mu);
                atomic_store(&ex.abort, 1);
                errno = e;
                res = rt_fail_errno(MSCCLRT_ERR_SYSTEM, "cpu: cannot start the thread of rank %d of %d",
                                    r, n);
                break;
            }
            rr[r].started = true;
        }
        pthread_attr_destroy(&attr);
        timed_out = exec_watch(&ex, rr, n, comm->timeout_ms);
        for (int r = 0; r < n; r++)
            if (rr[r].started) pthread_join(rr[r].th, NULL);
    }
    if (res == MSCCLRT_SUCCESS) {
        /* a plan error first; else the first blocked thread block of a timeout */
        int first = -1, blocked = 0;
        for (k = 0; k < nruns; k++)
            if (runs[k].res != MSCCLRT_SUCCESS && !runs[k].blocked) {
                first = k;
                break;
            }
        if (first >= 0) {
            res = rt_fail(runs[first].res, "plan '%s': %s%s", PLAN_ESC(p->name), runs[first].why,
                          under);
        } else if (timed_out && serial) {
            for (k = 0; k < nruns; k++)
                if (runs[k].blocked) {
                    if (first < 0) first = k;
                    blocked++;
                }
            res = rt_fail(MSCCLRT_ERR_TIMEOUT, "plan '%s': deadlock: every unfinished thread block "
                          "waits%s: %s (%d thread block%s blocked)", PLAN_ESC(p->name), under,
                          first >= 0 ? runs[first].why : "?", blocked, blocked == 1 ? "" : "s");
        } else if (timed_out) {
            for (k = 0; k < nruns; k++)
                if (runs[k].blocked) {
                    if (first < 0) first = k;
                    blocked++;
                }
            if (first >= 0)
                res = rt_fail(MSCCLRT_ERR_TIMEOUT, "plan '%s': no progress for %lld ms "
                              "(MSCCLRT_CPU_TIMEOUT_MS): %s (%d thread block%s blocked)",
                              PLAN_ESC(p->name), comm->timeout_ms, runs[first].why, blocked,
                              blocked == 1 ? "" : "s");
            else
                res = rt_fail(MSCCLRT_ERR_TIMEOUT, "plan '%s': no progress for %lld ms",
                              PLAN_ESC(p->name), comm->timeout_ms);
        }
    }
    free(rr);
    pthread_mutex_destroy(&ex.mu);
    pthread_cond_destroy(&ex.cv);
    free(runs);
    free(ex.bufs);
    return res;
}

/* The schedule of call `calls` under seed `seed`: its own stream, so a replay of the same calls
 * with the same seed is exact. */
static uint64_t sched_seed(unsigned long long seed, unsigned long long calls) {
    uint64_t mix = seed ^ (calls * 0xd1b54a32d192ed03ull);
    return splitmix(&mix);
}

/* Everything a call reads and writes besides the plan: every rank's buffers and context (scratch,
 * semaphores, connection counters) and the comm's barriers, so that MSCCLRT_CPU_SCHEDULES can run
 * one call several times from the same start. */
typedef struct {
    uint8_t **send, **recv, **scratch;
    int **sems;
    CpuConn **conns[2];
    CpuBarrier (*barriers)[PLAN_MAX_BARRIERS];
} Snap;

static void snap_free(Snap *sn, int n) {
    for (int r = 0; r < n; r++) {
        if (sn->send) free(sn->send[r]);
        if (sn->recv) free(sn->recv[r]);
        if (sn->scratch) free(sn->scratch[r]);
        if (sn->sems) free(sn->sems[r]);
        for (int ty = 0; ty < 2; ty++)
            if (sn->conns[ty]) free(sn->conns[ty][r]);
    }
    free(sn->send);
    free(sn->recv);
    free(sn->scratch);
    free(sn->sems);
    free(sn->conns[0]);
    free(sn->conns[1]);
    free(sn->barriers);
    memset(sn, 0, sizeof *sn);
}

static void *dup_bytes(const void *src, size_t n, bool *ok) {
    void *d = malloc(n ? n : 1);
    if (!d) *ok = false;
    else if (n) memcpy(d, src, n);
    return d;
}

/* full: buffers and context state; else only the buffers (the results to compare). */
static bool snap_take(Snap *sn, mscclrt_cpu_comm *comm, const CpuCtx *ctx, void *const *send,
                      void *const *recv, size_t in, size_t out, bool full) {
    int n = comm->nranks;
    bool ok = true;
    memset(sn, 0, sizeof *sn);
    sn->send = calloc((size_t)n, sizeof *sn->send);
    sn->recv = calloc((size_t)n, sizeof *sn->recv);
    if (!sn->send || !sn->recv) return false;
    for (int r = 0; r < n && ok; r++) {
        sn->send[r] = dup_bytes(send[r], in, &ok);
        sn->recv[r] = dup_bytes(recv[r], out, &ok);
    }
    if (!full || !ok) return ok;
    sn->scratch = calloc((size_t)n, sizeof *sn->scratch);
    sn->sems = calloc((size_t)n, sizeof *sn->sems);
    sn->conns[0] = calloc((size_t)n, sizeof *sn->conns[0]);
    sn->conns[1] = calloc((size_t)n, sizeof *sn->conns[1]);
    sn->barriers = malloc((size_t)n * sizeof *sn->barriers);
    if (!sn->scratch || !sn->sems || !sn->conns[0] || !sn->conns[1] || !sn->barriers) return false;
    memcpy(sn->barriers, comm->barriers, (size_t)n * sizeof *sn->barriers);
    for (int r = 0; r < n && ok; r++) {
        const CpuRankCtx *rc = &ctx->ranks[r];
        sn->scratch[r] = dup_bytes(rc->scratch, (size_t)rc->scratch_bytes, &ok);
        sn->sems[r] = malloc((size_t)(rc->nsems + 1) * sizeof(int));
        if (!sn->sems[r]) ok = false;
        for (int k = 0; ok && k < rc->nsems; k++) sn->sems[r][k] = atomic_load(&rc->sems[k]);
        for (int ty = 0; ok && ty < 2; ty++) {
            sn->conns[ty][r] = malloc((size_t)(rc->nconn[ty] + 1) * sizeof(CpuConn));
            if (!sn->conns[ty][r]) ok = false;
            for (int k = 0; ok && k < rc->nconn[ty]; k++) {
                atomic_init(&sn->conns[ty][r][k].inbound, atomic_load(&rc->conns[ty][k].inbound));
                atomic_init(&sn->conns[ty][r][k].expected, atomic_load(&rc->conns[ty][k].expected));
            }
        }
    }
    return ok;
}

static void snap_restore(const Snap *sn, mscclrt_cpu_comm *comm, CpuCtx *ctx, void *const *send,
                         void *const *recv, size_t in, size_t out) {
    int n = comm->nranks;
    for (int r = 0; r < n; r++) {
        /* send first: an in-place output that contains the input gets the same bytes again */
        if (in) memcpy(send[r], sn->send[r], in);
        if (out) memcpy(recv[r], sn->recv[r], out);
        CpuRankCtx *rc = &ctx->ranks[r];
        if (rc->scratch_bytes) memcpy(rc->scratch, sn->scratch[r], (size_t)rc->scratch_bytes);
        for (int k = 0; k < rc->nsems; k++) atomic_store(&rc->sems[k], sn->sems[r][k]);
        for (int ty = 0; ty < 2; ty++)
            for (int k = 0; k < rc->nconn[ty]; k++) {
                atomic_store(&rc->conns[ty][k].inbound, atomic_load(&sn->conns[ty][r][k].inbound));
                atomic_store(&rc->conns[ty][k].expected, atomic_load(&sn->conns[ty][r][k].expected));
            }
        for (int b = 0; b < PLAN_MAX_BARRIERS; b++) {
            atomic_store(&comm->barriers[r][b].count, atomic_load(&sn->barriers[r][b].count));
            atomic_store(&comm->barriers[r][b].gen, atomic_load(&sn->barriers[r][b].gen));
        }
    }
}

/* MSCCLRT_CPU_SCHEDULES = K > 1: the call runs K times from the same start, on the serial
 * scheduler with seeds S..S+K-1 (S = the comm's seed, or 1), and every run must leave the same
 * bytes in every rank's buffers; the last run's result stays. */
static mscclrt_result exec_schedules(mscclrt_cpu_comm *comm, const Plan *p, CpuCtx *ctx,
                                     void *const *send, void *const *recv, size_t in, size_t out,
                                     mscclrt_dtype dtype, mscclrt_redop op, mscclrt_packet packet,
                                     uint32_t flag) {
    int n = comm->nranks;
    unsigned long long base = comm->seed ? comm->seed : 1;
    Snap start, first;
    memset(&first, 0, sizeof first);
    mscclrt_result res = MSCCLRT_SUCCESS;
    if (!snap_take(&start, comm, ctx, send, recv, in, out, true)) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "cpu: out of memory (MSCCLRT_CPU_SCHEDULES copies)");
        goto out;
    }
    for (long long j = 0; j < comm->schedules; j++) {
        unsigned long long seed = base + (unsigned long long)j;
        char under[160];
        snprintf(under, sizeof under, " (schedule %lld of %lld, serial, seed %llu, call %llu; "
                 "MSCCLRT_CPU_SCHEDULES=1 MSCCLRT_CPU_SEED=%llu replays it)", j + 1,
                 comm->schedules, seed, comm->calls, seed);
        if (j > 0) snap_restore(&start, comm, ctx, send, recv, in, out);
        res = exec_once(comm, p, ctx, send, recv, in, out, dtype, op, packet, flag, true,
                        sched_seed(seed, comm->calls), under);
        if (res != MSCCLRT_SUCCESS) goto out;
        if (j == 0) {
            if (!snap_take(&first, comm, ctx, send, recv, in, out, false)) {
                res = rt_fail(MSCCLRT_ERR_SYSTEM, "cpu: out of memory (MSCCLRT_CPU_SCHEDULES copies)");
                goto out;
            }
            continue;
        }
        for (int r = 0; r < n; r++)
            for (int side = 0; side < 2; side++) {
                const uint8_t *a = side ? first.recv[r] : first.send[r];
                const uint8_t *b = side ? recv[r] : send[r];
                size_t len = side ? out : in;
                for (size_t i = 0; i < len; i++)
                    if (a[i] != b[i]) {
                        res = rt_fail(MSCCLRT_ERR_PLAN, "plan '%s': the result depends on the "
                                      "order of its thread blocks: byte %zu of rank %d's %s "
                                      "buffer differs between seed %llu and seed %llu "
                                      "(MSCCLRT_CPU_SCHEDULES=%lld, call %llu; "
                                      "MSCCLRT_CPU_SCHEDULES=1 MSCCLRT_CPU_SEED=N replays seed N)",
                                      PLAN_ESC(p->name), i, r, side ? "receive" : "send", base,
                                      seed, comm->schedules, comm->calls);
                        goto out;
                    }
            }
    }
out:
    snap_free(&start, n);
    snap_free(&first, n);
    return res;
}

mscclrt_result cpu_execute(mscclrt_cpu_comm *comm, const Plan *p, void *const *send,
                           void *const *recv, size_t in_bytes, size_t out_bytes,
                           mscclrt_dtype dtype, mscclrt_redop op, mscclrt_packet packet) {
    int n = comm->nranks;
    if (p->ngpus != n)
        return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s' is for %d ranks, the communicator has %d",
                       PLAN_ESC(p->name), p->ngpus, n);
    CpuCtx *ctx = NULL;
    TRY(ctx_get(comm, p, send, recv, in_bytes, out_bytes, &ctx));
    uint32_t flag = ++comm->flag;
    if (flag == 0) flag = ++comm->flag;   /* 0 is the flag of zeroed scratch */
    mscclrt_result res;
    if (comm->schedules > 1) {
        res = exec_schedules(comm, p, ctx, send, recv, in_bytes, out_bytes, dtype, op, packet, flag);
    } else {
        char under[96] = "";
        if (comm->seed)
            snprintf(under, sizeof under, " (serial schedule, seed %llu, call %llu)", comm->seed,
                     comm->calls);
        res = exec_once(comm, p, ctx, send, recv, in_bytes, out_bytes, dtype, op, packet, flag,
                        comm->seed != 0, sched_seed(comm->seed, comm->calls), under);
    }
    comm->calls++;
    if (res != MSCCLRT_SUCCESS) {
        comm_reset(comm);
        return res;
    }
    if (op == MSCCLRT_AVG && plan_coll_reduces(p->collective))
        for (int r = 0; r < n; r++) dtype_avg_finish(dtype, recv[r], out_bytes / dtype_size(dtype), n);
    return MSCCLRT_SUCCESS;
}

/*
 * lower.c - turns op statements into PlanOps of the shared plan model, per rank and thread block,
 * in program order, numbering channels, remote buffers and switch channels exactly as the MSCCL++
 * DSL does (spec §8.3-§8.4): GPU-level indices come from declaration order, TB-local indices and
 * remote buffers from first use in each TB. Checks every op's channel kind, ranks and buffers.
 */
#include "sema.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct BarrierList {
    int n;                              /* distinct TB lists of this rank = barrier ids 0..n-1 */
    int len[PLAN_MAX_BARRIERS];
    int *tbs[PLAN_MAX_BARRIERS];        /* arena */
};

struct PipeSlot {
    int rank, tb;
    PlanOp op;                          /* PIPELINE; inner is malloc'd and grown here */
    int cap;
};

/* How an entry of an op is addressed. */
typedef enum { E_LOCAL, E_LOCAL_RANK, E_REMOTE, E_SWITCH } EntryKind;

typedef struct {
    EntryKind kind;
    Value chunk;
} EntrySpec;

/* Everything an op statement means, before TB-local numbering. */
typedef struct {
    const char *what;       /* name as written, for messages */
    PlanOpKind kind;
    int rank;               /* executing rank */
    Channel *chan;          /* NULL for local ops */
    bool list_chan;         /* the op names its channel in channel_ids */
    int nsrc, ndst;
    EntrySpec src[PLAN_MAX_OP_ENTRIES], dst[PLAN_MAX_OP_ENTRIES];
    PlanRedOp red;
    int data_sync;
    Semaphore *sem;
    bool sync_op;           /* may not take a thread-block group */
} OpSpec;

typedef struct {
    int n;
    int *tbs;               /* arena */
    bool group;             /* tbg(...): emit tbg_info */
} Placement;

/* ---- begin / finish ----------------------------------------------------------------------- */
bool lower_begin(Sema *s, SrcLoc loc) {
    int64_t n = s->nranks, cf = s->chunk_factor, in = 0, out = 0;
    switch (s->coll) {
    case PLAN_COLL_ALLREDUCE:
    case PLAN_COLL_REDUCE:
    case PLAN_COLL_ALLTOALL: in = out = n * cf; break;
    case PLAN_COLL_ALLGATHER:
    case PLAN_COLL_GATHER: in = cf; out = n * cf; break;
    case PLAN_COLL_REDUCESCATTER:
    case PLAN_COLL_SCATTER: in = n * cf; out = cf; break;
    case PLAN_COLL_BROADCAST:
    case PLAN_COLL_SENDRECV: in = out = cf; break;
    default: in = s->custom_in; out = s->custom_out; break;
    }
    if (in > (1 << 24) || out > (1 << 24)) {
        sema_error(s, loc, "%" PRId64 " ranks x chunk_factor %" PRId64 " makes more than %d chunks", n, cf,
                   1 << 24);
        return false;
    }
    s->in_chunks = in;
    s->out_chunks = out;
    s->plan = plan_new(s->name, s->coll, s->nranks);
    s->barriers = arena_must(s->arena, (size_t)s->nranks * sizeof *s->barriers);
    if (!s->plan) {
        sema_error(s, loc, "out of memory");
        return false;
    }
    return true;
}

/* An op that names a memory/port channel needs the channel's partner: the k-th channel from a to
 * b pairs with the k-th from b to a (spec §6.2); without one, its signals and waits go nowhere. */
static bool check_partners(Sema *s) {
    bool ok = true;
    for (int i = 0; i < s->nchans; i++) {
        Channel *c = s->chans[i];
        if (!c->named) continue;
        const PlanGpu *a = &s->plan->gpus[c->src], *b = &s->plan->gpus[c->dst];
        int k = 0, have = 0;
        for (int j = 0; j < c->gpu_index; j++) k += a->peers[c->type][j] == c->dst;
        for (int j = 0; j < b->npeers[c->type]; j++) have += b->peers[c->type][j] == c->src;
        if (k >= have) {
            sema_error(s, c->named_at,
                       "%s channel '%s' (rank %d -> %d) has no partner: it is channel %d from rank %d to "
                       "rank %d, but rank %d declares %d %s channel%s to rank %d (the k-th pairs with the k-th)",
                       plan_chan_name(c->type), sema_chan_name(s, c), c->src, c->dst, k, c->src, c->dst, c->dst, have,
                       plan_chan_name(c->type), have == 1 ? "" : "s", c->src);
            ok = false;
        }
    }
    return ok;
}

bool lower_finish(Sema *s) {
    if (!check_partners(s)) return false;
    for (int r = 0; r < s->plan->ngpus; r++) {
        PlanGpu *g = &s->plan->gpus[r];
        g->input_chunks = (uint32_t)s->in_chunks;
        g->output_chunks = (uint32_t)s->out_chunks;
        g->scratch_chunks = s->scratch_total;
    }
    return true;
}

void lower_release(Sema *s) {
    for (int i = 0; i < s->npipes; i++) plan_op_release(&s->pipes[i].op);
    free(s->pipes);
    s->pipes = NULL;
    s->npipes = s->cappipes = 0;
}

/* ---- emission ------------------------------------------------------------------------------- */
static PlanTb *get_tb(Sema *s, const Stmt *st, int rank, int tb) {
    PlanGpu *g = &s->plan->gpus[rank];
    if (!plan_gpu_ensure_tbs(g, tb + 1)) {
        sema_error(s, st->loc, "out of memory");
        return NULL;
    }
    return &g->tbs[tb];
}

static bool emit(Sema *s, const Stmt *st, int rank, int tb, const PlanOp *op) {
    /* the loader's limits, counted as the ops are made, so a runaway loop stops right here */
    if (!sema_charge(s, st->loc, &s->nops, 1, SEMA_MAX_OPS, "operations", SEMA_LOADER_LIMIT) ||
        !sema_charge(s, st->loc, &s->nbytes, (int64_t)plan_json_op_size(op, s->opt->compact),
                     (int64_t)SEMA_MAX_BYTES, SEMA_BYTES_WHAT, SEMA_LOADER_LIMIT))
        return false;
    PlanTb *cur = get_tb(s, st, rank, tb);
    if (!cur) return false;
    if (cur->nops >= SEMA_MAX_TB_OPS) {
        sema_error(s, st->loc, "thread block %d of rank %d gets more than %d operations (the executor runs 64)",
                   tb, rank, SEMA_MAX_TB_OPS);
        s->stopped = true;
        return false;
    }
    if (!s->in_pipeline) {
        PlanTb *t = get_tb(s, st, rank, tb);
        if (!t) return false;
        if (!plan_tb_append(t, op)) {
            sema_error(s, st->loc, "out of memory");
            return false;
        }
        return true;
    }
    PipeSlot *slot = NULL;
    for (int i = 0; i < s->npipes; i++)
        if (s->pipes[i].rank == rank && s->pipes[i].tb == tb) slot = &s->pipes[i];
    if (!slot) {
        if (s->npipes == s->cappipes) {
            int cap = s->cappipes ? s->cappipes * 2 : 8;
            PipeSlot *v = realloc(s->pipes, (size_t)cap * sizeof *v);
            if (!v) {
                sema_error(s, st->loc, "out of memory");
                return false;
            }
            s->pipes = v;
            s->cappipes = cap;
        }
        slot = &s->pipes[s->npipes++];
        memset(slot, 0, sizeof *slot);
        slot->rank = rank;
        slot->tb = tb;
        plan_op_init(&slot->op, PLAN_OP_PIPELINE);
        slot->op.unit_size = s->pipe_unit;
        slot->op.num_chunks = s->pipe_chunks;
        slot->op.loc = s->pipe_loc.at;
    }
    if (slot->op.ninner >= SEMA_MAX_TB_OPS) {
        sema_error(s, st->loc, "a pipeline in thread block %d of rank %d gets more than %d operations", tb, rank,
                   SEMA_MAX_TB_OPS);
        s->stopped = true;
        return false;
    }
    if (slot->op.ninner == slot->cap) {
        int cap = slot->cap ? slot->cap * 2 : 8;
        PlanOp *v = realloc(slot->op.inner, (size_t)cap * sizeof *v);
        if (!v) {
            sema_error(s, st->loc, "out of memory");
            return false;
        }
        slot->op.inner = v;
        slot->cap = cap;
    }
    slot->op.inner[slot->op.ninner++] = *op;
    return true;
}

/* Builds the PlanOp of `sp` for thread block `tb` of the executing rank (TB-local channel and
 * remote-buffer numbers are per TB) and emits it. */
static bool build_emit(Sema *s, const Stmt *st, const OpSpec *sp, int tb, int tbg_id, int tbg_size) {
    PlanGpu *g = &s->plan->gpus[sp->rank];
    PlanTb *t = get_tb(s, st, sp->rank, tb);
    if (!t) return false;
    PlanOp op;
    plan_op_init(&op, sp->kind);
    op.loc = st->loc.at;
    op.reduce_op = sp->red;
    op.data_sync = sp->data_sync;
    if (tbg_size > 0) {
        op.tbg_id = tbg_id;
        op.tbg_size = tbg_size;
    }
    if (sp->sem) {
        op.nsem = 1;
        op.sem_ids[0] = sp->sem->id;
    }
    int local_chan = -1;
    if (sp->chan) {
        const Channel *c = sp->chan;
        op.chan_type = c->type;
        int gidx = c->type == PLAN_CHAN_SWITCH ? c->index_of[sp->rank] : c->gpu_index;
        local_chan = plan_tb_use_channel(t, c->type, gidx);
        if (local_chan < 0) {
            sema_error(s, st->loc, "too many %s channels in thread block %d of rank %d (limit %d per thread block)",
                       plan_chan_name(c->type), tb, sp->rank, PLAN_MAX_TB_CHANNELS);
            return false;
        }
        if (sp->list_chan) {
            op.nchan = 1;
            op.chan_ids[0] = local_chan;
            if (!c->named && c->type != PLAN_CHAN_SWITCH) {
                sp->chan->named = true;
                sp->chan->named_at = st->loc;
            }
        }
    }
    for (int side = 0; side < 2; side++) {
        int n = side ? sp->ndst : sp->nsrc;
        const EntrySpec *es = side ? sp->dst : sp->src;
        PlanRef *refs = side ? op.dst : op.src;
        for (int i = 0; i < n; i++) {
            const Value *v = &es[i].chunk;
            PlanRef *r = &refs[i];
            r->index = v->index;
            r->size = v->size;
            r->rank = -1;
            switch (es[i].kind) {
            case E_LOCAL_RANK:
                r->rank = v->rank;
                /* fallthrough */
            case E_LOCAL:
                r->kind = PLAN_REF_LOCAL;
                r->type = v->type;
                break;
            case E_SWITCH:
                r->kind = PLAN_REF_SWITCH;
                r->id = local_chan;
                break;
            case E_REMOTE: {
                PlanChanType acc = sp->chan->type;
                int rid = plan_gpu_add_remote(g, v->rank, v->type, acc);
                int lid = rid < 0 ? -1 : plan_tb_use_remote(t, acc, rid);
                if (rid < 0 || lid < 0) {
                    sema_error(s, st->loc,
                               "too many remote buffers reached over %s channels in thread block %d of rank %d "
                               "(limit %d per thread block)",
                               plan_chan_name(acc), tb, sp->rank, PLAN_MAX_TB_REMOTES);
                    return false;
                }
                r->kind = PLAN_REF_REMOTE;
                r->id = lid;
                break;
            }
            }
        }
        if (side) op.ndst = n;
        else op.nsrc = n;
    }
    return emit(s, st, sp->rank, tb, &op);
}

/* ---- argument helpers ------------------------------------------------------------------------ */
typedef struct {
    const Expr *pos[PLAN_MAX_OP_ENTRIES + 2];
    int npos;
    const Expr *named[8];
    int nnamed;
} Args;

static bool split_args(Sema *s, const Expr *call, const char *what, Args *a) {
    memset(a, 0, sizeof *a);
    for (int i = 0; i < call->args.n; i++) {
        const Expr *x = call->args.v[i];
        if (x->kind == EX_NAMED) {
            if (a->nnamed == 8) {
                sema_error(s, x->loc, "too many named arguments to '%s'", what);
                return false;
            }
            a->named[a->nnamed++] = x;
        } else {
            if (a->npos == PLAN_MAX_OP_ENTRIES + 2) {
                sema_error(s, x->loc, "too many arguments to '%s'", what);
                return false;
            }
            a->pos[a->npos++] = x;
        }
    }
    return true;
}

/* Checks the positional count and that every named argument is one of `allowed` (space separated). */
static bool expect_args(Sema *s, const Expr *call, const char *what, const Args *a, int npos, const char *usage,
                        const char *allowed) {
    if (a->npos != npos) {
        sema_error(s, call->loc, "'%s' takes %d argument%s (%s), not %d", what, npos, npos == 1 ? "" : "s", usage,
                   a->npos);
        return false;
    }
    for (int i = 0; i < a->nnamed; i++) {
        const char *n = a->named[i]->name;
        size_t len = strlen(n);
        const char *p = allowed;
        bool found = false;
        while (p && *p) {
            const char *e = strchr(p, ' ');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            if (l == len && strncmp(p, n, l) == 0) found = true;
            p = e ? e + 1 : NULL;
        }
        if (!found) {
            sema_error(s, a->named[i]->loc, "'%s' has no argument '%s'", what, n);
            return false;
        }
    }
    return true;
}

static const Expr *named(const Args *a, const char *name) {
    for (int i = 0; i < a->nnamed; i++)
        if (strcmp(a->named[i]->name, name) == 0) return a->named[i]->a;
    return NULL;
}

static bool parse_redop(Sema *s, const Args *a, PlanRedOp *out) {
    *out = PLAN_RED_SUM;
    const Expr *x = named(a, "op");
    if (!x) return true;
    const char *w = sema_word(x);
    if (!w || !plan_redop_from_name(w, out) || *out == PLAN_RED_NONE) {
        sema_error(s, x->loc, "unknown reduction operator (sum, prod, min, max or avg)");
        return false;
    }
    return true;
}

static bool parse_sync(Sema *s, const Args *a, int *out) {
    *out = PLAN_SYNC_BOTH;
    const Expr *x = named(a, "sync");
    if (!x) return true;
    const char *w = sema_word(x);
    if (w && strcmp(w, "both") == 0) *out = PLAN_SYNC_BOTH;
    else if (w && strcmp(w, "before") == 0) *out = PLAN_SYNC_BEFORE;
    else if (w && strcmp(w, "after") == 0) *out = PLAN_SYNC_AFTER;
    else if (w && strcmp(w, "none") == 0) *out = 0;
    else {
        sema_error(s, x->loc, "'sync' takes both, before, after or none");
        return false;
    }
    return true;
}

static bool chunk_arg(Sema *s, const Expr *x, Value *v) {
    return sema_eval_chunk(s, x, v);
}

static bool same_size(Sema *s, const Expr *x, const char *what, const Value *want, const Value *got,
                      const char *role) {
    if (want->size != got->size) {
        sema_error(s, x->loc, "'%s': the %s has %u chunk%s but the destination has %u", what, role, got->size,
                   got->size == 1 ? "" : "s", want->size);
        return false;
    }
    return true;
}

static bool on_rank(Sema *s, const Expr *x, const char *what, const Value *v, int rank, const char *role,
                    const char *why) {
    if (v->rank != rank) {
        sema_error(s, x->loc, "'%s': the %s is on rank %d, but must be on rank %d (%s)", what, role, v->rank, rank,
                   why);
        return false;
    }
    return true;
}

static bool is_scratch(Sema *s, const Expr *x, const char *what, const Value *v, const char *role) {
    if (v->type != PLAN_BUF_SCRATCH) {
        sema_error(s, x->loc, "'%s': the %s must be a scratch buffer, not %s (packets live in scratch)", what,
                   role, sema_buf_desc(s, v->rank, v->buf));
        return false;
    }
    return true;
}

static void add_entry(OpSpec *sp, bool dst, EntryKind k, const Value *v) {
    EntrySpec *e = dst ? &sp->dst[sp->ndst++] : &sp->src[sp->nsrc++];
    e->kind = k;
    e->chunk = *v;
}

/* ---- placement --------------------------------------------------------------------------------- */
static bool tb_value(Sema *s, SrcLoc loc, int64_t t) {
    if (t < 0 || t >= SEMA_MAX_TB) {
        sema_error(s, loc, "thread block %" PRId64 " is outside 0..%d", t, SEMA_MAX_TB - 1);
        return false;
    }
    return true;
}

/* place = "@" tb(t) | "@" tbg(a..b) | "@" tbg([t0, t1, ...]) */
static bool placement(Sema *s, const Expr *place, Placement *pl) {
    pl->group = false;
    if (!place) {
        pl->n = 1;
        pl->tbs = arena_must(s->arena, sizeof(int));
        pl->tbs[0] = 0;
        return true;
    }
    const char *w = place->kind == EX_CALL ? sema_word(place->a) : NULL;
    if (!w || (strcmp(w, "tb") != 0 && strcmp(w, "tbg") != 0) || place->args.n != 1) {
        sema_error(s, place->loc, "a placement is tb(t), tbg(a..b) or tbg([t0, t1, ...])");
        return false;
    }
    const Expr *x = place->args.v[0];
    if (w[2] == 0) {
        int64_t t;
        if (!sema_eval_int(s, x, &t) || !tb_value(s, x->loc, t)) return false;
        pl->n = 1;
        pl->tbs = arena_must(s->arena, sizeof(int));
        pl->tbs[0] = (int)t;
        return true;
    }
    Value v;
    if (!sema_eval(s, x, &v)) return false;
    if (v.kind == V_RANGE) {
        int64_t n = sema_range_len(&v);
        if (n == 0 || n > SEMA_MAX_TB) {
            sema_error(s, x->loc, "tbg(%" PRId64 "..%" PRId64 ") is not a usable range of thread blocks", v.lo,
                       v.hi);
            return false;
        }
        Value list = {.kind = V_LIST};
        list.items = arena_must(s->arena, (size_t)n * sizeof(Value));
        for (int64_t k = 0; k < n; k++) list.items[list.n++] = (Value){.kind = V_INT, .i = v.lo + k * v.step};
        v = list;
    }
    if (v.kind != V_LIST || v.n == 0 || v.n > SEMA_MAX_TB) {
        sema_error(s, x->loc, "tbg() takes a range a..b or a non-empty list of thread blocks");
        return false;
    }
    pl->n = v.n;
    pl->group = true;
    pl->tbs = arena_must(s->arena, (size_t)v.n * sizeof(int));
    for (int i = 0; i < v.n; i++) {
        if (v.items[i].kind != V_INT) {
            sema_error(s, x->loc, "tbg() lists thread block numbers");
            return false;
        }
        if (!tb_value(s, x->loc, v.items[i].i)) return false;
        pl->tbs[i] = (int)v.items[i].i;
        for (int j = 0; j < i; j++)
            if (pl->tbs[j] == pl->tbs[i]) {
                sema_error(s, x->loc, "thread block %d is listed twice in tbg()", pl->tbs[i]);
                return false;
            }
    }
    return true;
}

/* ---- op statements ------------------------------------------------------------------------------ */
static bool local_op(Sema *s, const Expr *call, const char *what, const Args *a, int rank_hint, OpSpec *sp) {
    Value dst, src;
    if (strcmp(what, "copy") == 0 || strcmp(what, "copy_packets") == 0 || strcmp(what, "unpack_packets") == 0) {
        if (!expect_args(s, call, what, a, 2, "dst, src", "")) return false;
        if (!chunk_arg(s, a->pos[0], &dst) || !chunk_arg(s, a->pos[1], &src)) return false;
        sp->kind = what[0] == 'c' ? (what[4] == 0 ? PLAN_OP_COPY : PLAN_OP_CPKT) : PLAN_OP_UPKT;
        if (sp->kind == PLAN_OP_CPKT && !is_scratch(s, a->pos[0], what, &dst, "packet destination")) return false;
        if (sp->kind == PLAN_OP_UPKT && !is_scratch(s, a->pos[1], what, &src, "packet source")) return false;
        if (!on_rank(s, a->pos[1], what, &src, dst.rank, "source", "local operations stay on one rank") ||
            !same_size(s, a->pos[1], what, &dst, &src, "source"))
            return false;
        sp->rank = dst.rank;
        add_entry(sp, false, E_LOCAL, &src);
        add_entry(sp, true, E_LOCAL, &dst);
    } else if (strcmp(what, "reduce") == 0 || strcmp(what, "reduce_packets") == 0) {
        bool pkt = what[6] != 0;
        const char *usage = pkt ? "dst, src, [packet srcs...]" : "dst, [srcs...]";
        if (!expect_args(s, call, what, a, pkt ? 3 : 2, usage, "op")) return false;
        if (!parse_redop(s, a, &sp->red)) return false;
        if (!chunk_arg(s, a->pos[0], &dst)) return false;
        sp->rank = dst.rank;
        if (pkt) {
            if (!chunk_arg(s, a->pos[1], &src)) return false;
            if (!on_rank(s, a->pos[1], what, &src, dst.rank, "source", "local operations stay on one rank") ||
                !same_size(s, a->pos[1], what, &dst, &src, "source"))
                return false;
            add_entry(sp, false, E_LOCAL, &src);
        }
        const Expr *lx = a->pos[pkt ? 2 : 1];
        Value *items;
        int n;
        if (!sema_eval_chunk_list(s, lx, &items, &n)) return false;
        if (n < 1 || n + sp->nsrc > PLAN_MAX_OP_ENTRIES) {
            sema_error(s, lx->loc, "'%s' takes 1..%d sources, not %d", what, PLAN_MAX_OP_ENTRIES - sp->nsrc, n);
            return false;
        }
        for (int i = 0; i < n; i++) {
            if (!on_rank(s, lx, what, &items[i], dst.rank, "source", "local operations stay on one rank") ||
                !same_size(s, lx, what, &dst, &items[i], "source") ||
                (pkt && !is_scratch(s, lx, what, &items[i], "packet source")))
                return false;
            add_entry(sp, false, E_LOCAL, &items[i]);
        }
        add_entry(sp, true, E_LOCAL, &dst);
        sp->kind = pkt ? PLAN_OP_REPKT : PLAN_OP_RE;
    } else {
        sema_error(s, call->a->loc, "unknown operation '%s'", what);
        return false;
    }
    if (rank_hint >= 0 && sp->rank != rank_hint) {
        sema_error(s, a->pos[0]->loc, "'rank(%d).%s': the destination is on rank %d", rank_hint, what, sp->rank);
        return false;
    }
    return true;
}

static bool need_kind(Sema *s, const Expr *call, const char *what, Channel *c, int kinds) {
    if (kinds & (1 << c->type)) return true;
    const char *want = kinds == (1 << PLAN_CHAN_PORT) ? "a port channel"
                       : kinds == (1 << PLAN_CHAN_MEMORY) ? "a memory channel"
                       : kinds == (1 << PLAN_CHAN_SWITCH) ? "a switch channel"
                                                          : "a memory or port channel";
    sema_error(s, call->loc, "'%s' needs %s, but '%s' is a %s channel", what, want, sema_chan_name(s, c),
               plan_chan_name(c->type));
    return false;
}

enum { K_MEM = 1 << PLAN_CHAN_MEMORY, K_PORT = 1 << PLAN_CHAN_PORT, K_SW = 1 << PLAN_CHAN_SWITCH };

static bool channel_op(Sema *s, const Expr *call, const char *what, const Args *a, Channel *c, OpSpec *sp) {
    sp->chan = c;
    Value dst, src;
    if (strcmp(what, "signal") == 0 || strcmp(what, "wait") == 0 || strcmp(what, "flush") == 0) {
        bool relaxed = false;
        for (int i = 0; i < a->npos; i++) {
            const char *w = sema_word(a->pos[i]);
            if (!w || strcmp(w, "relaxed") != 0 || relaxed || what[0] == 'f') {
                sema_error(s, a->pos[i]->loc, "'%s' takes only %s'sync = ...'", what,
                           what[0] == 'f' ? "" : "'relaxed' and ");
                return false;
            }
            relaxed = true;
        }
        if (!expect_args(s, call, what, a, a->npos, "", "sync")) return false;
        if (!need_kind(s, call, what, c, what[0] == 'f' ? K_PORT : K_MEM | K_PORT)) return false;
        if (relaxed && c->type != PLAN_CHAN_MEMORY) {
            sema_error(s, call->loc, "relaxed '%s' is only for memory channels ('%s' is a port channel)", what,
                       sema_chan_name(s, c));
            return false;
        }
        if (!parse_sync(s, a, &sp->data_sync)) return false;
        sp->kind = what[0] == 'f' ? PLAN_OP_FLUSH
                   : what[0] == 's' ? (relaxed ? PLAN_OP_RLXSIGNAL : PLAN_OP_SIGNAL)
                                    : (relaxed ? PLAN_OP_RLXWAIT : PLAN_OP_WAIT);
        sp->rank = c->src;
        sp->list_chan = true;
        sp->sync_op = true;
        return true;
    }
    if (c->type == PLAN_CHAN_SWITCH) {
        if (strcmp(what, "reduce") == 0) {
            if (!expect_args(s, call, what, a, 2, "dst, src", "op") || !parse_redop(s, a, &sp->red)) return false;
        } else if (strcmp(what, "broadcast") == 0 || strcmp(what, "broadcast_packets") == 0) {
            if (!expect_args(s, call, what, a, 2, "dst, src", "")) return false;
        } else {
            sema_error(s, call->loc, "switch channels have no operation '%s' (reduce, broadcast, broadcast_packets)",
                       what);
            return false;
        }
        if (!chunk_arg(s, a->pos[0], &dst) || !chunk_arg(s, a->pos[1], &src)) return false;
        const Value *mc = what[0] == 'r' ? &src : &dst;        /* the multicast side */
        const Expr *mx = what[0] == 'r' ? a->pos[1] : a->pos[0];
        int rank = mc->rank;
        if (c->index_of[rank] < 0) {
            sema_error(s, mx->loc, "'%s': rank %d is not a member of switch channel '%s'", what, rank, sema_chan_name(s, c));
            return false;
        }
        if (mc->type != c->buf) {
            sema_error(s, mx->loc, "'%s': switch channel '%s' is bound to the %s buffer, not %s", what, sema_chan_name(s, c),
                       plan_buf_long_name(c->buf), sema_buf_desc(s, mc->rank, mc->buf));
            return false;
        }
        const Expr *ox = what[0] == 'r' ? a->pos[0] : a->pos[1];
        const Value *ov = what[0] == 'r' ? &dst : &src;
        if (!on_rank(s, ox, what, ov, rank, what[0] == 'r' ? "destination" : "source",
                     "the rank that runs the switch operation") ||
            !same_size(s, a->pos[1], what, &dst, &src, "source"))
            return false;
        sp->rank = rank;
        if (what[0] == 'r') {
            sp->kind = PLAN_OP_GLRES;     /* the glre form of passes.h: src switch, dst local */
            add_entry(sp, false, E_SWITCH, &src);
            add_entry(sp, true, E_LOCAL, &dst);
        } else {
            bool pkt = what[9] != 0;
            if (pkt && (!is_scratch(s, a->pos[0], what, &dst, "packet destination") ||
                        !is_scratch(s, a->pos[1], what, &src, "packet source")))
                return false;
            sp->kind = pkt ? PLAN_OP_GSTOREPKT : PLAN_OP_GSTORE;
            add_entry(sp, false, E_LOCAL_RANK, &src);
            add_entry(sp, true, E_SWITCH, &dst);
        }
        return true;
    }
    sp->rank = c->src;
    static const struct {
        const char *name;
        PlanOpKind kind;
        int kinds;
    } xfer[] = {
        {"put", PLAN_OP_PUT, K_MEM | K_PORT},        {"get", PLAN_OP_GET, K_MEM},
        {"put_signal", PLAN_OP_PWS, K_PORT},         {"put_signal_flush", PLAN_OP_PWSF, K_PORT},
        {"put_packets", PLAN_OP_PPKT, K_MEM | K_PORT}, {"read_put_packets", PLAN_OP_RPPKT, K_MEM | K_PORT},
    };
    for (size_t i = 0; i < sizeof xfer / sizeof xfer[0]; i++) {
        if (strcmp(what, xfer[i].name) != 0) continue;
        if (!expect_args(s, call, what, a, 2, "dst, src", "")) return false;
        if (!need_kind(s, call, what, c, xfer[i].kinds)) return false;
        if (!chunk_arg(s, a->pos[0], &dst) || !chunk_arg(s, a->pos[1], &src)) return false;
        bool get = xfer[i].kind == PLAN_OP_GET;
        const Value *remote = get ? &src : &dst, *local = get ? &dst : &src;
        const Expr *rx = get ? a->pos[1] : a->pos[0], *lx = get ? a->pos[0] : a->pos[1];
        if (!on_rank(s, lx, what, local, c->src, get ? "destination" : "source", "the channel's source rank") ||
            !on_rank(s, rx, what, remote, c->dst, get ? "source" : "destination", "the channel's peer") ||
            !same_size(s, a->pos[1], what, &dst, &src, "source"))
            return false;
        if (xfer[i].kind == PLAN_OP_PPKT && !is_scratch(s, a->pos[0], what, &dst, "packet destination")) return false;
        /* a port channel's proxy copies packets as they are (spec §5.5): the source must already
         * be packets, i.e. scratch written by copy_packets (across nodes, hierarchical LL plans) */
        if (xfer[i].kind == PLAN_OP_PPKT && c->type == PLAN_CHAN_PORT &&
            !is_scratch(s, a->pos[1], what, &src, "source of a port channel's packets"))
            return false;
        if (xfer[i].kind == PLAN_OP_RPPKT && (!is_scratch(s, a->pos[0], what, &dst, "packet destination") ||
                                              !is_scratch(s, a->pos[1], what, &src, "packet source")))
            return false;
        sp->kind = xfer[i].kind;
        sp->list_chan = get || c->type == PLAN_CHAN_PORT;
        add_entry(sp, false, get ? E_REMOTE : E_LOCAL, &src);
        add_entry(sp, true, get ? E_LOCAL : E_REMOTE, &dst);
        return true;
    }
    if (strcmp(what, "reduce") == 0) {
        if (!expect_args(s, call, what, a, 3, "dst_local, src_local, [remote srcs...]", "op")) return false;
        if (!need_kind(s, call, what, c, K_MEM) || !parse_redop(s, a, &sp->red)) return false;
        if (!chunk_arg(s, a->pos[0], &dst) || !chunk_arg(s, a->pos[1], &src)) return false;
        if (!on_rank(s, a->pos[0], what, &dst, c->src, "destination", "the channel's source rank") ||
            !on_rank(s, a->pos[1], what, &src, c->src, "source", "the channel's source rank") ||
            !same_size(s, a->pos[1], what, &dst, &src, "source"))
            return false;
        Value *items;
        int n;
        if (!sema_eval_chunk_list(s, a->pos[2], &items, &n)) return false;
        if (n < 1 || n > PLAN_MAX_OP_ENTRIES - 1) {
            sema_error(s, a->pos[2]->loc, "'%s' takes 1..%d remote sources, not %d", what, PLAN_MAX_OP_ENTRIES - 1,
                       n);
            return false;
        }
        add_entry(sp, false, E_LOCAL, &src);
        for (int i = 0; i < n; i++) {
            if (!on_rank(s, a->pos[2], what, &items[i], c->dst, "remote source", "the channel's peer") ||
                !same_size(s, a->pos[2], what, &dst, &items[i], "remote source"))
                return false;
            add_entry(sp, false, E_REMOTE, &items[i]);
        }
        add_entry(sp, true, E_LOCAL, &dst);
        sp->kind = PLAN_OP_RRE;
        return true;
    }
    sema_error(s, call->loc, "%s channels have no operation '%s'", plan_chan_name(c->type), what);
    return false;
}

/* barrier = barrier(rank = r, tbs = [t0, t1, ...]) */
static void barrier_op(Sema *s, const Stmt *st, const Expr *call, const Args *a) {
    if (!expect_args(s, call, "barrier", a, 0, "rank = r, tbs = [...]", "rank tbs")) return;
    const Expr *rx = named(a, "rank"), *tx = named(a, "tbs");
    if (!rx || !tx) {
        sema_error(s, call->loc, "'barrier' needs 'rank = r' and 'tbs = [t0, t1, ...]'");
        return;
    }
    if (st->place) {
        sema_error(s, st->place->loc, "'barrier' takes its thread blocks from 'tbs', not a placement");
        return;
    }
    int64_t r;
    Value tl;
    if (!sema_eval_int(s, rx, &r)) return;
    if (r < 0 || r >= s->nranks) {
        sema_error(s, rx->loc, "rank %" PRId64 " is outside 0..%d (the program has %d ranks)", r, s->nranks - 1,
                   s->nranks);
        return;
    }
    if (!sema_eval(s, tx, &tl)) return;
    if (tl.kind != V_LIST || tl.n < 1) {
        sema_error(s, tx->loc, "'tbs' takes a non-empty list of thread blocks");
        return;
    }
    int *tbs = arena_must(s->arena, (size_t)tl.n * sizeof(int));
    for (int i = 0; i < tl.n; i++) {
        if (tl.items[i].kind != V_INT || !tb_value(s, tx->loc, tl.items[i].i)) {
            if (tl.items[i].kind != V_INT) sema_error(s, tx->loc, "'tbs' lists thread block numbers");
            return;
        }
        tbs[i] = (int)tl.items[i].i;
        for (int j = 0; j < i; j++)
            if (tbs[j] == tbs[i]) {
                sema_error(s, tx->loc, "thread block %d is listed twice in 'tbs'", tbs[i]);
                return;
            }
    }
    PlanOp op;
    if (tl.n == 1) {   /* one block: a block-level sync is all it needs */
        plan_op_init(&op, PLAN_OP_NOP);
        op.loc = st->loc.at;
        emit(s, st, (int)r, tbs[0], &op);
        return;
    }
    struct BarrierList *bl = &s->barriers[r];
    int id = -1;
    for (int b = 0; b < bl->n && id < 0; b++)
        if (bl->len[b] == tl.n && memcmp(bl->tbs[b], tbs, (size_t)tl.n * sizeof(int)) == 0) id = b;
    if (id < 0) {
        if (bl->n == PLAN_MAX_BARRIERS) {
            sema_error(s, call->loc, "rank %" PRId64 " needs more than %d distinct barriers (thread-block sets)", r,
                       PLAN_MAX_BARRIERS);
            return;
        }
        id = bl->n++;
        bl->len[id] = tl.n;
        bl->tbs[id] = tbs;
    }
    plan_op_init(&op, PLAN_OP_BARRIER);
    op.loc = st->loc.at;
    op.barrier_id = id;
    op.num_threadblocks = tl.n;
    for (int i = 0; i < tl.n; i++)
        if (!emit(s, st, (int)r, tbs[i], &op)) return;
}

/* op = postfix "(" args ")" ("@" placement)? */
void lower_op(Sema *s, const Stmt *st) {
    const Expr *call = st->e;
    if (call->kind != EX_CALL) {
        sema_error(s, st->loc, "expected an operation such as copy(dst, src) or c.put(dst, src)");
        return;
    }
    const Expr *callee = call->a;
    const char *what = callee->kind == EX_MEMBER ? callee->name : sema_word(callee);
    if (!what) {
        sema_error(s, callee->loc, "expected an operation name");
        return;
    }
    Args a;
    if (!split_args(s, call, what, &a)) return;
    OpSpec spec;   /* on the stack: op statements run millions of times in big programs */
    memset(&spec, 0, sizeof spec);
    OpSpec *sp = &spec;
    sp->what = what;
    sp->red = PLAN_RED_NONE;
    if (callee->kind == EX_NAME) {
        if (strcmp(what, "barrier") == 0) {
            barrier_op(s, st, call, &a);
            return;
        }
        if (strcmp(what, "pipeline") == 0) {
            sema_error(s, call->loc, "'pipeline(...)' needs a { block } of operations");
            return;
        }
        if (!local_op(s, call, what, &a, -1, sp)) return;
    } else {
        Value obj;
        if (!sema_eval(s, callee->a, &obj)) return;
        if (obj.kind == V_CHAN) {
            if (!channel_op(s, call, what, &a, obj.chan, sp)) return;
        } else if (obj.kind == V_SEM) {
            if (strcmp(what, "acquire") != 0 && strcmp(what, "release") != 0) {
                sema_error(s, call->loc, "semaphores have acquire() and release(), not '%s'", what);
                return;
            }
            if (!expect_args(s, call, what, &a, 0, "", "sync") || !parse_sync(s, &a, &sp->data_sync)) return;
            sp->kind = what[0] == 'a' ? PLAN_OP_SEM_ACQUIRE : PLAN_OP_SEM_RELEASE;
            sp->sem = obj.sem;
            sp->rank = obj.sem->rank;
            sp->sync_op = true;
        } else if (obj.kind == V_RANK) {
            if (!local_op(s, call, what, &a, obj.rank, sp)) return;
        } else {
            sema_error(s, callee->a->loc, "'%s' is not a channel, semaphore or rank", what);
            return;
        }
    }
    Placement pl;
    if (!placement(s, st->place, &pl)) return;
    if (pl.group && sp->sync_op) {
        sema_error(s, st->place->loc, "'%s' synchronises and runs in one thread block: use tb(t), not tbg()", what);
        return;
    }
    for (int i = 0; i < pl.n; i++)
        if (!build_emit(s, st, sp, pl.tbs[i], pl.group ? i : 0, pl.group ? pl.n : 0)) return;
}

/* pipeline = pipeline(unit = U, chunks = K) "{" stmts "}" */
void lower_pipeline(Sema *s, const Stmt *st) {
    const Expr *call = st->e;
    const char *w = call->kind == EX_CALL ? sema_word(call->a) : NULL;
    if (!w || strcmp(w, "pipeline") != 0) {
        sema_error(s, st->loc, "only pipeline(unit = U, chunks = K) takes a { block }");
        return;
    }
    if (s->in_pipeline) {
        sema_error(s, st->loc, "pipelines cannot be nested");
        return;
    }
    Args a;
    if (!split_args(s, call, "pipeline", &a) ||
        !expect_args(s, call, "pipeline", &a, 0, "unit = U, chunks = K", "unit chunks"))
        return;
    const Expr *ux = named(&a, "unit"), *cx = named(&a, "chunks");
    int64_t unit, chunks = 1;
    if (!ux) {
        sema_error(s, call->loc, "'pipeline' needs 'unit = BYTES'");
        return;
    }
    if (!sema_eval_int(s, ux, &unit) || (cx && !sema_eval_int(s, cx, &chunks))) return;
    if (unit < 1 || unit > UINT32_MAX) {
        sema_error(s, ux->loc, "pipeline unit %" PRId64 " is outside 1..%u bytes", unit, UINT32_MAX);
        return;
    }
    if (chunks < 1 || chunks > 1 << 24) {
        sema_error(s, cx->loc, "pipeline chunks %" PRId64 " is outside 1..%d", chunks, 1 << 24);
        return;
    }
    s->in_pipeline = true;
    s->pipe_unit = (uint64_t)unit;
    s->pipe_chunks = (uint32_t)chunks;
    s->pipe_loc = st->loc;
    s->npipes = 0;
    sema_exec_block(s, &st->body);
    s->in_pipeline = false;
    for (int i = 0; i < s->npipes; i++) {
        PipeSlot *p = &s->pipes[i];
        PlanTb *t = get_tb(s, st, p->rank, p->tb);
        if (t && !plan_tb_append(t, &p->op)) sema_error(s, st->loc, "out of memory");
        plan_op_release(&p->op);
    }
    s->npipes = 0;
}

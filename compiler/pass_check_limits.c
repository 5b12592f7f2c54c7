/*
 * pass_check_limits.c - the executor's hard limits (spec §2.8), which MSCCL++ mostly does not
 * check (64 operations per thread block only for --target mscclpp: libmscclrt's generated
 * kernels keep no op table), and the plans it would silently misread (§9): TB ids that are not positions, memory
 * puts over different source buffers, standalone glre, gets with different indices (offset swap),
 * packets in a non-LL scratch, offsets past 4 GiB, pipeline counts past uint16, barrier misuse.
 * Runs on the final (replicated) plan; every finding is a located error and all are reported.
 */
#include "passes.h"

#include <stdlib.h>

typedef struct {
    const Plan *p;
    Diag *d;
    int r, t;            /* rank and TB being checked */
    bool ok;
    bool have_chunk;     /* chunk_bytes is known (finite max_message_size) */
    uint64_t chunk_bytes;
    int long_tbs;        /* thread blocks past MSCCL++'s ops limit (reported once, at the first) */
    int long_ranks;      /* ranks with such a thread block */
    PlanLoc long_at;     /* the op reported */
    PlanLoc *seen;       /* owned; statements that already have an error: a statement in a loop
                            repeats on every rank, and is reported once, as sema does */
    const void **seen_key; /* owned; [nseen] the op (or thread block) it was reported for */
    const PlanOp *cur_op;  /* the op being checked, NULL for thread-block checks */
    int nseen, capseen;
} Ctx;

/* Whether a failure at `loc` is reported: always for an unlocated one, and for the first op
 * (or thread block) that fails there: its several problems are all reported, the same
 * statement failing again in other thread blocks or on other ranks is not. */
static const PlanTb *cur_tb(const Ctx *c) {
    return &c->p->gpus[c->r].tbs[c->t];
}

static bool first_at(Ctx *c, PlanLoc loc) {
    if (loc.line <= 0) return true;
    const void *key = c->cur_op ? (const void *)c->cur_op : (const void *)cur_tb(c);
    for (int i = 0; i < c->nseen; i++)
        if (c->seen[i].line == loc.line && c->seen[i].col == loc.col)
            return c->seen_key[i] == key;
    if (c->nseen == c->capseen) {
        int cap = c->capseen ? 2 * c->capseen : 16;
        PlanLoc *n = realloc(c->seen, (size_t)cap * sizeof *n);
        if (!n) return true;
        c->seen = n;
        const void **nk = realloc(c->seen_key, (size_t)cap * sizeof *nk);
        if (!nk) return true;
        c->seen_key = nk;
        c->capseen = cap;
    }
    c->seen_key[c->nseen] = key;
    c->seen[c->nseen++] = loc;
    return true;
}

#define FAIL(c, loc, ...) do { if (first_at((c), (loc))) diag_error((c)->d, (loc), __VA_ARGS__); \
                               (c)->ok = false; } while (0)


/* The buffer behind an entry (local type, remote owner's type, switch buffer); false if the
 * entry does not resolve (reported elsewhere). */
static bool entry_buf(const Ctx *c, const PlanOp *op, const PlanRef *e, int *owner, PlanBuf *buf) {
    const PlanGpu *g = &c->p->gpus[c->r];
    switch (e->kind) {
    case PLAN_REF_LOCAL:
        *owner = c->r;
        *buf = e->type;
        return (unsigned)e->type < PLAN_BUF_COUNT;
    case PLAN_REF_REMOTE:
        return pass_remote_target(c->p, c->r, cur_tb(c), op, e, owner, buf);
    case PLAN_REF_SWITCH: {
        int s = pass_gpu_channel(g, cur_tb(c), PLAN_CHAN_SWITCH, e->id);
        if (s < 0) return false;
        *owner = c->r;
        *buf = g->switches[s].buf;
        return true;
    }
    }
    return false;
}

static void check_entry(Ctx *c, const PlanOp *op, const PlanRef *e, const char *side, int k) {
    const PlanTb *tb = cur_tb(c);
    const char *on = plan_op_name(op->kind);
    if (e->kind == PLAN_REF_REMOTE) {
        if (op->chan_type != PLAN_CHAN_MEMORY && op->chan_type != PLAN_CHAN_PORT) {
            FAIL(c, op->loc, "%s: remote %s entry %d needs a memory or port channel type, not '%s'",
                 on, side, k, plan_chan_name(op->chan_type));
            return;
        }
        int a = (int)op->chan_type;
        if (e->id < 0 || e->id >= tb->nremote[a]) {
            FAIL(c, op->loc, "%s: remote %s entry %d uses buffer_id %d but rank %d tb %d has %d %s "
                 "remote buffer reference%s", on, side, k, e->id, c->r, c->t, tb->nremote[a],
                 plan_chan_name(op->chan_type), tb->nremote[a] == 1 ? "" : "s");
            return;
        }
        int b = tb->remote[a][e->id];
        const PlanGpu *g = &c->p->gpus[c->r];
        if (b < 0 || b >= g->nremotes || !g->remotes[b].access[a]) {
            FAIL(c, op->loc, "%s: remote %s entry %d refers to remote buffer %d of rank %d, which "
                 "is not declared for %s access", on, side, k, b, c->r, plan_chan_name(op->chan_type));
            return;
        }
    } else if (e->kind == PLAN_REF_SWITCH) {
        if (pass_gpu_channel(&c->p->gpus[c->r], tb, PLAN_CHAN_SWITCH, e->id) < 0) {
            FAIL(c, op->loc, "%s: switch %s entry %d uses switch channel %d but rank %d tb %d has "
                 "%d", on, side, k, e->id, c->r, c->t, tb->nchan[PLAN_CHAN_SWITCH]);
            return;
        }
    }
    /* §3.7: in place, the input of an allgather lies inside the output (and the output of a
     * reducescatter inside the input) at a rank-dependent offset, which the executor adds to
     * every remote and multicast address of that buffer type (§3.4, §9.8) */
    int owner;
    PlanBuf buf;
    if (c->p->inplace && e->kind != PLAN_REF_LOCAL && entry_buf(c, op, e, &owner, &buf)) {
        PlanBuf bad = c->p->collective == PLAN_COLL_ALLGATHER       ? PLAN_BUF_INPUT
                      : c->p->collective == PLAN_COLL_REDUCESCATTER ? PLAN_BUF_OUTPUT
                                                                    : PLAN_BUF_COUNT;
        if (buf == bad)
            FAIL(c, op->loc, "%s: %s entry %d reaches the %s buffer of rank %d through a %s; in an "
                 "in-place %s that buffer starts at a rank-dependent offset, which the executor "
                 "adds on this rank's side, so the address would be wrong; use the %s buffer "
                 "(mscclrt-run(1), --inplace, shows the in-place layouts)", on, side, k,
                 plan_buf_long_name(buf), owner,
                 e->kind == PLAN_REF_REMOTE ? "channel" : "switch channel",
                 plan_coll_name(c->p->collective), plan_buf_long_name(bad == PLAN_BUF_INPUT ? PLAN_BUF_OUTPUT : PLAN_BUF_INPUT));
    }
    /* §2.8: byte offsets inside an op are uint32 (the runtime keeps this limit too: it bounds
     * the buffers and scratch it allocates for a call, plan_geom) */
    if (c->have_chunk) {
        uint64_t end = ((uint64_t)e->index + e->size) * c->chunk_bytes;
        if (end > UINT32_MAX)
            FAIL(c, op->loc, "%s: %s entry %d ends at byte %llu at the largest message size: the "
                 "executor keeps offsets in 32 bits", on, side, k, (unsigned long long)end);
    }
}

/* §4.4: packet space is twice the data space; only an LL plan doubles the scratch. */
static void check_packet_entry(Ctx *c, const PlanOp *op, const PlanRef *e) {
    int owner;
    PlanBuf buf;
    if (!entry_buf(c, op, e, &owner, &buf)) return;
    if (e->kind == PLAN_REF_SWITCH) return;   /* multicast: every member's scratch, same layout */
    if (buf != PLAN_BUF_SCRATCH) {
        FAIL(c, op->loc, "%s: LL packets must live in scratch, but this entry is in the %s buffer "
             "of rank %d", plan_op_name(op->kind), plan_buf_long_name(buf), owner);
        return;
    }
    uint64_t need = ((uint64_t)e->index + e->size) * (c->p->protocol_ll ? 1 : 2);
    uint64_t have = c->p->gpus[owner].scratch_chunks;
    if (need > have)
        FAIL(c, op->loc, "%s: packets for scratch chunks [%u, %u) of rank %d need %llu chunks of "
             "scratch but %s%llu", plan_op_name(op->kind), e->index, e->index + e->size, owner,
             (unsigned long long)need,
             c->p->protocol_ll ? "" : "the protocol is not LL, so scratch is not doubled: ",
             (unsigned long long)have);
}

static void check_op(Ctx *c, const PlanOp *op, bool inner) {
    const PlanTb *tb = cur_tb(c);
    c->cur_op = op;
    const PlanGpu *g = &c->p->gpus[c->r];
    const char *on = plan_op_name(op->kind);
    if ((unsigned)op->kind >= PLAN_OP_COUNT) {
        FAIL(c, op->loc, "rank %d tb %d: invalid op kind %d", c->r, c->t, (int)op->kind);
        return;
    }
    if (op->nchan < 0 || op->nchan > PLAN_MAX_OP_CHANNELS)
        FAIL(c, op->loc, "%s uses %d channels; the executor supports at most %d per op", on,
             op->nchan, PLAN_MAX_OP_CHANNELS);
    if (op->nsrc < 0 || op->nsrc > PLAN_MAX_OP_ENTRIES || op->ndst < 0 || op->ndst > PLAN_MAX_OP_ENTRIES)
        FAIL(c, op->loc, "%s has %d source and %d destination entries; the executor supports at "
             "most %d each", on, op->nsrc, op->ndst, PLAN_MAX_OP_ENTRIES);
    if (op->nsem < 0 || op->nsem > PLAN_MAX_OP_SEMAPHORES)
        FAIL(c, op->loc, "%s uses %d semaphores; the executor supports at most %d per op", on,
             op->nsem, PLAN_MAX_OP_SEMAPHORES);
    if (op->nchan < 0 || op->nchan > PLAN_MAX_OP_CHANNELS || op->nsrc < 0 ||
        op->nsrc > PLAN_MAX_OP_ENTRIES || op->ndst < 0 || op->ndst > PLAN_MAX_OP_ENTRIES ||
        op->nsem < 0 || op->nsem > PLAN_MAX_OP_SEMAPHORES)
        return;   /* the arrays below cannot be trusted */
    /* channel ids index the TB's table of the op's channel type */
    if (op->nchan > 0) {
        if (op->chan_type == PLAN_CHAN_NONE) {
            FAIL(c, op->loc, "%s lists channel ids but has no channel type", on);
        } else {
            for (int i = 0; i < op->nchan; i++)
                if (pass_gpu_channel(g, tb, op->chan_type, op->chan_ids[i]) < 0) {
                    FAIL(c, op->loc, "%s uses %s channel %d of rank %d tb %d, which has %d", on,
                         plan_chan_name(op->chan_type), op->chan_ids[i], c->r, c->t,
                         tb->nchan[op->chan_type]);
                    break;
                }
        }
    }
    if (op->tbg_size < 0 || (op->tbg_size > 0 && (op->tbg_id < 0 || op->tbg_id >= op->tbg_size)))
        FAIL(c, op->loc, "%s: thread-block group member %d of %d is out of range", on, op->tbg_id,
             op->tbg_size);
    for (int i = 0; i < op->nsrc; i++) check_entry(c, op, &op->src[i], "source", i);
    for (int i = 0; i < op->ndst; i++) check_entry(c, op, &op->dst[i], "destination", i);
    int idx[PLAN_MAX_OP_ENTRIES];
    int n = pass_packet_reads(op, idx);
    for (int i = 0; i < n; i++) check_packet_entry(c, op, &op->src[idx[i]]);
    n = pass_packet_writes(op, idx);
    for (int i = 0; i < n; i++) check_packet_entry(c, op, &op->dst[idx[i]]);

    switch (op->kind) {
    case PLAN_OP_SIGNAL: case PLAN_OP_RLXSIGNAL: case PLAN_OP_WAIT: case PLAN_OP_RLXWAIT:
    case PLAN_OP_FLUSH:
        if (op->chan_type != PLAN_CHAN_MEMORY && op->chan_type != PLAN_CHAN_PORT)
            FAIL(c, op->loc, "%s needs a memory or port channel, not '%s'", on,
                 plan_chan_name(op->chan_type));
        else if (op->kind == PLAN_OP_FLUSH && op->chan_type != PLAN_CHAN_PORT)
            FAIL(c, op->loc, "flush works on port channels only");
        if (op->nchan == 0) FAIL(c, op->loc, "%s names no channel", on);
        break;
    case PLAN_OP_SEM_ACQUIRE: case PLAN_OP_SEM_RELEASE:
        if (op->nsem == 0) FAIL(c, op->loc, "%s names no semaphore", on);
        for (int i = 0; i < op->nsem; i++)
            if (op->sem_ids[i] < 0 || op->sem_ids[i] >= g->nsems) {
                FAIL(c, op->loc, "%s uses semaphore %d but rank %d declares %d", on, op->sem_ids[i],
                     c->r, g->nsems);
                break;
            }
        break;
    case PLAN_OP_BARRIER:
        if (op->barrier_id < 0 || op->barrier_id >= PLAN_MAX_BARRIERS)
            FAIL(c, op->loc, "barrier id %d is out of range: the executor has %d barriers (ids 0 "
                 "to %d)", op->barrier_id, PLAN_MAX_BARRIERS, PLAN_MAX_BARRIERS - 1);
        if (op->num_threadblocks < 1 || op->num_threadblocks > g->ntbs)
            FAIL(c, op->loc, "barrier %d waits for %d thread blocks but rank %d has %d",
                 op->barrier_id, op->num_threadblocks, c->r, g->ntbs);
        break;
    case PLAN_OP_PUT: case PLAN_OP_PWS: case PLAN_OP_PWSF: case PLAN_OP_PPKT: case PLAN_OP_RPPKT:
        if (op->chan_type != PLAN_CHAN_MEMORY && op->chan_type != PLAN_CHAN_PORT) {
            FAIL(c, op->loc, "%s needs a memory or port channel, not '%s'", on,
                 plan_chan_name(op->chan_type));
            break;
        }
        if (op->nsrc == 0 || op->ndst == 0) FAIL(c, op->loc, "%s has no source or no destination", on);
        if (op->kind != PLAN_OP_RPPKT && op->nsrc != op->ndst)
            FAIL(c, op->loc, "%s pairs %d sources with %d destinations", on, op->nsrc, op->ndst);
        if (op->chan_type == PLAN_CHAN_PORT && op->nchan < op->ndst)
            FAIL(c, op->loc, "port %s: thread t pushes destination t on channel t, but there are "
                 "%d destinations and %d channel ids", on, op->ndst, op->nchan);
        if ((op->kind == PLAN_OP_PWS || op->kind == PLAN_OP_PWSF) && op->chan_type == PLAN_CHAN_MEMORY)
            FAIL(c, op->loc, "%s on a memory channel is a plain put: the executor sends the signal "
                 "of pws and pwsf (put_signal in coll(5), Operations) only on port channels; on "
                 "a memory channel, put and then signal", on);
        if (op->chan_type == PLAN_CHAN_MEMORY && op->kind != PLAN_OP_RPPKT)
            for (int i = 1; i < op->nsrc; i++)
                if (op->src[i].kind != op->src[0].kind || op->src[i].type != op->src[0].type) {
                    FAIL(c, op->loc, "%s reads source %d from the %s buffer but source 0 from the "
                         "%s buffer: the executor reads every source of a memory put from "
                         "source 0's buffer", on,
                         i, plan_buf_long_name(op->src[i].type), plan_buf_long_name(op->src[0].type));
                    break;
                }
        break;
    case PLAN_OP_GET:
        if (op->chan_type != PLAN_CHAN_MEMORY) FAIL(c, op->loc, "get works on memory channels only");
        if (op->nsrc != op->ndst) FAIL(c, op->loc, "get pairs %d sources with %d destinations", op->nsrc, op->ndst);
        for (int i = 0; i < op->nsrc && i < op->ndst; i++)
            if (op->src[i].index != op->dst[i].index) {
                FAIL(c, op->loc, "get copies remote chunk %u into local chunk %u: the executor "
                     "swaps the local and remote offsets of a get, so both sides must use the same "
                     "index",
                     op->src[i].index, op->dst[i].index);
                break;
            }
        break;
    case PLAN_OP_GLRES:
        if (pass_is_glre(op))
            FAIL(c, op->loc, "switch reduce is not followed by a broadcast of its result to the "
                 "same switch channel, so it cannot become a glres; the executor has no "
                 "standalone switch reduce (glre): follow sw.reduce(dst, src) with "
                 "sw.broadcast(dst, dst) in the same thread block (coll(5), Operations)");
        else if (op->nsrc != 1 || op->ndst != 1 || op->src[0].kind != PLAN_REF_SWITCH ||
                 op->dst[0].kind != PLAN_REF_SWITCH)
            FAIL(c, op->loc, "glres needs one switch source and one switch destination");
        break;
    case PLAN_OP_PIPELINE:
        if (inner) {
            FAIL(c, op->loc, "nested pipeline: the executor flattens only one level of pipelines "
                 "(mscclrt-plan(5), Operations)");
            break;
        }
        if (op->unit_size == 0 || op->unit_size > UINT32_MAX) {
            FAIL(c, op->loc, "pipeline unit size %llu is out of range (1 to 4294967295 bytes)",
                 (unsigned long long)op->unit_size);
            break;
        }
        uint64_t it;
        if (pass_pipeline_max_iterations(c->p, c->r, op, &it) && it > PLAN_MAX_PIPELINE_ITER)
            FAIL(c, op->loc, "pipeline runs up to %llu iterations at the largest message size; the "
                 "device reads the count as 16 bits (at most %d)", (unsigned long long)it,
                 PLAN_MAX_PIPELINE_ITER);
        for (int i = 0; i < op->ninner; i++) check_op(c, &op->inner[i], true);
        c->cur_op = op;
        break;
    default:
        break;
    }
}

/* §5.2: all TBs using a barrier id must give the same count, and that many must use it. */
static void check_barriers(Ctx *c, const PlanGpu *g) {
    for (int id = 0; id < PLAN_MAX_BARRIERS; id++) {
        int count = -1, users = 0;
        PlanLoc first = {0, 0};
        for (int t = 0; t < g->ntbs; t++) {
            bool used = false;
            for (int i = 0; i < g->tbs[t].nops; i++) {
                const PlanOp *top = &g->tbs[t].ops[i];
                int nsub = top->kind == PLAN_OP_PIPELINE ? top->ninner : 1;
                for (int j = 0; j < nsub; j++) {
                    const PlanOp *op = top->kind == PLAN_OP_PIPELINE ? &top->inner[j] : top;
                    if (op->kind != PLAN_OP_BARRIER || op->barrier_id != id) continue;
                    used = true;
                    if (count < 0) {
                        count = op->num_threadblocks;
                        first = op->loc;
                    } else if (op->num_threadblocks != count) {
                        c->ok = false;
                        c->cur_op = op;
                        if (first_at(c, op->loc)) {
                            diag_error(c->d, op->loc, "barrier %d of rank %d waits for %d thread "
                                       "blocks here but for %d elsewhere", id, c->r,
                                       op->num_threadblocks, count);
                            diag_note(c->d, first, "barrier %d first used here", id);
                        }
                        return;
                    }
                }
            }
            users += used;
        }
        c->cur_op = NULL;
        if (count > 0 && users != count) {
            FAIL(c, first, "barrier %d of rank %d waits for %d thread block%s but %d thread "
                 "block%s use it", id, c->r, count, count == 1 ? "" : "s", users,
                 users == 1 ? "" : "s");
        }
    }
}

bool pass_check_limits(const Plan *p, Diag *d) {
    Ctx c = {.p = p, .d = d, .ok = true};
    PlanLoc none = {0, 0};
    if (p->threads < 1 || p->threads > PLAN_MAX_THREADS)
        FAIL(&c, none, "%d threads per block: the executor launches 1 to %d", p->threads,
             PLAN_MAX_THREADS);
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        c.r = r;
        c.have_chunk = pass_max_chunk_bytes(p, r, &c.chunk_bytes);
        bool rank_long = false;
        if (g->id != r) FAIL(&c, none, "gpus[%d] has id %d: the executor indexes by position", r, g->id);
        if (g->input_chunks == 0 || g->output_chunks == 0)
            FAIL(&c, none, "rank %d has %u input and %u output chunks: the executor divides the "
                 "message size by both, so neither may be 0", r, g->input_chunks, g->output_chunks);
        for (int t = 0; t < g->ntbs; t++) {
            const PlanTb *tb = &g->tbs[t];
            c.t = t;
            c.cur_op = NULL;
            PlanLoc at = tb->nops > 0 ? tb->ops[0].loc : none;
            if (tb->id != t)
                FAIL(&c, at, "rank %d: thread block at position %d has id %d; the executor runs "
                     "block b from position b but indexes its channels by id, so the two must "
                     "agree (mscclrt-plan(5): thread block t has id t)", r, t,
                     tb->id);
            for (int ty = 0; ty < PLAN_CHAN_TYPES; ty++) {
                if (tb->nchan[ty] > PLAN_MAX_TB_CHANNELS)
                    FAIL(&c, at, "rank %d tb %d uses %d %s channels; the executor supports %d", r,
                         t, tb->nchan[ty], plan_chan_name((PlanChanType)ty), PLAN_MAX_TB_CHANNELS);
                int have = ty == PLAN_CHAN_SWITCH ? g->nswitch : g->npeers[ty];
                for (int k = 0; k < tb->nchan[ty] && k < PLAN_MAX_TB_CHANNELS; k++)
                    if (tb->chan[ty][k] < 0 || tb->chan[ty][k] >= have) {
                        FAIL(&c, at, "rank %d tb %d refers to %s channel %d but the rank declares "
                             "%d", r, t, plan_chan_name((PlanChanType)ty), tb->chan[ty][k], have);
                        break;
                    }
            }
            for (int a = 0; a < PLAN_REMOTE_TYPES; a++) {
                if (tb->nremote[a] > PLAN_MAX_TB_REMOTES)
                    FAIL(&c, at, "rank %d tb %d uses %d %s remote buffers; the executor supports "
                         "%d", r, t, tb->nremote[a], plan_chan_name((PlanChanType)a),
                         PLAN_MAX_TB_REMOTES);
                for (int k = 0; k < tb->nremote[a] && k < PLAN_MAX_TB_REMOTES; k++)
                    if (tb->remote[a][k] < 0 || tb->remote[a][k] >= g->nremotes) {
                        FAIL(&c, at, "rank %d tb %d refers to remote buffer %d but the rank "
                             "declares %d", r, t, tb->remote[a][k], g->nremotes);
                        break;
                    }
            }
            /* MSCCL++'s executor keeps at most 64 operations per thread block in a fixed
             * array; our generated kernels have none, so only --target mscclpp checks it. Loops
             * repeat one statement on every rank: report it once, with the count, and a way out */
            int flat = 0;
            for (int i = 0; i < tb->nops; i++) {
                int before = flat;
                flat += 1 + (tb->ops[i].kind == PLAN_OP_PIPELINE ? tb->ops[i].ninner : 0);
                if (p->target == PLAN_TARGET_MSCCLPP && before <= PLAN_MAX_OPS_PER_TB &&
                    flat > PLAN_MAX_OPS_PER_TB) {
                    if (c.long_tbs++ == 0) c.long_at = tb->ops[i].loc;
                    if (c.long_tbs == 1)
                        FAIL(&c, tb->ops[i].loc, "rank %d tb %d: this op brings the thread block to "
                             "%d operations (after flattening pipelines and adding the compiler's "
                             "synchronisation nops); MSCCL++'s executor (--target mscclpp) supports "
                             "%d per thread block", r, t, plan_tb_flat_ops(tb), PLAN_MAX_OPS_PER_TB);
                    if (!rank_long) c.long_ranks++;
                    rank_long = true;
                }
                check_op(&c, &tb->ops[i], false);
            }
        }
                check_barriers(&c, g);
    }
    if (c.long_tbs > 0) {
        PlanLoc at = c.long_at;
        if (c.long_tbs > 1)
            diag_note(d, at, "%d thread block%s on %d rank%s exceed%s the limit", c.long_tbs,
                      c.long_tbs == 1 ? "" : "s", c.long_ranks, c.long_ranks == 1 ? "" : "s",
                      c.long_tbs == 1 ? "s" : "");
        diag_note(d, at, "spread the operations over more thread blocks with '@ tb(...)', or "
                  "compile for libmscclrt (--target mscclrt, the default), which has no such limit");
    }
    free(c.seen);
    free(c.seen_key);
    return c.ok;
}

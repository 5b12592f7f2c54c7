/*
 * pass_util.c - small queries over the plan model shared by the passes (passes.h): op classes,
 * entry equality, channel and remote-buffer resolution with the §6.2 pairing rule, and the
 * pipeline iteration bound of §3.6. Pure functions; no state.
 */
#include "passes.h"

bool pass_is_glre(const PlanOp *op) {
    return op->kind == PLAN_OP_GLRES && op->ndst >= 1 && op->dst[0].kind == PLAN_REF_LOCAL;
}

bool pass_is_sync_op(PlanOpKind k) {
    switch (k) {
    case PLAN_OP_SIGNAL: case PLAN_OP_RLXSIGNAL: case PLAN_OP_WAIT: case PLAN_OP_RLXWAIT:
    case PLAN_OP_FLUSH: case PLAN_OP_SEM_ACQUIRE: case PLAN_OP_SEM_RELEASE:
        return true;
    default:
        return false;
    }
}

bool pass_ref_eq(const PlanRef *a, const PlanRef *b) {
    if (a->kind != b->kind || a->index != b->index || a->size != b->size) return false;
    if (a->kind == PLAN_REF_LOCAL) return a->type == b->type;
    return a->id == b->id;
}

int pass_gpu_channel(const PlanGpu *g, const PlanTb *tb, PlanChanType t, int local) {
    if ((unsigned)t >= PLAN_CHAN_TYPES || local < 0 || local >= tb->nchan[t]) return -1;
    int c = tb->chan[t][local];
    int n = t == PLAN_CHAN_SWITCH ? g->nswitch : g->npeers[t];
    return c >= 0 && c < n ? c : -1;
}

int pass_paired_channel(const Plan *p, int r, PlanChanType t, int ch, int *peer) {
    *peer = -1;
    if (t != PLAN_CHAN_MEMORY && t != PLAN_CHAN_PORT) return -1;
    if (r < 0 || r >= p->ngpus) return -1;
    const PlanGpu *g = &p->gpus[r];
    if (ch < 0 || ch >= g->npeers[t]) return -1;
    int q = g->peers[t][ch];
    if (q < 0 || q >= p->ngpus) return -1;
    *peer = q;
    int k = 0;   /* occurrence number of q in r's list before ch */
    for (int i = 0; i < ch; i++)
        if (g->peers[t][i] == q) k++;
    const PlanGpu *h = &p->gpus[q];
    for (int i = 0; i < h->npeers[t]; i++)
        if (h->peers[t][i] == r && k-- == 0) return i;
    return -1;
}

bool pass_remote_target(const Plan *p, int r, const PlanTb *tb, const PlanOp *op,
                        const PlanRef *ref, int *owner, PlanBuf *type) {
    if (ref->kind != PLAN_REF_REMOTE) return false;
    if (op->chan_type != PLAN_CHAN_MEMORY && op->chan_type != PLAN_CHAN_PORT) return false;
    int a = (int)op->chan_type;
    if (ref->id < 0 || ref->id >= tb->nremote[a]) return false;
    int b = tb->remote[a][ref->id];
    const PlanGpu *g = &p->gpus[r];
    if (b < 0 || b >= g->nremotes) return false;
    *owner = g->remotes[b].rank;
    *type = g->remotes[b].type;
    return *owner >= 0 && *owner < p->ngpus;
}

int pass_packet_reads(const PlanOp *op, int *src_idx) {
    int n = 0;
    switch (op->kind) {
    case PLAN_OP_UPKT: case PLAN_OP_RPPKT: case PLAN_OP_GSTOREPKT:
        if (op->nsrc >= 1) src_idx[n++] = 0;
        break;
    case PLAN_OP_REPKT: case PLAN_OP_RESPKT: case PLAN_OP_RECPKT: case PLAN_OP_RECSPKT:
        for (int i = 1; i < op->nsrc && i < PLAN_MAX_OP_ENTRIES; i++)
            if (op->src[i].kind == PLAN_REF_LOCAL) src_idx[n++] = i;
        break;
    default:
        break;
    }
    return n;
}

int pass_packet_writes(const PlanOp *op, int *dst_idx) {
    int n = 0, from = 0;
    switch (op->kind) {
    case PLAN_OP_CPKT: case PLAN_OP_GSTOREPKT:
        if (op->ndst >= 1) dst_idx[n++] = 0;
        return n;
    case PLAN_OP_PPKT: case PLAN_OP_RPPKT:
        from = 0;
        break;
    case PLAN_OP_RESPKT: case PLAN_OP_RECPKT: case PLAN_OP_RECSPKT:
        from = 1;   /* dst[0] is the plain result; recpkt/recspkt: dst[1] local packets */
        break;
    default:
        return 0;
    }
    for (int i = from; i < op->ndst && i < PLAN_MAX_OP_ENTRIES; i++) dst_idx[n++] = i;
    return n;
}

bool pass_max_chunk_bytes(const Plan *p, int r, uint64_t *out) {
    if (p->max_size == UINT64_MAX || r < 0 || r >= p->ngpus) return false;
    const PlanGpu *g = &p->gpus[r];
    /* the checked size is the output for allgather and gather, else the input (§3.2); per-chunk
     * bytes are the same whichever pair (§3.3) the executor uses, since it checks they agree */
    bool ag = p->collective == PLAN_COLL_ALLGATHER || p->collective == PLAN_COLL_GATHER;
    uint64_t chunks = ag ? g->output_chunks : g->input_chunks;
    if (chunks == 0) chunks = g->input_chunks ? g->input_chunks : g->output_chunks;
    if (chunks == 0) return false;
    uint64_t a = p->alignment ? p->alignment : 16;
    uint64_t units = p->max_size / a;
    *out = (units / chunks + (units % chunks != 0)) * a;   /* ⌈(S/A)/C⌉·A */
    return true;
}

bool pass_pipeline_max_iterations(const Plan *p, int r, const PlanOp *pipe, uint64_t *out) {
    uint64_t ub;
    if (pipe->kind != PLAN_OP_PIPELINE || pipe->unit_size == 0) return false;
    if (!pass_max_chunk_bytes(p, r, &ub)) return false;
    uint64_t k = pipe->num_chunks;
    if (k != 0 && ub > UINT64_MAX / k) {
        *out = UINT64_MAX;
        return true;
    }
    uint64_t total = k * ub;
    *out = total / pipe->unit_size + (total % pipe->unit_size != 0);
    return true;
}

/* The GPU-level channels op signals (want_signal) or waits on, once per channel-id entry; the
 * channel type in *t. pws/pwsf signal only on port channels (thread t pushes a trigger with the
 * flag bit on channel c_t, spec §5.5); on a memory channel they are plain puts (§5.4). An
 * invalid channel index is skipped: it is pass_check_limits' business. */
int pass_sync_channels(const PlanGpu *g, const PlanTb *tb, const PlanOp *op, bool want_signal,
                       int *ch, PlanChanType *t) {
    *t = op->chan_type;
    if (*t != PLAN_CHAN_MEMORY && *t != PLAN_CHAN_PORT) return 0;
    int n;
    switch (op->kind) {
    case PLAN_OP_SIGNAL: case PLAN_OP_RLXSIGNAL:
        if (!want_signal) return 0;
        n = op->nchan;
        break;
    case PLAN_OP_PWS: case PLAN_OP_PWSF:
        if (!want_signal || *t != PLAN_CHAN_PORT) return 0;
        n = op->nchan < op->ndst ? op->nchan : op->ndst;
        break;
    case PLAN_OP_WAIT: case PLAN_OP_RLXWAIT:
        if (want_signal) return 0;
        n = op->nchan;
        break;
    default:
        return 0;
    }
    int k = 0;
    for (int i = 0; i < n && i < PLAN_MAX_OP_CHANNELS; i++) {
        int c = pass_gpu_channel(g, tb, *t, op->chan_ids[i]);
        if (c >= 0) ch[k++] = c;
    }
    return k;
}

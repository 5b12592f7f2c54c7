/*
 * plan_model.c - construction, copying and freeing of the shared plan model (plan.h),
 * plus the name tables of ops, buffers, channel types, collectives and operators.
 * The compiler builds plans with these calls; the loader fills the same structs from JSON.
 */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

static const struct { const char *name; int flags; } op_table[] = {
#define OP(e, name, flags) {name, flags},
#include "ops.def"
#undef OP
};

const char *plan_op_name(PlanOpKind k) {
    return (unsigned)k < PLAN_OP_COUNT ? op_table[k].name : "?";
}

int plan_op_flags(PlanOpKind k) {
    return (unsigned)k < PLAN_OP_COUNT ? op_table[k].flags : 0;
}

bool plan_op_from_name(const char *s, PlanOpKind *out) {
    for (int k = 0; k < PLAN_OP_COUNT; k++)
        if (strcmp(s, op_table[k].name) == 0) {
            *out = (PlanOpKind)k;
            return true;
        }
    return false;
}

const char *plan_buf_name(PlanBuf b) {
    static const char *n[] = {"i", "o", "s"};
    return (unsigned)b < PLAN_BUF_COUNT ? n[b] : "?";
}

const char *plan_buf_long_name(PlanBuf b) {
    static const char *n[] = {"input", "output", "scratch"};
    return (unsigned)b < PLAN_BUF_COUNT ? n[b] : "?";
}

const char *plan_chan_name(PlanChanType t) {
    static const char *n[] = {"memory", "port", "switch", "none"};
    return (unsigned)t <= PLAN_CHAN_NONE ? n[t] : "?";
}

static const char *coll_names[PLAN_COLL_COUNT] = {
    "allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "sendrecv", "test", "custom",
    "reduce", "gather", "scatter",
};

const char *plan_target_name(PlanTarget t) {
    return t == PLAN_TARGET_MSCCLRT ? "mscclrt" : t == PLAN_TARGET_MSCCLPP ? "mscclpp" : NULL;
}

bool plan_target_from_name(const char *s, PlanTarget *out) {
    for (int t = PLAN_TARGET_MSCCLRT; t < PLAN_TARGET_COUNT; t++)
        if (strcmp(s, plan_target_name((PlanTarget)t)) == 0) {
            *out = (PlanTarget)t;
            return true;
        }
    return false;
}

bool plan_coll_reduces(PlanCollective c) {
    return c == PLAN_COLL_ALLREDUCE || c == PLAN_COLL_REDUCESCATTER || c == PLAN_COLL_REDUCE;
}

const char *plan_coll_name(PlanCollective c) {
    return (unsigned)c < PLAN_COLL_COUNT ? coll_names[c] : "?";
}

bool plan_coll_from_name(const char *s, PlanCollective *out) {
    for (int c = 0; c < PLAN_COLL_COUNT; c++)
        if (strcmp(s, coll_names[c]) == 0) {
            *out = (PlanCollective)c;
            return true;
        }
    return false;
}

static const char *red_names[] = {"none", "sum", "prod", "min", "max", "avg"};

const char *plan_redop_name(PlanRedOp r) {
    return (unsigned)r <= PLAN_RED_AVG ? red_names[r] : "?";
}

bool plan_redop_from_name(const char *s, PlanRedOp *out) {
    for (int r = 0; r <= PLAN_RED_AVG; r++)
        if (strcmp(s, red_names[r]) == 0) {
            *out = (PlanRedOp)r;
            return true;
        }
    return false;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

Plan *plan_new(const char *name, PlanCollective coll, int ngpus) {
    Plan *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->name = dup_str(name);
    p->collective = coll;
    p->collective_name = dup_str(plan_coll_name(coll));
    p->threads = 1024;
    p->alignment = 16;
    p->min_size = 0;
    p->max_size = UINT64_MAX;
    p->ngpus = ngpus;
    p->gpus = ngpus > 0 ? calloc((size_t)ngpus, sizeof *p->gpus) : NULL;
    if (!p->name || !p->collective_name || (ngpus > 0 && !p->gpus)) {
        plan_free(p);
        return NULL;
    }
    for (int r = 0; r < ngpus; r++) p->gpus[r].id = r;
    return p;
}

void plan_op_init(PlanOp *op, PlanOpKind kind) {
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->chan_type = PLAN_CHAN_NONE;
    op->reduce_op = PLAN_RED_NONE;
    for (int i = 0; i < PLAN_MAX_OP_ENTRIES; i++) op->src[i].rank = op->dst[i].rank = -1;
}

void plan_op_release(PlanOp *op) {
    for (int i = 0; i < op->ninner; i++) plan_op_release(&op->inner[i]);
    free(op->inner);
    op->inner = NULL;
    op->ninner = 0;
}

PlanOp plan_op_clone(const PlanOp *op, bool *ok) {
    PlanOp c = *op;
    *ok = true;
    c.inner = NULL;
    if (op->ninner > 0) {
        c.inner = calloc((size_t)op->ninner, sizeof *c.inner);
        if (!c.inner) {
            *ok = false;
            c.ninner = 0;
            return c;
        }
        for (int i = 0; i < op->ninner; i++) {
            bool ok_i;
            c.inner[i] = plan_op_clone(&op->inner[i], &ok_i);
            if (!ok_i) {
                c.ninner = i + 1;
                plan_op_release(&c);
                *ok = false;
                return c;
            }
        }
    }
    return c;
}

bool plan_tb_append(PlanTb *tb, const PlanOp *op) {
    if (tb->nops == tb->cap_ops) {
        int cap = tb->cap_ops ? tb->cap_ops * 2 : 8;
        PlanOp *ops = realloc(tb->ops, (size_t)cap * sizeof *ops);
        if (!ops) return false;
        tb->ops = ops;
        tb->cap_ops = cap;
    }
    bool ok;
    tb->ops[tb->nops] = plan_op_clone(op, &ok);
    if (!ok) return false;
    tb->nops++;
    return true;
}

bool plan_gpu_ensure_tbs(PlanGpu *g, int n) {
    if (n <= g->ntbs) return true;
    PlanTb *tbs = realloc(g->tbs, (size_t)n * sizeof *tbs);
    if (!tbs) return false;
    memset(tbs + g->ntbs, 0, (size_t)(n - g->ntbs) * sizeof *tbs);
    for (int t = g->ntbs; t < n; t++) tbs[t].id = t;
    g->tbs = tbs;
    g->ntbs = n;
    return true;
}

/* Grows *arr (of elem bytes) by one slot; returns the new slot or NULL. */
static void *grow_one(void **arr, int *n, size_t elem) {
    void *a = realloc(*arr, (size_t)(*n + 1) * elem);
    if (!a) return NULL;
    *arr = a;
    return (char *)a + (size_t)(*n)++ * elem;
}

int plan_gpu_add_peer(PlanGpu *g, PlanChanType t, int peer) {
    if (t != PLAN_CHAN_MEMORY && t != PLAN_CHAN_PORT) return -1;
    int *slot = grow_one((void **)&g->peers[t], &g->npeers[t], sizeof(int));
    if (!slot) return -1;
    *slot = peer;
    return g->npeers[t] - 1;
}

int plan_gpu_add_switch(PlanGpu *g, PlanBuf buf, const int *ranks, int nranks) {
    int *copy = malloc((size_t)(nranks > 0 ? nranks : 1) * sizeof *copy);
    if (!copy) return -1;
    memcpy(copy, ranks, (size_t)nranks * sizeof *copy);
    PlanSwitch *s = grow_one((void **)&g->switches, &g->nswitch, sizeof *s);
    if (!s) {
        free(copy);
        return -1;
    }
    s->buf = buf;
    s->nranks = nranks;
    s->ranks = copy;
    return g->nswitch - 1;
}

int plan_gpu_add_remote(PlanGpu *g, int rank, PlanBuf type, PlanChanType access) {
    if (access != PLAN_CHAN_MEMORY && access != PLAN_CHAN_PORT) return -1;
    for (int b = 0; b < g->nremotes; b++)
        if (g->remotes[b].rank == rank && g->remotes[b].type == type) {
            g->remotes[b].access[access] = true;
            return b;
        }
    PlanRemote *r = grow_one((void **)&g->remotes, &g->nremotes, sizeof *r);
    if (!r) return -1;
    memset(r, 0, sizeof *r);
    r->rank = rank;
    r->type = type;
    r->access[access] = true;
    return g->nremotes - 1;
}

int plan_gpu_add_semaphore(PlanGpu *g, int init_value) {
    int *slot = grow_one((void **)&g->sem_init, &g->nsems, sizeof(int));
    if (!slot) return -1;
    *slot = init_value;
    return g->nsems - 1;
}

int plan_tb_use_channel(PlanTb *tb, PlanChanType t, int gpu_channel) {
    if ((unsigned)t >= PLAN_CHAN_TYPES) return -1;
    for (int j = 0; j < tb->nchan[t]; j++)
        if (tb->chan[t][j] == gpu_channel) return j;
    if (tb->nchan[t] == PLAN_MAX_TB_CHANNELS) return -1;
    tb->chan[t][tb->nchan[t]] = gpu_channel;
    return tb->nchan[t]++;
}

int plan_tb_use_remote(PlanTb *tb, PlanChanType access, int gpu_remote) {
    if ((unsigned)access >= PLAN_REMOTE_TYPES) return -1;
    for (int j = 0; j < tb->nremote[access]; j++)
        if (tb->remote[access][j] == gpu_remote) return j;
    if (tb->nremote[access] == PLAN_MAX_TB_REMOTES) return -1;
    tb->remote[access][tb->nremote[access]] = gpu_remote;
    return tb->nremote[access]++;
}

int plan_tb_flat_ops(const PlanTb *tb) {
    int n = 0;
    for (int i = 0; i < tb->nops; i++) n += 1 + tb->ops[i].ninner;
    return n;
}

static void gpu_release(PlanGpu *g) {
    for (int t = 0; t < 2; t++) free(g->peers[t]);
    for (int s = 0; s < g->nswitch; s++) free(g->switches[s].ranks);
    free(g->switches);
    free(g->remotes);
    free(g->sem_init);
    for (int t = 0; t < g->ntbs; t++) {
        for (int i = 0; i < g->tbs[t].nops; i++) plan_op_release(&g->tbs[t].ops[i]);
        free(g->tbs[t].ops);
    }
    free(g->tbs);
}

void plan_free(Plan *p) {
    if (!p) return;
    for (int r = 0; r < p->ngpus && p->gpus; r++) gpu_release(&p->gpus[r]);
    free(p->gpus);
    for (int i = 0; i < p->ntags; i++) free(p->tags[i]);
    free(p->tags);
    free(p->name);
    free(p->collective_name);
    free(p);
}

/* Deep copy of an int array; n may be 0 (returns a 1-element allocation to keep ownership simple). */
static bool dup_ints(int **dst, const int *src, int n) {
    *dst = NULL;
    if (!src) return true;
    *dst = malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    if (!*dst) return false;
    if (n > 0) memcpy(*dst, src, (size_t)n * sizeof(int));
    return true;
}

static bool gpu_copy(PlanGpu *d, const PlanGpu *s) {
    *d = *s;
    d->peers[0] = d->peers[1] = NULL;
    d->switches = NULL;
    d->remotes = NULL;
    d->sem_init = NULL;
    d->tbs = NULL;
    d->nswitch = d->ntbs = 0;
    for (int t = 0; t < 2; t++)
        if (!dup_ints(&d->peers[t], s->peers[t], s->npeers[t])) return false;
    if (!dup_ints(&d->sem_init, s->sem_init, s->nsems)) return false;
    if (s->nremotes > 0) {
        d->remotes = malloc((size_t)s->nremotes * sizeof *d->remotes);
        if (!d->remotes) return false;
        memcpy(d->remotes, s->remotes, (size_t)s->nremotes * sizeof *d->remotes);
    }
    for (int i = 0; i < s->nswitch; i++)
        if (plan_gpu_add_switch(d, s->switches[i].buf, s->switches[i].ranks,
                                s->switches[i].nranks) < 0)
            return false;
    if (!plan_gpu_ensure_tbs(d, s->ntbs)) return false;
    for (int t = 0; t < s->ntbs; t++) {
        PlanTb *dt = &d->tbs[t];
        const PlanTb *st = &s->tbs[t];
        *dt = *st;
        dt->ops = NULL;
        dt->nops = dt->cap_ops = 0;
        for (int i = 0; i < st->nops; i++)
            if (!plan_tb_append(dt, &st->ops[i])) return false;
    }
    return true;
}

Plan *plan_clone(const Plan *p) {
    Plan *c = plan_new(p->name, p->collective, p->ngpus);
    if (!c) return NULL;
    char *cname = dup_str(p->collective_name);
    if (!cname) goto fail;
    free(c->collective_name);
    c->collective_name = cname;
    c->protocol_ll = p->protocol_ll;
    c->inplace = p->inplace;
    c->reuse_resources = p->reuse_resources;
    c->threads = p->threads;
    c->double_scratch = p->double_scratch;
    c->alignment = p->alignment;
    c->min_size = p->min_size;
    c->max_size = p->max_size;
    c->target = p->target;
    if (p->ntags > 0) {
        c->tags = calloc((size_t)p->ntags, sizeof *c->tags);
        if (!c->tags) goto fail;
        for (int i = 0; i < p->ntags; i++) {
            c->tags[i] = dup_str(p->tags[i]);
            if (!c->tags[i]) goto fail;
            c->ntags = i + 1;
        }
    }
    for (int r = 0; r < p->ngpus; r++)
        if (!gpu_copy(&c->gpus[r], &p->gpus[r])) goto fail;
    return c;
fail:
    plan_free(c);
    return NULL;
}

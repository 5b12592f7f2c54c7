/*
 * compare_plans.c - compiles a .coll program with libmscclc and compares the plan with a plan made
 * by the MSCCL++ DSL: per rank, chunk counts, channel and remote-buffer tables, and per thread
 * block the channel tables and the op sequences (names, channel type and ids, every buffer entry).
 * usage: compare_plans PROGRAM.coll EXPECTED.json   (exit 0 same, 1 different, 2 error)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mscclc.h"
#include "plan.h"

static int diffs;

#define DIFF(...) do { if (diffs++ < 20) { printf(__VA_ARGS__); putchar('\n'); } } while (0)

static void ref_text(const PlanRef *r, char *buf, size_t n) {
    if (r->kind == PLAN_REF_LOCAL)
        snprintf(buf, n, "%s[%u+%u]", plan_buf_name(r->type), r->index, r->size);
    else
        snprintf(buf, n, "%s%d[%u+%u]", r->kind == PLAN_REF_REMOTE ? "remote" : "switch", r->id, r->index, r->size);
}

static void op_text(const PlanOp *op, char *buf, size_t n) {
    int len = snprintf(buf, n, "%s %s ch[", plan_op_name(op->kind), plan_chan_name(op->chan_type));
    for (int i = 0; i < op->nchan; i++) len += snprintf(buf + len, n - (size_t)len, "%s%d", i ? "," : "", op->chan_ids[i]);
    len += snprintf(buf + len, n - (size_t)len, "] src");
    char r[64];
    for (int i = 0; i < op->nsrc; i++) {
        ref_text(&op->src[i], r, sizeof r);
        len += snprintf(buf + len, n - (size_t)len, " %s", r);
    }
    len += snprintf(buf + len, n - (size_t)len, " dst");
    for (int i = 0; i < op->ndst; i++) {
        ref_text(&op->dst[i], r, sizeof r);
        len += snprintf(buf + len, n - (size_t)len, " %s", r);
    }
    if (op->kind == PLAN_OP_PIPELINE)
        snprintf(buf + len, n - (size_t)len, " unit %llu x%u (%d inner)", (unsigned long long)op->unit_size,
                 op->num_chunks, op->ninner);
}

static void compare_ops(int r, int t, const PlanOp *a, int na, const PlanOp *b, int nb, const char *where) {
    if (na != nb) DIFF("rank %d tb %d%s: %d ops, expected %d", r, t, where, na, nb);
    int n = na < nb ? na : nb;
    for (int i = 0; i < n; i++) {
        char x[1024], y[1024];
        op_text(&a[i], x, sizeof x);
        op_text(&b[i], y, sizeof y);
        if (strcmp(x, y) != 0) DIFF("rank %d tb %d%s op %d:\n    got      %s\n    expected %s", r, t, where, i, x, y);
        if (a[i].kind == PLAN_OP_PIPELINE && b[i].kind == PLAN_OP_PIPELINE)
            compare_ops(r, t, a[i].inner, a[i].ninner, b[i].inner, b[i].ninner, " (pipeline)");
    }
    for (int i = n; i < na || i < nb; i++) {
        char x[1024];
        op_text(i < na ? &a[i] : &b[i], x, sizeof x);
        DIFF("rank %d tb %d%s op %d: %s %s", r, t, where, i, i < na ? "extra" : "missing", x);
    }
}

static void compare(const Plan *a, const Plan *b) {
    if (a->collective != b->collective) DIFF("collective %s, expected %s", plan_coll_name(a->collective),
                                             plan_coll_name(b->collective));
    if (a->protocol_ll != b->protocol_ll || a->inplace != b->inplace || a->double_scratch != b->double_scratch)
        DIFF("protocol/inplace/double_scratch differ");
    if (a->ngpus != b->ngpus) {
        DIFF("%d ranks, expected %d", a->ngpus, b->ngpus);
        return;
    }
    for (int r = 0; r < a->ngpus; r++) {
        const PlanGpu *x = &a->gpus[r], *y = &b->gpus[r];
        if (x->input_chunks != y->input_chunks || x->output_chunks != y->output_chunks ||
            x->scratch_chunks != y->scratch_chunks)
            DIFF("rank %d: chunks in/out/scratch %u/%u/%u, expected %u/%u/%u", r, x->input_chunks, x->output_chunks,
                 x->scratch_chunks, y->input_chunks, y->output_chunks, y->scratch_chunks);
        for (int t = 0; t < 2; t++)
            if (x->npeers[t] != y->npeers[t] ||
                (x->npeers[t] && memcmp(x->peers[t], y->peers[t], (size_t)x->npeers[t] * sizeof(int)) != 0))
                DIFF("rank %d: %s connected_to differs", r, plan_chan_name((PlanChanType)t));
        if (x->nswitch != y->nswitch) DIFF("rank %d: %d switch channels, expected %d", r, x->nswitch, y->nswitch);
        if (x->nremotes != y->nremotes) DIFF("rank %d: %d remote buffers, expected %d", r, x->nremotes, y->nremotes);
        for (int i = 0; i < x->nremotes && i < y->nremotes; i++)
            if (x->remotes[i].rank != y->remotes[i].rank || x->remotes[i].type != y->remotes[i].type ||
                memcmp(x->remotes[i].access, y->remotes[i].access, sizeof x->remotes[i].access) != 0)
                DIFF("rank %d: remote buffer %d differs", r, i);
        if (x->ntbs != y->ntbs) DIFF("rank %d: %d thread blocks, expected %d", r, x->ntbs, y->ntbs);
        for (int t = 0; t < x->ntbs && t < y->ntbs; t++) {
            const PlanTb *p = &x->tbs[t], *q = &y->tbs[t];
            for (int k = 0; k < PLAN_CHAN_TYPES; k++)
                if (p->nchan[k] != q->nchan[k] ||
                    memcmp(p->chan[k], q->chan[k], (size_t)p->nchan[k] * sizeof(int)) != 0)
                    DIFF("rank %d tb %d: %s channel table differs", r, t, plan_chan_name((PlanChanType)k));
            for (int k = 0; k < PLAN_REMOTE_TYPES; k++)
                if (p->nremote[k] != q->nremote[k] ||
                    memcmp(p->remote[k], q->remote[k], (size_t)p->nremote[k] * sizeof(int)) != 0)
                    DIFF("rank %d tb %d: %s remote_buffer_refs differ", r, t, plan_chan_name((PlanChanType)k));
            compare_ops(r, t, p->ops, p->nops, q->ops, q->nops, "");
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fputs("usage: compare_plans PROGRAM.coll EXPECTED.json\n", stderr);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    static char src[1 << 20];
    size_t len = fread(src, 1, sizeof src, f);
    fclose(f);
    MscclcOptions opt = {.filename = argv[1], .diag_out = stderr};
    MscclcResult res;
    if (mscclc_compile(src, len, &opt, &res) != MSCCLC_OK) {
        fprintf(stderr, "%s: does not compile\n", argv[1]);
        mscclc_result_free(&res);
        return 2;
    }
    PlanErr err;
    Plan *want = plan_load_file(argv[2], &err);
    if (!want) {
        fprintf(stderr, "%s\n", err.msg);
        mscclc_result_free(&res);
        return 2;
    }
    compare(res.plan, want);
    if (diffs > 20) printf("... %d differences in all\n", diffs);
    plan_free(want);
    mscclc_result_free(&res);
    return diffs ? 1 : 0;
}

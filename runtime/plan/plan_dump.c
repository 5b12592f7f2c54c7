/*
 * plan_dump.c - human views of a plan for `mscclc --dump`: a text table (header, then per rank
 * its channels with their pairing (spec §6.2), remote buffers, semaphores and thread blocks with
 * one line per op) and a Graphviz dot graph (ranks as clusters, thread blocks as nodes, channel
 * edges). Both are deterministic, so tests compare them with golden files.
 */
#include "plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *chan_short(PlanChanType t) {
    static const char *n[] = {"mem", "port", "sw", "none"};
    return (unsigned)t <= PLAN_CHAN_NONE ? n[t] : "?";
}

/* Index on `peer` of the channel that channel c of rank r (type t) pairs with, or -1 when the
 * peer has fewer channels back (the executor then makes an unused filler, spec §6.2). */
static int paired_channel(const Plan *p, int r, int t, int c) {
    const PlanGpu *g = &p->gpus[r];
    int peer = g->peers[t][c];
    if (peer < 0 || peer >= p->ngpus) return -1;
    int k = 0;
    for (int i = 0; i < c; i++)
        if (g->peers[t][i] == peer) k++;
    const PlanGpu *h = &p->gpus[peer];
    for (int i = 0; i < h->npeers[t]; i++)
        if (h->peers[t][i] == r && k-- == 0) return i;
    return -1;
}

static void print_ranks(FILE *out, const int *ranks, int n) {
    for (int i = 0; i < n; i++) fprintf(out, "%s%d", i ? "," : "", ranks[i]);
}

/* One entry: i[0:2], rank1.s[4:5] via mem#0, sw#0.i[0:1] */
static void print_ref(FILE *out, const Plan *p, int r, const PlanTb *tb, const PlanOp *op,
                      const PlanRef *e) {
    unsigned long long lo = e->index, hi = (unsigned long long)e->index + e->size;
    const PlanGpu *g = &p->gpus[r];
    switch (e->kind) {
    case PLAN_REF_LOCAL:
        fprintf(out, "%s[%llu:%llu]", plan_buf_name(e->type), lo, hi);
        return;
    case PLAN_REF_REMOTE: {
        int a = op->chan_type;
        if ((a == PLAN_CHAN_MEMORY || a == PLAN_CHAN_PORT) && e->id >= 0 && e->id < tb->nremote[a]
            && tb->remote[a][e->id] >= 0 && tb->remote[a][e->id] < g->nremotes) {
            const PlanRemote *rb = &g->remotes[tb->remote[a][e->id]];
            fprintf(out, "rank%d.%s[%llu:%llu] via %s#%d", rb->rank, plan_buf_name(rb->type), lo,
                    hi, chan_short((PlanChanType)a), e->id);
        } else {
            fprintf(out, "remote#%d[%llu:%llu]", e->id, lo, hi);
        }
        return;
    }
    case PLAN_REF_SWITCH: {
        const char *b = "?";
        if (e->id >= 0 && e->id < tb->nchan[PLAN_CHAN_SWITCH] &&
            tb->chan[PLAN_CHAN_SWITCH][e->id] >= 0 && tb->chan[PLAN_CHAN_SWITCH][e->id] < g->nswitch)
            b = plan_buf_name(g->switches[tb->chan[PLAN_CHAN_SWITCH][e->id]].buf);
        fprintf(out, "sw#%d.%s[%llu:%llu]", e->id, b, lo, hi);
        return;
    }
    }
}

static void print_refs(FILE *out, const Plan *p, int r, const PlanTb *tb, const PlanOp *op,
                       const PlanRef *refs, int n) {
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", out);
        print_ref(out, p, r, tb, op, &refs[i]);
    }
}

/* Separator before the next field of an op line: the name's padding first, then a space. */
static void field(FILE *out, int *pad) {
    fprintf(out, "%*s", *pad, "");
    *pad = 1;
}

static void print_op(FILE *out, const Plan *p, int r, const PlanTb *tb, const PlanOp *op,
                     int idx, int indent) {
    const char *name = plan_op_name(op->kind);
    int pad = 12 - (int)strlen(name);
    if (pad < 1) pad = 1;
    fprintf(out, "%*s%3d  %s", indent, "", idx, name);
    if (op->chan_type != PLAN_CHAN_NONE) {
        field(out, &pad);
        fputs(plan_chan_name(op->chan_type), out);
        if (op->nchan > 0) {
            fputc('[', out);
            print_ranks(out, op->chan_ids, op->nchan);
            fputc(']', out);
        }
    }
    if (op->nsrc > 0 || op->ndst > 0) {
        field(out, &pad);
        print_refs(out, p, r, tb, op, op->src, op->nsrc);
        fputs(" -> ", out);
        print_refs(out, p, r, tb, op, op->dst, op->ndst);
    }
    if (op->nsem > 0) {
        field(out, &pad);
        fputs("sem[", out);
        print_ranks(out, op->sem_ids, op->nsem);
        fputc(']', out);
    }
    if (op->kind == PLAN_OP_BARRIER) {
        field(out, &pad);
        fprintf(out, "id %d, %d thread blocks", op->barrier_id, op->num_threadblocks);
    }
    if (op->reduce_op != PLAN_RED_NONE) {
        field(out, &pad);
        fprintf(out, "(%s)", plan_redop_name(op->reduce_op));
    }
    if (op->tbg_size > 0) {
        field(out, &pad);
        fprintf(out, "tbg %d/%d", op->tbg_id, op->tbg_size);
    }
    if (op->kind == PLAN_OP_PIPELINE) {
        field(out, &pad);
        fprintf(out, "unit %" PRIu64 " bytes, %u chunk%s, %d op%s", op->unit_size, op->num_chunks,
                op->num_chunks == 1 ? "" : "s", op->ninner, op->ninner == 1 ? "" : "s");
    }
    fputc('\n', out);
    for (int i = 0; i < op->ninner; i++) print_op(out, p, r, tb, &op->inner[i], i, indent + 5);
}

static void dump_gpu(const Plan *p, int r, FILE *out) {
    const PlanGpu *g = &p->gpus[r];
    fprintf(out, "\nrank %d: input %u chunks, output %u chunks, scratch %u chunks, %d thread "
            "block%s\n", r, g->input_chunks, g->output_chunks, g->scratch_chunks, g->ntbs,
            g->ntbs == 1 ? "" : "s");

    fputs("  channels\n", out);
    if (g->npeers[0] + g->npeers[1] + g->nswitch == 0) fputs("    none\n", out);
    for (int t = 0; t < 2; t++)
        for (int c = 0; c < g->npeers[t]; c++) {
            int peer = g->peers[t][c];
            int pc = paired_channel(p, r, t, c);
            fprintf(out, "    %s#%d -> rank %d, ", plan_chan_name((PlanChanType)t), c, peer);
            if (pc >= 0) fprintf(out, "pairs with rank %d %s#%d\n", peer,
                                 plan_chan_name((PlanChanType)t), pc);
            else fprintf(out, "unpaired (rank %d has fewer %s channels back)\n", peer,
                         plan_chan_name((PlanChanType)t));
        }
    for (int s = 0; s < g->nswitch; s++) {
        fprintf(out, "    switch#%d on %s, ranks ", s, plan_buf_long_name(g->switches[s].buf));
        print_ranks(out, g->switches[s].ranks, g->switches[s].nranks);
        fputc('\n', out);
    }

    fputs("  remote buffers\n", out);
    if (g->nremotes == 0) fputs("    none\n", out);
    int per_type[PLAN_REMOTE_TYPES] = {0, 0};
    for (int b = 0; b < g->nremotes; b++) {
        const PlanRemote *rb = &g->remotes[b];
        fprintf(out, "    rb#%d rank %d %s, via", b, rb->rank, plan_buf_long_name(rb->type));
        for (int a = 0; a < PLAN_REMOTE_TYPES; a++)
            if (rb->access[a]) fprintf(out, " %s#%d", plan_chan_name((PlanChanType)a), per_type[a]++);
        fputc('\n', out);
    }

    fputs("  semaphores", out);
    if (g->nsems == 0) fputs(" none", out);
    for (int s = 0; s < g->nsems; s++) fprintf(out, " #%d=%d", s, g->sem_init[s]);
    fputc('\n', out);

    for (int t = 0; t < g->ntbs; t++) {
        const PlanTb *tb = &g->tbs[t];
        fprintf(out, "  tb %d: %d op%s", t, plan_tb_flat_ops(tb), plan_tb_flat_ops(tb) == 1 ? "" : "s");
        for (int ct = 0; ct < PLAN_CHAN_TYPES; ct++) {
            if (tb->nchan[ct] == 0) continue;
            fprintf(out, ", %s", plan_chan_name((PlanChanType)ct));
            for (int j = 0; j < tb->nchan[ct]; j++) {
                int gc = tb->chan[ct][j];
                fprintf(out, " #%d=ch%d", j, gc);
                if (ct != PLAN_CHAN_SWITCH && gc >= 0 && gc < g->npeers[ct])
                    fprintf(out, "(rank %d)", g->peers[ct][gc]);
            }
        }
        for (int a = 0; a < PLAN_REMOTE_TYPES; a++) {
            if (tb->nremote[a] == 0) continue;
            fprintf(out, ", %s refs", chan_short((PlanChanType)a));
            for (int j = 0; j < tb->nremote[a]; j++) fprintf(out, " #%d=rb%d", j, tb->remote[a][j]);
        }
        fputc('\n', out);
        for (int i = 0; i < tb->nops; i++) print_op(out, p, r, tb, &tb->ops[i], i, 4);
    }
}

static void dump_header(const Plan *p, FILE *out);

void plan_dump_table(const Plan *p, FILE *out) {
    dump_header(p, out);
    for (int r = 0; r < p->ngpus; r++) dump_gpu(p, r, out);
}

/* The header, then one line per rank: what `mscclc --dump --summary` prints. */
void plan_dump_summary(const Plan *p, FILE *out) {
    dump_header(p, out);
    fputc('\n', out);
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        int ops = 0, most = 0;
        for (int t = 0; t < g->ntbs; t++) {
            int n = plan_tb_flat_ops(&g->tbs[t]);
            ops += n;
            most = n > most ? n : most;
        }
        fprintf(out, "rank %d: %d thread block%s, %d op%s (at most %d in a block), %d memory, %d "
                "port, %d switch channel%s, chunks in %u out %u scratch %u\n", r, g->ntbs,
                g->ntbs == 1 ? "" : "s", ops, ops == 1 ? "" : "s", most, g->npeers[0],
                g->npeers[1], g->nswitch, g->nswitch == 1 ? "" : "s", g->input_chunks,
                g->output_chunks, g->scratch_chunks);
    }
}

static void dump_header(const Plan *p, FILE *out) {
    fputs("plan        ", out);
    plan_escape_fputs(p->name, out);
    fputs("\ncollective  ", out);
    plan_escape_fputs(p->collective_name ? p->collective_name : plan_coll_name(p->collective), out);
    fputc('\n', out);
    fprintf(out, "protocol    %s\n", p->protocol_ll ? "LL" : "Simple");
    fprintf(out, "ranks       %d\n", p->ngpus);
    fprintf(out, "inplace     %s\n", p->inplace ? "yes" : "no");
    fprintf(out, "threads     %d per block\n", p->threads);
    fprintf(out, "alignment   %u bytes\n", p->alignment);
    if (p->max_size == UINT64_MAX)
        fprintf(out, "sizes       %" PRIu64 " .. unbounded\n", p->min_size);
    else
        fprintf(out, "sizes       %" PRIu64 " .. %" PRIu64 " bytes\n", p->min_size, p->max_size);
    if (p->target != PLAN_TARGET_NONE) fprintf(out, "target      %s\n", plan_target_name(p->target));
    bool same = true;
    for (int r = 1; r < p->ngpus; r++)
        same = same && p->gpus[r].scratch_chunks == p->gpus[0].scratch_chunks;
    fputs("scratch     ", out);
    if (same && p->ngpus > 0) fprintf(out, "%u chunks", p->gpus[0].scratch_chunks);
    else
        for (int r = 0; r < p->ngpus; r++)
            fprintf(out, "%srank %d: %u chunks", r ? ", " : "", r, p->gpus[r].scratch_chunks);
    fprintf(out, "%s%s\n", p->double_scratch ? ", double-buffered" : "",
            p->reuse_resources ? ", reuse_resources" : "");
    if (p->ntags > 0) {
        fputs("tags       ", out);
        for (int i = 0; i < p->ntags; i++) {
            fputc(' ', out);
            plan_escape_fputs(p->tags[i], out);
        }
        fputc('\n', out);
    }
}

/* ---- dot ------------------------------------------------------------------------------------ */

/* Writes a plan string as a dot string body: escaped as everywhere (plan_escape; cut at
 * PLAN_ESC_MAX), then its quotes and backslashes escaped for dot. */
static void dot_str(FILE *out, const char *s) {
    for (const char *e = PLAN_ESC(s); *e; e++) {
        if (*e == '"' || *e == '\\') fputc('\\', out);
        fputc(*e, out);
    }
}

/* Whether thread block tb of g lists GPU-level channel c of type t in its table. */
static bool tb_uses(const PlanGpu *g, int tb, int t, int c) {
    for (int j = 0; j < g->tbs[tb].nchan[t]; j++)
        if (g->tbs[tb].chan[t][j] == c) return true;
    return false;
}

/* Identity of switch channel s of rank r that all members share: the ranks list plus how many
 * identical groups came before it (members declare them in the same order). */
static void switch_key(const PlanGpu *g, int s, char *buf, size_t n) {
    const PlanSwitch *sw = &g->switches[s];
    int k = 0;
    for (int i = 0; i < s; i++) {
        const PlanSwitch *o = &g->switches[i];
        if (o->nranks == sw->nranks && o->buf == sw->buf &&
            memcmp(o->ranks, sw->ranks, sizeof(int) * (size_t)sw->nranks) == 0)
            k++;
    }
    size_t len = (size_t)snprintf(buf, n, "sw_%s", plan_buf_name(sw->buf));
    for (int i = 0; i < sw->nranks && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "_%d", sw->ranks[i]);
    if (len < n) snprintf(buf + len, n - len, "_k%d", k);
}

void plan_dump_dot(const Plan *p, FILE *out) {
    fputs("digraph \"", out);
    dot_str(out, p->name);
    fputs("\" {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n", out);
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        fprintf(out, "  subgraph cluster_r%d {\n    label=\"rank %d\";\n", r, r);
        for (int t = 0; t < g->ntbs; t++) {
            const PlanTb *tb = &g->tbs[t];
            int n = plan_tb_flat_ops(tb);
            fprintf(out, "    r%dt%d [label=\"tb %d\\n%d op%s", r, t, t, n, n == 1 ? "" : "s");
            for (int i = 0; i < tb->nops && i < 4; i++)
                fprintf(out, "\\n%s", plan_op_name(tb->ops[i].kind));
            if (tb->nops > 4) fputs("\\n...", out);
            fputs("\"];\n", out);
        }
        /* the rank itself, target of edges to channels no thread block of it uses */
        fprintf(out, "    r%d [label=\"rank %d\", shape=plaintext];\n", r, r);
        fputs("  }\n", out);
    }
    /* memory/port channels: an edge between every TB that uses a channel and every TB that
     * uses its partner; each pair is drawn once, from the lower rank */
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        for (int t = 0; t < 2; t++)
            for (int c = 0; c < g->npeers[t]; c++) {
                int peer = g->peers[t][c];
                if (peer < 0 || peer >= p->ngpus) continue;
                int pc = paired_channel(p, r, t, c);
                if (pc >= 0 && peer < r) continue; /* drawn from the other side */
                const PlanGpu *h = &p->gpus[peer];
                const char *style = t == PLAN_CHAN_MEMORY ? "solid" : "dashed";
                for (int x = 0; x < g->ntbs; x++) {
                    if (!tb_uses(g, x, t, c)) continue;
                    bool any = false;
                    for (int y = 0; pc >= 0 && y < h->ntbs; y++) {
                        if (!tb_uses(h, y, t, pc)) continue;
                        any = true;
                        fprintf(out, "  r%dt%d -> r%dt%d [dir=both, style=%s, label=\"%s %d:%d\"];\n",
                                r, x, peer, y, style, chan_short((PlanChanType)t), c, pc);
                    }
                    if (!any)
                        fprintf(out, "  r%dt%d -> r%d [style=%s, color=red, label=\"%s %d: no "
                                "partner TB\"];\n", r, x, peer, style, chan_short((PlanChanType)t), c);
                }
            }
    }
    /* switch channels: one node per multicast group, an edge from every TB that uses it */
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        for (int s = 0; s < g->nswitch; s++) {
            char key[128];
            switch_key(g, s, key, sizeof key);
            bool lowest = g->switches[s].nranks > 0;
            for (int i = 0; i < g->switches[s].nranks; i++)
                if (g->switches[s].ranks[i] < r) lowest = false;
            if (lowest) {
                fprintf(out, "  %s [shape=ellipse, label=\"switch on %s\\nranks ", key,
                        plan_buf_long_name(g->switches[s].buf));
                print_ranks(out, g->switches[s].ranks, g->switches[s].nranks);
                fputs("\"];\n", out);
            }
            for (int t = 0; t < g->ntbs; t++)
                for (int j = 0; j < g->tbs[t].nchan[PLAN_CHAN_SWITCH]; j++)
                    if (g->tbs[t].chan[PLAN_CHAN_SWITCH][j] == s)
                        fprintf(out, "  r%dt%d -> %s [style=dotted];\n", r, t, key);
        }
    }
    fputs("}\n", out);
}

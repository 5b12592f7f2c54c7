/*
 * pass_check_signals.c - first pass: every signal must be consumed by exactly one wait on the
 * paired channel (spec §5.2, §6.2: r's k-th channel to p pairs with p's k-th channel to r, per
 * channel type). Counts signal/rlxsignal and port pws/pwsf per sending channel against
 * wait/rlxwait on the paired channel; reports each imbalance at the first unmatched op.
 */
#include "passes.h"

#include <stdlib.h>

/* Per-rank, per-type counters, indexed by GPU-level channel. */
typedef struct {
    int *sends[2];   /* [memory|port][channel]: signals issued on the channel */
    int *waits[2];   /* waits on the channel */
} Counts;

static void count_op(const PlanGpu *g, const PlanTb *tb, const PlanOp *op, Counts *c) {
    int ch[PLAN_MAX_OP_CHANNELS];
    PlanChanType t;
    int n = pass_sync_channels(g, tb, op, true, ch, &t);
    for (int i = 0; i < n; i++) c->sends[t][ch[i]]++;
    n = pass_sync_channels(g, tb, op, false, ch, &t);
    for (int i = 0; i < n; i++) c->waits[t][ch[i]]++;
}

/* Location of the m-th (from 1) signalling (or waiting) op on rank r's channel (t, ch), counting
 * TB by TB in program order; also reports where it sits. */
static PlanLoc nth_op(const Plan *p, int r, PlanChanType t, int ch, bool want_signal, int m,
                      int *tb_out, int *op_out) {
    const PlanGpu *g = &p->gpus[r];
    PlanLoc none = {0, 0};
    for (int b = 0; b < g->ntbs; b++) {
        const PlanTb *tb = &g->tbs[b];
        for (int i = 0; i < tb->nops; i++) {
            const PlanOp *top = &tb->ops[i];
            int nsub = top->kind == PLAN_OP_PIPELINE ? top->ninner : 1;
            for (int j = 0; j < nsub; j++) {
                const PlanOp *op = top->kind == PLAN_OP_PIPELINE ? &top->inner[j] : top;
                int chs[PLAN_MAX_OP_CHANNELS];
                PlanChanType ts;
                int n = pass_sync_channels(g, tb, op, want_signal, chs, &ts);
                for (int k = 0; k < n; k++)
                    if (ts == t && chs[k] == ch && --m == 0) {
                        *tb_out = b;
                        *op_out = i;
                        return op->loc;
                    }
            }
        }
    }
    *tb_out = *op_out = -1;
    return none;
}

static void free_counts(Counts *c, int n) {
    for (int r = 0; r < n; r++)
        for (int t = 0; t < 2; t++) {
            free(c[r].sends[t]);
            free(c[r].waits[t]);
        }
    free(c);
}

bool pass_check_signals(const Plan *p, Diag *d) {
    Counts *cnt = calloc(p->ngpus > 0 ? (size_t)p->ngpus : 1, sizeof *cnt);
    if (!cnt) {
        diag_error(d, (PlanLoc){0, 0}, "out of memory checking signals");
        return false;
    }
    for (int r = 0; r < p->ngpus; r++)
        for (int t = 0; t < 2; t++) {
            size_t n = p->gpus[r].npeers[t] > 0 ? (size_t)p->gpus[r].npeers[t] : 1;
            cnt[r].sends[t] = calloc(n, sizeof(int));
            cnt[r].waits[t] = calloc(n, sizeof(int));
            if (!cnt[r].sends[t] || !cnt[r].waits[t]) {
                free_counts(cnt, p->ngpus);
                diag_error(d, (PlanLoc){0, 0}, "out of memory checking signals");
                return false;
            }
        }
    for (int r = 0; r < p->ngpus; r++) {
        const PlanGpu *g = &p->gpus[r];
        for (int b = 0; b < g->ntbs; b++)
            for (int i = 0; i < g->tbs[b].nops; i++) {
                const PlanOp *op = &g->tbs[b].ops[i];
                if (op->kind == PLAN_OP_PIPELINE)
                    for (int j = 0; j < op->ninner; j++) count_op(g, &g->tbs[b], &op->inner[j], &cnt[r]);
                else
                    count_op(g, &g->tbs[b], op, &cnt[r]);
            }
    }
    bool ok = true;
    for (int r = 0; r < p->ngpus; r++)
        for (int t = 0; t < 2; t++) {
            const char *tn = plan_chan_name((PlanChanType)t);
            for (int c = 0; c < p->gpus[r].npeers[t]; c++) {
                int q;
                int pc = pass_paired_channel(p, r, (PlanChanType)t, c, &q);
                int s = cnt[r].sends[t][c];
                int tb, opi;
                if (pc < 0) {
                    /* r's channel pairs with one of q's unpaired fillers: nobody waits there,
                     * and nobody can signal r's waits on it */
                    int have = 0;
                    for (int i = 0; q >= 0 && i < p->gpus[q].npeers[t]; i++)
                        have += p->gpus[q].peers[t][i] == r;
                    if (s > 0) {
                        PlanLoc l = nth_op(p, r, (PlanChanType)t, c, true, 1, &tb, &opi);
                        diag_error(d, l,
                                   "signal on %s channel %d from rank %d to rank %d (rank %d tb %d "
                                   "op %d) can never be waited for: rank %d declares %d %s "
                                   "channel%s to rank %d, so this channel has no counterpart",
                                   tn, c, r, q, r, tb, opi, q, have, tn, have == 1 ? "" : "s", r);
                        ok = false;
                    }
                    if (cnt[r].waits[t][c] > 0) {
                        PlanLoc l = nth_op(p, r, (PlanChanType)t, c, false, 1, &tb, &opi);
                        diag_error(d, l,
                                   "wait on %s channel %d of rank %d from rank %d (rank %d tb %d "
                                   "op %d) can never be satisfied: rank %d declares %d %s "
                                   "channel%s to rank %d, so this channel has no counterpart",
                                   tn, c, r, q, r, tb, opi, q, have, tn, have == 1 ? "" : "s", r);
                        ok = false;
                    }
                    continue;
                }
                int w = cnt[q].waits[t][pc];
                if (s > w) {
                    PlanLoc l = nth_op(p, r, (PlanChanType)t, c, true, w + 1, &tb, &opi);
                    diag_error(d, l,
                               "unmatched signal: rank %d signals %s channel %d to rank %d %d "
                               "time%s (first unmatched: tb %d op %d) but rank %d waits on the "
                               "paired channel %d %d time%s",
                               r, tn, c, q, s, s == 1 ? "" : "s", tb, opi, q, pc, w,
                               w == 1 ? "" : "s");
                    ok = false;
                } else if (w > s) {
                    PlanLoc l = nth_op(p, q, (PlanChanType)t, pc, false, s + 1, &tb, &opi);
                    diag_error(d, l,
                               "unmatched wait: rank %d waits on %s channel %d from rank %d %d "
                               "time%s (first unmatched: tb %d op %d) but rank %d signals the "
                               "paired channel %d %d time%s",
                               q, tn, pc, r, w, w == 1 ? "" : "s", tb, opi, r, c, s,
                               s == 1 ? "" : "s");
                    ok = false;
                }
            }
        }
    free_counts(cnt, p->ngpus);
    return ok;
}

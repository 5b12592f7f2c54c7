/*
 * test_check_rank.c - the per-rank streaming checker (check_collective_rank, check_rank_from):
 * check_fill_range equals slices of check_fill; for every collective, several dtypes/operators
 * and 2, 3 and 8 ranks, correct outputs pass both checkers and a corrupted element is reported by
 * both with the same rank, element and message, also when the inputs come in small blocks and
 * when the check is split over threads. The rooted reduce and gather (root 0) leave the other
 * ranks' outputs unchecked: garbage there passes.
 */
#include "../harness.h"

#include "check/check.h"
#include "plan.h"

#include <stdlib.h>
#include <string.h>

static const PlanCollective colls[] = {PLAN_COLL_ALLREDUCE, PLAN_COLL_REDUCESCATTER,
                                       PLAN_COLL_ALLGATHER, PLAN_COLL_ALLTOALL,
                                       PLAN_COLL_BROADCAST, PLAN_COLL_SENDRECV,
                                       PLAN_COLL_REDUCE, PLAN_COLL_GATHER, PLAN_COLL_SCATTER};
static const mscclrt_dtype red_types[] = {MSCCLRT_FLOAT32, MSCCLRT_FLOAT16, MSCCLRT_BFLOAT16,
                                          MSCCLRT_FP8_E4M3, MSCCLRT_FLOAT64, MSCCLRT_INT32,
                                          MSCCLRT_UINT8, MSCCLRT_INT64};
#define SEED 4242

/* A group's buffers for one (collective, n, dtype, op, per-rank count c). */
typedef struct {
    PlanCollective coll;
    int n;
    mscclrt_dtype t;
    mscclrt_redop op;
    size_t es, in_bytes, out_bytes;
    unsigned char **in, **out;
} Group;

/* The outputs a correct plan produces: reductions in rank order, one rounding per step. */
static void group_make(Group *g, PlanCollective coll, int n, mscclrt_dtype t, mscclrt_redop op,
                       size_t c) {
    g->coll = coll, g->n = n, g->t = t, g->op = op;
    g->es = dtype_size(t);
    size_t nin = c, nout = c;
    if (coll == PLAN_COLL_REDUCESCATTER || coll == PLAN_COLL_SCATTER) nin = (size_t)n * c;
    if (coll == PLAN_COLL_ALLGATHER || coll == PLAN_COLL_GATHER) nout = (size_t)n * c;
    if (coll == PLAN_COLL_ALLTOALL) nin = nout = (size_t)n * c;
    g->in_bytes = nin * g->es, g->out_bytes = nout * g->es;
    g->in = calloc((size_t)n, sizeof *g->in);
    g->out = calloc((size_t)n, sizeof *g->out);
    for (int r = 0; r < n; r++) {
        g->in[r] = malloc(g->in_bytes + 1);
        g->out[r] = malloc(g->out_bytes + 1);
        check_fill(t, op, g->in[r], nin, SEED, r);
    }
    size_t es = g->es;
    for (int r = 0; r < n; r++) {
        unsigned char *o = g->out[r];
        if ((coll == PLAN_COLL_REDUCE || coll == PLAN_COLL_GATHER) && r != 0) {
            memset(o, 0xee, g->out_bytes);   /* not the root: anything goes */
            continue;
        }
        switch (coll) {
        case PLAN_COLL_ALLREDUCE:
        case PLAN_COLL_REDUCE:
        case PLAN_COLL_REDUCESCATTER: {
            size_t base = coll == PLAN_COLL_ALLREDUCE ? 0 : (size_t)r * c * es;
            memcpy(o, g->in[0] + base, c * es);
            for (int q = 1; q < n; q++) dtype_reduce(t, op, o, g->in[q] + base, c);
            if (op == MSCCLRT_AVG) dtype_avg_finish(t, o, c, n);
            break;
        }
        case PLAN_COLL_ALLGATHER:
        case PLAN_COLL_GATHER:
            for (int s = 0; s < n; s++) memcpy(o + (size_t)s * c * es, g->in[s], c * es);
            break;
        case PLAN_COLL_ALLTOALL:
            for (int s = 0; s < n; s++)
                memcpy(o + (size_t)s * c * es, g->in[s] + (size_t)r * c * es, c * es);
            break;
        case PLAN_COLL_BROADCAST:
            memcpy(o, g->in[0], c * es);
            break;
        case PLAN_COLL_SCATTER:
            memcpy(o, g->in[0] + (size_t)r * c * es, c * es);
            break;
        default:
            memcpy(o, g->in[(r - 1 + n) % n], c * es);
            break;
        }
    }
}

static void group_free(Group *g) {
    for (int r = 0; r < g->n; r++) {
        free(g->in[r]);
        free(g->out[r]);
    }
    free(g->in);
    free(g->out);
}

/* A test-side regenerating source with a tiny block, so every path crosses block boundaries. */
typedef struct { const Group *g; size_t block; unsigned char *slots; int calls; } SmallRegen;

static const void *small_regen(void *ctx, int rank, size_t first, size_t n) {
    SmallRegen *s = ctx;
    s->calls++;
    if (n * s->g->es > s->block) return NULL;   /* the checker must respect the block */
    unsigned char *slot = s->slots + (size_t)rank * s->block;
    check_fill_range(s->g->t, s->g->op, slot, first, n, SEED, rank);
    return slot;
}

static bool small_check(const Group *g, int r, CheckMismatch *mm) {
    SmallRegen s = {g, 5 * g->es, malloc((size_t)g->n * 5 * g->es), 0};
    bool ok = check_rank_from(g->coll, g->n, r, g->t, g->op, small_regen, &s, s.block,
                              g->in_bytes, g->out[r], g->out_bytes, mm);
    free(s.slots);
    return ok;
}

static bool rank_check(const Group *g, int r, CheckMismatch *mm) {
    return check_collective_rank(g->coll, g->n, r, g->t, g->op, SEED, g->in_bytes, g->out[r],
                                 g->out_bytes, mm);
}

static bool all_check(const Group *g, CheckMismatch *mm) {
    return check_collective(g->coll, g->n, g->t, g->op, (const void *const *)g->in, g->in_bytes,
                            (const void *const *)g->out, g->out_bytes, mm);
}

/* Correct outputs pass everywhere; a wrong element of rank r is found by all three checkers
 * with the same rank, element and text, and the other ranks still pass. */
static void one_case(PlanCollective coll, int n, mscclrt_dtype t, mscclrt_redop op, size_t c) {
    Group g;
    group_make(&g, coll, n, t, op, c);
    CheckMismatch mm, mr, ms;
    bool ok = all_check(&g, &mm);
    for (int r = 0; r < n; r++) ok = ok && rank_check(&g, r, &mr) && small_check(&g, r, &ms);
    if (!ok)
        fprintf(stderr, "%s n=%d %s %s c=%zu: correct output refused: %s | %s | %s\n",
                plan_coll_name(coll), n, dtype_name(t), dtype_redop_name(op), c, mm.msg,
                mr.msg, ms.msg);
    CHECK(ok);
    size_t nout = g.out_bytes / g.es;
    /* reduce and gather check only the root's output */
    bool root_only = coll == PLAN_COLL_REDUCE || coll == PLAN_COLL_GATHER;
    int r = root_only ? 0 : n > 2 ? n - 2 : 1;
    size_t e = nout / 2 + 1 < nout ? nout / 2 + 1 : nout - 1;
    double v = dtype_load(t, g.out[r], e);
    dtype_store(t, g.out[r], e, v + 100);
    if (t == MSCCLRT_FP8_E4M3 && dtype_load(t, g.out[r], e) == v)
        dtype_store(t, g.out[r], e, -v - 1);   /* saturated: flip instead */
    bool a = all_check(&g, &mm), b = rank_check(&g, r, &mr), s = small_check(&g, r, &ms);
    CHECK(!a && !b && !s);
    CHECK_EQ_INT(r, mm.rank);
    CHECK_EQ_INT(r, mr.rank);
    CHECK_EQ_INT(r, ms.rank);
    CHECK_EQ_INT(e, mm.elem);
    CHECK_EQ_INT(e, mr.elem);
    CHECK_EQ_INT(e, ms.elem);
    CHECK_STR(mm.msg, mr.msg);
    CHECK_STR(mm.msg, ms.msg);
    for (int q = 0; q < n; q++)
        if (q != r) CHECK(rank_check(&g, q, &mr));
    group_free(&g);
}

static void t_fill_range(void) {
    static unsigned char whole[301 * 8], part[301 * 8];
    for (int t = 0; t < MSCCLRT_DTYPE_COUNT; t++)
        for (int op = 0; op < MSCCLRT_REDOP_COUNT; op++)
            for (int rank = 0; rank < 5; rank++) {
                size_t es = dtype_size((mscclrt_dtype)t);
                check_fill((mscclrt_dtype)t, (mscclrt_redop)op, whole, 300, 77, rank);
                static const size_t cuts[][2] = {{0, 300}, {0, 1}, {1, 299}, {17, 64}, {299, 1},
                                                 {150, 0}};
                for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
                    memset(part, 0x5a, sizeof part);
                    check_fill_range((mscclrt_dtype)t, (mscclrt_redop)op, part, cuts[k][0],
                                     cuts[k][1], 77, rank);
                    CHECK(memcmp(part, whole + cuts[k][0] * es, cuts[k][1] * es) == 0);
                    CHECK_EQ_INT(0x5a, part[cuts[k][1] * es]);   /* nothing written past n */
                }
            }
}

static void t_matrix(void) {
    static const int ns[] = {2, 3, 8};
    for (size_t ci = 0; ci < sizeof colls / sizeof *colls; ci++)
        for (size_t ni = 0; ni < 3; ni++) {
            PlanCollective coll = colls[ci];
            if (plan_coll_reduces(coll)) {
                for (size_t ti = 0; ti < sizeof red_types / sizeof *red_types; ti++)
                    for (int op = 0; op < MSCCLRT_REDOP_COUNT; op++)
                        one_case(coll, ns[ni], red_types[ti], (mscclrt_redop)op, 37);
            } else {
                for (int t = 0; t < MSCCLRT_DTYPE_COUNT; t++)
                    one_case(coll, ns[ni], (mscclrt_dtype)t, MSCCLRT_SUM, 37);
            }
            one_case(coll, ns[ni], MSCCLRT_FLOAT32, MSCCLRT_SUM, 1);
        }
}

/* Real 1 MiB blocks: outputs spanning more than one block. */
static void t_big(void) {
    size_t c = (3u << 20) / 2 / 2 + 3;   /* float16: ~1.5 MiB per rank */
    one_case(PLAN_COLL_ALLREDUCE, 3, MSCCLRT_FLOAT16, MSCCLRT_SUM, c);
    one_case(PLAN_COLL_ALLGATHER, 2, MSCCLRT_BFLOAT16, MSCCLRT_SUM, c);
    one_case(PLAN_COLL_REDUCESCATTER, 2, MSCCLRT_INT32, MSCCLRT_MAX, (5u << 20) / 4 / 4);
}

/* Threaded checks: ranges of whole blocks, a context each; with two wrong elements in
 * different ranges the first one is reported, exactly as the one-thread check reports it. */
static bool threads_check(const Group *g, int r, int nt, CheckMismatch *mm) {
    SmallRegen s[8];
    void *ctxs[8];
    for (int i = 0; i < nt; i++) {
        s[i] = (SmallRegen){g, 5 * g->es, malloc((size_t)g->n * 5 * g->es), 0};
        ctxs[i] = &s[i];
    }
    bool ok = check_rank_threads(g->coll, g->n, r, g->t, g->op, small_regen, ctxs, nt, s[0].block,
                                 g->in_bytes, g->out[r], g->out_bytes, mm);
    for (int i = 0; i < nt; i++) free(s[i].slots);
    return ok;
}

static void t_threads(void) {
    for (size_t ci = 0; ci < sizeof colls / sizeof *colls; ci++) {
        Group g;
        group_make(&g, colls[ci], 3, MSCCLRT_FLOAT16, MSCCLRT_SUM, 61);
        CheckMismatch m1, mt;
        for (int nt = 1; nt <= 8; nt++)
            for (int r = 0; r < 3; r++) CHECK(threads_check(&g, r, nt, &mt));
        /* reduce and gather check only the root's output */
        int w = colls[ci] == PLAN_COLL_REDUCE || colls[ci] == PLAN_COLL_GATHER ? 0 : 1;
        size_t nout = g.out_bytes / g.es, late = nout - 2, early = nout / 3;
        dtype_store(g.t, g.out[w], late, dtype_load(g.t, g.out[w], late) + 100);
        CHECK(!small_check(&g, w, &m1));
        CHECK_EQ_INT(late, m1.elem);
        dtype_store(g.t, g.out[w], early, dtype_load(g.t, g.out[w], early) + 100);
        CHECK(!small_check(&g, w, &m1));
        CHECK_EQ_INT(early, m1.elem);
        for (int nt = 2; nt <= 8; nt++) {
            CHECK(!threads_check(&g, w, nt, &mt));
            CHECK_EQ_INT(early, mt.elem);
            CHECK_STR(m1.msg, mt.msg);
        }
        group_free(&g);
    }
    /* the threaded fill writes what one pass of check_fill_range writes */
    size_t n = (size_t)3 << 19;
    unsigned char *a = malloc(n * 2), *b = malloc(n * 2);
    check_fill(MSCCLRT_BFLOAT16, MSCCLRT_MAX, a, n, 9, 2);
    check_fill_range(MSCCLRT_BFLOAT16, MSCCLRT_MAX, b, 0, n, 9, 2);
    CHECK(memcmp(a, b, n * 2) == 0);
    free(a);
    free(b);
}

static void t_refuses(void) {
    unsigned char out[64] = {0};
    CheckMismatch mm;
    CHECK(!check_collective_rank(PLAN_COLL_CUSTOM, 2, 0, MSCCLRT_FLOAT32, MSCCLRT_SUM, 1, 64,
                                 out, 64, &mm));
    CHECK_EQ_INT(-1, mm.rank);
    CHECK(!check_collective_rank(PLAN_COLL_ALLREDUCE, 2, 2, MSCCLRT_FLOAT32, MSCCLRT_SUM, 1, 64,
                                 out, 64, &mm));
    CHECK_CONTAINS(mm.msg, "rank 2 of 2");
    CHECK(!check_collective_rank(PLAN_COLL_ALLREDUCE, 2, 0, MSCCLRT_DTYPE_COUNT, MSCCLRT_SUM, 1,
                                 64, out, 64, &mm));
    /* all zeros is never a correct allreduce of check_fill inputs (element 0: sum of 1 + r % 3) */
    CHECK(!check_collective_rank(PLAN_COLL_ALLREDUCE, 2, 1, MSCCLRT_FLOAT32, MSCCLRT_SUM, 1, 64,
                                 out, 64, &mm));
    CHECK_EQ_INT(1, mm.rank);
    CHECK_EQ_INT(0, mm.elem);
    CHECK_CONTAINS(mm.msg, "rank 1 element 0 (float32): got 0, expected 3");
}

int main(void) {
    TEST("check_rank/fill_range", t_fill_range());
    TEST("check_rank/matrix", t_matrix());
    TEST("check_rank/big_blocks", t_big());
    TEST("check_rank/threads", t_threads());
    TEST("check_rank/refuses", t_refuses());
    return harness_report();
}

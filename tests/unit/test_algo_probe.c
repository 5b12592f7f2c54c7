/*
 * test_algo_probe.c - MSCCLRT_NATIVE_PROBE's summary without a GPU: a ring built on the host with
 * records of two kernel kinds (the send/recv kernel, the collectives' kernel for two collectives)
 * gives one row per kind and collective, in order of first appearance, with the launch counts,
 * the median time from each record's start to every point (points a record did not reach left
 * out, points no record reached -1), a wrapped ring read in full, and the printed lines.
 */
#include "../harness.h"
#include "algo/algo_probe.h"

#include <stdlib.h>
#include <string.h>

static void put(MnProbe *p, unsigned kind, unsigned coll, uint64_t start, const int64_t *at, int n) {
    MnProbeRec *e = &p->rec[p->launches++ % MN_PROBE_RECS];
    memset(e, 0, sizeof *e);
    e->t[0] = kind | (uint64_t)coll << 8;
    e->t[1] = start;
    for (int k = 0; k < n; k++)
        if (at[k] >= 0) e->t[2 + k] = start + (uint64_t)at[k];
}

static void t_summary(void) {
    MnProbe *p = calloc(1, sizeof *p);
    CHECK(p != NULL);
    if (!p) return;
    /* send/recv: points 2 and 3 at 100/200, 300/400, 500/600 ns; point 4 only in one record */
    put(p, MN_PROBE_KIND_P2P, MN_SENDRECV, 1000, (const int64_t[]){100, 200, -1}, 3);
    put(p, MN_PROBE_KIND_COLL, MN_ALLTOALL, 5000, (const int64_t[]){50}, 1);
    put(p, MN_PROBE_KIND_P2P, MN_SENDRECV, 9000, (const int64_t[]){300, 400, 7000}, 3);
    put(p, MN_PROBE_KIND_P2P, MN_SENDRECV, 20000, (const int64_t[]){500, 600, -1}, 3);
    put(p, MN_PROBE_KIND_COLL, MN_ALLREDUCE, 30000, (const int64_t[]){70, 80}, 2);
    AlgoProbeRow rows[8];
    const int n = algo_probe_summarize(p, rows, 8);
    CHECK_EQ_INT(3, n);
    CHECK_EQ_INT(MN_PROBE_KIND_P2P, (int)rows[0].kind);
    CHECK_EQ_INT(MN_SENDRECV, (int)rows[0].coll);
    CHECK_EQ_INT(3, (int)rows[0].launches);
    CHECK_EQ_INT(300, (int)rows[0].at[2]);
    CHECK_EQ_INT(400, (int)rows[0].at[3]);
    CHECK_EQ_INT(7000, (int)rows[0].at[4]);   /* the one record that got there */
    CHECK_EQ_INT(-1, (int)rows[0].at[5]);
    CHECK_EQ_INT(MN_ALLTOALL, (int)rows[1].coll);
    CHECK_EQ_INT(1, (int)rows[1].launches);
    CHECK_EQ_INT(50, (int)rows[1].at[2]);
    CHECK_EQ_INT(MN_ALLREDUCE, (int)rows[2].coll);
    CHECK_EQ_INT(80, (int)rows[2].at[3]);
    /* at most max rows: the first ones */
    CHECK_EQ_INT(2, algo_probe_summarize(p, rows, 2));
    /* the printed lines name the kind and collective and give microseconds */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    if (f) {
        algo_probe_print(f, 3, rows, algo_probe_summarize(p, rows, 8));
        fclose(f);
        CHECK(strstr(buf, "rank 3: native_p2p sendrecv: 3 launches") != NULL);
        CHECK(strstr(buf, " 2:+0.30 3:+0.40 4:+7.00\n") != NULL);
        CHECK(strstr(buf, "native_coll alltoall: 1 launches, median us from the start: 2:+0.05\n") != NULL);
        free(buf);
    }
    /* a ring that wrapped: every slot is read once, the count is the ring's */
    memset(p, 0, sizeof *p);
    for (int i = 0; i < MN_PROBE_RECS + 10; i++)
        put(p, MN_PROBE_KIND_DIRECT, MN_ALLGATHER, 100 + (uint64_t)i, (const int64_t[]){i % 2 ? 10 : 20}, 1);
    CHECK_EQ_INT(1, algo_probe_summarize(p, rows, 8));
    CHECK_EQ_INT(MN_PROBE_RECS, (int)rows[0].launches);
    CHECK(rows[0].at[2] == 10 || rows[0].at[2] == 20);
    /* empty and half-written records count nothing */
    memset(p, 0, sizeof *p);
    p->launches = 2;
    p->rec[0].t[0] = MN_PROBE_KIND_COLL;   /* no start yet */
    CHECK_EQ_INT(0, algo_probe_summarize(p, rows, 8));
    free(p);
}

int main(void) {
    TEST("algo_probe: medians per kind, collective and point", t_summary());
    return harness_report();
}

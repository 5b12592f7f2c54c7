/*
 * algo_probe.c - MSCCLRT_NATIVE_PROBE (see algo_probe.h): the ring's allocation, its summary (median
 * per point over the records of each kernel kind and collective, costs linear in the ring but for
 * the sort of each point's values) and the report, which goes to stderr because the user asked
 * for it by setting the variable (no log level needed).
 */
#include "algo/algo_probe.h"

#include "core/err.h"
#include "core/param.h"
#include "cuda/cuda_driver.h"

#include <stdlib.h>
#include <string.h>

mscclrt_result algo_probe_enabled(bool *on) {
    long long v = 0;
    TRY(param_int(PARAM_NATIVE_PROBE, &v));
    *on = v != 0;
    return MSCCLRT_SUCCESS;
}

mscclrt_result algo_probe_alloc(uint64_t *dev) {
    CuDevPtr d = 0;
    TRY(cu_check(cu.cuMemAlloc(&d, sizeof(MnProbe)), "cuMemAlloc(native probe ring)"));
    const mscclrt_result res = cu_check(cu.cuMemsetD8(d, 0, sizeof(MnProbe)), "cuMemsetD8(native probe ring)");
    if (res != MSCCLRT_SUCCESS) {
        cu.cuMemFree(d);
        return res;
    }
    *dev = (uint64_t)d;
    return MSCCLRT_SUCCESS;
}

static int cmp_i64(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int algo_probe_summarize(const MnProbe *p, AlgoProbeRow *rows, int max) {
    const uint64_t nrec = p->launches < MN_PROBE_RECS ? p->launches : MN_PROBE_RECS;
    int n = 0;
    int64_t *vals = malloc((size_t)MN_PROBE_RECS * sizeof *vals);
    if (!vals) return 0;
    /* the (kind, collective) pairs, in order of first appearance */
    for (uint64_t i = 0; i < nrec; i++) {
        const uint64_t t0 = p->rec[i].t[0];
        if (!t0 || !p->rec[i].t[1]) continue;
        const unsigned kind = (unsigned)(t0 & 0xff), coll = (unsigned)(t0 >> 8);
        int r = 0;
        while (r < n && !(rows[r].kind == kind && rows[r].coll == coll)) r++;
        if (r == n) {
            if (n == max) continue;
            memset(&rows[n], 0, sizeof rows[n]);
            rows[n].kind = kind;
            rows[n].coll = coll;
            n++;
        }
        rows[r].launches++;
    }
    for (int r = 0; r < n; r++)
        for (int k = 2; k < MN_PROBE_POINTS; k++) {
            size_t m = 0;
            for (uint64_t i = 0; i < nrec; i++) {
                const MnProbeRec *e = &p->rec[i];
                if ((e->t[0] & 0xff) != rows[r].kind || (e->t[0] >> 8) != rows[r].coll || !e->t[1] ||
                    !e->t[k] || e->t[k] < e->t[1])
                    continue;
                vals[m++] = (int64_t)(e->t[k] - e->t[1]);
            }
            if (!m) {
                rows[r].at[k] = -1;
                continue;
            }
            qsort(vals, m, sizeof *vals, cmp_i64);
            rows[r].at[k] = vals[m / 2];
        }
    free(vals);
    return n;
}

static const char *kind_name(unsigned k) {
    return k == MN_PROBE_KIND_COLL ? "native_coll" : k == MN_PROBE_KIND_P2P ? "native_p2p"
         : k == MN_PROBE_KIND_DIRECT ? "native_direct" : "kernel";
}
void algo_probe_print(FILE *f, int rank, const AlgoProbeRow *rows, int n) {
    for (int r = 0; r < n; r++) {
        fprintf(f, "mscclrt probe: rank %d: %s %s: %llu launches, median us from the start:", rank,
                kind_name(rows[r].kind), mscclrt_coll_name((mscclrt_coll)rows[r].coll), (unsigned long long)rows[r].launches);
        for (int k = 2; k < MN_PROBE_POINTS; k++)
            if (rows[r].at[k] >= 0) fprintf(f, " %d:+%.2f", k, (double)rows[r].at[k] / 1e3);
        fputc('\n', f);
    }
}

void algo_probe_report(int rank, uint64_t dev) {
    if (!dev) return;
    MnProbe *p = malloc(sizeof *p);
    if (p && cu.cuCtxSynchronize() == CU_OK &&
        cu.cuMemcpyDtoH(p, (CuDevPtr)dev, sizeof *p) == CU_OK) {
        AlgoProbeRow rows[64];
        algo_probe_print(stderr, rank, rows, algo_probe_summarize(p, rows, 64));
    }
    free(p);
    cu.cuMemFree((CuDevPtr)dev);
}

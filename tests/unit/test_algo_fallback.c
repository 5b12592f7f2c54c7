/*
 * test_algo_fallback.c - "a valid call never fails because one algorithm does not fit" (issue
 * 21), on the selection code without a GPU: for every collective, on 2 nodes of 1 rank and 2
 * nodes of 2 ranks, for messages of 1 byte to 4 GiB (powers of two and counts that are
 * multiples of nothing), half and float, in and out of place, symmetric or not, every root, the
 * default collection (algo_default_build_plans: across nodes only the multi-node stdlib
 * programs) is filtered with algo_fits as algo_select does, and the default selector must
 * return an algorithm whose rules fit the request whenever any fits.
 * Where none fits and the native context reaches every rank (not counted here: there is none
 * without a GPU), allgather, alltoall, broadcast, gather and scatter run as send/recv composed
 * on the native kernel (algo_p2pcoll.c, tested by test_p2pcoll) and the reductions as the
 * built-in collectives over the port proxy (both checked on GPUs by test_gpu_p2p_nodes); only
 * PreMulSum then goes to the real NCCL through the drop-in (or fails without one).
 * Which requests those are is written per class (collective, layout, buffer mode, symmetric,
 * root) as the sizes served, into tests/golden/coverage/multi_node.txt, which the test compares
 * against (UPDATE=1 rewrites it): a hole that opens or closes shows as a reviewed diff.
 */
#include "../harness.h"

#include "algo/algo.h"
#include "mscclrt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN "tests/golden/coverage/multi_node.txt"

static AlgoSet *build(int n, int rpn) {
    AlgoSet *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    mscclrt_result r = algo_default_build_plans(n, rpn, 90, "", s, NULL);
    if (r != MSCCLRT_SUCCESS) fprintf(stderr, "N=%d G=%d: %s\n", n, rpn, mscclrt_last_error());
    CHECK_EQ_INT(MSCCLRT_SUCCESS, r);
    return s;
}

static bool per_rank_count(mscclrt_coll k) {   /* NCCL's count is per rank (input or output) */
    return k == MSCCLRT_COLL_ALLGATHER || k == MSCCLRT_COLL_GATHER ||
           k == MSCCLRT_COLL_REDUCESCATTER || k == MSCCLRT_COLL_SCATTER ||
           k == MSCCLRT_COLL_ALLTOALL;
}

static bool rooted(mscclrt_coll k) {
    return k == MSCCLRT_COLL_BROADCAST || k == MSCCLRT_COLL_REDUCE ||
           k == MSCCLRT_COLL_GATHER || k == MSCCLRT_COLL_SCATTER;
}

/* The request of an NCCL call of `count` elements, with the sizes algo_coll.c gives it. */
static mscclrt_request request(mscclrt_coll k, uint64_t count, mscclrt_dtype dt, int n, int rpn,
                               int inplace, int symmetric, int root) {
    mscclrt_request q;
    memset(&q, 0, sizeof q);
    q.collective = k;
    q.dtype = dt;
    q.op = MSCCLRT_SUM;
    q.world_size = n;
    q.ranks_per_node = rpn;
    q.arch = 90;
    q.root = -1;
    q.peer = -1;
    q.symmetric = symmetric;
    q.inplace = inplace;
    const uint64_t b = count * mscclrt_dtype_size(dt);
    switch (k) {
    case MSCCLRT_COLL_ALLGATHER:
    case MSCCLRT_COLL_GATHER:
        q.in_bytes = b;
        q.out_bytes = q.message_bytes = b * (uint64_t)n;
        break;
    case MSCCLRT_COLL_REDUCESCATTER:
    case MSCCLRT_COLL_SCATTER:
        q.out_bytes = b;
        q.in_bytes = q.message_bytes = b * (uint64_t)n;
        break;
    case MSCCLRT_COLL_ALLTOALL:
        q.in_bytes = q.out_bytes = q.message_bytes = b * (uint64_t)n;
        break;
    default:
        q.in_bytes = q.out_bytes = q.message_bytes = b;
    }
    if (rooted(k)) {
        q.root = root;
        q.inplace = 2;   /* the root's mode is not known on every rank */
    }
    return q;
}

/* The sizes served within one class of requests. */
typedef struct Class {
    int total, served;
    uint64_t min, max;     /* of the served message sizes */
    uint64_t grain;        /* the largest power of two dividing every served size */
    uint64_t gap;          /* a multiple of grain in [min, max] that is not served, or 0 */
} Class;

/* Sizes of one class in the order swept, and whether each was served. */
typedef struct Sizes { uint64_t bytes[256]; bool ok[256]; int n; } Sizes;

static Class summarize(const Sizes *z) {
    Class c = {.total = z->n};
    for (int i = 0; i < z->n; i++) {
        if (!z->ok[i]) continue;
        uint64_t b = z->bytes[i];
        if (!c.served++ || b < c.min) c.min = b;
        if (b > c.max) c.max = b;
        uint64_t low = b & -b;
        if (!c.grain || low < c.grain) c.grain = low;
    }
    for (int i = 0; i < z->n && c.served; i++)
        if (!z->ok[i] && z->bytes[i] % c.grain == 0 && z->bytes[i] >= c.min &&
            z->bytes[i] <= c.max && (!c.gap || z->bytes[i] < c.gap))
            c.gap = z->bytes[i];
    return c;
}

/* One layout: checks every choice, appends the coverage lines to out. */
static void sweep(int n, int rpn, char *out, size_t cap) {
    AlgoSet *s = build(n, rpn);
    if (!s) return;
    static const mscclrt_coll colls[] = {
        MSCCLRT_COLL_ALLREDUCE, MSCCLRT_COLL_ALLGATHER, MSCCLRT_COLL_REDUCESCATTER,
        MSCCLRT_COLL_BROADCAST, MSCCLRT_COLL_REDUCE, MSCCLRT_COLL_ALLTOALL,
        MSCCLRT_COLL_GATHER, MSCCLRT_COLL_SCATTER,
    };
    static const mscclrt_dtype dts[] = {MSCCLRT_FLOAT16, MSCCLRT_FLOAT32};
    const mscclrt_algo *cand[64];
    static Sizes z;
    for (size_t ci = 0; ci < sizeof colls / sizeof *colls; ci++) {
        const mscclrt_coll k = colls[ci];
        const int modes = rooted(k) ? 2 : 4;    /* rooted: any buffers, symmetric or not */
        const int roots = rooted(k) ? n : 1;
        for (int mode = 0; mode < modes; mode++) {
            for (int root = 0; root < roots; root++) {
                /* broadcast and reduce for root > 0: also the root-0 plans made for it, as
                 * selection adds them (algo_rooted.c) */
                mscclrt_algo *rooted_v[64];
                int nrooted = 0;
                mscclrt_request rq = request(k, 1, dts[0], n, rpn, 2, 0, root);
                if (algo_rooted_serves(&rq))
                    CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_rooted_make(s, k, root, rpn, rooted_v,
                                                                   &nrooted));
                z.n = 0;
                for (int e = 0; e <= 32; e++) {             /* message of 1 B .. 4 GiB ... */
                    for (int odd = 0; odd < 3; odd++) {     /* ... and counts of nothing */
                        for (size_t di = 0; di < 2; di++) {
                            const size_t es = mscclrt_dtype_size(dts[di]);
                            uint64_t count = (1ull << e) / es ? (1ull << e) / es : 1;
                            if (odd == 1) count = count * 3 / 2 + 1;
                            if (odd == 2) count = count > 7 ? count - 7 : count + 7;
                            if (per_rank_count(k))
                                count = count / (uint64_t)n ? count / (uint64_t)n : 1;
                            const int inplace = rooted(k) ? 2 : mode & 1;
                            const int sym = rooted(k) ? mode : mode >> 1;
                            mscclrt_request q = request(k, count, dts[di], n, rpn, inplace,
                                                        sym, root);
                            int nc = 0;
                            for (int i = 0; i < s->n + nrooted && nc < 64; i++) {
                                const mscclrt_algo *a = i < s->n ? s->v[i] : rooted_v[i - s->n];
                                if (algo_fits(a, &q, NULL)) cand[nc++] = a;
                            }
                            if (z.n < 256) {
                                z.bytes[z.n] = q.message_bytes;
                                z.ok[z.n++] = nc > 0;
                            }
                            if (nc == 0) continue;
                            mscclrt_choice ch;
                            CHECK(algo_default_select_with(NULL, &q, cand, nc, &ch));
                            const char *why = NULL;
                            if (!algo_fits(ch.algo, &q, &why)) {
                                fprintf(stderr, "%s N=%d G=%d %llu bytes: chose '%s', which "
                                        "does not fit: %s\n", mscclrt_coll_name(k), n, rpn,
                                        (unsigned long long)q.message_bytes,
                                        ch.algo->desc.name, why);
                                CHECK(!"the choice fits");
                            }
                        }
                    }
                }
                for (int i = 0; i < nrooted; i++) algo_release(rooted_v[i]);
                const Class c = summarize(&z);
                size_t len = strlen(out);
                char mode_s[48];
                snprintf(mode_s, sizeof mode_s, "%s%s",
                         rooted(k) ? "any buffers" : mode & 1 ? "in place" : "out of place",
                         (rooted(k) ? mode : mode >> 1) ? ", symmetric" : "");
                char root_s[16] = "";
                if (rooted(k)) snprintf(root_s, sizeof root_s, ", root %d", root);
                if (!c.served)
                    snprintf(out + len, cap - len, "%-13s N=%d G=%d %-36s none of %d\n",
                             mscclrt_coll_name(k), n, rpn, strcat(mode_s, root_s), c.total);
                else
                    snprintf(out + len, cap - len, "%-13s N=%d G=%d %-36s %d of %d: multiples "
                             "of %llu from %llu to %llu%s\n", mscclrt_coll_name(k), n, rpn,
                             strcat(mode_s, root_s), c.served, c.total,
                             (unsigned long long)c.grain, (unsigned long long)c.min,
                             (unsigned long long)c.max, c.gap ? " (with gaps)" : "");
            }
        }
    }
    algo_set_free(s);
}

/* out against the golden file, or into it with UPDATE=1 (test_passes.c's convention). */
static void golden(const char *text) {
    const char *up = getenv("UPDATE");
    if (up && strcmp(up, "1") == 0) {
        FILE *w = fopen(GOLDEN ".tmp", "w");
        CHECK(w != NULL);
        if (w) {
            fputs(text, w);
            CHECK(fclose(w) == 0 && rename(GOLDEN ".tmp", GOLDEN) == 0);
        }
        return;
    }
    FILE *g = fopen(GOLDEN, "r");
    if (!g) fprintf(stderr, "%s missing: run `make test UPDATE=1`\n", GOLDEN);
    CHECK(g != NULL);
    if (!g) return;
    static char want[1 << 16];
    size_t n = fread(want, 1, sizeof want - 1, g);
    fclose(g);
    want[n] = 0;
    if (strcmp(want, text) != 0)
        fprintf(stderr, "the requests served across nodes changed: if that is meant, run `make "
                "test UPDATE=1` and review the diff of %s\n", GOLDEN);
    CHECK_STR(want, text);
}

int main(void) {
    static char text[1 << 16] =
        "# Requests the default collection serves across nodes (test_algo_fallback.c): per\n"
        "# collective, layout (N ranks, G per node), buffers and root, how many of the swept\n"
        "# message sizes (1 B .. 4 GiB, powers of two and odd counts, half and float) some\n"
        "# algorithm fits, and which. The rest goes to the real NCCL through the drop-in.\n";
    TEST("fallback: every choice fits, 2 nodes x 1 rank", sweep(2, 1, text, sizeof text));
    TEST("fallback: every choice fits, 2 nodes x 2 ranks", sweep(4, 2, text, sizeof text));
    TEST("fallback: the requests served are " GOLDEN "'s", golden(text));
    return harness_report();
}

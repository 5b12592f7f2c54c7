/*
 * test_p2pcoll.c - the collectives composed of send/recv across nodes (algo_p2pcoll.c), without
 * a GPU: for 1 to 8 ranks, every root, odd and even sizes, in and out of place (each
 * collective's NCCL in-place layout), every rank's steps are run on host memory the way the
 * send/recv kernel pairs them (the k-th send from a to b fills b's k-th receive from a, same
 * size; sends read the buffers as the call found them, or the staging copy), and the result
 * must be the collective's. Also: the reductions and send/recv are not composed, and a step
 * list that does not fit its room is refused.
 */
#include "../harness.h"

#include "algo/algo_p2pcoll.h"
#include "mscclrt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 8
#define MAXS 64

typedef struct {
    uint8_t *send, *recv;      /* the rank's buffers (may alias, as in place) */
    uint8_t *snap;             /* the send buffer as the call found it */
    uint8_t *mem;              /* what send and recv lie in */
    uint64_t in, out;
    P2pStep st[MAXS];
    int n;
} Rank;

static uint8_t val(int rank, uint64_t i) { return (uint8_t)(rank * 37 + i * 11 + 5); }

/* Whether receive j, from rank r itself, is the pair of a self send from the same address:
 * the kernel then copies nothing. */
static bool self_noop(const Rank *k, int r, int j) {
    int nth = 0;
    for (int i = 0; i < j; i++) nth += k->st[i].recv && k->st[i].peer == r;
    for (int i = 0, m = 0; i < k->n; i++) {
        const P2pStep *s = &k->st[i];
        if (s->recv || s->peer != r) continue;
        if (m++ != nth) continue;
        return !s->staged && k->send + s->off == k->recv + k->st[j].off;
    }
    return false;
}

/* Whether rank r's sends read only what its receives leave alone: the kernel runs a rank's
 * sends and receives at once, so an unstaged send from a range a receive writes would race
 * (the self pair that moves a range onto itself is no copy at all). 0 or 1 with a message. */
static int race_free(const Rank *k, int r) {
    for (int i = 0; i < k->n; i++) {
        const P2pStep *s = &k->st[i];
        if (s->recv || s->staged || s->bytes == 0) continue;
        const uint8_t *lo = k->send + s->off, *hi = lo + s->bytes;
        for (int j = 0; j < k->n; j++) {
            const P2pStep *t = &k->st[j];
            if (!t->recv || t->bytes == 0) continue;
            const uint8_t *wlo = k->recv + t->off, *whi = wlo + t->bytes;
            if (t->peer == r && self_noop(k, r, j)) continue;   /* writes nothing */
            if (whi <= lo || hi <= wlo) continue;
            if (s->peer == r && t->peer == r && wlo == lo && whi == hi) continue;
            fprintf(stderr, "rank %d: the send of [%llu, +%llu) to rank %d reads what the receive "
                    "from rank %d writes\n", r, (unsigned long long)s->off,
                    (unsigned long long)s->bytes, s->peer, t->peer);
            return 1;
        }
    }
    return 0;
}

/* Runs every rank's steps; 0, or 1 with a message when pairing fails. */
static int execute(Rank *rk, int n) {
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            /* a's sends to b in order, b's receives from a in order */
            int si = 0, ri = 0;
            for (;;) {
                while (si < rk[a].n && (rk[a].st[si].recv || rk[a].st[si].peer != b)) si++;
                while (ri < rk[b].n && (!rk[b].st[ri].recv || rk[b].st[ri].peer != a)) ri++;
                if (si >= rk[a].n || ri >= rk[b].n) {
                    if (si < rk[a].n || ri < rk[b].n) {
                        fprintf(stderr, "rank %d -> %d: a send or receive without its pair\n", a, b);
                        return 1;
                    }
                    break;
                }
                const P2pStep *s = &rk[a].st[si], *r = &rk[b].st[ri];
                if (s->bytes != r->bytes) {
                    fprintf(stderr, "rank %d -> %d: %llu bytes sent, %llu received\n", a, b,
                            (unsigned long long)s->bytes, (unsigned long long)r->bytes);
                    return 1;
                }
                memmove(rk[b].recv + r->off, rk[a].snap + s->off, s->bytes);
                si++, ri++;
            }
        }
    return 0;
}

/* One case; returns failures (0 or 1). */
static int one(mscclrt_coll coll, int n, int root, uint64_t b, bool inplace) {
    Rank rk[MAXN];
    memset(rk, 0, sizeof rk);
    const uint64_t nb = (uint64_t)n * b;
    int bad = 0;
    for (int r = 0; r < n; r++) {
        uint64_t in = b, out = b;
        switch (coll) {
        case MSCCLRT_COLL_ALLGATHER: out = nb; break;
        case MSCCLRT_COLL_ALLTOALL: in = out = nb; break;
        case MSCCLRT_COLL_GATHER: out = r == root ? nb : 0; break;
        case MSCCLRT_COLL_SCATTER: in = r == root ? nb : 0; break;
        default: break;
        }
        rk[r].in = in, rk[r].out = out;
        /* in place: NCCL's layouts; the buffer is the larger one */
        const uint64_t big = in > out ? in : out;
        uint8_t *mem = calloc(1, (size_t)(2 * big + 16));
        if (!mem) return 1;
        rk[r].mem = rk[r].recv = mem;
        rk[r].send = mem + big + 8;
        if (inplace) {
            if (coll == MSCCLRT_COLL_ALLGATHER) rk[r].send = mem + (uint64_t)r * b;
            else if (coll == MSCCLRT_COLL_GATHER && r == root) rk[r].send = mem + (uint64_t)r * b;
            else if (coll == MSCCLRT_COLL_SCATTER && r == root) rk[r].recv = mem + (uint64_t)r * b,
                                                                  rk[r].send = mem;
            else rk[r].send = mem;
        }
        for (uint64_t i = 0; i < in; i++) rk[r].send[i] = val(r, i);
        rk[r].snap = malloc((size_t)in + 1);
        if (!rk[r].snap) return 1;
        memcpy(rk[r].snap, rk[r].send, (size_t)in);
        mscclrt_request q;
        memset(&q, 0, sizeof q);
        q.collective = coll;
        q.in_bytes = in, q.out_bytes = out;
        q.message_bytes = coll == MSCCLRT_COLL_ALLGATHER ? nb : in > out ? in : out;
        q.root = root;
        q.sendbuf = rk[r].send, q.recvbuf = rk[r].recv;
        rk[r].n = p2pcoll_steps(&q, n, r, rk[r].st, MAXS);
        if (rk[r].n < 0) {
            fprintf(stderr, "%s n=%d rank %d: refused\n", mscclrt_coll_name(coll), n, r);
            bad = 1;
        }
        /* a staged send reads the copy: the snapshot is exactly that */
    }
    for (int r = 0; r < n && !bad; r++) bad = race_free(&rk[r], r);
    if (!bad) bad = execute(rk, n);
    for (int r = 0; r < n && !bad; r++) {   /* the collective's result */
        for (uint64_t i = 0; i < rk[r].out && !bad; i++) {
            int want = -1;
            const uint64_t blk = b ? i / b : 0, j = b ? i % b : 0;
            switch (coll) {
            case MSCCLRT_COLL_ALLGATHER: want = val((int)blk, j); break;
            case MSCCLRT_COLL_ALLTOALL: want = val((int)blk, (uint64_t)r * b + j); break;
            case MSCCLRT_COLL_BROADCAST: want = val(root, i); break;
            case MSCCLRT_COLL_GATHER: want = val((int)blk, j); break;
            case MSCCLRT_COLL_SCATTER: want = val(root, (uint64_t)r * b + i); break;
            default: break;
            }
            if (rk[r].recv[i] != (uint8_t)want) {
                fprintf(stderr, "%s n=%d root %d %llu bytes%s: rank %d byte %llu: got %u want %d\n",
                        mscclrt_coll_name(coll), n, root, (unsigned long long)b,
                        inplace ? " in place" : "", r, (unsigned long long)i, rk[r].recv[i], want);
                bad = 1;
            }
        }
    }
    for (int r = 0; r < n; r++) {
        free(rk[r].mem);
        free(rk[r].snap);
    }
    return bad;
}

int main(void) {
    const mscclrt_coll colls[] = {MSCCLRT_COLL_ALLGATHER, MSCCLRT_COLL_ALLTOALL,
                                  MSCCLRT_COLL_BROADCAST, MSCCLRT_COLL_GATHER,
                                  MSCCLRT_COLL_SCATTER};
    const uint64_t sizes[] = {1, 7, 32, 1000, 4099};
    int bad = 0, cases = 0;
    for (int c = 0; c < 5; c++)
        for (int n = 1; n <= MAXN; n++)
            for (int root = 0; root < n; root++)
                for (int s = 0; s < 5; s++)
                    for (int ip = 0; ip < 2; ip++) {
                        bad += one(colls[c], n, root, sizes[s], ip == 1);
                        cases++;
                    }
    printf("(%d cases)\n", cases);
    TEST("p2pcoll: allgather, alltoall, broadcast, gather, scatter as send/recv, 1-8 ranks, "
         "every root, in and out of place", CHECK_EQ_INT(0, bad));
    /* not composed: the reductions and send/recv; too little room */
    mscclrt_request q;
    memset(&q, 0, sizeof q);
    q.in_bytes = q.out_bytes = q.message_bytes = 64;
    P2pStep st[MAXS];
    int refused = 0;
    const mscclrt_coll red[] = {MSCCLRT_COLL_ALLREDUCE, MSCCLRT_COLL_REDUCESCATTER,
                                MSCCLRT_COLL_REDUCE, MSCCLRT_COLL_SENDRECV};
    for (int i = 0; i < 4; i++) {
        q.collective = red[i];
        refused += p2pcoll_steps(&q, 4, 0, st, MAXS) < 0;
    }
    q.collective = MSCCLRT_COLL_ALLGATHER;
    q.out_bytes = 8 * 64;
    refused += p2pcoll_steps(&q, 8, 3, st, 15) < 0;   /* needs 16 */
    TEST("p2pcoll: reductions and send/recv are not composed; no room is a refusal",
         CHECK_EQ_INT(5, refused));
    /* MSCCLRT_P2PCOLL_BYTES: the rooted collectives that only move data, up to the limit, go
     * composed first; the others, larger calls, empty calls and a limit of 0 do not */
    int right = 0, total = 0;
    for (int c = 0; c < MSCCLRT_COLL_COUNT; c++) {
        const bool rooted = c == MSCCLRT_COLL_BROADCAST || c == MSCCLRT_COLL_GATHER || c == MSCCLRT_COLL_SCATTER;
        static const struct { uint64_t bytes, limit; bool fits; } v[] = {
            {1024, 65536, true}, {65536, 65536, true}, {65537, 65536, false}, {1, 0, false},
            {0, 65536, false}, {1ull << 40, 1ull << 40, true},
        };
        for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
            memset(&q, 0, sizeof q);
            q.collective = (mscclrt_coll)c;
            q.message_bytes = q.in_bytes = q.out_bytes = v[i].bytes;
            const P2pFirst rooted_only = {v[i].limit, 0, 0};
            right += algo_p2pcoll_first(&q, &rooted_only) == (rooted && v[i].fits);
            /* MSCCLRT_P2PCOLL_ALLTOALL_BYTES: alltoall alone, by its own limit */
            const bool a2a = c == MSCCLRT_COLL_ALLTOALL;
            const P2pFirst a2a_only = {0, v[i].limit, 0};
            right += algo_p2pcoll_first(&q, &a2a_only) == (a2a && v[i].fits);
            /* MSCCLRT_P2PCOLL_ALLGATHER_BYTES: allgather alone, by its own limit */
            const bool ag = c == MSCCLRT_COLL_ALLGATHER;
            const P2pFirst ag_only = {0, 0, v[i].limit};
            right += algo_p2pcoll_first(&q, &ag_only) == (ag && v[i].fits);
            total += 3;
        }
    }
    TEST("p2pcoll: MSCCLRT_P2PCOLL_BYTES sends small broadcast, gather and scatter composed first, "
         "MSCCLRT_P2PCOLL_ALLTOALL_BYTES small alltoall, MSCCLRT_P2PCOLL_ALLGATHER_BYTES small "
         "allgather", CHECK_EQ_INT(total, right));
    /* MSCCLRT_P2PCOLL_ALLGATHER_BYTES -1 (default): 1 MiB where every node holds one rank,
     * else none; a setting of 0 or more is taken as it is whatever the layout */
    TEST("p2pcoll: the default allgather limit is 1 MiB with one rank a node, 0 otherwise",
         CHECK_EQ_INT(P2PCOLL_ALLGATHER_AUTO_BYTES, p2pcoll_allgather_limit(-1, 1));
         CHECK_EQ_INT(1048576, P2PCOLL_ALLGATHER_AUTO_BYTES);
         CHECK_EQ_INT(0, p2pcoll_allgather_limit(-1, 2));
         CHECK_EQ_INT(0, p2pcoll_allgather_limit(-1, 8));
         CHECK_EQ_INT(0, p2pcoll_allgather_limit(-1, 0));   /* nodes of different sizes */
         CHECK_EQ_INT(0, p2pcoll_allgather_limit(0, 1));
         CHECK_EQ_INT(4096, p2pcoll_allgather_limit(4096, 4));
         CHECK_EQ_INT(1ull << 40, p2pcoll_allgather_limit(1ll << 40, 1)));
    return harness_report();
}

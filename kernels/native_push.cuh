/*
 * native_push.cuh - the direct path's forms by stores (part of the direct module: included by
 * native_direct.cuh after its helpers). Reading a peer's input while it reads ours runs both
 * NVLink directions at reduce_scatter's rate (about 334 GB/s on 2 x H100 and H200); stores in
 * both directions reach all_gather's (356-362). Out of place only, large calls (push_ok): the
 * outputs serve as staging for the peers' contributions.
 *
 *   allreduce (any rank count): every block stores its contribution to each part into the
 *   part's owner, sums its own part once every peer's has landed, and stores the sum back.
 *   reduce_scatter (2 ranks, from MSCCLRT_NATIVE_PUSH_RS_BYTES; experimental, off by default:
 *   on 2 x H200 0.4-1 % ahead of the loads at 1 GiB, behind below, c41): blocks in two roles
 *   working at once, so the local sums overlap the stores instead of following them (one
 *   block doing both in turn ran 1809 us at 1 GiB on 2 x H200 against the loads' 1612:
 *   BENCHMARKS.md, sixteenth session). Storer blocks copy
 *   this rank's contribution to the peer's part into the peer's output, chunk after chunk, and
 *   count each chunk in the peer's PUSH_IN counter of the block; reducer blocks wait for the
 *   peer's chunks in their own output and sum them with this rank's own, in place. Each
 *   storer's counter has one reader (reducer s % R), which consumes its chunks in order
 *   through its PUSH_SEEN counter, so counts carry across launches without a reset.
 */
#ifndef MSCCLRT_NATIVE_PUSH_CUH
#define MSCCLRT_NATIVE_PUSH_CUH

namespace mn {

#define MN_PUSH_MIN (32ull << 20)     /* input bytes from which allreduce goes by stores */
#define MN_PUSH_CHUNK (1ull << 20)    /* a storer's chunk: one count in the peer's PUSH_IN */

/* Whether the collective goes by stores: out of place on every rank (the records say so, so
 * every block of every rank answers alike), whole 16-byte parts; allreduce from MN_PUSH_MIN,
 * reduce_scatter with 2 ranks from the context's push_rs_min (0: never) on a grid of both
 * roles */
__device__ bool push_ok(const MnContext *c, const MnArgs &a, const MnDirectRec *recs, u32 n) {
    if (a.in_bytes % (16ull * n)) return false;
    if (!(a.coll == MN_ALLREDUCE && a.in_bytes >= MN_PUSH_MIN) &&
        !(a.coll == MN_REDUCESCATTER && n == 2 && c->push_rs_min && a.in_bytes >= c->push_rs_min &&
          gridDim.x >= 2))
        return false;
    for (u32 q = 0; q < n; q++)
        if (recs[q].flags & MN_DIRECT_INPLACE) return false;
    return true;
}

/* allreduce by stores: (1) this rank's contribution to part q goes into rank q's output at part
 * r (q != r), which holds nothing yet; (2) once every peer's has landed, part r reduced in rank
 * order (this rank's own from its input, rank s's from its output at part s) into this rank's
 * output; (3) once every peer has read its staging, the result into every peer's output at
 * part r, which was that peer's staging for this rank's contribution. */
__device__ void allreduce_push(const MnArgs &a, const Ctx &x, u32 b, const u64 *rp) {
    const u32 n = x.n, r = x.rank;
    const u64 part = a.in_bytes / n;
    const Span sh = share(part, b, gridDim.x);
    const u64 m = sh.hi - sh.lo;
    for (u32 k = 1; k < n && m; k++) {   /* staggered: block b starts b peers on */
        const u32 q = (r + 1 + (k - 1 + b) % (n - 1)) % n;
        mk::copy((char *)rp[q] + (u64)r * part + sh.lo, (const char *)a.in + (u64)q * part + sh.lo, m);
    }
    direct_sync(x, b);
    u64 src[MN_DIRECT_MAX_RANKS];
    for (u32 s = 0; s < n; s++) src[s] = s == r ? a.in + (u64)r * part : a.out + (u64)s * part;
    if (m) direct_reduce_one((char *)a.out + (u64)r * part + sh.lo, src, sh.lo, m, n);
    direct_sync(x, b);
    for (u32 k = 1; k < n && m; k++) {
        const u32 q = (r + k) % n;
        mk::copy((char *)rp[q] + (u64)r * part + sh.lo, (const char *)a.out + (u64)r * part + sh.lo, m);
    }
}

/* reduce_scatter's roles: the grid's last third (at least one block) reduces, the rest store */
__device__ __forceinline__ u32 push_reducers(u32 nb) { return nb / 3 ? nb / 3 : 1; }
/* storer s's chunk i of the part: [lo, hi) */
__device__ __forceinline__ Span push_chunk(u64 part, u32 s, u32 S, u64 i) {
    const Span sh = share(part, s, S);
    const u64 lo = minu(sh.lo + i * MN_PUSH_CHUNK, sh.hi);
    return Span{lo, minu(lo + MN_PUSH_CHUNK, sh.hi)};
}
__device__ __forceinline__ u64 push_chunks(u64 part, u32 s, u32 S) {
    const Span sh = share(part, s, S);
    return (sh.hi - sh.lo + MN_PUSH_CHUNK - 1) / MN_PUSH_CHUNK;
}

/* reduce_scatter of 2 ranks by stores (block b of the grid; rp[q]: the peer's output) */
__device__ void reducescatter_push(const MnArgs &a, const Ctx &x, u32 b, const u64 *rp) {
    const u32 r = x.rank, q = 1 - r, nb = gridDim.x, R = push_reducers(nb), S = nb - R;
    const u64 part = a.out_bytes;
    if (b < S) {
        /* storer b: this rank's contribution to part q, chunk by chunk into the peer's output,
         * each counted once its stores are done (release after the block's barrier) */
        const u64 k = push_chunks(part, b, S);
        for (u64 i = 0; i < k; i++) {
            const Span c = push_chunk(part, b, S, i);
            mk::copy((char *)rp[q] + c.lo, (const char *)a.in + (u64)q * part + c.lo, c.hi - c.lo);
            __syncthreads();
            if (threadIdx.x == 0) mk::signal(lane_ctr_at(x, q, MN_LANE_PUSH_IN, b));
        }
        return;
    }
    /* reducer t: the chunks of storers t, t + R, ..., round by round in the order they are
     * stored, each once the peer counted it: this rank's output holds the peer's
     * contribution there, summed in rank order with this rank's own */
    const u32 t = b - S;
    const u64 src[2] = {r == 0 ? a.in : a.out, r == 0 ? a.out : a.in + part};
    for (u64 i = 0;; i++) {
        bool any = false;
        for (u32 s = t; s < S; s += R) {
            if (i >= push_chunks(part, s, S)) continue;
            any = true;
            if (threadIdx.x == 0) mk::wait(lane_ctr(x, MN_LANE_PUSH_IN, s, q), lane_ctr(x, MN_LANE_PUSH_SEEN, s, q));
            __syncthreads();
            const Span c = push_chunk(part, s, S, i);
            if (c.hi > c.lo) direct_reduce_one((char *)a.out + c.lo, src, c.lo, c.hi - c.lo, 2);
        }
        if (!any) break;
    }
}

}  // namespace mn
#endif

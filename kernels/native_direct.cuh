/*
 * native_direct.cuh - the direct (zero-copy) form of the built-in collectives: peers read and
 * write each rank's own buffers over NVLink instead of staging pieces through scratch slots.
 * A module of its own (the runtime compiles "#define MSCCLRT_NATIVE_LIB_ONLY" + this file, per
 * dtype and operator like the built-in one, only once a call is eligible): the slot path it falls
 * back to is native_builtin.cuh's, inlined here, so the built-in module's kernels stay as they
 * were. Its kernel mscclrt_native_direct takes the MnDirect argument native_abi.h describes.
 *
 * One launch, on up to MN_DIRECT_BLOCKS blocks (more than the slot path's 32: the direct
 * copies are bound by how many SMs keep NVLink loads and stores in flight): (1) every block
 * sends its record to the same block of every peer as LL16 packets through its lane (its own
 * counters and record slots, native_abi.h) and reads theirs; the records say where each rank's buffers lie (an announced
 * allocation and an offset) and what each rank has mapped, so every block of every rank takes
 * the same path; the record's arrival also says the peer's stream reached this collective, so
 * its buffers hold their input and may be written. (2) direct: block b moves its share of this
 * rank's part with plain loads and stores to peer pointers; else the slot path. (3) direct
 * only: every block signals the same block of every peer and waits for theirs, so no rank's
 * kernel ends while a peer still touches its buffers. The slot path runs on the first
 * MN_MAX_BLOCKS blocks (Ctx::nb); the others then end at once.
 *
 * Alltoall in place swaps blocks between the ranks of each pair (alltoall_in_place); in place
 * on some ranks only, or with overlapping buffers, it takes the slots. Large out-of-place
 * all_reduce (and, where enabled, reduce_scatter of 2 ranks) go by stores (native_push.cuh).
 *
 * Reductions read all n sources of a vector before storing it (mk::reduce), in rank order,
 * with one rank computing each element and storing it everywhere: in-place calls are safe and
 * every rank gets the same bits as on the slot path. Ranks: up to MN_DIRECT_MAX_RANKS; the
 * reducing collectives for 2, 4 and 8 ranks (one instantiation each) and not for fp8 types or
 * avg/PreMulSum; the rest take the slots.
 */
#ifndef MSCCLRT_NATIVE_DIRECT_CUH
#define MSCCLRT_NATIVE_DIRECT_CUH
#include "native_builtin.cuh"

namespace mn {

/* the buffers a collective lets peers touch: bit 0 sendbuf, bit 1 recvbuf (0: never direct) */
__device__ __forceinline__ u32 direct_needs(u32 coll) {
    switch (coll) {
    case MN_ALLREDUCE: return 3;
    case MN_ALLGATHER: case MN_ALLTOALL: return 2;
    case MN_REDUCESCATTER: case MN_BROADCAST: case MN_REDUCE: return 1;
    default: return 0;
    }
}
/* whether peers touch rank q's buffer `need` bit (broadcast reads the root's input only; a
 * reduce_scatter by stores writes the peers' outputs instead of reading their inputs) */
__device__ __forceinline__ bool direct_uses(const MnArgs &a, u32 q, u32 bit, bool push) {
    if (a.coll == MN_BROADCAST) return bit == 1 && q == (u32)(a.root >= 0 ? a.root : 0);
    if (push && a.coll == MN_REDUCESCATTER) return bit == 2;
    return (direct_needs(a.coll) & bit) != 0;
}
__device__ __forceinline__ bool direct_reduces(u32 coll) {
    return coll == MN_ALLREDUCE || coll == MN_REDUCESCATTER || coll == MN_REDUCE;
}

/* Whether an alltoall swaps in place: every rank's sendbuf is its recvbuf (the records say so,
 * so every block of every rank answers alike). A push would overwrite the block its owner has
 * yet to send; a mix of in-place and separate buffers takes the slots. */
__device__ __forceinline__ bool alltoall_swap(const MnDirectRec *recs, u32 n) {
    for (u32 q = 0; q < n; q++)
        if (!(recs[q].flags & MN_DIRECT_SAME)) return false;
    return true;
}

/* Whether the records allow the direct path, in two parts that threads check at once: the call
 * and all records together (direct_call_ok), and each rank's record (direct_rec_ok: its buffers
 * shared, and mapped by every other rank). Functions of the records and the call only, so every
 * block of every rank answers alike. */
__device__ bool direct_call_ok(const MnArgs &a, const MnDirectRec *recs, u32 n) {
    if (direct_needs(a.coll) == 0 || n > MN_DIRECT_MAX_RANKS) return false;
    /* fp8 reductions are not instantiated here (their NVRTC time doubled the module's) */
    if (direct_reduces(a.coll) &&
        (!(n == 2 || n == 4 || n == 8) || a.op == MN_OP_PREMULSUM || MSCCLRT_OP == mk::OP_AVG ||
         mk::SlowElems<T>::value))
        return false;
    if (a.coll == MN_ALLTOALL && !alltoall_swap(recs, n))   /* in place on every rank, or none */
        for (u32 q = 0; q < n; q++)
            if (recs[q].flags & MN_DIRECT_INPLACE) return false;
    return true;
}
__device__ bool direct_rec_ok(const MnArgs &a, const MnDirectRec *recs, u32 n, u32 q, bool push) {
    const MnDirectRec &e = recs[q];
    const bool s = direct_uses(a, q, 1, push), t = direct_uses(a, q, 2, push);
    if (s && (e.spub == 0 || e.sslot >= MN_PM_SLOTS)) return false;
    if (t && (e.rpub == 0 || e.rslot >= MN_PM_SLOTS)) return false;
    for (u32 o = 0; o < n; o++) {   /* has rank o mapped q's buffers? */
        if (o == q) continue;
        const u32 u = recs[o].upto[q];
        if ((s && u < e.spub) || (t && u < e.rpub)) return false;
    }
    return true;
}

/* This rank's peer-memory table, [n][MN_PM_SLOTS] entries, read before the kernel's prologue,
 * one entry per thread, and kept in registers until the records arrive: the entries a launch
 * may use were written before it was launched (records use only announcements every rank had
 * mapped then, and none is retired before this launch ends), so reading them early reads the
 * same words, and their round trip overlaps the previous kernel's end instead of following the
 * record exchange (thread 0 read two words per peer there, one after the other). With it and
 * the context loaded before the prologue, launches of 4-16 MiB took about 1 us less on 2 x H200
 * (BENCHMARKS.md, fifteenth session); the probe's step from records to addresses (points 11
 * to 12) stayed about 1.4 us, and spreading direct_agree's checks over the threads left it
 * there (sixteenth session), so most of that step is elsewhere. */
struct PmAhead {
    const MnPeerMem *src;
    u32 n;
    MnPeerMem e;
    __device__ PmAhead(const MnDirect &d, u32 n_) : src((const MnPeerMem *)d.table), n(n_), e{0, 0} {
        if (threadIdx.x < n * MN_PM_SLOTS) e = pm_load(src + threadIdx.x);
    }
    /* block-wide: the entries into t (shared, n * MN_PM_SLOTS); a block of fewer threads
     * than entries reads the rest now */
    __device__ void land(MnPeerMem *t) const {
        if (threadIdx.x < n * MN_PM_SLOTS) t[threadIdx.x] = e;
        for (u32 i = threadIdx.x + blockDim.x; i < n * MN_PM_SLOTS; i += blockDim.x) t[i] = pm_load(src + i);
        __syncthreads();
    }
};
/* rank q's buffer as this rank maps it (mscclrt_native.cuh) */
__device__ __forceinline__ u64 direct_peer_ptr(const MnPeerMem *t, u32 q, u32 slot, u32 pub, u64 off) {
    const MnPeerMem &m = t[(u64)q * MN_PM_SLOTS + slot];
    return pm_entry_ptr(m.pub, m.base, q, slot, pub, off);
}

/* Round one (block-wide): records exchanged with the same block of every peer; returns the
 * path, and for the direct one every rank's send and recv addresses in sp / rp and in *push
 * whether the collective goes by stores (push_ok, native_push.cuh). */
__device__ bool push_ok(const MnContext *c, const MnArgs &a, const MnDirectRec *recs, u32 n);
__device__ bool direct_agree(const MnArgs &a, const MnDirect &d, const Ctx &x, u32 b, const PmAhead &pm,
                             MnDirectRec *recs, u64 *sp, u64 *rp, bool *push) {
    __shared__ bool all[MN_DIRECT_MAX_RANKS];
    __shared__ MnPeerMem table[MN_DIRECT_MAX_RANKS * MN_PM_SLOTS];
    const u32 n = x.n, r = x.rank;
    const long long t0 = clock64();
    if (threadIdx.x == 0) {
        recs[r] = d.rec;
        for (u32 p = 0; p < n; p++) all[p] = p != r;
    }
    __syncthreads();
    lane_exchange(x, b, all, &recs[r], 0, recs);
    probe_at(11);
    pm.land(table);
    probe_at(6);
    /* thread q checks rank q's record (thread 0 the call too), then finds its addresses, rather
     * than thread 0 doing it all rank after rank (reduce_scatter 4 MiB and all_reduce 2-16 MiB
     * 0.5-1 us faster on 2 x H100, c39; the probe's points 6 to 12 still took 1.3 us, cause
     * unknown); after an abort the records may be half read, and the slot path, which touches
     * no user buffer of a peer, runs to its end instead */
    const u32 q = threadIdx.x;
    const bool pu = push_ok(x.c, a, recs, n);   /* every thread alike: the records and the call */
    if (q == 0) *push = pu;
    bool ok = true;
    if (q == 0) ok = direct_call_ok(a, recs, n) && !mk::aborted_since(t0);
    if (q < n && q < MN_DIRECT_MAX_RANKS) ok = ok && direct_rec_ok(a, recs, n, q, pu);
    bool go = __syncthreads_and(ok);
    if (b == 0 && q == 0) atomicAdd((unsigned long long *)(x.scratch + x.c->off_stats) + (go ? 0 : 1), 1ull);
    probe_at(7);
    if (go && q < n && q < MN_DIRECT_MAX_RANKS) {
        const MnDirectRec &e = recs[q];
        const bool s = direct_uses(a, q, 1, pu), t = direct_uses(a, q, 2, pu);
        sp[q] = q == r ? a.in : s ? direct_peer_ptr(table, q, e.sslot, e.spub, e.soff) : 0;
        rp[q] = q == r ? a.out : t ? direct_peer_ptr(table, q, e.rslot, e.rpub, e.roff) : 0;
        ok = !(s && !sp[q]) && !(t && !rp[q]);
    }
    go = __syncthreads_and(ok);
    probe_at(12);
    return go;
}

/* n = N sources (rank order) into D destinations, read before written */
template <int N, int D>
__device__ __forceinline__ void direct_reduce(char *const *dst, const u64 *src, u64 off, u64 m) {
    if constexpr (mk::SlowElems<T>::value) return;   /* never direct (direct_call_ok) */
    const char *s[N];
    char *t[D];
#pragma unroll
    for (int k = 0; k < N; k++) s[k] = (const char *)src[k] + off;
#pragma unroll
    for (int k = 0; k < D; k++) t[k] = dst[k];
    mk::reduce<T, OP, N, D>(t, s, m);
}
/* rank order sources at src[q] + off into one destination (n = 2, 4 or 8) */
__device__ void direct_reduce_one(char *dst, const u64 *src, u64 off, u64 m, u32 n) {
    char *const d[1] = {dst};
    if (n == 2) direct_reduce<2, 1>(d, src, off, m);
    else if (n == 4) direct_reduce<4, 1>(d, src, off, m);
    else direct_reduce<8, 1>(d, src, off, m);
}

/* Block-wide: this block's stores and loads so far are done; wait until every peer's same
 * block says the same (release after the block's barrier, acquire: system scope). The lanes'
 * done counters count, so a launch may pass several such points, every rank as many. */
__device__ void direct_sync(const Ctx &x, u32 b) {
    __syncthreads();
    if (threadIdx.x == 0) {
        for (u32 p = 0; p < x.n; p++)
            if (p != x.rank) lane_done(x, b, p);
        probe_at(13);
        for (u32 p = 0; p < x.n; p++)
            if (p != x.rank) lane_wait_done(x, b, p);
    }
    __syncthreads();
}

}  // namespace mn
#include "native_push.cuh"   /* the forms by stores: allreduce_push, reducescatter_push */
namespace mn {

/* Block-wide: the n bytes at p and at q trade places; each thread reads both of its vectors
 * before it writes either, so no other thread (or rank) may touch them meanwhile. Two vectors
 * of each side in flight per thread (one side is a peer's, read over NVLink). */
__device__ __noinline__ void swap_bytes(char *p, char *q, u64 n) {
    const u32 tid = threadIdx.x, nt = blockDim.x;
    u64 done = 0;
    if (mk::al16(p) && mk::al16(q)) {
        const u64 nv = n >> 4;
        uint4 *vp = (uint4 *)p, *vq = (uint4 *)q;
        u64 i = tid;
        for (; i + nt < nv; i += 2 * (u64)nt) {
            const uint4 a0 = vp[i], a1 = vp[i + nt], b0 = vq[i], b1 = vq[i + nt];
            vp[i] = b0; vp[i + nt] = b1; vq[i] = a0; vq[i + nt] = a1;
        }
        for (; i < nv; i += nt) {
            const uint4 a0 = vp[i], b0 = vq[i];
            vp[i] = b0; vq[i] = a0;
        }
        done = nv << 4;
    }
    if ((((u64)p | (u64)q | done | n) & 3) == 0) {
        for (u64 i = (done >> 2) + tid; i < (n >> 2); i += nt) {
            const u32 a0 = ((u32 *)p)[i], b0 = ((u32 *)q)[i];
            ((u32 *)p)[i] = b0; ((u32 *)q)[i] = a0;
        }
    } else {
        for (u64 i = done + tid; i < n; i += nt) {
            const char a0 = p[i], b0 = q[i];
            p[i] = b0; q[i] = a0;
        }
    }
}

/* In-place alltoall (every rank's sendbuf is its recvbuf): block q of rank r and block r of
 * rank q trade places, for every pair. The lower rank of a pair swaps the first half of the
 * pair's blocks, the higher one the rest, so each rank moves as much as it receives and no
 * two threads anywhere touch the same bytes; the records' arrival said every peer's buffer
 * holds its input, and the final barrier keeps every buffer in use until all swaps are done.
 * Block r stays where it is. Each swap reads the peer's half over NVLink as it writes ours
 * into it (a push alone would overwrite what the peer has yet to send). */
__device__ void alltoall_in_place(const MnArgs &a, const Ctx &x, u32 b, const u64 *rp) {
    const u32 n = x.n, r = x.rank;
    const u64 blk = a.out_bytes / n;
    const u64 half = minu(round16((blk + 1) / 2), blk);
    for (u32 k = 1; k < n; k++) {   /* staggered: block b starts b peers on */
        const u32 q = (r + 1 + (k - 1 + b) % (n - 1)) % n;
        const u64 lo = r < q ? 0 : half, len = r < q ? half : blk - half;
        const Span sh = share(len, b, gridDim.x);
        if (sh.hi > sh.lo)
            swap_bytes((char *)a.out + (u64)q * blk + lo + sh.lo, (char *)rp[q] + (u64)r * blk + lo + sh.lo,
                       sh.hi - sh.lo);
    }
}

/* Step two (block b of the grid): this rank's part of the collective, directly. */
__device__ void direct_run(const MnArgs &a, const Ctx &x, u32 b, const u64 *sp, const u64 *rp,
                           bool push, bool swap) {
    const u32 n = x.n, r = x.rank, nb = gridDim.x, root = a.root >= 0 ? (u32)a.root : 0;
    switch (a.coll) {
    case MN_ALLREDUCE: {
        if (push) {
            allreduce_push(a, x, b, rp);
            break;
        }
        /* part r of every rank's input, reduced, stored into part r of every rank's output */
        const u64 bytes = a.in_bytes, part = round16((bytes + n - 1) / n);
        const u64 lo = minu((u64)r * part, bytes), len = minu(part, bytes - lo);
        const Span sh = share(len, b, nb);
        const u64 m = sh.hi - sh.lo, off = lo + sh.lo;
        if (m == 0) break;
        char *d[MN_DIRECT_MAX_RANKS];
        for (u32 q = 0; q < n; q++) d[q] = (char *)rp[q] + off;
        if (n == 2) direct_reduce<2, 2>(d, sp, off, m);
        else if (n == 4) direct_reduce<4, 4>(d, sp, off, m);
        else direct_reduce<8, 8>(d, sp, off, m);
        break;
    }
    case MN_REDUCESCATTER: {
        if (push) {
            reducescatter_push(a, x, b, rp);
            break;
        }
        const u64 len = a.out_bytes;
        const Span sh = share(len, b, nb);
        if (sh.hi > sh.lo)
            direct_reduce_one((char *)a.out + sh.lo, sp, (u64)r * len + sh.lo, sh.hi - sh.lo, n);
        break;
    }
    case MN_REDUCE: {
        const Span sh = share(a.in_bytes, b, nb);
        if (r == root && sh.hi > sh.lo)
            direct_reduce_one((char *)a.out + sh.lo, sp, sh.lo, sh.hi - sh.lo, n);
        break;
    }
    case MN_ALLGATHER: {
        /* push this rank's block into every rank's output; block b starts b ranks further on,
         * so at any moment some blocks copy locally while the others use each link (a local
         * copy after all the remote ones left the links idle for its whole length) */
        const u64 len = a.in_bytes;
        const Span sh = share(len, b, nb);
        if (sh.hi == sh.lo) break;
        for (u32 k = 1; k <= n; k++) {
            const u32 q = (r + k + b) % n;
            char *dst = (char *)rp[q] + (u64)r * len + sh.lo;
            const char *src = (const char *)a.in + sh.lo;
            if (dst != src) mk::copy(dst, src, sh.hi - sh.lo);
        }
        break;
    }
    case MN_ALLTOALL: {
        if (swap) {
            alltoall_in_place(a, x, b, rp);
            break;
        }
        /* the local block on an eighth of the grid, the n - 1 remote ones on the rest: a local
         * copy runs several times faster than a link, so its few blocks finish it while the
         * others keep every link busy all along (mixing both on every block, staggered, left
         * alltoall at 0.89 of NCCL at 1 GiB on 2 x H200 where all_gather, without the local
         * copy, reached 1.04) */
        const u64 blk = a.out_bytes / n;
        const u32 nl = nb >= 8 ? nb / 8 : 0;
        if (nl && b < nl) {
            const Span sh = share(blk, b, nl);
            if (sh.hi > sh.lo)
                mk::copy((char *)rp[r] + (u64)r * blk + sh.lo, (const char *)a.in + (u64)r * blk + sh.lo,
                         sh.hi - sh.lo);
            break;
        }
        const u32 rb = b - nl, nr = nb - nl;
        const Span sh = share(blk, rb, nr);
        if (sh.hi == sh.lo) break;
        for (u32 k = nl ? 1 : 0; k < n; k++) {   /* staggered: block rb starts rb peers on */
            const u32 q = nl ? (r + 1 + (k - 1 + rb) % (n - 1)) % n : (r + k + 1 + rb) % n;
            mk::copy((char *)rp[q] + (u64)r * blk + sh.lo, (const char *)a.in + (u64)q * blk + sh.lo,
                     sh.hi - sh.lo);
        }
        break;
    }
    case MN_BROADCAST: {
        /* every rank pulls from the root's input */
        const Span sh = share(a.in_bytes, b, nb);
        const char *src = (const char *)sp[root] + sh.lo;
        char *dst = (char *)a.out + sh.lo;
        if (sh.hi > sh.lo && dst != src) mk::copy(dst, src, sh.hi - sh.lo);
        break;
    }
    default: break;
    }
}

/* Step three (block-wide): this block's stores and loads are done; wait until every peer's
 * same block says the same (release after the block's barrier, acquire: system scope). */
__device__ void direct_finish(const Ctx &x, u32 b) { direct_sync(x, b); }

/* The slot path when the direct one cannot run: a call of its own, so that its register
 * demands (the slot protocol, reductions over up to 8 slots) do not spill the direct path's
 * (with it inlined, ptxas spilled about 1 KiB per thread) */
__device__ __noinline__ void direct_fallback(const MnArgs &a, const Ctx &x, const Flow &f) {
    coll_slots(a, x, f);
    f.finish();
}

}  // namespace mn

extern "C" __global__ void __launch_bounds__(1024) mscclrt_native_direct(MN_PARAM MnArgs a,
                                                                         MN_PARAM MnDirect d) {
    /* before the prologue only loads of what no earlier kernel writes: the context (written
     * once at setup) and the peer-memory table's entries (PmAhead). The grid may exceed the
     * slot path's MN_MAX_BLOCKS: its first blocks take the slots */
    const mn::Ctx x(a, gridDim.x < MN_MAX_BLOCKS ? gridDim.x : MN_MAX_BLOCKS);
    const bool direct = x.n <= MN_DIRECT_MAX_RANKS && x.c->off_lane && gridDim.x <= MN_DIRECT_BLOCKS;
    const mn::PmAhead pm(d, direct ? x.n : 0);
    mk::launch_prologue();
    __shared__ bool net_sent;
    const mn::Flow f(x, blockIdx.x, &net_sent);
    __shared__ MnDirectRec recs[MN_DIRECT_MAX_RANKS];
    __shared__ mk::u64 sp[MN_DIRECT_MAX_RANKS], rp[MN_DIRECT_MAX_RANKS];
    __shared__ bool push;
    if (!direct) {
        mn::direct_fallback(a, x, f);   /* the runtime does not launch this kernel then */
        return;
    }
    mn::probe_begin(x.c, MN_PROBE_KIND_DIRECT, a.coll);
    mn::probe_grid_at(x.c, 10);   /* the grid's last block to begin */
    if (mn::direct_agree(a, d, x, blockIdx.x, pm, recs, sp, rp, &push)) {
        mn::probe_at(2);
        mn::direct_run(a, x, blockIdx.x, sp, rp, push,
                       a.coll == MN_ALLTOALL && mn::alltoall_swap(recs, x.n));
        mn::probe_at(3);
        mn::direct_finish(x, blockIdx.x);
    } else {
        mn::direct_fallback(a, x, f);
    }
    mn::probe_at(15);
    mn::probe_grid_at(x.c, 14);
}
#endif

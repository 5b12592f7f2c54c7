/*
 * mscclrt_native.cuh - what a native algorithm's CUDA source includes: the device library
 * (mk::, copies and reductions for every dtype and operator) and mn::, the context the runtime
 * set up for the communicator (native_abi.h): peers' scratch, per-(block, peer) data and ack
 * counters, and slots. The helpers here implement the one protocol the built-in algorithms use
 * and user kernels may use too:
 *
 *   sender, message k of (block b, to peer p):   if k >= 2: wait_ack(b, p)     (slot half free)
 *                                                 write peer_slot(p, b, k % 2); put_done(b, p)
 *   receiver, message k of (block b, from p):     wait_data(b, p); read slot(b, p, k % 2);
 *                                                 ack(b, p)
 *   end of the kernel, for every peer p written:  wait_ack(b, p) min(K, 2) times
 *
 * so every launch leaves the scratch idle, and counters only grow (graph replay safe). All
 * helpers are block-wide: every thread of the block calls them.
 */
#ifndef MSCCLRT_NATIVE_CUH
#define MSCCLRT_NATIVE_CUH
#include "mscclrt_device.cuh"
#include "native_abi.h"

namespace mn {
using mk::u32;
using mk::u64;

struct Ctx {
    const MnContext *c;
    u32 rank, n;
    char *scratch;
    const u64 *peers;             /* peer scratch bases */
    u64 slot;

    __device__ explicit Ctx(const MnArgs &a)
        : c((const MnContext *)a.ctx), rank(c->rank), n(c->nranks), scratch((char *)c->scratch),
          peers((const u64 *)c->peer_scratch), slot(c->slot_bytes) {}

    __device__ u64 *ctr(u64 off, u32 b, u32 r) const { return (u64 *)(scratch + off) + (u64)b * n + r; }
    /* this rank's slot for data from sender s (block b, half h) */
    __device__ char *slot_in(u32 b, u32 s, u32 h) const {
        return scratch + c->off_slots + (((u64)b * n + s) * 2 + h) * slot;
    }
    /* peer p's slot for data from this rank */
    __device__ char *slot_at(u32 p, u32 b, u32 h) const {
        return (char *)peers[p] + c->off_slots + (((u64)b * n + rank) * 2 + h) * slot;
    }
};

/* Signals: one thread of the block issues them after a __syncthreads, so the whole block's
 * writes before it are ordered before the count (release at system scope). */
__device__ __forceinline__ void put_done(const Ctx &x, u32 b, u32 p) {
    __syncthreads();
    if (threadIdx.x == 0)
        mk::signal((u64)((const char *)x.peers[p] + x.c->off_data_in) + ((u64)b * x.n + x.rank) * 8);
}
__device__ __forceinline__ void ack(const Ctx &x, u32 b, u32 p) {
    __syncthreads();
    if (threadIdx.x == 0)
        mk::signal((u64)((const char *)x.peers[p] + x.c->off_ack_in) + ((u64)b * x.n + x.rank) * 8);
}
__device__ __forceinline__ void wait_data(const Ctx &x, u32 b, u32 p) {
    if (threadIdx.x == 0) mk::wait(x.ctr(x.c->off_data_in, b, p), x.ctr(x.c->off_data_seen, b, p));
    __syncthreads();
}
__device__ __forceinline__ void wait_ack(const Ctx &x, u32 b, u32 p) {
    if (threadIdx.x == 0) mk::wait(x.ctr(x.c->off_ack_in, b, p), x.ctr(x.c->off_ack_seen, b, p));
    __syncthreads();
}

/* [lo, hi) of piece i of a block's share: shares and pieces are multiples of 16 bytes, so
 * vector copies stay aligned wherever the buffers are. */
struct Span { u64 lo, hi; };
__device__ __forceinline__ u64 round16(u64 v) { return (v + 15) & ~(u64)15; }
__device__ __forceinline__ Span share(u64 bytes, u32 b, u32 nb) {
    const u64 s = round16((bytes + nb - 1) / nb);
    const u64 lo = (u64)b * s < bytes ? (u64)b * s : bytes;
    const u64 hi = lo + s < bytes ? lo + s : bytes;
    return Span{lo, hi};
}
__device__ __forceinline__ u64 npieces(Span s, u64 slot) { return (s.hi - s.lo + slot - 1) / slot; }
__device__ __forceinline__ Span piece(Span s, u64 i, u64 slot) {
    const u64 lo = s.lo + i * slot < s.hi ? s.lo + i * slot : s.hi;
    const u64 hi = lo + slot < s.hi ? lo + slot : s.hi;
    return Span{lo, hi};
}

}  // namespace mn
#endif

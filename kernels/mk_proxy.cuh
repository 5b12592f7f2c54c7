/*
 * mk_proxy.cuh - the kernel side of port channels: one thread pushes a trigger into its rank's
 * FIFO (plan_abi.h MkFifo) for the host proxy thread, which moves the data with the copy engine
 * and signals the peer after it. Flush waits until the proxy's stream has completed everything
 * pushed before it.
 */
#ifndef MK_PROXY_CUH
#define MK_PROXY_CUH

#include "mk_sync.cuh"
#include "mk_data.cuh"

namespace mk {

/* Reserves a slot, waits for room, writes the trigger and publishes it; returns the slot. The
 * caller's earlier writes (and, after a __syncthreads, its block's) are visible to the copy
 * engine before the proxy can see the trigger: the system fence orders them. */
__device__ __forceinline__ u64 proxy_push(const MkFifo *f, u64 dst, u64 src, u64 bytes, u32 kind) {
    u64 *const head = (u64 *)f->head, *const tcache = (u64 *)f->tail_cache;
    const u64 slot = atomicAdd(head, 1ull);
    if (slot >= *(volatile u64 *)tcache + MK_FIFO_SLOTS) {
        u64 t;
        u32 sp = 0;
        while ((t = ld_relaxed_sys((const u64 *)f->tail_host)) + MK_FIFO_SLOTS <= slot && !give_up(sp)) { }
        atomicMax(tcache, t);
    }
    MkTrigger *const e = (MkTrigger *)f->ring + (slot & (MK_FIFO_SLOTS - 1));
    volatile MkTrigger *const v = e;
    v->dst = dst;
    v->src = src;
    v->bytes = bytes;
    v->kind = kind;
    __threadfence_system();
    v->seq = (u32)(slot + 1);
    return slot;
}

/* put: n bytes from local src to the peer's dst (skipped when n is 0) */
__device__ __forceinline__ void proxy_put(const MkFifo *f, char *dst, const char *src, u64 n) {
    if (n) proxy_push(f, (u64)dst, (u64)src, n, MK_TRIG_PUT);
}
/* signal: the proxy raises the peer's inbound counter after every earlier trigger's data */
__device__ __forceinline__ void proxy_signal(const MkFifo *f, u64 peer_counter) {
    proxy_push(f, peer_counter, 0, 0, MK_TRIG_SIGNAL);
}
/* flush: returns once every trigger pushed before it has completed */
__device__ __forceinline__ void proxy_flush(const MkFifo *f) {
    const u64 mark = proxy_push(f, 0, 0, 0, MK_TRIG_FLUSH) + 1;
    u32 sp = 0;
    while (ld_acquire_sys((const u64 *)f->flushed) < mark && !give_up(sp)) { }
}

/* waits until every packet of [src, src + pbytes) carries flag (rppkt on a port channel reads
 * its source with the copy engine, so the packets must have landed first); the packet format's
 * own read does the waiting */
template <int P>
__device__ __forceinline__ void wait_packets(const char *src, u64 pbytes, u32 flag) {
    u32 d[Pkt<P>::DATA / 4];
    for (u64 j = threadIdx.x; j < pbytes / P; j += blockDim.x) Pkt<P>::read(src + j * P, d, flag);
}

} /* namespace mk */
#endif

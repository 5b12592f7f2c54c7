/*
 * native_probe.cuh - timestamps at numbered points of the native kernels, for finding where a
 * launch spends its time (MSCCLRT_NATIVE_PROBE=1 compiles the native modules with MN_PROBE 1 and
 * gives the context an MnProbe ring, native_abi.h; runtime/algo/algo_probe.c prints each kind's
 * median time from the kernel's start to every point when the communicator goes). Thread 0 of
 * block 0 records, after the block's barriers where a point follows one, so a point is when the
 * block got there. Without MN_PROBE every call here is empty and the kernels are unchanged.
 */
#ifndef MSCCLRT_NATIVE_PROBE_CUH
#define MSCCLRT_NATIVE_PROBE_CUH
#ifndef MN_PROBE
#define MN_PROBE 0
#endif

namespace mn {

#if MN_PROBE
__shared__ mk::u64 *probe_rec;   /* this block's record of this launch (block 0 only) */
__device__ __forceinline__ mk::u64 probe_now() {
    mk::u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#endif

/* At the kernel's start, before anything else waits: the launch's record (every thread calls;
 * one barrier so that every later point of block 0 finds it) */
__device__ __forceinline__ void probe_begin(const MnContext *c, mk::u32 kind, mk::u32 coll) {
#if MN_PROBE
    if (threadIdx.x == 0) {
        probe_rec = nullptr;
        if (blockIdx.x == 0 && c->probe) {
            MnProbe *p = (MnProbe *)c->probe;
            const mk::u64 k = atomicAdd((unsigned long long *)&p->launches, 1ull) % MN_PROBE_RECS;
            mk::u64 *t = p->rec[k].t;
            for (int i = 2; i < MN_PROBE_POINTS; i++) t[i] = 0;
            t[0] = kind | (mk::u64)coll << 8;
            t[1] = probe_now();
            probe_rec = t;
        }
    }
    __syncthreads();
#else
    (void)c, (void)kind, (void)coll;
#endif
}
/* point k (2 .. MN_PROBE_POINTS - 1) of block 0's launch; any thread may call, thread 0 writes */
__device__ __forceinline__ void probe_at(mk::u32 k) {
#if MN_PROBE
    if (threadIdx.x == 0 && blockIdx.x == 0 && probe_rec && k < MN_PROBE_POINTS) probe_rec[k] = probe_now();
#else
    (void)k;
#endif
}

/* point k of the launch as the grid's last block gets there: every block's thread 0 raises it
 * (call where every block passes). The record is the latest begun; a block that ends before
 * block 0 began raises the previous launch's, which the medians shrug off. */
__device__ __forceinline__ void probe_grid_at(const MnContext *c, mk::u32 k) {
#if MN_PROBE
    if (threadIdx.x == 0 && c->probe && k < MN_PROBE_POINTS) {
        MnProbe *p = (MnProbe *)c->probe;
        const mk::u64 n = *(volatile mk::u64 *)&p->launches;
        if (n) atomicMax((unsigned long long *)&p->rec[(n - 1) % MN_PROBE_RECS].t[k], probe_now());
    }
#else
    (void)c, (void)k;
#endif
}

}  // namespace mn
#endif

/*
 * mk_sync.cuh - synchronisation of the device library: channel semaphores (signal = atomic add
 * with release at system scope on the peer's inbound counter; wait = count the expected value,
 * then spin with acquire loads), counting semaphores inside one rank, grid-subset barriers,
 * and the LL flag kept per context and thread block in device memory (graph-safe).
 */
#ifndef MK_SYNC_CUH
#define MK_SYNC_CUH

#include "mk_types.cuh"

namespace mk {

/* Programmatic dependent launch. On sm_90 and later the runtime may launch its kernels with
 * programmatic stream serialization (MSCCLRT_LAUNCH_PDL), which lets a kernel be scheduled while
 * the previous kernel on its stream still runs: launch_prologue's wait holds this grid until
 * that kernel has completed and its memory is visible, so nothing after it sees earlier work
 * unfinished; its trigger then lets the next such kernel be scheduled, so its launch overlaps
 * this one's run. The trigger comes after the wait so that at most two grids of a stream are
 * resident at once (a trigger before it let every small kernel of a graph be scheduled in a
 * chain: alltoall of 1-64 KiB lost 0.3-0.7 us on 2 x H200, fifteenth session). Launched plainly,
 * both return at once. It is the first statement of every kernel libmscclrt launches, except
 * that a built-in kernel may load before it what no earlier kernel writes (its arguments, the
 * context written once at setup), which then overlaps the previous kernel's end
 * (tests/unit/test_launch_pdl.c checks which loads). */
__device__ __forceinline__ void launch_prologue() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ u64 ld_acquire_sys(const u64 *p) {
    u64 v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ u64 ld_relaxed_sys(const u64 *p) {
    u64 v;
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ u32 ld_acquire_gpu(const u32 *p) {
    u32 v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ int ld_acquire_gpu_s32(const int *p) {
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_release_gpu(u32 *p, u32 v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* ---- channel semaphores ------------------------------------------------------------------------ */
/* signal: one thread; `peer` is the peer's inbound counter of the paired channel */
__device__ __forceinline__ void signal(u64 peer) {
    asm volatile("red.release.sys.global.add.u64 [%0], 1;" ::"l"(peer) : "memory");
}
__device__ __forceinline__ void signal_relaxed(u64 peer) {
    asm volatile("red.relaxed.sys.global.add.u64 [%0], 1;" ::"l"(peer) : "memory");
}
/* wait: one thread; consumes one signal of the channel whose counters are inbound/expected */
__device__ __forceinline__ void wait(u64 *inbound, u64 *expected) {
    const u64 want = atomicAdd(expected, 1ull) + 1;
    u32 sp = 0;
    while (ld_acquire_sys(inbound) < want && !give_up(sp)) { }
}
__device__ __forceinline__ void wait_relaxed(u64 *inbound, u64 *expected) {
    const u64 want = atomicAdd(expected, 1ull) + 1;
    u32 sp = 0;
    while (ld_relaxed_sys(inbound) < want && !give_up(sp)) { }
}

/* ---- counting semaphores (spec §5.2 sem_acquire / sem_release), device scope ------------------ */
__device__ __forceinline__ void sem_acquire(int *s) {
    int old;
    asm volatile("atom.acquire.gpu.global.add.s32 %0, [%1], -1;" : "=r"(old) : "l"(s) : "memory");
    u32 sp = 0;
    if (old <= 0)
        while (ld_acquire_gpu_s32(s) < old && !give_up(sp)) { }
}
__device__ __forceinline__ void sem_release(int *s) {
    asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(s) : "memory");
}

/* ---- grid-subset barrier: every participant calls it with the same n ------------------------- */
__device__ __forceinline__ void barrier(MkBarrier *b, u32 n) {
    __syncthreads();
    if (n > 1 && threadIdx.x == 0) {
        const u32 gen = ld_acquire_gpu(&b->gen);
        if (atomicAdd(&b->count, 1u) == n - 1) {
            b->count = 0;
            st_release_gpu(&b->gen, gen + 1);
        } else {
            u32 sp = 0;
            while (ld_acquire_gpu(&b->gen) == gen && !give_up(sp)) { }
        }
    }
    __syncthreads();
}

} /* namespace mk */
#endif

/*
 * mk_data.cuh - data movement of the device library, all block-wide (element e handled by
 * thread e mod blockDim): copies with 16-byte vectors (4 in flight per thread), reductions of
 * NS sources into ND destinations, LL16/LL8 packets (write, wait-read, forward, reduce), the
 * avg operator's final division, and multimem (NVLS) load-reduce/store for sm_90+.
 * Sizes are data bytes; packet buffers hold 2x that (spec §4).
 */
#ifndef MK_DATA_CUH
#define MK_DATA_CUH

#include "mk_sync.cuh"

namespace mk {

__device__ __forceinline__ bool al16(const void *p) { return ((u64)p & 15) == 0; }

/* A pointer array the caller passed by reference, copied into the callee's own array: that one
 * stays in registers, while one read through the reference is reloaded after every store
 * (generic pointers may alias it). Used by the out-of-line functions when they have few. */
template <class Ptr, int N>
__device__ __forceinline__ void to_regs(Ptr (&out)[N], Ptr const (&in)[N]) {
#pragma unroll
    for (int k = 0; k < N; k++) out[k] = in[k];
}

/* ---- copies ----------------------------------------------------------------------------------- */
/* not inlined: a plan has one copy per transfer and thread block, and inlining them all made
 * NVRTC spend seconds on large plans; the call costs nothing next to the loop */
__device__ __noinline__ void copy(char *dst, const char *src, u64 n) {
    const u32 tid = threadIdx.x, nt = blockDim.x;
    u64 done = 0;
    if (al16(dst) && al16(src)) {
        const u64 nv = n >> 4;
        uint4 *d = (uint4 *)dst;
        const uint4 *s = (const uint4 *)src;
        u64 i = tid;
        for (; i + 3 * (u64)nt < nv; i += 4 * (u64)nt) {
            uint4 a = s[i], b = s[i + nt], c = s[i + 2 * nt], e = s[i + 3 * nt];
            d[i] = a; d[i + nt] = b; d[i + 2 * nt] = c; d[i + 3 * nt] = e;
        }
        for (; i < nv; i += nt) d[i] = s[i];
        done = nv << 4;
    }
    if ((((u64)dst | (u64)src | done | n) & 3) == 0) {
        for (u64 i = (done >> 2) + tid; i < (n >> 2); i += nt) ((u32 *)dst)[i] = ((const u32 *)src)[i];
    } else {
        for (u64 i = done + tid; i < n; i += nt) dst[i] = src[i];
    }
}

/* One source to ND destinations, read once: the fused pairs of a put that share their source
 * (cg_source.c groups them). Pointers are held in registers (see reduce). */
template <int ND>
__device__ __noinline__ void copy_multi(char *const (&dst_)[ND], const char *src, u64 n) {
    const u32 tid = threadIdx.x, nt = blockDim.x;
    char *dst[ND];
    to_regs(dst, dst_);
    bool vec = al16(src);
    u64 low = (u64)src | n;
#pragma unroll
    for (int k = 0; k < ND; k++) {
        vec = vec && al16(dst[k]);
        low |= (u64)dst[k];
    }
    u64 done = 0;
    if (vec) {
        const u64 nv = n >> 4;
        const uint4 *s = (const uint4 *)src;
        /* one vector per iteration: ND stores each keep the memory system busy, and two in
         * flight made 7 destinations spill */
        for (u64 i = tid; i < nv; i += nt) {
            const uint4 a = s[i];
#pragma unroll
            for (int k = 0; k < ND; k++) ((uint4 *)dst[k])[i] = a;
        }
        done = nv << 4;
    }
    if (((low | done) & 3) == 0) {
        for (u64 i = (done >> 2) + tid; i < (n >> 2); i += nt) {
            const u32 v = ((const u32 *)src)[i];
#pragma unroll
            for (int k = 0; k < ND; k++) ((u32 *)dst[k])[i] = v;
        }
    } else {
        for (u64 i = done + tid; i < n; i += nt) {
            const char v = src[i];
#pragma unroll
            for (int k = 0; k < ND; k++) dst[k][i] = v;
        }
    }
}

/* ---- reductions: dst[k] = s0 (+) s1 (+) ... for every k; sources in order ------------------ */
template <class T, int OP, int NS, int ND>
__device__ __forceinline__ void reduce_body(char *const (&dst)[ND], const char *const (&src)[NS], u64 n) {
    const u32 tid = threadIdx.x, nt = blockDim.x;
    bool vec = true;
#pragma unroll
    for (int k = 0; k < NS; k++) vec = vec && al16(src[k]);
#pragma unroll
    for (int k = 0; k < ND; k++) vec = vec && al16(dst[k]);
    u64 done = 0;
    if (vec) {
        /* UN vectors per thread in flight from every source (remote reads are latency bound);
         * fewer when many sources would exceed the 64 registers of a 1024-thread block */
        enum { UN = NS <= 4 ? 2 : 1 };
        const u64 nv = n >> 4;
        u64 i = tid;
        for (; i + (UN - 1) * (u64)nt < nv; i += UN * (u64)nt) {
            uint4 x[NS][UN];
#pragma unroll
            for (int k = 0; k < NS; k++)
#pragma unroll
                for (int u = 0; u < UN; u++) x[k][u] = ((const uint4 *)src[k])[i + u * (u64)nt];
#pragma unroll
            for (int u = 0; u < UN; u++) {
                u32 acc[4] = {x[0][u].x, x[0][u].y, x[0][u].z, x[0][u].w}, v[4];
#pragma unroll
                for (int k = 1; k < NS; k++) {
                    v[0] = x[k][u].x; v[1] = x[k][u].y; v[2] = x[k][u].z; v[3] = x[k][u].w;
                    vred<T, OP, 16>(acc, v);
                }
                const uint4 r = make_uint4(acc[0], acc[1], acc[2], acc[3]);
#pragma unroll
                for (int k = 0; k < ND; k++) ((uint4 *)dst[k])[i + u * (u64)nt] = r;
            }
        }
        for (; i < nv; i += nt) {
            uint4 x = ((const uint4 *)src[0])[i];
            u32 acc[4] = {x.x, x.y, x.z, x.w}, v[4];
#pragma unroll
            for (int k = 1; k < NS; k++) {
                uint4 y = ((const uint4 *)src[k])[i];
                v[0] = y.x; v[1] = y.y; v[2] = y.z; v[3] = y.w;
                vred<T, OP, 16>(acc, v);
            }
            const uint4 r = make_uint4(acc[0], acc[1], acc[2], acc[3]);
#pragma unroll
            for (int k = 0; k < ND; k++) ((uint4 *)dst[k])[i] = r;
        }
        done = nv << 4;
    }
    const u64 ne = n / sizeof(T);
    for (u64 i = done / sizeof(T) + tid; i < ne; i += nt) {
        T acc = ((const T *)src[0])[i];
#pragma unroll
        for (int k = 1; k < NS; k++) acc = red<OP>(acc, ((const T *)src[k])[i]);
#pragma unroll
        for (int k = 0; k < ND; k++) ((T *)dst[k])[i] = acc;
    }
}

/* Not inlined (compile time, see copy). With few pointers they go to registers (to_regs); with
 * many, registers run out (1024-thread blocks have 64) and they stay put. */
template <class T, int OP, int NS, int ND>
__device__ __noinline__ void reduce(char *const (&dst_)[ND], const char *const (&src_)[NS], u64 n) {
    if constexpr (NS + ND <= 8) {
        const char *src[NS];
        char *dst[ND];
        to_regs(src, src_);
        to_regs(dst, dst_);
        reduce_body<T, OP, NS, ND>(dst, src, n);
    } else {
        reduce_body<T, OP, NS, ND>(dst_, src_, n);
    }
}

/* avg: x /= nranks over n bytes, block-strided over the whole grid (gt, gn) */
template <class T>
__device__ __forceinline__ void divide(char *buf, u64 n, u32 nranks, u64 gt, u64 gn) {
    T *p = (T *)buf;
    for (u64 i = gt; i < n / sizeof(T); i += gn) p[i] = divn(p[i], nranks);
}

/* ---- LL packets (spec §4): P = 16 (8 data bytes + 2 flags) or 8 (4 data bytes + 1 flag) ----- */
template <int P> struct Pkt;
template <> struct Pkt<16> {
    enum { DATA = 8 };
    static __device__ __forceinline__ void write(char *p, const u32 (&d)[2], u32 flag) {
        asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};"
                     ::"l"(p), "r"(d[0]), "r"(flag), "r"(d[1]), "r"(flag) : "memory");
    }
    /* the packet as loaded (data and flags), without waiting: waits on several packets issue
     * every load first and check afterwards, so the round trips overlap (reduce_packets) */
    enum { RAW = 4 };
    static __device__ __forceinline__ void load(const char *p, u32 (&r)[RAW]) {
        asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "l"(p) : "memory");
    }
    static __device__ __forceinline__ bool ready(const u32 (&r)[RAW], u32 flag) {
        return r[1] == flag && r[3] == flag;
    }
    static __device__ __forceinline__ void data(const u32 (&r)[RAW], u32 (&d)[2]) {
        d[0] = r[0]; d[1] = r[2];
    }
    static __device__ __forceinline__ void read(const char *p, u32 (&d)[2], u32 flag) {
        u32 r[RAW], sp = 0;
        do load(p, r); while (!ready(r, flag) && !give_up(sp));
        data(r, d);
    }
};
template <> struct Pkt<8> {
    enum { DATA = 4 };
    static __device__ __forceinline__ void write(char *p, const u32 (&d)[1], u32 flag) {
        asm volatile("st.volatile.global.v2.u32 [%0], {%1,%2};" ::"l"(p), "r"(d[0]), "r"(flag) : "memory");
    }
    enum { RAW = 2 };
    static __device__ __forceinline__ void load(const char *p, u32 (&r)[RAW]) {
        asm volatile("ld.volatile.global.v2.u32 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "l"(p) : "memory");
    }
    static __device__ __forceinline__ bool ready(const u32 (&r)[RAW], u32 flag) { return r[1] == flag; }
    static __device__ __forceinline__ void data(const u32 (&r)[RAW], u32 (&d)[1]) { d[0] = r[0]; }
    static __device__ __forceinline__ void read(const char *p, u32 (&d)[1], u32 flag) {
        u32 r[RAW], sp = 0;
        do load(p, r); while (!ready(r, flag) && !give_up(sp));
        data(r, d);
    }
};

/* data -> packets at ND packet destinations (cpkt, ppkt) */
template <int P, int ND>
__device__ __forceinline__ void to_packets(char *const (&dst)[ND], const char *src, u64 n, u32 flag) {
    enum { W = Pkt<P>::DATA / 4 };
    for (u64 j = threadIdx.x; j < n / Pkt<P>::DATA; j += blockDim.x) {
        u32 d[W];
#pragma unroll
        for (int w = 0; w < W; w++) d[w] = ((const u32 *)src)[j * W + w];
#pragma unroll
        for (int k = 0; k < ND; k++) Pkt<P>::write(dst[k] + j * P, d, flag);
    }
}
/* Packets j, j + nt, ..., j + (U - 1) nt at src, once they arrived, as data: every load is
 * issued before any is checked, and each round loads again all that had not arrived, so their
 * round trips to memory overlap instead of adding up (a packet that arrived late is not then
 * followed by one more round trip for each of the rest). Consecutive threads take consecutive
 * packets. Used where it measured faster: from_packets (all_gather's packet plan of 1 MiB,
 * 9.07-9.19 us against 9.44-9.56 one at a time, 2 x H200); the reductions over packets and the
 * built-in packet form measured no faster with it (BENCHMARKS.md, sixteenth session). */
template <int P, int U>
__device__ __forceinline__ void take_packets(const char *src, u64 j, u64 nt, u32 flag,
                                             u32 (&d)[U][Pkt<P>::DATA / 4]) {
    u32 raw[U][Pkt<P>::RAW];
#pragma unroll
    for (int u = 0; u < U; u++) Pkt<P>::load(src + (j + u * nt) * P, raw[u]);
    for (u32 sp = 0;;) {
        bool all = true;
#pragma unroll
        for (int u = 0; u < U; u++) all = all && Pkt<P>::ready(raw[u], flag);
        if (all || give_up(sp)) break;
#pragma unroll
        for (int u = 0; u < U; u++)
            if (!Pkt<P>::ready(raw[u], flag)) Pkt<P>::load(src + (j + u * nt) * P, raw[u]);
    }
#pragma unroll
    for (int u = 0; u < U; u++) Pkt<P>::data(raw[u], d[u]);
}
enum { PKT_U = 4 };   /* packets per thread in flight where the registers allow */

/* packets -> data (upkt): PKT_U packets per thread at a time, the rest one by one */
template <int P>
__device__ __forceinline__ void from_packets(char *dst, const char *src, u64 n, u32 flag) {
    enum { W = Pkt<P>::DATA / 4 };
    const u64 np = n / Pkt<P>::DATA, nt = blockDim.x;
    u64 j0 = threadIdx.x;
    for (; j0 + (PKT_U - 1) * nt < np; j0 += PKT_U * nt) {
        u32 d[PKT_U][W];
        take_packets<P, PKT_U>(src, j0, nt, flag, d);
#pragma unroll
        for (int u = 0; u < PKT_U; u++)
#pragma unroll
            for (int w = 0; w < W; w++) ((u32 *)dst)[(j0 + u * nt) * W + w] = d[u][w];
    }
    for (u64 j = j0; j < np; j += blockDim.x) {
        u32 d[W];
        Pkt<P>::read(src + j * P, d, flag);
#pragma unroll
        for (int w = 0; w < W; w++) ((u32 *)dst)[j * W + w] = d[w];
    }
}
/* wait for local packets and forward them to ND packet destinations (rppkt) */
template <int P, int ND>
__device__ __forceinline__ void forward_packets(char *const (&dst)[ND], const char *src, u64 n, u32 flag) {
    enum { W = Pkt<P>::DATA / 4 };
    for (u64 j = threadIdx.x; j < n / Pkt<P>::DATA; j += blockDim.x) {
        u32 d[W];
        Pkt<P>::read(src + j * P, d, flag);
#pragma unroll
        for (int k = 0; k < ND; k++) Pkt<P>::write(dst[k] + j * P, d, flag);
    }
}
/* acc = pk[0] (+) pk[1] ... (+) local; store acc to NDP plain destinations and as packets to
 * NDK packet destinations (repkt, respkt, recpkt, recspkt). NDP/NDK may be 0 (arrays of 1). */
template <class T, int OP, int P, int NPK, int NDP, int NDK>
__device__ __forceinline__ void reduce_packets_body(char *const (&dplain)[NDP ? NDP : 1],
                                                    char *const (&dpkt)[NDK ? NDK : 1],
                                                    const char *local,
                                                    const char *const (&pk)[NPK ? NPK : 1],
                                                    u64 n, u32 flag) {
    enum { W = Pkt<P>::DATA / 4 };
    for (u64 j = threadIdx.x; j < n / Pkt<P>::DATA; j += blockDim.x) {
        u32 acc[W], v[W];
#pragma unroll
        for (int w = 0; w < W; w++) v[w] = ((const u32 *)local)[j * W + w];
        if (NPK > 0) {
            /* the packets of up to 4 peers are loaded before any is checked: their round
             * trips overlap (2 instead of 7 at N=8). Not when the op also has many
             * destinations (a reduce that sends packets): their pointers take the registers,
             * and one packet at a time spills nothing there. */
            enum { G = NPK + NDP + NDK > 9 ? 1 : 4 };
            if constexpr (G == 1) {
                Pkt<P>::read(pk[0] + j * P, acc, flag);
#pragma unroll
                for (int k = 1; k < NPK; k++) {
                    u32 x[W];
                    Pkt<P>::read(pk[k] + j * P, x, flag);
                    vred<T, OP, Pkt<P>::DATA>(acc, x);
                }
            } else {
#pragma unroll
                for (int k0 = 0; k0 < NPK; k0 += G) {
                    u32 raw[G][Pkt<P>::RAW];
#pragma unroll
                    for (int k = 0; k < G; k++)
                        if (k0 + k < NPK) Pkt<P>::load(pk[k0 + k] + j * P, raw[k]);
#pragma unroll
                    for (int k = 0; k < G; k++)
                        if (k0 + k < NPK)
                            for (u32 sp = 0; !Pkt<P>::ready(raw[k], flag) && !give_up(sp);)
                                Pkt<P>::load(pk[k0 + k] + j * P, raw[k]);
#pragma unroll
                    for (int k = 0; k < G; k++) {
                        if (k0 + k >= NPK) continue;
                        u32 x[W];
                        Pkt<P>::data(raw[k], x);
                        if (k0 + k == 0) {
#pragma unroll
                            for (int w = 0; w < W; w++) acc[w] = x[w];
                        } else {
                            vred<T, OP, Pkt<P>::DATA>(acc, x);
                        }
                    }
                }
            }
            vred<T, OP, Pkt<P>::DATA>(acc, v);
        } else {
#pragma unroll
            for (int w = 0; w < W; w++) acc[w] = v[w];
        }
#pragma unroll
        for (int k = 0; k < NDP; k++)
#pragma unroll
            for (int w = 0; w < W; w++) ((u32 *)dplain[k])[j * W + w] = acc[w];
#pragma unroll
        for (int k = 0; k < NDK; k++) Pkt<P>::write(dpkt[k] + j * P, acc, flag);
    }
}
/* fp8 packet reductions are not inlined: their element conversions are long, and a plan calls
 * reduce_packets from every thread block, so inlining each copy made NVRTC take 36 s for
 * rs_ag_packet's e4m3 kernel at N=8 (2.4 s not inlined). Other types stay inlined: there a call
 * cost up to 10% at 16 KB-1 MB (allpair_packet, 2 x H200) for no compile time worth saving
 * (under 3 s). Pointers go to registers when they are few. */
template <class T> struct SlowElems { enum { value = 0 }; };
template <> struct SlowElems<e4m3> { enum { value = 1 }; };
template <> struct SlowElems<e5m2> { enum { value = 1 }; };

template <class T, int OP, int P, int NPK, int NDP, int NDK>
__device__ __noinline__ void reduce_packets_call(char *const (&dplain_)[NDP ? NDP : 1],
                                                 char *const (&dpkt_)[NDK ? NDK : 1],
                                                 const char *local,
                                                 const char *const (&pk_)[NPK ? NPK : 1],
                                                 u64 n, u32 flag) {
    enum { A = NDP ? NDP : 1, B = NDK ? NDK : 1, C = NPK ? NPK : 1 };
    if constexpr (A + B + C <= 10) {
        char *dplain[A], *dpkt[B];
        const char *pk[C];
        to_regs(dplain, dplain_);
        to_regs(dpkt, dpkt_);
        to_regs(pk, pk_);
        reduce_packets_body<T, OP, P, NPK, NDP, NDK>(dplain, dpkt, local, pk, n, flag);
    } else {
        reduce_packets_body<T, OP, P, NPK, NDP, NDK>(dplain_, dpkt_, local, pk_, n, flag);
    }
}

template <class T, int OP, int P, int NPK, int NDP, int NDK>
__device__ __forceinline__ void reduce_packets(char *const (&dplain)[NDP ? NDP : 1],
                                               char *const (&dpkt)[NDK ? NDK : 1],
                                               const char *local,
                                               const char *const (&pk)[NPK ? NPK : 1],
                                               u64 n, u32 flag) {
    if constexpr (SlowElems<T>::value)
        reduce_packets_call<T, OP, P, NPK, NDP, NDK>(dplain, dpkt, local, pk, n, flag);
    else
        reduce_packets_body<T, OP, P, NPK, NDP, NDK>(dplain, dpkt, local, pk, n, flag);
}
/* raw copy of packets already in packet form (port ppkt on this runtime's device path) */
__device__ __forceinline__ void copy_packets_raw(char *dst, const char *src, u64 pbytes) {
    for (u64 i = threadIdx.x; i < pbytes / 8; i += blockDim.x) {
        u64 v;
        asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(src + i * 8) : "memory");
        asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(dst + i * 8), "l"(v) : "memory");
    }
}

/* ---- switch (NVLS multicast, sm_90+): usable only when the runtime enabled NVLS ------------- */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define MK_MULTIMEM 1
#endif
/* KIND: 0 f32 add, 1 f16 add, 2 bf16 add, 3 f16 min, 4 f16 max, 5 bf16 min, 6 bf16 max,
 *       7 u32 add, 8 s32 add, 9 u32 min, 10 u32 max, 11 s32 min, 12 s32 max */
template <int KIND>
__device__ __forceinline__ void mm_reduce_store(char *dst, const char *src, u64 n) {
#ifdef MK_MULTIMEM
    if (KIND <= 6) {
        for (u64 i = threadIdx.x; i < n / 16; i += blockDim.x) {
            u32 a, b, c, d;
            const char *s = src + i * 16;
            char *t = dst + i * 16;
            if (KIND == 0) asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {%0,%1,%2,%3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(s) : "memory");
            if (KIND == 1) asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.f16x2 {%0,%1,%2,%3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(s) : "memory");
            if (KIND == 2) asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.bf16x2 {%0,%1,%2,%3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(s) : "memory");
            if (KIND == 3) asm volatile("multimem.ld_reduce.relaxed.sys.global.min.v4.f16x2 {%0,%1,%2,%3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(s) : "memory");
            if (KIND == 4) asm volatile("multimem.ld_reduce.relaxed.sys.global.max.v4.f16x2 {%0,%1,%2,%3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(s) : "memory");
            if (KIND == 5) asm volatile("multimem.ld_reduce.relaxed.sys.global.min.v4.bf16x2 {%0,%1,%2,%3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(s) : "memory");
            if (KIND == 6) asm volatile("multimem.ld_reduce.relaxed.sys.global.max.v4.bf16x2 {%0,%1,%2,%3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(s) : "memory");
            if (KIND == 0) asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(t), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
            else asm volatile("multimem.st.relaxed.sys.global.v4.f16x2 [%0], {%1,%2,%3,%4};" ::"l"(t), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
        }
    } else {
        for (u64 i = threadIdx.x; i < n / 4; i += blockDim.x) {
            u32 a;
            const char *s = src + i * 4;
            if (KIND == 7) asm volatile("multimem.ld_reduce.relaxed.sys.global.add.u32 %0, [%1];" : "=r"(a) : "l"(s) : "memory");
            if (KIND == 8) asm volatile("multimem.ld_reduce.relaxed.sys.global.add.s32 %0, [%1];" : "=r"(a) : "l"(s) : "memory");
            if (KIND == 9) asm volatile("multimem.ld_reduce.relaxed.sys.global.min.u32 %0, [%1];" : "=r"(a) : "l"(s) : "memory");
            if (KIND == 10) asm volatile("multimem.ld_reduce.relaxed.sys.global.max.u32 %0, [%1];" : "=r"(a) : "l"(s) : "memory");
            if (KIND == 11) asm volatile("multimem.ld_reduce.relaxed.sys.global.min.s32 %0, [%1];" : "=r"(a) : "l"(s) : "memory");
            if (KIND == 12) asm volatile("multimem.ld_reduce.relaxed.sys.global.max.s32 %0, [%1];" : "=r"(a) : "l"(s) : "memory");
            asm volatile("multimem.st.relaxed.sys.global.u32 [%0], %1;" ::"l"(dst + i * 4), "r"(a) : "memory");
        }
    }
#endif
}
/* broadcast n bytes from local memory to every member through the multicast pointer */
__device__ __forceinline__ void mm_store(char *mc, const char *src, u64 n) {
#ifdef MK_MULTIMEM
    for (u64 i = threadIdx.x; i < n / 16; i += blockDim.x) {
        const uint4 v = ((const uint4 *)src)[i];
        asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};"
                     ::"l"(mc + i * 16), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
    }
    for (u64 i = (n / 16) * 4 + threadIdx.x; i < n / 4; i += blockDim.x)
        asm volatile("multimem.st.relaxed.sys.global.u32 [%0], %1;" ::"l"(mc + i * 4), "r"(((const u32 *)src)[i]) : "memory");
#endif
}
/* wait for local packets, rebuild them with this launch's flag, broadcast (gstorepkt) */
template <int P>
__device__ __forceinline__ void mm_store_packets(char *mc, const char *src, u64 n, u32 flag) {
#ifdef MK_MULTIMEM
    enum { W = Pkt<P>::DATA / 4 };
    for (u64 j = threadIdx.x; j < n / Pkt<P>::DATA; j += blockDim.x) {
        u32 d[W];
        Pkt<P>::read(src + j * P, d, flag);
        if (P == 16)
            asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1,%2,%3,%4};"
                         ::"l"(mc + j * P), "r"(d[0]), "r"(flag), "r"(d[W - 1]), "r"(flag) : "memory");
        else
            asm volatile("multimem.st.relaxed.sys.global.v2.f32 [%0], {%1,%2};"
                         ::"l"(mc + j * P), "r"(d[0]), "r"(flag) : "memory");
    }
#endif
}

/* spec §3.3/§3.4: the t-th of g A-aligned near-equal slices of sz bytes */
__device__ __forceinline__ u64 split(u64 sz, u32 t, u32 g, u32 a) {
    const u64 nu = sz / a;
    return (u64)a * ((u64)t * (nu / g) + (t < nu % g ? t : nu % g));
}

} /* namespace mk */
#endif

/*
 * mk_types.cuh - element types and reduction operators of the device library: all 12 data
 * types of mscclrt_dtype and the 5 operators of mscclrt_redop, applied elementwise to 16-,
 * 8- and 4-byte vectors. Half, bfloat16 and fp8 compute in float and round once (exact for
 * +,*: float carries more than 2p+2 bits of each); overflow gives inf (IEEE), never a clamp.
 * fp8 uses software conversion: e4m3 (fn, no inf) saturates to +-448; e5m2 overflows to inf
 * (the same rules as runtime/check, the host reference).
 */
#ifndef MK_TYPES_CUH
#define MK_TYPES_CUH

#include "plan_abi.h"

/* The device address of the communicator's abort word (host-mapped memory), written by the host
 * into every module it loads (cuModuleGetGlobal); 0: none. Every spin loop of the device library
 * looks at the word now and then and gives up once it is non-zero, so mscclrt_comm_abort stops
 * kernels that wait for a peer that will never come. */
__device__ unsigned long long mscclrt_abort_word;

namespace mk {

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

enum { OP_SUM = 0, OP_PROD = 1, OP_MAX = 2, OP_MIN = 3, OP_AVG = 4 };

/* In a spin loop: true once the communicator is aborted (checked every 4096 turns; the word is
 * in host memory, too far to read on every turn). The loop then ends without its condition:
 * the kernel runs to its end with meaningless data, which is what an abort asks for. */
__device__ __forceinline__ bool aborted() {
    const u64 w = mscclrt_abort_word;
    return w && *(const volatile u32 *)w != 0;
}
__device__ __forceinline__ bool give_up(u32 &spins) {
    if ((++spins & 4095u) != 0) return false;
    return aborted();
}
/* Whether waits that began at clock64() == t0 may have been cut short by an abort. The word is
 * read only when they took long: reading it costs a round trip to host memory, and the blocks
 * of a launch that all read it at once were served one after another (about 1 us per block:
 * 33 us per 32-block launch on 2 x H200). A wait that gave up has spun at least 4096 turns of
 * a system-scope load each, far beyond 2^17 cycles (about 65 us). */
__device__ __forceinline__ bool aborted_since(long long t0) {
    return clock64() - t0 > (1ll << 17) && aborted();
}

/* storage wrappers: distinct types so overloads pick the right arithmetic */
struct f16 { u16 b; };
struct bf16 { u16 b; };
struct e4m3 { u8 b; };
struct e5m2 { u8 b; };

__device__ __forceinline__ float to_f(f16 x) {
    float r;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(x.b));
    return r;
}
__device__ __forceinline__ f16 from_f(float x, f16) {
    f16 r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.b) : "f"(x));
    return r;
}
__device__ __forceinline__ float to_f(bf16 x) { return __uint_as_float((u32)x.b << 16); }
__device__ __forceinline__ bf16 from_f(float x, bf16) {
    u32 u = __float_as_uint(x);
    bf16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) { r.b = (u16)((u >> 16) | 0x40); return r; } /* NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                     /* round to nearest even */
    r.b = (u16)(u >> 16);
    return r;
}

/* fp8 with E exponent bits, M mantissa bits, bias B */
template <int E, int M, int B>
__device__ __forceinline__ float fp8_decode(u8 v) {
    const u32 s = v >> 7, e = (v >> M) & ((1u << E) - 1), m = v & ((1u << M) - 1);
    float r;
    if (E == 4 && e == 15 && m == 7) r = __int_as_float(0x7fc00000);        /* e4m3 NaN */
    else if (E == 5 && e == 31) r = m ? __int_as_float(0x7fc00000) : __int_as_float(0x7f800000);
    else if (e == 0) r = ldexpf((float)m, 1 - B - M);
    else r = ldexpf((float)(m | (1u << M)), (int)e - B - M);
    return s ? -r : r;
}
template <int E, int M, int B>
__device__ __forceinline__ u8 fp8_encode(float x) {
    const u32 u = __float_as_uint(x);
    const u32 sign = (u >> 31) << 7;
    const u32 nan = 0x7fu;
    const u32 over = E == 4 ? 0x7eu : 0x7cu;              /* e4m3: +-448 (no inf); e5m2: inf */
    const u32 maxv = E == 4 ? 0x7eu : 0x7bu;              /* largest finite code */
    const u32 ex = (u >> 23) & 0xff, man = u & 0x7fffff;
    if (ex == 0xff) return (u8)(sign | (man ? nan : over));
    if (ex == 0) return (u8)sign;                         /* f32 subnormals are far below fp8's */
    int e = (int)ex - 127 + B;
    u32 val;
    if (e >= 1) {
        const int sh = 23 - M;
        val = ((u32)e << M) | (man >> sh);
        const u32 rem = man & ((1u << sh) - 1), half = 1u << (sh - 1);
        if (rem > half || (rem == half && (val & 1))) val++;
    } else {
        const u32 full = man | 0x800000u;
        const int sh = 23 - M + (1 - e);
        if (sh >= 32) return (u8)sign;
        val = full >> sh;
        const u32 rem = full & ((1u << sh) - 1), half = 1u << (sh - 1);
        if (rem > half || (rem == half && (val & 1))) val++;
    }
    if (val > maxv) return (u8)(sign | over);
    return (u8)(sign | val);
}
__device__ __forceinline__ float to_f(e4m3 x) { return fp8_decode<4, 3, 7>(x.b); }
__device__ __forceinline__ e4m3 from_f(float x, e4m3) { e4m3 r; r.b = fp8_encode<4, 3, 7>(x); return r; }
__device__ __forceinline__ float to_f(e5m2 x) { return fp8_decode<5, 2, 15>(x.b); }
__device__ __forceinline__ e5m2 from_f(float x, e5m2) { e5m2 r; r.b = fp8_encode<5, 2, 15>(x); return r; }

/* ---- one element ---------------------------------------------------------------------------- */
template <int OP> __device__ __forceinline__ float fop(float a, float b) {
    return (OP == OP_SUM || OP == OP_AVG) ? a + b : OP == OP_PROD ? a * b
         : OP == OP_MIN ? fminf(a, b) : fmaxf(a, b);
}
template <int OP> __device__ __forceinline__ double fop(double a, double b) {
    return (OP == OP_SUM || OP == OP_AVG) ? a + b : OP == OP_PROD ? a * b
         : OP == OP_MIN ? fmin(a, b) : fmax(a, b);
}
/* integers wrap: compute in the unsigned type U of the same width */
template <int OP, class T, class U> __device__ __forceinline__ T iop(T a, T b) {
    return (OP == OP_SUM || OP == OP_AVG) ? (T)((U)a + (U)b) : OP == OP_PROD ? (T)((U)a * (U)b)
         : OP == OP_MIN ? (a < b ? a : b) : (a > b ? a : b);
}

template <int OP> __device__ __forceinline__ signed char red(signed char a, signed char b) { return iop<OP, signed char, u8>(a, b); }
template <int OP> __device__ __forceinline__ u8 red(u8 a, u8 b) { return iop<OP, u8, u8>(a, b); }
template <int OP> __device__ __forceinline__ int red(int a, int b) { return iop<OP, int, u32>(a, b); }
template <int OP> __device__ __forceinline__ u32 red(u32 a, u32 b) { return iop<OP, u32, u32>(a, b); }
template <int OP> __device__ __forceinline__ long long red(long long a, long long b) { return iop<OP, long long, u64>(a, b); }
template <int OP> __device__ __forceinline__ u64 red(u64 a, u64 b) { return iop<OP, u64, u64>(a, b); }
template <int OP> __device__ __forceinline__ float red(float a, float b) { return fop<OP>(a, b); }
template <int OP> __device__ __forceinline__ double red(double a, double b) { return fop<OP>(a, b); }
template <int OP> __device__ __forceinline__ f16 red(f16 a, f16 b) { return from_f(fop<OP>(to_f(a), to_f(b)), a); }
template <int OP> __device__ __forceinline__ bf16 red(bf16 a, bf16 b) { return from_f(fop<OP>(to_f(a), to_f(b)), a); }
template <int OP> __device__ __forceinline__ e4m3 red(e4m3 a, e4m3 b) { return from_f(fop<OP>(to_f(a), to_f(b)), a); }
template <int OP> __device__ __forceinline__ e5m2 red(e5m2 a, e5m2 b) { return from_f(fop<OP>(to_f(a), to_f(b)), a); }

/* avg's final division by the rank count */
__device__ __forceinline__ signed char divn(signed char a, u32 n) { return (signed char)(a / (int)n); }
__device__ __forceinline__ u8 divn(u8 a, u32 n) { return (u8)(a / n); }
__device__ __forceinline__ int divn(int a, u32 n) { return a / (int)n; }
__device__ __forceinline__ u32 divn(u32 a, u32 n) { return a / n; }
__device__ __forceinline__ long long divn(long long a, u32 n) { return a / (long long)n; }
__device__ __forceinline__ u64 divn(u64 a, u32 n) { return a / n; }
__device__ __forceinline__ float divn(float a, u32 n) { return a / (float)n; }
__device__ __forceinline__ double divn(double a, u32 n) { return a / (double)n; }
template <class T> __device__ __forceinline__ T divn(T a, u32 n) { return from_f(to_f(a) / (float)n, a); }

/* ---- vectors: B bytes (16, 8 or 4) reinterpreted as B/sizeof(T) elements ------------------ */
template <class T, int B> struct Vec {
    union { T e[B / sizeof(T) ? B / sizeof(T) : 1]; u32 w[B / 4]; };
};
template <class T, int OP, int B>
__device__ __forceinline__ void vred(u32 (&a)[B / 4], const u32 (&b)[B / 4]) {
    static_assert(B >= (int)sizeof(T), "payload smaller than one element");
    Vec<T, B> x, y;
#pragma unroll
    for (int i = 0; i < B / 4; i++) { x.w[i] = a[i]; y.w[i] = b[i]; }
#pragma unroll
    for (int i = 0; i < B / (int)sizeof(T); i++) x.e[i] = red<OP>(x.e[i], y.e[i]);
#pragma unroll
    for (int i = 0; i < B / 4; i++) a[i] = x.w[i];
}

} /* namespace mk */
#endif

/* native_allgather.cu - a native allgather for examples/torch/native_algorithm.py: each block
 * sends its share of the input to every peer through the runtime-managed scratch slots, in
 * pieces, with the message/ack protocol of mscclrt_native.cuh (libmscclrt(3), native algorithms). */
#include "mscclrt_native.cuh"

/* allgather: rank r's input goes to out + r * in_bytes on every rank */
extern "C" __global__ void my_allgather(MnArgs a) {
    const mn::Ctx x(a);
    const mn::u32 b = blockIdx.x;
    const mn::Span sh = mn::share(a.in_bytes, b, gridDim.x);  /* this block's bytes */
    const mn::u64 K = mn::npieces(sh, x.slot);                 /* messages per peer */
    char *out = (char *)a.out;
    for (mn::u64 k = 0; k < K; k++) {
        const mn::Span pc = mn::piece(sh, k, x.slot);
        const mn::u32 h = (mn::u32)(k & 1);
        for (mn::u32 p = 0; p < x.n; p++) {                   /* send piece k */
            if (p == x.rank) continue;
            if (k >= 2) mn::wait_ack(x, b, p);                 /* half h is free again */
            mk::copy(x.slot_at(p, b, h), (const char *)a.in + pc.lo, pc.hi - pc.lo);
            mn::put_done(x, b, p);
        }
        for (mn::u32 p = 0; p < x.n; p++) {                   /* receive piece k */
            if (p == x.rank) {
                mk::copy(out + p * a.in_bytes + pc.lo, (const char *)a.in + pc.lo, pc.hi - pc.lo);
                continue;
            }
            mn::wait_data(x, b, p);
            mk::copy(out + p * a.in_bytes + pc.lo, x.slot_in(b, p, h), pc.hi - pc.lo);
            mn::ack(x, b, p);
        }
    }
    for (mn::u32 p = 0; p < x.n; p++)                         /* the last acks */
        for (mn::u64 j = 0; p != x.rank && j < (K < 2 ? K : 2); j++) mn::wait_ack(x, b, p);
}


/*
 * native_builtin.cuh - the built-in native algorithms: every NCCL collective and grouped
 * send/recv, for any element count, any dtype and operator (PreMulSum included), on any
 * buffers, through the communicator's native scratch (mscclrt_native.cuh's protocol). The
 * runtime compiles this file with MSCCLRT_T (element type) and MSCCLRT_OP (operator) defined,
 * once per (architecture, dtype, op) for the reducing collectives and once for the others.
 *
 * Work split: a message is cut into the same 16-byte-aligned shares on every rank, one per
 * block, and each share into pieces of at most one slot; piece i of block b travels as message
 * k of (b, peer) on both sides, so no rank needs to know more than the counts. Reductions run
 * in rank order 0..n-1 on the data staged in slots, so every rank that reduces the same
 * elements gets the same bits (allreduce results agree across ranks).
 */
#ifndef MSCCLRT_NATIVE_BUILTIN_CUH
#define MSCCLRT_NATIVE_BUILTIN_CUH
#include "mscclrt_native.cuh"
#include "native_probe.cuh"

#ifndef MSCCLRT_T
#define MSCCLRT_T mk::u8
#endif
#ifndef MSCCLRT_OP
#define MSCCLRT_OP 0
#endif

namespace mn {
typedef MSCCLRT_T T;
/* PreMulSum scales while staging and then sums; avg sums and divides at the end */
enum { OP = MSCCLRT_OP == MN_OP_PREMULSUM ? mk::OP_SUM : MSCCLRT_OP };

/* dst = src * s (elementwise, block-wide), the staging copy of PreMulSum */
__device__ __noinline__ void copy_scaled(char *dst, const char *src, u64 n, T s) {
    T *d = (T *)dst;
    const T *x = (const T *)src;
    for (u64 i = threadIdx.x; i < n / sizeof(T); i += blockDim.x) d[i] = mk::red<mk::OP_PROD>(x[i], s);
}

/* a copy into a slot: scaled for PreMulSum when the data is a contribution to a reduction */
__device__ __forceinline__ void stage(char *dst, const char *src, u64 n, bool scale, const T *s) {
    if (n == 0) return;
    if (scale) copy_scaled(dst, src, n, *s);
    else mk::copy(dst, src, n);
}

/* dst = slot(0) (op) slot(1) (op) ... (op) slot(n-1): the n ranks' contributions to one piece,
 * staged in this rank's slots of block b, half h; in rank order, block-wide */
template <int K>
__device__ __forceinline__ void red_group(char *dst, const char *const (&src)[8], u64 n) {
    const char *s[K];
#pragma unroll
    for (int k = 0; k < K; k++) s[k] = src[k];
    char *const d[1] = {dst};
    mk::reduce<T, OP, K, 1>(d, s, n);
}
/* rank q's contribution: staged in this rank's slot from q, or this rank's own data (`own`
 * when the caller did not stage it) */
__device__ __forceinline__ const char *contrib(const Ctx &x, u32 b, u32 q, u32 h, const char *own) {
    if (q == x.rank && own) return own;
    return x.remote(q) ? x.slot_in_net(b, q, half_net(x, b, q)) : x.slot_in(b, q, h);
}
__device__ void reduce_slots(char *dst, const Ctx &x, u32 b, u32 h, u64 n, const char *own) {
    if (n == 0) return;
    if (x.n == 1) { mk::copy(dst, contrib(x, b, 0, h, own), n); return; }
    /* groups of 8 sources while there are that many (the running result is the first of every
     * group after the first), pairs for the rest: two instantiations keep NVRTC quick */
    const char *grp[8];
    u32 done = 0;
    while (done < x.n) {
        int k = 0;
        if (done > 0) grp[k++] = dst;
        if (x.n - done >= (u32)(8 - k)) {
            while (k < 8) grp[k++] = contrib(x, b, done++, h, own);
            red_group<8>(dst, grp, n);
        } else {
            if (k == 0) grp[k++] = contrib(x, b, done++, h, own);
            grp[k++] = contrib(x, b, done++, h, own);
            red_group<2>(dst, grp, n);
        }
        __syncthreads();
    }
}

__device__ __forceinline__ void finish_avg(char *buf, u64 n, u32 nranks) {
    if (MSCCLRT_OP == mk::OP_AVG && n) mk::divide<T>(buf, n, nranks, threadIdx.x, blockDim.x);
}

/* ---- sending and receiving one message of (block b, peer p) ------------------------------- */
struct Flow {
    const Ctx &x;
    u32 b;
    bool *net_sent;                /* shared: this block handed the proxy a piece to send */
    __device__ Flow(const Ctx &x_, u32 b_, bool *net_sent_) : x(x_), b(b_), net_sent(net_sent_) {
        if (threadIdx.x == 0) *net_sent = false;
        __syncthreads();
    }
    /* to a peer on another node the piece goes through the port proxy (the host never runs
     * PreMulSum across nodes, so there is nothing to scale on the way): copied first into this
     * rank's outgoing slot in pinned host memory where the context has one (the proxy sends it
     * as it is, and the slot's half is written again only after the peer acknowledged this
     * message, i.e. after it arrived), else from src itself, which the block's end then waits
     * for the proxy to have read (finish) */
    __device__ __noinline__ void send_net(u32 p, const char *src, u64 n) const {
        u32 h = 0;
        char *dst = open_net(x, b, p, &h);
        if (x.c->slot_out) {
            char *out = x.slot_out_at(b, p, h);
            mk::copy(out, src, n);
            __threadfence_system();   /* every thread's stores reach host memory first */
            return put_net(x, b, p, dst, out, n);
        }
        if (threadIdx.x == 0) *net_sent = true;
        put_net(x, b, p, dst, src, n);
    }
    /* message k to p: reuse the half only once p acknowledged message k - 2 (to another node:
     * the messages are counted across launches, send_net) */
    __device__ void send(u32 p, u64 k, const char *src, u64 n, bool scale, const T *s) const {
        if (x.remote(p)) return send_net(p, src, n);
        if (k >= 2) wait_ack(x, b, p);
        stage(x.slot_at(p, b, (u32)(k & 1)), src, n, scale, s);
        put_done(x, b, p);
    }
    __device__ const char *recv(u32 p, u64 k) const {
        wait_data(x, b, p);
        return x.remote(p) ? x.slot_in_net(b, p, half_net(x, b, p)) : x.slot_in(b, p, (u32)(k & 1));
    }
    /* after the last of K messages to p: the acks not waited for yet (none to another node:
     * the next launch's open_net waits for what it needs) */
    __device__ void drain(u32 p, u64 K) const {
        if (x.remote(p)) return;
        for (u64 j = 0; j < (K < 2 ? K : 2); j++) wait_ack(x, b, p);
    }
    /* the block's end: its pieces to other nodes have been read from their sources */
    __device__ void finish() const {
        __syncthreads();
        if (*net_sent) net_done(x);
    }
};

__device__ __forceinline__ u64 minu(u64 a, u64 b) { return a < b ? a : b; }

/* Contributions of every rank to one piece, reduced in rank order into dst once every peer's
 * has arrived in its slot. This rank's own is read where it is, or, scaled for PreMulSum,
 * staged first in its own slot (which no peer writes). own_sent: own was also sent to the
 * peers; in place (dst is own) a piece to another node is read by the proxy some time after
 * put_net, so the result waits until the proxy has read every source (net_done): writing it
 * earlier sent the sum instead of the contribution (in-place allreduce across nodes below
 * 16 KiB per rank, every element wrong, found by tests/gpu/net_sizes.sh). */
__device__ void reduce_piece(const Ctx &x, const Flow &f, u64 k, char *dst, const char *own, u64 n,
                             bool scale, const T *s, bool own_sent = false) {
    const u32 h = (u32)(k & 1);
    /* in place (dst is own), own must be read before the running result overwrites it: only
     * when it is a source of reduce_slots' first group (8 sources from 8 ranks on, else 2) */
    const bool direct = !scale && (own != dst || x.rank < (x.n >= 8 ? 8u : 2u));
    if (!direct) stage(x.slot_in(f.b, x.rank, h), own, n, scale, s);
    for (u32 q = 0; q < x.n; q++)
        if (q != x.rank) f.recv(q, k);
    __syncthreads();
    if (own_sent && dst == own && *f.net_sent) net_done(x);
    reduce_slots(dst, x, f.b, h, n, direct ? own : nullptr);
    finish_avg(dst, n, x.n);
}

/* ---- packet paths: one message per (block, peer), no data signals, no final waits --------- */
#define MN_PK_MAX_RANKS 1024

/* whether each of nb blocks' share of len bytes fits one packet message of the context */
__device__ __forceinline__ bool pk_share_fits(const Ctx &x, u64 len, u32 nb) {
    return x.pk_data() && round16((len + nb - 1) / nb) <= x.pk_data();
}
/* Whether messages of len bytes per peer travel as packets cut over nb blocks (the launch's
 * grid unless said). Every rank decides the same: len, the grid and the context's slot size
 * agree on all of them. */
__device__ __forceinline__ bool pk_fits(const Ctx &x, u64 len, u32 nb) {
    return x.n <= MN_PK_MAX_RANKS && len <= x.c->pk_max_bytes && pk_share_fits(x, len, nb);
}
__device__ __forceinline__ bool pk_fits(const Ctx &x, u64 len) { return pk_fits(x, len, x.nb); }
/* a collective: packets are stores into every peer's memory, so none where a peer is on another
 * node (the context then has a proxy FIFO) */
__device__ __forceinline__ bool pk_mode(const Ctx &x, u64 len) { return !x.c->fifo && pk_fits(x, len); }

/* d *= s elementwise (PreMulSum's scaling of a contribution) */
__device__ __forceinline__ void scale8(u32 (&d)[2], const T *s) {
    mk::Vec<T, 8> v;
    v.w[0] = d[0];
    v.w[1] = d[1];
    const T k = *s;
#pragma unroll
    for (int i = 0; i < (int)(8 / sizeof(T)); i++) v.e[i] = mk::red<mk::OP_PROD>(v.e[i], k);
    d[0] = v.w[0];
    d[1] = v.w[1];
}
__device__ __forceinline__ void avg8(u32 (&d)[2], u32 nranks) {
    if (MSCCLRT_OP != mk::OP_AVG) return;
    mk::Vec<T, 8> v;
    v.w[0] = d[0];
    v.w[1] = d[1];
#pragma unroll
    for (int i = 0; i < (int)(8 / sizeof(T)); i++) v.e[i] = mk::divn(v.e[i], nranks);
    d[0] = v.w[0];
    d[1] = v.w[1];
}

/* n bytes at src as the packets of message `flag` to p (scaled for PreMulSum contributions) */
__device__ void pk_put(const Ctx &x, u32 b, u32 p, u32 flag, const char *src, u64 n, bool scale,
                       const T *s) {
    char *slot = x.pk_at(p, b, flag);
    if (!scale) {
        pk_write(slot, src, n, flag);
        return;
    }
    for (u64 j = threadIdx.x; j * 8 < n; j += blockDim.x) {
        u32 d[2];
        ld8(src + j * 8, n - j * 8, d);
        scale8(d, s);
        mk::Pkt<16>::write(slot + j * 16, d, flag);
    }
}
/* dst = the n ranks' contributions in rank order: this rank's own (from `own`), every peer's
 * from its packet message rf[q] of block b */
__device__ void pk_reduce(const Ctx &x, u32 b, const u32 *rf, char *dst, const char *own, u64 n,
                          bool scale, const T *s) {
    for (u64 j = threadIdx.x; j * 8 < n; j += blockDim.x) {
        u32 acc[2] = {0, 0};
        for (u32 q = 0; q < x.n; q++) {
            u32 d[2];
            if (q == x.rank) {
                ld8(own + j * 8, n - j * 8, d);
                if (scale) scale8(d, s);
            } else {
                mk::Pkt<16>::read(x.pk_in(b, q, rf[q]) + j * 16, d, rf[q]);
            }
            if (q == 0) {
                acc[0] = d[0];
                acc[1] = d[1];
            } else {
                mk::vred<T, OP, 8>(acc, d);
            }
        }
        avg8(acc, x.n);
        st8(dst + j * 8, n - j * 8, acc);
    }
}

/* The packet form of every collective: block b's share of each peer's message, one message per
 * (block, peer) and direction, all counters opened at once (pk_open_all), all sends before any
 * receive, acknowledgements at the end without waiting. */
__device__ void pk_collective(const MnArgs &a, const Ctx &x, u32 b) {
    __shared__ u32 sf[MN_PK_MAX_RANKS], rf[MN_PK_MAX_RANKS];
    const u32 n = x.n, r = x.rank, root = a.root >= 0 ? (u32)a.root : 0;
    const bool scale = a.op == MN_OP_PREMULSUM;
    const T *s = (const T *)a.scalar;
    const char *in = (const char *)a.in;
    char *out = (char *)a.out;
    /* len: bytes of each peer's message; sblk / rblk: the stride of the per-peer blocks of the
     * input / output (0 where every peer's message is the same bytes) */
    u64 len = a.in_bytes, sblk = 0, rblk = 0;
    PkPeers w = {root, true, false, true, false};
    bool reduces = false;
    switch (a.coll) {
    case MN_ALLREDUCE: reduces = true; break;
    case MN_ALLGATHER: rblk = len; break;
    case MN_GATHER: w = {root, false, r != root, r == root, false}; rblk = len; break;
    case MN_ALLTOALL: len = a.out_bytes / n; sblk = rblk = len; break;
    case MN_SCATTER: len = a.out_bytes; w = {root, r == root, false, false, r != root}; sblk = len; break;
    case MN_REDUCESCATTER: len = a.out_bytes; sblk = len; reduces = true; break;
    case MN_REDUCE: w = {root, false, r != root, r == root, false}; reduces = true; break;
    case MN_BROADCAST: w = {root, r == root, false, false, r != root}; break;
    default: return;
    }
    const Span sh = share(len, b, x.nb);
    const u64 m = sh.hi - sh.lo;
    if (m == 0) return;   /* every rank's share of this block is empty: no messages */
    pk_open_all(x, b, w, sf, rf);
    probe_at(2);
    for (u32 p = 0; p < n; p++)
        if (p != r && w.sends(p)) pk_put(x, b, p, sf[p], in + p * sblk + sh.lo, m, scale, s);
    probe_at(3);
    const bool any_recv = w.recv_all || (w.recv_root && r != root);
    if (reduces) {
        if (any_recv) pk_reduce(x, b, rf, out + sh.lo, in + r * sblk + sh.lo, m, scale, s);
    } else {
        /* this rank's own block where the output holds one (allgather, gather at the root,
         * alltoall, scatter at the root, broadcast at the root) */
        const bool own = a.coll == MN_BROADCAST ? r == root
                       : a.coll == MN_GATHER    ? r == root
                       : a.coll == MN_SCATTER   ? r == root
                                                : true;
        if (own) {
            const char *src = in + r * sblk + sh.lo;
            char *dst = out + (a.coll == MN_SCATTER || a.coll == MN_BROADCAST ? 0 : r * (rblk ? rblk : sblk)) + sh.lo;
            if (src != dst) mk::copy(dst, src, m);
        }
        for (u32 p = 0; p < n; p++)
            if (p != r && w.recvs(p)) pk_read(out + p * rblk + sh.lo, x.pk_in(b, p, rf[p]), m, rf[p]);
    }
    probe_at(4);
    if (any_recv) pk_ack_all(x, b, w);
    probe_at(5);
}

/* n bytes at src to p as packet message `flag` of block b, its half free (send/recv groups) */
__device__ void pk_send_flag(const Ctx &x, u32 b, u32 p, u32 flag, const char *src, u64 n) {
    if (!x.remote(p)) return pk_put(x, b, p, flag, src, n, false, nullptr);
    /* another node: the packets into this rank's outgoing slot, which the proxy copies as they
     * are into p's slot (reused two messages later, once p acknowledged this one: read by then) */
    char *out = x.pk_out(b, p, flag);
    pk_write(out, src, n, flag);
    /* the outgoing slot may be host memory the proxy sends from: every thread's stores reach it
     * before thread 0 hands the proxy the message */
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0)
        mk::proxy_put((const MkFifo *)x.c->fifo, x.pk_at_net(p, b, flag), out, (n + 7) / 8 * 16);
}
/* n bytes at src to p as the next packet message of block b (send/recv groups) */
__device__ void pk_send(const Ctx &x, u32 b, u32 p, const char *src, u64 n) {
    const u32 flag = pk_open(x, b, p);
    probe_at(12);
    pk_send_flag(x, b, p, flag, src, n);
}
/* the message of block b from p, copied to dst once it arrived (send/recv groups) */
__device__ void pk_recv(const Ctx &x, u32 b, u32 p, char *dst, u64 n) {
    const u32 flag = pk_accept(x, b, p);
    probe_at(13);
    pk_read(dst, x.pk_in_any(b, p, flag), n, flag);
    probe_at(14);
    pk_ack(x, b, p);
}

/* ---- the collectives --------------------------------------------------------------------- */
__device__ void allreduce(const MnArgs &a, const Ctx &x, const Flow &f) {
    const u64 bytes = a.in_bytes, slot = x.slot;
    const char *in = (const char *)a.in;
    char *out = (char *)a.out;
    const bool scale = a.op == MN_OP_PREMULSUM;
    const T *s = (const T *)a.scalar;
    const u32 nb = x.nb, n = x.n, r = x.rank;
    if (pk_mode(x, bytes)) return pk_collective(a, x, f.b);
    if (bytes <= (u64)n * 16384) {   /* small: one hop, everyone reduces everything */
        const Span sh = share(bytes, f.b, nb);
        const u64 K = npieces(sh, slot);
        for (u64 i = 0; i < K; i++) {
            const Span pc = piece(sh, i, slot);
            for (u32 p = 0; p < n; p++)
                if (p != r) f.send(p, i, in + pc.lo, pc.hi - pc.lo, scale, s);
            reduce_piece(x, f, i, out + pc.lo, in + pc.lo, pc.hi - pc.lo, scale, s, true);
            for (u32 p = 0; p < n; p++) if (p != r) ack(x, f.b, p);
        }
        for (u32 p = 0; p < n; p++) if (p != r) f.drain(p, K);
        return;
    }
    /* large: reduce-scatter then all-gather, partition q reduced by rank q */
    const u64 part = round16((bytes + n - 1) / n);
    const Span s0 = share(minu(part, bytes), f.b, nb);
    const u64 K = npieces(s0, slot);
    for (u64 i = 0; i < K; i++) {
        const u64 k0 = 2 * i, k1 = 2 * i + 1;
        for (u32 p = 0; p < n; p++) {
            if (p == r) continue;
            const u64 base = minu((u64)p * part, bytes), len = minu(part, bytes - base);
            const Span pc = piece(share(len, f.b, nb), i, slot);
            f.send(p, k0, in + base + pc.lo, pc.hi - pc.lo, scale, s);
        }
        const u64 mb = minu((u64)r * part, bytes), mlen = minu(part, bytes - mb);
        const Span mp = piece(share(mlen, f.b, nb), i, slot);
        reduce_piece(x, f, k0, out + mb + mp.lo, in + mb + mp.lo, mp.hi - mp.lo, scale, s);
        for (u32 p = 0; p < n; p++) if (p != r) ack(x, f.b, p);
        for (u32 p = 0; p < n; p++)
            if (p != r) f.send(p, k1, out + mb + mp.lo, mp.hi - mp.lo, false, s);
        for (u32 p = 0; p < n; p++) {
            if (p == r) continue;
            const u64 base = minu((u64)p * part, bytes), len = minu(part, bytes - base);
            const Span pc = piece(share(len, f.b, nb), i, slot);
            const char *src = f.recv(p, k1);
            if (pc.hi > pc.lo) mk::copy(out + base + pc.lo, src, pc.hi - pc.lo);
            ack(x, f.b, p);
        }
    }
    for (u32 p = 0; p < n; p++) if (p != r) f.drain(p, 2 * K);
}

/* rank q's block of b bytes at q * b: allgather (to everyone), gather (to root) */
__device__ void gather_like(const MnArgs &a, const Ctx &x, const Flow &f, bool to_all) {
    const u64 blk = a.in_bytes, slot = x.slot;
    const char *in = (const char *)a.in;
    char *out = (char *)a.out;
    const u32 n = x.n, r = x.rank, root = (u32)a.root;
    const bool receiver = to_all || r == root;
    if (pk_mode(x, blk)) return pk_collective(a, x, f.b);
    const Span sh = share(blk, f.b, x.nb);
    const u64 K = npieces(sh, slot);
    for (u64 i = 0; i < K; i++) {
        const Span pc = piece(sh, i, slot);
        const u64 len = pc.hi - pc.lo;
        for (u32 p = 0; p < n; p++)
            if (p != r && (to_all || p == root)) f.send(p, i, in + pc.lo, len, false, nullptr);
        if (receiver) {
            if (out + (u64)r * blk != in && len) mk::copy(out + (u64)r * blk + pc.lo, in + pc.lo, len);
            for (u32 p = 0; p < n; p++) {
                if (p == r) continue;
                const char *src = f.recv(p, i);
                if (len) mk::copy(out + (u64)p * blk + pc.lo, src, len);
                ack(x, f.b, p);
            }
        }
    }
    for (u32 p = 0; p < n; p++)
        if (p != r && (to_all || p == root)) f.drain(p, K);
}

/* block q of the input goes to rank q: alltoall (everyone), scatter (from root) */
__device__ void scatter_like(const MnArgs &a, const Ctx &x, const Flow &f, bool from_all) {
    const u32 n = x.n, r = x.rank, root = (u32)a.root;
    const u64 blk = from_all ? a.out_bytes / n : a.out_bytes, slot = x.slot;
    const char *in = (const char *)a.in;
    char *out = (char *)a.out;
    const bool sender = from_all || r == root;
    if (pk_mode(x, blk)) return pk_collective(a, x, f.b);
    const Span sh = share(blk, f.b, x.nb);
    const u64 K = npieces(sh, slot);
    for (u64 i = 0; i < K; i++) {
        const Span pc = piece(sh, i, slot);
        const u64 len = pc.hi - pc.lo;
        /* alltoall: block q of the output comes from rank q; scatter: one block */
        if (sender) {
            for (u32 p = 0; p < n; p++)
                if (p != r) f.send(p, i, in + (u64)p * blk + pc.lo, len, false, nullptr);
            char *mine = out + (from_all ? (u64)r * blk : 0);
            if (in + (u64)r * blk != mine && len) mk::copy(mine + pc.lo, in + (u64)r * blk + pc.lo, len);
        }
        for (u32 p = 0; p < n; p++) {
            if (p == r || !(from_all || p == root)) continue;
            const char *src = f.recv(p, i);
            if (len) mk::copy(out + (from_all ? (u64)p * blk : 0) + pc.lo, src, len);
            ack(x, f.b, p);
        }
    }
    if (sender)
        for (u32 p = 0; p < n; p++) if (p != r) f.drain(p, K);
}

/* reducescatter (partition q of the input to rank q, reduced) and reduce (everything to root) */
__device__ void reduce_like(const MnArgs &a, const Ctx &x, const Flow &f, bool scatter) {
    const u64 len = scatter ? a.out_bytes : a.in_bytes, slot = x.slot;
    const char *in = (const char *)a.in;
    char *out = (char *)a.out;
    const bool scale = a.op == MN_OP_PREMULSUM;
    const T *s = (const T *)a.scalar;
    const u32 n = x.n, r = x.rank, root = (u32)a.root;
    if (pk_mode(x, len)) return pk_collective(a, x, f.b);
    const Span sh = share(len, f.b, x.nb);
    const u64 K = npieces(sh, slot);
    for (u64 i = 0; i < K; i++) {
        const Span pc = piece(sh, i, slot);
        const u64 m = pc.hi - pc.lo;
        for (u32 p = 0; p < n; p++)
            if (p != r && (scatter || p == root))
                f.send(p, i, in + (scatter ? (u64)p * len : 0) + pc.lo, m, scale, s);
        if (scatter || r == root) {
            reduce_piece(x, f, i, out + pc.lo, in + (scatter ? (u64)r * len : 0) + pc.lo, m, scale, s);
            for (u32 p = 0; p < n; p++) if (p != r) ack(x, f.b, p);
        }
    }
    for (u32 p = 0; p < n; p++)
        if (p != r && (scatter || p == root)) f.drain(p, K);
}

__device__ void broadcast(const MnArgs &a, const Ctx &x, const Flow &f) {
    const u64 len = a.in_bytes, slot = x.slot;
    const char *in = (const char *)a.in;
    char *out = (char *)a.out;
    const u32 n = x.n, r = x.rank, root = (u32)a.root;
    if (pk_mode(x, len)) return pk_collective(a, x, f.b);
    const Span sh = share(len, f.b, x.nb);
    const u64 K = npieces(sh, slot);
    for (u64 i = 0; i < K; i++) {
        const Span pc = piece(sh, i, slot);
        const u64 m = pc.hi - pc.lo;
        if (r == root) {
            for (u32 p = 0; p < n; p++) if (p != r) f.send(p, i, in + pc.lo, m, false, nullptr);
            if (in != out && m) mk::copy(out + pc.lo, in + pc.lo, m);
        } else {
            const char *src = f.recv(root, i);
            if (m) mk::copy(out + pc.lo, src, m);
            ack(x, f.b, root);
        }
    }
    if (r == root)
        for (u32 p = 0; p < n; p++) if (p != r) f.drain(p, K);
}

/* ---- grouped send/recv -------------------------------------------------------------------- */
/* Entries to (or from) one peer form one stream of pieces, in call order; piece j of the
 * stream is message j of (block, peer) on both sides. Self pairs copy directly. A peer on
 * another node gets the same slots and counters, reached through the port proxy (put_net,
 * ack_net): never packets or direct stores, which need its memory mapped. */
/* An entry alone in its direction to its peer (the peer's matching entry is then alone too,
 * so both sides choose its form alike). */
__device__ __forceinline__ bool p2p_alone(const MnP2p *v, u32 ne, u32 e) {
    bool alone = true;
    for (u32 d = 0; d < ne; d++)
        alone = alone && (d == e || v[d].peer != v[e].peer || v[d].recv != v[e].recv);
    return alone;
}

/* The blocks that carry entry o (native_abi.h: the same on both sides of the pair, whatever
 * each side's grid; `full` is the group grid every rank shares) */
__device__ __forceinline__ u32 p2p_nb(const Ctx &x, const MnP2p &o, u32 full) {
    const bool remote = x.remote((u32)o.peer);
    return mn_p2p_entry_blocks(o.bytes, remote, x.pk_data(), remote ? x.c->net_pk_max : x.c->pk_max_bytes,
                               (u64)x.c->net_block_kib << 10, full);
}
/* Whether entry o, cut over nb blocks, travels as packets: within the node when each block's
 * share fits a packet message; to another node, with outgoing packet slots, up to the network's
 * packet limit when each block's share fits one (p2p_nb gives such an entry one block per
 * packet message: each is a proxy trigger and a network message of its own) */
__device__ __forceinline__ bool p2p_pk(const Ctx &x, const MnP2p &o, u32 nb) {
    if (!x.remote((u32)o.peer)) return pk_fits(x, o.bytes, nb);
    return x.c->pk_out && o.bytes <= x.c->net_pk_max && pk_share_fits(x, o.bytes, nb);
}

/* L: MnP2pList or MnP2pListSmall (the same entries, fewer of them: a smaller kernel argument).
 * The setup runs one thread per entry, in as few passes between barriers as the group needs:
 * a pass that one thread ran over every entry cost 2-3 us per launch (nccl-tests sendrecv
 * 1 KiB, MSCCLRT_NATIVE_PROBE on 2 x H200: 9.6 us from start to end against alltoall's 3.8 for
 * the same bytes), and each further pass about 0.4-0.8. A group of packet entries alone has
 * one. The entries are read from the kernel argument once, into shared memory (every loop
 * over them read the argument again, about 0.2 us a loop). */
template <class L>
__device__ void sendrecv(const MnArgs &a, const L &l, const MnP2pDirect &dd, const Ctx &x,
                         const Flow &f) {
    enum { CAP = sizeof(l.v) / sizeof(l.v[0]) };
    __shared__ u64 start[CAP], cnt[CAP];
    __shared__ bool pk[CAP];
    __shared__ u64 dptr[CAP];   /* direct: the peer's receive buffer (send entries), 1 (receive) */
    __shared__ bool cand[CAP];  /* may go direct (both sides know the same) */
    __shared__ unsigned long long rounds;
    __shared__ bool with[MN_DIRECT_MAX_RANKS];
    __shared__ MnDirectRec mine[MN_DIRECT_MAX_RANKS], theirs[MN_DIRECT_MAX_RANKS];
    __shared__ bool any_direct, any_simple, any_self;
    __shared__ u32 dnb[CAP];   /* the blocks of a direct copy (mn_p2p_direct_blocks) */
    __shared__ u64 slo[CAP], shi[CAP];   /* this block's share of each entry over its blocks */
    __shared__ u32 pkf[CAP];   /* batch: each packet entry's flag in this block (0: none) */
    __shared__ MnP2p ent[CAP];             /* the entries */
    const MnP2p *const v = ent;
    const u32 ne = a.np2p < CAP ? a.np2p : CAP, r = x.rank;
    /* large entries between the ranks of this node may go direct: the sender stores into the
     * receiver's own buffer, once both sides' records say it is shared and mapped */
    const bool lanes = x.c->off_lane != 0 && x.n <= MN_DIRECT_MAX_RANKS && dd.min_bytes != ~0ull &&
                       gridDim.x <= MN_DIRECT_BLOCKS;
    /* batch: a block's packet entries take their flags in the first pass and acknowledge with
     * relaxed signals after all are read; a packet entry is alone in its peer and direction
     * (p2p_alone), so its counter steps once per launch and no message of the launch waits for
     * an acknowledgement the launch itself gives */
    const bool batch = (dd.flags & MN_P2P_PK_BATCH) != 0;
    if (threadIdx.x == 0) {
        any_direct = false;
        any_simple = false;
        any_self = false;
        rounds = 0;
    }
    for (u32 p = threadIdx.x; p < MN_DIRECT_MAX_RANKS; p += blockDim.x) with[p] = false;
    __syncthreads();
    /* pass 1: each entry's form. Packets: stores into the peer's memory, or across nodes copies
     * of this rank's outgoing packet slot (pk_out) by the proxy, below the direct threshold
     * within the node (a 1 MiB send/recv took 18.2 us as packets, 15.8 direct on 2 x H200);
     * direct stores need the mapping. A block beyond the entry's blocks leaves it alone (its
     * peer's same block does). */
    for (u32 e = threadIdx.x; e < ne; e += blockDim.x) {
        const MnP2p o = l.v[e];
        const u32 peer = (u32)o.peer;
        /* the entry's packet counter of (block, peer) and way, and for a send the peer's
         * acknowledgements, read first: their round trips to memory overlap this pass's */
        const bool other = peer != r && peer < x.n;
        u64 *const ctr = x.ctr(o.recv ? x.c->off_pk_recv : x.c->off_pk_sent, f.b, other ? peer : 0);
        const u64 c0 = other ? *ctr : 0;
        const u64 k0 = other && !o.recv ? mk::ld_relaxed_sys(x.ctr(x.c->off_pk_ack, f.b, peer)) : 0;
        ent[e] = o;
        const bool alone = p2p_alone(l.v, ne, e);
        const u32 eb = p2p_nb(x, o, dd.full_blocks);
        dnb[e] = mn_p2p_direct_blocks(dd.flags, eb, o.bytes);
        const Span sh = share(o.bytes, f.b, eb);
        slo[e] = sh.lo;
        shi[e] = sh.hi;
        const bool near = other && !x.remote(peer);
        const bool p = alone && other && p2p_pk(x, o, eb) && !(lanes && near && o.bytes >= dd.min_bytes);
        pk[e] = p;
        const bool c = lanes && alone && !p && near && x.peers[peer] && o.bytes >= dd.min_bytes &&
                       f.b < dnb[e];
        cand[e] = c;
        dptr[e] = c;   /* decided after the records */
        const u64 k = p || c ? 0 : npieces(sh, x.p2p_slot(peer, o.recv != 0));
        cnt[e] = k;
        start[e] = 0;
        /* every writer of these writes the same */
        if (c) {
            with[peer] = true;
            any_direct = true;
        }
        if (k && other) any_simple = true;
        if (peer == r) any_self = true;
        /* batch: the flag of this block's message (none where its share is empty) */
        pkf[e] = batch && p && sh.hi > sh.lo ? pk_take_read(x, f.b, peer, o.recv != 0, ctr, c0, k0) : 0;
    }
    __syncthreads();
    probe_at(2);
    if (any_direct) {
        if (threadIdx.x == 0) {
            for (u32 p = 0; p < MN_DIRECT_MAX_RANKS; p++) {
                if (!with[p]) continue;
                mine[p] = MnDirectRec{};
                for (u32 q = 0; q < MN_DIRECT_MAX_RANKS; q++) mine[p].upto[q] = dd.upto[q];
            }
            for (u32 e = 0, k = 0; e < ne; e++) {
                if (cand[e] && v[e].recv && k < MN_P2P_DIRECT) {
                    MnDirectRec &m = mine[(u32)v[e].peer];
                    m.rpub = dd.recv[k].pub;
                    m.rslot = dd.recv[k].slot;
                    m.roff = dd.recv[k].off;
                }
                if (v[e].recv) k++;
            }
        }
        __syncthreads();
        const long long t0 = clock64();
        lane_exchange(x, f.b, with, mine, 1, theirs);
        if (threadIdx.x == 0) {
            for (u32 e = 0, k = 0; e < ne; e++) {
                const u32 peer = (u32)v[e].peer;
                if (dptr[e]) {
                    /* send: the receiver's buffer is shared and this rank mapped it; receive:
                     * this rank's buffer is shared and the sender mapped it; the same facts on
                     * both sides */
                    const MnDirectRec &t = theirs[peer];
                    bool go = !mk::aborted_since(t0);
                    if (v[e].recv) {
                        const u32 pub = k < MN_P2P_DIRECT ? dd.recv[k].pub : 0;
                        go = go && pub && t.upto[r] >= pub;
                    } else {
                        go = go && t.rpub && t.rslot < MN_PM_SLOTS && dd.upto[peer] >= t.rpub;
                        if (go) dptr[e] = pm_peer_ptr(dd.table, peer, t.rslot, t.rpub, t.roff);
                        go = go && dptr[e];
                    }
                    dptr[e] = go ? (v[e].recv ? 1 : dptr[e]) : 0;
                }
                if (v[e].recv) k++;
                if (f.b == 0 && cand[e])   /* the direct counts, per entry */
                    atomicAdd((unsigned long long *)(x.scratch + x.c->off_stats) + (dptr[e] ? 0 : 1), 1ull);
                if (cand[e] && !dptr[e]) {   /* the slots after all */
                    cnt[e] = npieces(Span{slo[e], shi[e]}, x.p2p_slot(peer, v[e].recv != 0));
                    if (cnt[e]) any_simple = true;
                }
            }
        }
        __syncthreads();
    }
    probe_at(10);
    /* pass 2, with Simple entries only: where each entry's pieces start in its peer's stream,
     * and the rounds */
    if (any_simple) {
        for (u32 e = threadIdx.x; e < ne; e += blockDim.x) {
            const MnP2p &o = v[e];
            u64 s = 0;
            for (u32 d = 0; d < e; d++)
                if (v[d].peer == o.peer && v[d].recv == o.recv) s += cnt[d];
            start[e] = s;
            if ((u32)o.peer != r && cnt[e]) atomicMax(&rounds, (unsigned long long)(s + cnt[e]));
        }
        __syncthreads();
    }
    probe_at(3);
    /* to self: the k-th send lands in the k-th receive. Here and below a loop that would find
     * nothing is not entered: each cost a launch 0.1-0.3 us (MSCCLRT_NATIVE_PROBE) */
    for (u32 e = 0, ks = 0; any_self && e < ne; e++) {
        if ((u32)v[e].peer != r || v[e].recv) continue;
        for (u32 d = 0, kr = 0; d < ne; d++) {
            if ((u32)v[d].peer != r || !v[d].recv) continue;
            if (kr++ != ks) continue;
            const Span sh = share(v[e].bytes < v[d].bytes ? v[e].bytes : v[d].bytes, f.b, x.nb);
            if (sh.hi > sh.lo && v[d].ptr != v[e].ptr)
                mk::copy((char *)v[d].ptr + sh.lo, (const char *)v[e].ptr + sh.lo, sh.hi - sh.lo);
            break;
        }
        ks++;
    }
    probe_at(4);
    /* packet entries first: their sends never wait on this launch, so the Simple rounds after
     * them cannot hold them up */
    for (u32 e = 0; e < ne; e++) {
        if (!pk[e] || v[e].recv || shi[e] <= slo[e]) continue;
        const char *src = (const char *)v[e].ptr + slo[e];
        if (batch) pk_send_flag(x, f.b, (u32)v[e].peer, pkf[e], src, shi[e] - slo[e]);
        else pk_send(x, f.b, (u32)v[e].peer, src, shi[e] - slo[e]);
    }
    probe_at(5);
    /* direct sends: this block's share straight into the receiver's buffer, then done */
    for (u32 e = 0; any_direct && e < ne; e++) {
        if (!dptr[e] || v[e].recv) continue;
        const Span sh = share(v[e].bytes, f.b, dnb[e]);
        if (sh.hi > sh.lo) mk::copy((char *)dptr[e] + sh.lo, (const char *)v[e].ptr + sh.lo, sh.hi - sh.lo);
        __syncthreads();
        if (threadIdx.x == 0) lane_done(x, f.b, (u32)v[e].peer);
    }
    probe_at(6);
    for (u32 e = 0; e < ne; e++) {
        if (!pk[e] || !v[e].recv || shi[e] <= slo[e]) continue;
        char *dst = (char *)v[e].ptr + slo[e];
        const u32 p = (u32)v[e].peer;
        if (batch) pk_read(dst, x.pk_in_any(f.b, p, pkf[e]), shi[e] - slo[e], pkf[e]);
        else pk_recv(x, f.b, p, dst, shi[e] - slo[e]);
    }
    if (batch) {   /* every packet entry read: the acknowledgements */
        __syncthreads();
        if (threadIdx.x == 0)
            for (u32 e = 0; e < ne; e++)
                if (pkf[e] && v[e].recv) pk_ack_one(x, f.b, (u32)v[e].peer, true);
    }
    probe_at(7);
    /* direct receives: the sender's share of this block has landed */
    if (any_direct) {
        for (u32 e = 0; e < ne; e++)
            if (dptr[e] && v[e].recv && threadIdx.x == 0) lane_wait_done(x, f.b, (u32)v[e].peer);
        __syncthreads();
    }
    probe_at(8);
    for (u64 i = 0; i < rounds; i++) {
        for (u32 e = 0; e < ne; e++) {
            const MnP2p &o = v[e];
            if (o.recv || (u32)o.peer == r || i < start[e] || i >= start[e] + cnt[e]) continue;
            const Span pc = piece(Span{slo[e], shi[e]}, i - start[e], x.p2p_slot((u32)o.peer, false));
            f.send((u32)o.peer, i, (const char *)o.ptr + pc.lo, pc.hi - pc.lo, false, nullptr);
        }
        for (u32 e = 0; e < ne; e++) {
            const MnP2p &o = v[e];
            if (!o.recv || (u32)o.peer == r || i < start[e] || i >= start[e] + cnt[e]) continue;
            const Span pc = piece(Span{slo[e], shi[e]}, i - start[e], x.p2p_slot((u32)o.peer, true));
            const char *src = f.recv((u32)o.peer, i);
            if (pc.hi > pc.lo) mk::copy((char *)o.ptr + pc.lo, src, pc.hi - pc.lo);
            ack(x, f.b, (u32)o.peer);
        }
    }
    probe_at(9);
    /* drain once per peer: its stream's length is the end of its last entry (entries that
     * went direct or found nothing to send drain nothing) */
    for (u32 e = 0; any_simple && e < ne; e++) {
        const MnP2p &o = v[e];
        if (o.recv || (u32)o.peer == r || pk[e]) continue;
        bool last = true;
        for (u32 d = e + 1; d < ne; d++) last = last && !(v[d].peer == o.peer && !v[d].recv);
        if (last) f.drain((u32)o.peer, start[e] + cnt[e]);
    }
}

/* every collective through the slots (or packets), on blocks 0 .. x.nb - 1 */
__device__ void coll_slots(const MnArgs &a, const Ctx &x, const Flow &f) {
    if (f.b >= x.nb) return;
    switch (a.coll) {
    case MN_ALLREDUCE: allreduce(a, x, f); break;
    case MN_ALLGATHER: gather_like(a, x, f, true); break;
    case MN_GATHER: gather_like(a, x, f, false); break;
    case MN_ALLTOALL: scatter_like(a, x, f, true); break;
    case MN_SCATTER: scatter_like(a, x, f, false); break;
    case MN_REDUCESCATTER: reduce_like(a, x, f, true); break;
    case MN_REDUCE: reduce_like(a, x, f, false); break;
    case MN_BROADCAST: broadcast(a, x, f); break;
    default: break;
    }
}

}  // namespace mn

/* the kernels (native_direct.cuh's module has its own and defines MSCCLRT_NATIVE_LIB_ONLY) */
#ifndef MSCCLRT_NATIVE_LIB_ONLY
extern "C" __global__ void __launch_bounds__(1024) mscclrt_native_coll(MN_PARAM MnArgs a) {
    const mn::Ctx x(a);   /* the context: written once at setup, so loaded before the wait */
    mk::launch_prologue();
    mn::probe_begin(x.c, MN_PROBE_KIND_COLL, a.coll);
    __shared__ bool net_sent;
    const mn::Flow f(x, blockIdx.x, &net_sent);
    mn::coll_slots(a, x, f);
    f.finish();
    mn::probe_at(15);
}

/* the body of both send/recv kernels (L: their list argument's type) */
template <class L>
__device__ __forceinline__ void p2p_kernel(const MnArgs &a, const L &l, const MnP2pDirect &d) {
    const mn::Ctx x(a);   /* the context: written once at setup, so loaded before the wait */
    mk::launch_prologue();
    mn::probe_begin(x.c, MN_PROBE_KIND_P2P, MN_SENDRECV);
    __shared__ bool net_sent;
    const mn::Flow f(x, blockIdx.x, &net_sent);
    mn::sendrecv(a, l, d, x, f);
    f.finish();
    mn::probe_at(15);
}
extern "C" __global__ void __launch_bounds__(1024) mscclrt_native_p2p(MN_PARAM MnArgs a,
                                                                       MN_PARAM MnP2pList l,
                                                                       MN_PARAM MnP2pDirect d) {
    p2p_kernel(a, l, d);
}
/* groups of at most MN_P2P_SMALL entries (most): 3 KiB less of kernel argument per launch */
extern "C" __global__ void __launch_bounds__(1024) mscclrt_native_p2p_small(MN_PARAM MnArgs a,
                                                                             MN_PARAM MnP2pListSmall l,
                                                                             MN_PARAM MnP2pDirect d) {
    p2p_kernel(a, l, d);
}
#endif
#endif

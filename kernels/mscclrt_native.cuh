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
 * so every launch leaves the scratch idle, and counters only grow (graph replay safe). A peer
 * on another node (Ctx::remote) differs: its messages are numbered across launches (open_net,
 * half_net, put_net, ack), and a block that sent to one ends with net_done instead of waiting
 * for acknowledgements. All helpers are block-wide: every thread of the block calls them.
 */
#ifndef MSCCLRT_NATIVE_CUH
#define MSCCLRT_NATIVE_CUH

/* The kernels' by-value structures (MnArgs, MnDirect, MnP2pList, MnP2pDirect) are read where
 * the launch put them: a parameter whose address reaches a function the compiler does not
 * inline is otherwise copied into every thread's local memory first (the direct kernel copied
 * its 344-byte MnArgs in each of 64 x 1024 threads, about 10 us per launch: nccl-tests
 * all_gather 1 MiB took 22 us on 2 x H100 instead of 12). sm_70 and later, which the
 * system-scope loads of these kernels need anyway. */
#define MN_PARAM const __grid_constant__
/* MN_NET 0: no rank of the communicator is on another node (the runtime says so when it builds
 * the module; native_kernel), so every path to one (Ctx::remote) is compiled out: the kernels
 * of a single node then carry no proxy code, and its calls and saved registers do not weigh on
 * the register budget of their local paths. Default 1: a user's module compiled elsewhere keeps
 * both. */
#ifndef MN_NET
#define MN_NET 1
#endif
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
    u32 nb;                       /* blocks that take part in the slot path: the grid, or the
                                     first MN_MAX_BLOCKS of a larger (direct) one */

    __device__ explicit Ctx(const MnArgs &a, u32 blocks = gridDim.x)
        : c((const MnContext *)a.ctx), rank(c->rank), n(c->nranks), scratch((char *)c->scratch),
          peers((const u64 *)c->peer_scratch), slot(c->slot_bytes), nb(blocks) {}

    __device__ u64 *ctr(u64 off, u32 b, u32 r) const { return (u64 *)(scratch + off) + (u64)b * n + r; }
    /* this rank's slot for data from sender s (block b, half h) */
    __device__ char *slot_in(u32 b, u32 s, u32 h) const {
        return scratch + c->off_slots + (((u64)b * n + s) * 2 + h) * slot;
    }
    /* peer p's slot for data from this rank */
    __device__ char *slot_at(u32 p, u32 b, u32 h) const {
        return (char *)peers[p] + c->off_slots + (((u64)b * n + rank) * 2 + h) * slot;
    }
    /* packet slots: this rank's for message `flag` from sender s, and peer p's for ours */
    __device__ const char *pk_in(u32 b, u32 s, u32 flag) const {
        return scratch + c->off_pk + (((u64)b * n + s) * 2 + (flag & 1)) * c->pk_slot_bytes;
    }
    __device__ char *pk_at(u32 p, u32 b, u32 flag) const {
        return (char *)peers[p] + c->off_pk + (((u64)b * n + rank) * 2 + (flag & 1)) * c->pk_slot_bytes;
    }
    /* this rank's slot for a Simple piece from sender s on another node (half h): in pinned
     * host memory where the context has it (MnContext.slot_in_host, slots of net_slot_bytes) */
    __device__ char *slot_in_net(u32 b, u32 s, u32 h) const {
        if (!c->slot_in_host) return slot_in(b, s, h);
        return (char *)c->slot_in_host + (((u64)b * n + s) * 2 + h) * c->net_slot_bytes;
    }
    /* peer p's (on another node) slot for a Simple piece from this rank: a window of its pinned
     * host slots where it has them, else of its scratch */
    __device__ char *slot_at_net(u32 p, u32 b, u32 h) const {
        const u64 w = ((const u64 *)c->peer_slot)[p];
        if (!w) return slot_at(p, b, h);
        return (char *)w + (((u64)b * n + rank) * 2 + h) * c->net_slot_bytes;
    }
    /* this rank's outgoing slot for a Simple piece to peer p on another node (half h;
     * c->slot_out != 0) */
    __device__ char *slot_out_at(u32 b, u32 p, u32 h) const {
        return (char *)c->slot_out + (((u64)b * n + p) * 2 + h) * c->net_slot_bytes;
    }
    /* the pieces of a send/recv entry with peer p (recv: from it): the host slots' size where
     * the receiver keeps its incoming slots in host memory (this rank for a receive, p for a
     * send: both sides of the pair see the same), else the scratch's. Larger pieces across
     * nodes keep more bytes in flight per acknowledgement: with 512 KiB instead of 127 KiB a
     * send/recv of 1 MiB across loopback TCP took 497-615 us instead of 715-955 (2 x H200,
     * c46; NCCL 493). The collectives keep `slot` (their chunks mix local and remote peers). */
    __device__ u64 p2p_slot(u32 p, bool recv) const {
        if (!remote(p)) return slot;
        const bool host = recv ? c->slot_in_host != 0 : ((const u64 *)c->peer_slot)[p] != 0;
        return host ? c->net_slot_bytes : slot;
    }
    /* this rank's slot for packet message `flag` from sender s, which may be on another node
     * (send/recv): there in pinned host memory where the context has it (MnContext.pk_in_host) */
    __device__ const char *pk_in_any(u32 b, u32 s, u32 flag) const {
        if (!c->pk_in_host || !remote(s)) return pk_in(b, s, flag);
        return (const char *)c->pk_in_host + (((u64)b * n + s) * 2 + (flag & 1)) * c->pk_slot_bytes;
    }
    /* peer p's (on another node) slot for packet message `flag` of this rank: a window of its
     * pinned host slots where it has them, else of its scratch */
    __device__ char *pk_at_net(u32 p, u32 b, u32 flag) const {
        const u64 w = ((const u64 *)c->peer_pk)[p];
        if (!w) return pk_at(p, b, flag);
        return (char *)w + (((u64)b * n + rank) * 2 + (flag & 1)) * c->pk_slot_bytes;
    }
    /* this rank's outgoing packet slot for message `flag` to peer p on another node (which
     * the proxy copies into p's pk_in for this rank; c->pk_out != 0): host or device memory */
    __device__ char *pk_out(u32 b, u32 p, u32 flag) const {
        return (char *)c->pk_out + (((u64)b * n + p) * 2 + (flag & 1)) * c->pk_slot_bytes;
    }
    /* data bytes one packet message carries (0: this context has no packet slots) */
    __device__ u64 pk_data() const { return c->pk_slot_bytes / 2; }
    /* peer p is on another node: reached through the port proxy only (native_abi.h) */
    __device__ bool remote(u32 p) const { return MN_NET && (peers[p] >> 56) == MN_WINDOW_TOP; }
    /* this rank's counter of data signals (ack 0) or acknowledgements (ack 1) from peer s for
     * block b: for a peer on another node in pinned host memory where the context has it
     * (MnContext.ctr_in_host; the network's receive thread stores there directly), else in
     * the scratch */
    __device__ u64 *ctr_in(u32 ack, u32 b, u32 s) const {
        if (remote(s) && c->ctr_in_host)
            return (u64 *)c->ctr_in_host + ((u64)ack * c->max_blocks + b) * n + s;
        return ctr(ack ? c->off_ack_in : c->off_data_in, b, s);
    }
    /* peer p's (on another node) counter of this rank's data signals (ack 0) or
     * acknowledgements (ack 1) for block b: a window of its host counters where it has them,
     * else of its scratch */
    __device__ u64 ctr_at_net(u32 ack, u32 p, u32 b) const {
        const u64 w = ((const u64 *)c->peer_ctr)[p];
        if (w) return w + (((u64)ack * c->max_blocks + b) * n + rank) * 8;
        return peers[p] + (ack ? c->off_ack_in : c->off_data_in) + ((u64)b * n + rank) * 8;
    }
};

/* To a peer on another node, through the port proxy: put_net hands the proxy the piece itself
 * (n bytes from src, local memory that stays unchanged until the peer's acknowledgement) for
 * the peer's slot dst (a window address), then the data signal; the proxy raises the peer's
 * counter only after the data before it has landed there. ack_net is the acknowledgement. */
__device__ __forceinline__ void put_net(const Ctx &x, u32 b, u32 p, char *dst, const char *src, u64 n) {
    __syncthreads();
    if (threadIdx.x == 0) {
        const MkFifo *f = (const MkFifo *)x.c->fifo;
        mk::proxy_put(f, dst, src, n);
        mk::proxy_signal(f, x.ctr_at_net(0, p, b));
    }
}
__device__ __forceinline__ void ack_net(const Ctx &x, u32 b, u32 p) {
    __syncthreads();
    if (threadIdx.x == 0)
        mk::proxy_signal((const MkFifo *)x.c->fifo, x.ctr_at_net(1, p, b));
}

/* To a peer on another node Simple messages are numbered for the life of the communicator,
 * not per launch: message m of (block b, peer p) uses half m % 2 of the slot and waits only
 * for the acknowledgement of message m - 2, so a launch does not end waiting for its last
 * acknowledgements (a round trip through both proxies and the network); it ends once its proxy
 * has read every piece's source (net_done). The sender counts in its ack_seen counter of
 * (b, p), which nothing else uses for such a peer (acknowledgements from it are not consumed
 * one by one: open_net compares their total); the receiver's count is its data_seen counter
 * of (b, p). open_net: the slot of the next message to p, once its half is free. */
__device__ __forceinline__ char *open_net(const Ctx &x, u32 b, u32 p, u32 *half = nullptr) {
    u64 *sent = x.ctr(x.c->off_ack_seen, b, p);
    const u64 m = *sent;
    if (half) *half = (u32)(m & 1);
    __syncthreads();   /* every thread has read the count before it moves */
    if (threadIdx.x == 0) {
        *sent = m + 1;
        const u64 *acks = x.ctr_in(1, b, p);
        u32 sp = 0;
        while (m >= 2 && mk::ld_acquire_sys(acks) < m - 1 && !mk::give_up(sp)) { }
    }
    __syncthreads();
    return x.slot_at_net(p, b, (u32)(m & 1));
}
/* receiver: the half of the message from p on another node that wait_data just consumed */
__device__ __forceinline__ u32 half_net(const Ctx &x, u32 b, u32 p) {
    return (u32)((*x.ctr(x.c->off_data_seen, b, p) - 1) & 1);
}
/* the end of a block that sent to other nodes: the proxy has read every source it was handed
 * (the caller may reuse its buffers once the kernel is done) */
__device__ __forceinline__ void net_done(const Ctx &x) {
    __syncthreads();
    if (threadIdx.x == 0) mk::proxy_flush((const MkFifo *)x.c->fifo);
    __syncthreads();
}

/* Signals: one thread of the block issues them after a __syncthreads, so the whole block's
 * writes before it are ordered before the count (release at system scope). A peer on another
 * node is acknowledged through the proxy. */
__device__ __forceinline__ void put_done(const Ctx &x, u32 b, u32 p) {
    __syncthreads();
    if (threadIdx.x == 0)
        mk::signal((u64)((const char *)x.peers[p] + x.c->off_data_in) + ((u64)b * x.n + x.rank) * 8);
}
__device__ __forceinline__ void ack(const Ctx &x, u32 b, u32 p) {
    if (x.remote(p)) return ack_net(x, b, p);
    __syncthreads();
    if (threadIdx.x == 0)
        mk::signal((u64)((const char *)x.peers[p] + x.c->off_ack_in) + ((u64)b * x.n + x.rank) * 8);
}
__device__ __forceinline__ void wait_data(const Ctx &x, u32 b, u32 p) {
    if (threadIdx.x == 0) mk::wait(x.ctr_in(0, b, p), x.ctr(x.c->off_data_seen, b, p));
    __syncthreads();
}
__device__ __forceinline__ void wait_ack(const Ctx &x, u32 b, u32 p) {
    if (threadIdx.x == 0) mk::wait(x.ctr(x.c->off_ack_in, b, p), x.ctr(x.c->off_ack_seen, b, p));
    __syncthreads();
}

/* ---- packet messages ---------------------------------------------------------------------
 * A message whose block share fits pk_data() bytes travels as LL16 packets: 8 data bytes and
 * the message's flag twice in one 16-byte store, so the receiver's load sees data and flag
 * together and no data signal is needed. Message m (1, 2, ...) of (block b, sender s, receiver
 * p) has flag m and uses half m % 2 of p's packet slot for (b, s); both sides count their
 * messages of (b, peer) in their own scratch. The receiver adds an acknowledgement after
 * reading; the sender waits for it only before message m + 2 reuses the half, so a launch
 * never ends waiting for one (the scratch is idle once every rank's kernels are done, which the
 * communicator's release waits for). */

/* ++*ctr, once for the block; every thread gets the new value */
__device__ __forceinline__ u32 pk_count(u64 *ctr) {
    __shared__ u32 v;
    __syncthreads();   /* everyone has read v of the previous call */
    if (threadIdx.x == 0) v = (u32)(++*ctr);
    __syncthreads();
    return v;
}
/* sender: the flag of the next message to p, once its half is free */
__device__ __forceinline__ u32 pk_open(const Ctx &x, u32 b, u32 p) {
    const u32 m = pk_count(x.ctr(x.c->off_pk_sent, b, p));
    if (m > 2) {
        if (threadIdx.x == 0) {
            const u64 *ack = x.ctr(x.c->off_pk_ack, b, p);
            u32 sp = 0;
            while (mk::ld_acquire_sys(ack) < (u64)(m - 2) && !mk::give_up(sp)) { }
        }
        __syncthreads();
    }
    return m;
}
/* receiver: the flag of the next message from p */
__device__ __forceinline__ u32 pk_accept(const Ctx &x, u32 b, u32 p) {
    return pk_count(x.ctr(x.c->off_pk_recv, b, p));
}
/* one thread, after the block's barrier that follows its reads of block b's message from p:
 * the acknowledgement in p's counter for (b, this rank), through the proxy to another node;
 * within the node released, or relaxed (as pk_ack_all's: the values read are used already) */
__device__ __forceinline__ void pk_ack_one(const Ctx &x, u32 b, u32 p, bool relaxed) {
    const u64 at = (u64)((const char *)x.peers[p] + x.c->off_pk_ack) + ((u64)b * x.n + x.rank) * 8;
    if (x.remote(p)) mk::proxy_signal((const MkFifo *)x.c->fifo, at);   /* another node */
    else if (relaxed) mk::signal_relaxed(at);
    else mk::signal(at);
}
/* receiver, after reading the message from p: its half may be written again. Release and
 * acquire here (pk_ack_all is relaxed): this is the form every shared-GPU run passed with; the
 * relaxed one was in the builds whose shared-GPU runs did not finish, not yet ruled out */
__device__ __forceinline__ void pk_ack(const Ctx &x, u32 b, u32 p) {
    __syncthreads();
    if (threadIdx.x == 0) pk_ack_one(x, b, p, false);
}
/* pk_take with the counter c of (b, p) and direction, its value c0, and for a send a reading
 * k0 of p's acknowledgements already in hand (read early, so that their round trips overlapped
 * other work; 0: none read) */
__device__ __forceinline__ u32 pk_take_read(const Ctx &x, u32 b, u32 p, bool recv, u64 *c, u64 c0,
                                            u64 k0) {
    const u64 m = c0 + 1;
    *c = m;
    if (!recv && m > 2 && k0 < m - 2) {
        const u64 *ack = x.ctr(x.c->off_pk_ack, b, p);
        u32 sp = 0;
        while (mk::ld_relaxed_sys(ack) < m - 2 && !mk::give_up(sp)) { }
    }
    return (u32)m;
}
/* one thread: the flag of the next message of (b, p) in one direction (recv: from p), its half
 * free once sending (as pk_open_all, relaxed) */
__device__ __forceinline__ u32 pk_take(const Ctx &x, u32 b, u32 p, bool recv) {
    u64 *c = x.ctr(recv ? x.c->off_pk_recv : x.c->off_pk_sent, b, p);
    return pk_take_read(x, b, p, recv, c, *c, 0);
}

/* Which peers a packet step sends to and receives from: every peer, the root only, or none. */
struct PkPeers {
    u32 root;
    bool send_all, send_root, recv_all, recv_root;
    __device__ bool sends(u32 p) const { return send_all || (send_root && p == root); }
    __device__ bool recvs(u32 p) const { return recv_all || (recv_root && p == root); }
};
/* pk_open and pk_accept for every peer at once, thread p counting peer p's (the counters are
 * independent, so their round trips to memory overlap instead of adding up): sf[p] gets the
 * flag of the message to p, rf[p] the flag of the one from p (left alone where none). Block-wide. */
__device__ __forceinline__ void pk_open_all(const Ctx &x, u32 b, const PkPeers &w, u32 *sf, u32 *rf) {
    for (u32 p = threadIdx.x; p < x.n; p += blockDim.x) {
        if (p == x.rank) continue;
        if (w.sends(p)) sf[p] = pk_take(x, b, p, false);
        if (w.recvs(p)) rf[p] = pk_take(x, b, p, true);
    }
    __syncthreads();
}
/* pk_ack for every peer received from, after reading (block-wide; relaxed: the reads are done,
 * their values already used, so no later write of the peer can reach them) */
__device__ __forceinline__ void pk_ack_all(const Ctx &x, u32 b, const PkPeers &w) {
    __syncthreads();
    for (u32 p = threadIdx.x; p < x.n; p += blockDim.x)
        if (p != x.rank && w.recvs(p))
            mk::signal_relaxed((u64)((const char *)x.peers[p] + x.c->off_pk_ack) + ((u64)b * x.n + x.rank) * 8);
}

/* the 8 bytes at src of which `avail` are data (the rest zero): one packet's payload */
__device__ __forceinline__ void ld8(const char *src, u64 avail, u32 (&d)[2]) {
    if (avail >= 8 && ((u64)src & 3) == 0) {
        d[0] = ((const u32 *)src)[0];
        d[1] = ((const u32 *)src)[1];
        return;
    }
    d[0] = d[1] = 0;
    for (u32 i = 0; i < 8 && i < avail; i++) d[i / 4] |= (u32)(unsigned char)src[i] << (8 * (i % 4));
}
__device__ __forceinline__ void st8(char *dst, u64 avail, const u32 (&d)[2]) {
    if (avail >= 8 && ((u64)dst & 3) == 0) {
        ((u32 *)dst)[0] = d[0];
        ((u32 *)dst)[1] = d[1];
        return;
    }
    for (u32 i = 0; i < 8 && i < avail; i++) dst[i] = (char)(d[i / 4] >> (8 * (i % 4)));
}
/* n bytes at src as packets of `flag` at slot (block-wide) */
__device__ __forceinline__ void pk_write(char *slot, const char *src, u64 n, u32 flag) {
    for (u64 j = threadIdx.x; j * 8 < n; j += blockDim.x) {
        u32 d[2];
        ld8(src + j * 8, n - j * 8, d);
        mk::Pkt<16>::write(slot + j * 16, d, flag);
    }
}
/* the n bytes of the packets of `flag` at slot, once they arrived, to dst (block-wide) */
__device__ __forceinline__ void pk_read(char *dst, const char *slot, u64 n, u32 flag) {
    for (u64 j = threadIdx.x; j * 8 < n; j += blockDim.x) {
        u32 d[2];
        mk::Pkt<16>::read(slot + j * 16, d, flag);
        st8(dst + j * 8, n - j * 8, d);
    }
}

/* ---- lanes: channels of the direct kernels per (block, peer), for up to MN_DIRECT_BLOCKS
 * blocks (native_abi.h): counters in this rank's scratch (its own ones, and ones peers add to)
 * and record slots of two halves that peers write LL16 packets into, as the packet protocol
 * does. Only where the context has them (off_lane != 0). */
__device__ __forceinline__ u64 lane_off(const Ctx &x, u32 kind, u32 b, u32 p) {
    return x.c->off_lane + (((u64)kind * MN_DIRECT_BLOCKS + b) * x.n + p) * 8;
}
__device__ __forceinline__ u64 *lane_ctr(const Ctx &x, u32 kind, u32 b, u32 p) {
    return (u64 *)(x.scratch + lane_off(x, kind, b, p));
}
/* peer q's counter of kind for (block b, this rank), as an address for mk::signal */
__device__ __forceinline__ u64 lane_ctr_at(const Ctx &x, u32 q, u32 kind, u32 b) {
    return x.peers[q] + lane_off(x, kind, b, x.rank);
}
__device__ __forceinline__ u64 lane_rec_off(const Ctx &x, u32 b, u32 s, u32 flag) {
    return x.c->off_lane + (u64)MN_LANE_CTRS * MN_DIRECT_BLOCKS * x.n * 8 +
           (((u64)b * x.n + s) * 2 + (flag & 1)) * MN_LANE_REC_BYTES;
}
/* Block-wide: block b sends record mine + p * stride (stride 0: the same to all) to the same
 * block of every peer p with with[p] (shared), and reads theirs into theirs[p]; every record
 * is written before any is read, so ranks exchanging with each other never wait in turn. */
__device__ void lane_exchange(const Ctx &x, u32 b, const bool *with, const MnDirectRec *mine,
                              u32 stride, MnDirectRec *theirs) {
    __shared__ u32 sf[MN_DIRECT_MAX_RANKS], rf[MN_DIRECT_MAX_RANKS];
    const u32 n = x.n;
    const u64 rb = sizeof(MnDirectRec);
    /* message m (1, 2, ...) of (b, p) uses half m % 2 of p's slot: wait until p read m - 2 */
    for (u32 p = threadIdx.x; p < n; p += blockDim.x) {
        if (!with[p]) continue;
        /* the three counters read at once (none depends on another's value): one memory
         * round trip at the kernel's start instead of three in a row */
        u64 *cs = lane_ctr(x, MN_LANE_REC_SENT, b, p), *cr = lane_ctr(x, MN_LANE_REC_RECV, b, p);
        const u64 *ack = lane_ctr(x, MN_LANE_REC_ACK, b, p);
        const u64 sent = *cs, recv = *cr;
        u64 acked = mk::ld_relaxed_sys(ack);
        const u64 m = sent + 1;
        *cs = m;
        sf[p] = (u32)m;
        rf[p] = (u32)(recv + 1);
        *cr = recv + 1;
        u32 sp = 0;
        while (m > 2 && acked < m - 2 && !mk::give_up(sp)) acked = mk::ld_relaxed_sys(ack);
    }
    __syncthreads();
    for (u32 p = 0; p < n; p++)
        if (with[p]) pk_write((char *)x.peers[p] + lane_rec_off(x, b, x.rank, sf[p]),
                              (const char *)(mine + p * stride), rb, sf[p]);
    for (u32 p = 0; p < n; p++)
        if (with[p]) pk_read((char *)&theirs[p], x.scratch + lane_rec_off(x, b, p, rf[p]), rb, rf[p]);
    __syncthreads();
    /* read: the half may be written again (relaxed, as pk_ack_all: the values are used) */
    for (u32 p = threadIdx.x; p < n; p += blockDim.x)
        if (with[p]) mk::signal_relaxed(lane_ctr_at(x, p, MN_LANE_REC_ACK, b));
}
/* Rank q's buffer as this rank maps it, from the entry of q's announcement pub in slot `slot`
 * of this rank's peer-memory table (runtime/peermem), read as have (its pub) and base, plus
 * off. Every rank's record said this rank mapped it, and the host keeps an entry until its
 * owner retires it, which happens only after this launch: a mismatch is a broken promise and
 * traps, except after an abort, when records may be half read (0: the caller does not go
 * direct). */
__device__ u64 pm_entry_ptr(u64 have, u64 base, u32 q, u32 slot, u32 pub, u64 off) {
    if (have != pub) {
        if (mk::aborted()) return 0;
        printf("mscclrt: direct transfer: rank %u's announcement %u is not in slot %u of this "
               "rank's table (holds %llu)\n", q, pub, slot, (unsigned long long)have);
        __trap();
    }
    return base + off;
}
/* one table entry, both words in one load (the host rewrites entries between launches) */
__device__ __forceinline__ MnPeerMem pm_load(const MnPeerMem *m) {
    MnPeerMem e;
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(e.pub), "=l"(e.base) : "l"(m) : "memory");
    return e;
}
/* the same read from the table in device memory */
__device__ u64 pm_peer_ptr(u64 table, u32 q, u32 slot, u32 pub, u64 off) {
    const MnPeerMem e = pm_load((const MnPeerMem *)table + (u64)q * MN_PM_SLOTS + slot);
    return pm_entry_ptr(e.pub, e.base, q, slot, pub, off);
}
/* one thread: block b's writes into peer p's memory are done (after the block's barrier) */
__device__ __forceinline__ void lane_done(const Ctx &x, u32 b, u32 p) {
    mk::signal(lane_ctr_at(x, p, MN_LANE_DONE_IN, b));
}
/* one thread: wait for peer p's lane_done of block b */
__device__ __forceinline__ void lane_wait_done(const Ctx &x, u32 b, u32 p) {
    mk::wait(lane_ctr(x, MN_LANE_DONE_IN, b, p), lane_ctr(x, MN_LANE_DONE_SEEN, b, p));
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

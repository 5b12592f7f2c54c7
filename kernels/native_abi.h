/*
 * native_abi.h - the C ABI of native algorithms: what the runtime passes to a native kernel
 * (MnArgs, by value) and the context it sets up once per communicator (MnContext, in device
 * memory). Compiles as C11 (runtime/algo fills these) and under NVRTC (kernels). Every field is
 * a fixed-width integer; sizes are checked with static asserts on both sides.
 *
 * The context is a scratch buffer on every rank, mapped by every peer, laid out as
 *   [0, off_pk_sent)      counters: inbound data and ack counters per (block, sender), which
 *                         peers increment (release, system scope), then this rank's own
 *                         consumed-so-far counts of both (persistent across launches)
 *   [off_pk_sent, off_stats) packet counters per (block, peer): messages sent, messages read
 *                         (this rank's own) and acknowledgements the peer added (persistent)
 *   [off_stats, off_pk)   this rank's counts of direct launches by path (native_direct.cuh)
 *   [off_lane, off_slots) where there are at most MN_DIRECT_MAX_RANKS ranks, after the packet
 *                         slots: the direct kernels' lanes (their own counters and record slots
 *                         for up to MN_DIRECT_BLOCKS blocks, which may be more than the slot
 *                         path's MN_MAX_BLOCKS)
 *   [off_pk, off_slots)   packet slots: per (block, sender, half) pk_slot_bytes of LL16
 *                         packets (8 data bytes and two copies of a 32-bit flag each), for
 *                         messages small enough to skip the data/ack round trips
 *   [off_slots, end)      slots: per (block b < max_blocks, sender s, half h < 2) slot_bytes
 *                         of data that rank s wrote into this rank's scratch for block b
 * The layout depends only on (nranks, max_blocks, scratch size), the same on every rank and for
 * every launch, so kernels with different block counts never overlap a slot still in use.
 */
#ifndef MSCCLRT_NATIVE_ABI_H
#define MSCCLRT_NATIVE_ABI_H

#include "plan_abi.h"

#ifdef __CUDACC_RTC__
typedef int mk_i32;
#else
typedef int32_t mk_i32;
#endif

#define MN_MAX_BLOCKS 32          /* blocks of one native launch (slots exist for each) */
#define MN_EXTRA_BYTES 256        /* caller-given extra arguments, copied into MnArgs */
#define MN_OP_PREMULSUM 5         /* MnArgs.op of a PreMulSum operator (after mscclrt_redop) */

/* Context of one communicator's native algorithms (device memory, written once at setup). */
typedef struct MnContext {
    mk_u32 rank, nranks;
    mk_u32 max_blocks;            /* MN_MAX_BLOCKS */
    mk_u32 net_block_kib;         /* send/recv entries to another node that travel through the
                                     Simple slots: one block per this many KiB of the entry, up to
                                     the group grid (MSCCLRT_NATIVE_NET_BLOCK_BYTES / 1024; each
                                     block keeps two pieces in flight) */
    mk_u64 scratch;               /* this rank's scratch base */
    mk_u64 scratch_bytes;
    mk_u64 slot_bytes;            /* bytes of one slot (a multiple of 256) */
    mk_u64 off_data_in;           /* u64[max_blocks][nranks]: data signals from (b, sender) */
    mk_u64 off_ack_in;            /* u64[max_blocks][nranks]: acks from (b, receiver) */
    mk_u64 off_data_seen;         /* u64[max_blocks][nranks]: data signals consumed (own) */
    mk_u64 off_ack_seen;          /* u64[max_blocks][nranks]: acks consumed (own); for a peer on
                                     another node, whose acks are not consumed one by one, the
                                     Simple messages sent to it since the start (mn::open_net) */
    mk_u64 off_slots;
    mk_u64 peer_scratch;          /* device address of u64[nranks]: every rank's scratch base as
                                     this rank maps it (its own entry is its own scratch; a
                                     rank on another node: a window, MN_WINDOW_TOP) */
    mk_u64 off_pk_sent;           /* u64[max_blocks][nranks]: packet messages sent to (b, peer) */
    mk_u64 off_pk_recv;           /* u64[max_blocks][nranks]: packet messages read from (b, peer) */
    mk_u64 off_pk_ack;            /* u64[max_blocks][nranks]: of this rank's packet messages to
                                     (b, peer), how many the peer has read (the peer adds) */
    mk_u64 off_pk;                /* packet slots */
    mk_u64 pk_slot_bytes;         /* bytes of packets in one packet slot (0: none) */
    mk_u64 pk_max_bytes;          /* messages of at most this many bytes per peer may travel as
                                     packets (MSCCLRT_NATIVE_PACKET_BYTES, read at setup) */
    mk_u64 off_stats;             /* u64[2]: direct launches that went direct, that took the slots */
    mk_u64 off_lane;              /* the direct kernels' lanes (0: none, more than
                                     MN_DIRECT_MAX_RANKS ranks): u64[MN_LANE_CTRS][MN_DIRECT_BLOCKS]
                                     [nranks] counters, then record slots [MN_DIRECT_BLOCKS]
                                     [sender][half] of MN_LANE_REC_BYTES */
    mk_u64 fifo;                  /* the port proxy's MkFifo (device address) when some peer is
                                     on another node; else 0 */
    mk_u64 pk_out;                /* where some peer is on another node and there are packet
                                     slots: the address of this rank's outgoing packets to such
                                     peers, [max_blocks][peer][half] of pk_slot_bytes, which its
                                     proxy sends as they are into the peer's packet slot: pinned
                                     host memory the kernel writes through its mapping (sent with
                                     no staging copy), else an area of the scratch; else 0 */
    mk_u64 probe;                 /* MSCCLRT_NATIVE_PROBE: the MnProbe ring the kernels compiled
                                     with MN_PROBE write their timestamps into; else 0 */
    mk_u64 net_pk_max;            /* send/recv entries to a peer on another node of at most this
                                     many bytes travel as packets, one block per packet message
                                     (MSCCLRT_NATIVE_NET_PACKET_BYTES, the same on every rank) */
    mk_u64 pk_in_host;            /* this rank's packet slots for messages from peers on other
                                     nodes, laid out as the scratch's packet area, in pinned host
                                     memory the network receives into and the kernel reads
                                     through its mapping (no staging copy, no device round trip:
                                     the flags in the packets say they arrived); 0: they are in
                                     the scratch's packet area */
    mk_u64 peer_pk;               /* device address of u64[nranks]: for a peer on another node the
                                     window of its pk_in_host (0: its scratch's packet area) */
    mk_u64 slot_in_host;          /* this rank's Simple slots for pieces from peers on other nodes,
                                     laid out as the scratch's slots ([max_blocks][sender][half]
                                     of slot_bytes), in pinned host memory the network receives
                                     into (MSCCLRT_NATIVE_NET_SLOT_HOST); 0: in the scratch */
    mk_u64 peer_slot;             /* device address of u64[nranks]: for a peer on another node the
                                     window of its slot_in_host (0: its scratch's slots) */
    mk_u64 slot_out;              /* this rank's outgoing Simple pieces to peers on other nodes,
                                     [max_blocks][peer][half] of slot_bytes in pinned host memory
                                     the kernel copies each piece into and the proxy sends from as
                                     it is (MSCCLRT_NATIVE_NET_SLOT_HOST); 0: the proxy sends from
                                     the source itself, through its staging copy */
    mk_u64 push_rs_min;           /* out-of-place reduce_scatter of 2 ranks of at least this many
                                     input bytes goes by stores on the direct path
                                     (MSCCLRT_NATIVE_PUSH_RS_BYTES, the same on every rank;
                                     0: never) */
    mk_u64 ctr_in_host;           /* this rank's data signals and acknowledgements from peers on
                                     other nodes, u64[2][max_blocks][nranks] (data, then acks),
                                     in pinned host memory the network's receive threads store
                                     into directly (with MSCCLRT_NATIVE_NET_SLOT_HOST); 0: the
                                     scratch's off_data_in / off_ack_in counters */
    mk_u64 peer_ctr;              /* device address of u64[nranks]: for a peer on another node the
                                     window of its ctr_in_host (0: its scratch's counters) */
    mk_u64 net_slot_bytes;        /* bytes of one slot of the Simple areas in pinned host memory
                                     (slot_in_host, slot_out, the peers' peer_slot windows), at
                                     least slot_bytes and the same on every rank: the pieces of a
                                     send/recv entry to or from a peer on another node whose
                                     incoming slots are there (MSCCLRT_NATIVE_NET_SLOT_BYTES) */
} MnContext;
MK_STATIC_ASSERT(sizeof(MnContext) == 256, "MnContext layout (host and device agree)");

/* Timestamps inside the native kernels (MSCCLRT_NATIVE_PROBE; kernels/native_probe.cuh): thread 0
 * of block 0 of each launch takes the next record of the ring (a launch count modulo
 * MN_PROBE_RECS) and writes the global timer (ns) at numbered points; t[0] says what ran
 * (MN_PROBE_KIND_* | collective << 8), t[1] is the kernel's start, a point not reached stays 0. */
#define MN_PROBE_POINTS 16
#define MN_PROBE_RECS 4096
#define MN_PROBE_KIND_COLL 1u     /* mscclrt_native_coll */
#define MN_PROBE_KIND_P2P 2u      /* the send/recv kernels */
#define MN_PROBE_KIND_DIRECT 3u   /* mscclrt_native_direct */
typedef struct MnProbeRec { mk_u64 t[MN_PROBE_POINTS]; } MnProbeRec;
typedef struct MnProbe {
    mk_u64 launches;              /* records taken so far (the next is launches % MN_PROBE_RECS) */
    mk_u64 pad;
    MnProbeRec rec[MN_PROBE_RECS];
} MnProbe;

/* A peer on another node: its peer_scratch entry is not a mapping but a window address of the
 * network transport (runtime/net/net.h: this value in the top byte), which only the port proxy
 * resolves. Send/recv to such a peer puts each piece into the peer's slot and raises its
 * counters through the proxy (MkFifo triggers); the counters it waits on are its own, which the
 * peer's proxy raises the same way. Small send/recv messages go as packets: written into this
 * rank's outgoing packet slot (pk_out) and copied by the proxy into the peer's packet slot,
 * the flags in them saying they arrived; the peer's acknowledgement comes back through its
 * proxy. Nothing else reaches a peer on another node. */
#define MN_WINDOW_TOP 0xfeu

/* One packet slot: 64 KiB of LL16 packets carry 32 KiB of data. A message whose share per block
 * fits one slot (MN_PK_DATA_BYTES) travels as packets: the flag in every packet says the data
 * arrived, so there is no data signal, and the receiver's acknowledgement is waited for only
 * when the sender reuses the half two messages later (usually long arrived), not at the end of
 * the kernel. The grid gives a block MN_PK_GRID_BYTES of a peer's message (small messages spread
 * over blocks as with 16 KiB slots); only messages beyond MN_MAX_BLOCKS such shares fill a slot
 * further, so 32 blocks carry up to 1 MiB per peer as packets. */
#define MN_PK_SLOT_BYTES 65536
#define MN_PK_DATA_BYTES (MN_PK_SLOT_BYTES / 2)
#define MN_PK_GRID_BYTES 8192

/* The collective a built-in native kernel runs (MnArgs.coll): mscclrt_coll's values. */
enum { MN_ALLREDUCE = 0, MN_ALLGATHER, MN_REDUCESCATTER, MN_BROADCAST, MN_REDUCE, MN_ALLTOALL,
       MN_GATHER, MN_SCATTER, MN_SENDRECV };

/* One point-to-point operation of a group (MN_SENDRECV): the k-th send to a peer pairs with the
 * peer's k-th receive from this rank, and both must have the same byte count. */
typedef struct MnP2p {
    mk_u64 ptr;                   /* device address of the data (send) or destination (recv) */
    mk_u64 bytes;
    mk_i32 peer;
    mk_i32 recv;                  /* 0 send, 1 receive */
} MnP2p;
MK_STATIC_ASSERT(sizeof(MnP2p) == 24, "MnP2p layout");
#define MN_P2P_MAX 128            /* operations of one group on one rank, one launch */

/* The by-value kernel argument. */
typedef struct MnArgs {
    mk_u64 ctx;                   /* const MnContext * (device) */
    mk_u64 in, out;               /* the user's send and receive buffers (device) */
    mk_u64 count;                 /* elements, as the collective call counts them */
    mk_u64 in_bytes, out_bytes;   /* this rank's message sizes */
    mk_u32 coll;                  /* MN_* (the collective) */
    mk_u32 dtype;                 /* mscclrt_dtype */
    mk_u32 op;                    /* mscclrt_redop, or MN_OP_PREMULSUM */
    mk_i32 root;                  /* broadcast, reduce, gather, scatter; else -1 */
    mk_u64 scalar;                /* PreMulSum: device address of the scalar (dtype); else 0 */
    mk_u32 elem_bytes;            /* size of one element of dtype */
    mk_u32 np2p;                  /* MN_SENDRECV: entries of the MnP2pList argument */
    mk_u64 extra_bytes;
    unsigned char extra[MN_EXTRA_BYTES]; /* caller-given arguments (mscclrt_algo_run) */
} MnArgs;
MK_STATIC_ASSERT(sizeof(MnArgs) == 88 + MN_EXTRA_BYTES, "MnArgs layout");

/* ---- the direct (zero-copy) form of the built-in collectives --------------------------------
 * Peers read and write a rank's own buffers instead of staging through scratch. The runtime
 * shares the allocations behind users' buffers lazily (runtime/peermem): each rank announces
 * an allocation once, with a publication number (1, 2, ... per rank), and every peer maps it
 * when it sees the announcement, into a table of MN_PM_SLOTS entries per peer in device
 * memory the kernels read (MnPeerMem). A launch cannot know what its peers have mapped, so the kernel
 * decides: every block first sends its record (MnDirectRec: where its buffers are and how far
 * it has mapped each peer's announcements) to the same block of every peer, and all blocks of
 * all ranks, reading the same records, take the same path: direct when every rank has mapped
 * every buffer the collective touches, else the slot path in the same launch. */
#define MN_DIRECT_MAX_RANKS 8     /* ranks of a communicator that may go direct */
#define MN_PM_SLOTS 64            /* allocations one rank may share at once */
#define MN_DIRECT_INPLACE 1u      /* MnDirectRec.flags: sendbuf and recvbuf of this rank are one
                                     buffer or overlap */
#define MN_DIRECT_SAME 2u         /* MnDirectRec.flags: sendbuf == recvbuf (with INPLACE) */
#define MN_DIRECT_BLOCKS 128      /* blocks (lanes) of a direct launch at most */
#define MN_LANE_REC_BYTES 256     /* a record as LL16 packets, in one half of a lane's slot */
/* the lanes' counter arrays, u64[MN_DIRECT_BLOCKS][nranks] each, in this order (PUSH_IN: chunks
 * a peer's block stored into this rank's output, PUSH_SEEN: of those, how many this rank's
 * reducing block consumed; native_push.cuh) */
enum { MN_LANE_REC_SENT = 0, MN_LANE_REC_RECV, MN_LANE_REC_ACK, MN_LANE_DONE_IN, MN_LANE_DONE_SEEN,
       MN_LANE_PUSH_IN, MN_LANE_PUSH_SEEN, MN_LANE_CTRS };

/* One mapped peer allocation (the importer's table, [nranks][MN_PM_SLOTS]). */
typedef struct MnPeerMem {
    mk_u64 pub;                   /* the announcement's publication number; 0: empty */
    mk_u64 base;                  /* the allocation's base as this rank maps it */
} MnPeerMem;
MK_STATIC_ASSERT(sizeof(MnPeerMem) == 16, "MnPeerMem layout");

/* What a rank tells its peers at the start of a direct launch. */
typedef struct MnDirectRec {
    mk_u32 spub, sslot;           /* sendbuf's allocation: publication number (0: not shared), slot */
    mk_u64 soff;                  /* sendbuf - that allocation's base */
    mk_u32 rpub, rslot;           /* the same for recvbuf */
    mk_u64 roff;
    mk_u32 flags;                 /* MN_DIRECT_* */
    mk_u32 pad;
    mk_u32 upto[MN_DIRECT_MAX_RANKS]; /* peer q's announcements this rank has mapped: 1..upto[q]
                                     (0: none, or mapping q's memory failed) */
} MnDirectRec;
MK_STATIC_ASSERT(sizeof(MnDirectRec) == 40 + 4 * MN_DIRECT_MAX_RANKS, "MnDirectRec layout");
MK_STATIC_ASSERT(2 * sizeof(MnDirectRec) <= MN_LANE_REC_BYTES, "a record's packets fit a lane slot half");

/* The direct kernel's second argument (by value). */
typedef struct MnDirect {
    mk_u64 table;                 /* device address of MnPeerMem[nranks][MN_PM_SLOTS] */
    MnDirectRec rec;              /* this rank's record */
} MnDirect;

/* The built-in send/recv kernel's third argument: the direct form of large transfers between
 * the ranks of one node. A pair of entries (a send and the peer's matching receive) goes direct
 * when the receiver's buffer is shared and the sender has mapped it; both sides learn it from
 * records exchanged through the lanes, so they decide alike. */
#define MN_P2P_DIRECT 16          /* receive entries of a group that may be written directly */
/* MnP2pDirect.flags: a block's packet entries take their flags in one pass before any is sent
 * and acknowledge with relaxed signals after all are read, as the collectives' packet form
 * does, instead of two block-wide counter steps and a release signal per entry
 * (MSCCLRT_NATIVE_P2P_PK_BATCH; a packet entry is alone in its peer and direction, so no
 * message waits for an acknowledgement of its own launch) */
#define MN_P2P_PK_BATCH 1u
/* MnP2pDirect.flags bits 8-15: the blocks an entry that may go direct is cut over for its
 * direct copy (MSCCLRT_NATIVE_P2P_DIRECT_BLOCKS, up to MN_DIRECT_BLOCKS; 0: by size, below);
 * its slot fallback keeps the group grid */
#define MN_P2P_DIRECT_BLOCKS_SHIFT 8
/* bits 16-23, where bits 8-15 are 0: the blocks of such an entry of MN_P2P_WIDE_BYTES or more
 * (0: its own, the group grid, at every size). nccl-tests sendrecv -G 1 on 2 x H200: 64 MiB,
 * 256 MiB, 1 GiB took 206.6, 777.9, 3066 us on the group grid of 32 blocks, 199.9, 747.4,
 * 2945 on 128 (NCCL 203.6, 755.0, 2940.6); smaller sizes were not measured */
#define MN_P2P_WIDE_SHIFT 16
#define MN_P2P_WIDE_BYTES (64ull << 20)
#define MN_P2P_WIDE_BLOCKS 128
typedef struct MnP2pRecv {
    mk_u32 pub, slot;             /* the receive buffer's allocation (pub 0: not shared) */
    mk_u64 off;
} MnP2pRecv;
typedef struct MnP2pDirect {
    mk_u64 table;                 /* device address of this rank's MnPeerMem table */
    mk_u64 min_bytes;             /* entries of at least this many bytes may go direct (the same
                                     on every rank; UINT64_MAX: never) */
    mk_u32 full_blocks;           /* the group grid an entry is cut over at most (the same on
                                     every rank); each entry's own: mn_p2p_entry_blocks */
    mk_u32 flags;                 /* MN_P2P_PK_BATCH (the same on every rank) */
    mk_u32 upto[MN_DIRECT_MAX_RANKS]; /* as MnDirectRec.upto */
    MnP2pRecv recv[MN_P2P_DIRECT];/* the group's first MN_P2P_DIRECT receive entries, in order */
} MnP2pDirect;
MK_STATIC_ASSERT(sizeof(MnP2pDirect) == 56 + 16 * MN_P2P_DIRECT, "MnP2pDirect layout");

#ifdef __CUDACC_RTC__
#define MN_HD __device__ __forceinline__
#else
#define MN_HD static inline
#endif
/* The blocks a packet message of `bytes` per peer is cut over: one per MN_PK_GRID_BYTES (or
 * per slot's data where that is less), 1 to cap (the collectives' default grid and send/recv
 * entries alike; the caller checks that cap blocks' shares fit a slot's data) */
MN_HD mk_u32 mn_pk_blocks(mk_u64 bytes, mk_u64 pk_data, mk_u32 cap) {
    const mk_u64 g = pk_data < MN_PK_GRID_BYTES ? pk_data : MN_PK_GRID_BYTES;
    const mk_u64 k = (bytes + g - 1) / g;
    return k < 1 ? 1u : k < cap ? (mk_u32)k : cap;
}
/* The blocks that carry one send/recv entry of `bytes` (blocks 0 .. k-1 of the launch), from
 * values both sides of a pair share: the entry's size, whether the peer is on another node, the
 * context's packet data per message and packet limit (for a peer on another node its own,
 * MnContext.net_pk_max), the bytes per block of a Simple entry to another node (net_block,
 * MnContext.net_block_kib; 0: 1 MiB) and the group grid `full`. Within a node a message that
 * travels as packets takes one block per packet message, as the collectives' default grid does
 * (a 1 KiB message cut over 32 blocks of 32 bytes each took 12.8 us under nccl-tests -G 1 on
 * 2 x H100, where all_reduce's one block took 4.8); larger ones the whole grid. To another node
 * packets fill each block's message (every message there is a proxy trigger and a network
 * message of its own, so fewer and fuller); larger entries one block per net_block bytes: each
 * block keeps two pieces in flight, and each piece is a few proxy triggers that one host thread
 * performs in turn. A launch's grid is the largest of its entries' (the host computes it with
 * this same function). */
MN_HD mk_u32 mn_p2p_entry_blocks(mk_u64 bytes, int remote, mk_u64 pk_data, mk_u64 pk_max,
                                 mk_u64 net_block, mk_u32 full) {
    if (full < 1) full = 1;
    if (remote) {
        if (pk_data && bytes <= pk_max && bytes <= (mk_u64)full * pk_data) {
            const mk_u64 k = (bytes + pk_data - 1) / pk_data;
            return k < 1 ? 1u : (mk_u32)k;
        }
        const mk_u64 w = bytes / (net_block ? net_block : (mk_u64)1 << 20);
        return w < 1 ? 1u : w < full ? (mk_u32)w : full;
    }
    if (pk_data && bytes <= pk_max && bytes <= (mk_u64)full * pk_data)
        return mn_pk_blocks(bytes, pk_data, full);
    return full;
}

/* The blocks of an entry of `bytes` that may go direct (flags: MnP2pDirect.flags; own: the
 * entry's mn_p2p_entry_blocks), the same on both sides of the pair */
MN_HD mk_u32 mn_p2p_direct_blocks(mk_u32 flags, mk_u32 own, mk_u64 bytes) {
    const mk_u32 d = (flags >> MN_P2P_DIRECT_BLOCKS_SHIFT) & 0xffu;
    const mk_u32 w = (flags >> MN_P2P_WIDE_SHIFT) & 0xffu;
    return d ? d : w && bytes >= MN_P2P_WIDE_BYTES ? w : own;
}

/* A group's MnP2pDirect.flags (the host's; the same on every rank): batch
 * (MSCCLRT_NATIVE_P2P_PK_BATCH); where entries may go direct, their blocks: `want` for every
 * such entry (MSCCLRT_NATIVE_P2P_DIRECT_BLOCKS; 0: the wide grid by size), at most `cap` (the
 * blocks every rank sharing a process and GPU can keep resident), the wide grid only where it
 * has more blocks than the group grid `group` (never fewer for the largest entries) */
MN_HD mk_u32 mn_p2p_flags(int batch, int direct, mk_u32 want, mk_u32 cap, mk_u32 group) {
    const mk_u32 f = batch ? MN_P2P_PK_BATCH : 0u;
    if (!direct) return f;
    if (want) return f | (want < cap ? want : cap) << MN_P2P_DIRECT_BLOCKS_SHIFT;
    const mk_u32 w = MN_P2P_WIDE_BLOCKS < cap ? MN_P2P_WIDE_BLOCKS : cap;
    return w > group ? f | w << MN_P2P_WIDE_SHIFT : f;
}

/* The built-in send/recv kernel's second argument (by value; with MnArgs it stays inside the
 * 4 KiB of kernel parameters). */
typedef struct MnP2pList { MnP2p v[MN_P2P_MAX]; } MnP2pList;
/* The first MN_P2P_SMALL entries of an MnP2pList: the argument of mscclrt_native_p2p_small, the
 * kernel of groups that small (the launch passes the same list; the kernel reads only these). */
#define MN_P2P_SMALL 16
typedef struct MnP2pListSmall { MnP2p v[MN_P2P_SMALL]; } MnP2pListSmall;
MK_STATIC_ASSERT(sizeof(MnP2pListSmall) == MN_P2P_SMALL * sizeof(MnP2p) && MN_P2P_SMALL <= MN_P2P_MAX,
                 "MnP2pListSmall is a prefix of MnP2pList");

#endif

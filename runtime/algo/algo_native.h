/*
 * algo_native.h - native algorithms' launches (algo_native.c): a launch is prepared (context,
 * kernel compiled or found, arguments) and then issued, so that group calls can prepare
 * everything first and launch in call order (exec_group.c), as plan-based calls do.
 */
#ifndef MSCCLRT_ALGO_NATIVE_H
#define MSCCLRT_ALGO_NATIVE_H

#include "algo/algo.h"
#include "cuda/cuda_driver.h"
#include "native_abi.h"

typedef struct NativeLaunch {
    mscclrt_comm *comm;
    CuFunction fn;
    int blocks, threads;
    void *stream;
    bool p2p;                      /* the send/recv kernel: list is its second argument */
    bool direct;                   /* the direct kernel: dargs is its second argument */
    bool own;                      /* a built-in kernel (begins with mk::launch_prologue), not
                                      a user's native source: exec_launch_kernel's own */
    MnArgs args;
    MnDirect dargs;                /* (before list: group calls copy up to list) */
    MnP2pList list;
    MnP2pDirect p2pd;              /* the send/recv kernel's third argument */
    int p2p_nrecv;                 /* receive entries so far (p2pd.recv's index) */
} NativeLaunch;

/* Sets up the native context of every comm in cs: n comms of one single-process group
 * (mscclrt_comm_init_all), or n = 1 for a comm joined through the bootstrap. Collective.
 * A no-op when MSCCLRT_NATIVE_SCRATCH_BYTES is 0. */
mscclrt_result algo_native_init(mscclrt_comm **cs, int n);
void algo_native_free(mscclrt_comm *c);
/* Bytes a rank exchanges with each peer in one call of req (what the kernels cut into shares;
 * the one-hop allreduce sends its whole input to every peer). */
uint64_t native_peer_bytes(const mscclrt_request *req, int nranks);
/* blocks/threads 0: the defaults for a message of `bytes` exchanging `peer` bytes with each
 * peer (deterministic in them, so every rank picks the same grid): while peer is at most pk_max
 * (MSCCLRT_NATIVE_PACKET_BYTES), one block per pk_data bytes (a packet slot's data; 0: no
 * packet slots), so the kernels send packets; else by message size. cap: the most blocks
 * (exec_native_block_cap: ranks sharing a process and GPU must all be resident at once);
 * shared: such ranks exist (fewer blocks for mid sizes). */
void native_default_grid(uint64_t bytes, uint64_t peer, uint64_t pk_data, uint64_t pk_max,
                         int cap, bool shared, int *blocks, int *threads);
/* The blocks of a direct launch of coll moving `bytes` (message bytes) on nranks ranks: param
 * (MSCCLRT_NATIVE_DIRECT_BLOCKS) when it is not 0, else 64; for alltoall 80 from 64 MiB and
 * MN_DIRECT_BLOCKS from 512 MiB, for reduce_scatter of 2 ranks from push_rs bytes
 * (MSCCLRT_NATIVE_PUSH_RS_BYTES, 0: never) 96 (measured); at most cap
 * (exec_native_block_cap), at least 1. */
int native_direct_grid(mscclrt_coll coll, uint64_t bytes, int nranks, uint64_t push_rs, int param,
                       int cap);
/* Bytes of one packet slot for n ranks and a scratch of `scratch` bytes (0: none). */
uint64_t native_pk_slot_bytes(int n, uint64_t scratch);
/* Slot bytes of the native layout for n ranks and a scratch of `scratch` bytes (0: too small);
 * net: some peer is on another node (outgoing packet slots too); *off_slots (may be NULL) gets
 * where the slots start. */
uint64_t native_slot_bytes(int n, uint64_t scratch, bool net, uint64_t *off_slots);
/* Slot bytes of the Simple areas in pinned host memory for peers on other nodes
 * (MnContext.net_slot_bytes): `want` (MSCCLRT_NATIVE_NET_SLOT_BYTES; 0: none) rounded down to
 * 256, reduced so that an area of MN_MAX_BLOCKS x n x 2 slots fits NATIVE_NET_HOST_MAX, and
 * never below the scratch's slot `slot` (the collectives' pieces use that one). */
uint64_t native_net_slot_bytes(int n, uint64_t slot, uint64_t want);
mscclrt_result algo_native_prepare(mscclrt_comm *c, const mscclrt_algo *algo,
                                   const mscclrt_request *req, int blocks, int threads,
                                   const void *extra, size_t extra_bytes, NativeLaunch *l);
/* The per-call part of a prepared launch: l's kernel and grid stay, its arguments are req's
 * (the hot path of a repeated request). */
void algo_native_fill(mscclrt_comm *c, const mscclrt_request *req, const void *extra,
                      size_t extra_bytes, NativeLaunch *l);
mscclrt_result algo_native_launch(NativeLaunch *l);
/* Whether c's native kernels reach peer: a rank of this node (mapped) or, on a communicator
 * that spans nodes, one of another node through the port proxy (false without a context). */
bool algo_native_reaches(const mscclrt_comm *c, int peer);
/* Whether it reaches every rank (false without a context). */
bool algo_native_reaches_all(const mscclrt_comm *c);
/* Whether the built-in collective of q can run on c across nodes (its slot path, every piece to
 * a rank of another node through the port proxy): c spans nodes, its native context reaches
 * every rank, and the operator is not PreMulSum. It is algo_coll.c's fallback for what no
 * algorithm serves there, never a candidate: it is slower than the multi-node programs. */
bool algo_native_net_serves(const mscclrt_comm *c, const mscclrt_request *q);
/* Whether q, which algo_native_net_serves, goes to that built-in collective before any plan is
 * considered: a collective of at most `limit` bytes (MSCCLRT_NATIVE_NET_BYTES; 0: never), or
 * with limit -1 the measured rule (NATIVE_NET_REDUCE_BYTES). The same on every rank. */
bool algo_native_net_first(const mscclrt_request *q, long long limit);
/* The grid of the built-in collective across nodes for a message of `bytes`: a block per
 * MSCCLRT_NATIVE_NET_BLOCK_BYTES (every piece costs proxy triggers that one host thread performs
 * in turn, and each block keeps two pieces in flight), 1 to MN_MAX_BLOCKS; the same on every
 * rank (the size is the call's, the parameter the same everywhere). */
int algo_native_net_blocks(const mscclrt_comm *c, uint64_t bytes);
/* That built-in algorithm (owned by c's native context; NULL without one). */
const mscclrt_algo *algo_native_net_builtin(mscclrt_comm *c, mscclrt_coll coll);
/* How many of this rank's direct launches went direct and how many took the slots (0 and 0
 * without a native context); reads device memory, so it waits for the device. */
mscclrt_result algo_native_direct_stats(mscclrt_comm *c, uint64_t *direct, uint64_t *slots);
/* Logs those counts (INFO, EXEC) when the comm has a direct path; at destroy, before the
 * executor's contexts (the native scratch holds them) go. */
void algo_native_report(mscclrt_comm *c);
/* The direct form of a send/recv group (kernels/native_builtin.cuh's sendrecv): begin when
 * its launch is made (the size threshold, the same on every rank), recv for each receive entry
 * in order (shares its buffer's allocation with the peers), end just before the launch (what
 * this rank has mapped of its peers'). */
void algo_native_p2p_begin(mscclrt_comm *c, NativeLaunch *l);
void algo_native_p2p_recv(mscclrt_comm *c, NativeLaunch *l, int peer, void *buf, uint64_t bytes);
void algo_native_p2p_end(mscclrt_comm *c, NativeLaunch *l);
/* The source the built-in algorithms compile (for CI's NVRTC checks). */
const char *algo_native_builtin_source(void);
const char *algo_native_direct_source(void);   /* the direct kernel's module */
/* A native module's whole source (malloc'd; NULL: out of memory): body after the definitions of
 * the timestamp probe (probe), of MN_NET 0 where no rank of the communicator is on another node
 * (!net), of the dtype dt and operator op (-1 and 0: the byte-moving module) and of its C type T */
char *native_module_source(const char *body, bool probe, bool net, int dt, int op, const char *T);

#endif

/*
 * plan_abi.h - the plain-C structures a generated kernel reads: its by-value arguments (MkArgs)
 * and the per-context device state block (MkState layout, described by offsets the code
 * generator computes). Compiles as C11 (runtime/exec fills these) and under NVRTC (kernels).
 * Every field is a fixed-width integer; sizes are checked with static asserts on both sides.
 */
#ifndef MSCCLRT_PLAN_ABI_H
#define MSCCLRT_PLAN_ABI_H

#ifdef __CUDACC_RTC__
typedef unsigned long long mk_u64;
typedef unsigned int mk_u32;
#define MK_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#include <stdint.h>
typedef uint64_t mk_u64;
typedef uint32_t mk_u32;
#define MK_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

/* First kernel parameter (by value). Pointers are device addresses. */
typedef struct MkArgs {
    mk_u64 in;            /* user send buffer ("i") */
    mk_u64 out;           /* user receive buffer ("o") */
    mk_u64 scratch;       /* this rank's scratch base ("s"), before the double-buffer shift */
    mk_u64 chunk;         /* bytes of one chunk (spec §3.3), same for i, o and s */
    mk_u64 scratch_half;  /* double-buffered scratch: offset of the second half, else 0 */
    mk_u64 state;         /* the context's MkState block (flags, counters, barriers) */
    mk_u64 out_bytes;     /* output message bytes (the avg operator's final division) */
    mk_u32 nranks;        /* ranks of the group (avg divisor) */
    mk_u32 rank;          /* this rank (diagnostics) */
    mk_u64 in_off;        /* sendbuf - its allocation base; added to peers' "i" bases */
    mk_u64 out_off;       /* recvbuf - its allocation base; added to peers' "o" bases */
} MkArgs;
MK_STATIC_ASSERT(sizeof(MkArgs) == 80, "MkArgs must stay 80 bytes (host and device agree)");

/* Second kernel parameter: a per-rank table of 64-bit device addresses, sized per plan and
 * passed by value as `struct { mk_u64 v[n]; }`. Its sections, in order (counts per rank):
 *   memory remote buffers (per-type remote index)   -> the peer's allocation base ("i", "o")
 *                                                      or scratch base ("s")
 *   port remote buffers (per-type remote index)     -> the same
 *   memory channels (GPU-level index)               -> the peer's inbound counter (u64)
 *   port channels (GPU-level index)                 -> the peer's inbound counter (u64)
 *   switch channels (GPU-level index)               -> the multicast pointer
 *   [one entry when port channels run through the proxy] -> this rank's MkFifo
 * MK_TAB_MAX bounds it so the launch stays inside the 4 KiB parameter space. */
#define MK_TAB_MAX 480

/* Grid barrier object in MkState (spec §5.2 barrier; state persists across launches). */
typedef struct MkBarrier {
    mk_u32 count;         /* arrivals of the current generation */
    mk_u32 gen;           /* generation, bumped (release) by the last arrival */
} MkBarrier;
MK_STATIC_ASSERT(sizeof(MkBarrier) == 8, "MkBarrier layout");

/* MkState block of one context, laid out by cg_state_layout():
 *   mk_u32 tb_flag[ntb]           launches completed per thread block (LL flag = value + 1)
 *   mk_u64 inbound[nslots]        counters the peers' signals increment
 *   mk_u64 expected[nchan]        waits consumed per channel (memory, then port)
 *   int    sem[nsems]             device semaphores (initialised to init_value)
 *   MkBarrier bar[MK_NBARRIERS]   plan barriers 0..15, then the avg operator's grid barrier */
#define MK_NBARRIERS 17

/* ---- port channels: the FIFO between a rank's kernels and its host proxy thread -------------
 * Kernels push triggers; the proxy (runtime/proxy) takes them in slot order and performs them on
 * its own stream with the copy engine: data copies (cuMemcpyAsync to the peer's mapped memory),
 * signals (a stream write of the channel's next count into the peer's inbound counter, ordered
 * after the copies before it) and flush marks (a stream write of the slot number into `flushed`,
 * so a kernel waiting for it knows every earlier trigger has completed). A slot is free again
 * once the proxy has taken it (tail_host). */
#define MK_FIFO_SLOTS 512u              /* power of two */
enum { MK_TRIG_PUT = 1, MK_TRIG_SIGNAL = 2, MK_TRIG_FLUSH = 3 };

typedef struct MkTrigger {
    mk_u64 dst;           /* put: peer address; signal: the peer's inbound counter */
    mk_u64 src;           /* put: local address */
    mk_u64 bytes;         /* put: length */
    mk_u32 kind;          /* MK_TRIG_* */
    mk_u32 seq;           /* written last: (slot + 1) mod 2^32 marks the trigger valid */
} MkTrigger;
MK_STATIC_ASSERT(sizeof(MkTrigger) == 32, "MkTrigger is shared by host and device");

/* Device-resident descriptor of one rank's FIFO; the kernel table holds its address. */
typedef struct MkFifo {
    mk_u64 ring;          /* MkTrigger[MK_FIFO_SLOTS], host-mapped memory (device address) */
    mk_u64 tail_host;     /* mk_u64, host-mapped: triggers the proxy has taken */
    mk_u64 head;          /* mk_u64, device: slots reserved by kernels */
    mk_u64 tail_cache;    /* mk_u64, device: last tail_host value a kernel read */
    mk_u64 flushed;       /* mk_u64, device: highest flush mark the proxy's stream completed */
} MkFifo;
MK_STATIC_ASSERT(sizeof(MkFifo) == 40, "MkFifo is shared by host and device");

#endif

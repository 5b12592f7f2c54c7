/*
 * exec.h - the executor's door for the rooms above it (runtime/comm, runtime/algo, the commands):
 * GPU communicators' device state, contexts per (plan, send, recv) holding scratch, the state
 * block and the peer table; per-size kernel arguments; kernels per (plan, dtype, op, packet)
 * from runtime/codegen; the steps of a communicator's life; the one module loader and launch
 * path; contexts for native algorithms. The public calls mscclrt_group_* and mscclrt_execute*
 * live in exec_group.c and exec.c; exec_internal.h is what the executor's own files share.
 *
 * Hot path: a call whose (plan, buffers, sizes, dtype, op, packet) equals the comm's previous
 * one costs a few compares and one cuLaunchKernel. The first call for new buffers performs
 * the collective setup (single process: the last rank to arrive sets up every rank).
 */
#ifndef MSCCLRT_EXEC_H
#define MSCCLRT_EXEC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "mscclrt.h"
#include "plan.h"
#include "plan_abi.h"
#include "codegen/codegen.h"
#include "cuda/cuda_driver.h"
#include "proxy/proxy.h"

#define EXEC_COMM_MAGIC 0x4d4d4f43u /* "COMM" */

typedef struct ExecKernel {
    const Plan *plan;              /* borrowed key */
    int dtype, op, packet;         /* key (normalised: -1 when the kernel does not depend) */
    CuModule module;               /* owned */
    CuFunction fn;
    struct ExecKernel *next;
} ExecKernel;

typedef struct ExecSize {
    uint64_t in_bytes, out_bytes;  /* key */
    uint64_t in_off, out_off;      /* key: the user pointers' offsets in their allocations */
    MkArgs args;                   /* first kernel parameter for this size */
} ExecSize;

#define EXEC_SIZES 8

typedef struct ExecCtx {
    const Plan *plan;              /* borrowed key (the comm's plan handle's model) */
    bool keyed;                    /* the plan reaches peers' input/output buffers, so the
                                      context belongs to these buffers (exec_plan_keys_buffers);
                                      otherwise it serves any buffers and send/recv are NULL */
    const void *send, *recv;       /* key: sendbuf and recvbuf of the call that set it up */
    size_t send_range, recv_range; /* key: bytes from them to their allocations' ends */
    bool ready;                    /* false while its collective setup is pending */
    CgLayout layout;
    CuDevPtr scratch;              /* owned; zeroed at setup */
    size_t scratch_bytes, scratch_half;
    CuDevPtr state;                /* owned; MkState block */
    mk_u64 tab[MK_TAB_MAX];        /* second kernel parameter (layout.ntab entries used) */
    ExecSize sizes[EXEC_SIZES];    /* most recently used first */
    int nsizes;
    Proxy *proxy;                  /* borrowed: the comm's proxy holding our port counters */
    Net *net;                      /* borrowed: the comm's Net once this context registered
                                      buffers or opened windows there (net_release on free) */
    struct ExecCtx *next;
    struct NvlsCtx *nvls;          /* owned; switch channels' multicast state (transport/nvls.c) */
    bool scratch_vmm;              /* scratch is nvls's cuMem allocation (freed by nvls_ctx_free) */
    bool scratch_host;             /* scratch is pinned host memory the GPU maps (exec_mp.c:
                                      only the network reaches it; cuMemFreeHost) */
    uint64_t span;                 /* !keyed: the message bytes the scratch serves (it grows) */
    struct XportIpc *xport;        /* borrowed: the comm's IPC transport that mapped imports[] */
    CuDevPtr *imports;             /* owned, [nimports]: peers' memory this context mapped; each
                                      closed on free, so a peer's freed allocation is never kept
                                      open (a later open of its reuse would fail) */
    int nimports;
} ExecCtx;

typedef struct ExecClique ExecClique;
typedef struct Boot Boot;
typedef struct XportIpc XportIpc;

struct mscclrt_comm {
    uint32_t magic;                /* EXEC_COMM_MAGIC while live */
    int rank, nranks, device;
    CuDevice dev;
    CuContext ctx;                 /* the device's primary context (retained) */
    int arch;                      /* e.g. 90 */
    ExecClique *clique;            /* shared by the comms of one init_all; NULL for init_rank */
    Boot *boot;                    /* owned; init_rank comms: the group's bootstrap */
    XportIpc *xport;               /* owned; init_rank comms: CUDA IPC transport */
    Proxy *proxy;                  /* owned; started by the first context with port channels */
    Net *net;                      /* owned; init_rank comms spanning nodes: port channels to
                                      ranks on other nodes (runtime/net) */
    struct AlgoComm *algo;         /* owned; the algorithm layer's state (runtime/algo/algo.h),
                                      made with the comm's native context; freed by algo_comm_free */
    volatile uint32_t *abort_host; /* owned (cuMemHostAlloc, mapped): non-zero once aborted */
    CuDevPtr abort_dev;            /* its device address: every module's mscclrt_abort_word */
    bool aborted;                  /* mscclrt_comm_abort ran: release without peers */
    bool revoked;                  /* mscclrt_comm_revoke ran: new calls fail */
    bool shares_context;           /* another rank of this group is in this process on this
                                      device (one CUDA context) */
    bool group_shares_context;     /* some two ranks of the group share a process and a device:
                                      kernel loads are then collective on every rank (a barrier
                                      that only the sharing ranks joined hung the others) */
    int context_share_max;         /* the most ranks of the group in one process on one device
                                      (their kernels must all be resident at once), the same on
                                      every rank; 0 until known (exec_context_share_max) */
    int sm_min;                    /* the fewest multiprocessors of any rank's GPU (0: unknown),
                                      the same on every rank */
    bool gpu_shared;               /* joined through the bootstrap: another rank of the group
                                      runs on this GPU (any process; exec_mp.c) */
    int pdl;                       /* programmatic dependent launch of own kernels: 1 on, -1
                                      off, 0 not decided yet (exec_pdl.c) */
    uint64_t setup_seq;            /* collective setups requested so far */
    ExecKernel *kernels;           /* owned list */
    ExecCtx *ctxs;                 /* owned list */
    ExecCtx *retired;              /* owned list: contexts replaced by a grown one, freed once
                                      the device is synchronised anyway (kernels may still use
                                      them, and a sync here could wait on a rank sharing the GPU) */
    /* the previous call: the hot path compares against it */
    struct {
        const Plan *plan;
        const void *send, *recv;
        uint64_t in_bytes, out_bytes;
        int dtype, op, packet;
        const ExecCtx *ctx;
        const MkArgs *args;
        CuFunction fn;
    } hot;
};

/* Drops (and frees, after synchronising the device) every context of c whose sendbuf or recvbuf
 * lies in the allocation that contains ptr. Every rank of the group must drop the same contexts before the buffers are
 * reused, since the next call for them is a collective setup again. */
void exec_drop_contexts(mscclrt_comm *c, const void *ptr);
/* Drops (after synchronising the device) every context of c that runs plan p: the next call of
 * p sets up again, collectively (mscclrt_algo_clean_cached_contexts, on every rank). */
void exec_drop_plan_contexts(mscclrt_comm *c, const Plan *p);

/* Whether some rank of p reads or writes a peer's input or output buffer (remote buffers or
 * switch channels of type i/o). Only such plans tie a context to the call's buffers; a plan that
 * reaches peers' scratch alone gets one context for any buffers (no exchange per buffer), as
 * NCCL-style callers with unrelated allocations on every rank need. */
bool exec_plan_keys_buffers(const Plan *p);
/* Scratch of a context for plans that are not keyed by buffers and have no bounded
 * max_message_size: sized for messages up to this many bytes (spec §3.5's PREDEFINED). */
#define EXEC_UNKEYED_SCRATCH_SPAN ((uint64_t)1 << 26)
/* Shared by the single- and multi-process setups (exec_ctx.c, exec_setup.c); send/recv are
 * ignored when !keyed. */
/* Whether a multi-process context's scratch of scratch_bytes goes to pinned host memory the GPU
 * maps: only the network reaches it (every other of the nranks ranks is one of the nremote
 * on other nodes, so no peer maps it through IPC), the network stages device memory through
 * host memory anyway (net_stages: socket backend), the plan lets it (not the native context,
 * whose counters take atomics: Plan.scratch_device; no switch channels) and it is at most
 * `most` bytes (MSCCLRT_SOCKET_HOST_SCRATCH). The kernels then write what goes to other nodes
 * straight into what the transport sends and read what it received over their mapping: no
 * staging copy and no copy-engine round trip on either side (NCCL's network buffers without
 * GPUDirect RDMA). */
bool exec_scratch_host(const Plan *p, uint64_t scratch_bytes, bool net_stages, int nremote,
                       int nranks, uint64_t most);
/* Zeroed pinned host memory of `bytes` the GPU maps at the same address (cuMemHostAlloc with
 * DEVICEMAP): the network sends from and receives into the address the kernels name, so the
 * two must agree (unified addressing). Its address (free with cuMemFreeHost), or 0 with why
 * saying what failed. */
CuDevPtr exec_host_mapped_alloc(size_t bytes, char *why, size_t why_len);
mscclrt_result exec_scratch_size(const Plan *p, int rank, bool keyed, const void *send,
                                 const void *recv, uint64_t span, size_t *bytes);
/* 0 when a context whose ranks agreed on `have` scratch bytes serves a call of in / out bytes
 * on every rank (plan_geom's need of each); else the span (a power of two, at least twice
 * `span`) for which exec_scratch_bytes gives every rank what it needs. Every rank computes the
 * same answer, so all set up the grown context together. */
uint64_t exec_scratch_grow_span(const Plan *p, uint64_t in, uint64_t out, uint64_t span,
                                uint64_t have);
/* Its arithmetic (no device): scratch bytes of rank's context when its buffers' allocations
 * leave in_room / out_room bytes (both capped by max_message_size; for an unkeyed context pass
 * EXEC_UNKEYED_SCRATCH_SPAN); with double_scratch two equal halves of a multiple of 256;
 * reuse_resources plans with scratch get spec §3.5's fixed 64 MiB. */
uint64_t exec_scratch_bytes(const Plan *p, int rank, uint64_t in_room, uint64_t out_room);
mscclrt_result exec_ctx_alloc(mscclrt_comm *c, ExecCtx *x);  /* x->scratch_bytes preset */
void exec_ctx_free(ExecCtx *x);
/* Rank r's peer table from every rank's send/recv allocation bases, scratch and state
 * addresses as this process sees them. */
void exec_fill_table(ExecCtx *x, int r, const mk_u64 *sendb, const mk_u64 *recvb,
                     const mk_u64 *scratch, const mk_u64 *state);
/* Points a module just loaded for c at c's abort word (its spin loops give up once set). */
mscclrt_result exec_module_arm(const mscclrt_comm *c, CuModule m);
/* Switch channels (plans with any; otherwise a no-op), after the contexts are allocated and the
 * peer tables filled: binds them to NVLS multicast groups and puts the multicast addresses into
 * the tables. Single process: cs/xs hold every rank (n = nranks, boot NULL); one process per
 * rank: the caller's comm and context (n = 1) and its bootstrap (collective). */
mscclrt_result exec_nvls_setup(mscclrt_comm **cs, ExecCtx **xs, int n, Boot *boot);
/* Multi-process (exec_mp.c): collective setup of a context over the bootstrap and CUDA IPC;
 * teardown (a barrier so no peer still uses our memory, then the transport and bootstrap). */
mscclrt_result exec_mp_setup(mscclrt_comm *c, ExecCtx *x);
void exec_mp_quiesce(mscclrt_comm *c);
void exec_mp_close(mscclrt_comm *c);

/* Group calls (exec_group.c) for the layers above: whether this thread is inside
 * mscclrt_group_start/end, and a launch prepared elsewhere that group end issues in call order
 * with the plan calls (arg is malloc'd and freed after the group, also on failure). Group end
 * calls it with EXEC_DEFER_PREPARE (load its kernels: a module's first load waits for the
 * kernels running in its context, exec_share.c) for every call of the group before it calls any
 * with EXEC_DEFER_RUN (launch); a group that is not launched gets EXEC_DEFER_DISCARD alone. */
typedef enum { EXEC_DEFER_DISCARD, EXEC_DEFER_PREPARE, EXEC_DEFER_RUN } ExecDeferStage;
typedef mscclrt_result (*ExecDeferredFn)(void *arg, ExecDeferStage stage);
bool exec_in_group(void);
/* bytes: where the call's message size will be when the group ends (read then, for
 * mscclrt_group_simulate_end's estimate: a send/recv list grows after it is queued); NULL: 0 */
mscclrt_result exec_group_defer(mscclrt_comm *c, ExecDeferredFn fn, void *arg,
                                const uint64_t *bytes);

/* ---- a communicator's life, step by step (exec_comm.c), for runtime/comm ------------------
 * Every entry point checks liveness first; exec_cuda_current makes the comm's CUDA context
 * current and gives the one to put back with exec_cuda_restore. */
mscclrt_result exec_comm_check(const mscclrt_comm *c, const char *fn);
mscclrt_result exec_cuda_current(const mscclrt_comm *c, CuContext *prev);
void exec_cuda_restore(const mscclrt_comm *c, CuContext prev);
/* A comm struct (NULL: out of memory); exec_comm_attach opens its device (primary context,
 * left current; architecture; abort word); a failure leaves it for release. */
mscclrt_comm *exec_comm_new(int rank, int nranks, int device);
mscclrt_result exec_comm_attach(mscclrt_comm *c);
/* A bootstrap group's member (exec_mp.c): takes boot (the caller closes it on failure, after
 * clearing c->boot), creates the IPC and network transports and learns which ranks share a
 * GPU. Collective. */
mscclrt_result exec_comm_connect(mscclrt_comm *c, Boot *boot, const char *fn);
/* mscclrt_comm_init_all's group: made for n ranks, each comm added (its rank's slot), peer
 * access enabled between its distinct devices; a comm leaves it (true: it was the last, and the
 * caller frees the group once the comm is released). */
ExecClique *exec_clique_new(int n);
void exec_clique_add(ExecClique *q, mscclrt_comm *c);
mscclrt_comm *exec_clique_comm(const ExecClique *q, int rank);
mscclrt_result exec_clique_peer_access(ExecClique *q, const char *fn);
bool exec_clique_leave(mscclrt_comm *c);
void exec_clique_free(ExecClique *q);
/* Release, around the algorithm layer's: the device idle (not after an abort, which waited
 * already), the proxy drained and every peer idle (*prev: the context to restore); then the
 * contexts and kernels freed; then the proxy, transports and device closed and c freed. */
void exec_comm_quiesce(mscclrt_comm *c, CuContext *prev);
void exec_comm_drop_state(mscclrt_comm *c);
void exec_comm_close(mscclrt_comm *c, CuContext prev);

/* ---- kernels for the layers above (exec_module.c, exec_share.c) -----------------------------
 * The one loader of plans' and native algorithms' kernels: src compiled for c's architecture
 * (disk cache, NVRTC), loaded, `kernel` found, the module pointed at c's abort word, and, when
 * ranks share c's CUDA context, every one of them loaded before any launches (collective then).
 * `what` names the kernel in messages. The module is the caller's to unload. */
mscclrt_result exec_module_load(mscclrt_comm *c, const char *src, const char *kernel,
                                const char *what, CuModule *module, CuFunction *fn);
/* The one launch: fn on blocks x threads with params, on stream, c's context current; errors
 * name the rank and `kind 'name'` (exec_launch_failed words them). Inline: every collective's
 * hot path ends here. */
mscclrt_result exec_launch_failed(const mscclrt_comm *c, CuResult r, int blocks, int threads,
                                  const char *kind, const char *name);
/* Programmatic dependent launch (exec_pdl.c): whether to use it, from MSCCLRT_LAUNCH_PDL, the
 * GPU's compute capability major, the driver's cuLaunchKernelEx and whether another rank of the
 * group uses the same GPU (pure; tested); the comm's decision, made on its first own launch
 * (a bad MSCCLRT_LAUNCH_PDL fails that launch, naming it); and such a launch (falling back to a plain one, for good, where the driver refuses it). */
bool exec_pdl_wanted(long long param, int cc_major, bool have_launch_ex, bool gpu_shared);
mscclrt_result exec_pdl_decide(mscclrt_comm *c);
CuResult exec_pdl_launch(mscclrt_comm *c, CuFunction fn, int blocks, int threads, void **params,
                         void *stream);
/* own: fn's source begins with mk::launch_prologue (generated plan kernels, the built-in native
 * ones), so it may be launched with programmatic serialization */
static inline mscclrt_result exec_launch_kernel(mscclrt_comm *c, CuFunction fn, int blocks,
                                                int threads, void **params, void *stream,
                                                bool own, const char *kind, const char *name) {
    CuContext prev;
    mscclrt_result res = exec_cuda_current(c, &prev);
    if (res != MSCCLRT_SUCCESS) return res;
    if (own && c->pdl == 0 && (res = exec_pdl_decide(c)) != MSCCLRT_SUCCESS) {
        exec_cuda_restore(c, prev);
        return res;
    }
    CuResult r = own && c->pdl > 0
        ? exec_pdl_launch(c, fn, blocks, threads, params, stream)
        : cu.cuLaunchKernel(fn, (unsigned)blocks, 1, 1, (unsigned)threads, 1, 1, 0,
                            (CuStream)stream, params, NULL);
    exec_cuda_restore(c, prev);
    return r == CU_OK ? MSCCLRT_SUCCESS : exec_launch_failed(c, r, blocks, threads, kind, name);
}
/* The comm's previous plan launch (its hot entry: kernel, grid, the two parameters, which point
 * into the context), for a bare relaunch; MSCCLRT_ERR_UNAVAILABLE when there is none. */
mscclrt_result exec_last_launch(const mscclrt_comm *c, CuFunction *fn, int *blocks, int *threads,
                                void *params[2]);
/* Ranks of one process sharing c's GPU wait for each other, so their blocks must all be
 * resident at once: MSCCLRT_ERR_INVALID_USAGE naming `what` when blocks x threads of fn per
 * rank would not fit; success when no rank shares the GPU in this process. */
/* c->context_share_max, computed from the clique on first use for a single-process group. */
int exec_context_share_max(mscclrt_comm *c);
/* The most thread blocks (of up to 1024 threads) a native launch may use so that the kernels of
 * every rank sharing a process and GPU are resident at once: `limit` for a rank alone on its
 * GPU, else at most the fewest multiprocessors of the group's GPUs over context_share_max (1
 * at least); the same on every rank. */
int exec_native_block_cap(mscclrt_comm *c, int limit);
mscclrt_result exec_share_check_blocks(const mscclrt_comm *c, CuFunction fn, int blocks,
                                       int threads, const char *what);

/* ---- contexts for the layers above --------------------------------------------------------
 * exec_setup_contexts: a context of plan p that serves any buffers on each of cs[0..n) (one
 * bootstrap comm, n = 1, or every comm of a single-process group at once), collectively, as a
 * plan's first call would; out[i] belongs to cs[i]'s list (freed with the comm, or earlier by
 * exec_context_release). On failure none is left. */
mscclrt_result exec_setup_contexts(mscclrt_comm **cs, int n, const Plan *p, ExecCtx **out);
void exec_context_release(mscclrt_comm *c, ExecCtx *x);
/* Whether a call of p with these buffers and sizes would launch at once: its context exists,
 * is ready and needs no growth (no setup, which a CUDA-graph capture cannot take). Else, where
 * same_allocs is given, whether p, a plan keyed by its buffers, already has a context on the
 * allocations of send and recv (other buffers of them: nccl-tests moves its buffers by an offset
 * every iteration), where a call on new buffers would set up yet another one. */
bool exec_plan_ready(mscclrt_comm *c, const Plan *p, const void *send, const void *recv,
                     size_t in, size_t out, bool *same_allocs);

/* The plan model inside a public handle (runtime/core/api_plan.h). */
const Plan *exec_plan(const mscclrt_plan *plan);

#endif

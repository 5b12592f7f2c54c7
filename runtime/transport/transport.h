/*
 * transport.h - how a rank gets at another rank's device memory. A Transport is a function
 * table (NCCL's ncclTransport): can it reach this peer, export a local buffer into a
 * fixed-size descriptor, ship descriptors to a peer, import a peer's descriptor as a local
 * pointer, close that import. Today: "ipc" (CUDA IPC inside one host: legacy cuIpc handles for
 * cuMemAlloc memory, POSIX fds over a Unix socket for cuMem/VMM memory). RDMA (libibverbs) and
 * TCP transports plug into the same table later.
 *
 * Also here: fd passing (FdPass), the Unix-socket side channel that carries VMM file
 * descriptors between processes of one host; it needs no GPU and is tested with memfds.
 *
 * Everything is collective only where it says so; otherwise calls are local or pairwise.
 * Thread safety: an XportIpc / FdPass belongs to one rank (one thread at a time).
 */
#ifndef MSCCLRT_TRANSPORT_H
#define MSCCLRT_TRANSPORT_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "cuda/cuda_driver.h"
#include "transport/ipc_abi.h"
#include "plan.h"
#include "mscclrt.h"

/* ==== fd passing (fdpass.c) ==================================================================
 * Each rank binds a Unix datagram socket in the abstract namespace; names are exchanged over the
 * bootstrap. fdpass_send() passes one descriptor (SCM_RIGHTS) with a 64-bit key; fdpass_recv()
 * waits for the descriptor with that key from that peer, keeping others that arrive first.
 * Every datagram carries the group's secret and must come from the peer's own socket name, so
 * other local processes cannot inject descriptors. Limits: peers must share a host and network
 * namespace (as CUDA IPC needs the same host anyway). */
typedef struct FdPass FdPass;

/* Collective over b (all ranks call it): binds this rank's socket and learns everyone's. */
mscclrt_result fdpass_create(FdPass **out, Boot *b);
void fdpass_destroy(FdPass *f);   /* NULL is a no-op; closes descriptors received but not taken */
/* The caller keeps its fd (the peer gets a duplicate). Waits at most the Boot's timeout for
 * room in the peer's queue. */
mscclrt_result fdpass_send(FdPass *f, int peer, uint64_t key, int fd);
/* *fd_out is a new descriptor owned by the caller (close-on-exec). Timeout: the Boot's. */
mscclrt_result fdpass_recv(FdPass *f, int peer, uint64_t key, int *fd_out);
/* Messages: up to FDPASS_MSG_MAX bytes with at most one descriptor (fd -1: none), for
 * announcements that must never make the sender wait. fdpass_post sends at once or, when the
 * peer's queue is full, sends nothing and sets *sent false (the caller keeps it for later);
 * messages from one rank arrive in the order posted. fdpass_take hands over the oldest message
 * received from any rank (descriptors fdpass_send passed stay for fdpass_recv), or sets *got
 * false; it never waits. The receiver owns out->fd. */
#define FDPASS_MSG_MAX 1024
typedef struct FdPassMsg {
    int src;                     /* sending rank (checked: its socket, the group's secret) */
    int fd;                      /* -1: none */
    uint64_t key;
    size_t len;
    unsigned char msg[FDPASS_MSG_MAX];
} FdPassMsg;
mscclrt_result fdpass_post(FdPass *f, int peer, uint64_t key, const void *msg, size_t len, int fd,
                           bool *sent);
mscclrt_result fdpass_take(FdPass *f, FdPassMsg *out, bool *got);

/* ==== descriptors ===========================================================================
 * What one transport's export produces and its import consumes: fixed size, sent as plain
 * bytes between processes, so it starts with magic + version and is checked on receipt. */
#define XPORT_DESC_BYTES 256
typedef struct XportDesc { unsigned char bytes[XPORT_DESC_BYTES]; } XportDesc;

#define IPC_DESC_MAGIC   0x4d534950u   /* "MSIP" */
#define IPC_DESC_VERSION 1
typedef enum { IPC_KIND_LEGACY = 1, IPC_KIND_VMM = 2 } IpcKind;

/* The "ipc" transport's descriptor of a registered buffer. */
typedef struct IpcDesc {
    uint32_t magic;          /* IPC_DESC_MAGIC */
    uint16_t version;        /* IPC_DESC_VERSION */
    uint16_t kind;           /* IpcKind: which handle below is valid */
    int32_t owner_rank;      /* exporting rank (checked against the sender) */
    int32_t owner_pid;
    uint64_t owner_nonce;    /* random per exporting process: same-process detection that
                                survives pid namespaces */
    uint64_t export_id;      /* unique per export within owner process; keys caches and fds */
    uint64_t base;           /* exporter's allocation base address (its own address space) */
    uint64_t size;           /* whole allocation, bytes: what an importer maps */
    uint64_t offset;         /* registered pointer - base */
    uint64_t bytes;          /* registered length from the pointer; offset + bytes <= size */
    int32_t device;          /* exporter's device ordinal */
    uint32_t reserved0;
    uint8_t handle[IPC_HANDLE_BYTES];   /* IPC_KIND_LEGACY: the CUipcMemHandle. IPC_KIND_VMM: unused, the
                                handle is a POSIX fd sent through FdPass under export_id */
    uint8_t reserved[24];
} IpcDesc;
static_assert(sizeof(IpcDesc) == 160, "IpcDesc is a wire format");
static_assert(sizeof(CuIpcMemHandle) == IPC_HANDLE_BYTES, "a legacy handle fills IpcDesc.handle");
static_assert(sizeof(IpcDesc) <= sizeof(XportDesc), "IpcDesc must fit an XportDesc");

/* Checks a descriptor received from `sender` (magic, version, kind, ranges); the message names
 * what is wrong. */
mscclrt_result ipc_desc_check(const IpcDesc *d, int sender);

/* ==== the "ipc" transport (ipc.c) ============================================================
 * Exporting: xport_ipc_export() finds the allocation that holds [ptr, ptr+bytes) (its base and
 * size from cuMemGetAddressRange) and describes it:
 *   - memory from cuMemAlloc/cudaMalloc: a cuIpcGetMemHandle handle inside the descriptor;
 *   - cuMem/VMM memory (cuMemRetainAllocationHandle succeeds): cuMemExportToShareableHandle as a
 *     POSIX fd (the allocation must have been created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
 *     which xport_ipc_send() passes to the peer once.
 * Registration is cached per allocation (base, size, CUDA buffer id): exporting any range of an
 * allocation again reuses the handle and never re-exports; a peer that already has an fd does
 * not get it again; an importer maps each (exporter, allocation) once and counts references.
 * Importing in the exporter's own process (thread mode) returns the exporter's pointer after
 * granting this device access (cuCtxEnablePeerAccess or cuMemSetAccess).
 *
 * A buffer must lie inside one physical allocation (a VMM range built from several chunks is
 * refused: register each chunk). Caller's CUDA context must be current (cuCtxSetCurrent) for
 * export and import; the transport does not change it.
 *
 * Typical use by a communicator (plan-format §6.4), on every rank of one host:
 *   xport_ipc_create(&x, boot);                         collective, once per communicator
 *   xport_ipc_export(x, base, bytes, &d);               each buffer a peer needs (cached)
 *   xport_ipc_send(x, g, tag, &d);                      to each consumer g, in plan order
 *   xport_ipc_recv(x, owner, tag, &pd);                 from each owner, in the same order
 *   xport_ipc_import(x, &pd, &peer_ptr);                the kernels use peer_ptr
 *   ... xport_ipc_close(x, peer_ptr); boot_barrier(boot); xport_ipc_destroy(x);
 * Descriptors travel as bootstrap messages under the caller's tag (the bootstrap's tag space:
 * messages of one (peer, tag) match in FIFO order), so send and recv orders must agree.
 * Barrier before freeing exported memory that peers may still be using. */
typedef struct XportIpc XportIpc;

/* Collective over b (creates the FdPass). Borrows b, which must outlive the XportIpc. Fails
 * with MSCCLRT_ERR_UNAVAILABLE (from cu_load) on hosts without a CUDA driver. */
mscclrt_result xport_ipc_create(XportIpc **out, Boot *b);
/* Unmaps every import, releases every export handle, closes fds. NULL is a no-op. Peers'
 * mappings of our memory stay valid until they close them (CUDA keeps the memory alive). */
void xport_ipc_destroy(XportIpc *x);

/* Describes [ptr, ptr+bytes) of a local device allocation. No communication. */
mscclrt_result xport_ipc_export(XportIpc *x, CuDevPtr ptr, size_t bytes, IpcDesc *desc);
/* Forgets the registration of the allocation holding ptr (call before freeing memory that
 * will be reused: later exports then make a new handle). Unknown ptr: no-op. */
void xport_ipc_deregister(XportIpc *x, CuDevPtr ptr);
/* Sends desc to peer under bootstrap tag `tag` (and, for VMM, the fd on first use per peer).
 * Pairs with xport_ipc_recv(peer's x, our rank, tag). */
mscclrt_result xport_ipc_send(XportIpc *x, int peer, int tag, const IpcDesc *desc);
/* Receives and checks a descriptor sent by peer under tag (and its fd if one is due). */
mscclrt_result xport_ipc_recv(XportIpc *x, int peer, int tag, IpcDesc *desc);
/* send then recv: swaps descriptors with one peer. */
mscclrt_result xport_ipc_exchange(XportIpc *x, int peer, int tag, const IpcDesc *mine, IpcDesc *theirs);
/* Maps a received descriptor into this process; *peer_ptr addresses the exporter's registered
 * pointer (base + offset), valid for desc->bytes. Each import takes a reference. */
mscclrt_result xport_ipc_import(XportIpc *x, const IpcDesc *desc, CuDevPtr *peer_ptr);
/* Drops the reference taken by import of a pointer it returned; unmaps on the last one. */
mscclrt_result xport_ipc_close(XportIpc *x, CuDevPtr peer_ptr);
/* For callers that carry descriptors their own way (runtime/peermem): the POSIX fd of this
 * process's VMM export desc (borrowed: valid until the export is deregistered; -1 for legacy
 * memory), and, on the importing side, an fd received for desc handed to the transport (taken
 * over: kept for xport_ipc_import, or closed when not needed). */
int xport_ipc_export_fd(XportIpc *x, const IpcDesc *desc);
mscclrt_result xport_ipc_adopt_fd(XportIpc *x, const IpcDesc *desc, int fd);

/* ==== legacy handles opened by this process (ipc_legacy.c) ===================================
 * The driver opens one cuIpcMemHandle once per context (a second open fails with
 * CUDA_ERROR_ALREADY_MAPPED), so every legacy import of the process shares one mapping per
 * (current context, handle), counted. owner_rank only names the peer in errors. */
mscclrt_result ipc_legacy_open(const CuIpcMemHandle *h, int owner_rank, CuDevPtr *mapped);
/* Drops one reference to a mapping ipc_legacy_open returned; closes it on the last. */
mscclrt_result ipc_legacy_close(CuDevPtr mapped);

/* ==== the transport table ==================================================================== */
typedef struct Transport {
    const char *name;        /* "ipc"; later "ib", "tcp" */
    /* Can this rank reach peer's memory through this transport? (ipc: same node) */
    bool (*can_connect)(const Boot *b, int peer);
    /* Collective over b: the per-rank state (ctx) of this transport. */
    mscclrt_result (*create)(void **ctx, Boot *b);
    void (*destroy)(void *ctx);
    mscclrt_result (*export_mem)(void *ctx, CuDevPtr ptr, size_t bytes, XportDesc *desc);
    mscclrt_result (*send_desc)(void *ctx, int peer, int tag, const XportDesc *desc);
    mscclrt_result (*recv_desc)(void *ctx, int peer, int tag, XportDesc *desc);
    mscclrt_result (*import_mem)(void *ctx, const XportDesc *desc, CuDevPtr *peer_ptr);
    mscclrt_result (*close_mem)(void *ctx, CuDevPtr peer_ptr);
} Transport;

extern const Transport xport_ipc;
/* Every transport, in order of preference; NULL-terminated. */
extern const Transport *const xport_all[];
/* The first transport in xport_all that can reach peer, or NULL. */
const Transport *xport_pick(const Boot *b, int peer);

/* ==== NVLS multicast (nvls.c) ================================================================
 * Switch channels (plan-format §2.3, §5.6, §6.6): one NVLS multicast object per (context, switch
 * channel), created by the group's first listed rank (its root) with cuMulticastCreate (size:
 * the largest member binding, rounded up to the RECOMMENDED multicast granularity; POSIX fd
 * handles), shared (single process: the handle itself; processes: an fd through FdPass),
 * joined by every member's device (cuMulticastAddDevice), and, once all devices are in, bound
 * to each member's whole allocation of the channel's buffer at multicast offset 0 and mapped
 * into a VA range of each member. That mapping is the channel's table entry: like the peer
 * table's allocation bases, its offset 0 is the allocation base (scratch: the scratch base).
 *
 * SAFETY: nothing here may touch a multicast driver entry unless MSCCLRT_ENABLE_NVLS=1 and the
 * driver table resolved them (cu.multicast, which cuda_driver.c sets only under that variable);
 * every entry point that reaches the driver re-checks both. A multicast object on a shared host
 * can take the machine's GPUs out of service.
 *
 * Memory: multicast binds cuMem physical memory only. The scratch of a context whose rank has a
 * switch channel on "s" comes from nvls_scratch_alloc (cuMemCreate + cuMemMap, granularity-
 * aligned, POSIX fd handle type so the IPC transport can export it). User buffers bound by a
 * switch channel ("i"/"o") must be cuMem allocations whose base and size are multiples of the
 * multicast granularity; anything else fails with a message naming the rank, the buffer and
 * what to allocate instead. */
typedef struct NvlsCtx NvlsCtx;   /* one context's multicast state (owned by the ExecCtx) */

/* -- plan logic (no driver) -- */
/* Whether any rank of p declares a switch channel (then every rank takes part in the setup). */
bool nvls_plan_uses(const Plan *p);
/* Whether rank declares a switch channel on buffer b. */
bool nvls_plan_binds(const Plan *p, int rank, PlanBuf b);
/* The switch index on `member` of rank's switch channel sw (the loader's rule: the k-th group of
 * rank containing member is member's k-th group containing rank); sw itself when member ==
 * rank; -1 when member is not in the group or declares no matching channel. */
int nvls_match(const Plan *p, int rank, int sw, int member);
/* Group of rank's switch channel sw. */
typedef struct NvlsChan {
    PlanBuf buf;             /* the buffer every member binds */
    int nmembers;
    const int *members;      /* borrowed from the plan */
    int root;                /* members[0]: creates the object */
    int root_sw;             /* the root's switch index of this group: (root, root_sw) names it */
    int pos;                 /* rank's position in members */
} NvlsChan;
/* Fills *out; MSCCLRT_ERR_PLAN naming the rank, channel and member when the group is
 * inconsistent (a member without the matching channel, rank not in its own group). */
mscclrt_result nvls_chan(const Plan *p, int rank, int sw, NvlsChan *out);
/* n rounded up to a multiple of gran (> 0); false on overflow or gran == 0. */
bool nvls_round_up(size_t n, size_t gran, size_t *out);
/* A user allocation [base, +bytes) that rank's switch channel sw binds as `what` ("sendbuf",
 * "recvbuf"): base and bytes must be multiples of gran (the driver binds whole multicast
 * granules). MSCCLRT_ERR_INVALID_ARG naming all of it otherwise. */
mscclrt_result nvls_check_range(int rank, int sw, const char *what, CuDevPtr base, size_t bytes,
                                size_t gran);
/* The gate of every plan with switch channels, before any allocation: the exact refusal
 * "plan '<name>' uses switch (NVLS multicast) channels, which are off unless
 * MSCCLRT_ENABLE_NVLS=1" (MSCCLRT_ERR_UNAVAILABLE) when the variable is not 1, without touching
 * the driver; then MSCCLRT_ERR_UNAVAILABLE when the driver lacks the multicast API or the
 * device reports no CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED. */
mscclrt_result nvls_check_enabled(const Plan *p, int rank, CuDevice dev);

/* -- driver side (only after nvls_check_enabled succeeded) -- */
/* Scratch of `bytes` on device `ordinal` as cuMem memory that multicast can bind: size rounded
 * up to the allocation and multicast granularities, RW access for every device in access[]
 * (single process: the group's devices, which reach it as peers; processes: the own device).
 * Creates *nv when NULL; the memory belongs to *nv (freed by nvls_ctx_free). */
mscclrt_result nvls_scratch_alloc(NvlsCtx **nv, const Plan *p, int rank, int ordinal,
                                  size_t bytes, const int *access, int naccess, CuDevPtr *ptr);
/* One rank's side of a setup: its device, context, and the allocations its channels bind. */
typedef struct NvlsMem {
    int rank;
    CuDevice dev;
    CuContext ctx;                      /* made current for this rank's steps */
    CuDevPtr base[PLAN_BUF_COUNT];      /* allocation bases of i, o, s (s: from nvls_scratch_alloc) */
    size_t bytes[PLAN_BUF_COUNT];       /* their sizes (i/o: cuMemGetAddressRange; s: scratch bytes) */
    NvlsCtx **nv;                       /* the context's state; created when NULL */
} NvlsMem;
/* Single process: sets up every switch channel of every rank (m[r] is rank r, all p->ngpus
 * ranks). The caller's current context is changed. On failure the partial state stays in the
 * NvlsCtx's, for nvls_ctx_free. */
mscclrt_result nvls_setup_local(const Plan *p, NvlsMem *m, int nranks);
/* One process per rank: the same, collectively over b (every rank of b calls it for the same
 * plan), with the multicast handles passed as POSIX fds. Failures anywhere are agreed on, so
 * every rank returns an error naming the rank that failed instead of timing out. */
mscclrt_result nvls_setup_boot(const Plan *p, NvlsMem *me, Boot *b);
/* The multicast address of switch channel sw (0 before its setup). */
CuDevPtr nvls_mc_addr(const NvlsCtx *nv, int sw);
/* Unbinds every channel, unmaps and releases the multicast objects (the last member releases
 * a handle shared in one process), then frees the scratch it allocated. NULL is a no-op. */
void nvls_ctx_free(NvlsCtx *nv);

#endif

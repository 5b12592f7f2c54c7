/*
 * net.h - port channels between nodes: the network transport of the port proxy. A Net belongs
 * to one communicator rank and connects it to every rank on another node (boot_node_of) at
 * creation. Two backends carry the same three operations:
 *   "socket" (net_tcp.c): TCP, several sockets per peer pair, data staged through pinned host
 *            memory in pipelined pieces (host-memory mode: sent straight from the buffer);
 *   "ib"     (net_ib.c):  libibverbs (dlopen), RC queue pairs, RDMA WRITE.
 * Which one: MSCCLRT_NET=ib|socket, else ib when a usable HCA exists, else socket.
 *
 * Addressing. A kernel's port put names its destination by a 64-bit address taken from its
 * table (a peer's buffer base plus offsets). For a peer on another node there is no mapping of
 * its memory, so the table holds a *window* address instead: NET_WIN_TAG in the top byte, a
 * window index below it and the offset in the low NET_WIN_OFF_BITS. Additions the kernel makes
 * keep the window intact (offsets stay below 1 TiB) and a window address is never a valid
 * device pointer (user-space addresses stop at 2^57), so the proxy routes on the tag alone.
 *
 * Semantics, as the copy-engine proxy: operations of one Net take effect in issue order per
 * peer: a signal becomes visible at the peer only after all data put to that peer before it
 * has landed; net_flush returns once everything issued has landed at every peer, and
 * net_flush_sources once everything issued has been read from this rank's memory.
 *
 * Thread safety: net_put/net_signal/net_flush from one thread at a time (the proxy's);
 * registration and import may run concurrently with them (a mutex guards the tables).
 */
#ifndef MSCCLRT_NET_H
#define MSCCLRT_NET_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "mscclrt.h"

#define NET_WIN_TAG       0xfe00000000000000ull
#define NET_WIN_OFF_BITS  40
#define NET_WIN_MAX       65535              /* window indices 1..NET_WIN_MAX */
#define NET_WIN_OFF_MASK  ((1ull << NET_WIN_OFF_BITS) - 1)

static inline bool net_is_window(uint64_t addr) { return (addr >> 56) == (NET_WIN_TAG >> 56); }

typedef struct Net Net;
struct NetAddr;   /* a listen address (net_internal.h) */

typedef struct NetOptions {
    bool host_mem;          /* buffers are host memory (tests, benchmarks): no CUDA at all */
    void *cu_ctx;           /* !host_mem: the rank's CUDA context (current in the caller) */
    int cu_device;          /* !host_mem: its device ordinal (NIC selection) */
    int timeout_ms;         /* <= 0: MSCCLRT_NET_TIMEOUT_MS */
    int nsocks;             /* socket backend: sockets per peer pair; <= 0: MSCCLRT_SOCKET_NSOCKS
                             * (-1 there: net_nsocks_auto, by the node layout) */
    const char *force;      /* "socket" or "ib"; NULL: MSCCLRT_NET, else automatic */
    const char *ifname;     /* socket backend interface list; NULL: MSCCLRT_SOCKET_IFNAME */
    /* tests: the socket backend calls it once the listen addresses are exchanged, before it
     * connects or accepts (mine: this rank's listener), so a test can aim connections at it */
    void (*on_listen)(void *arg, const struct NetAddr *mine);
    void *on_listen_arg;
} NetOptions;

/* What a rank sends a peer so the peer can write into one of its buffers. Wire format. */
#define NET_DESC_MAGIC   0x4d534e44u   /* "MSND" */
#define NET_DESC_VERSION 1
typedef struct NetMemDesc {
    uint32_t magic;         /* NET_DESC_MAGIC */
    uint16_t version;       /* NET_DESC_VERSION */
    uint16_t backend;       /* 1 socket, 2 ib: must match the importer's */
    int32_t owner;          /* registering rank */
    uint32_t id;            /* owner's region id (socket: named in every put) */
    uint64_t addr;          /* owner's address of the buffer (ib: the RDMA target) */
    uint64_t bytes;         /* registered length */
    uint32_t rkey;          /* ib: the memory region's remote key; socket: 0 */
    uint32_t reserved0;
    uint8_t reserved[24];
} NetMemDesc;
static_assert(sizeof(NetMemDesc) == 64, "NetMemDesc is a wire format");

/* Collective over b: every rank calls it with the same nsocks/backend settings. Connects to each
 * rank on another node (none when there is one node: *out is still a valid, idle Net). Borrows
 * b, which must outlive the Net. Errors name the rank that could not be reached. */
mscclrt_result net_create(Net **out, Boot *b, const NetOptions *o);
/* Closes every connection and frees everything. NULL is a no-op. */
void net_destroy(Net *n);
const char *net_backend_name(const Net *n);   /* "socket" or "ib" */
/* How many ranks this Net reaches (0 for NULL or a one-node group). */
int net_remote_count(const Net *n);
/* Whether peer is reached through this Net (on another node); false for a NULL Net. */
bool net_peer_remote(const Net *n, int peer);

/* Registers [base, base+bytes) of this rank (device memory, or host memory in host_mem mode)
 * as a target peers may write, on behalf of owner (a context; net_release drops it). */
mscclrt_result net_reg(Net *n, const void *owner, uint64_t base, size_t bytes, NetMemDesc *d);
/* net_reg for pinned host memory the GPU reads and writes through its mapping
 * (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP; under unified addressing its device address is
 * its host address): pieces peers put into it are received straight into it (socket backend: no
 * copy into device memory), and it is a host source as net_reg_host_src registers one (puts from
 * it go unstaged); ib registers it as host memory. Peers import it like any region. */
mscclrt_result net_reg_host(Net *n, const void *owner, uint64_t base, size_t bytes, NetMemDesc *d);
/* Whether this Net copies device memory through pinned host memory on its way (socket backend
 * in device mode): there, buffers only the network touches are better kept in host memory. */
bool net_stages_device(const Net *n);
/* Checks a descriptor received from peer and makes a window for it: *window addresses the
 * peer's d->addr (offset 0), valid for d->bytes. */
mscclrt_result net_import(Net *n, const void *owner, int peer, const NetMemDesc *d,
                          uint64_t *window);
/* Registers [addr, addr+bytes) of pinned host memory the GPU writes through its mapping
 * (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP; under unified addressing the device address is
 * the host address) as a source of puts, on behalf of owner: a put whose source lies inside is
 * sent straight from it, without the staging copy a device source takes (socket backend), or
 * registered as host memory (ib). In host_mem mode every source is host memory already. */
mscclrt_result net_reg_host_src(Net *n, const void *owner, uint64_t addr, size_t bytes);
/* Whether [src, src+bytes) lies in one registered host source (the backends ask per put). */
bool net_host_src(Net *n, uint64_t src, uint64_t bytes);
/* Drops every registration, host source and window made on behalf of owner (after the proxy
 * drained). */
void net_release(Net *n, const void *owner);

/* Data path (the proxy thread). dst is a window address; src a local address of bytes
 * (device memory, or host memory in host_mem mode) that must stay unchanged until a flush. */
mscclrt_result net_put(Net *n, uint64_t dst, uint64_t src, uint64_t bytes);
/* Writes value into the 8 bytes at window address dst, after the data put to that peer before. */
mscclrt_result net_signal(Net *n, uint64_t dst, uint64_t value);
/* net_put(dst, src, bytes) then net_signal(sig, value) as one operation: where both reach the
 * same peer the backend may send them together (the socket backend with
 * MSCCLRT_SOCKET_PUT_SIGNAL=1 writes a one-piece put and its signal in one message write);
 * otherwise, or for a backend without the pair, the two calls in turn. */
mscclrt_result net_put_signal(Net *n, uint64_t dst, uint64_t src, uint64_t bytes, uint64_t sig,
                              uint64_t value);
/* The largest put net_put_signal may send together with its signal (0: none; the callers then
 * need not pair them at all). Fixed once the transport is connected. */
uint64_t net_put_signal_max(const Net *n);
/* Returns once everything issued so far has landed at every peer; bounded by the timeout. */
mscclrt_result net_flush(Net *n);
/* Returns once the sources of everything issued so far have been read, so the caller may
 * reuse them; whether the data has landed is left to the signals that follow it (the socket
 * backend then skips net_flush's round trip to every peer). Bounded by the timeout. */
mscclrt_result net_flush_sources(Net *n);

/* ==== NCCL-syntax interface / HCA lists (net_match.c) ===================================== */
/* A list "a,b:1,c" with an optional leading '^' (exclude the listed names) and '=' (exact names,
 * else prefixes); after '^' a '=' may follow ("^=eth0"). port: an entry's ":N" (0 = any). */
#define NET_MATCH_MAX 32
typedef struct NetMatchList {
    bool exclude, exact;
    int n;
    struct { char name[64]; int port; } e[NET_MATCH_MAX];
} NetMatchList;
/* Parses text (NULL or "" is an empty list: matches everything). Malformed input (entry too
 * long, too many entries, bad port) is MSCCLRT_ERR_INVALID_ARG naming `what` and the text. */
mscclrt_result net_match_parse(const char *what, const char *text, NetMatchList *l);
/* Whether (name, port) passes the list. port 0 in an entry matches any port. */
bool net_match(const NetMatchList *l, const char *name, int port);

/* ==== NIC selection from sysfs (net_topo.c) ================================================ */
typedef enum { NET_NIC_IB = 1, NET_NIC_ETH = 2 } NetNicKind;
typedef struct NetNic {
    char name[64];          /* "mlx5_0" (ib) or "eth0" (net) */
    NetNicKind kind;
    char pci[32];           /* PCI address "0000:3b:00.0"; "" when virtual (lo, bridges) */
    int numa;               /* NUMA node, -1 unknown */
} NetNic;
/* Distance classes between a GPU and a NIC, nearest first. */
typedef enum { NET_DIST_SWITCH = 0, NET_DIST_ROOT = 1, NET_DIST_NUMA = 2, NET_DIST_FAR = 3 } NetDist;

/* The sysfs root: MSCCLRT_SYSFS_ROOT (tests only) or "/sys". */
const char *net_sysfs_root(void);
/* Lists NICs under root/class/infiniband (kind ib) or root/class/net (kind eth), name-sorted,
 * filtered by l (NULL: no filter). At most max; *count gets how many. */
mscclrt_result net_topo_nics(const char *root, NetNicKind kind, const NetMatchList *l,
                             NetNic *out, int max, int *count);
/* Distance class between the PCI device gpu_pci and nic (both "dddd:bb:dd.f"). */
NetDist net_topo_dist(const char *root, const char *gpu_pci, const NetNic *nic);
/* For each of ngpus GPUs (PCI addresses), the index of its NIC in nics: the nearest class,
 * ties spread across GPUs (the least-used NIC first, then the lowest index). */
mscclrt_result net_topo_assign(const char *root, const char *const *gpu_pci, int ngpus,
                               const NetNic *nics, int nnics, int *choice);
const char *net_dist_name(NetDist d);
/* Logs at INFO the nearest RDMA and Ethernet NIC of CUDA device `device` (after cu_load). The
 * socket backend still takes its interface from MSCCLRT_SOCKET_IFNAME; the log lets users pick it. */
void net_topo_log_gpu(int rank, int device);

#endif

/*
 * net_internal.h - what the files of runtime/net share: the Net itself (its region and window
 * tables, first error), the backend function table each transport fills, and the socket
 * helpers of net_sock.c. Nothing outside runtime/net includes it (tests may).
 */
#ifndef MSCCLRT_NET_INTERNAL_H
#define MSCCLRT_NET_INTERNAL_H

#include "net/net.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

enum { NET_BACKEND_SOCKET = 1, NET_BACKEND_IB = 2 };

/* A local buffer peers write into. id = index + 1; id 0 is never used. */
typedef struct NetRegion {
    const void *owner;       /* the context it was registered for; NULL = free slot */
    uint64_t base, bytes;
    void *mr;                /* ib: its ibv_mr; socket: NULL */
    uint32_t rkey;           /* ib: the MR's remote key */
    bool host;               /* pinned host memory the GPU maps (net_reg_host): pieces are
                                received straight into it, with no copy into device memory */
} NetRegion;

/* A peer's buffer this rank writes into: what window index i (i >= 1) stands for. */
typedef struct NetWindow {
    const void *owner;       /* NULL = free slot */
    int peer;
    uint32_t id;             /* the peer's region id */
    uint64_t addr, bytes;    /* the peer's address and length */
    uint32_t rkey;           /* ib */
} NetWindow;

typedef struct NetBackend {
    const char *name;
    int code;                                              /* NET_BACKEND_* */
    mscclrt_result (*connect)(Net *n);                     /* collective: all remote peers */
    void (*close)(Net *n);
    mscclrt_result (*reg)(Net *n, NetRegion *r);           /* NULL: nothing to do */
    void (*dereg)(Net *n, NetRegion *r);
    mscclrt_result (*put)(Net *n, const NetWindow *w, uint64_t off, uint64_t src, uint64_t bytes);
    mscclrt_result (*signal)(Net *n, const NetWindow *w, uint64_t off, uint64_t value);
    /* put then signal, both to w's peer (sw on the same peer); NULL: put, then signal */
    mscclrt_result (*put_signal)(Net *n, const NetWindow *w, uint64_t off, uint64_t src,
                                 uint64_t bytes, const NetWindow *sw, uint64_t soff,
                                 uint64_t value);
    /* the largest put put_signal sends together with its signal (NULL or 0: none) */
    uint64_t (*put_signal_max)(const Net *n);
    mscclrt_result (*flush)(Net *n);
    /* returns once every source of the puts issued so far has been read (its bytes are out of
     * the caller's memory); NULL: flush, which waits for more */
    mscclrt_result (*flush_sources)(Net *n);
} NetBackend;

struct Net {
    Boot *boot;              /* borrowed */
    int rank, nranks;
    bool *remote;            /* [nranks] on another node */
    int nremote;
    NetOptions opt;          /* timeout_ms and nsocks resolved */
    const NetBackend *be;
    void *be_state;          /* owned by the backend (its close frees it) */
    pthread_mutex_t mu;      /* guards the three tables */
    NetRegion *regs;
    int nregs, capregs;
    NetWindow *wins;         /* [0] unused */
    int nwins, capwins;
    struct NetHostSrc { const void *owner; uint64_t base, bytes; } *hsrc;   /* net_reg_host_src */
    int nhsrc, caphsrc;
    _Atomic int failed;      /* first asynchronous failure (a backend thread's) */
    char err[512];
};

extern const NetBackend net_tcp;
extern const NetBackend net_ib;

/* Records the first asynchronous failure (formatted); later ones only go to the log. */
void net_set_error(Net *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* MSCCLRT_SUCCESS, or MSCCLRT_ERR_REMOTE carrying the recorded failure. */
mscclrt_result net_check(Net *n);
/* Under the tables' lock: the address of [off, off+len) of local region id, if id names a live
 * region that holds that span (net_region_span), and in *host (unless NULL) whether the region
 * is pinned host memory (net_reg_host). */
bool net_region_addr(Net *n, uint32_t id, uint64_t off, uint64_t len, uint64_t *addr, bool *host);
/* Whether the ib backend can run here (libibverbs loads and a device that passes
 * MSCCLRT_IB_HCA has an ACTIVE port). Quiet: logs nothing. */
bool net_ib_usable(void);

/* ==== the socket backend's messages and the receiver's checks (net_wire.c) ===================== */
#define TCP_MAGIC   0x4d53544eu          /* "MSTN" */
#define TCP_VERSION 2                    /* 2: SIGNAL and FLUSH carry per-socket counts */
#define TCP_PIECE   (512u << 10)         /* bytes per PUT message, at most */
#define TCP_INLINE  (64u << 10)          /* puts up to this size travel on socket 0 */
#define TCP_SOCKS_MAX 16                 /* sockets per pair of ranks, at most */
#define TCP_SECRET  32                   /* bytes of the group's secret after a HELLO */

enum { TCP_HELLO = 1, TCP_PUT = 2, TCP_SIGNAL = 3, TCP_FLUSH = 4, TCP_ACK = 5, TCP_BYE = 6 };

/* Every message starts with one; a PUT's payload (len bytes), a HELLO's secret, and for a
 * SIGNAL or FLUSH the pieces sent before it on each of the pair's sockets (nsocks uint64_t,
 * summing to arg) follow. A piece counts as sent before a signal by its socket's own order:
 * pieces of later puts on another socket may arrive first, so a total alone cannot say that
 * every earlier piece has landed. */
typedef struct TcpHdr {
    uint32_t magic;          /* TCP_MAGIC */
    uint16_t version;        /* TCP_VERSION */
    uint16_t type;           /* TCP_* */
    uint32_t rank;           /* sender */
    uint32_t region;         /* PUT/SIGNAL: receiver's region id; HELLO: socket index */
    uint64_t off;            /* PUT/SIGNAL: offset in the region; HELLO: socket count */
    uint64_t len;            /* PUT: payload bytes; SIGNAL: the value; HELLO: secret bytes */
    uint64_t arg;            /* SIGNAL/FLUSH: pieces queued before it; ACK: pieces landed */
} TcpHdr;
static_assert(sizeof(TcpHdr) == 40, "TcpHdr is a wire format");

/* What a receive thread knows besides the regions when it checks a header. */
typedef struct TcpRxState {
    uint32_t peer;           /* the rank at the other end (its HELLO was checked) */
    uint32_t sock;           /* socket index: SIGNAL, FLUSH and ACK come on socket 0 only */
    uint64_t need;           /* count of the last SIGNAL/FLUSH from the peer: counts never drop */
    uint64_t asked;          /* highest count this rank sent the peer in a FLUSH: an ACK above it
                                confirms pieces never sent */
} TcpRxState;

/* What a checked header asks of the receiver; fields by type. */
typedef struct TcpRx {
    int type;                /* TCP_PUT, TCP_SIGNAL, TCP_FLUSH, TCP_ACK or TCP_BYE */
    uint32_t region;         /* PUT/SIGNAL */
    uint64_t off;            /* PUT/SIGNAL */
    uint64_t addr;           /* PUT/SIGNAL: local address, inside the region as registered now */
    bool host;               /* PUT: the region is host memory (NetRegion.host) */
    uint64_t len;            /* PUT: payload bytes, 1..TCP_PIECE */
    uint64_t value;          /* SIGNAL: the 8 bytes to write */
    uint64_t count;          /* SIGNAL/FLUSH: pieces sent before it; ACK: pieces landed */
} TcpRx;

/* MSCCLRT_SOCKET_NSOCKS=-1 (the default): NET_NSOCKS_MANY sockets per pair of ranks where no
 * rank has more than NET_NSOCKS_WIDE_PEERS ranks on other nodes, else NET_NSOCKS_FEW (every
 * socket has two threads, per peer). Across two nodes of one H200 each over loopback TCP, four
 * sockets made 16 MiB-1 GiB 1.4-1.9 times faster than two (c63-c65); eight were slower up to
 * 16 MiB (c64). node_of: every rank's node, 0..nnodes-1. Pure: every rank computes the same. */
#define NET_NSOCKS_FEW 2
#define NET_NSOCKS_MANY 4
#define NET_NSOCKS_WIDE_PEERS 4
int net_nsocks_auto(const int *node_of, int nranks, int nnodes);

/* The socket of a put's piece (the sender's choice): a put of at most TCP_INLINE bytes on socket
 * 0 with the signals; larger ones round-robin by seq (the peer's running piece count) over the
 * nsocks sockets, or over sockets 1..nsocks-1 where control keeps socket 0 for signals and
 * small puts (MSCCLRT_SOCKET_CONTROL; with one socket there is only socket 0). A put of fewer
 * than wide_bytes (MSCCLRT_SOCKET_WIDE_BYTES) uses only the first TCP_NARROW_SOCKS of those:
 * with four sockets, the rooted collectives of 256 KiB-1 MiB (one put of 128-512 KiB) were up
 * to 2 times slower than with two (c66: a socket that gets every fourth piece finds its
 * receive thread asleep), while large puts gain from all of them. On GPUs (c70/c71, median of
 * 4) it keeps alltoall/gather/scatter of 256 KiB at 1.1-1.25x NCCL's time (spread: 1.45-2.1x)
 * but costs all_reduce 256 KiB-16 MiB and reduce_scatter/all_gather 256 KiB 5-30 %, whose plans
 * keep several puts in flight: a rule that tells those apart is still to find. */
#define TCP_NARROW_SOCKS 2
uint32_t tcp_piece_socket(uint64_t put_bytes, uint32_t seq, uint32_t nsocks, bool control,
                          uint64_t wide_bytes);

/* The wide_bytes a put passes to tcp_piece_socket: wide_bytes, or 0 (every socket) where
 * spread_busy (MSCCLRT_SOCKET_SPREAD_BUSY) is on and the peer was not idle (other puts queued or
 * being written: a plan's pieces in flight together, e.g. allreduce/hier_pipe's four 128 KiB
 * pieces at 1 MiB, which were faster spread over four sockets), so that only a lone put (a
 * rooted collective's, an alltoall's of 256 KiB) keeps to the first sockets. tcp_put asks
 * whether the peer is idle only where the answer matters (tcp_spread_asks). Pure. */
static inline bool tcp_spread_asks(uint64_t put_bytes, uint64_t wide_bytes, bool spread_busy) {
    return spread_busy && put_bytes > TCP_INLINE && put_bytes < wide_bytes;
}
static inline uint64_t tcp_put_wide(uint64_t put_bytes, uint64_t wide_bytes, bool spread_busy,
                                    bool idle) {
    return tcp_spread_asks(put_bytes, wide_bytes, spread_busy) && !idle ? 0 : wide_bytes;
}

/* The largest put that may travel with the signal after it in one item
 * (MSCCLRT_SOCKET_PUT_SIGNAL): it must be one piece (at most piece, the sender's piece size)
 * on socket 0, where every signal goes (at most TCP_INLINE bytes, which no setting moves off
 * socket 0 and no split cuts). tcp_joins_signal: whether a put of put_bytes does. Pure. */
static inline uint64_t tcp_join_max(uint64_t piece) {
    return piece < TCP_INLINE ? piece : TCP_INLINE;
}
static inline bool tcp_joins_signal(uint64_t put_bytes, uint64_t piece) {
    return put_bytes > 0 && put_bytes <= tcp_join_max(piece);
}

/* A put's pieces are at least this large when it is split (tcp_piece_bytes) */
#define TCP_SPLIT_MIN (64u << 10)
#define TCP_SPLIT_PIECES 4

/* Whether a put of put_bytes is large enough to be split (tcp_piece_bytes): at least
 * split_min bytes (MSCCLRT_SOCKET_SPLIT_MIN_BYTES) and two pieces of TCP_SPLIT_MIN. The sender
 * asks this before it looks whether the peer's sockets are idle, which takes their locks. */
static inline bool tcp_put_splits(uint64_t put_bytes, uint64_t split_min) {
    return put_bytes >= split_min && put_bytes >= 2ull * TCP_SPLIT_MIN;
}

/* The piece size of a put of put_bytes (the sender's choice; the receiver takes any up to
 * TCP_PIECE): max_piece, or where split (the socket threads have CPUs of their own, so staging,
 * sending and receiving run side by side), nothing is queued for the peer yet (idle) and the put
 * splits (tcp_put_splits with split_min), the put cut into TCP_SPLIT_PIECES pieces of at least
 * TCP_SPLIT_MIN bytes (4 KiB multiples, at most max_piece): a put that alone fills the pipe
 * would otherwise stage, cross and land as one piece, one stage after the other. Smaller puts
 * stay whole: every piece costs the proxy a message (allreduce/hier_pipe's 128 KiB pieces at
 * 1 MiB took 643-872 us cut in two, 497-522 whole; c58). Pure. */
uint64_t tcp_piece_bytes(uint64_t put_bytes, uint64_t max_piece, uint64_t split_min, bool split,
                        bool idle);

/* Whether the thread that posts a message writes it itself when its socket is idle (else the
 * socket's send thread does): a signal or flush always; a piece already in host memory of at
 * most inline_max bytes (MSCCLRT_SOCKET_INLINE_BYTES); a staged piece of at most staged_max
 * bytes (MSCCLRT_SOCKET_STAGED_INLINE_BYTES, at most TCP_INLINE, the most socket 0 carries with
 * the signals) only when its put was not split - the poster waits for the piece's staging
 * copy before it writes, so the pieces of a split put written this way were staged, waited for
 * and sent one after the other on the proxy, the opposite of what the cut is for: all_reduce of 2 MiB
 * (allreduce/hier_pipe's 256 KiB puts, cut into 64 KiB pieces) took 1326 us against 737 with
 * the cut from 512 KiB and NCCL's 805, all_reduce 512 KiB 421 against 296 (c80, 2 x H200,
 * loopback TCP); with the pieces on the send threads 660 and 310 (c81; NCCL 672 and 278).
 * Pure. */
static inline bool tcp_writes_inline(bool put, bool staged, bool split, uint64_t len,
                                     uint64_t inline_max, uint64_t staged_max) {
    if (!put) return true;
    return staged ? !split && len <= staged_max && len <= TCP_INLINE : len <= inline_max;
}

/* Checks the per-socket counts that follow a SIGNAL or FLUSH header: nsocks of them, summing to
 * total (the header's arg), none below prev (the counts of the peer's previous SIGNAL/FLUSH:
 * counts never drop). Pure; false: why says what is wrong. */
bool tcp_counts_check(const uint64_t *counts, uint32_t nsocks, uint64_t total,
                      const uint64_t *prev, char *why, size_t whylen);

/* The address of [off, off+len) of region id in regs[0..nregs) (id i+1 is regs[i]; live when
 * its owner is set): true only if the whole span lies inside the region. Overflow-safe. */
bool net_region_span(const NetRegion *regs, uint32_t nregs, uint32_t id, uint64_t off, uint64_t len,
                     uint64_t *addr);
/* Checks a message header (sizeof(TcpHdr) bytes, any alignment) that arrived on an introduced
 * connection, against this rank's regions and st. Pure: the caller holds the regions' lock.
 * true: *rx says what to do; false: why (whylen bytes) says what is wrong, without the peer. */
bool tcp_rx_check(const void *bytes, const TcpRxState *st, const NetRegion *regs, uint32_t nregs,
                  TcpRx *rx, char *why, size_t whylen);

typedef enum {
    TCP_HELLO_OK,            /* *rank and *sock introduce an expected socket */
    TCP_HELLO_MALFORMED,     /* not a hello of this transport and version */
    TCP_HELLO_UNEXPECTED,    /* a rank or socket that does not connect to this rank */
    TCP_HELLO_NSOCKS,        /* a genuine rank (once the secret matched) set up differently */
} TcpHelloVerdict;
/* Checks the header of a HELLO to rank me of nranks (remote[r]: r is on another node; nsocks
 * sockets per pair). The secret that follows is the caller's to compare (boot_secret_equal).
 * Pure, like tcp_rx_check. */
TcpHelloVerdict tcp_hello_check(const void *bytes, uint32_t me, uint32_t nranks, const bool *remote,
                                uint32_t nsocks, uint32_t *rank, uint32_t *sock, char *why,
                                size_t whylen);

/* ==== the socket backend's listener during setup (net_accept.c) ================================ */
#define NET_PENDING_MAX 256      /* connections without a whole HELLO yet; a newer one evicts the oldest */
#define NET_HELLO_WAIT_MS 5000   /* from accept to a whole HELLO: an absolute deadline per connection */
#define NET_ACCEPT_PAUSE_MS 100  /* descriptors ran out and nothing could be evicted: stop accepting */

typedef struct NetPending NetPending;
typedef struct NetAccept {
    int lfd;                 /* borrowed listener (made non-blocking) */
    int me, nranks, nsocks;  /* this rank, the group, sockets per pair */
    const bool *remote;      /* borrowed, [nranks] */
    const uint8_t *secret;   /* borrowed, TCP_SECRET bytes: the group's (boot_secret) */
    int *fd;                 /* owned, [nranks * nsocks]: introduced sockets, -1 until then */
    int missing;             /* sockets of lower remote ranks not yet introduced */
    NetPending *pend;        /* owned, [NET_PENDING_MAX] */
    int npend;               /* slots of pend in use */
    int64_t pause_until;     /* not accepting before this (net_now_ms) */
    int refused;             /* connections closed without a valid hello, for the setup's error */
    BootRate rate;           /* WARNs about them */
} NetAccept;

/* Starts serving listener lfd for rank me: expects nsocks sockets from every remote rank below
 * me. Borrows remote and secret. */
mscclrt_result net_accept_init(NetAccept *a, int lfd, int me, int nranks, int nsocks,
                               const bool *remote, const uint8_t *secret);
/* Waits until something happens on the listener or a pending connection, on fd (>= 0) for
 * events, or until `until` (net_now_ms), and handles it: accepts, reads hellos, closes overdue
 * or surplus pending connections. Fails only when a rank that knows the secret was set up
 * differently (MSCCLRT_SOCKET_NSOCKS). */
mscclrt_result net_accept_step(NetAccept *a, int64_t until, int fd, short events);
/* Rank's socket sock, introduced (or -1); the caller owns it from here on. */
int net_accept_take(NetAccept *a, int rank, int sock);
/* Closes everything not taken. */
void net_accept_fini(NetAccept *a);

/* ==== sockets (net_sock.c) ================================================================== */
typedef struct NetAddr {             /* an exchanged listen address; wire format */
    uint32_t magic;                  /* NET_ADDR_MAGIC */
    uint16_t version, family;        /* AF_INET or AF_INET6 */
    uint16_t port;                   /* host order */
    uint16_t reserved;
    uint8_t addr[16];
    char ifname[16];                 /* for messages */
} NetAddr;
#define NET_ADDR_MAGIC 0x4d534e41u   /* "MSNA" */

/* The address of the first interface that is up and passes ifname (a NetMatchList text; empty:
 * not loopback, not docker*), falling back to loopback. */
mscclrt_result net_sock_pick(const char *ifname, NetAddr *a);
/* A listening TCP socket on a's address, port chosen by the kernel (written into a->port). */
mscclrt_result net_sock_listen(NetAddr *a, int *fd);
/* Connects to a within timeout_ms; peer names the rank for messages. */
mscclrt_result net_sock_connect(const NetAddr *a, int peer, int timeout_ms, int *fd);
/* How net_sock_connect_wait waits: until `until` (net_now_ms) or fd becomes writable, whichever
 * comes first (returning early is fine). */
typedef void (*NetWaitFn)(void *ctx, int fd, int64_t until);
/* net_sock_connect before deadline (net_now_ms; timeout_ms only names the limit in the error),
 * waiting through wait(ctx, ...) so the caller keeps serving its listener (NULL: plain poll). */
mscclrt_result net_sock_connect_wait(const NetAddr *a, int peer, int64_t deadline, int timeout_ms,
                                     NetWaitFn wait, void *ctx, int *fd);
int64_t net_now_ms(void);            /* CLOCK_MONOTONIC */
/* All of buf, waiting at most timeout_ms for progress (< 0: forever). 0, or -1 with errno
 * (ETIMEDOUT when the wait ran out, EPIPE when the peer closed). */
int net_sock_send_all(int fd, const void *buf, size_t len, int timeout_ms);
int net_sock_recv_all(int fd, void *buf, size_t len, int timeout_ms);
struct iovec;
/* Writes the bytes of iov[0..iovcnt) (at most 4 entries) from byte *done on, advancing *done.
 * wait_ms < 0: waits for progress forever; > 0: at most that long (ETIMEDOUT); 0: never waits:
 * -1 with errno EAGAIN once the socket would block, *done telling how far it got. 0, or -1
 * with errno otherwise (as net_sock_send_all). */
int net_sock_sendv(int fd, const struct iovec *iov, int iovcnt, size_t *done, int wait_ms);
/* net_sock_recv_all without a timeout, but while nothing has arrived it polls the socket for up
 * to spin_us microseconds (yielding the CPU between tries) before it sleeps in poll(): a
 * receiver woken by the kernel loses tens of microseconds per message. */
int net_sock_recv_spin(int fd, void *buf, size_t len, int spin_us);
void net_sock_format(const NetAddr *a, char *buf, size_t len);

#endif

/*
 * boot_internal.h - what the bootstrap's files share and nobody else sees: the wire formats
 * (each starting with magic + version, sizes fixed by static_assert), addresses, socket
 * helpers (boot_net.c) and the root thread (boot_root.c).
 */
#ifndef MSCCLRT_BOOT_INTERNAL_H
#define MSCCLRT_BOOT_INTERNAL_H

#include <assert.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bootstrap/bootstrap.h"

#define BOOT_MAGIC   0x4d534254u  /* "MSBT" */
#define BOOT_VERSION 2             /* 2: the root may answer BK_BUSY */
#define BOOT_SECRET_BYTES 32
#define BOOT_HOSTID_BYTES 128      /* host identity string, NUL-padded */
#define BOOT_MAX_RANKS 65536
#define BOOT_MAX_MSG ((size_t)16 << 20)    /* bytes of one message; the largest the runtime sends is a
                                              few KiB of setup data. Larger is refused by the sender
                                              (INVALID_ARG) and, announced, by the receiver */
#define BOOT_MSG_CHUNK ((size_t)64 << 10)  /* receive buffers start this large and double as bytes
                                              arrive: an announced size reserves nothing */
#define BOOT_QUEUE_MAX ((size_t)32 << 20)  /* unrequested bytes queued from one peer; beyond it, that
                                              peer's connection is not read (TCP flow control holds
                                              the sender) until some are asked for */
/* Connections that have not yet proven the secret (to the root, or to a rank's listener) come
 * from anyone who can reach the port: */
#define BOOT_PENDING_MAX 256       /* at most this many wait at once; a newer one evicts the oldest */
#define BOOT_HELLO_WAIT_MS 3000    /* time a connection has to present its hello / BootConnect */
#define BOOT_ACCEPT_PAUSE_MS 100   /* descriptors ran out and nothing can be evicted: stop accepting
                                      this long (instead of spinning on a listener that stays readable) */
#define BOOT_WARN_EVERY_MS 1000    /* refusals are logged at WARN at most once per this period */
#define BOOT_DIRECT_MAX 64         /* allgather all-to-all up to this many ranks, else a ring
                                      (keeps a rank's sockets O(1) in large groups) */

/* Message kinds; every wire struct names its kind right after magic and version. */
enum {
    BK_HELLO = 1,  /* rank -> root: BootHello */
    BK_TABLE,      /* root -> rank: BootReply + nranks BootPeerWire */
    BK_ABORT,      /* root -> rank: BootReply + text (len bytes) */
    BK_CONNECT,    /* rank -> rank, once per connection: BootConnect */
    BK_USER,       /* rank -> rank: BootMsgHdr + payload, tag = user tag */
    BK_COLL,       /* rank -> rank: BootMsgHdr + payload, tag = collective sequence number */
    BK_BUSY,       /* root -> rank: BootReply alone: the root closed this connection before it could
                      read the hello (too many waiting, out of descriptors); connect again */
};

/* An IPv4/IPv6 address and port on the wire: family 4 or 6, port in host order of nobody,
 * i.e. always big-endian bytes, address bytes in network order. */
typedef struct BootAddr {
    uint8_t family;        /* 4 or 6 */
    uint8_t pad;
    uint8_t port_be[2];    /* big-endian */
    uint8_t addr[16];      /* first 4 bytes for IPv4 */
} BootAddr;
static_assert(sizeof(BootAddr) == 20, "BootAddr is a wire format");

/* The layout inside BootId.bytes. */
typedef struct BootIdWire {
    uint32_t magic;
    uint16_t version;
    uint16_t flags;        /* 0 */
    BootAddr root;         /* where the root listens */
    uint8_t secret[BOOT_SECRET_BYTES];
    uint8_t reserved[BOOT_ID_BYTES - 8 - 20 - BOOT_SECRET_BYTES];
} BootIdWire;
static_assert(sizeof(BootIdWire) == BOOT_ID_BYTES, "BootIdWire must fill BootId exactly");

/* Rank -> root, the first and only thing a rank sends on its root connection. */
typedef struct BootHello {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;         /* BK_HELLO */
    uint8_t secret[BOOT_SECRET_BYTES];
    int32_t rank, nranks;
    uint32_t wait_ms;      /* how much longer this rank will wait for the table */
    int32_t pid;
    BootAddr listen;       /* where this rank accepts peer connections */
    char hostid[BOOT_HOSTID_BYTES];
} BootHello;
static_assert(sizeof(BootHello) == 8 + 32 + 16 + 20 + BOOT_HOSTID_BYTES, "BootHello is a wire format");

/* Root -> rank: header of the answer. */
typedef struct BootReply {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;         /* BK_TABLE, BK_ABORT or BK_BUSY */
    int32_t arg;           /* BK_TABLE: entries that follow; BK_ABORT: the mscclrt_result */
    uint32_t len;          /* bytes that follow (BK_ABORT: text including its NUL) */
} BootReply;
static_assert(sizeof(BootReply) == 16, "BootReply is a wire format");

/* One rank in the table. */
typedef struct BootPeerWire {
    BootAddr listen;
    int32_t pid;
    char hostid[BOOT_HOSTID_BYTES];
} BootPeerWire;
static_assert(sizeof(BootPeerWire) == 20 + 4 + BOOT_HOSTID_BYTES, "BootPeerWire is a wire format");

/* Rank -> rank, first bytes of every peer connection. */
typedef struct BootConnect {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;         /* BK_CONNECT */
    uint8_t secret[BOOT_SECRET_BYTES];
    int32_t rank, nranks;  /* the connecting rank */
} BootConnect;
static_assert(sizeof(BootConnect) == 48, "BootConnect is a wire format");

/* Rank -> rank: header of each message. */
typedef struct BootMsgHdr {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;         /* BK_USER or BK_COLL */
    int32_t src;           /* sender rank; must match the connection's */
    int32_t tag;
    uint64_t len;          /* payload bytes that follow */
} BootMsgHdr;
static_assert(sizeof(BootMsgHdr) == 24, "BootMsgHdr is a wire format");

/* ---- boot_net.c ---------------------------------------------------------------------------- */
typedef union BootSockAddr {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
    struct sockaddr_storage ss;
} BootSockAddr;

int64_t boot_now_ms(void);                              /* CLOCK_MONOTONIC */
void boot_addr_to_sock(const BootAddr *a, BootSockAddr *s, socklen_t *len);
void boot_addr_from_sock(BootAddr *a, const BootSockAddr *s);
void boot_addr_str(const BootAddr *a, char *buf, size_t n);  /* "1.2.3.4:5" or "[::1]:5" */
/* Resolves host (name or literal) and port into a. */
mscclrt_result boot_addr_resolve(BootAddr *a, const char *host, int port, const char *what);
/* The address the root should listen on for a unique id (see boot_get_unique_id). */
mscclrt_result boot_addr_pick_local(BootAddr *a);
/* Socket bound to a (port 0 = any), listening, non-blocking, close-on-exec; a gets the port. */
mscclrt_result boot_listen(const BootAddr *a, bool reuse, int *fd_out, BootAddr *bound);
/* Connects to a, retrying refusals until deadline; returns a blocking socket. who names the
 * other end in errors ("root", "rank 3"). */
mscclrt_result boot_connect(const BootAddr *a, int64_t deadline, const char *who, int *fd_out);
/* How boot_connect_wait waits: until `until` (boot_now_ms) or fd (>= 0, connecting) becomes
 * writable, whichever is first (returning early is fine); fd -1: the pause between attempts. */
typedef void (*BootWaitFn)(void *ctx, int fd, int64_t until);
/* boot_connect that waits through wait(ctx, ...) (NULL: plain poll), so the caller keeps
 * serving its own sockets while a connection is under way. */
mscclrt_result boot_connect_wait(const BootAddr *a, int64_t deadline, const char *who, BootWaitFn wait,
                                 void *ctx, int *fd_out);
/* Writes/reads exactly n bytes on a (possibly non-blocking) socket before deadline. EOF on read
 * is MSCCLRT_ERR_REMOTE. */
mscclrt_result boot_write_all(int fd, const void *buf, size_t n, int64_t deadline, const char *who);
mscclrt_result boot_read_all(int fd, void *buf, size_t n, int64_t deadline, const char *who);
/* Same without a message: the caller explains (SUCCESS, TIMEOUT or REMOTE with errno set);
 * boot_write_raw's *left (may be NULL) gets the bytes it did not write. */
mscclrt_result boot_read_raw(int fd, void *buf, size_t n, int64_t deadline);
mscclrt_result boot_write_raw(int fd, const void *buf, size_t n, int64_t deadline, size_t *left);
int boot_set_nonblock(int fd, bool on);
/* Secret of an environment rendezvous: from text (MSCCLRT_BOOT_SECRET) or the port. */
void boot_derive_secret(uint8_t out[BOOT_SECRET_BYTES], const char *text);
/* "3, 5-7, 9" into buf (truncated with "..."), from ascending ranks. */
void boot_rank_list(char *buf, size_t n, const int *ranks, int count);
/* boot_secret_equal, BootRate/BOOT_WARN_LIMITED and boot_accept_exhausted: bootstrap.h (the
 * network transport's listener uses them too) */

/* ---- bootstrap.c (for tests) ---------------------------------------------------------------- */
/* Groups larger than nranks use the ring allgather (default BOOT_DIRECT_MAX). Every rank of a
 * group must use the same value. */
void boot_set_ring_above(Boot *b, int nranks);
/* This Boot's receive limits instead of BOOT_MAX_MSG and BOOT_QUEUE_MAX (tests use small ones). */
void boot_set_limits(Boot *b, size_t max_msg, size_t queue_max);
/* Bytes of unrequested messages from peer now queued (payload and bookkeeping). */
size_t boot_queued_bytes(const Boot *b, int peer);
/* Where rank listens for its peers (the root's table). */
const BootAddr *boot_listen_addr(const Boot *b, int rank);
/* Writes n raw bytes on this rank's connection to peer (opened and authenticated first if
 * needed): lets tests forge message headers. */
mscclrt_result boot_send_raw(Boot *b, int peer, const void *buf, size_t n);

/* ---- boot_root.c --------------------------------------------------------------------------- */
/* Starts the detached root thread on an already-listening socket (takes ownership of fd).
 * first_wait_ms bounds the wait for the first hello. */
mscclrt_result boot_root_start(int fd, const BootAddr *where, const uint8_t *secret, int first_wait_ms);

#endif

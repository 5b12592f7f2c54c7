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
    mscclrt_result (*flush)(Net *n);
} NetBackend;

struct Net {
    Boot *boot;              /* borrowed */
    int rank, nranks;
    bool *remote;            /* [nranks] on another node */
    int nremote;
    NetOptions opt;          /* timeout_ms and nsocks resolved */
    const NetBackend *be;
    void *be_state;          /* owned by the backend (its close frees it) */
    pthread_mutex_t mu;      /* guards the two tables */
    NetRegion *regs;
    int nregs, capregs;
    NetWindow *wins;         /* [0] unused */
    int nwins, capwins;
    _Atomic int failed;      /* first asynchronous failure (a backend thread's) */
    char err[512];
};

extern const NetBackend net_tcp;
extern const NetBackend net_ib;

/* Records the first asynchronous failure (formatted); later ones only go to the log. */
void net_set_error(Net *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* MSCCLRT_SUCCESS, or MSCCLRT_ERR_REMOTE carrying the recorded failure. */
mscclrt_result net_check(Net *n);
/* Copies region id's fields out under the lock; false when id names no live region. */
bool net_region_get(Net *n, uint32_t id, NetRegion *out);
/* Whether the ib backend can run here (libibverbs loads and a device that passes
 * MSCCLRT_IB_HCA has an ACTIVE port). Quiet: logs nothing. */
bool net_ib_usable(void);

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
/* All of buf, waiting at most timeout_ms for progress (< 0: forever). 0, or -1 with errno
 * (ETIMEDOUT when the wait ran out, EPIPE when the peer closed). */
int net_sock_send_all(int fd, const void *buf, size_t len, int timeout_ms);
int net_sock_recv_all(int fd, void *buf, size_t len, int timeout_ms);
void net_sock_format(const NetAddr *a, char *buf, size_t len);

#endif

/*
 * net_tcp.h - the socket backend's shared state, private to runtime/net: a peer's sockets with
 * their send queues, staging slots and threads, the receive side's landed counts and the
 * signals waiting for them, and the small helpers the three parts use. The backend's design is
 * described in net_tcp.c (its calls, connection setup and teardown); net_tcp_tx.c sends
 * (inline or through each socket's tx thread) and net_tcp_rx.c receives (each socket's rx
 * thread: pieces landed, signals applied in order, flushes answered).
 */
#ifndef MSCCLRT_NET_TCP_H
#define MSCCLRT_NET_TCP_H

#include "net/net_internal.h"
#include "core/clock.h"
#include "core/cpus.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "cuda/cuda_driver.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define TCP_SLOTS   4                    /* device mode: pinned staging pieces per socket */
#define TCP_RX_SLOTS 2                   /* device mode: pinned receive pieces per socket */
#define TCP_QMAX    64                   /* queued items per socket */
#define TCP_PEND_MAX (1u << 16)          /* a peer's SIGNAL/FLUSH waiting for its data, at most */

typedef struct TcpItem {
    TcpHdr h;
    const void *data;        /* PUT payload (host memory or a staging slot) */
    int slot;                /* staging slot to wait for and free, or -1 */
    uint64_t counts[TCP_SOCKS_MAX];   /* SIGNAL/FLUSH: pieces sent on each socket before it;
                                         a PUT with sig: those of its signal */
    bool sig;                /* a PUT followed in the same write by the SIGNAL sh (its counts in
                                counts): net_put_signal with MSCCLRT_SOCKET_PUT_SIGNAL=1 */
    TcpHdr sh;
    bool split;              /* a PUT piece of a put cut in several (tcp_piece_bytes): never
                                written by the poster (tcp_writes_inline) */
} TcpItem;

typedef struct TcpPeer TcpPeer;

typedef struct TcpSock {
    TcpPeer *peer;
    int idx, fd;
    pthread_t rx, tx;
    bool rx_on, tx_on;
    pthread_mutex_t mu;      /* the queue, slots, ack, sending */
    pthread_cond_t cv;
    TcpItem q[TCP_QMAX];
    unsigned qhead, qtail;   /* qtail - qhead items queued; qhead's is being sent */
    size_t hdone;            /* bytes of qhead's message already written (header first) */
    bool sending;            /* a thread (tx, or the caller inline) is writing to fd */
    bool ack_due;            /* rx threads ask tx to send an ACK of ack_value (never block) */
    uint64_t ack_value;
    bool dead;               /* tx stopped after a failure: producers stop waiting */
    bool hsrc_used;          /* device mode: a put from a host source went on this socket
                                (net_flush_sources then waits for the queue to drain too) */
    /* device mode */
    char *tx_stage, *rx_stage;   /* pinned, TCP_SLOTS and TCP_RX_SLOTS pieces */
    bool busy[TCP_SLOTS];
    CuEvent ev[TCP_SLOTS];
    CuStream tx_stream;
    CuEvent rx_ev[TCP_RX_SLOTS]; /* rx thread only: the slot's HtoD copy, once rx_used */
    bool rx_used[TCP_RX_SLOTS];
    unsigned rx_next;            /* the slot the next piece is read into */
} TcpSock;

typedef struct TcpPending {
    int type;
    uint32_t region;
    uint64_t off, value, need;
    uint64_t need_s[TCP_SOCKS_MAX];   /* pieces to land on each socket first */
} TcpPending;

struct TcpPeer {
    struct Tcp *t;
    int rank;
    TcpSock s[TCP_SOCKS_MAX];
    uint64_t sent;           /* pieces queued (proxy thread only) */
    uint64_t sent_s[TCP_SOCKS_MAX];   /* of them, per socket (proxy thread only) */
    unsigned next;           /* round-robin socket of the next piece */
    pthread_mutex_t mu;      /* landed, pending, acked, gone */
    pthread_cond_t cv;
    CuStream h2d;            /* device mode: every piece's HtoD copy and every signal, in order */
    bool h2d_busy;           /* device mode: h2d may hold copies not known complete (a piece
                                into device memory was queued since it was last found idle) */
    uint64_t landed;         /* pieces from this peer written into our memory */
    uint64_t landed_s[TCP_SOCKS_MAX]; /* of them, per socket */
    uint64_t need_s[TCP_SOCKS_MAX];   /* per-socket counts of the last SIGNAL/FLUSH received */
    TcpPending *pend;        /* FIFO of SIGNAL/FLUSH waiting for their pieces (landed_before) */
    size_t phead, ptail, pcap;
    uint64_t need;           /* count of the last SIGNAL/FLUSH received (tcp_rx_check) */
    uint64_t asked;          /* highest count sent in a FLUSH: an ACK may not exceed it */
    uint64_t acked;          /* highest ACK from the peer */
    bool gone;               /* the peer said BYE */
};

typedef struct Tcp {
    Net *n;
    TcpPeer **peers;         /* [nranks]; NULL for ranks on this node */
    int nsocks;
    int spin_us;             /* MSCCLRT_SOCKET_SPIN_US */
    int tx_spin_us;          /* MSCCLRT_SOCKET_TX_SPIN_US, resolved */
    int split;               /* MSCCLRT_SOCKET_SPLIT, resolved to 0 or 1 (tcp_piece_bytes) */
    uint64_t split_min;      /* MSCCLRT_SOCKET_SPLIT_MIN_BYTES: smaller puts stay whole */
    uint64_t wide;           /* MSCCLRT_SOCKET_WIDE_BYTES: smaller puts use the first sockets */
    bool spread_busy;        /* MSCCLRT_SOCKET_SPREAD_BUSY: ... unless others are in flight */
    uint64_t piece;          /* MSCCLRT_SOCKET_PIECE_BYTES: this rank's pieces, 1..TCP_PIECE */
    bool control;            /* MSCCLRT_SOCKET_CONTROL: socket 0 kept for signals, small puts */
    uint64_t inline_max;     /* MSCCLRT_SOCKET_INLINE_BYTES: ready pieces the poster writes */
    uint64_t staged_inline;  /* MSCCLRT_SOCKET_STAGED_INLINE_BYTES: staged ones it writes */
    bool put_signal;         /* MSCCLRT_SOCKET_PUT_SIGNAL: a one-piece put and its signal as one */
    _Atomic int stopping;
    CuContext ctx;
} Tcp;

static inline Tcp *tcp_of(Net *n) { return n->be_state; }

static inline double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A deadline timeout_ms from now, for pthread_cond_timedwait (CLOCK_REALTIME). */
static inline struct timespec deadline_in(int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
    return ts;
}

static inline TcpHdr hdr(Net *n, int type) {
    return (TcpHdr){.magic = TCP_MAGIC, .version = TCP_VERSION, .type = (uint16_t)type,
                    .rank = (uint32_t)n->rank};
}

/* Trace timestamps: microseconds of CLOCK_MONOTONIC, comparable between processes of a host. */
static inline double trace_us(void) { return rt_now_s() * 1e6; }

static inline const char *cu_name(CuResult r) {
    const char *s = "?";
    if (cu.cuGetErrorName) cu.cuGetErrorName(r, &s);
    return s;
}

static inline void sock_dead(TcpSock *s) {
    pthread_mutex_lock(&s->mu);
    s->dead = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    TcpPeer *p = s->peer;   /* wake a flush waiting for this peer */
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* ---- receiving (net_tcp_rx.c) ---- */

/* A socket's rx thread (arg: its TcpSock): reads messages until the socket closes or the
 * transport stops, lands pieces, applies signals and answers flushes in order. */
void *tcp_rx_main(void *arg);

/* ---- sending (net_tcp_tx.c) ---- */

/* A socket's tx thread (arg: its TcpSock): sends what is queued once its staging copy is done. */
void *tcp_tx_main(void *arg);
/* Waits (s->mu held) until s's queue has room and, with want_slot, a free staging slot: the
 * slot's index (0 without want_slot), or -1 when the socket died or the timeout passed. */
int tcp_wait_room(Tcp *t, TcpSock *s, bool want_slot);
/* Writes it at once where s is idle and it may go inline, else queues it for the tx thread;
 * s->mu held (room made by tcp_wait_room), unlocked on return. */
mscclrt_result tcp_post(Tcp *t, TcpSock *s, const TcpItem *it);
/* Locks s, waits for room and posts it: an item that needs no staging slot (host data, a
 * signal, a flush). */
mscclrt_result tcp_enqueue(Tcp *t, TcpSock *s, const TcpItem *it);
/* Whether nothing is queued or being written on any of p's sockets. */
bool tcp_peer_idle(Tcp *t, TcpPeer *p);

#endif

/*
 * net_tcp.c - the "socket" backend: port-channel data between nodes over TCP.
 *
 * Connections: every rank listens on one address (net_sock_pick) and publishes it with a
 * bootstrap allgather; for each pair of ranks on different nodes the lower rank opens nsocks
 * connections to the higher one and introduces each with a HELLO (rank, socket index, socket
 * count, the group's secret). A rank first connects to the ranks above it, then waits for those
 * below, all before one deadline (MSCCLRT_NET_TIMEOUT_MS), and serves its listener throughout
 * (net_accept.c: every pending connection read at once, each with an absolute hello deadline,
 * at most NET_PENDING_MAX of them), so neither the order of ranks nor strangers connecting to
 * the port can stall the setup past its timeout.
 *
 * Threads: each socket has a sender (tx) and a receiver (rx) thread. A put is cut into pieces of
 * MSCCLRT_SOCKET_PIECE_BYTES (at most TCP_PIECE, what a receiver accepts) spread round-robin over
 * the peer's sockets (a put of at most TCP_INLINE bytes goes on socket 0, with the signals that
 * follow it; with MSCCLRT_SOCKET_CONTROL=1 and 2 sockets or more larger puts avoid socket 0, so
 * signals never wait behind their pieces at the sender); in device mode each piece is first copied device->pinned host with
 * cuMemcpyDtoHAsync into one of the socket's TCP_SLOTS staging slots, unless its source is a
 * registered host source (net_reg_host_src, or a region of net_reg_host: pinned host memory the
 * GPU wrote through its mapping), which is sent as it is. A signal, a flush, a staged piece of
 * at most TCP_INLINE bytes or a ready one (host source) of at most MSCCLRT_SOCKET_INLINE_BYTES,
 * for a socket that is idle (nothing queued, nobody writing), is written by the calling (proxy)
 * thread itself, with one sendmsg that never blocks: waking the tx thread would cost more than
 * the message (what the socket does not take at once is left to the tx thread). Everything
 * else is queued and the tx thread sends it once its staging copy's event completes (so
 * copies and sends overlap). The rx thread polls its socket for
 * MSCCLRT_SOCKET_SPIN_US (200 us) after a message before it sleeps in poll(): back-to-back calls
 * then find it awake. It reads a piece straight into host memory (host_mem mode, or a region of
 * net_reg_host), or into one of its TCP_RX_SLOTS pinned slots and then cuMemcpyHtoDAsync into the
 * target on the peer's one receive stream, without waiting: the piece counts as landed once its
 * copy is queued, a signal is a cuStreamWriteValue64 queued behind it on the same stream (so the
 * GPU sees the data before the flag, with no host round trip per message), and a flush's ACK
 * waits for the stream. A slot is reused only after its copy's event completed.
 *
 * Ordering across sockets: the sender counts the pieces it queued per peer and per socket; a
 * SIGNAL or FLUSH carries the total ("need") and, after its header, each socket's count, and
 * always travels on socket 0, so they stay in issue order. The receiver counts the pieces that
 * landed per socket and applies a SIGNAL (writes the value) or answers a FLUSH (ACK) only once
 * every socket's count is reached: a total alone would let a piece of a later put, on a socket
 * that ran ahead, stand in for an earlier piece still on its way. net_flush waits for every
 * peer's ACK; a plan's flush (net_flush_sources) waits only until the puts' sources have been
 * read (the staging copies completed, or in host mode the queued messages written).
 *
 * Wire: every message starts with a TcpHdr (magic, version, type, sender rank, region, offset,
 * length, argument), checked by the receiver against its registered regions before it touches
 * memory (net_wire.c: pure functions, fuzzed by tests/fuzz/fuzz_net.c); a PUT's payload follows.
 * Failures (a closed connection, a malformed header, a peer that stops reading or answering
 * for MSCCLRT_NET_TIMEOUT_MS) are recorded once with the peer's rank and returned by the next
 * call; a clean shutdown sends BYE first so the peer knows the close is not a failure.
 *
 * Tracing: at MSCCLRT_DEBUG=TRACE (subsystem XPORT) every stage of a message logs its time in
 * microseconds of CLOCK_MONOTONIC ("t=..."), which processes of one host share: posted, sent
 * inline or queued, staged and sent by the tx thread; a header received, a piece landed (its
 * copy queued), a signal applied, a flush acked, a flush confirmed by every peer.
 */
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
    uint64_t counts[TCP_SOCKS_MAX];   /* SIGNAL/FLUSH: pieces sent on each socket before it */
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
    _Atomic int stopping;
    CuContext ctx;
} Tcp;

static Tcp *tcp_of(Net *n) { return n->be_state; }

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A deadline timeout_ms from now, for pthread_cond_timedwait (CLOCK_REALTIME). */
static struct timespec deadline_in(int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
    return ts;
}

static TcpHdr hdr(Net *n, int type) {
    return (TcpHdr){.magic = TCP_MAGIC, .version = TCP_VERSION, .type = (uint16_t)type,
                    .rank = (uint32_t)n->rank};
}

/* Trace timestamps: microseconds of CLOCK_MONOTONIC, comparable between processes of a host. */
static double trace_us(void) { return rt_now_s() * 1e6; }

static const char *cu_name(CuResult r) {
    const char *s = "?";
    if (cu.cuGetErrorName) cu.cuGetErrorName(r, &s);
    return s;
}

static void sock_dead(TcpSock *s) {
    pthread_mutex_lock(&s->mu);
    s->dead = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    TcpPeer *p = s->peer;   /* wake a flush waiting for this peer */
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* ==== receiving ============================================================================= */

/* Whether every piece sent before e has landed: each socket's own count, since pieces of later
 * puts on one socket may land before earlier pieces on another. p->mu held. */
static bool landed_before(const TcpPeer *p, const TcpPending *e) {
    for (int i = 0; i < p->t->nsocks; i++)
        if (p->landed_s[i] < e->need_s[i]) return false;
    return true;
}

/* Device mode: a signal to host memory (a region of net_reg_host, e.g. the native kernels'
 * counters for senders on other nodes) is written by this thread at once when every piece
 * before it is in memory already: none went through p->h2d since that stream was last idle.
 * The GPU polls that memory through its mapping, so the signal costs one store instead of a
 * cuStreamWriteValue64 (a driver call on the core the rank shares with its progress threads,
 * then the stream's turn on the GPU), twice per piece of the native send/recv across nodes.
 * p->mu held. */
static bool signal_direct(TcpPeer *p, bool host) {
    if (!host) return false;
    if (p->h2d_busy && cu.cuStreamQuery(p->h2d) == CU_OK) p->h2d_busy = false;
    return !p->h2d_busy;
}

/* Applies the pending entries whose data has landed; p->mu held. Returns false on a failure.
 * Device mode: a signal is queued on p->h2d behind the copies of the pieces it counts (they
 * were queued before landed grew), or written at once (signal_direct); a flush is answered
 * once that stream has completed. */
static bool pending_run(TcpPeer *p) {
    Net *n = p->t->n;
    while (p->phead != p->ptail) {
        TcpPending *e = &p->pend[p->phead % p->pcap];
        if (!landed_before(p, e)) break;
        if (e->type == TCP_SIGNAL) {
            /* checked on arrival; checked again now: the region may have been released since */
            uint64_t addr;
            bool host = false;
            if (!net_region_addr(n, e->region, e->off, 8, &addr, &host)) {
                net_set_error(n, "net: rank %d signalled offset %llu of region %u, which this "
                              "rank no longer has registered that large", p->rank,
                              (unsigned long long)e->off, e->region);
                return false;
            }
            if (n->opt.host_mem || signal_direct(p, host)) {
                __atomic_store_n((uint64_t *)(uintptr_t)addr, e->value, __ATOMIC_RELEASE);
            } else {
                CuResult cr = cu.cuStreamWriteValue64(p->h2d, addr, e->value, 0);
                if (cr != CU_OK) {
                    net_set_error(n, "net: writing rank %d's signal: cuStreamWriteValue64: %s",
                                  p->rank, cu_name(cr));
                    return false;
                }
            }
            LOG_TRACE(LOG_SUB_XPORT, "net: signal %llu from rank %d (after %llu pieces) applied "
                      "t=%.1f", (unsigned long long)e->value, p->rank,
                      (unsigned long long)e->need, trace_us());
        } else {   /* FLUSH: socket 0's tx thread answers */
            if (!n->opt.host_mem) {   /* "landed" means queued: the ACK promises completion */
                CuResult cr = cu_stream_wait(p->h2d);
                if (cr != CU_OK) {
                    net_set_error(n, "net: copying rank %d's data into device memory: "
                                  "cuMemcpyHtoDAsync: %s", p->rank, cu_name(cr));
                    return false;
                }
                p->h2d_busy = false;
            }
            LOG_TRACE(LOG_SUB_XPORT, "net: flush from rank %d (%llu pieces) acked t=%.1f",
                      p->rank, (unsigned long long)e->need, trace_us());
            TcpSock *s0 = &p->s[0];
            pthread_mutex_lock(&s0->mu);
            s0->ack_due = true;
            if (e->need > s0->ack_value) s0->ack_value = e->need;
            pthread_cond_broadcast(&s0->cv);
            pthread_mutex_unlock(&s0->mu);
        }
        p->phead++;
    }
    return true;
}

static bool pending_push(TcpPeer *p, const TcpPending *e) {
    if (p->ptail - p->phead >= TCP_PEND_MAX) {
        net_set_error(p->t->n, "net: rank %d has %u signals and flushes waiting for data it has "
                      "not sent", p->rank, TCP_PEND_MAX);
        return false;
    }
    if (p->ptail - p->phead == p->pcap) {
        size_t cap = p->pcap ? p->pcap * 2 : 64;
        TcpPending *np = malloc(cap * sizeof *np);
        if (!np) {
            net_set_error(p->t->n, "net: out of memory queueing rank %d's signals", p->rank);
            return false;
        }
        for (size_t i = 0; i < p->pcap; i++) np[i] = p->pend[(p->phead + i) % p->pcap];
        p->ptail -= p->phead;
        p->phead = 0;
        free(p->pend);
        p->pend = np;
        p->pcap = cap;
    }
    p->pend[p->ptail++ % p->pcap] = *e;
    return true;
}

/* Checks a header from the peer (tcp_rx_check, under the peer's and the tables' locks, in
 * pending_run's order); false: error recorded, naming the peer. */
static bool rx_check(TcpSock *s, const TcpHdr *h, TcpRx *rx) {
    TcpPeer *p = s->peer;
    Net *n = p->t->n;
    char why[256];
    pthread_mutex_lock(&p->mu);
    TcpRxState st = {.peer = (uint32_t)p->rank, .sock = (uint32_t)s->idx, .need = p->need,
                     .asked = p->asked};
    pthread_mutex_lock(&n->mu);
    bool ok = tcp_rx_check(h, &st, n->regs, (uint32_t)n->nregs, rx, why, sizeof why);
    pthread_mutex_unlock(&n->mu);
    if (ok && (rx->type == TCP_SIGNAL || rx->type == TCP_FLUSH)) p->need = rx->count;
    pthread_mutex_unlock(&p->mu);
    if (!ok)
        net_set_error(n, "net: rank %d sent a malformed message on socket %d: %s", p->rank,
                      s->idx, why);
    return ok;
}

/* Receives one checked PUT's payload into its region; false (error recorded) on failure. */
static bool rx_put(TcpSock *s, const TcpRx *rx) {
    TcpPeer *p = s->peer;
    Net *n = p->t->n;
    int to = n->opt.timeout_ms;
    /* host memory (host_mem mode, or a region of pinned host memory the GPU maps, net_reg_host):
     * straight into it; a signal after it then follows the data the GPU reads over its mapping */
    if (n->opt.host_mem || rx->host) {
        if (net_sock_recv_all(s->fd, (void *)(uintptr_t)rx->addr, rx->len, to) != 0)
            goto recv_fail;
    } else {
        const unsigned k = s->rx_next++ % TCP_RX_SLOTS;
        char *stage = s->rx_stage + (size_t)k * TCP_PIECE;
        CuResult cr = s->rx_used[k] ? cu_event_wait(s->rx_ev[k]) : CU_OK;
        if (cr != CU_OK) {
            net_set_error(n, "net: writing a piece from rank %d into device memory: "
                          "cuMemcpyHtoDAsync: %s", p->rank, cu_name(cr));
            return false;
        }
        if (net_sock_recv_all(s->fd, stage, rx->len, to) != 0) goto recv_fail;
        /* queued before landed grows (below): a signal counting this piece is queued after it */
        cr = cu.cuMemcpyHtoDAsync(rx->addr, stage, rx->len, p->h2d);
        if (cr == CU_OK) cr = cu.cuEventRecord(s->rx_ev[k], p->h2d);
        if (cr != CU_OK) {
            net_set_error(n, "net: writing %llu bytes from rank %d into device memory: "
                          "cuMemcpyHtoDAsync: %s", (unsigned long long)rx->len, p->rank,
                          cu_name(cr));
            return false;
        }
        s->rx_used[k] = true;
    }
    pthread_mutex_lock(&p->mu);
    if (!n->opt.host_mem && !rx->host) p->h2d_busy = true;
    p->landed++;
    p->landed_s[s->idx]++;
    LOG_TRACE(LOG_SUB_XPORT, "net: piece %llu from rank %d (%llu bytes at offset %llu of "
              "region %u, socket %d) landed t=%.1f", (unsigned long long)p->landed, p->rank,
              (unsigned long long)rx->len, (unsigned long long)rx->off, rx->region, s->idx,
              trace_us());
    bool ok = pending_run(p);
    pthread_mutex_unlock(&p->mu);
    return ok;
recv_fail:
    if (!atomic_load(&p->t->stopping))
        net_set_error(n, "net: receiving a put from rank %d on socket %d: %s", p->rank, s->idx,
                      errno == EPIPE ? "rank closed its connection in the middle of a message"
                      : errno == ETIMEDOUT ? "the rest of the message did not come within "
                      "MSCCLRT_NET_TIMEOUT_MS" : strerror(errno));
    return false;
}

/* Reads and checks the per-socket counts after a SIGNAL or FLUSH header into e->need_s; false
 * (error recorded, naming the peer) on failure. */
static bool rx_counts(TcpSock *s, TcpPending *e) {
    TcpPeer *p = s->peer;
    Net *n = p->t->n;
    const uint32_t k = (uint32_t)p->t->nsocks;
    if (net_sock_recv_all(s->fd, e->need_s, k * sizeof *e->need_s, n->opt.timeout_ms) != 0) {
        if (!atomic_load(&p->t->stopping))
            net_set_error(n, "net: receiving a signal's counts from rank %d: %s", p->rank,
                          errno == EPIPE ? "rank closed its connection in the middle of a message"
                          : strerror(errno));
        return false;
    }
    char why[200];
    pthread_mutex_lock(&p->mu);   /* only socket 0's thread writes need_s; others read landed */
    bool ok = tcp_counts_check(e->need_s, k, e->need, p->need_s, why, sizeof why);
    if (ok) memcpy(p->need_s, e->need_s, k * sizeof *e->need_s);
    pthread_mutex_unlock(&p->mu);
    if (!ok)
        net_set_error(n, "net: rank %d sent a malformed message on socket %d: the per-socket "
                      "counts after a %s: %s", p->rank, s->idx,
                      e->type == TCP_SIGNAL ? "SIGNAL" : "FLUSH", why);
    return ok;
}

static void *rx_main(void *arg) {
    TcpSock *s = arg;
    TcpPeer *p = s->peer;
    Tcp *t = p->t;
    Net *n = t->n;
    cu_capture_relaxed();   /* its staging copies run beside users' graph captures */
    if (!n->opt.host_mem) cu.cuCtxSetCurrent(t->ctx);
    for (;;) {
        TcpHdr h;
        if (net_sock_recv_spin(s->fd, &h, sizeof h, t->spin_us) != 0) {
            if (atomic_load(&t->stopping)) break;
            pthread_mutex_lock(&p->mu);
            bool gone = p->gone;
            pthread_mutex_unlock(&p->mu);
            if (!gone)
                net_set_error(n, "net: rank %d closed its connection (socket %d)%s%s", p->rank,
                              s->idx, errno == EPIPE ? "" : ": ",
                              errno == EPIPE ? "" : strerror(errno));
            break;
        }
        TcpRx rx;
        if (!rx_check(s, &h, &rx)) break;   /* nothing of it touched memory */
        LOG_TRACE(LOG_SUB_XPORT, "net: message type %u from rank %d on socket %d (len/value "
                  "%llu, count %llu) received t=%.1f", (unsigned)h.type, p->rank, s->idx,
                  (unsigned long long)h.len, (unsigned long long)h.arg, trace_us());
        bool ok = true;
        if (rx.type == TCP_PUT) {
            ok = rx_put(s, &rx);
        } else if (rx.type == TCP_SIGNAL || rx.type == TCP_FLUSH) {
            TcpPending e = {.type = rx.type, .region = rx.region, .off = rx.off,
                            .value = rx.value, .need = rx.count};
            ok = rx_counts(s, &e);
            if (ok) {
                pthread_mutex_lock(&p->mu);
                ok = pending_push(p, &e) && pending_run(p);
                pthread_mutex_unlock(&p->mu);
            }
        } else if (rx.type == TCP_ACK) {
            pthread_mutex_lock(&p->mu);
            if (rx.count > p->acked) p->acked = rx.count;
            pthread_cond_broadcast(&p->cv);
            pthread_mutex_unlock(&p->mu);
        } else {   /* TCP_BYE */
            pthread_mutex_lock(&p->mu);
            p->gone = true;
            pthread_cond_broadcast(&p->cv);
            pthread_mutex_unlock(&p->mu);
        }
        if (!ok) break;
    }
    if (!atomic_load(&t->stopping)) sock_dead(s);   /* wake a flush waiting on this peer */
    return NULL;
}

/* ==== sending =============================================================================== */

/* Writes it's message (its header, then a PUT's payload or a SIGNAL's or FLUSH's per-socket
 * counts) from byte *done on; wait_ms as net_sock_sendv (0: returns -1 with EAGAIN once the
 * socket would block). */
static int send_msg(TcpSock *s, const TcpItem *it, size_t *done, int wait_ms) {
    const bool counted = it->h.type == TCP_SIGNAL || it->h.type == TCP_FLUSH;
    struct iovec iov[2] = {
        {.iov_base = (void *)&it->h, .iov_len = sizeof it->h},
        {.iov_base = counted ? (void *)it->counts : (void *)it->data,
         .iov_len = it->h.type == TCP_PUT ? it->h.len
                  : counted ? (size_t)s->peer->t->nsocks * sizeof it->counts[0] : 0},
    };
    return net_sock_sendv(s->fd, iov, 2, done, wait_ms);
}

/* Records a failed send on s (errno says why) and stops the socket; s->mu not held. */
static void send_failed(TcpSock *s) {
    Tcp *t = s->peer->t;
    if (!atomic_load(&t->stopping))
        net_set_error(t->n, "net: sending to rank %d on socket %d: %s", s->peer->rank, s->idx,
                      errno == ETIMEDOUT ? "the rank took no data within "
                      "MSCCLRT_NET_TIMEOUT_MS (not answering)" : errno == EPIPE ||
                      errno == ECONNRESET ? "the rank closed its connection" :
                      strerror(errno));
    sock_dead(s);
}

/* Whether the send thread of s has nothing to do (s->mu held) */
static bool tx_idle(Tcp *t, const TcpSock *s) {
    return s->sending || (!atomic_load(&t->stopping) && s->qhead == s->qtail && !s->ack_due);
}

static void *tx_main(void *arg) {
    TcpSock *s = arg;
    TcpPeer *p = s->peer;
    Tcp *t = p->t;
    Net *n = t->n;
    const int to = n->opt.timeout_ms;
    cu_capture_relaxed();
    if (!n->opt.host_mem) cu.cuCtxSetCurrent(t->ctx);
    for (;;) {
        pthread_mutex_lock(&s->mu);
        /* an inline write by the caller owns the socket until it is done; off the application's
         * CPUs the thread looks again for tx_spin_us first (yielding), since waking it on an
         * idle CPU costs more than sending a piece */
        if (t->tx_spin_us > 0 && tx_idle(t, s)) {
            const double until = rt_now_s() + t->tx_spin_us * 1e-6;
            while (tx_idle(t, s) && rt_now_s() < until) {
                pthread_mutex_unlock(&s->mu);
                sched_yield();
                pthread_mutex_lock(&s->mu);
            }
        }
        while (tx_idle(t, s)) pthread_cond_wait(&s->cv, &s->mu);
        if (s->ack_due && s->hdone == 0) {   /* acks first (a peer's flush waits on them), but
                                                never inside a message already begun */
            TcpHdr h = hdr(n, TCP_ACK);
            h.arg = s->ack_value;
            s->ack_due = false;
            s->sending = true;
            pthread_mutex_unlock(&s->mu);
            int rc = net_sock_send_all(s->fd, &h, sizeof h, to);
            pthread_mutex_lock(&s->mu);
            s->sending = false;
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
            if (rc != 0) {
                send_failed(s);
                break;
            }
            continue;
        }
        if (s->qhead == s->qtail) {   /* stopping with nothing left: say goodbye */
            pthread_mutex_unlock(&s->mu);
            TcpHdr h = hdr(n, TCP_BYE);
            net_sock_send_all(s->fd, &h, sizeof h, 1000);
            break;
        }
        TcpItem it = s->q[s->qhead % TCP_QMAX];
        size_t done = s->hdone;
        s->sending = true;
        pthread_mutex_unlock(&s->mu);
        if (it.slot >= 0 && done == 0) {   /* a message begun inline was staged already */
            CuResult cr = cu_event_wait(s->ev[it.slot]);
            if (cr != CU_OK) {
                net_set_error(n, "net: staging a put to rank %d: cuMemcpyDtoHAsync: %s",
                              p->rank, cu_name(cr));
                sock_dead(s);
                break;
            }
            LOG_TRACE(LOG_SUB_XPORT, "net: put to rank %d (%llu bytes, socket %d) staged "
                      "t=%.1f", p->rank, (unsigned long long)it.h.len, s->idx, trace_us());
        }
        int rc = send_msg(s, &it, &done, to);
        pthread_mutex_lock(&s->mu);
        s->sending = false;
        if (rc == 0) {
            s->hdone = 0;
            s->qhead++;
            if (it.slot >= 0) s->busy[it.slot] = false;
        }
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        if (rc != 0) {
            send_failed(s);
            break;
        }
        LOG_TRACE(LOG_SUB_XPORT, "net: message type %u to rank %d (len/value %llu, socket %d) "
                  "sent by the tx thread t=%.1f", (unsigned)it.h.type, p->rank,
                  (unsigned long long)it.h.len, s->idx, trace_us());
    }
    return NULL;
}

/* Waits (s->mu held) until the queue has room and, when want_slot, a staging slot is free.
 * Returns the slot (or 0), -1 on failure or timeout (error made). */
static int wait_room(Tcp *t, TcpSock *s, bool want_slot) {
    Net *n = t->n;
    struct timespec dl = deadline_in(n->opt.timeout_ms);
    for (;;) {
        if (s->dead || atomic_load(&n->failed) == 1) {
            pthread_mutex_unlock(&s->mu);
            if (atomic_load(&n->failed) == 1) net_check(n);
            else rt_fail(MSCCLRT_ERR_REMOTE, "net: rank %d: connection to rank %d is broken",
                         n->rank, s->peer->rank);
            pthread_mutex_lock(&s->mu);
            return -1;
        }
        int slot = want_slot ? -1 : 0;
        for (int i = 0; want_slot && i < TCP_SLOTS && slot < 0; i++)
            if (!s->busy[i]) slot = i;
        if (s->qtail - s->qhead < TCP_QMAX && slot >= 0) return slot;
        if (pthread_cond_timedwait(&s->cv, &s->mu, &dl) == ETIMEDOUT) {
            rt_fail(MSCCLRT_ERR_TIMEOUT, "net: rank %d: rank %d took no data on socket %d "
                    "within %d ms (MSCCLRT_NET_TIMEOUT_MS): it is not answering", n->rank,
                    s->peer->rank, s->idx, n->opt.timeout_ms);
            return -1;
        }
    }
}

/* Whether this thread writes it itself when its socket is idle: a signal or flush, a staged
 * piece of at most TCP_INLINE bytes (its copy is waited for first: a larger one would hold the
 * proxy on the copy engine), or a piece already in host memory of at most inline_max bytes. On
 * a core the rank shares with its progress threads (mpirun binds a rank to one) waking the tx
 * thread for a piece costs a scheduler hand-off each, about 20 us of a piece's cycle (c37). */
static bool writes_inline(const Tcp *t, const TcpItem *it) {
    if (it->h.type != TCP_PUT) return true;
    return it->slot >= 0 ? it->h.len <= TCP_INLINE : it->h.len <= t->inline_max;
}

/* Hands it (room made by wait_room; a put's slot staged or being staged) to socket s: written
 * at once by this thread when s is idle and writes_inline (what the socket does not take
 * without blocking is left to the tx thread), else queued for the tx thread. s->mu held;
 * unlocked on return. */
static mscclrt_result post(Tcp *t, TcpSock *s, const TcpItem *it) {
    Net *n = t->n;
    size_t done = 0;
    if (writes_inline(t, it) && !s->sending && s->qhead == s->qtail) {
        s->sending = true;
        pthread_mutex_unlock(&s->mu);
        CuResult cr = it->slot >= 0 ? cu_event_wait(s->ev[it->slot]) : CU_OK;
        int rc = cr == CU_OK ? send_msg(s, it, &done, 0) : 0;
        int err = errno;
        pthread_mutex_lock(&s->mu);
        s->sending = false;
        if (cr == CU_OK && rc == 0) {   /* all of it went: nothing to queue */
            if (it->slot >= 0) s->busy[it->slot] = false;
            pthread_cond_broadcast(&s->cv);   /* the tx thread may owe an ACK */
            pthread_mutex_unlock(&s->mu);
            LOG_TRACE(LOG_SUB_XPORT, "net: message type %u to rank %d (len/value %llu, socket "
                      "%d) sent inline t=%.1f", (unsigned)it->h.type, s->peer->rank,
                      (unsigned long long)it->h.len, s->idx, trace_us());
            return MSCCLRT_SUCCESS;
        }
        if (cr != CU_OK || err != EAGAIN) {
            if (it->slot >= 0) s->busy[it->slot] = false;
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
            if (cr != CU_OK) {
                net_set_error(n, "net: staging a put to rank %d: cuMemcpyDtoHAsync: %s",
                              s->peer->rank, cu_name(cr));
                sock_dead(s);
            } else {
                errno = err;
                send_failed(s);
            }
            mscclrt_result r = net_check(n);
            return r != MSCCLRT_SUCCESS ? r : rt_fail(MSCCLRT_ERR_REMOTE, "net: rank %d: "
                                                      "sending to rank %d failed", n->rank,
                                                      s->peer->rank);
        }
        /* the socket is full: the tx thread writes the rest (the queue was empty, and only
         * this thread queues, so the message becomes the head; hdone belongs to the head and
         * is set here only) */
        s->hdone = done;
    }
    s->q[s->qtail++ % TCP_QMAX] = *it;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    LOG_TRACE(LOG_SUB_XPORT, "net: message type %u to rank %d (len/value %llu, socket %d) "
              "queued (%zu bytes written inline) t=%.1f", (unsigned)it->h.type, s->peer->rank,
              (unsigned long long)it->h.len, s->idx, done, trace_us());
    return MSCCLRT_SUCCESS;
}

static mscclrt_result enqueue(Tcp *t, TcpSock *s, const TcpItem *it) {
    pthread_mutex_lock(&s->mu);
    if (wait_room(t, s, false) < 0) {
        pthread_mutex_unlock(&s->mu);
        return t->n->failed == 1 ? MSCCLRT_ERR_REMOTE : MSCCLRT_ERR_TIMEOUT;
    }
    return post(t, s, it);
}

/* Whether nothing is queued or being written on any of p's sockets */
static bool peer_idle(Tcp *t, TcpPeer *p) {
    bool idle = true;
    for (int i = 0; i < t->nsocks && idle; i++) {
        TcpSock *s = &p->s[i];
        pthread_mutex_lock(&s->mu);
        idle = !s->sending && s->qhead == s->qtail;
        pthread_mutex_unlock(&s->mu);
    }
    return idle;
}

static mscclrt_result tcp_put(Net *n, const NetWindow *w, uint64_t off, uint64_t src,
                              uint64_t bytes) {
    Tcp *t = tcp_of(n);
    TcpPeer *p = t->peers[w->peer];
    /* host memory (host_mem mode, or a host source the GPU writes through its mapping, e.g.
     * the native kernels' outgoing packets) goes straight from the caller's bytes: no staging
     * copy, whose launch and completion cost more than a small message's whole trip */
    const bool host = n->opt.host_mem || net_host_src(n, src, bytes);
    LOG_TRACE(LOG_SUB_XPORT, "net: put of %llu bytes to rank %d posted%s t=%.1f",
              (unsigned long long)bytes, p->rank, host && !n->opt.host_mem ? " (host source)" : "",
              trace_us());
    /* the receiver takes any piece up to TCP_PIECE, so the cut is this rank's own choice */
    const bool split = t->split > 0 && tcp_put_splits(bytes, t->split_min);
    /* whether anything is on its way to the peer (its sockets' locks): asked once, only where
     * the cut or the socket choice depends on it */
    const bool idle = (split || tcp_spread_asks(bytes, t->wide, t->spread_busy)) && peer_idle(t, p);
    const uint64_t piece = tcp_piece_bytes(bytes, t->piece, t->split_min, split, idle);
    const uint64_t wide = tcp_put_wide(bytes, t->wide, t->spread_busy, idle);
    for (uint64_t o = 0; o < bytes; o += piece) {
        uint64_t len = bytes - o < piece ? bytes - o : piece;
        /* a small put travels with the signals on socket 0: the receiver then wakes one
         * thread, which finds the data and its signal in order; large ones spread out, over
         * the sockets after 0 where socket 0 is kept for control (MSCCLRT_SOCKET_CONTROL: a
         * signal, e.g. an acknowledgement going against the data, then never queues behind a
         * large piece; the receiver's per-socket counts keep signals after their data) */
        TcpSock *s = &p->s[tcp_piece_socket(bytes, bytes <= TCP_INLINE ? 0 : p->next++,
                                             (uint32_t)t->nsocks, t->control, wide)];
        TcpItem it = {.h = hdr(n, TCP_PUT), .data = (const void *)(uintptr_t)(src + o),
                      .slot = -1};
        it.h.region = w->id;
        it.h.off = off + o;
        it.h.len = len;
        if (host) {
            if (!n->opt.host_mem) {
                pthread_mutex_lock(&s->mu);
                s->hsrc_used = true;
                pthread_mutex_unlock(&s->mu);
            }
            TRY(enqueue(t, s, &it));
        } else {
            pthread_mutex_lock(&s->mu);
            int slot = wait_room(t, s, true);
            if (slot < 0) {
                pthread_mutex_unlock(&s->mu);
                return n->failed == 1 ? MSCCLRT_ERR_REMOTE : MSCCLRT_ERR_TIMEOUT;
            }
            s->busy[slot] = true;
            it.slot = slot;
            it.data = s->tx_stage + (size_t)slot * TCP_PIECE;
            CuResult cr = cu.cuMemcpyDtoHAsync((void *)it.data, src + o, len, s->tx_stream);
            if (cr == CU_OK) cr = cu.cuEventRecord(s->ev[slot], s->tx_stream);
            if (cr != CU_OK) {
                s->busy[slot] = false;
                pthread_mutex_unlock(&s->mu);
                return rt_fail(MSCCLRT_ERR_CUDA, "net: rank %d: staging %llu bytes at 0x%llx "
                               "for rank %d: cuMemcpyDtoHAsync: %s", n->rank,
                               (unsigned long long)len, (unsigned long long)(src + o), p->rank,
                               cu_name(cr));
            }
            TRY(post(t, s, &it));
        }
        p->sent++;
        p->sent_s[s->idx]++;
    }
    return MSCCLRT_SUCCESS;
}

static mscclrt_result tcp_signal(Net *n, const NetWindow *w, uint64_t off, uint64_t value) {
    Tcp *t = tcp_of(n);
    TcpPeer *p = t->peers[w->peer];
    TcpItem it = {.h = hdr(n, TCP_SIGNAL), .slot = -1};
    it.h.region = w->id;
    it.h.off = off;
    it.h.len = value;
    it.h.arg = p->sent;
    memcpy(it.counts, p->sent_s, sizeof it.counts);
    LOG_TRACE(LOG_SUB_XPORT, "net: signal %llu to rank %d (after %llu pieces) posted t=%.1f",
              (unsigned long long)value, p->rank, (unsigned long long)p->sent, trace_us());
    return enqueue(t, &p->s[0], &it);
}

static mscclrt_result tcp_flush(Net *n) {
    Tcp *t = tcp_of(n);
    /* ask every peer with unconfirmed pieces first, then wait: the peers answer in parallel */
    for (int q = 0; q < n->nranks; q++) {
        TcpPeer *p = t->peers[q];
        if (!p) continue;
        pthread_mutex_lock(&p->mu);
        bool due = p->acked < p->sent;
        if (due) p->asked = p->sent;   /* before the FLUSH leaves: its ACK may come at once */
        pthread_mutex_unlock(&p->mu);
        if (!due) continue;
        TcpItem it = {.h = hdr(n, TCP_FLUSH), .slot = -1};
        it.h.arg = p->sent;
        memcpy(it.counts, p->sent_s, sizeof it.counts);
        TRY(enqueue(t, &p->s[0], &it));
    }
    double t0 = now_ms();
    for (int q = 0; q < n->nranks; q++) {
        TcpPeer *p = t->peers[q];
        if (!p) continue;
        struct timespec dl = deadline_in(n->opt.timeout_ms);
        pthread_mutex_lock(&p->mu);
        int rc = 0;
        while (p->acked < p->sent && !p->gone && atomic_load(&n->failed) != 1 &&
               rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&p->cv, &p->mu, &dl);
        uint64_t acked = p->acked, sent = p->sent;
        bool gone = p->gone;
        pthread_mutex_unlock(&p->mu);
        if (acked >= sent) continue;
        TRY(net_check(n));
        if (gone)
            return rt_fail(MSCCLRT_ERR_REMOTE, "net: rank %d: rank %d left (closed its "
                           "connections) before confirming %llu of %llu put pieces", n->rank,
                           q, (unsigned long long)(sent - acked), (unsigned long long)sent);
        return rt_fail(MSCCLRT_ERR_TIMEOUT, "net: rank %d: flush: rank %d did not confirm "
                       "%llu put piece(s) within %.0f ms (MSCCLRT_NET_TIMEOUT_MS): it is not "
                       "answering", n->rank, q, (unsigned long long)(sent - acked),
                       now_ms() - t0);
    }
    LOG_TRACE(LOG_SUB_XPORT, "net: flush confirmed by every peer t=%.1f", trace_us());
    return MSCCLRT_SUCCESS;
}

/* A plan's flush (net_flush_sources): the sources of every put issued so far have been read.
 * In device mode each piece was copied into a staging slot on its socket's tx stream, so those
 * copies have completed; in host mode (and for host sources in device mode) a piece is sent
 * from the caller's memory, so its socket has written everything queued. The peers' receipt
 * is not awaited: a signal that follows the data is applied only once the data has landed. */
static mscclrt_result tcp_flush_sources(Net *n) {
    Tcp *t = tcp_of(n);
    for (int q = 0; q < n->nranks; q++) {
        TcpPeer *p = t->peers[q];
        if (!p) continue;
        for (int i = 0; i < t->nsocks; i++) {
            TcpSock *s = &p->s[i];
            if (!n->opt.host_mem) {
                CuResult cr = cu_stream_wait(s->tx_stream);
                if (cr != CU_OK)
                    return rt_fail(MSCCLRT_ERR_CUDA, "net: rank %d: staging puts to rank %d "
                                   "(socket %d): waiting for the copies: %s", n->rank, p->rank,
                                   i, cu_name(cr));
                pthread_mutex_lock(&s->mu);
                const bool hsrc = s->hsrc_used;
                pthread_mutex_unlock(&s->mu);
                if (!hsrc) continue;
            }
            struct timespec dl = deadline_in(n->opt.timeout_ms);
            pthread_mutex_lock(&s->mu);
            int rc = 0;
            while ((s->qhead != s->qtail || s->sending) && !s->dead &&
                   atomic_load(&n->failed) != 1 && rc != ETIMEDOUT)
                rc = pthread_cond_timedwait(&s->cv, &s->mu, &dl);
            const bool left = s->qhead != s->qtail || s->sending, dead = s->dead;
            pthread_mutex_unlock(&s->mu);
            if (!left) continue;
            TRY(net_check(n));
            if (dead)
                return rt_fail(MSCCLRT_ERR_REMOTE, "net: rank %d: connection to rank %d "
                               "(socket %d) broke with puts unsent", n->rank, p->rank, i);
            return rt_fail(MSCCLRT_ERR_TIMEOUT, "net: rank %d: flush: rank %d took no data "
                           "on socket %d within %d ms (MSCCLRT_NET_TIMEOUT_MS)", n->rank,
                           p->rank, i, n->opt.timeout_ms);
        }
    }
    LOG_TRACE(LOG_SUB_XPORT, "net: flush: every put source read t=%.1f", trace_us());
    return MSCCLRT_SUCCESS;
}

/* ==== connection setup ====================================================================== */

static mscclrt_result sock_init(Tcp *t, TcpPeer *p, int idx) {
    TcpSock *s = &p->s[idx];
    s->peer = p;
    s->idx = idx;
    s->fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (t->n->opt.host_mem) return MSCCLRT_SUCCESS;
    void *h = NULL;
    TRY(cu_check(cu.cuMemHostAlloc(&h, (size_t)TCP_SLOTS * TCP_PIECE, CU_HOSTALLOC_PORTABLE),
                 "cuMemHostAlloc(socket staging)"));
    s->tx_stage = h;
    TRY(cu_check(cu.cuMemHostAlloc(&h, (size_t)TCP_RX_SLOTS * TCP_PIECE, CU_HOSTALLOC_PORTABLE),
                 "cuMemHostAlloc(socket staging)"));
    s->rx_stage = h;
    /* non-blocking streams: staging must never wait behind a kernel on the legacy stream */
    TRY(cu_check(cu.cuStreamCreate(&s->tx_stream, CU_STREAM_FLAG_NON_BLOCKING),
                 "cuStreamCreate(socket tx)"));
    for (int i = 0; i < TCP_SLOTS; i++)
        TRY(cu_check(cu.cuEventCreate(&s->ev[i], CU_EVENT_FLAG_DISABLE_TIMING), "cuEventCreate"));
    for (int i = 0; i < TCP_RX_SLOTS; i++)
        TRY(cu_check(cu.cuEventCreate(&s->rx_ev[i], CU_EVENT_FLAG_DISABLE_TIMING),
                     "cuEventCreate"));
    return MSCCLRT_SUCCESS;
}

static void sock_fini(Tcp *t, TcpSock *s) {
    if (!s->peer) return;
    if (s->fd >= 0) close(s->fd);
    if (!t->n->opt.host_mem) {
        for (int i = 0; i < TCP_SLOTS; i++)
            if (s->ev[i]) cu.cuEventDestroy(s->ev[i]);
        for (int i = 0; i < TCP_RX_SLOTS; i++)
            if (s->rx_ev[i]) cu.cuEventDestroy(s->rx_ev[i]);
        if (s->tx_stream) cu.cuStreamSynchronize(s->tx_stream);
        if (s->tx_stream) cu.cuStreamDestroy(s->tx_stream);
        if (s->tx_stage) cu.cuMemFreeHost(s->tx_stage);
        if (s->rx_stage) cu.cuMemFreeHost(s->rx_stage);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
}

static void tcp_close(Net *n) {
    Tcp *t = tcp_of(n);
    if (!t) return;
    atomic_store(&t->stopping, 1);
    /* tx threads send what is queued and a BYE; then the sockets close under the rx threads */
    for (int q = 0; q < n->nranks; q++) {
        TcpPeer *p = t->peers ? t->peers[q] : NULL;
        for (int i = 0; p && i < t->nsocks; i++) {
            TcpSock *s = &p->s[i];
            if (!s->tx_on) continue;
            pthread_mutex_lock(&s->mu);
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
            pthread_join(s->tx, NULL);
        }
    }
    for (int q = 0; q < n->nranks; q++) {
        TcpPeer *p = t->peers ? t->peers[q] : NULL;
        for (int i = 0; p && i < t->nsocks; i++)
            if (p->s[i].fd >= 0) shutdown(p->s[i].fd, SHUT_RDWR);
        for (int i = 0; p && i < t->nsocks; i++)
            if (p->s[i].rx_on) pthread_join(p->s[i].rx, NULL);
    }
    for (int q = 0; q < n->nranks; q++) {
        TcpPeer *p = t->peers ? t->peers[q] : NULL;
        if (!p) continue;
        if (p->h2d) {   /* its copies read the receive slots freed below */
            cu.cuStreamSynchronize(p->h2d);
            cu.cuStreamDestroy(p->h2d);
        }
        for (int i = 0; i < t->nsocks; i++) sock_fini(t, &p->s[i]);
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        free(p->pend);
        free(p);
    }
    free(t->peers);
    free(t);
    n->be_state = NULL;
}

/* A connect to a higher rank waits here: serving our own listener meanwhile (its hellos, a
 * flood) so that no rank's setup waits on another's connects. */
typedef struct ConnWait { NetAccept *acc; mscclrt_result res; } ConnWait;

static void connect_wait(void *ctx, int fd, int64_t until) {
    ConnWait *w = ctx;
    if (w->res == MSCCLRT_SUCCESS) {
        w->res = net_accept_step(w->acc, until, fd, POLLOUT);
        return;
    }
    int64_t left = until - net_now_ms();   /* the setup failed: just let the connect finish */
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    if (left > 0) poll(&p, 1, (int)left);
}

/* Opens and introduces the nsocks connections to every remote rank above us, then waits for
 * those of every remote rank below us, all before one deadline; the listener is served
 * throughout (net_accept.c). */
static mscclrt_result setup_sockets(Tcp *t, int lfd, const NetAddr *addrs) {
    Net *n = t->n;
    const uint8_t *secret = boot_secret(n->boot);
    const int64_t t0 = net_now_ms(), deadline = t0 + n->opt.timeout_ms;
    NetAccept acc;
    TRY(net_accept_init(&acc, lfd, n->rank, n->nranks, t->nsocks, n->remote, secret));
    ConnWait w = {.acc = &acc, .res = MSCCLRT_SUCCESS};
    mscclrt_result res = MSCCLRT_SUCCESS;
    for (int q = n->rank + 1; q < n->nranks; q++) {
        if (!n->remote[q]) continue;
        for (int i = 0; i < t->nsocks; i++) {
            int fd = -1;
            TRY_GOTO(net_sock_connect_wait(&addrs[q], q, deadline, n->opt.timeout_ms,
                                           connect_wait, &w, &fd), res, out);
            TRY_GOTO(w.res, res, out);
            t->peers[q]->s[i].fd = fd;
            TcpHdr h = hdr(n, TCP_HELLO);
            h.region = (uint32_t)i;
            h.off = (uint64_t)t->nsocks;
            h.len = TCP_SECRET;
            int left = (int)(deadline - net_now_ms());
            if (left < 1) left = 1;
            if (net_sock_send_all(fd, &h, sizeof h, left) != 0 ||
                net_sock_send_all(fd, secret, TCP_SECRET, left) != 0) {
                res = rt_fail_errno(MSCCLRT_ERR_REMOTE, "net: rank %d: introducing socket %d "
                                    "to rank %d", n->rank, i, q);
                goto out;
            }
        }
    }
    while (acc.missing > 0) {
        if (net_now_ms() >= deadline) {
            char missing[256] = "";
            size_t k = 0;
            for (int q = 0; q < n->rank && k + 12 < sizeof missing; q++) {
                if (!n->remote[q]) continue;
                for (int i = 0; i < t->nsocks; i++)
                    if (acc.fd[q * t->nsocks + i] < 0) {
                        k += (size_t)snprintf(missing + k, sizeof missing - k, "%s%d",
                                              k ? ", " : "", q);
                        break;
                    }
            }
            char refused[160] = "";
            if (acc.refused)
                snprintf(refused, sizeof refused, "; meanwhile %d other connection(s) were "
                         "refused (no valid hello with the group's secret)", acc.refused);
            res = rt_fail(MSCCLRT_ERR_TIMEOUT, "net: rank %d: no connection from rank(s) %s "
                          "after %lld ms (MSCCLRT_NET_TIMEOUT_MS=%d)%s", n->rank, missing,
                          (long long)(net_now_ms() - t0), n->opt.timeout_ms, refused);
            goto out;
        }
        TRY_GOTO(net_accept_step(&acc, deadline, -1, 0), res, out);
    }
    for (int q = 0; q < n->rank; q++)
        for (int i = 0; n->remote[q] && i < t->nsocks; i++)
            t->peers[q]->s[i].fd = net_accept_take(&acc, q, i);
out:
    net_accept_fini(&acc);
    return res;
}

static mscclrt_result tcp_connect(Net *n) {
    Tcp *t = calloc(1, sizeof *t);
    if (!t) return rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory");
    n->be_state = t;
    t->n = n;
    t->nsocks = n->opt.nsocks;
    atomic_init(&t->stopping, 0);
    mscclrt_result res = MSCCLRT_SUCCESS;
    int lfd = -1;
    NetAddr *addrs = NULL;
    /* the transport's settings, read once (params.def gives their ranges) */
    enum { SPIN, TX_SPIN, SPLIT, SPLIT_MIN, WIDE, SPREAD_BUSY, PIECE, CONTROL, INLINE, NSET };
    static const ParamId set_id[NSET] = {
        [SPIN] = PARAM_SOCKET_SPIN_US, [TX_SPIN] = PARAM_SOCKET_TX_SPIN_US,
        [SPLIT] = PARAM_SOCKET_SPLIT, [SPLIT_MIN] = PARAM_SOCKET_SPLIT_MIN_BYTES,
        [WIDE] = PARAM_SOCKET_WIDE_BYTES, [SPREAD_BUSY] = PARAM_SOCKET_SPREAD_BUSY,
        [PIECE] = PARAM_SOCKET_PIECE_BYTES,
        [CONTROL] = PARAM_SOCKET_CONTROL, [INLINE] = PARAM_SOCKET_INLINE_BYTES,
    };
    long long set[NSET];
    for (int i = 0; i < NSET; i++) TRY_GOTO(param_int(set_id[i], &set[i]), res, fail);
    t->spin_us = (int)set[SPIN];
    t->tx_spin_us = (int)set[TX_SPIN];   /* -1 resolved below, once the GPU is known */
    t->split = (int)set[SPLIT];          /* -1 likewise */
    t->split_min = (uint64_t)set[SPLIT_MIN];
    t->wide = (uint64_t)set[WIDE];
    t->spread_busy = set[SPREAD_BUSY] != 0;
    t->piece = (uint64_t)set[PIECE];
    t->control = set[CONTROL] != 0;
    t->inline_max = (uint64_t)set[INLINE];
    if (!n->opt.host_mem) {
        TRY_GOTO(cu_load(), res, fail);
        t->ctx = (CuContext)n->opt.cu_ctx;
    }
    t->peers = calloc((size_t)n->nranks, sizeof *t->peers);
    addrs = calloc((size_t)n->nranks, sizeof *addrs);
    if (!t->peers || !addrs) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory");
        goto fail;
    }
    for (int q = 0; q < n->nranks; q++) {
        if (!n->remote[q]) continue;
        TcpPeer *p = calloc(1, sizeof *p);
        if (!p) {
            res = rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory");
            goto fail;
        }
        t->peers[q] = p;
        p->t = t;
        p->rank = q;
        pthread_mutex_init(&p->mu, NULL);
        pthread_cond_init(&p->cv, NULL);
        for (int i = 0; i < 16; i++) p->s[i].fd = -1;
        for (int i = 0; i < t->nsocks; i++) TRY_GOTO(sock_init(t, p, i), res, fail);
        if (!n->opt.host_mem)   /* non-blocking: never behind a kernel on the legacy stream */
            TRY_GOTO(cu_check(cu.cuStreamCreate(&p->h2d, CU_STREAM_FLAG_NON_BLOCKING),
                              "cuStreamCreate(socket receive)"), res, fail);
    }
    NetAddr *me = &addrs[n->rank];
    TRY_GOTO(net_sock_pick(n->opt.ifname ? n->opt.ifname : param_str(PARAM_SOCKET_IFNAME), me), res, fail);
    TRY_GOTO(net_sock_listen(me, &lfd), res, fail);
    {
        char s[80];
        net_sock_format(me, s, sizeof s);
        LOG_INFO(LOG_SUB_XPORT, "rank %d: socket transport listening on %s (%s), %d socket(s) "
                 "per peer", n->rank, s, me->ifname, t->nsocks);
    }
    TRY_GOTO(boot_allgather(n->boot, addrs, sizeof *addrs), res, fail);
    if (n->opt.on_listen) n->opt.on_listen(n->opt.on_listen_arg, me);
    TRY_GOTO(setup_sockets(t, lfd, addrs), res, fail);
    close(lfd);
    lfd = -1;
    /* the GPU's PCI address, for MSCCLRT_PROGRESS_CPUS=numa */
    char pci[32];
    CuDevice dev;
    const bool known = !n->opt.host_mem && cu.cuDeviceGet(&dev, n->opt.cu_device) == CU_OK &&
                       cu_device_pci(dev, pci, sizeof pci);
    CpusPlace place;   /* resolved once for every socket thread */
    TRY_GOTO(cpus_progress_for(CPUS_SOCKET, known ? pci : NULL, "socket threads", &place), res,
             fail);
    /* the socket threads on CPUs of their own: the send threads spin, idle puts are split */
    if (t->tx_spin_us < 0) t->tx_spin_us = place.move ? t->spin_us : 0;
    if (t->split < 0) t->split = place.move;
    for (int q = 0; q < n->nranks; q++) {
        TcpPeer *p = t->peers[q];
        for (int i = 0; p && i < t->nsocks; i++) {
            TcpSock *s = &p->s[i];
            int rc = pthread_create(&s->rx, NULL, rx_main, s);
            if (rc == 0) s->rx_on = true;
            if (rc == 0 && (rc = pthread_create(&s->tx, NULL, tx_main, s)) == 0) s->tx_on = true;
            if (rc != 0) {
                res = rt_fail(MSCCLRT_ERR_SYSTEM, "net: rank %d: cannot start the socket "
                              "threads for rank %d: %s", n->rank, q, strerror(rc));
                goto fail;
            }
            TRY_GOTO(cpus_apply(s->rx, &place, "socket receive thread"), res, fail);
            TRY_GOTO(cpus_apply(s->tx, &place, "socket send thread"), res, fail);
        }
    }
    free(addrs);
    return MSCCLRT_SUCCESS;
fail:
    if (lfd >= 0) close(lfd);
    free(addrs);
    tcp_close(n);
    return res;
}

const NetBackend net_tcp = {
    .name = "socket",
    .code = NET_BACKEND_SOCKET,
    .connect = tcp_connect,
    .close = tcp_close,
    .reg = NULL,
    .dereg = NULL,
    .put = tcp_put,
    .signal = tcp_signal,
    .flush = tcp_flush,
    .flush_sources = tcp_flush_sources,
};

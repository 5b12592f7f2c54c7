/*
 * net_tcp_rx.c - the socket backend's receiving side: each socket's rx thread reads headers,
 * checks them against the registered regions (net_wire.c), lands a PUT's piece in host memory
 * or through a pinned slot and the peer's HtoD stream, and applies a SIGNAL or answers a FLUSH
 * only once every socket's count of pieces before it has landed (see net_tcp.c).
 */
#include "net/net_tcp.h"

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

void *tcp_rx_main(void *arg) {
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

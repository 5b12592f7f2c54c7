/*
 * net_tcp_tx.c - the socket backend's sending side: a message written by the posting (proxy)
 * thread itself where the socket is idle and the message may go inline, else queued for the
 * socket's tx thread, which sends it once its staging copy completed and owes the peer's
 * flushes their ACKs first (see net_tcp.c).
 */
#include "net/net_tcp.h"

/* Writes it's message (its header, then a PUT's payload or a SIGNAL's or FLUSH's per-socket
 * counts; a PUT with sig, then its SIGNAL's header and counts) from byte *done on; wait_ms as
 * net_sock_sendv (0: returns -1 with EAGAIN once the socket would block). */
static int send_msg(TcpSock *s, const TcpItem *it, size_t *done, int wait_ms) {
    const bool counted = it->h.type == TCP_SIGNAL || it->h.type == TCP_FLUSH;
    const size_t counts_len = (size_t)s->peer->t->nsocks * sizeof it->counts[0];
    struct iovec iov[4] = {
        {.iov_base = (void *)&it->h, .iov_len = sizeof it->h},
        {.iov_base = counted ? (void *)it->counts : (void *)it->data,
         .iov_len = it->h.type == TCP_PUT ? it->h.len : counted ? counts_len : 0},
        {.iov_base = (void *)&it->sh, .iov_len = sizeof it->sh},
        {.iov_base = (void *)it->counts, .iov_len = counts_len},
    };
    return net_sock_sendv(s->fd, iov, it->sig ? 4 : 2, done, wait_ms);
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

void *tcp_tx_main(void *arg) {
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
                  "sent by the tx thread%s t=%.1f", (unsigned)it.h.type, p->rank,
                  (unsigned long long)it.h.len, s->idx, it.sig ? " with its signal" : "",
                  trace_us());
    }
    return NULL;
}

/* Waits (s->mu held) until the queue has room and, when want_slot, a staging slot is free.
 * Returns the slot (or 0), -1 on failure or timeout (error made). */
int tcp_wait_room(Tcp *t, TcpSock *s, bool want_slot) {
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

/* Whether this thread writes it itself when its socket is idle (tcp_writes_inline: a signal or
 * flush, a staged piece of at most staged_inline bytes of a put not split - its copy is waited
 * for first: a larger one would hold the proxy on the copy engine - or a piece already in host
 * memory of at most inline_max bytes). On a core the rank shares with its progress threads
 * (mpirun binds a rank to one) waking the tx thread for a piece costs a scheduler hand-off
 * each, about 20 us of a piece's cycle (c37). */
static bool writes_inline(const Tcp *t, const TcpItem *it) {
    return tcp_writes_inline(it->h.type == TCP_PUT, it->slot >= 0, it->split, it->h.len,
                             t->inline_max, t->staged_inline);
}

/* Hands it (room made by tcp_wait_room; a put's slot staged or being staged) to socket s: written
 * at once by this thread when s is idle and writes_inline (what the socket does not take
 * without blocking is left to the tx thread), else queued for the tx thread. s->mu held;
 * unlocked on return. */
mscclrt_result tcp_post(Tcp *t, TcpSock *s, const TcpItem *it) {
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
                      "%d) sent inline%s t=%.1f", (unsigned)it->h.type, s->peer->rank,
                      (unsigned long long)it->h.len, s->idx, it->sig ? " with its signal" : "",
                      trace_us());
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

mscclrt_result tcp_enqueue(Tcp *t, TcpSock *s, const TcpItem *it) {
    pthread_mutex_lock(&s->mu);
    if (tcp_wait_room(t, s, false) < 0) {
        pthread_mutex_unlock(&s->mu);
        return t->n->failed == 1 ? MSCCLRT_ERR_REMOTE : MSCCLRT_ERR_TIMEOUT;
    }
    return tcp_post(t, s, it);
}

/* Whether nothing is queued or being written on any of p's sockets */
bool tcp_peer_idle(Tcp *t, TcpPeer *p) {
    bool idle = true;
    for (int i = 0; i < t->nsocks && idle; i++) {
        TcpSock *s = &p->s[i];
        pthread_mutex_lock(&s->mu);
        idle = !s->sending && s->qhead == s->qtail;
        pthread_mutex_unlock(&s->mu);
    }
    return idle;
}

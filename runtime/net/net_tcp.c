/*
 * net_tcp.c - the "socket" backend: port-channel data between nodes over TCP. This file holds
 * the backend's calls (put, signal, flush) and its connection setup and teardown; sending is in
 * net_tcp_tx.c, receiving in net_tcp_rx.c, their shared state in net_tcp.h. The design:
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
#include "net/net_tcp.h"

/* ==== the backend's calls ================================================================== */

/* Hands one piece (it: its PUT header filled in, and with it->sig the SIGNAL that follows it)
 * to socket s: from host memory as it is, else staged into one of s's pinned slots first. The
 * caller counts the piece. */
static mscclrt_result put_piece(Tcp *t, TcpPeer *p, TcpSock *s, TcpItem *it, uint64_t src,
                                bool host) {
    Net *n = t->n;
    const uint64_t len = it->h.len;
    it->data = (const void *)(uintptr_t)src;
    it->slot = -1;
    if (host) {
        if (!n->opt.host_mem) {
            pthread_mutex_lock(&s->mu);
            s->hsrc_used = true;
            pthread_mutex_unlock(&s->mu);
        }
        return tcp_enqueue(t, s, it);
    }
    pthread_mutex_lock(&s->mu);
    int slot = tcp_wait_room(t, s, true);
    if (slot < 0) {
        pthread_mutex_unlock(&s->mu);
        return n->failed == 1 ? MSCCLRT_ERR_REMOTE : MSCCLRT_ERR_TIMEOUT;
    }
    s->busy[slot] = true;
    it->slot = slot;
    it->data = s->tx_stage + (size_t)slot * TCP_PIECE;
    CuResult cr = cu.cuMemcpyDtoHAsync((void *)it->data, src, len, s->tx_stream);
    if (cr == CU_OK) cr = cu.cuEventRecord(s->ev[slot], s->tx_stream);
    if (cr != CU_OK) {
        s->busy[slot] = false;
        pthread_mutex_unlock(&s->mu);
        return rt_fail(MSCCLRT_ERR_CUDA, "net: rank %d: staging %llu bytes at 0x%llx for rank "
                       "%d: cuMemcpyDtoHAsync: %s", n->rank, (unsigned long long)len,
                       (unsigned long long)src, p->rank, cu_name(cr));
    }
    return tcp_post(t, s, it);
}

/* Whether the put's source is host memory (host_mem mode, or a host source the GPU writes
 * through its mapping, e.g. the native kernels' outgoing packets): then it goes straight from
 * the caller's bytes, with no staging copy, whose launch and completion cost more than a small
 * message's whole trip. Logs the put as posted. */
static bool put_posted(Net *n, const TcpPeer *p, uint64_t src, uint64_t bytes) {
    const bool host = n->opt.host_mem || net_host_src(n, src, bytes);
    LOG_TRACE(LOG_SUB_XPORT, "net: put of %llu bytes to rank %d posted%s t=%.1f",
              (unsigned long long)bytes, p->rank, host && !n->opt.host_mem ? " (host source)" : "",
              trace_us());
    return host;
}

static mscclrt_result tcp_put(Net *n, const NetWindow *w, uint64_t off, uint64_t src,
                              uint64_t bytes) {
    Tcp *t = tcp_of(n);
    TcpPeer *p = t->peers[w->peer];
    const bool host = put_posted(n, p, src, bytes);
    /* the receiver takes any piece up to TCP_PIECE, so the cut is this rank's own choice */
    const bool split = t->split > 0 && tcp_put_splits(bytes, t->split_min);
    /* whether anything is on its way to the peer (its sockets' locks): asked once, only where
     * the cut or the socket choice depends on it */
    const bool idle = (split || tcp_spread_asks(bytes, t->wide, t->spread_busy)) && tcp_peer_idle(t, p);
    const uint64_t piece = tcp_piece_bytes(bytes, t->piece, t->split_min, split, idle);
    const uint64_t wide = tcp_put_wide(bytes, t->wide, t->spread_busy, idle);
    for (uint64_t o = 0; o < bytes; o += piece) {
        /* a small put travels with the signals on socket 0: the receiver then wakes one
         * thread, which finds the data and its signal in order; large ones spread out, over
         * the sockets after 0 where socket 0 is kept for control (MSCCLRT_SOCKET_CONTROL: a
         * signal, e.g. an acknowledgement going against the data, then never queues behind a
         * large piece; the receiver's per-socket counts keep signals after their data) */
        TcpSock *s = &p->s[tcp_piece_socket(bytes, bytes <= TCP_INLINE ? 0 : p->next++,
                                             (uint32_t)t->nsocks, t->control, wide)];
        TcpItem it = {.h = hdr(n, TCP_PUT), .split = piece < bytes};
        it.h.region = w->id;
        it.h.off = off + o;
        it.h.len = bytes - o < piece ? bytes - o : piece;
        TRY(put_piece(t, p, s, &it, src + o, host));
        p->sent++;
        p->sent_s[s->idx]++;
    }
    return MSCCLRT_SUCCESS;
}

/* The SIGNAL header of value into w at off, after every piece sent to p so far (their total
 * and per-socket counts into it). Logs it as posted. */
static TcpHdr signal_hdr(Net *n, TcpPeer *p, const NetWindow *w, uint64_t off, uint64_t value,
                         uint64_t *counts) {
    TcpHdr h = hdr(n, TCP_SIGNAL);
    h.region = w->id;
    h.off = off;
    h.len = value;
    h.arg = p->sent;
    memcpy(counts, p->sent_s, sizeof p->sent_s);
    LOG_TRACE(LOG_SUB_XPORT, "net: signal %llu to rank %d (after %llu pieces) posted t=%.1f",
              (unsigned long long)value, p->rank, (unsigned long long)p->sent, trace_us());
    return h;
}

static mscclrt_result tcp_signal(Net *n, const NetWindow *w, uint64_t off, uint64_t value) {
    Tcp *t = tcp_of(n);
    TcpPeer *p = t->peers[w->peer];
    TcpItem it = {.slot = -1};
    it.h = signal_hdr(n, p, w, off, value, it.counts);
    return tcp_enqueue(t, &p->s[0], &it);
}

/* A put and the signal after it (net_put_signal, both to w's peer). With
 * MSCCLRT_SOCKET_PUT_SIGNAL=1 a put that travels as one piece on socket 0 (tcp_joins_signal)
 * and its signal go as one item: one write of both messages (one system call, one hand-off)
 * where the put and then the signal would take two; the receiver reads the same two messages.
 * Otherwise the put, then the signal. */
static mscclrt_result tcp_put_signal(Net *n, const NetWindow *w, uint64_t off, uint64_t src,
                                     uint64_t bytes, const NetWindow *sw, uint64_t soff,
                                     uint64_t value) {
    Tcp *t = tcp_of(n);
    if (!t->put_signal || !tcp_joins_signal(bytes, t->piece)) {
        TRY(tcp_put(n, w, off, src, bytes));
        return tcp_signal(n, sw, soff, value);
    }
    TcpPeer *p = t->peers[w->peer];
    const bool host = put_posted(n, p, src, bytes);
    TcpItem it = {.h = hdr(n, TCP_PUT), .sig = true};
    it.h.region = w->id;
    it.h.off = off;
    it.h.len = bytes;
    /* the signal counts the piece it travels behind */
    p->sent++;
    p->sent_s[0]++;
    it.sh = signal_hdr(n, p, sw, soff, value, it.counts);
    return put_piece(t, p, &p->s[0], &it, src, host);
}

static uint64_t tcp_put_signal_max(const Net *n) {
    const Tcp *t = n->be_state;
    if (!t || !t->put_signal) return 0;
    return tcp_join_max(t->piece);
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
        TRY(tcp_enqueue(t, &p->s[0], &it));
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
    enum { SPIN, TX_SPIN, SPLIT, SPLIT_MIN, WIDE, SPREAD_BUSY, PIECE, CONTROL, INLINE,
           STAGED_INLINE, PUT_SIGNAL, NSET };
    static const ParamId set_id[NSET] = {
        [SPIN] = PARAM_SOCKET_SPIN_US, [TX_SPIN] = PARAM_SOCKET_TX_SPIN_US,
        [SPLIT] = PARAM_SOCKET_SPLIT, [SPLIT_MIN] = PARAM_SOCKET_SPLIT_MIN_BYTES,
        [WIDE] = PARAM_SOCKET_WIDE_BYTES, [SPREAD_BUSY] = PARAM_SOCKET_SPREAD_BUSY,
        [PIECE] = PARAM_SOCKET_PIECE_BYTES,
        [CONTROL] = PARAM_SOCKET_CONTROL, [INLINE] = PARAM_SOCKET_INLINE_BYTES,
        [STAGED_INLINE] = PARAM_SOCKET_STAGED_INLINE_BYTES, [PUT_SIGNAL] = PARAM_SOCKET_PUT_SIGNAL,
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
    t->staged_inline = (uint64_t)set[STAGED_INLINE];
    t->put_signal = set[PUT_SIGNAL] != 0;
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
            int rc = pthread_create(&s->rx, NULL, tcp_rx_main, s);
            if (rc == 0) s->rx_on = true;
            if (rc == 0 && (rc = pthread_create(&s->tx, NULL, tcp_tx_main, s)) == 0) s->tx_on = true;
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
    .put_signal = tcp_put_signal,
    .put_signal_max = tcp_put_signal_max,
    .flush = tcp_flush,
    .flush_sources = tcp_flush_sources,
};

/*
 * bootstrap.c - the rank side of the bootstrap: joining through the root, then direct
 * rank-to-rank messages (tagged send/recv, allgather, barrier) over lazily opened TCP
 * connections, one per ordered pair. A single progress loop accepts and authenticates
 * incoming connections and reads whatever messages arrive into a queue; blocked sends run it
 * too, so two ranks sending large messages to each other never deadlock.
 */
#include "bootstrap/boot_internal.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* A received message waiting to be asked for. */
typedef struct BootMsg {
    struct BootMsg *next;
    int src, kind, tag;
    size_t len;            /* announced payload bytes */
    size_t cap;            /* bytes of data[] allocated: grows as bytes arrive, up to len */
    uint8_t data[];        /* cap bytes */
} BootMsg;

/* An accepted connection: first a BootConnect, then messages from one peer. Until the
 * BootConnect has been checked (peer -1) it is "pending": anyone may have opened it. */
typedef struct BootIn {
    int fd;                /* owned; -1 once closed */
    int peer;              /* -1 until the BootConnect has been checked */
    BootAddr from;         /* for log lines */
    int64_t at;            /* when accepted: the BootConnect is due BOOT_HELLO_WAIT_MS later */
    union { BootConnect conn; BootMsgHdr hdr; } h;   /* header being read */
    size_t hgot;           /* bytes of h read */
    BootMsg *msg;          /* owned: payload being read, NULL while reading a header */
    size_t mgot;           /* payload bytes read */
} BootIn;

struct Boot {
    uint32_t magic;        /* BOOT_MAGIC while alive */
    int rank, nranks;
    int timeout_ms;        /* bound of every wait */
    uint8_t secret[BOOT_SECRET_BYTES];
    int listen_fd;         /* owned */
    BootPeerWire *peers;   /* owned, [nranks]: the root's table */
    int *out_fd;           /* owned, [nranks]: our connection to each peer, -1 until first send */
    BootIn *ins;           /* owned, [nins] of cap */
    int nins, cap;
    int npend;             /* ins that are open and pending (at most BOOT_PENDING_MAX) */
    int64_t pause_until;   /* not accepting before this time (descriptors ran out) */
    BootRate rate;         /* WARNs about unauthenticated connections */
    bool *gone;            /* owned, [nranks]: the peer's connection to us has closed */
    char **why;            /* owned, [nranks]: why we dropped the peer's connection, or NULL */
    BootMsg *q_head, *q_tail;   /* owned: unexpected messages, in arrival order */
    size_t *queued;        /* owned, [nranks]: bytes (payload + BootMsg) queued per source */
    size_t max_msg;        /* BOOT_MAX_MSG unless a test changed it */
    size_t queue_max;      /* BOOT_QUEUE_MAX unless a test changed it */
    int32_t coll_seq;      /* sequence number of the next collective */
    int ring_above;        /* allgather goes round a ring when nranks exceeds this */
    int *node_of;          /* owned, [nranks] */
    int nnodes, node, local_rank, local_size;
};

/* ---- incoming side --------------------------------------------------------------------------- */

static void in_close(Boot *b, BootIn *in) {
    if (in->fd >= 0) {
        close(in->fd);
        if (in->peer < 0) b->npend--;
    }
    in->fd = -1;
    free(in->msg);
    in->msg = NULL;
}

/* Drops an authenticated peer's connection for a protocol error: the first reason is kept, and
 * every later wait on that peer fails with it. */
static void in_drop_peer(Boot *b, BootIn *in, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void in_drop_peer(Boot *b, BootIn *in, const char *fmt, ...) {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    LOG_WARN("boot: rank %d: %s", b->rank, text);
    if (!b->why[in->peer]) b->why[in->peer] = strdup(text);
    b->gone[in->peer] = true;
    in_close(b, in);
}

static size_t msg_charge(const BootMsg *m) { return sizeof *m + m->len; }

static void q_push(Boot *b, BootMsg *m) {
    m->next = NULL;
    if (b->q_tail) b->q_tail->next = m;
    else b->q_head = m;
    b->q_tail = m;
    b->queued[m->src] += msg_charge(m);
}

static BootMsg *q_take(Boot *b, int src, int kind, int tag) {
    for (BootMsg **pp = &b->q_head, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
        BootMsg *m = *pp;
        if (m->src != src || m->kind != kind || m->tag != tag) continue;
        *pp = m->next;
        if (b->q_tail == m) b->q_tail = prev;
        b->queued[src] -= msg_charge(m);
        return m;
    }
    return NULL;
}

/* Whether to leave this connection unread for now: its peer has BOOT_QUEUE_MAX bytes queued that
 * nobody asked for. Only between messages, so a message once started always completes. */
static bool in_held(const Boot *b, const BootIn *in) {
    return in->peer >= 0 && !in->msg && in->hgot == 0 && b->queued[in->peer] >= b->queue_max;
}

/* Checks a complete BootConnect; false closes the connection (after a WARN). */
static bool in_check_connect(Boot *b, BootIn *in) {
    const BootConnect *c = &in->h.conn;
    char from[80];
    boot_addr_str(&in->from, from, sizeof from);
    if (c->magic != BOOT_MAGIC || c->version != BOOT_VERSION || c->kind != BK_CONNECT) {
        BOOT_WARN_LIMITED(&b->rate, "boot: rank %d refused a connection from %s: not a bootstrap peer "
                          "of this version (magic 0x%08x version %u kind %u)", b->rank, from, c->magic,
                          c->version, c->kind);
        return false;
    }
    if (!boot_secret_equal(c->secret, b->secret)) {
        BOOT_WARN_LIMITED(&b->rate, "boot: rank %d refused a connection from %s claiming rank %d: "
                          "wrong secret", b->rank, from, (int)c->rank);
        return false;
    }
    if (c->nranks != b->nranks || c->rank < 0 || c->rank >= b->nranks || c->rank == b->rank) {
        LOG_WARN("boot: rank %d refused a connection from %s: rank %d of %d does not fit this group "
                 "of %d", b->rank, from, (int)c->rank, (int)c->nranks, b->nranks);
        return false;
    }
    for (int i = 0; i < b->nins; i++)
        if (&b->ins[i] != in && b->ins[i].fd >= 0 && b->ins[i].peer == c->rank) {
            LOG_WARN("boot: rank %d refused a second connection from rank %d (%s)", b->rank,
                     (int)c->rank, from);
            return false;
        }
    in->peer = c->rank;
    b->npend--;
    LOG_TRACE(LOG_SUB_BOOT, "rank %d: rank %d connected from %s", b->rank, in->peer, from);
    return true;
}

/* Checks a complete message header and starts its payload (a first chunk only: the buffer grows
 * as bytes arrive); false means the connection was dropped. */
static bool in_check_hdr(Boot *b, BootIn *in) {
    const BootMsgHdr *h = &in->h.hdr;
    if (h->magic != BOOT_MAGIC || h->version != BOOT_VERSION || (h->kind != BK_USER && h->kind != BK_COLL) ||
        h->src != in->peer) {
        in_drop_peer(b, in, "malformed message from rank %d (magic 0x%08x version %u kind %u src %d); "
                     "dropped its connection", in->peer, h->magic, h->version, h->kind, (int)h->src);
        return false;
    }
    if (h->len > b->max_msg) {
        in_drop_peer(b, in, "rank %d announced a %llu-byte message (%s %d), more than the %zu bytes a "
                     "bootstrap message may carry; dropped its connection", in->peer,
                     (unsigned long long)h->len, h->kind == BK_USER ? "tag" : "collective",
                     (int)h->tag, b->max_msg);
        return false;
    }
    size_t cap = (size_t)h->len < BOOT_MSG_CHUNK ? (size_t)h->len : BOOT_MSG_CHUNK;
    BootMsg *m = malloc(sizeof *m + cap);
    if (!m) {
        in_drop_peer(b, in, "out of memory for a message from rank %d; dropped its connection", in->peer);
        return false;
    }
    m->src = h->src, m->kind = h->kind, m->tag = h->tag, m->len = (size_t)h->len, m->cap = cap;
    in->msg = m;
    in->mgot = 0;
    return true;
}

/* Reads everything available on one connection (non-blocking), up to the queue limit. */
static void in_read(Boot *b, BootIn *in) {
    while (in->fd >= 0 && !in_held(b, in)) {
        char *dst;
        size_t want;
        if (in->msg) {
            if (in->mgot == in->msg->cap) {   /* the part that arrived fills the buffer: grow it */
                size_t cap = in->msg->cap * 2 < in->msg->len ? in->msg->cap * 2 : in->msg->len;
                BootMsg *m = realloc(in->msg, sizeof *m + cap);
                if (!m) {
                    in_drop_peer(b, in, "out of memory for a %zu-byte message from rank %d; dropped "
                                 "its connection", in->msg->len, in->peer);
                    return;
                }
                m->cap = cap;
                in->msg = m;
            }
            dst = (char *)in->msg->data + in->mgot, want = in->msg->cap - in->mgot;
        } else {
            size_t hsize = in->peer < 0 ? sizeof(BootConnect) : sizeof(BootMsgHdr);
            dst = (char *)&in->h + in->hgot, want = hsize - in->hgot;
        }
        /* want > 0 always: empty payloads are queued as soon as their header is complete */
        ssize_t n = recv(in->fd, dst, want, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) {
            if (in->peer >= 0) {
                if (in->msg || in->hgot)
                    LOG_WARN("boot: rank %d: rank %d closed its connection in the middle of a message",
                             b->rank, in->peer);
                b->gone[in->peer] = true;
            }
            in_close(b, in);
            return;
        }
        if (in->msg) {
            in->mgot += (size_t)n;
            if (in->mgot == in->msg->len) {
                q_push(b, in->msg);
                in->msg = NULL;
                in->hgot = 0;
            }
            continue;
        }
        in->hgot += (size_t)n;
        if (in->peer < 0) {
            if (in->hgot < sizeof(BootConnect)) continue;
            in->hgot = 0;
            if (!in_check_connect(b, in)) in_close(b, in);
        } else {
            if (in->hgot < sizeof(BootMsgHdr)) continue;
            if (in_check_hdr(b, in) && in->msg->len == 0) {
                q_push(b, in->msg);
                in->msg = NULL;
                in->hgot = 0;
            }
        }
    }
}

/* Closes pending connections whose BootConnect is overdue; returns the next such deadline (or
 * INT64_MAX). */
static int64_t in_expire(Boot *b, int64_t now) {
    int64_t next = INT64_MAX;
    for (int i = 0; i < b->nins && b->npend; i++) {
        BootIn *in = &b->ins[i];
        if (in->fd < 0 || in->peer >= 0) continue;
        int64_t dl = in->at + BOOT_HELLO_WAIT_MS;
        if (dl > now) {
            if (dl < next) next = dl;
            continue;
        }
        char from[80];
        boot_addr_str(&in->from, from, sizeof from);
        BOOT_WARN_LIMITED(&b->rate, "boot: rank %d closed a connection from %s: it did not identify "
                          "itself within %d ms", b->rank, from, BOOT_HELLO_WAIT_MS);
        in_close(b, in);
    }
    return next;
}

static int in_oldest_pending(const Boot *b) {
    int best = -1;
    for (int i = 0; i < b->nins; i++)
        if (b->ins[i].fd >= 0 && b->ins[i].peer < 0 && (best < 0 || b->ins[i].at < b->ins[best].at))
            best = i;
    return best;
}

/* Accepts pending connections (a bounded number per call) and reads what they already sent.
 * The same limits as the root's (see boot_root.c), without BK_BUSY: peers do not read on the
 * connections they open. */
static void boot_accept(Boot *b) {
    for (int k = 0; k < BOOT_PENDING_MAX; k++) {
        BootSockAddr sa;
        socklen_t len = sizeof sa;
        int fd = accept4(b->listen_fd, &sa.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            if (e == EINTR || e == ECONNABORTED) continue;
            if (!boot_accept_exhausted(e)) return;   /* EAGAIN: drained */
            int old = in_oldest_pending(b);
            if (old >= 0) {
                BOOT_WARN_LIMITED(&b->rate, "boot: rank %d: out of file descriptors (accept: %s); "
                                  "closed the oldest of %d connections that have not identified "
                                  "themselves", b->rank, strerror(e), b->npend);
                in_close(b, &b->ins[old]);
                continue;
            }
            BOOT_WARN_LIMITED(&b->rate, "boot: rank %d: out of file descriptors (accept: %s) with no "
                              "connection to close; not accepting for %d ms", b->rank, strerror(e),
                              BOOT_ACCEPT_PAUSE_MS);
            b->pause_until = boot_now_ms() + BOOT_ACCEPT_PAUSE_MS;
            return;
        }
        int old = b->npend >= BOOT_PENDING_MAX ? in_oldest_pending(b) : -1;
        if (old >= 0) {
            char s[80];
            boot_addr_str(&b->ins[old].from, s, sizeof s);
            BOOT_WARN_LIMITED(&b->rate, "boot: rank %d: %d connections are waiting to identify "
                              "themselves; closed the oldest (from %s)", b->rank, BOOT_PENDING_MAX, s);
            in_close(b, &b->ins[old]);
        }
        int slot = -1;
        for (int i = 0; i < b->nins; i++)
            if (b->ins[i].fd < 0) { slot = i; break; }
        if (slot < 0) {
            if (b->nins == b->cap) {
                int cap = b->cap ? 2 * b->cap : 8;
                BootIn *ni = realloc(b->ins, sizeof *ni * (size_t)cap);
                if (!ni) { close(fd); return; }
                b->ins = ni;
                b->cap = cap;
            }
            slot = b->nins++;
        }
        BootIn *in = &b->ins[slot];
        memset(in, 0, sizeof *in);
        in->fd = fd;
        in->peer = -1;
        in->at = boot_now_ms();
        boot_addr_from_sock(&in->from, &sa);
        b->npend++;
        in_read(b, in);
    }
}

/* Waits until something happens (or deadline) and handles it: accepts, reads, closes overdue
 * pending connections. If out_fd >= 0, also returns as soon as it is writable. */
static void boot_progress(Boot *b, int64_t deadline, int out_fd) {
    int64_t now = boot_now_ms(), wake = in_expire(b, now);
    if (wake > deadline) wake = deadline;
    bool accepting = now >= b->pause_until;
    if (!accepting && b->pause_until < wake) wake = b->pause_until;
    struct pollfd stack[64], *pfd = stack;
    int n = 0, cap = b->nins + 2;
    if (cap > 64 && !(pfd = malloc(sizeof *pfd * (size_t)cap))) { pfd = stack; cap = 64; }
    /* fd -1 is ignored by poll: closed slots, a paused listener, connections held back */
    pfd[n++] = (struct pollfd){.fd = accepting ? b->listen_fd : -1, .events = POLLIN};
    if (out_fd >= 0) pfd[n++] = (struct pollfd){.fd = out_fd, .events = POLLOUT};
    int first_in = n;
    for (int i = 0; i < b->nins && n < cap; i++)
        pfd[n++] = (struct pollfd){.fd = in_held(b, &b->ins[i]) ? -1 : b->ins[i].fd, .events = POLLIN};
    int64_t left = wake - now;
    if (left < 0) left = 0;
    if (poll(pfd, (nfds_t)n, left > 1000 ? 1000 : (int)left) > 0) {
        for (int k = first_in; k < n; k++)
            if (pfd[k].revents && b->ins[k - first_in].fd == pfd[k].fd) in_read(b, &b->ins[k - first_in]);
        if (pfd[0].revents) boot_accept(b);
    }
    if (pfd != stack) free(pfd);
}

/* The failure of a wait on peer, which is gone. doing: what we waited for; closed: the message
 * when the peer closed its connection. When we dropped it for a protocol error, the reason
 * recorded then is the message instead. */
static mscclrt_result peer_gone(const Boot *b, int peer, const char *doing, const char *closed) {
    if (b->why[peer])
        return rt_fail(MSCCLRT_ERR_REMOTE, "boot: rank %d: %s: %s", b->rank, doing, b->why[peer]);
    return rt_fail(MSCCLRT_ERR_REMOTE, "boot: rank %d: %s", b->rank, closed);
}

/* ---- outgoing side --------------------------------------------------------------------------- */

static mscclrt_result out_write(Boot *b, int peer, const void *buf, size_t n, int64_t deadline) {
    const char *p = buf;
    int fd = b->out_fd[peer];
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) { p += w; n -= (size_t)w; continue; }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return rt_fail_errno(MSCCLRT_ERR_REMOTE, "boot: rank %d: sending to rank %d", b->rank, peer);
        if (boot_now_ms() >= deadline)
            return rt_fail(MSCCLRT_ERR_TIMEOUT, "boot: rank %d: rank %d did not receive for %d ms "
                           "(%zu bytes still to send)", b->rank, peer, b->timeout_ms, n);
        boot_progress(b, deadline, fd);   /* keep draining our side while we wait */
    }
    return MSCCLRT_SUCCESS;
}

/* boot_connect_wait's wait while this rank connects to a peer: keep serving our own listener and
 * connections. Were we to wait on the outgoing socket alone, a flood that fills every rank's
 * listen backlog would make each rank wait for a peer that itself waits in connect, not
 * accepting: the whole group would time out. */
static void out_wait(void *ctx, int fd, int64_t until) {
    boot_progress(ctx, until, fd);
}

static mscclrt_result out_open(Boot *b, int peer, int64_t deadline) {
    char who[32];
    snprintf(who, sizeof who, "rank %d", peer);
    int fd;
    TRY(boot_connect_wait(&b->peers[peer].listen, deadline, who, out_wait, b, &fd));
    boot_set_nonblock(fd, true);
    b->out_fd[peer] = fd;
    BootConnect c = {.magic = BOOT_MAGIC, .version = BOOT_VERSION, .kind = BK_CONNECT,
                     .rank = b->rank, .nranks = b->nranks};
    memcpy(c.secret, b->secret, BOOT_SECRET_BYTES);
    return out_write(b, peer, &c, sizeof c, deadline);
}

static mscclrt_result send_msg(Boot *b, int peer, int kind, int tag, const void *buf, size_t len,
                               int64_t deadline) {
    if (peer == b->rank) {
        BootMsg *m = malloc(sizeof *m + len);
        if (!m) return rt_fail(MSCCLRT_ERR_SYSTEM, "boot: out of memory for a %zu-byte message", len);
        m->src = peer, m->kind = kind, m->tag = tag, m->len = len;
        if (len) memcpy(m->data, buf, len);
        q_push(b, m);
        return MSCCLRT_SUCCESS;
    }
    if (b->out_fd[peer] < 0) TRY(out_open(b, peer, deadline));
    BootMsgHdr h = {.magic = BOOT_MAGIC, .version = BOOT_VERSION, .kind = (uint16_t)kind,
                    .src = b->rank, .tag = tag, .len = len};
    TRY(out_write(b, peer, &h, sizeof h, deadline));
    return out_write(b, peer, buf, len, deadline);
}

static mscclrt_result take_msg(Boot *b, BootMsg *m, void *buf, size_t len) {
    if (m->len != len) {
        mscclrt_result r = rt_fail(MSCCLRT_ERR_REMOTE, "boot: rank %d: rank %d sent %zu bytes for %s %d, "
                                   "expected %zu", b->rank, m->src, m->len,
                                   m->kind == BK_USER ? "tag" : "collective", m->tag, len);
        free(m);
        return r;
    }
    if (len) memcpy(buf, m->data, len);
    free(m);
    return MSCCLRT_SUCCESS;
}

/* ---- public operations -------------------------------------------------------------------- */

static mscclrt_result boot_check(const Boot *b, const char *fn) {
    if (!b || b->magic != BOOT_MAGIC)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "%s: not a live bootstrap handle", fn);
    return MSCCLRT_SUCCESS;
}

static mscclrt_result check_peer(const Boot *b, int peer, const char *fn) {
    if (peer < 0 || peer >= b->nranks)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%s: peer %d out of range [0, %d)", fn, peer, b->nranks);
    return MSCCLRT_SUCCESS;
}

mscclrt_result boot_send(Boot *b, int peer, int tag, const void *buf, size_t len) {
    TRY(boot_check(b, "boot_send"));
    TRY(check_peer(b, peer, "boot_send"));
    if (len && !buf) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot_send: buf is NULL for %zu bytes", len);
    if (len > BOOT_MAX_MSG)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot_send: %zu bytes is more than a bootstrap message "
                       "may carry (%zu)", len, BOOT_MAX_MSG);
    return send_msg(b, peer, BK_USER, tag, buf, len, boot_now_ms() + b->timeout_ms);
}

mscclrt_result boot_recv(Boot *b, int peer, int tag, void *buf, size_t len) {
    TRY(boot_check(b, "boot_recv"));
    TRY(check_peer(b, peer, "boot_recv"));
    if (len && !buf) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot_recv: buf is NULL for %zu bytes", len);
    int64_t deadline = boot_now_ms() + b->timeout_ms;
    for (;;) {
        BootMsg *m = q_take(b, peer, BK_USER, tag);
        if (m) return take_msg(b, m, buf, len);
        if (b->gone[peer]) {
            char doing[64], closed[128];
            snprintf(doing, sizeof doing, "waiting for tag %d from rank %d", tag, peer);
            snprintf(closed, sizeof closed, "rank %d closed its connection before sending tag %d", peer, tag);
            return peer_gone(b, peer, doing, closed);
        }
        if (boot_now_ms() >= deadline)
            return rt_fail(MSCCLRT_ERR_TIMEOUT, "boot: rank %d: rank %d did not send tag %d within %d ms",
                           b->rank, peer, tag, b->timeout_ms);
        boot_progress(b, deadline, -1);
    }
}

/* Ring allgather for large groups: n-1 steps, each forwarding the slice received in the
 * previous one; messages from one peer with one (kind, tag) stay in order, so the steps of one
 * collective share its sequence number. Uses 2 connections per rank instead of 2(n-1). */
static mscclrt_result allgather_ring(Boot *b, char *base, size_t per_rank, int32_t seq, int64_t deadline) {
    int n = b->nranks, next = (b->rank + 1) % n, prev = (b->rank + n - 1) % n;
    for (int step = 0; step < n - 1; step++) {
        int out = (b->rank - step + n) % n, in = (b->rank - step - 1 + n) % n;
        TRY(send_msg(b, next, BK_COLL, seq, per_rank ? base + (size_t)out * per_rank : NULL, per_rank, deadline));
        for (;;) {
            BootMsg *m = q_take(b, prev, BK_COLL, seq);
            if (m) {
                TRY(take_msg(b, m, per_rank ? base + (size_t)in * per_rank : NULL, per_rank));
                break;
            }
            if (b->gone[prev]) {
                char doing[96], closed[160];
                snprintf(doing, sizeof doing, "collective #%d, ring step %d of %d", (int)seq, step + 1, n - 1);
                snprintf(closed, sizeof closed, "rank %d left the group during collective #%d (ring step "
                         "%d of %d)", prev, (int)seq, step + 1, n - 1);
                return peer_gone(b, prev, doing, closed);
            }
            if (boot_now_ms() >= deadline)
                return rt_fail(MSCCLRT_ERR_TIMEOUT, "boot: rank %d: collective #%d timed out after %d ms at ring "
                               "step %d of %d: no answer from rank %d (it may itself wait for a rank before it)",
                               b->rank, (int)seq, b->timeout_ms, step + 1, n - 1, prev);
            boot_progress(b, deadline, -1);
        }
    }
    return MSCCLRT_SUCCESS;
}

void boot_set_ring_above(Boot *b, int nranks) { b->ring_above = nranks; }

void boot_set_limits(Boot *b, size_t max_msg, size_t queue_max) {
    b->max_msg = max_msg;
    b->queue_max = queue_max;
}

size_t boot_queued_bytes(const Boot *b, int peer) { return b->queued[peer]; }

const BootAddr *boot_listen_addr(const Boot *b, int rank) { return &b->peers[rank].listen; }

mscclrt_result boot_send_raw(Boot *b, int peer, const void *buf, size_t n) {
    int64_t deadline = boot_now_ms() + b->timeout_ms;
    if (b->out_fd[peer] < 0) TRY(out_open(b, peer, deadline));
    return out_write(b, peer, buf, n, deadline);
}

mscclrt_result boot_allgather(Boot *b, void *buf, size_t per_rank) {
    TRY(boot_check(b, "boot_allgather"));
    if (per_rank && !buf) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot_allgather: buf is NULL");
    if (per_rank > BOOT_MAX_MSG)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot_allgather: %zu bytes per rank is more than a "
                       "bootstrap message may carry (%zu)", per_rank, BOOT_MAX_MSG);
    int32_t seq = b->coll_seq++;
    int64_t deadline = boot_now_ms() + b->timeout_ms;
    char *base = buf;
    if (b->nranks > b->ring_above) return allgather_ring(b, base, per_rank, seq, deadline);
    const char *mine = per_rank ? base + (size_t)b->rank * per_rank : NULL;
    /* small groups: everyone sends its slice straight to everyone, so a missing rank is named
     * exactly */
    for (int k = 1; k < b->nranks; k++) {
        int p = (b->rank + k) % b->nranks;
        TRY(send_msg(b, p, BK_COLL, seq, mine, per_rank, deadline));
    }
    int have = 1, n = b->nranks;
    bool *got = calloc((size_t)n, 1);
    if (!got) return rt_fail(MSCCLRT_ERR_SYSTEM, "boot: out of memory");
    got[b->rank] = true;
    mscclrt_result res = MSCCLRT_SUCCESS;
    while (have < n) {
        for (int p = 0; p < n; p++) {
            if (got[p]) continue;
            BootMsg *m = q_take(b, p, BK_COLL, seq);
            if (m) {
                TRY_GOTO(take_msg(b, m, per_rank ? base + (size_t)p * per_rank : NULL, per_rank), res, out);
                got[p] = true;
                have++;
            } else if (b->gone[p]) {
                char doing[64], closed[128];
                snprintf(doing, sizeof doing, "collective #%d", (int)seq);
                snprintf(closed, sizeof closed, "rank %d left the group during a collective (#%d)", p, (int)seq);
                res = peer_gone(b, p, doing, closed);
                goto out;
            }
        }
        if (have == n) break;
        if (boot_now_ms() >= deadline) {
            int *miss = malloc(sizeof(int) * (size_t)n), nm = 0;
            char list[256] = "?";
            if (miss) {
                for (int p = 0; p < n; p++)
                    if (!got[p]) miss[nm++] = p;
                boot_rank_list(list, sizeof list, miss, nm);
                free(miss);
            }
            res = rt_fail(MSCCLRT_ERR_TIMEOUT, "boot: rank %d: collective #%d timed out after %d ms: "
                          "no answer from rank%s %s", b->rank, (int)seq, b->timeout_ms,
                          n - have == 1 ? "" : "s", list);
            goto out;
        }
        boot_progress(b, deadline, -1);
    }
out:
    free(got);
    return res;
}

mscclrt_result boot_barrier(Boot *b) {
    TRY(boot_check(b, "boot_barrier"));
    return boot_allgather(b, NULL, 0);
}

int boot_rank(const Boot *b) { return b->rank; }
int boot_nranks(const Boot *b) { return b->nranks; }
int boot_timeout_ms(const Boot *b) { return b->timeout_ms; }
int boot_local_rank(const Boot *b) { return b->local_rank; }
int boot_local_size(const Boot *b) { return b->local_size; }
int boot_node(const Boot *b) { return b->node; }
int boot_nnodes(const Boot *b) { return b->nnodes; }
int boot_node_of(const Boot *b, int rank) { return rank >= 0 && rank < b->nranks ? b->node_of[rank] : -1; }
int boot_pid_of(const Boot *b, int rank) { return rank >= 0 && rank < b->nranks ? b->peers[rank].pid : -1; }
const uint8_t *boot_secret(const Boot *b) { return b->secret; }

/* ---- joining ------------------------------------------------------------------------------- */

/* This host's identity: MSCCLRT_HOSTID, else hostname + the kernel's boot id. */
static void host_identity(char out[BOOT_HOSTID_BYTES]) {
    memset(out, 0, BOOT_HOSTID_BYTES);
    const char *over = param_str(PARAM_HOSTID);
    if (*over) {
        snprintf(out, BOOT_HOSTID_BYTES, "%s", over);
        return;
    }
    char host[64] = "", bootid[64] = "";
    gethostname(host, sizeof host - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(bootid, sizeof bootid, f)) bootid[0] = '\0';
        fclose(f);
        bootid[strcspn(bootid, "\r\n")] = '\0';
    }
    snprintf(out, BOOT_HOSTID_BYTES, "%s:%s", host, bootid);
}

static void compute_nodes(Boot *b) {
    int *rep = b->node_of;   /* reuse: node_of[r] = node; reps found by scanning earlier ranks */
    int *first = malloc(sizeof(int) * (size_t)b->nranks);   /* first rank of each node */
    b->nnodes = 0;
    for (int r = 0; r < b->nranks; r++) {
        int node = -1;
        for (int k = 0; first && k < b->nnodes; k++)
            if (strncmp(b->peers[first[k]].hostid, b->peers[r].hostid, BOOT_HOSTID_BYTES) == 0) { node = k; break; }
        if (node < 0) {
            node = b->nnodes++;
            if (first) first[node] = r;
        }
        rep[r] = node;
    }
    free(first);
    b->node = b->node_of[b->rank];
    b->local_rank = b->local_size = 0;
    for (int r = 0; r < b->nranks; r++) {
        if (b->node_of[r] != b->node) continue;
        if (r < b->rank) b->local_rank++;
        b->local_size++;
    }
}

void boot_close(Boot *b) {
    if (!b) return;
    b->magic = 0;
    for (int i = 0; b->out_fd && i < b->nranks; i++)
        if (b->out_fd[i] >= 0) {
            shutdown(b->out_fd[i], SHUT_WR);
            close(b->out_fd[i]);
        }
    for (int i = 0; i < b->nins; i++) in_close(b, &b->ins[i]);
    while (b->q_head) {
        BootMsg *m = b->q_head;
        b->q_head = m->next;
        free(m);
    }
    if (b->listen_fd >= 0) close(b->listen_fd);
    free(b->ins);
    free(b->out_fd);
    free(b->gone);
    for (int i = 0; b->why && i < b->nranks; i++) free(b->why[i]);
    free(b->why);
    free(b->queued);
    free(b->peers);
    free(b->node_of);
    free(b);
}

/* Reads the root's answer: the table, or the reason the rendezvous failed. *again: the root
 * closed the connection before reading our hello (BK_BUSY, or a reset before any answer): the
 * caller connects again. */
static mscclrt_result read_reply(Boot *b, int fd, const char *root, int64_t deadline, bool *again) {
    BootReply rep;
    size_t got = 0;
    *again = false;
    while (got < sizeof rep) {
        ssize_t n = recv(fd, (char *)&rep + got, sizeof rep - got, MSG_DONTWAIT);
        if (n > 0) { got += (size_t)n; continue; }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int64_t left = deadline - boot_now_ms();
            struct pollfd pf = {.fd = fd, .events = POLLIN};
            if (left <= 0 || poll(&pf, 1, (int)left) == 0)
                return rt_fail(MSCCLRT_ERR_TIMEOUT, "boot: rank %d of %d: the root at %s did not answer "
                               "within %d ms", b->rank, b->nranks, root, b->timeout_ms);
            continue;
        }
        if (n < 0 && errno == ECONNRESET && got == 0) {
            *again = true;
            return MSCCLRT_SUCCESS;
        }
        if (n == 0 && got == 0)
            return rt_fail(MSCCLRT_ERR_REMOTE, "boot: rank %d of %d: the root at %s closed the connection "
                           "without an answer (wrong secret, or a root serving another group? see its log)",
                           b->rank, b->nranks, root);
        if (n == 0) errno = ECONNRESET;
        return rt_fail_errno(MSCCLRT_ERR_REMOTE, "boot: rank %d of %d: receiving the answer of the root "
                             "at %s", b->rank, b->nranks, root);
    }
    if (rep.magic == BOOT_MAGIC && rep.version == BOOT_VERSION && rep.kind == BK_BUSY) {
        *again = true;
        return MSCCLRT_SUCCESS;
    }
    if (rep.magic != BOOT_MAGIC || rep.version != BOOT_VERSION || (rep.kind != BK_TABLE && rep.kind != BK_ABORT))
        return rt_fail(MSCCLRT_ERR_REMOTE, "boot: rank %d: malformed answer from the root at %s (magic 0x%08x "
                       "version %u kind %u)", b->rank, root, rep.magic, rep.version, rep.kind);
    if (rep.kind == BK_ABORT) {
        char text[1024];
        if (rep.len == 0 || rep.len > sizeof text)
            return rt_fail(MSCCLRT_ERR_REMOTE, "boot: rank %d: the root at %s refused us with a %u-byte "
                           "reason (allowed 1..%zu)", b->rank, root, rep.len, sizeof text);
        TRY(boot_read_all(fd, text, rep.len, deadline, "root"));
        text[rep.len - 1] = '\0';
        mscclrt_result code = rep.arg == MSCCLRT_ERR_TIMEOUT ? MSCCLRT_ERR_TIMEOUT : MSCCLRT_ERR_INVALID_ARG;
        return rt_fail(code, "%s (rank %d)", text, b->rank);
    }
    if (rep.arg != b->nranks || rep.len != (uint64_t)b->nranks * sizeof(BootPeerWire))
        return rt_fail(MSCCLRT_ERR_REMOTE, "boot: rank %d: the root's table has %d ranks in %u bytes, "
                       "expected %d in %zu", b->rank, (int)rep.arg, rep.len, b->nranks,
                       (size_t)b->nranks * sizeof(BootPeerWire));
    TRY(boot_read_all(fd, b->peers, rep.len, deadline, "root"));
    for (int i = 0; i < b->nranks; i++) b->peers[i].hostid[BOOT_HOSTID_BYTES - 1] = '\0';
    return MSCCLRT_SUCCESS;
}

mscclrt_result boot_init(Boot **out, const BootId *id, int rank, int nranks, int timeout_ms) {
    mscclrt_result res;
    int root_fd = -1;
    if (!out) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot_init: out is NULL");
    *out = NULL;
    if (!id) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot_init: id is NULL");
    BootIdWire w;
    memcpy(&w, id->bytes, sizeof w);
    if (w.magic != BOOT_MAGIC || w.version != BOOT_VERSION)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot_init: id is not a bootstrap id of this version "
                       "(magic 0x%08x version %u, want 0x%08x version %u)", w.magic, w.version,
                       BOOT_MAGIC, BOOT_VERSION);
    if (nranks <= 0 || nranks > BOOT_MAX_RANKS)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot_init: nranks %d out of range [1, %d]", nranks, BOOT_MAX_RANKS);
    if (rank < 0 || rank >= nranks)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot_init: rank %d out of range [0, %d)", rank, nranks);
    if (timeout_ms <= 0) {
        long long ms;
        TRY(param_int(PARAM_BOOT_TIMEOUT_MS, &ms));
        timeout_ms = (int)ms;   /* params.def bounds it */
    }

    Boot *b = calloc(1, sizeof *b);
    if (!b) return rt_fail(MSCCLRT_ERR_SYSTEM, "boot_init: out of memory");
    b->magic = BOOT_MAGIC;
    b->rank = rank, b->nranks = nranks, b->timeout_ms = timeout_ms;
    b->ring_above = BOOT_DIRECT_MAX;
    b->listen_fd = -1;
    memcpy(b->secret, w.secret, BOOT_SECRET_BYTES);
    b->peers = calloc((size_t)nranks, sizeof *b->peers);
    b->out_fd = malloc(sizeof(int) * (size_t)nranks);
    b->gone = calloc((size_t)nranks, sizeof *b->gone);
    b->why = calloc((size_t)nranks, sizeof *b->why);
    b->queued = calloc((size_t)nranks, sizeof *b->queued);
    b->node_of = calloc((size_t)nranks, sizeof *b->node_of);
    b->max_msg = BOOT_MAX_MSG;
    b->queue_max = BOOT_QUEUE_MAX;
    if (!b->peers || !b->out_fd || !b->gone || !b->why || !b->queued || !b->node_of) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "boot_init: out of memory for %d ranks", nranks);
        goto fail;
    }
    for (int i = 0; i < nranks; i++) b->out_fd[i] = -1;

    int64_t deadline = boot_now_ms() + timeout_ms;
    char root[80];
    boot_addr_str(&w.root, root, sizeof root);
    BootAddr bound;
    memset(&bound, 0, sizeof bound);
    /* A root under a flood of connections may close ours before it read the hello; it says so
     * (BK_BUSY) and we come back, until the deadline. */
    for (int attempt = 1;; attempt++) {
        TRY_GOTO(boot_connect(&w.root, deadline, "the bootstrap root", &root_fd), res, fail);
        if (b->listen_fd < 0) {
            /* listen on the address that routes to the root: the one peers can most likely reach */
            BootSockAddr me;
            socklen_t mlen = sizeof me;
            if (getsockname(root_fd, &me.sa, &mlen) != 0) {
                res = rt_fail_errno(MSCCLRT_ERR_SYSTEM, "boot: getsockname");
                goto fail;
            }
            BootAddr local;
            boot_addr_from_sock(&local, &me);
            local.port_be[0] = local.port_be[1] = 0;
            TRY_GOTO(boot_listen(&local, false, &b->listen_fd, &bound), res, fail);
        }
        BootHello h = {.magic = BOOT_MAGIC, .version = BOOT_VERSION, .kind = BK_HELLO, .rank = rank,
                       .nranks = nranks, .pid = (int32_t)getpid(), .listen = bound};
        int64_t left = deadline - boot_now_ms();
        h.wait_ms = left > 0 ? (uint32_t)left : 0;
        memcpy(h.secret, w.secret, BOOT_SECRET_BYTES);
        host_identity(h.hostid);
        bool again = false;
        res = boot_write_raw(root_fd, &h, sizeof h, deadline, NULL);
        if (res == MSCCLRT_ERR_REMOTE) {
            again = true;   /* reset before we could write: closed by a busy root */
        } else if (res != MSCCLRT_SUCCESS) {
            res = rt_fail(res, "boot: rank %d of %d: the root at %s did not take our hello within %d ms",
                          rank, nranks, root, timeout_ms);
            goto fail;
        } else {
            TRY_GOTO(read_reply(b, root_fd, root, deadline, &again), res, fail);
        }
        close(root_fd);
        root_fd = -1;
        if (!again) break;
        if (boot_now_ms() + 50 >= deadline) {
            res = rt_fail(MSCCLRT_ERR_TIMEOUT, "boot: rank %d of %d: the root at %s was too busy to read "
                          "our hello in %d attempts within %d ms (is its port flooded? see its log)",
                          rank, nranks, root, attempt, timeout_ms);
            goto fail;
        }
        LOG_INFO(LOG_SUB_BOOT, "rank %d: the root at %s was busy (attempt %d); connecting again", rank,
                 root, attempt);
        struct timespec ts = {0, (20 + (long)(getpid() + attempt * 7) % 30) * 1000000};
        nanosleep(&ts, NULL);
    }

    compute_nodes(b);
    char where[80];
    boot_addr_str(&bound, where, sizeof where);
    LOG_INFO(LOG_SUB_BOOT, "rank %d of %d joined through %s; listening on %s; node %d of %d, local rank "
             "%d of %d", rank, nranks, root, where, b->node, b->nnodes, b->local_rank, b->local_size);
    *out = b;
    return MSCCLRT_SUCCESS;
fail:
    if (root_fd >= 0) close(root_fd);
    boot_close(b);
    return res;
}

mscclrt_result boot_get_unique_id(BootId *id) {
    if (!id) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot_get_unique_id: id is NULL");
    memset(id, 0, sizeof *id);
    long long wait;
    TRY(param_int(PARAM_BOOT_TIMEOUT_MS, &wait));
    BootIdWire w;
    memset(&w, 0, sizeof w);
    w.magic = BOOT_MAGIC;
    w.version = BOOT_VERSION;
    size_t got = 0;
    while (got < sizeof w.secret) {
        ssize_t n = getrandom(w.secret + got, sizeof w.secret - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return rt_fail_errno(MSCCLRT_ERR_SYSTEM, "boot_get_unique_id: getrandom");
        got += (size_t)n;
    }
    BootAddr a;
    int fd;
    TRY(boot_addr_pick_local(&a));
    TRY(boot_listen(&a, false, &fd, &w.root));
    TRY(boot_root_start(fd, &w.root, w.secret, (int)wait));
    memcpy(id->bytes, &w, sizeof w);
    char where[80];
    boot_addr_str(&w.root, where, sizeof where);
    LOG_INFO(LOG_SUB_BOOT, "bootstrap root listening on %s", where);
    return MSCCLRT_SUCCESS;
}

/*
 * boot_root.c - the rendezvous root: a detached thread that accepts hellos until all nranks
 * ranks have arrived, then sends each the table of listening addresses and host identities.
 * A connection with the wrong secret or a malformed hello is refused and logged, and the root
 * keeps waiting, so strays cannot disturb the rendezvous. If time runs out it tells the ranks
 * that came which ranks did not. It serves exactly one rendezvous, then exits.
 *
 * Anyone who can reach the port can connect, and only a hello proves the secret, so until then
 * a connection is "pending" and costs a bounded amount:
 *   - at most BOOT_PENDING_MAX are pending at once (a fixed array: memory does not grow with the
 *     number of connections ever made); a newer one evicts the oldest;
 *   - each has BOOT_HELLO_WAIT_MS from its accept to present its hello, then is closed;
 *   - when accept fails because descriptors (or kernel memory) ran out, the oldest pending one is
 *     closed to make room; if none is pending, accepting pauses for BOOT_ACCEPT_PAUSE_MS rather
 *     than spinning on a listener that stays readable;
 *   - a pending connection closed for any of these reasons is first told BK_BUSY: a genuine rank
 *     whose hello was merely late connects again, a stray ignores it;
 *   - every refusal is logged at WARN, at most one line per BOOT_WARN_EVERY_MS.
 * A genuine rank sends its hello right after connecting, so it is almost always read at accept.
 */
#include "bootstrap/boot_internal.h"
#include "core/err.h"
#include "core/log.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct RootConn {
    int fd;                /* owned; -1: the slot is free (pending) / the rank has not joined */
    BootAddr from;         /* peer address, for log lines */
    BootHello hello;       /* pending: being read; joined: the rank's hello */
    size_t got;            /* bytes of hello read so far */
    int64_t at;            /* pending: when accepted (the hello deadline runs from here);
                              joined: when its hello was accepted */
} RootConn;

typedef struct Root {
    int listen_fd;         /* owned; -1 once closed */
    BootAddr where;
    char where_s[80];      /* where, as text for log lines */
    uint8_t secret[BOOT_SECRET_BYTES];
    int first_wait_ms;
    RootConn pend[BOOT_PENDING_MAX];   /* connections that have not presented a hello yet */
    int npend;             /* slots of pend in use */
    RootConn *ranks;       /* owned, [nranks] once the first hello is accepted */
    int nranks;            /* 0 until the first accepted hello */
    int joined;
    int64_t first_at;      /* time of the first accepted hello */
    int64_t pause_until;   /* not accepting before this time (descriptors ran out) */
    BootRate rate;         /* refusal WARNs */
} Root;

/* A FIN, not a reset: closing a socket with unread input resets the connection, and a reset
 * can destroy the last answer still queued at the peer before it reads it. So what the peer
 * sent is drained and our side shut down before the close. */
static void root_close_conn(RootConn *c) {
    if (c->fd < 0) return;
    char sink[512];
    for (int k = 0; k < 8 && recv(c->fd, sink, sizeof sink, MSG_DONTWAIT) > 0; k++) {}
    shutdown(c->fd, SHUT_WR);
    close(c->fd);
    c->fd = -1;
}

/* Closes pending slot i, telling the other end BK_BUSY first when busy. Best effort and never
 * blocking: whoever it is may not read. What it sent is drained first, so the close is a FIN and
 * not a reset that could overtake the answer. */
static void root_drop_pending(Root *r, int i, bool busy) {
    RootConn *c = &r->pend[i];
    if (busy) {
        BootReply rep = {.magic = BOOT_MAGIC, .version = BOOT_VERSION, .kind = BK_BUSY};
        char sink[512];
        for (int k = 0; k < 8 && recv(c->fd, sink, sizeof sink, MSG_DONTWAIT) > 0; k++) {}
        (void)!send(c->fd, &rep, sizeof rep, MSG_DONTWAIT | MSG_NOSIGNAL);
    }   /* root_close_conn drains again and shuts down first */
    root_close_conn(c);
    r->npend--;
}

static int root_oldest_pending(const Root *r) {
    int best = -1;
    for (int i = 0; i < BOOT_PENDING_MAX; i++)
        if (r->pend[i].fd >= 0 && (best < 0 || r->pend[i].at < r->pend[best].at)) best = i;
    return best;
}

/* Sends an ABORT with a result code and text to one connection (best effort: it is leaving). */
static void root_send_abort(RootConn *c, mscclrt_result code, const char *text) {
    BootReply rep = {.magic = BOOT_MAGIC, .version = BOOT_VERSION, .kind = BK_ABORT, .arg = (int32_t)code,
                     .len = (uint32_t)strlen(text) + 1};
    int64_t dl = boot_now_ms() + 2000;
    if (boot_write_all(c->fd, &rep, sizeof rep, dl, "a joining rank") == MSCCLRT_SUCCESS)
        boot_write_all(c->fd, text, rep.len, dl, "a joining rank");
}

/* Checks the complete hello of pending slot i; true if the rank joined (the connection then
 * moved to r->ranks). Refusals are logged (and, past the secret, answered); the caller closes. */
static bool root_accept_hello(Root *r, int i) {
    RootConn *c = &r->pend[i];
    const BootHello *h = &c->hello;
    char from[80], msg[512];
    boot_addr_str(&c->from, from, sizeof from);
    if (h->magic != BOOT_MAGIC || h->version != BOOT_VERSION || h->kind != BK_HELLO) {
        BOOT_WARN_LIMITED(&r->rate, "boot root at %s: refused a connection from %s: not a bootstrap "
                          "hello of this version (magic 0x%08x version %u kind %u)", r->where_s, from,
                          h->magic, h->version, h->kind);
        return false;
    }
    if (!boot_secret_equal(h->secret, r->secret)) {
        BOOT_WARN_LIMITED(&r->rate, "boot root at %s: refused a connection from %s claiming rank %d: "
                          "wrong secret", r->where_s, from, (int)h->rank);
        return false;
    }
    if (h->nranks <= 0 || h->nranks > BOOT_MAX_RANKS || h->rank < 0 || h->rank >= h->nranks) {
        snprintf(msg, sizeof msg, "boot: rank %d of %d is out of range (nranks must be in [1, %d])",
                 (int)h->rank, (int)h->nranks, BOOT_MAX_RANKS);
    } else if (r->nranks && h->nranks != r->nranks) {
        snprintf(msg, sizeof msg, "boot: rank %d says the group has %d ranks, but earlier ranks said %d",
                 (int)h->rank, (int)h->nranks, r->nranks);
    } else if (r->nranks && r->ranks[h->rank].fd >= 0) {
        snprintf(msg, sizeof msg, "boot: rank %d joined twice (first pid %d, now pid %d from %s)",
                 (int)h->rank, (int)r->ranks[h->rank].hello.pid, (int)h->pid, from);
    } else {
        msg[0] = '\0';
    }
    if (msg[0]) {   /* past the secret: a member of the group misconfigured, logged every time */
        LOG_WARN("boot root at %s: refused %s: %s", r->where_s, from, msg);
        root_send_abort(c, MSCCLRT_ERR_INVALID_ARG, msg);
        return false;
    }
    if (!r->nranks) {
        r->ranks = malloc(sizeof *r->ranks * (size_t)h->nranks);
        if (!r->ranks) {
            LOG_WARN("boot root at %s: out of memory for a group of %d ranks", r->where_s, (int)h->nranks);
            return false;
        }
        for (int k = 0; k < h->nranks; k++) r->ranks[k].fd = -1;
        r->nranks = h->nranks;
        r->first_at = boot_now_ms();
    }
    RootConn *slot = &r->ranks[h->rank];
    *slot = *c;
    slot->at = boot_now_ms();
    c->fd = -1;   /* moved */
    r->npend--;
    r->joined++;
    LOG_INFO(LOG_SUB_BOOT, "boot root at %s: rank %d of %d joined from %s (pid %d)", r->where_s,
             (int)slot->hello.rank, r->nranks, from, (int)slot->hello.pid);
    return true;
}

/* The earliest moment any joined rank gives up, less a margin so the answer reaches it first. */
static int64_t root_deadline(const Root *r, int64_t start) {
    if (!r->nranks) return start + r->first_wait_ms;
    bool any = false;
    int64_t d = 0;
    for (int i = 0; i < r->nranks; i++) {
        const RootConn *c = &r->ranks[i];
        if (c->fd < 0) continue;
        int64_t w = c->hello.wait_ms, margin = w / 4 < 200 ? w / 4 : 200;
        /* wait_ms was measured when the hello was sent; its acceptance is close enough */
        int64_t dl = c->at + w - margin;
        if (!any || dl < d) d = dl;
        any = true;
    }
    return any ? d : r->first_at + r->first_wait_ms;   /* everyone left: wait as for the first */
}

/* Whether rank i's process is this one (the root runs in a rank's process): its answer goes
 * last. The answers are written into the sockets in turn, and that rank, once answered, may
 * end the process (a failed rendezvous) and with it this thread before the other ranks' answers
 * are written: they then read a closed connection instead of the reason (seen in CI). */
static bool root_answer_last(const Root *r, int i) { return r->ranks[i].hello.pid == (int32_t)getpid(); }

static void root_send_table(Root *r) {
    size_t n = (size_t)r->nranks;
    BootPeerWire *tab = calloc(n, sizeof *tab);
    if (!tab) { LOG_WARN("boot root: out of memory for a table of %zu ranks", n); return; }
    for (size_t i = 0; i < n; i++) {
        const BootHello *h = &r->ranks[i].hello;
        tab[i].listen = h->listen;
        tab[i].pid = h->pid;
        memcpy(tab[i].hostid, h->hostid, BOOT_HOSTID_BYTES);
    }
    BootReply rep = {.magic = BOOT_MAGIC, .version = BOOT_VERSION, .kind = BK_TABLE,
                     .arg = r->nranks, .len = (uint32_t)(n * sizeof *tab)};
    for (size_t k = 0; k < 2 * n; k++) {   /* other processes' ranks first */
        const size_t i = k % n;
        if (root_answer_last(r, (int)i) != (k >= n)) continue;
        RootConn *c = &r->ranks[i];
        char who[32];
        snprintf(who, sizeof who, "rank %zu", i);
        int64_t dl = boot_now_ms() + 5000;
        if (boot_write_all(c->fd, &rep, sizeof rep, dl, who) != MSCCLRT_SUCCESS ||
            boot_write_all(c->fd, tab, rep.len, dl, who) != MSCCLRT_SUCCESS)
            LOG_WARN("boot root: could not send the table to rank %zu (it will time out)", i);
    }
    free(tab);
}

static void root_send_timeout(Root *r, int64_t waited) {
    char list[256], msg[512];
    int *missing = calloc((size_t)r->nranks, sizeof(int)), nm = 0;
    if (!missing) return;
    for (int i = 0; i < r->nranks; i++)
        if (r->ranks[i].fd < 0) missing[nm++] = i;
    boot_rank_list(list, sizeof list, missing, nm);
    snprintf(msg, sizeof msg, "boot: rendezvous at %s timed out after %lld ms: rank%s %s did not arrive "
             "(%d of %d joined)", r->where_s, (long long)waited, nm == 1 ? "" : "s", list, r->joined,
             r->nranks);
    LOG_WARN("%s", msg);
    for (int k = 0; k < 2 * r->nranks; k++) {   /* other processes' ranks first */
        const int i = k % r->nranks;
        if (r->ranks[i].fd >= 0 && root_answer_last(r, i) == (k >= r->nranks))
            root_send_abort(&r->ranks[i], MSCCLRT_ERR_TIMEOUT, msg);
    }
    free(missing);
}

/* Reads what pending slot i has sent; a complete hello joins or is refused. */
static void root_read_pending(Root *r, int i) {
    RootConn *c = &r->pend[i];
    while (c->got < sizeof c->hello) {
        ssize_t n = recv(c->fd, (char *)&c->hello + c->got, sizeof c->hello - c->got, MSG_DONTWAIT);
        if (n > 0) { c->got += (size_t)n; continue; }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n < 0 && errno == EINTR) continue;
        char from[80];
        boot_addr_str(&c->from, from, sizeof from);
        LOG_TRACE(LOG_SUB_BOOT, "boot root: %s left after %zu of %zu hello bytes", from, c->got,
                  sizeof c->hello);
        root_drop_pending(r, i, false);
        return;
    }
    if (!root_accept_hello(r, i)) root_drop_pending(r, i, false);
}

/* A joined rank says nothing more: data or EOF means it left. */
static void root_read_joined(Root *r, int rank) {
    RootConn *c = &r->ranks[rank];
    char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    LOG_INFO(LOG_SUB_BOOT, "boot root: rank %d left before the rendezvous completed", rank);
    r->joined--;
    root_close_conn(c);
}

/* Accepts pending connections (at most BOOT_PENDING_MAX per call, so joined ranks and deadlines
 * are still served under a flood) and reads whatever hello has already arrived. */
static void root_accept(Root *r) {
    for (int k = 0; k < BOOT_PENDING_MAX; k++) {
        BootSockAddr sa;
        socklen_t len = sizeof sa;
        int fd = accept4(r->listen_fd, &sa.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            if (e == EINTR || e == ECONNABORTED) continue;
            if (!boot_accept_exhausted(e)) return;   /* EAGAIN: drained */
            int old = root_oldest_pending(r);
            if (old >= 0) {   /* make room: the oldest pending connection has had its chance */
                BOOT_WARN_LIMITED(&r->rate, "boot root at %s: out of file descriptors (accept: %s); "
                                  "closed the oldest of %d connections that have not presented a "
                                  "hello", r->where_s, strerror(e), r->npend);
                root_drop_pending(r, old, true);
                continue;
            }
            BOOT_WARN_LIMITED(&r->rate, "boot root at %s: out of file descriptors (accept: %s) with "
                              "no connection to close; not accepting for %d ms", r->where_s,
                              strerror(e), BOOT_ACCEPT_PAUSE_MS);
            r->pause_until = boot_now_ms() + BOOT_ACCEPT_PAUSE_MS;
            return;
        }
        BootAddr from;
        boot_addr_from_sock(&from, &sa);
        int old = r->npend >= BOOT_PENDING_MAX ? root_oldest_pending(r) : -1;
        if (old >= 0) {
            char s[80];
            boot_addr_str(&r->pend[old].from, s, sizeof s);
            BOOT_WARN_LIMITED(&r->rate, "boot root at %s: %d connections are waiting to present a "
                              "hello; closed the oldest (from %s)", r->where_s, BOOT_PENDING_MAX, s);
            root_drop_pending(r, old, true);
        }
        int i = 0;
        while (i < BOOT_PENDING_MAX && r->pend[i].fd >= 0) i++;
        RT_ASSERT(i < BOOT_PENDING_MAX);   /* npend counts the slots in use */
        RootConn *c = &r->pend[i];
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->from = from;
        c->at = boot_now_ms();
        r->npend++;
        root_read_pending(r, i);
    }
}

/* Closes pending connections whose hello deadline passed; returns the next deadline (or
 * INT64_MAX). */
static int64_t root_expire(Root *r, int64_t now) {
    int64_t next = INT64_MAX;
    for (int i = 0; i < BOOT_PENDING_MAX; i++) {
        RootConn *c = &r->pend[i];
        if (c->fd < 0) continue;
        int64_t dl = c->at + BOOT_HELLO_WAIT_MS;
        if (dl > now) {
            if (dl < next) next = dl;
            continue;
        }
        char from[80];
        boot_addr_str(&c->from, from, sizeof from);
        BOOT_WARN_LIMITED(&r->rate, "boot root at %s: closed a connection from %s: no hello within "
                          "%d ms (%zu of %zu bytes)", r->where_s, from, BOOT_HELLO_WAIT_MS, c->got,
                          sizeof c->hello);
        root_drop_pending(r, i, true);
    }
    return next;
}

static void *root_main(void *arg) {
    Root *r = arg;
    int64_t start = boot_now_ms();
    pthread_setname_np(pthread_self(), "mscclrt-boot");
    struct pollfd *pfd = NULL;
    int *pidx = NULL, pcap = 0;
    while (!r->nranks || r->joined < r->nranks) {
        int64_t now = boot_now_ms(), end = root_deadline(r, start);
        if (end - now <= 0) break;
        int64_t wake = root_expire(r, now);
        if (wake > end) wake = end;
        bool accepting = now >= r->pause_until;
        if (!accepting && r->pause_until < wake) wake = r->pause_until;
        int need = 1 + BOOT_PENDING_MAX + r->nranks;
        if (pcap < need) {
            struct pollfd *np = realloc(pfd, sizeof *np * (size_t)need);
            int *ni = np ? realloc(pidx, sizeof *ni * (size_t)need) : NULL;
            if (np) pfd = np;
            if (ni) pidx = ni;
            if (!np || !ni) { LOG_WARN("boot root at %s: out of memory", r->where_s); goto out; }
            pcap = need;
        }
        /* pidx: -1 the listener, 0.. a pending slot, -2 - rank a joined rank */
        int n = 0;
        if (accepting) {
            pidx[n] = -1;
            pfd[n++] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
        }
        for (int i = 0; i < BOOT_PENDING_MAX; i++)
            if (r->pend[i].fd >= 0) {
                pidx[n] = i;
                pfd[n++] = (struct pollfd){.fd = r->pend[i].fd, .events = POLLIN};
            }
        for (int i = 0; i < r->nranks; i++)
            if (r->ranks[i].fd >= 0) {
                pidx[n] = -2 - i;
                pfd[n++] = (struct pollfd){.fd = r->ranks[i].fd, .events = POLLIN};
            }
        int64_t left = wake - now;
        int rc = poll(pfd, (nfds_t)n, left > 1000 ? 1000 : left < 0 ? 0 : (int)left);
        if (rc <= 0) continue;
        bool listen_ready = false;
        for (int k = 0; k < n; k++) {
            if (!pfd[k].revents) continue;
            if (pidx[k] == -1) listen_ready = true;
            else if (pidx[k] >= 0 && r->pend[pidx[k]].fd == pfd[k].fd) root_read_pending(r, pidx[k]);
            else if (pidx[k] <= -2 && r->ranks[-2 - pidx[k]].fd == pfd[k].fd) root_read_joined(r, -2 - pidx[k]);
        }
        if (listen_ready) root_accept(r);
    }
    /* stop accepting before anyone hears back: a rank that goes on to a second rendezvous on
     * the same port (environment init) must never reach this finished root */
    close(r->listen_fd);
    r->listen_fd = -1;
    if (r->nranks && r->joined == r->nranks) {
        root_send_table(r);
    } else if (r->nranks) {
        root_send_timeout(r, boot_now_ms() - r->first_at);
    } else {
        LOG_WARN("boot root at %s: no rank arrived within %d ms; giving up", r->where_s, r->first_wait_ms);
    }
out:
    for (int i = 0; i < BOOT_PENDING_MAX; i++) root_close_conn(&r->pend[i]);
    for (int i = 0; i < r->nranks; i++) root_close_conn(&r->ranks[i]);
    if (r->listen_fd >= 0) close(r->listen_fd);
    free(pfd);
    free(pidx);
    free(r->ranks);
    free(r);
    return NULL;
}

mscclrt_result boot_root_start(int fd, const BootAddr *where, const uint8_t *secret, int first_wait_ms) {
    Root *r = calloc(1, sizeof *r);
    if (!r) {
        close(fd);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "boot: out of memory for the root");
    }
    r->listen_fd = fd;
    r->where = *where;
    boot_addr_str(where, r->where_s, sizeof r->where_s);
    memcpy(r->secret, secret, BOOT_SECRET_BYTES);
    r->first_wait_ms = first_wait_ms;
    for (int i = 0; i < BOOT_PENDING_MAX; i++) r->pend[i].fd = -1;
    /* the root holds one connection per rank until all have arrived: large groups need more
     * descriptors than the usual soft limit of 1024 */
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
        rlim_t was = lim.rlim_cur;
        lim.rlim_cur = lim.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &lim) == 0)
            LOG_INFO(LOG_SUB_BOOT, "boot root: raised the open-file limit from %llu to %llu",
                     (unsigned long long)was, (unsigned long long)lim.rlim_cur);
    }
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int e = pthread_create(&t, &attr, root_main, r);
    pthread_attr_destroy(&attr);
    if (e) {
        close(fd);
        free(r);
        errno = e;
        return rt_fail_errno(MSCCLRT_ERR_SYSTEM, "boot: cannot start the root thread");
    }
    return MSCCLRT_SUCCESS;
}

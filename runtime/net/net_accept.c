/*
 * net_accept.c - the socket backend's listener during connection setup. Anyone who can reach
 * the port may connect, so a connection is only "pending" until it has sent a whole HELLO
 * (TcpHdr + the group's secret), and pending connections are bounded:
 *   in time:   each has NET_HELLO_WAIT_MS from its accept, an absolute deadline that bytes
 *              trickling in do not extend;
 *   in number: at most NET_PENDING_MAX; a newer one closes the oldest;
 *   in work:   all of them are read at once (one poll), so an idle or slow one delays nobody;
 *              running out of descriptors closes the oldest or pauses accepting instead of
 *              spinning; refusals are logged at WARN at most once a second (BootRate).
 * The secret is compared in constant time (boot_secret_equal). net_tcp.c runs net_accept_step
 * both while it connects to higher ranks and while it waits for the lower ones.
 */
#include "net/net_internal.h"
#include "core/err.h"
#include "core/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HELLO_BYTES (sizeof(TcpHdr) + TCP_SECRET)

struct NetPending {
    int fd;                      /* owned; -1: free slot */
    int64_t due;                 /* its whole HELLO must have arrived by then */
    size_t got;                  /* bytes of buf received */
    uint8_t buf[HELLO_BYTES];
    char from[64];               /* "address:port", for log lines */
};

static void from_str(const struct sockaddr_storage *ss, char *buf, size_t n) {
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip);
        port = ntohs(s6->sin6_port);
        snprintf(buf, n, "[%s]:%u", ip, port);
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
        port = ntohs(s4->sin_port);
        snprintf(buf, n, "%s:%u", ip, port);
    }
}

mscclrt_result net_accept_init(NetAccept *a, int lfd, int me, int nranks, int nsocks,
                               const bool *remote, const uint8_t *secret) {
    memset(a, 0, sizeof *a);
    a->lfd = lfd;
    a->me = me, a->nranks = nranks, a->nsocks = nsocks;
    a->remote = remote;
    a->secret = secret;
    a->fd = malloc(sizeof *a->fd * (size_t)nranks * (size_t)nsocks);
    a->pend = calloc(NET_PENDING_MAX, sizeof *a->pend);
    if (!a->fd || !a->pend) {
        net_accept_fini(a);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory for the listener");
    }
    for (int i = 0; i < nranks * nsocks; i++) a->fd[i] = -1;
    for (int i = 0; i < NET_PENDING_MAX; i++) a->pend[i].fd = -1;
    for (int q = 0; q < me; q++) a->missing += remote[q] ? nsocks : 0;
    /* accept must never block: the flood may take back what poll announced */
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
    return MSCCLRT_SUCCESS;
}

void net_accept_fini(NetAccept *a) {
    for (int i = 0; a->pend && i < NET_PENDING_MAX; i++)
        if (a->pend[i].fd >= 0) close(a->pend[i].fd);
    for (int i = 0; a->fd && i < a->nranks * a->nsocks; i++)
        if (a->fd[i] >= 0) close(a->fd[i]);
    free(a->pend);
    free(a->fd);
    a->pend = NULL;
    a->fd = NULL;
}

int net_accept_take(NetAccept *a, int rank, int sock) {
    int *slot = &a->fd[rank * a->nsocks + sock];
    int fd = *slot;
    *slot = -1;
    return fd;
}

static void pend_close(NetAccept *a, NetPending *p) {
    close(p->fd);
    p->fd = -1;
    a->npend--;
}

/* Refuses a pending connection: closed, counted, logged (rate-limited). */
static void pend_refuse(NetAccept *a, NetPending *p, const char *why) {
    a->refused++;
    BOOT_WARN_LIMITED(&a->rate, "net: rank %d refused a connection from %s: %s", a->me, p->from,
                      why);
    pend_close(a, p);
}

/* A whole HELLO arrived on p: the connection becomes one of the group's sockets, or is refused.
 * Only a rank that knows the secret and disagrees on the socket count fails the setup. */
static mscclrt_result pend_hello(NetAccept *a, NetPending *p) {
    char why[256];
    uint32_t rank, sock;
    TcpHelloVerdict v = tcp_hello_check(p->buf, (uint32_t)a->me, (uint32_t)a->nranks, a->remote,
                                        (uint32_t)a->nsocks, &rank, &sock, why, sizeof why);
    if (v == TCP_HELLO_MALFORMED) {
        pend_refuse(a, p, why);
        return MSCCLRT_SUCCESS;
    }
    if (!boot_secret_equal(p->buf + sizeof(TcpHdr), a->secret)) {
        pend_refuse(a, p, "wrong secret");
        return MSCCLRT_SUCCESS;
    }
    if (v == TCP_HELLO_NSOCKS) {
        pend_close(a, p);
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "net: %s", why);
    }
    if (v == TCP_HELLO_UNEXPECTED) {
        pend_refuse(a, p, why);
        return MSCCLRT_SUCCESS;
    }
    int *slot = &a->fd[rank * (uint32_t)a->nsocks + sock];
    if (*slot >= 0) {
        snprintf(why, sizeof why, "rank %u introduced socket %u a second time", rank, sock);
        pend_refuse(a, p, why);
        return MSCCLRT_SUCCESS;
    }
    /* the transport's threads use blocking sockets with poll()-bounded waits */
    fcntl(p->fd, F_SETFL, fcntl(p->fd, F_GETFL) & ~O_NONBLOCK);
    int one = 1;
    setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);   /* signals are tiny */
    *slot = p->fd;
    a->missing--;
    p->fd = -1;
    a->npend--;
    return MSCCLRT_SUCCESS;
}

/* Reads what p has sent so far (never more than its HELLO: what follows is the transport's). */
static mscclrt_result pend_read(NetAccept *a, NetPending *p) {
    while (p->got < HELLO_BYTES) {
        ssize_t k = recv(p->fd, p->buf + p->got, HELLO_BYTES - p->got, MSG_DONTWAIT);
        if (k > 0) {
            p->got += (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return MSCCLRT_SUCCESS;
        pend_refuse(a, p, k == 0 ? "closed before a whole hello" : strerror(errno));
        return MSCCLRT_SUCCESS;
    }
    return pend_hello(a, p);
}

static NetPending *pend_oldest(NetAccept *a) {
    NetPending *old = NULL;
    for (int i = 0; i < NET_PENDING_MAX; i++)
        if (a->pend[i].fd >= 0 && (!old || a->pend[i].due < old->due)) old = &a->pend[i];
    return old;
}

/* Accepts what the backlog holds (a bounded number per call, so pending ones get read too). */
static mscclrt_result accept_some(NetAccept *a, int64_t now) {
    for (int k = 0; k < NET_PENDING_MAX; k++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(a->lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            if (e == EINTR || e == ECONNABORTED) continue;
            if (!boot_accept_exhausted(e)) return MSCCLRT_SUCCESS;   /* EAGAIN: drained */
            NetPending *old = pend_oldest(a);
            if (old) {
                BOOT_WARN_LIMITED(&a->rate, "net: rank %d: out of file descriptors (accept: %s); "
                                  "closed the oldest of %d connections that have not introduced "
                                  "themselves", a->me, strerror(e), a->npend);
                a->refused++;
                pend_close(a, old);
                continue;
            }
            BOOT_WARN_LIMITED(&a->rate, "net: rank %d: out of file descriptors (accept: %s) with "
                              "no connection to close; not accepting for %d ms", a->me,
                              strerror(e), NET_ACCEPT_PAUSE_MS);
            a->pause_until = now + NET_ACCEPT_PAUSE_MS;
            return MSCCLRT_SUCCESS;
        }
        if (a->npend == NET_PENDING_MAX) {
            NetPending *old = pend_oldest(a);
            BOOT_WARN_LIMITED(&a->rate, "net: rank %d: %d connections are waiting to introduce "
                              "themselves; closed the oldest (from %s)", a->me, NET_PENDING_MAX,
                              old->from);
            a->refused++;
            pend_close(a, old);
        }
        NetPending *p = NULL;
        for (int i = 0; i < NET_PENDING_MAX && !p; i++)
            if (a->pend[i].fd < 0) p = &a->pend[i];
        p->fd = fd;
        p->due = now + NET_HELLO_WAIT_MS;
        p->got = 0;
        from_str(&ss, p->from, sizeof p->from);
        a->npend++;
        TRY(pend_read(a, p));   /* a genuine rank sent its hello right after connecting */
    }
    return MSCCLRT_SUCCESS;
}

mscclrt_result net_accept_step(NetAccept *a, int64_t until, int fd, short events) {
    int64_t now = net_now_ms(), wake = until;
    /* overdue hellos first: their deadline is absolute, whatever trickled in */
    for (int i = 0; i < NET_PENDING_MAX && a->npend; i++) {
        NetPending *p = &a->pend[i];
        if (p->fd < 0) continue;
        if (p->due <= now) {
            char why[96];
            snprintf(why, sizeof why, "no whole hello within %d ms (%zu of %zu bytes)",
                     NET_HELLO_WAIT_MS, p->got, HELLO_BYTES);
            pend_refuse(a, p, why);
        } else if (p->due < wake) {
            wake = p->due;
        }
    }
    bool accepting = now >= a->pause_until;
    if (!accepting && a->pause_until < wake) wake = a->pause_until;
    struct pollfd pf[2 + NET_PENDING_MAX];
    NetPending *who[2 + NET_PENDING_MAX];
    int n = 0;
    pf[n] = (struct pollfd){.fd = accepting ? a->lfd : -1, .events = POLLIN};
    who[n++] = NULL;
    if (fd >= 0) {
        pf[n] = (struct pollfd){.fd = fd, .events = events};
        who[n++] = NULL;
    }
    int first = n;
    for (int i = 0; i < NET_PENDING_MAX; i++)
        if (a->pend[i].fd >= 0) {
            pf[n] = (struct pollfd){.fd = a->pend[i].fd, .events = POLLIN};
            who[n++] = &a->pend[i];
        }
    int64_t left = wake - now;
    if (left < 0) left = 0;
    int pr = poll(pf, (nfds_t)n, left > 1000 ? 1000 : (int)left);
    if (pr <= 0) return MSCCLRT_SUCCESS;
    for (int k = first; k < n; k++)
        if (pf[k].revents && who[k]->fd == pf[k].fd) TRY(pend_read(a, who[k]));
    if (pf[0].revents) TRY(accept_some(a, net_now_ms()));
    return MSCCLRT_SUCCESS;
}

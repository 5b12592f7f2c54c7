/*
 * net_sock.c - the socket plumbing of the network transport: the interface an address is taken
 * from (MSCCLRT_SOCKET_IFNAME in NCCL's syntax), listening, connecting with a deadline, and
 * whole-buffer sends and receives that wait with poll() so a silent peer becomes a timeout
 * (a gathered send that can also give up at once, a receive that spins a while before it sleeps).
 */
#include "net/net_internal.h"
#include "core/err.h"
#include "core/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

void net_sock_format(const NetAddr *a, char *buf, size_t len) {
    char host[INET6_ADDRSTRLEN] = "?";
    inet_ntop(a->family == AF_INET6 ? AF_INET6 : AF_INET, a->addr, host, sizeof host);
    snprintf(buf, len, a->family == AF_INET6 ? "[%s]:%u" : "%s:%u", host, a->port);
}

mscclrt_result net_sock_pick(const char *ifname, NetAddr *a) {
    NetMatchList l;
    /* the default skips loopback and container bridges, as NCCL's does */
    const char *text = ifname && *ifname ? ifname : "^docker,lo,virbr";
    TRY(net_match_parse("MSCCLRT_SOCKET_IFNAME", text, &l));
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) return rt_fail_errno(MSCCLRT_ERR_SYSTEM, "net: getifaddrs");
    struct ifaddrs *pick = NULL;
    for (int pass = 0; pass < 2 && !pick; pass++) {   /* IPv4 first */
        for (struct ifaddrs *i = ifs; i && !pick; i = i->ifa_next) {
            if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
            int fam = i->ifa_addr->sa_family;
            if (fam != (pass == 0 ? AF_INET : AF_INET6)) continue;
            if (!net_match(&l, i->ifa_name, 0)) continue;
            if (fam == AF_INET6 &&
                IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
                continue;   /* would need a scope id on the peer side */
            pick = i;
        }
    }
    memset(a, 0, sizeof *a);
    a->magic = NET_ADDR_MAGIC;
    a->version = 1;
    if (!pick && ifname && *ifname) {
        freeifaddrs(ifs);
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "net: MSCCLRT_SOCKET_IFNAME=%s matches no "
                       "interface that is up with an address", ifname);
    }
    if (pick) {
        a->family = (uint16_t)pick->ifa_addr->sa_family;
        if (a->family == AF_INET)
            memcpy(a->addr, &((struct sockaddr_in *)pick->ifa_addr)->sin_addr, 4);
        else
            memcpy(a->addr, &((struct sockaddr_in6 *)pick->ifa_addr)->sin6_addr, 16);
        snprintf(a->ifname, sizeof a->ifname, "%s", pick->ifa_name);
    } else {   /* nothing but loopback: single-host groups still work */
        a->family = AF_INET;
        a->addr[0] = 127, a->addr[3] = 1;
        snprintf(a->ifname, sizeof a->ifname, "lo");
    }
    freeifaddrs(ifs);
    return MSCCLRT_SUCCESS;
}

static socklen_t to_sockaddr(const NetAddr *a, struct sockaddr_storage *ss) {
    memset(ss, 0, sizeof *ss);
    if (a->family == AF_INET6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(a->port);
        memcpy(&s6->sin6_addr, a->addr, 16);
        return sizeof *s6;
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons(a->port);
    memcpy(&s4->sin_addr, a->addr, 4);
    return sizeof *s4;
}

static void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);   /* signals are tiny */
    fcntl(fd, F_SETFD, FD_CLOEXEC);
}

mscclrt_result net_sock_listen(NetAddr *a, int *fd_out) {
    struct sockaddr_storage ss;
    socklen_t len = to_sockaddr(a, &ss);
    int fd = socket(a->family == AF_INET6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return rt_fail_errno(MSCCLRT_ERR_SYSTEM, "net: socket");
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 1024) != 0) {
        char s[80];
        net_sock_format(a, s, sizeof s);
        mscclrt_result r = rt_fail_errno(MSCCLRT_ERR_SYSTEM, "net: cannot listen on %s (%s)", s,
                                         a->ifname);
        close(fd);
        return r;
    }
    len = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &len);
    a->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    *fd_out = fd;
    return MSCCLRT_SUCCESS;
}

int64_t net_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits on fd alone: net_sock_connect has nothing else to serve. */
static void wait_fd(void *ctx, int fd, int64_t until) {
    (void)ctx;
    int64_t left = until - net_now_ms();
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    if (left > 0) poll(&p, 1, (int)left);
}

mscclrt_result net_sock_connect_wait(const NetAddr *a, int peer, int64_t deadline, int timeout_ms,
                                     NetWaitFn wait, void *ctx, int *fd_out) {
    char s[80];
    net_sock_format(a, s, sizeof s);
    if (a->magic != NET_ADDR_MAGIC || a->version != 1 ||
        (a->family != AF_INET && a->family != AF_INET6))
        return rt_fail(MSCCLRT_ERR_REMOTE, "net: rank %d published a malformed listen address",
                       peer);
    if (!wait) wait = wait_fd;
    struct sockaddr_storage ss;
    socklen_t len = to_sockaddr(a, &ss);
    int fd = socket(a->family == AF_INET6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return rt_fail_errno(MSCCLRT_ERR_SYSTEM, "net: socket");
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    int err = connect(fd, (struct sockaddr *)&ss, len) == 0 ? 0 : errno;
    while (err == EINPROGRESS || err == EINTR) {
        if (net_now_ms() >= deadline) {
            close(fd);
            return rt_fail(MSCCLRT_ERR_TIMEOUT, "net: connecting to rank %d at %s: no answer "
                           "within %d ms (MSCCLRT_NET_TIMEOUT_MS)", peer, s, timeout_ms);
        }
        wait(ctx, fd, deadline);
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, 0) <= 0) continue;
        socklen_t el = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
    }
    if (err != 0) {
        errno = err;
        mscclrt_result r = rt_fail_errno(MSCCLRT_ERR_REMOTE, "net: connecting to rank %d at %s",
                                         peer, s);
        close(fd);
        return r;
    }
    fcntl(fd, F_SETFL, fl);
    tune(fd);
    *fd_out = fd;
    return MSCCLRT_SUCCESS;
}

mscclrt_result net_sock_connect(const NetAddr *a, int peer, int timeout_ms, int *fd_out) {
    return net_sock_connect_wait(a, peer, net_now_ms() + timeout_ms, timeout_ms, NULL, NULL, fd_out);
}

/* One direction of a whole-buffer transfer; poll() bounds every wait for progress. */
static int xfer_all(int fd, void *buf, size_t len, int timeout_ms, bool out) {
    char *p = buf;
    while (len) {
        ssize_t k = out ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : recv(fd, p, len, MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            len -= (size_t)k;
            continue;
        }
        if (k == 0) { errno = EPIPE; return -1; }   /* recv: orderly close by the peer */
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        struct pollfd pf = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        int pr;
        do pr = poll(&pf, 1, timeout_ms); while (pr < 0 && errno == EINTR);
        if (pr == 0) { errno = ETIMEDOUT; return -1; }
        if (pr < 0) return -1;
    }
    return 0;
}

int net_sock_send_all(int fd, const void *buf, size_t len, int timeout_ms) {
    return xfer_all(fd, (void *)buf, len, timeout_ms, true);
}

int net_sock_recv_all(int fd, void *buf, size_t len, int timeout_ms) {
    return xfer_all(fd, buf, len, timeout_ms, false);
}

int net_sock_sendv(int fd, const struct iovec *iov, int iovcnt, size_t *done, int wait_ms) {
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++) total += iov[i].iov_len;
    while (*done < total) {
        struct iovec rest[4];   /* iov past the *done bytes already written */
        int n = 0;
        size_t skip = *done;
        for (int i = 0; i < iovcnt && n < 4; i++) {
            if (skip >= iov[i].iov_len) { skip -= iov[i].iov_len; continue; }
            rest[n].iov_base = (char *)iov[i].iov_base + skip;
            rest[n++].iov_len = iov[i].iov_len - skip;
            skip = 0;
        }
        struct msghdr m = {.msg_iov = rest, .msg_iovlen = (size_t)n};
        ssize_t k = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            *done += (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        if (wait_ms == 0) { errno = EAGAIN; return -1; }
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        int pr;
        do pr = poll(&pf, 1, wait_ms); while (pr < 0 && errno == EINTR);
        if (pr == 0) { errno = ETIMEDOUT; return -1; }
        if (pr < 0) return -1;
    }
    return 0;
}

int net_sock_recv_spin(int fd, void *buf, size_t len, int spin_us) {
    char *p = buf;
    size_t got = 0;
    int64_t until = -1;   /* set at the first empty read: only idle time counts */
    while (got < len) {
        ssize_t k = recv(fd, p + got, len - got, MSG_DONTWAIT);
        if (k > 0) { got += (size_t)k; continue; }
        if (k == 0) { errno = EPIPE; return -1; }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        if (got || spin_us <= 0) break;   /* a message has begun: the rest comes at wire speed */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t now = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
        if (until < 0) until = now + spin_us;
        else if (now >= until) break;
        /* a thread this one spins beside may need the core (ranks can outnumber cores) */
        sched_yield();
    }
    return got == len ? 0 : xfer_all(fd, p + got, len - got, -1, false);
}

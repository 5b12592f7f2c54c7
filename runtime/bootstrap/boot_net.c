/*
 * boot_net.c - the socket plumbing of the bootstrap: wire addresses <-> sockaddr, choosing
 * an interface, listening, connecting with retries, and exact reads/writes bounded by a
 * deadline. Every failure names the peer ("root", "rank 3") and the address.
 */
#include "bootstrap/boot_internal.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t boot_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void boot_addr_to_sock(const BootAddr *a, BootSockAddr *s, socklen_t *len) {
    memset(s, 0, sizeof *s);
    uint16_t port_be;
    memcpy(&port_be, a->port_be, 2);
    if (a->family == 6) {
        s->in6.sin6_family = AF_INET6;
        s->in6.sin6_port = port_be;
        memcpy(&s->in6.sin6_addr, a->addr, 16);
        *len = sizeof s->in6;
    } else {
        s->in4.sin_family = AF_INET;
        s->in4.sin_port = port_be;
        memcpy(&s->in4.sin_addr, a->addr, 4);
        *len = sizeof s->in4;
    }
}

void boot_addr_from_sock(BootAddr *a, const BootSockAddr *s) {
    memset(a, 0, sizeof *a);
    if (s->sa.sa_family == AF_INET6) {
        a->family = 6;
        memcpy(a->port_be, &s->in6.sin6_port, 2);
        memcpy(a->addr, &s->in6.sin6_addr, 16);
    } else {
        a->family = 4;
        memcpy(a->port_be, &s->in4.sin_port, 2);
        memcpy(a->addr, &s->in4.sin_addr, 4);
    }
}

void boot_addr_str(const BootAddr *a, char *buf, size_t n) {
    char ip[INET6_ADDRSTRLEN] = "?";
    int port = a->port_be[0] << 8 | a->port_be[1];
    if (a->family == 6) {
        inet_ntop(AF_INET6, a->addr, ip, sizeof ip);
        snprintf(buf, n, "[%s]:%d", ip, port);
    } else {
        inet_ntop(AF_INET, a->addr, ip, sizeof ip);
        snprintf(buf, n, "%s:%d", ip, port);
    }
}

mscclrt_result boot_addr_resolve(BootAddr *a, const char *host, int port, const char *what) {
    if (port <= 0 || port > 65535)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot: %s port %d out of range [1, 65535]", what, port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "boot: cannot resolve %s '%s': %s", what, host,
                       gai_strerror(rc));
    /* prefer IPv4: launchers' MASTER_ADDR is almost always a v4 name */
    struct addrinfo *pick = res;
    for (struct addrinfo *r = res; r; r = r->ai_next)
        if (r->ai_family == AF_INET) { pick = r; break; }
    BootSockAddr s;
    memset(&s, 0, sizeof s);
    memcpy(&s, pick->ai_addr, pick->ai_addrlen < sizeof s ? pick->ai_addrlen : sizeof s);
    freeaddrinfo(res);
    boot_addr_from_sock(a, &s);
    a->port_be[0] = (uint8_t)(port >> 8);
    a->port_be[1] = (uint8_t)port;
    return MSCCLRT_SUCCESS;
}

mscclrt_result boot_addr_pick_local(BootAddr *a) {
    const char *want = param_str(PARAM_SOCKET_IFNAME);
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) return rt_fail_errno(MSCCLRT_ERR_SYSTEM, "boot: getifaddrs");
    struct ifaddrs *pick = NULL;
    for (int pass = 0; pass < 2 && !pick; pass++) {   /* pass 0: IPv4 only; pass 1: IPv6 */
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
            int fam = i->ifa_addr->sa_family;
            if (fam != (pass == 0 ? AF_INET : AF_INET6)) continue;
            if (*want) {
                if (strncmp(i->ifa_name, want, strlen(want)) != 0) continue;
            } else if (i->ifa_flags & IFF_LOOPBACK) {
                continue;
            }
            if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
                continue;   /* would need a scope id on the peer side */
            pick = i;
            break;
        }
    }
    if (pick) {
        BootSockAddr s;
        memset(&s, 0, sizeof s);
        memcpy(&s, pick->ifa_addr, pick->ifa_addr->sa_family == AF_INET6 ? sizeof s.in6 : sizeof s.in4);
        boot_addr_from_sock(a, &s);
        LOG_INFO(LOG_SUB_BOOT, "root address from interface %s", pick->ifa_name);
    } else if (*want) {
        freeifaddrs(ifs);
        return rt_fail(MSCCLRT_ERR_INVALID_ARG,
                       "boot: MSCCLRT_SOCKET_IFNAME=%s matches no interface that is up with an address", want);
    } else {
        memset(a, 0, sizeof *a);
        a->family = 4;
        a->addr[0] = 127, a->addr[3] = 1;
    }
    a->port_be[0] = a->port_be[1] = 0;
    freeifaddrs(ifs);
    return MSCCLRT_SUCCESS;
}

int boot_set_nonblock(int fd, bool on) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) return -1;
    return fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

mscclrt_result boot_listen(const BootAddr *a, bool reuse, int *fd_out, BootAddr *bound) {
    char where[80];
    boot_addr_str(a, where, sizeof where);
    BootSockAddr s;
    socklen_t len;
    boot_addr_to_sock(a, &s, &len);
    int fd = socket(s.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return rt_fail_errno(MSCCLRT_ERR_SYSTEM, "boot: socket for %s", where);
    int one = 1;
    if (reuse) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, &s.sa, len) != 0 || listen(fd, 1024) != 0) {
        mscclrt_result r = rt_fail_errno(MSCCLRT_ERR_SYSTEM, "boot: cannot listen on %s", where);
        close(fd);
        return r;
    }
    BootSockAddr got;
    socklen_t glen = sizeof got;
    getsockname(fd, &got.sa, &glen);
    boot_addr_from_sock(bound, &got);
    boot_set_nonblock(fd, true);
    *fd_out = fd;
    return MSCCLRT_SUCCESS;
}

/* Waits on fd alone (boot_connect's default: nothing else to serve). fd -1: just sleeps. */
static void wait_fd(void *ctx, int fd, int64_t until) {
    (void)ctx;
    int64_t left = until - boot_now_ms();
    if (left <= 0) return;
    if (fd < 0) {
        struct timespec ts = {(time_t)(left / 1000), (long)(left % 1000) * 1000000};
        nanosleep(&ts, NULL);
        return;
    }
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    poll(&p, 1, (int)left);
}

/* 0 once the non-blocking connect on fd has succeeded, EINPROGRESS while it is under way,
 * else the errno of its failure. */
static int connect_state(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int n = poll(&p, 1, 0);
    if (n < 0) return errno == EINTR ? EINPROGRESS : errno;
    if (n == 0) return EINPROGRESS;
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) return errno;
    return err;
}

mscclrt_result boot_connect_wait(const BootAddr *a, int64_t deadline, const char *who, BootWaitFn wait,
                                 void *ctx, int *fd_out) {
    char where[80];
    boot_addr_str(a, where, sizeof where);
    BootSockAddr s;
    socklen_t len;
    boot_addr_to_sock(a, &s, &len);
    if (!wait) wait = wait_fd;
    int last_err = 0;
    for (int attempt = 0;; attempt++) {
        int fd = socket(s.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return rt_fail_errno(MSCCLRT_ERR_SYSTEM, "boot: socket to %s at %s", who, where);
        boot_set_nonblock(fd, true);
        int err = connect(fd, &s.sa, len) == 0 ? 0 : errno;
        /* the wait serves whatever the caller must keep serving (a rank: its own listener, so
         * that ranks connecting to each other under a flood never wait on each other) */
        while (err == EINPROGRESS || err == EINTR) {
            if (boot_now_ms() >= deadline) {
                err = ETIMEDOUT;
                break;
            }
            wait(ctx, fd, deadline);
            err = connect_state(fd);
        }
        if (err == 0) {
            boot_set_nonblock(fd, false);
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            *fd_out = fd;
            if (attempt) LOG_INFO(LOG_SUB_BOOT, "connected to %s at %s after %d retries", who, where, attempt);
            return MSCCLRT_SUCCESS;
        }
        last_err = err;
        close(fd);
        /* refused/unreachable: the other side may not be listening yet; retry until deadline */
        bool retry = last_err == ECONNREFUSED || last_err == ETIMEDOUT || last_err == ECONNRESET ||
                     last_err == ENETUNREACH || last_err == EHOSTUNREACH || last_err == EAGAIN || last_err == EINTR;
        if (!retry) break;
        if (boot_now_ms() + 20 >= deadline) {
            errno = last_err;
            return rt_fail_errno(MSCCLRT_ERR_TIMEOUT, "boot: %s at %s did not accept a connection in "
                                 "%d attempts before the deadline", who, where, attempt + 1);
        }
        wait(ctx, -1, boot_now_ms() + 20);
    }
    errno = last_err;
    return rt_fail_errno(MSCCLRT_ERR_REMOTE, "boot: cannot connect to %s at %s", who, where);
}

mscclrt_result boot_connect(const BootAddr *a, int64_t deadline, const char *who, int *fd_out) {
    return boot_connect_wait(a, deadline, who, NULL, NULL, fd_out);
}

/* Writes exactly n bytes; the result code only (errno kept for the caller), *left the bytes not
 * written. */
mscclrt_result boot_write_raw(int fd, const void *buf, size_t n, int64_t deadline, size_t *left_out) {
    const char *p = buf;
    mscclrt_result r = MSCCLRT_SUCCESS;
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) { p += w; n -= (size_t)w; continue; }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) { r = MSCCLRT_ERR_REMOTE; break; }
        int64_t left = deadline - boot_now_ms();
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        if (left <= 0 || poll(&pf, 1, (int)left) == 0) { r = MSCCLRT_ERR_TIMEOUT; break; }
    }
    if (left_out) *left_out = n;
    return r;
}

mscclrt_result boot_write_all(int fd, const void *buf, size_t n, int64_t deadline, const char *who) {
    size_t left;
    mscclrt_result r = boot_write_raw(fd, buf, n, deadline, &left);
    if (r == MSCCLRT_ERR_TIMEOUT)
        return rt_fail(r, "boot: %s did not take %zu more bytes in time", who, left);
    if (r != MSCCLRT_SUCCESS) return rt_fail_errno(r, "boot: send to %s", who);
    return r;
}

/* Reads exactly n bytes; the result code only, no message (errno kept for the caller). */
mscclrt_result boot_read_raw(int fd, void *buf, size_t n, int64_t deadline) {
    char *p = buf;
    while (n) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r > 0) { p += r; n -= (size_t)r; continue; }
        if (r == 0) { errno = ECONNRESET; return MSCCLRT_ERR_REMOTE; }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return MSCCLRT_ERR_REMOTE;
        int64_t left = deadline - boot_now_ms();
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pf, 1, (int)left) == 0) return MSCCLRT_ERR_TIMEOUT;
    }
    return MSCCLRT_SUCCESS;
}

mscclrt_result boot_read_all(int fd, void *buf, size_t n, int64_t deadline, const char *who) {
    mscclrt_result r = boot_read_raw(fd, buf, n, deadline);
    if (r == MSCCLRT_ERR_TIMEOUT) return rt_fail(r, "boot: %s did not answer in time", who);
    if (r != MSCCLRT_SUCCESS) return rt_fail_errno(r, "boot: receive from %s", who);
    return r;
}

/* Four FNV-1a streams with different seeds: not cryptographic, only a fixed-size token. */
void boot_derive_secret(uint8_t out[BOOT_SECRET_BYTES], const char *text) {
    for (int k = 0; k < 4; k++) {
        uint64_t h = 1469598103934665603ull ^ (0x9e3779b97f4a7c15ull * (uint64_t)(k + 1));
        for (const char *s = "mscclrt-boot-secret:"; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
        for (const char *s = text; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
        memcpy(out + 8 * k, &h, 8);
    }
}

bool boot_secret_equal(const uint8_t *a, const uint8_t *b) {
    uint8_t d = 0;
    for (int i = 0; i < BOOT_SECRET_BYTES; i++) d |= (uint8_t)(a[i] ^ b[i]);
    return d == 0;
}

void boot_rank_list(char *buf, size_t n, const int *ranks, int count) {
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < count; i++) {
        int j = i;
        while (j + 1 < count && ranks[j + 1] == ranks[j] + 1) j++;
        int w = j > i ? snprintf(buf + o, n - o, "%s%d-%d", i ? ", " : "", ranks[i], ranks[j])
                      : snprintf(buf + o, n - o, "%s%d", i ? ", " : "", ranks[i]);
        if (w < 0 || o + (size_t)w + 5 >= n) {   /* keep room for ", ..." */
            snprintf(buf + o, n - o, "%s...", i ? ", " : "");
            return;
        }
        o += (size_t)w;
        i = j;
    }
}

void boot_warn_limited(BootRate *r, const char *file, int line, const char *fmt, ...) {
    int64_t now = boot_now_ms();
    if (now < r->next_ms) {
        r->skipped++;
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->skipped)
        log_msg(LOG_LEVEL_WARN, 0, file, line, "%s (and %u similar refusals not logged since the "
                "last message; at most one is logged per %d ms)", msg, r->skipped, BOOT_WARN_EVERY_MS);
    else
        log_msg(LOG_LEVEL_WARN, 0, file, line, "%s", msg);
    r->skipped = 0;
    r->next_ms = now + BOOT_WARN_EVERY_MS;
}

bool boot_accept_exhausted(int err) {
    return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

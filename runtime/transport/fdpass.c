/*
 * fdpass.c - passing file descriptors between the processes of one host (SCM_RIGHTS over Unix
 * datagram sockets in the abstract namespace), for the VMM side of the IPC transport. Socket
 * names are exchanged over the bootstrap; each datagram is authenticated by the group secret
 * and by the sender's socket name, and matched by (peer, key).
 */
#include "transport/transport.h"
#include "core/err.h"
#include "core/log.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define FD_MAGIC   0x4d534644u   /* "MSFD" */
#define FD_VERSION 1
#define FD_NAME_BYTES 48         /* abstract name, without the leading NUL */

/* One rank's socket name, allgathered at create. */
typedef struct FdAddrWire {
    uint32_t magic;
    uint16_t version;
    uint16_t len;                /* bytes of name used */
    int32_t rank;
    int32_t pid;
    char name[FD_NAME_BYTES];
} FdAddrWire;
static_assert(sizeof(FdAddrWire) == 16 + FD_NAME_BYTES, "FdAddrWire is a wire format");

/* The datagram that carries one descriptor (fdpass_send), or a message of `len` bytes that
 * follow it with at most one descriptor (fdpass_post). */
typedef struct FdMsgWire {
    uint32_t magic;
    uint16_t version;
    uint16_t len;                /* payload bytes after this header (fdpass_post) */
    int32_t src;                 /* sending rank */
    int32_t reserved;
    uint64_t key;
    uint8_t secret[32];          /* the bootstrap group's secret */
} FdMsgWire;
static_assert(sizeof(FdMsgWire) == 56, "FdMsgWire is a wire format");

typedef struct FdHeld {          /* a descriptor or message received before it was asked for */
    struct FdHeld *next;
    int src;
    uint64_t key;
    int fd;                      /* owned; -1 for a message without one */
    size_t len;                  /* payload bytes (messages) */
    unsigned char *msg;          /* owned payload, or NULL */
} FdHeld;

struct FdPass {
    Boot *boot;                  /* borrowed */
    int fd;                      /* owned: our bound datagram socket */
    FdAddrWire *addrs;           /* owned, [nranks] */
    FdHeld *held;                /* owned list */
};

static void addr_of(const FdAddrWire *a, struct sockaddr_un *su, socklen_t *len) {
    memset(su, 0, sizeof *su);
    su->sun_family = AF_UNIX;
    memcpy(su->sun_path + 1, a->name, a->len);   /* sun_path[0] = 0: abstract namespace */
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + a->len);
}

void fdpass_destroy(FdPass *f) {
    if (!f) return;
    while (f->held) {
        FdHeld *h = f->held;
        f->held = h->next;
        if (h->fd >= 0) close(h->fd);
        free(h->msg);
        free(h);
    }
    if (f->fd >= 0) close(f->fd);
    free(f->addrs);
    free(f);
}

mscclrt_result fdpass_create(FdPass **out, Boot *b) {
    mscclrt_result res;
    if (!out || !b) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "fdpass_create: NULL argument");
    *out = NULL;
    int rank = boot_rank(b), n = boot_nranks(b);
    FdPass *f = calloc(1, sizeof *f);
    if (!f) return rt_fail(MSCCLRT_ERR_SYSTEM, "fdpass_create: out of memory");
    f->boot = b;
    f->fd = -1;
    f->addrs = calloc((size_t)n, sizeof *f->addrs);
    if (!f->addrs) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "fdpass_create: out of memory for %d ranks", n);
        goto fail;
    }
    f->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (f->fd < 0) {
        res = rt_fail_errno(MSCCLRT_ERR_SYSTEM, "fdpass: rank %d: socket(AF_UNIX)", rank);
        goto fail;
    }
    uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) nonce = (uint64_t)time(NULL) ^ (uint64_t)rank;
    FdAddrWire *me = &f->addrs[rank];
    me->magic = FD_MAGIC, me->version = FD_VERSION, me->rank = rank, me->pid = (int32_t)getpid();
    int l = snprintf(me->name, sizeof me->name, "mscclrt-fd-%d-%d-%016llx", (int)getpid(), rank,
                     (unsigned long long)nonce);
    me->len = (uint16_t)(l < (int)sizeof me->name ? l : (int)sizeof me->name - 1);
    struct sockaddr_un su;
    socklen_t slen;
    addr_of(me, &su, &slen);
    if (bind(f->fd, (struct sockaddr *)&su, slen) != 0) {
        res = rt_fail_errno(MSCCLRT_ERR_SYSTEM, "fdpass: rank %d: bind @%.*s", rank, (int)me->len, me->name);
        goto fail;
    }
    struct timeval tv = {.tv_sec = boot_timeout_ms(b) / 1000, .tv_usec = (boot_timeout_ms(b) % 1000) * 1000};
    setsockopt(f->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    TRY_GOTO(boot_allgather(b, f->addrs, sizeof *f->addrs), res, fail);
    for (int r = 0; r < n; r++) {
        const FdAddrWire *a = &f->addrs[r];
        if (a->magic != FD_MAGIC || a->version != FD_VERSION || a->rank != r || a->len == 0 ||
            a->len >= FD_NAME_BYTES) {
            res = rt_fail(MSCCLRT_ERR_REMOTE, "fdpass: rank %d sent a malformed socket name (magic 0x%08x "
                          "version %u rank %d length %u)", r, a->magic, a->version, (int)a->rank, a->len);
            goto fail;
        }
    }
    LOG_INFO(LOG_SUB_XPORT, "rank %d: fd passing on @%.*s", rank, (int)me->len, me->name);
    *out = f;
    return MSCCLRT_SUCCESS;
fail:
    fdpass_destroy(f);
    return res;
}

/* One datagram to peer: the header, len payload bytes, and fd unless it is -1. Returns the
 * result of sendmsg (bytes sent, or -1 with errno). */
static ssize_t fd_send_one(FdPass *f, int peer, uint64_t key, const void *msg, size_t len, int fd,
                           int flags) {
    FdMsgWire m = {.magic = FD_MAGIC, .version = FD_VERSION, .len = (uint16_t)len,
                   .src = boot_rank(f->boot), .key = key};
    memcpy(m.secret, boot_secret(f->boot), sizeof m.secret);
    struct sockaddr_un su;
    socklen_t slen;
    addr_of(&f->addrs[peer], &su, &slen);
    struct iovec iov[2] = {{.iov_base = &m, .iov_len = sizeof m}, {.iov_base = (void *)msg, .iov_len = len}};
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr mh = {.msg_name = &su, .msg_namelen = slen, .msg_iov = iov, .msg_iovlen = len ? 2 : 1};
    if (fd >= 0) {
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof ctl.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    ssize_t w;
    do w = sendmsg(f->fd, &mh, MSG_NOSIGNAL | flags);
    while (w < 0 && errno == EINTR);
    return w;
}

mscclrt_result fdpass_send(FdPass *f, int peer, uint64_t key, int fd) {
    int rank = boot_rank(f->boot);
    if (peer < 0 || peer >= boot_nranks(f->boot))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "fdpass_send: peer %d out of range [0, %d)", peer,
                       boot_nranks(f->boot));
    if (fd < 0) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "fdpass_send: fd %d is not a descriptor", fd);
    const ssize_t w = fd_send_one(f, peer, key, NULL, 0, fd, 0);
    if (w == (ssize_t)sizeof(FdMsgWire)) return MSCCLRT_SUCCESS;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return rt_fail(MSCCLRT_ERR_TIMEOUT, "fdpass: rank %d: rank %d's queue stayed full for %d ms "
                       "(key %llu)", rank, peer, boot_timeout_ms(f->boot), (unsigned long long)key);
    return rt_fail_errno(MSCCLRT_ERR_REMOTE, "fdpass: rank %d: passing a descriptor to rank %d (@%.*s)",
                         rank, peer, (int)f->addrs[peer].len, f->addrs[peer].name);
}

mscclrt_result fdpass_post(FdPass *f, int peer, uint64_t key, const void *msg, size_t len, int fd,
                           bool *sent) {
    *sent = false;
    int rank = boot_rank(f->boot);
    if (peer < 0 || peer >= boot_nranks(f->boot))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "fdpass_post: peer %d out of range [0, %d)", peer,
                       boot_nranks(f->boot));
    if (len == 0 || len > FDPASS_MSG_MAX || !msg)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "fdpass_post: a message of %zu bytes (1 to %d)", len,
                       FDPASS_MSG_MAX);
    const ssize_t w = fd_send_one(f, peer, key, msg, len, fd, MSG_DONTWAIT);
    if (w == (ssize_t)(sizeof(FdMsgWire) + len)) {
        *sent = true;
        return MSCCLRT_SUCCESS;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return MSCCLRT_SUCCESS;   /* full: later */
    return rt_fail_errno(MSCCLRT_ERR_REMOTE, "fdpass: rank %d: posting a message to rank %d (@%.*s)",
                         rank, peer, (int)f->addrs[peer].len, f->addrs[peer].name);
}

/* Receives one datagram; returns true (and stores it) if it is valid. Invalid ones are logged
 * and their descriptors closed. */
static bool fd_read_one(FdPass *f) {
    int rank = boot_rank(f->boot);
    /* the header, then its payload; one byte more than the largest, to see a longer one */
    union { FdMsgWire m; unsigned char raw[sizeof(FdMsgWire) + FDPASS_MSG_MAX + 1]; } in;
    memset(&in.m, 0, sizeof in.m);   /* a short datagram's missing fields read as 0 */
    const FdMsgWire *m = &in.m;
    struct sockaddr_un from;
    union { char buf[CMSG_SPACE(sizeof(int) * 8)]; struct cmsghdr align; } ctl;
    struct iovec iov = {.iov_base = in.raw, .iov_len = sizeof in.raw};
    struct msghdr mh = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1,
                        .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    ssize_t n = recvmsg(f->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) return false;
    int fds[8], nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k && nfds < 8; i++) memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        }
    const char *why = NULL;
    if (n < (ssize_t)sizeof *m || n != (ssize_t)(sizeof *m + m->len) || m->len > FDPASS_MSG_MAX ||
        (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
        why = "wrong size";
    else if (m->magic != FD_MAGIC || m->version != FD_VERSION) why = "bad magic or version";
    else if (memcmp(m->secret, boot_secret(f->boot), sizeof m->secret) != 0) why = "wrong secret";
    else if (m->src < 0 || m->src >= boot_nranks(f->boot)) why = "sender rank out of range";
    else if (m->len == 0 ? nfds != 1 : nfds > 1)
        why = m->len == 0 ? "not exactly one descriptor" : "more than one descriptor";
    else {
        struct sockaddr_un want;
        socklen_t wlen;
        addr_of(&f->addrs[m->src], &want, &wlen);
        if (mh.msg_namelen != wlen || memcmp(&from, &want, wlen) != 0) why = "not from that rank's socket";
    }
    FdHeld *h = why ? NULL : calloc(1, sizeof *h);
    if (!why && !h) why = "out of memory";
    if (!why && m->len && !(h->msg = malloc(m->len))) {
        free(h);
        h = NULL;
        why = "out of memory";
    }
    if (why) {
        LOG_WARN("fdpass: rank %d dropped a datagram (%zd bytes, %d descriptors, claims rank %d): %s",
                 rank, n, nfds, n >= 12 ? (int)m->src : -1, why);
        for (int i = 0; i < nfds; i++) close(fds[i]);
        return false;
    }
    h->src = m->src, h->key = m->key, h->fd = nfds ? fds[0] : -1;
    h->len = m->len;
    if (m->len) memcpy(h->msg, in.raw + sizeof *m, m->len);
    h->next = NULL;
    FdHeld **pp = &f->held;   /* append: keep arrival order per (src, key) */
    while (*pp) pp = &(*pp)->next;
    *pp = h;
    return true;
}

mscclrt_result fdpass_recv(FdPass *f, int peer, uint64_t key, int *fd_out) {
    int rank = boot_rank(f->boot);
    *fd_out = -1;
    if (peer < 0 || peer >= boot_nranks(f->boot))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "fdpass_recv: peer %d out of range [0, %d)", peer,
                       boot_nranks(f->boot));
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t deadline = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + boot_timeout_ms(f->boot);
    for (;;) {
        for (FdHeld **pp = &f->held; *pp; pp = &(*pp)->next)
            if ((*pp)->src == peer && (*pp)->key == key && !(*pp)->msg) {
                FdHeld *h = *pp;
                *pp = h->next;
                *fd_out = h->fd;
                free(h);
                return MSCCLRT_SUCCESS;
            }
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t left = deadline - ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
        if (left <= 0)
            return rt_fail(MSCCLRT_ERR_TIMEOUT, "fdpass: rank %d: rank %d did not pass descriptor %llu "
                           "within %d ms", rank, peer, (unsigned long long)key, boot_timeout_ms(f->boot));
        struct pollfd p = {.fd = f->fd, .events = POLLIN};
        if (poll(&p, 1, left > 1000 ? 1000 : (int)left) > 0)
            while (fd_read_one(f)) {}
    }
}

mscclrt_result fdpass_take(FdPass *f, FdPassMsg *out, bool *got) {
    *got = false;
    memset(out, 0, sizeof *out);
    out->fd = -1;
    while (fd_read_one(f)) {}
    for (FdHeld **pp = &f->held; *pp; pp = &(*pp)->next)
        if ((*pp)->msg) {   /* the oldest message; descriptors for fdpass_recv stay */
            FdHeld *h = *pp;
            *pp = h->next;
            out->src = h->src;
            out->key = h->key;
            out->fd = h->fd;
            out->len = h->len;
            memcpy(out->msg, h->msg, h->len);
            free(h->msg);
            free(h);
            *got = true;
            return MSCCLRT_SUCCESS;
        }
    return MSCCLRT_SUCCESS;
}

/*
 * boot_root.c - the rendezvous root: a detached thread that accepts hellos until all nranks
 * ranks have arrived, then sends each the table of listening addresses and host identities.
 * A connection with the wrong secret or a malformed hello is refused and logged, and the root
 * keeps waiting, so strays cannot disturb the rendezvous. If time runs out it tells the ranks
 * that came which ranks did not. It serves exactly one rendezvous, then exits.
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
    int fd;                /* owned; -1 once closed */
    BootAddr from;         /* peer address, for log lines */
    BootHello hello;       /* being read */
    size_t got;            /* bytes of hello read so far */
    bool joined;           /* hello accepted: this is rank hello.rank */
    int64_t at;            /* when the hello was accepted */
} RootConn;

typedef struct Root {
    int listen_fd;         /* owned */
    BootAddr where;
    uint8_t secret[BOOT_SECRET_BYTES];
    int first_wait_ms;
    RootConn *conns;       /* owned, [nconns] of cap */
    int nconns, cap;
    int nranks;            /* 0 until the first accepted hello */
    int *by_rank;          /* owned, [nranks]: index into conns, or -1 */
    int joined;
    int64_t first_at;      /* time of the first accepted hello */
} Root;

static void root_close_conn(RootConn *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

/* Sends an ABORT with a result code and text to one connection (best effort: it is leaving). */
static void root_send_abort(RootConn *c, mscclrt_result code, const char *text) {
    BootReply rep = {.magic = BOOT_MAGIC, .version = BOOT_VERSION, .kind = BK_ABORT, .arg = (int32_t)code,
                     .len = (uint32_t)strlen(text) + 1};
    int64_t dl = boot_now_ms() + 2000;
    if (boot_write_all(c->fd, &rep, sizeof rep, dl, "a joining rank") == MSCCLRT_SUCCESS)
        boot_write_all(c->fd, text, rep.len, dl, "a joining rank");
}

/* Checks a complete hello; returns true if the rank joins. Refusals are logged and answered. */
static bool root_accept_hello(Root *r, int idx) {
    RootConn *c = &r->conns[idx];
    const BootHello *h = &c->hello;
    char from[80], where[80], msg[512];
    boot_addr_str(&c->from, from, sizeof from);
    boot_addr_str(&r->where, where, sizeof where);
    if (h->magic != BOOT_MAGIC || h->version != BOOT_VERSION || h->kind != BK_HELLO) {
        LOG_WARN("boot root at %s: refused a connection from %s: not a bootstrap hello "
                 "(magic 0x%08x version %u kind %u)", where, from, h->magic, h->version, h->kind);
        return false;
    }
    if (!boot_secret_equal(h->secret, r->secret)) {
        LOG_WARN("boot root at %s: refused a connection from %s claiming rank %d: wrong secret",
                 where, from, (int)h->rank);
        return false;
    }
    if (h->nranks <= 0 || h->nranks > BOOT_MAX_RANKS || h->rank < 0 || h->rank >= h->nranks) {
        snprintf(msg, sizeof msg, "boot: rank %d of %d is out of range (nranks must be in [1, %d])",
                 (int)h->rank, (int)h->nranks, BOOT_MAX_RANKS);
    } else if (r->nranks && h->nranks != r->nranks) {
        snprintf(msg, sizeof msg, "boot: rank %d says the group has %d ranks, but earlier ranks said %d",
                 (int)h->rank, (int)h->nranks, r->nranks);
    } else if (r->nranks && r->by_rank[h->rank] >= 0) {
        snprintf(msg, sizeof msg, "boot: rank %d joined twice (first pid %d, now pid %d from %s)",
                 (int)h->rank, (int)r->conns[r->by_rank[h->rank]].hello.pid, (int)h->pid, from);
    } else {
        msg[0] = '\0';
    }
    if (msg[0]) {
        LOG_WARN("boot root at %s: refused %s: %s", where, from, msg);
        root_send_abort(c, MSCCLRT_ERR_INVALID_ARG, msg);
        return false;
    }
    if (!r->nranks) {
        r->by_rank = malloc(sizeof(int) * (size_t)h->nranks);
        if (!r->by_rank) return false;
        for (int i = 0; i < h->nranks; i++) r->by_rank[i] = -1;
        r->nranks = h->nranks;
        r->first_at = boot_now_ms();
    }
    r->by_rank[h->rank] = idx;
    r->joined++;
    c->joined = true;
    c->at = boot_now_ms();
    LOG_INFO(LOG_SUB_BOOT, "boot root at %s: rank %d of %d joined from %s (pid %d)", where,
             (int)h->rank, r->nranks, from, (int)h->pid);
    return true;
}

/* The earliest moment any joined rank gives up, less a margin so the answer reaches it first. */
static int64_t root_deadline(const Root *r, int64_t start) {
    if (!r->nranks) return start + r->first_wait_ms;
    bool any = false;
    int64_t d = 0;
    for (int i = 0; i < r->nconns; i++) {
        const RootConn *c = &r->conns[i];
        if (!c->joined) continue;
        int64_t w = c->hello.wait_ms, margin = w / 4 < 200 ? w / 4 : 200;
        /* wait_ms was measured when the hello was sent; its acceptance is close enough */
        int64_t dl = c->at + w - margin;
        if (!any || dl < d) d = dl;
        any = true;
    }
    return any ? d : r->first_at + r->first_wait_ms;   /* everyone left: wait as for the first */
}

static void root_send_table(Root *r) {
    size_t n = (size_t)r->nranks;
    BootPeerWire *tab = calloc(n, sizeof *tab);
    if (!tab) { LOG_WARN("boot root: out of memory for a table of %zu ranks", n); return; }
    for (size_t i = 0; i < n; i++) {
        const BootHello *h = &r->conns[r->by_rank[i]].hello;
        tab[i].listen = h->listen;
        tab[i].pid = h->pid;
        memcpy(tab[i].hostid, h->hostid, BOOT_HOSTID_BYTES);
    }
    BootReply rep = {.magic = BOOT_MAGIC, .version = BOOT_VERSION, .kind = BK_TABLE,
                     .arg = r->nranks, .len = (uint32_t)(n * sizeof *tab)};
    for (size_t i = 0; i < n; i++) {
        RootConn *c = &r->conns[r->by_rank[i]];
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
    char where[80], list[256], msg[512];
    boot_addr_str(&r->where, where, sizeof where);
    int *missing = malloc(sizeof(int) * (size_t)r->nranks), nm = 0;
    if (!missing) return;
    for (int i = 0; i < r->nranks; i++)
        if (r->by_rank[i] < 0) missing[nm++] = i;
    boot_rank_list(list, sizeof list, missing, nm);
    snprintf(msg, sizeof msg, "boot: rendezvous at %s timed out after %lld ms: rank%s %s did not arrive "
             "(%d of %d joined)", where, (long long)waited, nm == 1 ? "" : "s", list, r->joined, r->nranks);
    LOG_WARN("%s", msg);
    for (int i = 0; i < r->nconns; i++)
        if (r->conns[i].joined) root_send_abort(&r->conns[i], MSCCLRT_ERR_TIMEOUT, msg);
    free(missing);
}

/* Accepts every pending connection on the listening socket. */
static void root_accept(Root *r) {
    for (;;) {
        BootSockAddr sa;
        socklen_t len = sizeof sa;
        int fd = accept4(r->listen_fd, &sa.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;   /* EAGAIN, or a transient error: poll again */
        if (r->nconns == r->cap) {
            int cap = r->cap ? r->cap * 2 : 16;
            RootConn *nc = realloc(r->conns, sizeof *nc * (size_t)cap);
            if (!nc) { close(fd); return; }
            r->conns = nc;
            r->cap = cap;
        }
        RootConn *c = &r->conns[r->nconns++];
        memset(c, 0, sizeof *c);
        c->fd = fd;
        boot_addr_from_sock(&c->from, &sa);
    }
}

static void root_read(Root *r, int idx) {
    RootConn *c = &r->conns[idx];
    if (c->joined) {   /* a joined rank says nothing more: data or EOF means it left */
        char b;
        ssize_t n = recv(c->fd, &b, 1, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        LOG_INFO(LOG_SUB_BOOT, "boot root: rank %d left before the rendezvous completed", (int)c->hello.rank);
        r->by_rank[c->hello.rank] = -1;
        r->joined--;
        c->joined = false;
        root_close_conn(c);
        return;
    }
    while (c->got < sizeof c->hello) {
        ssize_t n = recv(c->fd, (char *)&c->hello + c->got, sizeof c->hello - c->got, 0);
        if (n > 0) { c->got += (size_t)n; continue; }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n < 0 && errno == EINTR) continue;
        char from[80];
        boot_addr_str(&c->from, from, sizeof from);
        LOG_INFO(LOG_SUB_BOOT, "boot root: %s left after %zu of %zu hello bytes", from, c->got, sizeof c->hello);
        root_close_conn(c);
        return;
    }
    if (!root_accept_hello(r, idx)) root_close_conn(c);
}

static void *root_main(void *arg) {
    Root *r = arg;
    int64_t start = boot_now_ms();
    pthread_setname_np(pthread_self(), "mscclrt-boot");
    struct pollfd *pfd = NULL;
    int *pidx = NULL, pcap = 0;
    while (!r->nranks || r->joined < r->nranks) {
        int64_t left = root_deadline(r, start) - boot_now_ms();
        if (left <= 0) break;
        if (pcap < r->nconns + 1) {
            pcap = 2 * (r->nconns + 1);
            struct pollfd *np = realloc(pfd, sizeof *np * (size_t)pcap);
            int *ni = np ? realloc(pidx, sizeof *ni * (size_t)pcap) : NULL;
            if (np) pfd = np;
            if (ni) pidx = ni;
            if (!np || !ni) { LOG_WARN("boot root: out of memory"); goto out; }
        }
        int n = 0;
        pfd[n++] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
        for (int i = 0; i < r->nconns; i++)
            if (r->conns[i].fd >= 0) {
                pidx[n] = i;
                pfd[n++] = (struct pollfd){.fd = r->conns[i].fd, .events = POLLIN};
            }
        int rc = poll(pfd, (nfds_t)n, left > 1000 ? 1000 : (int)left);
        if (rc <= 0) continue;
        for (int k = 1; k < n; k++)
            if (pfd[k].revents) root_read(r, pidx[k]);
        if (pfd[0].revents) root_accept(r);
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
        char where[80];
        boot_addr_str(&r->where, where, sizeof where);
        LOG_WARN("boot root at %s: no rank arrived within %d ms; giving up", where, r->first_wait_ms);
    }
out:
    for (int i = 0; i < r->nconns; i++) root_close_conn(&r->conns[i]);
    if (r->listen_fd >= 0) close(r->listen_fd);
    free(pfd);
    free(pidx);
    free(r->conns);
    free(r->by_rank);
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
    memcpy(r->secret, secret, BOOT_SECRET_BYTES);
    r->first_wait_ms = first_wait_ms;
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

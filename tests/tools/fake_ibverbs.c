/*
 * fake_ibverbs.c - a stand-in for libibverbs (built as libfake_ibverbs.so; tests load it with
 * MSCCLRT_IBVERBS_LIB) that emulates reliable-connected queue pairs between processes of this
 * machine, for the ib transport's tests. Only the subset net_ib.c calls exists.
 *
 * Model: every QP listens on an abstract Unix socket named after its number
 * ("\0fakeibv.<uid>.<qpn>"). Moving a QP to RTR connects to the destination QP's socket and
 * sends a hello carrying the address it was given (LID, or GID for an Ethernet port); the
 * destination refuses a wrong address (as a fabric would not deliver it), and the sender's
 * requests then fail with IBV_WC_RETRY_EXC_ERR. An RDMA WRITE is a message on that connection:
 * the destination's service thread (one per opened device) checks its QP is at least RTR, the
 * rkey, the access flags and the bounds against its memory regions, copies the payload into
 * place and answers; the answer completes the request at the sender (a completion is queued
 * when it was signaled, or always on an error, which also moves the QP to the error state and
 * flushes what follows with IBV_WC_WR_FLUSH_ERR). Posting before RTS is EINVAL. One stream per
 * QP keeps writes in order, as RC does.
 *
 * Knobs (environment): FAKE_IBV_DEVICES (comma list of device names, default "fake0"),
 * FAKE_IBV_PORT_STATE=down (ports not active), FAKE_IBV_LINK=eth (RoCE: GIDs, no LID),
 * FAKE_IBV_DELAY_US (the destination waits this long before applying each write, so a flush
 * that does not wait for completions is caught).
 */
#include <infiniband/verbs.h>
#undef ibv_get_device_list
#undef ibv_reg_mr
#undef ibv_query_port

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define F_MAGIC 0x46494256u   /* "FIBV" */
enum { F_HELLO = 1, F_WRITE = 2 };

typedef struct FReq {          /* wire: a hello or a write's header (payload follows) */
    uint32_t magic, kind;
    uint64_t wr_id, raddr;
    uint32_t rkey, len;
    uint32_t dst_qpn, src_qpn;
    uint16_t dlid;
    uint8_t is_global, pad[5];
    uint8_t dgid[16];
} FReq;

typedef struct FAck { uint64_t wr_id; int32_t status, pad; } FAck;

typedef struct FMr {
    struct ibv_mr mr;
    int access;
    struct FMr *next;
} FMr;

typedef struct FCq {
    struct ibv_cq cq;
    struct ibv_wc *q;
    int cap, head, count;
    bool overflow;
} FCq;

typedef struct FPend { uint64_t wr_id; bool signaled; } FPend;

typedef struct FQp {
    struct ibv_qp qp;
    int listen_fd, in_fd, out_fd;
    pthread_mutex_t send_mu;      /* one request at a time on out_fd */
    FPend *pend;                  /* requests sent, awaiting their answer (FIFO) */
    uint32_t cap, head, count;
    bool broken;                  /* the destination is unreachable */
    struct FQp *next;
} FQp;

typedef struct FCtx {
    struct ibv_context ctx;
    pthread_t svc;
    int wake[2];
    bool stop;
    pthread_mutex_t io_mu;        /* held by the service thread while it handles sockets */
} FCtx;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;   /* all tables, CQs, QP states */
static FMr *g_mrs;
static FQp *g_qps;
static uint32_t g_key = 0x100;

static const char *env_or(const char *k, const char *d) {
    const char *v = getenv(k);
    return v && *v ? v : d;
}
static bool link_eth(void) { return strcmp(env_or("FAKE_IBV_LINK", "ib"), "eth") == 0; }
static uint16_t my_lid(void) { return (uint16_t)(1 + getpid() % 0xbffe); }

/* GID table of an Ethernet port: link-local v1/v2, IPv4-mapped v1/v2; unique per process */
static void my_gid(int index, union ibv_gid *g, int *type) {
    memset(g, 0, sizeof *g);
    unsigned pid = (unsigned)getpid();
    if (index < 2) {
        g->raw[0] = 0xfe;
        g->raw[1] = 0x80;
    } else {
        g->raw[10] = g->raw[11] = 0xff;
        g->raw[12] = 10;
    }
    g->raw[13] = (uint8_t)(pid >> 16);
    g->raw[14] = (uint8_t)(pid >> 8);
    g->raw[15] = (uint8_t)pid;
    *type = index % 2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
}

static int io_all(int fd, void *buf, size_t len, bool wr) {
    char *p = buf;
    while (len) {
        ssize_t k = wr ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

static void qp_sock_name(uint32_t qpn, struct sockaddr_un *a, socklen_t *len) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int k = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "fakeibv.%u.%u", (unsigned)getuid(),
                     qpn);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
}

/* ---- completions (g_mu held) ------------------------------------------------------------- */
static void cq_push(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st, struct ibv_qp *qp) {
    FCq *c = (FCq *)cq;
    if (c->count == c->cap) {
        c->overflow = true;
        fprintf(stderr, "fake_ibverbs: completion queue overflow\n");
        return;
    }
    struct ibv_wc *w = &c->q[(c->head + c->count++) % c->cap];
    memset(w, 0, sizeof *w);
    w->wr_id = wr_id;
    w->status = st;
    w->opcode = IBV_WC_RDMA_WRITE;
    w->qp_num = qp->qp_num;
    w->vendor_err = st == IBV_WC_SUCCESS ? 0 : 0x42;
}

/* The QP enters the error state: the oldest outstanding request gets st, the rest are
 * flushed. g_mu held. */
static void qp_fail(FQp *q, enum ibv_wc_status st) {
    q->qp.state = IBV_QPS_ERR;
    while (q->count) {
        FPend *e = &q->pend[q->head];
        cq_push(q->qp.send_cq, e->wr_id, st, &q->qp);
        st = IBV_WC_WR_FLUSH_ERR;
        q->head = (q->head + 1) % q->cap;
        q->count--;
    }
}

static FMr *mr_find_rkey(uint32_t rkey) {
    for (FMr *m = g_mrs; m; m = m->next)
        if (m->mr.rkey == rkey) return m;
    return NULL;
}
static FMr *mr_find_lkey(uint32_t lkey) {
    for (FMr *m = g_mrs; m; m = m->next)
        if (m->mr.lkey == lkey) return m;
    return NULL;
}
static bool in_mr(const FMr *m, uint64_t a, uint64_t len) {
    uint64_t b = (uint64_t)(uintptr_t)m->mr.addr;
    return a >= b && len <= m->mr.length && a - b <= m->mr.length - len;
}

/* ---- the service thread -------------------------------------------------------------------- */
static FQp *qp_by_fd(int fd) {
    for (FQp *q = g_qps; q; q = q->next)
        if (q->listen_fd == fd || q->in_fd == fd || q->out_fd == fd) return q;
    return NULL;
}

static void on_accept(FQp *q) {
    int fd = accept(q->listen_fd, NULL, NULL);
    if (fd < 0) return;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    FReq h;
    bool ok = io_all(fd, &h, sizeof h, false) == 0 && h.magic == F_MAGIC && h.kind == F_HELLO &&
              h.dst_qpn == q->qp.qp_num;
    if (ok && h.is_global) {   /* RoCE: the GID must be one of ours */
        bool hit = false;
        for (int i = 0; i < 4 && !hit; i++) {
            union ibv_gid g;
            int t;
            my_gid(i, &g, &t);
            hit = link_eth() && memcmp(g.raw, h.dgid, 16) == 0;
        }
        ok = hit;
    } else if (ok) {
        ok = !link_eth() && h.dlid == my_lid();
    }
    pthread_mutex_lock(&g_mu);
    if (ok && q->in_fd < 0) q->in_fd = fd;
    else ok = false;
    pthread_mutex_unlock(&g_mu);
    if (!ok) close(fd);   /* misaddressed: the sender sees the connection close */
}

static void on_request(FQp *q) {
    FReq h;
    if (io_all(q->in_fd, &h, sizeof h, false) != 0 || h.magic != F_MAGIC || h.kind != F_WRITE) {
        pthread_mutex_lock(&g_mu);
        close(q->in_fd);
        q->in_fd = -1;
        pthread_mutex_unlock(&g_mu);
        return;
    }
    long delay = atol(env_or("FAKE_IBV_DELAY_US", "0"));
    if (delay > 0) usleep((useconds_t)delay);
    int st = IBV_WC_SUCCESS;
    void *dst = NULL;
    pthread_mutex_lock(&g_mu);
    if (q->qp.state != IBV_QPS_RTR && q->qp.state != IBV_QPS_RTS) {
        st = IBV_WC_RETRY_EXC_ERR;   /* a QP that does not receive never answers */
    } else if (h.len) {
        FMr *m = mr_find_rkey(h.rkey);
        if (!m || !(m->access & IBV_ACCESS_REMOTE_WRITE) || m->mr.pd != q->qp.pd ||
            !in_mr(m, h.raddr, h.len))
            st = IBV_WC_REM_ACCESS_ERR;
        else
            dst = (void *)(uintptr_t)h.raddr;
    }
    pthread_mutex_unlock(&g_mu);
    int rc = 0;
    if (dst) {
        rc = io_all(q->in_fd, dst, h.len, false);
    } else {
        char sink[4096];
        for (uint32_t left = h.len; left && rc == 0;) {
            uint32_t k = left < sizeof sink ? left : (uint32_t)sizeof sink;
            rc = io_all(q->in_fd, sink, k, false);
            left -= k;
        }
    }
    FAck a = {.wr_id = h.wr_id, .status = st};
    if (rc == 0) rc = io_all(q->in_fd, &a, sizeof a, true);
    if (rc != 0) {
        pthread_mutex_lock(&g_mu);
        close(q->in_fd);
        q->in_fd = -1;
        pthread_mutex_unlock(&g_mu);
    }
}

static void on_answer(FQp *q) {
    FAck a;
    int rc = io_all(q->out_fd, &a, sizeof a, false);
    pthread_mutex_lock(&g_mu);
    if (rc != 0) {   /* the destination refused or went away */
        q->broken = true;
        close(q->out_fd);
        q->out_fd = -1;
        qp_fail(q, IBV_WC_RETRY_EXC_ERR);
    } else if (q->count && q->pend[q->head].wr_id == a.wr_id) {
        FPend e = q->pend[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
        if (a.status != IBV_WC_SUCCESS) {
            cq_push(q->qp.send_cq, e.wr_id, (enum ibv_wc_status)a.status, &q->qp);
            qp_fail(q, IBV_WC_WR_FLUSH_ERR);
        } else if (e.signaled) {
            cq_push(q->qp.send_cq, e.wr_id, IBV_WC_SUCCESS, &q->qp);
        }
    }
    pthread_mutex_unlock(&g_mu);
}

static void *svc_main(void *arg) {
    FCtx *c = arg;
    for (;;) {
        struct pollfd pf[256];
        int n = 0;
        pthread_mutex_lock(&g_mu);
        if (c->stop) {
            pthread_mutex_unlock(&g_mu);
            break;
        }
        pf[n++] = (struct pollfd){.fd = c->wake[0], .events = POLLIN};
        for (FQp *q = g_qps; q && n + 3 <= 256; q = q->next) {
            if (q->qp.context != &c->ctx) continue;
            if (q->in_fd < 0) pf[n++] = (struct pollfd){.fd = q->listen_fd, .events = POLLIN};
            if (q->in_fd >= 0) pf[n++] = (struct pollfd){.fd = q->in_fd, .events = POLLIN};
            if (q->out_fd >= 0) pf[n++] = (struct pollfd){.fd = q->out_fd, .events = POLLIN};
        }
        pthread_mutex_unlock(&g_mu);
        if (poll(pf, (nfds_t)n, 100) <= 0) continue;
        if (pf[0].revents) {
            char b[64];
            if (read(c->wake[0], b, sizeof b) < 0) { /* nothing to do: only a wake-up */ }
        }
        pthread_mutex_lock(&c->io_mu);
        for (int i = 1; i < n; i++) {
            if (!pf[i].revents) continue;
            pthread_mutex_lock(&g_mu);
            FQp *q = qp_by_fd(pf[i].fd);   /* still there (not destroyed since the poll)? */
            int lfd = q ? q->listen_fd : -1, ifd = q ? q->in_fd : -1, ofd = q ? q->out_fd : -1;
            pthread_mutex_unlock(&g_mu);
            if (!q) continue;
            if (pf[i].fd == lfd) on_accept(q);
            else if (pf[i].fd == ifd) on_request(q);
            else if (pf[i].fd == ofd) on_answer(q);
        }
        pthread_mutex_unlock(&c->io_mu);
    }
    return NULL;
}

/* ---- verbs: data path (through the context's ops, as the real inlines call them) ---------- */
static int f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
    FQp *q = (FQp *)qp;
    for (; wr; wr = wr->next) {
        if (wr->opcode != IBV_WR_RDMA_WRITE || wr->num_sge > 1) {
            *bad = wr;
            return EINVAL;
        }
        pthread_mutex_lock(&q->send_mu);
        pthread_mutex_lock(&g_mu);
        if (qp->state == IBV_QPS_ERR) {   /* accepted and flushed, as hardware does */
            cq_push(qp->send_cq, wr->wr_id, IBV_WC_WR_FLUSH_ERR, qp);
            pthread_mutex_unlock(&g_mu);
            pthread_mutex_unlock(&q->send_mu);
            continue;
        }
        if (qp->state != IBV_QPS_RTS || q->count == q->cap) {
            int e = qp->state != IBV_QPS_RTS ? EINVAL : ENOMEM;
            pthread_mutex_unlock(&g_mu);
            pthread_mutex_unlock(&q->send_mu);
            *bad = wr;
            return e;
        }
        uint32_t len = wr->num_sge ? wr->sg_list[0].length : 0;
        const void *src = wr->num_sge ? (const void *)(uintptr_t)wr->sg_list[0].addr : NULL;
        if (len) {
            FMr *m = mr_find_lkey(wr->sg_list[0].lkey);
            if (!m || m->mr.pd != qp->pd || !in_mr(m, wr->sg_list[0].addr, len)) {
                cq_push(qp->send_cq, wr->wr_id, IBV_WC_LOC_PROT_ERR, qp);
                qp_fail(q, IBV_WC_WR_FLUSH_ERR);
                pthread_mutex_unlock(&g_mu);
                pthread_mutex_unlock(&q->send_mu);
                continue;
            }
        }
        bool sig = (wr->send_flags & IBV_SEND_SIGNALED) || qp->qp_type != IBV_QPT_RC;
        q->pend[(q->head + q->count++) % q->cap] = (FPend){wr->wr_id, sig};
        bool broken = q->broken || q->out_fd < 0;
        if (broken) qp_fail(q, IBV_WC_RETRY_EXC_ERR);
        int fd = q->out_fd;
        pthread_mutex_unlock(&g_mu);
        if (!broken) {
            FReq h = {.magic = F_MAGIC, .kind = F_WRITE, .wr_id = wr->wr_id,
                      .raddr = wr->wr.rdma.remote_addr, .rkey = wr->wr.rdma.rkey, .len = len};
            /* a failed send shows as the connection closing: on_answer fails the QP */
            if (io_all(fd, &h, sizeof h, true) == 0 && len)
                io_all(fd, (void *)(uintptr_t)src, len, true);
        }
        pthread_mutex_unlock(&q->send_mu);
    }
    return 0;
}

static int f_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
    FCq *c = (FCq *)cq;
    pthread_mutex_lock(&g_mu);
    int k = c->overflow ? -1 : 0;
    while (k >= 0 && k < n && c->count) {
        wc[k++] = c->q[c->head];
        c->head = (c->head + 1) % c->cap;
        c->count--;
    }
    pthread_mutex_unlock(&g_mu);
    return k;
}

/* ---- verbs: devices ------------------------------------------------------------------------ */
struct ibv_device **ibv_get_device_list(int *num) {
    char names[256];
    snprintf(names, sizeof names, "%s", env_or("FAKE_IBV_DEVICES", "fake0"));
    struct ibv_device **l = calloc(17, sizeof *l);
    int k = 0;
    for (char *s = strtok(names, ","); s && k < 16; s = strtok(NULL, ",")) {
        struct ibv_device *d = calloc(1, sizeof *d);
        snprintf(d->name, sizeof d->name, "%s", s);
        snprintf(d->dev_name, sizeof d->dev_name, "uverbs%d", k);
        d->node_type = IBV_NODE_CA;
        d->transport_type = IBV_TRANSPORT_IB;
        l[k++] = d;
    }
    if (num) *num = k;
    return l;
}

void ibv_free_device_list(struct ibv_device **l) {
    for (int i = 0; l && l[i]; i++) free(l[i]);
    free(l);
}

const char *ibv_get_device_name(struct ibv_device *d) { return d->name; }

struct ibv_context *ibv_open_device(struct ibv_device *d) {
    FCtx *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->ctx.device = d;
    c->ctx.ops.post_send = f_post_send;
    c->ctx.ops.poll_cq = f_poll_cq;
    pthread_mutex_init(&c->io_mu, NULL);
    if (pipe(c->wake) != 0 || pthread_create(&c->svc, NULL, svc_main, c) != 0) {
        free(c);
        return NULL;
    }
    return &c->ctx;
}

int ibv_close_device(struct ibv_context *ctx) {
    FCtx *c = (FCtx *)ctx;
    pthread_mutex_lock(&g_mu);
    c->stop = true;
    pthread_mutex_unlock(&g_mu);
    if (write(c->wake[1], "x", 1) < 0) { /* the 100 ms poll timeout wakes it anyway */ }
    pthread_join(c->svc, NULL);
    close(c->wake[0]);
    close(c->wake[1]);
    free(c);
    return 0;
}

int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a) {
    (void)ctx;
    memset(a, 0, sizeof *a);
    a->phys_port_cnt = 1;
    a->max_qp_wr = 4096;
    a->max_cqe = 65536;
    a->max_mr_size = ~0ull;
    return 0;
}

int ibv_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *pa) {
    (void)ctx;
    if (port != 1) return EINVAL;
    /* the compat struct is ibv_port_attr up to link_layer: fill only that much */
    struct ibv_port_attr a;
    memset(&a, 0, sizeof a);
    a.state = strcmp(env_or("FAKE_IBV_PORT_STATE", "active"), "down") == 0 ? IBV_PORT_DOWN
                                                                          : IBV_PORT_ACTIVE;
    a.max_mtu = a.active_mtu = IBV_MTU_4096;
    a.gid_tbl_len = link_eth() ? 4 : 1;
    a.max_msg_sz = 1u << 30;
    a.pkey_tbl_len = 1;
    a.lid = link_eth() ? 0 : my_lid();
    a.link_layer = link_eth() ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
    memcpy(pa, &a, offsetof(struct ibv_port_attr, link_layer) + 1);
    return 0;
}

int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid) {
    (void)ctx;
    int t;
    if (port != 1 || index < 0 || index >= (link_eth() ? 4 : 1)) return EINVAL;
    if (link_eth()) my_gid(index, gid, &t);
    else memset(gid, 0, sizeof *gid);
    return 0;
}

int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
                      struct ibv_gid_entry *e, uint32_t flags, size_t size) {
    (void)ctx, (void)flags;
    if (size < sizeof *e || port != 1 || index >= (link_eth() ? 4u : 1u)) return EINVAL;
    memset(e, 0, sizeof *e);
    int t = IBV_GID_TYPE_IB;
    if (link_eth()) my_gid((int)index, &e->gid, &t);
    e->gid_index = index;
    e->port_num = port;
    e->gid_type = (uint32_t)t;
    return 0;
}

const char *ibv_wc_status_str(enum ibv_wc_status s) {
    switch (s) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    default: return "unknown";
    }
}

/* ---- verbs: protection domains, memory ----------------------------------------------------- */
struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx) {
    struct ibv_pd *pd = calloc(1, sizeof *pd);
    if (pd) pd->context = ctx;
    return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd) {
    free(pd);
    return 0;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
    if (!addr || !len) {
        errno = EINVAL;
        return NULL;
    }
    FMr *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = addr;
    m->mr.length = len;
    m->access = access;
    pthread_mutex_lock(&g_mu);
    /* keys differ per process too, so a key from another process is not valid by accident */
    uint32_t k = (g_key += 0x101) ^ ((uint32_t)getpid() << 12);
    m->mr.lkey = k;
    m->mr.rkey = k ^ 0x5a5a0000u;
    m->next = g_mrs;
    g_mrs = m;
    pthread_mutex_unlock(&g_mu);
    return &m->mr;
}

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova,
                                 int fd, int access) {
    (void)pd, (void)off, (void)len, (void)iova, (void)fd, (void)access;
    errno = EOPNOTSUPP;   /* the fake has no device memory */
    return NULL;
}

int ibv_dereg_mr(struct ibv_mr *mr) {
    pthread_mutex_lock(&g_mu);
    for (FMr **p = &g_mrs; *p; p = &(*p)->next)
        if (&(*p)->mr == mr) {
            FMr *m = *p;
            *p = m->next;
            free(m);
            break;
        }
    pthread_mutex_unlock(&g_mu);
    return 0;
}

/* ---- verbs: completion queues, queue pairs ------------------------------------------------- */
struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *user,
                             struct ibv_comp_channel *ch, int vector) {
    (void)ch, (void)vector;
    FCq *c = calloc(1, sizeof *c);
    if (!c || cqe <= 0 || !(c->q = calloc((size_t)cqe, sizeof *c->q))) {
        free(c);
        errno = EINVAL;
        return NULL;
    }
    c->cap = cqe;
    c->cq.context = ctx;
    c->cq.cq_context = user;
    c->cq.cqe = cqe;
    return &c->cq;
}

int ibv_destroy_cq(struct ibv_cq *cq) {
    FCq *c = (FCq *)cq;
    free(c->q);
    free(c);
    return 0;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia) {
    if (ia->qp_type != IBV_QPT_RC || !ia->send_cq || ia->cap.max_send_wr == 0) {
        errno = EINVAL;
        return NULL;
    }
    FQp *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->cap = ia->cap.max_send_wr;
    q->pend = calloc(q->cap, sizeof *q->pend);
    q->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    q->in_fd = q->out_fd = -1;
    unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL) ^ (unsigned)(uintptr_t)q;
    bool bound = false;
    for (int tries = 0; tries < 64 && q->listen_fd >= 0 && !bound; tries++) {
        q->qp.qp_num = 1 + (uint32_t)rand_r(&seed) % 0xfffffe;
        struct sockaddr_un a;
        socklen_t al;
        qp_sock_name(q->qp.qp_num, &a, &al);
        bound = bind(q->listen_fd, (struct sockaddr *)&a, al) == 0;
    }
    if (!q->pend || !bound || listen(q->listen_fd, 4) != 0) {
        if (q->listen_fd >= 0) close(q->listen_fd);
        free(q->pend);
        free(q);
        errno = ENOMEM;
        return NULL;
    }
    pthread_mutex_init(&q->send_mu, NULL);
    q->qp.context = pd->context;
    q->qp.pd = pd;
    q->qp.send_cq = ia->send_cq;
    q->qp.recv_cq = ia->recv_cq;
    q->qp.qp_type = IBV_QPT_RC;
    q->qp.state = IBV_QPS_RESET;
    pthread_mutex_lock(&g_mu);
    q->next = g_qps;
    g_qps = q;
    pthread_mutex_unlock(&g_mu);
    FCtx *c = (FCtx *)pd->context;
    if (write(c->wake[1], "x", 1) < 0) { /* polled again within 100 ms anyway */ }
    return &q->qp;
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask) {
    FQp *q = (FQp *)qp;
    if (!(mask & IBV_QP_STATE)) return EINVAL;
    enum ibv_qp_state from = qp->state, to = a->qp_state;
    int need = 0;
    if (to == IBV_QPS_INIT && from == IBV_QPS_RESET)
        need = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    else if (to == IBV_QPS_RTR && from == IBV_QPS_INIT)
        need = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    else if (to == IBV_QPS_RTS && from == IBV_QPS_RTR)
        need = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
               IBV_QP_MAX_QP_RD_ATOMIC;
    else if (to != IBV_QPS_ERR)
        return EINVAL;   /* no other transition is used (or valid from here) */
    if ((mask & need) != need) return EINVAL;
    if (to == IBV_QPS_INIT && a->port_num != 1) return EINVAL;
    if (to == IBV_QPS_RTR) {
        if (link_eth() && !a->ah_attr.is_global) return EINVAL;   /* RoCE needs a GRH */
        /* connect to the destination QP and introduce ourselves with the address we were
         * given; a refusal is not an error here (hardware would not know yet) */
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa;
        socklen_t sl;
        qp_sock_name(a->dest_qp_num, &sa, &sl);
        FReq h = {.magic = F_MAGIC, .kind = F_HELLO, .dst_qpn = a->dest_qp_num,
                  .src_qpn = qp->qp_num, .dlid = a->ah_attr.dlid,
                  .is_global = a->ah_attr.is_global};
        memcpy(h.dgid, a->ah_attr.grh.dgid.raw, 16);
        bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sl) == 0 &&
                  io_all(fd, &h, sizeof h, true) == 0;
        if (ok) {
            struct timeval tv = {5, 0};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        } else if (fd >= 0) {
            close(fd);
            fd = -1;
        }
        pthread_mutex_lock(&g_mu);
        q->out_fd = fd;
        q->broken = !ok;
        pthread_mutex_unlock(&g_mu);
        FCtx *c = (FCtx *)qp->context;
        if (write(c->wake[1], "x", 1) < 0) { /* polled again within 100 ms anyway */ }
    }
    pthread_mutex_lock(&g_mu);
    if (to == IBV_QPS_ERR) qp_fail(q, IBV_WC_WR_FLUSH_ERR);
    qp->state = to;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp) {
    FQp *q = (FQp *)qp;
    FCtx *c = (FCtx *)qp->context;
    if (write(c->wake[1], "x", 1) < 0) { /* the service thread's poll times out anyway */ }
    pthread_mutex_lock(&c->io_mu);   /* the service thread is not inside this QP's sockets */
    pthread_mutex_lock(&g_mu);
    for (FQp **p = &g_qps; *p; p = &(*p)->next)
        if (*p == q) {
            *p = q->next;
            break;
        }
    pthread_mutex_unlock(&g_mu);
    pthread_mutex_unlock(&c->io_mu);
    pthread_mutex_lock(&q->send_mu);   /* no post_send still writing */
    pthread_mutex_unlock(&q->send_mu);
    if (q->listen_fd >= 0) close(q->listen_fd);
    if (q->in_fd >= 0) close(q->in_fd);
    if (q->out_fd >= 0) close(q->out_fd);
    pthread_mutex_destroy(&q->send_mu);
    free(q->pend);
    free(q);
    return 0;
}

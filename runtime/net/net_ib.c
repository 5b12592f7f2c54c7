/*
 * net_ib.c - the "ib" backend: port-channel data between nodes over RDMA (libibverbs, opened
 * with dlopen: net_ib_verbs.c), on the device and port net_ib_dev.c chooses.
 *
 * Connections: one reliable-connected (RC) queue pair per remote peer, each with its own
 * completion queue. The QP's number, a random start PSN, the port's LID (InfiniBand) or GID
 * (RoCE), its MTU and the address/rkey of this rank's small control area travel to the peer
 * over the bootstrap (tag IB_TAG); each side then moves its QP INIT -> RTR -> RTS, says so over
 * the bootstrap (so nobody writes into a QP that is not yet receiving: that would exhaust the
 * NIC's retries), and finally RDMA-writes a "ready" word into every peer's control area and
 * waits, within MSCCLRT_NET_TIMEOUT_MS, for each peer's word: a bad address or route shows up
 * at creation, naming the peer, not in the middle of a collective.
 *
 * Data path (the proxy thread only): a put is RDMA WRITEs of at most IB_CHUNK bytes from the
 * source (registered on first use, below) into the peer's registered buffer; a signal is an
 * 8-byte RDMA WRITE of the value, from a slot of the control area, posted on the same QP after
 * the data with IBV_SEND_FENCE. An RC QP executes its writes in order, so the signal lands
 * after the data before it (the fence adds the ordering the verbs spec only promises for
 * preceding reads and atomics, which costs nothing here). Every IB_SIGNAL_EVERY-th work
 * request asks for a completion; one completion retires every request before it on that QP
 * (RC completes in order), so per QP `done` is the last completed sequence number. At most
 * IB_DEPTH requests are outstanding per QP; posting beyond that polls first. A flush posts a
 * signaled zero-length write where the last request was unsignaled and polls until every QP's
 * `done` reaches its `posted`. Every wait is bounded by MSCCLRT_NET_TIMEOUT_MS, and an error
 * completion (or a failed post) is recorded once with the peer's rank and the operation.
 *
 * Memory: regions peers write into are registered by net_reg (be->reg). Put sources are
 * whatever the kernel names: a source inside a registered region uses its MR, any other is
 * registered on first use and kept until the Net closes (device memory: the whole allocation,
 * checked against the allocation's buffer id so a freed-and-reused address is registered
 * anew). Device memory is registered as a dmabuf (cuMemGetHandleForAddressRange +
 * ibv_reg_dmabuf_mr) when driver and library support it, else with ibv_reg_mr (which needs the
 * nvidia-peermem module); host memory (host_mem mode, regions of net_reg_host and host sources)
 * with ibv_reg_mr.
 */
#include "net/net_ib.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "cuda/cuda_driver.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define IB_CHUNK        (1u << 20)   /* bytes per RDMA WRITE: completions (and errors) come back
                                        sooner than for one giant message, at no cost in speed */
#define IB_DEPTH        256          /* send requests outstanding per QP */
#define IB_SIGNAL_EVERY 16           /* a completion every this many requests */
#define IB_TAG          0x4942       /* "IB": bootstrap tag of queue-pair info */
#define IB_TAG_RTS      0x4952       /* "IR": "my QP to you is ready to receive" */
#define IB_MAGIC        0x4d534942u  /* "MSIB" */
#define IB_VERSION      1
#define IB_SEQ_MASK     ((1ull << 56) - 1)
#define IB_ACCESS       (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

enum { IB_OP_PUT = 1, IB_OP_SIGNAL = 2, IB_OP_FLUSH = 3, IB_OP_READY = 4 };
static const char *const ib_op_name[] = {"?", "put", "signal", "flush", "connection check"};

/* What a rank tells one peer about the QP it made for that peer. Wire format. */
typedef struct IbInfo {
    uint32_t magic;          /* IB_MAGIC */
    uint16_t version;        /* IB_VERSION */
    uint8_t link;            /* IBV_LINK_LAYER_*: both ends must agree */
    uint8_t port;
    int32_t rank;            /* sender */
    uint32_t qpn, psn;       /* the QP and its first packet sequence number */
    uint32_t mtu;            /* enum ibv_mtu, the port's active MTU */
    uint16_t lid;            /* InfiniBand */
    int16_t gid_index;       /* RoCE: -1 on InfiniBand */
    uint8_t gid[16];         /* RoCE */
    uint64_t ctrl_addr;      /* the sender's control area (ready words) */
    uint32_t ctrl_rkey;
    uint32_t reserved;
} IbInfo;
static_assert(sizeof(IbInfo) == 64, "IbInfo is a wire format");

typedef struct IbPeer {
    int rank;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    IbInfo remote;           /* what the peer sent */
    uint64_t posted;         /* requests posted (the last one's sequence number) */
    uint64_t done;           /* requests completed */
    uint64_t last_sig;       /* sequence number of the last signaled request */
} IbPeer;

/* A put source registered on first use (not inside a region). */
typedef struct IbSrc {
    uint64_t base, bytes;    /* what the MR covers */
    uint64_t buf_id;         /* device memory: the allocation's CU_POINTER_ATTRIBUTE_BUFFER_ID */
    struct ibv_mr *mr;
} IbSrc;

typedef struct Ib {
    Net *n;
    IbDev dev;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    IbPeer **peers;          /* [nranks]; NULL for ranks on this node */
    uint64_t *ctrl;          /* [nranks] ready words, then [nranks][IB_DEPTH] signal slots */
    size_t ctrl_bytes;
    struct ibv_mr *ctrl_mr;
    IbSrc *src;              /* proxy thread only */
    int nsrc, capsrc;
} Ib;

static Ib *ib_of(Net *n) { return n->be_state; }

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ==== registration =========================================================================== */

/* Registers [base, base+bytes): host memory directly; device memory as its whole allocation
 * (rbase and rbytes get what was covered). what names the buffer in messages. */
static mscclrt_result ib_register(Ib *ib, uint64_t base, uint64_t bytes, bool host,
                                  const char *what, struct ibv_mr **out, uint64_t *rbase,
                                  uint64_t *rbytes) {
    Net *n = ib->n;
    *out = NULL;
    if (n->opt.host_mem || host) {   /* host memory: the plain registration */
        *out = iv.reg_mr(ib->pd, (void *)(uintptr_t)base, bytes, IB_ACCESS);
        if (!*out)
            return rt_fail_errno(MSCCLRT_ERR_SYSTEM, "net: rank %d: ibv_reg_mr(%s, %llu bytes "
                                 "at 0x%llx) on %s", n->rank, what, (unsigned long long)bytes,
                                 (unsigned long long)base, ib->dev.name);
        *rbase = base;
        *rbytes = bytes;
        return MSCCLRT_SUCCESS;
    }
    CuDevPtr abase = 0;
    size_t asize = 0;
    TRY(cu_check(cu.cuMemGetAddressRange(&abase, &asize, (CuDevPtr)base),
                 "cuMemGetAddressRange(RDMA registration)"));
    *rbase = abase;
    *rbytes = asize;
    char dmabuf_why[320] = "the driver lacks cuMemGetHandleForAddressRange";
    if (cu.cuMemGetHandleForAddressRange && iv.reg_dmabuf_mr) {
        /* the dmabuf must cover whole host pages */
        uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
        uint64_t start = abase & ~(pg - 1), end = (abase + asize + pg - 1) & ~(pg - 1);
        int fd = -1;
        CuResult cr = cu.cuMemGetHandleForAddressRange(&fd, (CuDevPtr)start, end - start,
                                                       CU_MEM_RANGE_HANDLE_DMA_BUF_FD, 0);
        if (cr == CU_OK) {
            *out = iv.reg_dmabuf_mr(ib->pd, 0, end - start, start, fd, IB_ACCESS);
            int e = errno;
            close(fd);
            if (*out) return MSCCLRT_SUCCESS;
            snprintf(dmabuf_why, sizeof dmabuf_why, "ibv_reg_dmabuf_mr: %s", strerror(e));
        } else {
            snprintf(dmabuf_why, sizeof dmabuf_why, "cuMemGetHandleForAddressRange: error %d",
                     cr);
        }
    } else if (!iv.reg_dmabuf_mr) {
        snprintf(dmabuf_why, sizeof dmabuf_why, "%s lacks ibv_reg_dmabuf_mr", iv.path);
    }
    *out = iv.reg_mr(ib->pd, (void *)(uintptr_t)abase, asize, IB_ACCESS);
    if (!*out)
        return rt_fail_errno(MSCCLRT_ERR_UNAVAILABLE, "net: rank %d: cannot register GPU memory "
                             "(%s, %zu bytes at 0x%llx) with %s: dmabuf: %s; ibv_reg_mr (needs "
                             "the nvidia-peermem module)", n->rank, what, asize,
                             (unsigned long long)abase, ib->dev.name, dmabuf_why);
    LOG_INFO(LOG_SUB_XPORT, "rank %d: %s registered through nvidia-peermem (%s)", n->rank, what,
             dmabuf_why);
    return MSCCLRT_SUCCESS;
}

static mscclrt_result ib_reg(Net *n, NetRegion *r) {
    Ib *ib = ib_of(n);
    if (!ib)
        return rt_fail(MSCCLRT_ERR_INTERNAL, "net: rank %d: ib registration without a device",
                       n->rank);
    struct ibv_mr *mr = NULL;
    uint64_t b, len;
    TRY(ib_register(ib, r->base, r->bytes, r->host, "a buffer peers write into", &mr, &b, &len));
    r->mr = mr;
    r->rkey = mr->rkey;
    return MSCCLRT_SUCCESS;
}

static void ib_dereg(Net *n, NetRegion *r) {
    (void)n;
    if (r->mr) iv.dereg_mr(r->mr);
    r->mr = NULL;
}

static uint64_t buffer_id(Net *n, uint64_t addr) {
    unsigned long long id = 0;
    if (!n->opt.host_mem &&
        cu.cuPointerGetAttribute(&id, CU_PTR_ATTR_BUFFER_ID, (CuDevPtr)addr) != CU_OK)
        id = 0;
    return id;
}

/* The lkey under which [src, src+bytes) can be read. */
static mscclrt_result src_lkey(Ib *ib, uint64_t src, uint64_t bytes, uint32_t *lkey) {
    Net *n = ib->n;
    bool found = false;
    pthread_mutex_lock(&n->mu);
    for (int i = 0; i < n->nregs && !found; i++) {
        const NetRegion *r = &n->regs[i];
        struct ibv_mr *mr = r->mr;
        if (!r->owner || !mr) continue;
        uint64_t mb = (uint64_t)(uintptr_t)mr->addr;
        if (src >= mb && bytes <= mr->length && src - mb <= mr->length - bytes) {
            *lkey = mr->lkey;
            found = true;
        }
    }
    pthread_mutex_unlock(&n->mu);
    if (found) return MSCCLRT_SUCCESS;
    uint64_t id = buffer_id(n, src);
    for (int i = 0; i < ib->nsrc; i++) {
        IbSrc *s = &ib->src[i];
        if (src < s->base || bytes > s->bytes || src - s->base > s->bytes - bytes) continue;
        if (s->buf_id != id) {   /* freed and reallocated: the old MR pins the old memory */
            iv.dereg_mr(s->mr);
            ib->src[i--] = ib->src[--ib->nsrc];
            continue;
        }
        *lkey = s->mr->lkey;
        return MSCCLRT_SUCCESS;
    }
    if (ib->nsrc == ib->capsrc) {
        int cap = ib->capsrc ? ib->capsrc * 2 : 16;
        IbSrc *s = realloc(ib->src, (size_t)cap * sizeof *s);
        if (!s) return rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory for registrations");
        ib->src = s;
        ib->capsrc = cap;
    }
    IbSrc s = {.buf_id = id};
    uint64_t base = src, len = bytes;
    /* host memory (host_mem mode, or a host source the GPU writes through its mapping) */
    const bool host = n->opt.host_mem || net_host_src(n, src, bytes);
    if (host) {   /* whole pages: neighbouring puts from one buffer share the MR */
        uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
        base = src & ~(pg - 1);
        len = ((src + bytes + pg - 1) & ~(pg - 1)) - base;
    }
    TRY(ib_register(ib, base, len, host, "a put source", &s.mr, &s.base, &s.bytes));
    ib->src[ib->nsrc++] = s;
    *lkey = s.mr->lkey;
    return MSCCLRT_SUCCESS;
}

/* ==== completions and posting ================================================================ */

/* Reaps p's completions. An error completion is recorded (rank and operation) and returned. */
static mscclrt_result poll_peer(Ib *ib, IbPeer *p, int *got) {
    Net *n = ib->n;
    struct ibv_wc wc[16];
    int k = p->cq->context->ops.poll_cq(p->cq, 16, wc);
    if (got) *got = k > 0 ? k : 0;
    if (k < 0) {
        net_set_error(n, "net: ib: polling the completions of rank %d's queue pair failed (%d)",
                      p->rank, k);
        return net_check(n);
    }
    for (int i = 0; i < k; i++) {
        unsigned op = (unsigned)(wc[i].wr_id >> 56);
        if (wc[i].status != IBV_WC_SUCCESS) {
            char s[96];
            net_set_error(n, "net: ib: %s (RDMA WRITE) to rank %d failed on %s port %d: %s, "
                          "vendor error 0x%x", op < 5 ? ib_op_name[op] : "?", p->rank,
                          ib->dev.name, ib->dev.port, ib_status_name(wc[i].status, s, sizeof s),
                          wc[i].vendor_err);
            return net_check(n);
        }
        uint64_t seq = wc[i].wr_id & IB_SEQ_MASK;
        if (seq > p->done) p->done = seq;
    }
    return MSCCLRT_SUCCESS;
}

/* Polls p until done >= upto or the deadline (ms since now_ms's epoch) passes. */
static mscclrt_result drain(Ib *ib, IbPeer *p, uint64_t upto, double deadline, const char *op) {
    Net *n = ib->n;
    while (p->done < upto) {
        int got = 0;
        TRY(poll_peer(ib, p, &got));
        if (got) continue;
        if (now_ms() > deadline)
            return rt_fail(MSCCLRT_ERR_TIMEOUT, "net: rank %d: %s: rank %d did not complete "
                           "%llu RDMA write(s) within %d ms (MSCCLRT_NET_TIMEOUT_MS): it is not "
                           "answering", n->rank, op, p->rank,
                           (unsigned long long)(upto - p->done), n->opt.timeout_ms);
        sched_yield();   /* CPUs are shared with the ranks' own threads */
    }
    return MSCCLRT_SUCCESS;
}

/* Waits until one more request fits in p's send queue. */
static mscclrt_result room(Ib *ib, IbPeer *p, int op) {
    if (p->posted - p->done < IB_DEPTH) return MSCCLRT_SUCCESS;
    /* among IB_DEPTH outstanding requests one is signaled: done advances */
    return drain(ib, p, p->posted - IB_DEPTH + 1, now_ms() + ib->n->opt.timeout_ms,
                 ib_op_name[op]);
}

/* Posts one RDMA WRITE of len bytes at laddr (lkey) to raddr (rkey) on p's QP. */
static mscclrt_result post_write(Ib *ib, IbPeer *p, int op, uint64_t laddr, uint32_t len,
                                 uint32_t lkey, uint64_t raddr, uint32_t rkey, unsigned flags,
                                 bool signaled) {
    Net *n = ib->n;
    TRY(room(ib, p, op));
    uint64_t seq = p->posted + 1;
    if (seq - p->last_sig >= IB_SIGNAL_EVERY) signaled = true;
    struct ibv_sge sge = {.addr = laddr, .length = len, .lkey = lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = seq | (uint64_t)op << 56;
    wr.sg_list = len ? &sge : NULL;
    wr.num_sge = len ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = flags | (signaled ? IBV_SEND_SIGNALED : 0);
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    int rc = p->qp->context->ops.post_send(p->qp, &wr, &bad);
    if (rc != 0) {
        net_set_error(n, "net: ib: posting a %s (RDMA WRITE of %u bytes) to rank %d failed: "
                      "ibv_post_send: %s", ib_op_name[op], len, p->rank, strerror(rc));
        return net_check(n);
    }
    p->posted = seq;
    if (signaled) p->last_sig = seq;
    return MSCCLRT_SUCCESS;
}

static mscclrt_result ib_put(Net *n, const NetWindow *w, uint64_t off, uint64_t src,
                             uint64_t bytes) {
    Ib *ib = ib_of(n);
    IbPeer *p = ib->peers[w->peer];
    uint32_t lkey = 0;
    TRY(src_lkey(ib, src, bytes, &lkey));
    for (uint64_t o = 0; o < bytes; o += IB_CHUNK) {
        uint32_t len = (uint32_t)(bytes - o < IB_CHUNK ? bytes - o : IB_CHUNK);
        TRY(post_write(ib, p, IB_OP_PUT, src + o, len, lkey, w->addr + off + o, w->rkey, 0,
                       false));
    }
    return MSCCLRT_SUCCESS;
}

/* Writes value into the 8 bytes at raddr of peer p through the signal slot of the next request
 * (free: requests IB_DEPTH back have completed before room() lets this one post). */
static mscclrt_result write_value(Ib *ib, IbPeer *p, int op, uint64_t raddr, uint32_t rkey,
                                  uint64_t value, bool signaled) {
    TRY(room(ib, p, op));
    Net *n = ib->n;
    uint64_t *slot = &ib->ctrl[(size_t)n->nranks + (size_t)p->rank * IB_DEPTH +
                               (p->posted + 1) % IB_DEPTH];
    *slot = value;
    return post_write(ib, p, op, (uint64_t)(uintptr_t)slot, 8, ib->ctrl_mr->lkey, raddr, rkey,
                      IBV_SEND_FENCE, signaled);
}

static mscclrt_result ib_signal(Net *n, const NetWindow *w, uint64_t off, uint64_t value) {
    Ib *ib = ib_of(n);
    return write_value(ib, ib->peers[w->peer], IB_OP_SIGNAL, w->addr + off, w->rkey, value,
                       false);
}

static mscclrt_result ib_flush(Net *n) {
    Ib *ib = ib_of(n);
    /* every QP's last request must ask for a completion: a zero-length write where it did not
     * (it touches no memory; the peer's control area gives it a valid address and key) */
    for (int q = 0; q < n->nranks; q++) {
        IbPeer *p = ib->peers[q];
        if (!p || p->done == p->posted || p->last_sig == p->posted) continue;
        TRY(post_write(ib, p, IB_OP_FLUSH, 0, 0, 0, p->remote.ctrl_addr, p->remote.ctrl_rkey,
                       0, true));
    }
    double deadline = now_ms() + n->opt.timeout_ms;
    for (int q = 0; q < n->nranks; q++) {
        IbPeer *p = ib->peers[q];
        if (p) TRY(drain(ib, p, p->posted, deadline, "flush"));
    }
    return MSCCLRT_SUCCESS;
}

/* ==== connection setup ======================================================================= */

static mscclrt_result qp_create(Ib *ib, IbPeer *p) {
    Net *n = ib->n;
    p->cq = iv.create_cq(ib->ctx, IB_DEPTH + 1, NULL, NULL, 0);
    if (!p->cq)
        return rt_fail_errno(MSCCLRT_ERR_SYSTEM, "net: rank %d: ibv_create_cq for rank %d on %s",
                             n->rank, p->rank, ib->dev.name);
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = p->cq;
    ia.recv_cq = p->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = IB_DEPTH;
    ia.cap.max_recv_wr = 1;   /* nothing is ever received: writes need no receive requests */
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    p->qp = iv.create_qp(ib->pd, &ia);
    if (!p->qp)
        return rt_fail_errno(MSCCLRT_ERR_SYSTEM, "net: rank %d: ibv_create_qp (RC, %d requests) "
                             "for rank %d on %s", n->rank, IB_DEPTH, p->rank, ib->dev.name);
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = (uint8_t)ib->dev.port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    int rc = iv.modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                          IBV_QP_ACCESS_FLAGS);
    if (rc != 0)
        return rt_fail(MSCCLRT_ERR_SYSTEM, "net: rank %d: queue pair for rank %d: RESET -> "
                       "INIT: ibv_modify_qp: %s", n->rank, p->rank, strerror(rc));
    return MSCCLRT_SUCCESS;
}

static IbInfo info_for(Ib *ib, const IbPeer *p) {
    IbInfo in;
    memset(&in, 0, sizeof in);
    in.magic = IB_MAGIC;
    in.version = IB_VERSION;
    in.link = ib->dev.attr.link_layer;
    in.port = (uint8_t)ib->dev.port;
    in.rank = ib->n->rank;
    in.qpn = p->qp->qp_num;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    /* any 24-bit value works; a varying one keeps stale packets of an old QP out */
    in.psn = (uint32_t)((uint64_t)ts.tv_nsec * 2654435761u ^ (uint64_t)p->rank) & 0xffffff;
    in.mtu = ib->dev.attr.active_mtu;
    in.lid = ib->dev.attr.lid;
    in.gid_index = (int16_t)ib->dev.gid_index;
    memcpy(in.gid, ib->dev.gid.raw, 16);
    in.ctrl_addr = (uint64_t)(uintptr_t)ib->ctrl;
    in.ctrl_rkey = ib->ctrl_mr->rkey;
    return in;
}

static mscclrt_result qp_ready(Ib *ib, IbPeer *p, const IbInfo *mine) {
    Net *n = ib->n;
    const IbInfo *r = &p->remote;
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = (enum ibv_mtu)(r->mtu < mine->mtu ? r->mtu : mine->mtu);
    a.dest_qp_num = r->qpn;
    a.rq_psn = r->psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = (uint8_t)ib->dev.port;
    if (ib->dev.attr.link_layer == IBV_LINK_LAYER_ETHERNET) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, r->gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)ib->dev.gid_index;
        a.ah_attr.grh.hop_limit = 255;
    } else {
        a.ah_attr.dlid = r->lid;
    }
    int rc = iv.modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                          IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                          IBV_QP_MIN_RNR_TIMER);
    if (rc != 0)
        return rt_fail(MSCCLRT_ERR_SYSTEM, "net: rank %d: queue pair for rank %d: INIT -> RTR "
                       "(remote QP %u, LID %u): ibv_modify_qp: %s", n->rank, p->rank, r->qpn,
                       r->lid, strerror(rc));
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 18;          /* 4.096 us * 2^18 ~ 1 s per try */
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = mine->psn;
    a.max_rd_atomic = 1;
    rc = iv.modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0)
        return rt_fail(MSCCLRT_ERR_SYSTEM, "net: rank %d: queue pair for rank %d: RTR -> RTS: "
                       "ibv_modify_qp: %s", n->rank, p->rank, strerror(rc));
    return MSCCLRT_SUCCESS;
}

/* Boot errors already name the rank; this adds what the exchange was for. */
static mscclrt_result boot_ctx(mscclrt_result r, Net *n, int q, const char *what) {
    if (r == MSCCLRT_SUCCESS) return r;
    char e[512];
    snprintf(e, sizeof e, "%s", mscclrt_last_error());
    return rt_fail(r, "net: rank %d: %s with rank %d: %s", n->rank, what, q, e);
}

static mscclrt_result check_info(Ib *ib, int q, const IbInfo *r) {
    Net *n = ib->n;
    if (r->magic != IB_MAGIC || r->version != IB_VERSION || r->rank != q)
        return rt_fail(MSCCLRT_ERR_REMOTE, "net: rank %d sent malformed queue-pair info (magic "
                       "0x%x, version %u, rank %d)", q, r->magic, r->version, r->rank);
    if (r->link != ib->dev.attr.link_layer)
        return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "net: rank %d uses an %s port, rank %d an %s "
                       "port: RDMA cannot connect them (set MSCCLRT_IB_HCA)", q,
                       r->link == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand", n->rank,
                       ib->dev.attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet"
                       : "InfiniBand");
    return MSCCLRT_SUCCESS;
}

/* Every peer's ready word, written by RDMA, within the timeout. */
static mscclrt_result ready_check(Ib *ib) {
    Net *n = ib->n;
    for (int q = 0; q < n->nranks; q++) {
        IbPeer *p = ib->peers[q];
        if (p)
            TRY(write_value(ib, p, IB_OP_READY, p->remote.ctrl_addr + (uint64_t)n->rank * 8,
                            p->remote.ctrl_rkey, 1, true));
    }
    double deadline = now_ms() + n->opt.timeout_ms;
    for (int q = 0; q < n->nranks; q++) {
        IbPeer *p = ib->peers[q];
        if (!p) continue;
        while (!__atomic_load_n(&ib->ctrl[q], __ATOMIC_ACQUIRE)) {
            int got = 0;
            TRY(poll_peer(ib, p, &got));
            if (now_ms() > deadline)
                return rt_fail(MSCCLRT_ERR_TIMEOUT, "net: rank %d: rank %d's connection check "
                               "(an RDMA write over %s port %d) did not arrive within %d ms "
                               "(MSCCLRT_NET_TIMEOUT_MS)", n->rank, q, ib->dev.name,
                               ib->dev.port, n->opt.timeout_ms);
            if (!got) sched_yield();
        }
        TRY(drain(ib, p, p->posted, deadline, "connection check"));
    }
    return MSCCLRT_SUCCESS;
}

static void ib_close(Net *n) {
    Ib *ib = ib_of(n);
    if (!ib) return;
    /* regions' MRs belong to the PD: drop them before it (net_destroy's dereg then skips them) */
    pthread_mutex_lock(&n->mu);
    for (int i = 0; i < n->nregs; i++) ib_dereg(n, &n->regs[i]);
    pthread_mutex_unlock(&n->mu);
    for (int q = 0; ib->peers && q < n->nranks; q++) {
        IbPeer *p = ib->peers[q];
        if (!p) continue;
        if (p->qp) iv.destroy_qp(p->qp);
        if (p->cq) iv.destroy_cq(p->cq);
        free(p);
    }
    for (int i = 0; i < ib->nsrc; i++) iv.dereg_mr(ib->src[i].mr);
    if (ib->ctrl_mr) iv.dereg_mr(ib->ctrl_mr);
    if (ib->pd) iv.dealloc_pd(ib->pd);
    if (ib->ctx) iv.close_device(ib->ctx);
    free(ib->src);
    free(ib->ctrl);
    free(ib->peers);
    free(ib);
    n->be_state = NULL;
}

static mscclrt_result open_dev(Ib *ib) {
    Net *n = ib->n;
    int ndev = 0;
    struct ibv_device **list = iv.get_device_list(&ndev);
    for (int i = 0; list && i < ndev && !ib->ctx; i++) {
        const char *name = iv.get_device_name(list[i]);
        if (name && strcmp(name, ib->dev.name) == 0) ib->ctx = iv.open_device(list[i]);
    }
    if (list) iv.free_device_list(list);
    if (!ib->ctx)
        return rt_fail_errno(MSCCLRT_ERR_SYSTEM, "net: rank %d: cannot open RDMA device %s",
                             n->rank, ib->dev.name);
    TRY(ib_dev_gid(n->rank, ib->ctx, &ib->dev));
    ib->pd = iv.alloc_pd(ib->ctx);
    if (!ib->pd)
        return rt_fail_errno(MSCCLRT_ERR_SYSTEM, "net: rank %d: ibv_alloc_pd on %s", n->rank,
                             ib->dev.name);
    ib->ctrl_bytes = (size_t)n->nranks * (IB_DEPTH + 1) * sizeof(uint64_t);
    ib->ctrl = calloc(1, ib->ctrl_bytes);
    if (!ib->ctrl) return rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory");
    ib->ctrl_mr = iv.reg_mr(ib->pd, ib->ctrl, ib->ctrl_bytes, IB_ACCESS);
    if (!ib->ctrl_mr)
        return rt_fail_errno(MSCCLRT_ERR_SYSTEM, "net: rank %d: ibv_reg_mr(control area, %zu "
                             "bytes) on %s", n->rank, ib->ctrl_bytes, ib->dev.name);
    return MSCCLRT_SUCCESS;
}

static mscclrt_result ib_connect(Net *n) {
    TRY(ib_verbs_load());
    if (!n->opt.host_mem) TRY(cu_load());
    Ib *ib = calloc(1, sizeof *ib);
    if (!ib) return rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory");
    n->be_state = ib;
    ib->n = n;
    mscclrt_result res = MSCCLRT_SUCCESS;
    IbInfo *mine = calloc((size_t)n->nranks, sizeof *mine);
    ib->peers = calloc((size_t)n->nranks, sizeof *ib->peers);
    if (!mine || !ib->peers) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory");
        goto fail;
    }
    TRY_GOTO(ib_dev_choose(n->rank, n->opt.host_mem, n->opt.cu_device, &ib->dev), res, fail);
    TRY_GOTO(open_dev(ib), res, fail);
    for (int q = 0; q < n->nranks; q++) {
        if (!n->remote[q]) continue;
        IbPeer *p = calloc(1, sizeof *p);
        if (!p) {
            res = rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory");
            goto fail;
        }
        ib->peers[q] = p;
        p->rank = q;
        TRY_GOTO(qp_create(ib, p), res, fail);
        mine[q] = info_for(ib, p);
    }
    /* sends never block on the bootstrap (queued at the receiver): all sends, then all recvs */
    for (int q = 0; q < n->nranks; q++)
        if (ib->peers[q])
            TRY_GOTO(boot_ctx(boot_send(n->boot, q, IB_TAG, &mine[q], sizeof mine[q]), n, q,
                              "exchanging queue-pair info"), res, fail);
    for (int q = 0; q < n->nranks; q++) {
        IbPeer *p = ib->peers[q];
        if (!p) continue;
        TRY_GOTO(boot_ctx(boot_recv(n->boot, q, IB_TAG, &p->remote, sizeof p->remote), n, q,
                          "exchanging queue-pair info"), res, fail);
        TRY_GOTO(check_info(ib, q, &p->remote), res, fail);
        TRY_GOTO(qp_ready(ib, p, &mine[q]), res, fail);
    }
    uint32_t ok = IB_MAGIC;
    for (int q = 0; q < n->nranks; q++)
        if (ib->peers[q])
            TRY_GOTO(boot_ctx(boot_send(n->boot, q, IB_TAG_RTS, &ok, sizeof ok), n, q,
                              "connecting queue pairs"), res, fail);
    for (int q = 0; q < n->nranks; q++) {
        if (!ib->peers[q]) continue;
        uint32_t got = 0;
        TRY_GOTO(boot_ctx(boot_recv(n->boot, q, IB_TAG_RTS, &got, sizeof got), n, q,
                          "connecting queue pairs"), res, fail);
    }
    TRY_GOTO(ready_check(ib), res, fail);
    {
        char g[48] = "";
        if (ib->dev.gid_index >= 0)
            snprintf(g, sizeof g, ", GID index %d", ib->dev.gid_index);
        LOG_INFO(LOG_SUB_XPORT, "rank %d: ib transport on %s port %d (%s, LID %u%s), %d queue "
                 "pair(s)", n->rank, ib->dev.name, ib->dev.port,
                 ib->dev.attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
                 ib->dev.attr.lid, g, n->nremote);
    }
    free(mine);
    return MSCCLRT_SUCCESS;
fail:
    free(mine);
    ib_close(n);
    return res;
}

bool net_ib_usable(void) {
    if (!ib_verbs_try()) return false;
    IbDev d[8];
    int k = 0;
    return ib_dev_list(d, 8, &k, true) == MSCCLRT_SUCCESS && k > 0;
}

const NetBackend net_ib = {
    .name = "ib",
    .code = NET_BACKEND_IB,
    .connect = ib_connect,
    .close = ib_close,
    .reg = ib_reg,
    .dereg = ib_dereg,
    .put = ib_put,
    .signal = ib_signal,
    .flush = ib_flush,
};

/*
 * net_core.c - the backend-independent half of a Net: which peers are remote, which backend
 * runs (MSCCLRT_NET, else ib when usable on every rank, else socket), the table of local
 * regions peers write into and the table of windows onto peers' regions, and the checks every
 * put and signal passes (window known, range inside the region) before the backend moves a byte.
 */
#include "net/net_internal.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void net_set_error(Net *n, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int expect = 0;
    /* only the first failure is kept: later ones are usually its consequences */
    if (atomic_compare_exchange_strong(&n->failed, &expect, 2)) {
        snprintf(n->err, sizeof n->err, "%s", msg);
        atomic_store_explicit(&n->failed, 1, memory_order_release);
    }
    LOG_WARN("rank %d: %s", n->rank, msg);
}

int net_nsocks_auto(const int *node_of, int nranks, int nnodes) {
    if (nnodes <= 1) return NET_NSOCKS_FEW;
    int *size = calloc((size_t)nnodes, sizeof *size);
    if (!size) return NET_NSOCKS_FEW;
    for (int q = 0; q < nranks; q++)
        if (node_of[q] >= 0 && node_of[q] < nnodes) size[node_of[q]]++;
    int smallest = nranks;
    for (int k = 0; k < nnodes; k++)
        if (size[k] < smallest) smallest = size[k];
    free(size);
    /* the most ranks any rank has on other nodes: every rank computes the same */
    return nranks - smallest <= NET_NSOCKS_WIDE_PEERS ? NET_NSOCKS_MANY : NET_NSOCKS_FEW;
}

mscclrt_result net_check(Net *n) {
    if (atomic_load_explicit(&n->failed, memory_order_acquire) != 1) return MSCCLRT_SUCCESS;
    return rt_fail(MSCCLRT_ERR_REMOTE, "rank %d: %s", n->rank, n->err);
}

static const NetBackend *pick_backend(const char *force, mscclrt_result *res) {
    *res = MSCCLRT_SUCCESS;
    if (force && *force) {
        if (strcmp(force, "socket") == 0) return &net_tcp;
        if (strcmp(force, "ib") == 0) return &net_ib;
        *res = rt_fail(MSCCLRT_ERR_INVALID_ARG, "MSCCLRT_NET='%s': expected 'ib' or 'socket'",
                       force);
        return NULL;
    }
    return net_ib_usable() ? &net_ib : &net_tcp;
}

mscclrt_result net_create(Net **out, Boot *b, const NetOptions *o) {
    *out = NULL;
    Net *n = calloc(1, sizeof *n);
    if (!n) return rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory");
    n->boot = b;
    n->rank = boot_rank(b);
    n->nranks = boot_nranks(b);
    n->opt = *o;
    pthread_mutex_init(&n->mu, NULL);
    atomic_init(&n->failed, 0);
    mscclrt_result res = MSCCLRT_SUCCESS;
    long long v;
    if (n->opt.timeout_ms <= 0) {
        TRY_GOTO(param_int(PARAM_NET_TIMEOUT_MS, &v), res, fail);
        n->opt.timeout_ms = (int)v;
    }
    if (n->opt.nsocks <= 0) {
        TRY_GOTO(param_int(PARAM_SOCKET_NSOCKS, &v), res, fail);
        n->opt.nsocks = (int)v;   /* -1 (auto): net_nsocks_auto below, once the nodes are known */
        if (v == 0) {
            res = rt_fail(MSCCLRT_ERR_INVALID_ARG, "net: MSCCLRT_SOCKET_NSOCKS=0: at least 1 "
                          "socket per peer (or -1, the default: chosen by the layout)");
            goto fail;
        }
    }
    if (n->opt.nsocks > 16) {
        res = rt_fail(MSCCLRT_ERR_INVALID_ARG, "net: %d sockets per peer (at most 16)",
                      n->opt.nsocks);
        goto fail;
    }
    n->remote = calloc((size_t)n->nranks, sizeof *n->remote);
    if (!n->remote) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory");
        goto fail;
    }
    for (int q = 0; q < n->nranks; q++) {
        n->remote[q] = boot_node_of(b, q) != boot_node(b);
        n->nremote += n->remote[q];
    }
    if (n->opt.nsocks < 0) {
        int *node_of = malloc(sizeof *node_of * (size_t)n->nranks);
        if (!node_of) {
            res = rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory");
            goto fail;
        }
        for (int q = 0; q < n->nranks; q++) node_of[q] = boot_node_of(b, q);
        n->opt.nsocks = net_nsocks_auto(node_of, n->nranks, boot_nnodes(b));
        free(node_of);
    }
    const char *force = o->force ? o->force : param_str(PARAM_NET);
    n->be = pick_backend(force, &res);
    if (!n->be) goto fail;
    if (!(force && *force) && n->nremote) {
        /* the automatic choice must agree everywhere (nodes may differ in hardware): ib only
         * when every rank can use it, else the two ends would wait on different handshakes */
        uint8_t *can = calloc((size_t)n->nranks, 1);
        if (!can) {
            res = rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory");
            goto fail;
        }
        can[n->rank] = n->be == &net_ib;
        res = boot_allgather(b, can, 1);
        int without = -1;
        for (int q = 0; q < n->nranks && res == MSCCLRT_SUCCESS; q++)
            if (!can[q] && without < 0) without = q;
        free(can);
        if (res != MSCCLRT_SUCCESS) goto fail;
        if (without >= 0 && n->be == &net_ib)
            LOG_INFO(LOG_SUB_XPORT, "rank %d: RDMA is usable here but not on rank %d: socket "
                     "transport", n->rank, without);
        if (without >= 0) n->be = &net_tcp;
    }
    n->wins = calloc(16, sizeof *n->wins);
    n->capwins = 16;
    n->nwins = 1;   /* index 0 is never a window */
    if (!n->wins) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory");
        goto fail;
    }
    if (n->nremote) {
        if (!n->opt.host_mem) net_topo_log_gpu(n->rank, n->opt.cu_device);
        TRY_GOTO(n->be->connect(n), res, fail);
        LOG_INFO(LOG_SUB_XPORT, "rank %d: %s transport connected to %d rank(s) on other nodes",
                 n->rank, n->be->name, n->nremote);
    }
    *out = n;
    return MSCCLRT_SUCCESS;
fail:
    free(n->wins);
    free(n->remote);
    pthread_mutex_destroy(&n->mu);
    free(n);
    return res;
}

void net_destroy(Net *n) {
    if (!n) return;
    if (n->be_state) n->be->close(n);
    for (int i = 0; i < n->nregs; i++)
        if (n->regs[i].owner && n->be->dereg) n->be->dereg(n, &n->regs[i]);
    free(n->regs);
    free(n->hsrc);
    free(n->wins);
    free(n->remote);
    pthread_mutex_destroy(&n->mu);
    free(n);
}

const char *net_backend_name(const Net *n) { return n->be->name; }

int net_remote_count(const Net *n) { return n ? n->nremote : 0; }

bool net_peer_remote(const Net *n, int peer) {
    return n && peer >= 0 && peer < n->nranks && n->remote[peer];
}

bool net_region_addr(Net *n, uint32_t id, uint64_t off, uint64_t len, uint64_t *addr, bool *host) {
    pthread_mutex_lock(&n->mu);
    bool ok = net_region_span(n->regs, (uint32_t)n->nregs, id, off, len, addr);
    if (ok && host) *host = n->regs[id - 1].host;   /* net_region_span checked the id */
    pthread_mutex_unlock(&n->mu);
    return ok;
}

bool net_stages_device(const Net *n) {
    return n && n->be->code == NET_BACKEND_SOCKET && !n->opt.host_mem;
}

static mscclrt_result reg_region(Net *n, const void *owner, uint64_t base, size_t bytes, bool host,
                                 NetMemDesc *d) {
    if (!owner) return rt_fail(MSCCLRT_ERR_INTERNAL, "net_reg: no owner");
    pthread_mutex_lock(&n->mu);
    int slot = -1;
    for (int i = 0; i < n->nregs && slot < 0; i++)
        if (!n->regs[i].owner) slot = i;
    if (slot < 0) {
        if (n->nregs == n->capregs) {
            int cap = n->capregs ? n->capregs * 2 : 16;
            NetRegion *r = realloc(n->regs, (size_t)cap * sizeof *r);
            if (!r) {
                pthread_mutex_unlock(&n->mu);
                return rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory for regions");
            }
            n->regs = r;
            n->capregs = cap;
        }
        slot = n->nregs++;
        n->regs[slot].owner = NULL;
    }
    /* the backend's registration (ib: an MR) runs under the lock: setups are rare, and the
     * receive threads that look regions up must never see a half-made one */
    NetRegion reg = {.owner = owner, .base = base, .bytes = bytes, .mr = NULL, .host = host};
    if (n->be->reg) {
        mscclrt_result r = n->be->reg(n, &reg);
        if (r != MSCCLRT_SUCCESS) {
            if (slot == n->nregs - 1) n->nregs--;
            pthread_mutex_unlock(&n->mu);
            return r;
        }
    }
    n->regs[slot] = reg;
    pthread_mutex_unlock(&n->mu);
    memset(d, 0, sizeof *d);
    d->magic = NET_DESC_MAGIC;
    d->version = NET_DESC_VERSION;
    d->backend = (uint16_t)n->be->code;
    d->owner = n->rank;
    d->id = (uint32_t)slot + 1;
    d->addr = base;
    d->bytes = bytes;
    d->rkey = reg.rkey;
    return MSCCLRT_SUCCESS;
}

mscclrt_result net_reg(Net *n, const void *owner, uint64_t base, size_t bytes, NetMemDesc *d) {
    return reg_region(n, owner, base, bytes, false, d);
}

mscclrt_result net_reg_host(Net *n, const void *owner, uint64_t base, size_t bytes, NetMemDesc *d) {
    /* a source too: puts from it (a plan's packets to another node) go unstaged; net_release
     * drops both registrations with their owner */
    TRY(net_reg_host_src(n, owner, base, bytes));
    const mscclrt_result r = reg_region(n, owner, base, bytes, true, d);
    if (r != MSCCLRT_SUCCESS) {
        pthread_mutex_lock(&n->mu);
        for (int i = 0; i < n->nhsrc; i++)
            if (n->hsrc[i].owner == owner && n->hsrc[i].base == base) n->hsrc[i].owner = NULL;
        pthread_mutex_unlock(&n->mu);
    }
    return r;
}

mscclrt_result net_import(Net *n, const void *owner, int peer, const NetMemDesc *d,
                          uint64_t *window) {
    *window = 0;
    if (d->magic != NET_DESC_MAGIC || d->version != NET_DESC_VERSION)
        return rt_fail(MSCCLRT_ERR_REMOTE, "net: rank %d sent a malformed memory descriptor "
                       "(magic 0x%x, version %u)", peer, d->magic, d->version);
    if (d->id == 0)
        return rt_fail(MSCCLRT_ERR_REMOTE, "net: rank %d sent a memory descriptor of region 0 "
                       "(region ids start at 1)", peer);
    if (d->owner != peer)
        return rt_fail(MSCCLRT_ERR_REMOTE, "net: rank %d sent a memory descriptor of rank %d",
                       peer, d->owner);
    if (d->backend != n->be->code)
        return rt_fail(MSCCLRT_ERR_REMOTE, "net: rank %d uses another network transport than "
                       "this rank's %s (set MSCCLRT_NET alike on every rank)", peer, n->be->name);
    if (d->bytes > NET_WIN_OFF_MASK)
        return rt_fail(MSCCLRT_ERR_REMOTE, "net: rank %d registered %llu bytes (a window holds "
                       "at most 1 TiB)", peer, (unsigned long long)d->bytes);
    if (!net_peer_remote(n, peer))
        return rt_fail(MSCCLRT_ERR_INTERNAL, "net: rank %d is not on another node", peer);
    pthread_mutex_lock(&n->mu);
    int slot = -1;
    for (int i = 1; i < n->nwins && slot < 0; i++)
        if (!n->wins[i].owner) slot = i;
    if (slot < 0) {
        if (n->nwins > NET_WIN_MAX) {
            pthread_mutex_unlock(&n->mu);
            return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "net: rank %d has %d windows onto peers' "
                           "memory open (contexts with port channels to other nodes); at most "
                           "%d", n->rank, NET_WIN_MAX, NET_WIN_MAX);
        }
        if (n->nwins == n->capwins) {
            NetWindow *w = realloc(n->wins, (size_t)n->capwins * 2 * sizeof *w);
            if (!w) {
                pthread_mutex_unlock(&n->mu);
                return rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory for windows");
            }
            n->wins = w;
            n->capwins *= 2;
        }
        slot = n->nwins++;
    }
    n->wins[slot] = (NetWindow){.owner = owner, .peer = peer, .id = d->id, .addr = d->addr,
                                .bytes = d->bytes, .rkey = d->rkey};
    pthread_mutex_unlock(&n->mu);
    *window = NET_WIN_TAG | ((uint64_t)slot << NET_WIN_OFF_BITS);
    return MSCCLRT_SUCCESS;
}

mscclrt_result net_reg_host_src(Net *n, const void *owner, uint64_t addr, size_t bytes) {
    if (!owner || !addr || !bytes)
        return rt_fail(MSCCLRT_ERR_INTERNAL, "net_reg_host_src: no owner, address or length");
    pthread_mutex_lock(&n->mu);
    int slot = -1;
    for (int i = 0; i < n->nhsrc && slot < 0; i++)
        if (!n->hsrc[i].owner) slot = i;
    if (slot < 0 && n->nhsrc == n->caphsrc) {
        int cap = n->caphsrc ? n->caphsrc * 2 : 4;
        struct NetHostSrc *h = realloc(n->hsrc, (size_t)cap * sizeof *h);
        if (!h) {
            pthread_mutex_unlock(&n->mu);
            return rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory for host sources");
        }
        n->hsrc = h;
        n->caphsrc = cap;
    }
    if (slot < 0) slot = n->nhsrc++;
    n->hsrc[slot] = (struct NetHostSrc){.owner = owner, .base = addr, .bytes = bytes};
    pthread_mutex_unlock(&n->mu);
    return MSCCLRT_SUCCESS;
}

bool net_host_src(Net *n, uint64_t src, uint64_t bytes) {
    if (!n) return false;
    bool in = false;
    pthread_mutex_lock(&n->mu);
    for (int i = 0; i < n->nhsrc && !in; i++) {
        const struct NetHostSrc *h = &n->hsrc[i];
        in = h->owner && src >= h->base && bytes <= h->bytes && src - h->base <= h->bytes - bytes;
    }
    pthread_mutex_unlock(&n->mu);
    return in;
}

void net_release(Net *n, const void *owner) {
    if (!n || !owner) return;
    pthread_mutex_lock(&n->mu);
    for (int i = 0; i < n->nhsrc; i++)
        if (n->hsrc[i].owner == owner) n->hsrc[i].owner = NULL;
    for (int i = 1; i < n->nwins; i++)
        if (n->wins[i].owner == owner) n->wins[i].owner = NULL;
    for (int i = 0; i < n->nregs; i++) {
        if (n->regs[i].owner != owner) continue;
        if (n->be->dereg) n->be->dereg(n, &n->regs[i]);
        n->regs[i].owner = NULL;
    }
    pthread_mutex_unlock(&n->mu);
}

/* The window of a trigger's address and the offset into it, checked against len bytes. */
static mscclrt_result window_of(Net *n, uint64_t addr, uint64_t len, const char *op,
                                NetWindow *w, uint64_t *off) {
    uint64_t idx = (addr & ~NET_WIN_TAG) >> NET_WIN_OFF_BITS;
    *off = addr & NET_WIN_OFF_MASK;
    pthread_mutex_lock(&n->mu);
    bool ok = net_is_window(addr) && idx >= 1 && idx < (uint64_t)n->nwins && n->wins[idx].owner;
    if (ok) *w = n->wins[idx];
    pthread_mutex_unlock(&n->mu);
    if (!ok)
        return rt_fail(MSCCLRT_ERR_INTERNAL, "net: %s to 0x%llx, which is no open window onto "
                       "a peer's memory", op, (unsigned long long)addr);
    if (*off > w->bytes || len > w->bytes - *off)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "net: %s of %llu bytes at offset %llu of rank "
                       "%d's region %u, which has %llu bytes", op, (unsigned long long)len,
                       (unsigned long long)*off, w->peer, w->id, (unsigned long long)w->bytes);
    return MSCCLRT_SUCCESS;
}

mscclrt_result net_put(Net *n, uint64_t dst, uint64_t src, uint64_t bytes) {
    TRY(net_check(n));
    NetWindow w;
    uint64_t off;
    TRY(window_of(n, dst, bytes, "put", &w, &off));
    if (!bytes) return MSCCLRT_SUCCESS;
    return n->be->put(n, &w, off, src, bytes);
}

/* The window and offset of a signal's 8 bytes at dst, which must be 8-byte aligned */
static mscclrt_result signal_window(Net *n, uint64_t dst, NetWindow *w, uint64_t *off) {
    TRY(window_of(n, dst, 8, "signal", w, off));
    if (*off % 8)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "net: signal to offset %llu of rank %d's region "
                       "%u is not 8-byte aligned", (unsigned long long)*off, w->peer, w->id);
    return MSCCLRT_SUCCESS;
}

mscclrt_result net_signal(Net *n, uint64_t dst, uint64_t value) {
    TRY(net_check(n));
    NetWindow w;
    uint64_t off;
    TRY(signal_window(n, dst, &w, &off));
    return n->be->signal(n, &w, off, value);
}

mscclrt_result net_put_signal(Net *n, uint64_t dst, uint64_t src, uint64_t bytes, uint64_t sig,
                              uint64_t value) {
    TRY(net_check(n));
    NetWindow w, sw;
    uint64_t off, soff;
    TRY(window_of(n, dst, bytes, "put", &w, &off));
    TRY(signal_window(n, sig, &sw, &soff));
    if (bytes && w.peer == sw.peer && n->be->put_signal)
        return n->be->put_signal(n, &w, off, src, bytes, &sw, soff, value);
    if (bytes) TRY(n->be->put(n, &w, off, src, bytes));
    return n->be->signal(n, &sw, soff, value);
}

uint64_t net_put_signal_max(const Net *n) {
    return n->be->put_signal_max ? n->be->put_signal_max(n) : 0;
}

mscclrt_result net_flush(Net *n) {
    TRY(net_check(n));
    if (!n->nremote) return MSCCLRT_SUCCESS;
    return n->be->flush(n);
}

mscclrt_result net_flush_sources(Net *n) {
    TRY(net_check(n));
    if (!n->nremote) return MSCCLRT_SUCCESS;
    return n->be->flush_sources ? n->be->flush_sources(n) : n->be->flush(n);
}

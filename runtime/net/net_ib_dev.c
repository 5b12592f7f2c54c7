/*
 * net_ib_dev.c - which RDMA device, port and GID a rank uses. Candidates are the (device, port)
 * pairs that pass MSCCLRT_IB_HCA (NCCL's syntax, net_match.c) and whose port is ACTIVE; a GPU
 * rank takes the one nearest its GPU in the PCI topology (net_topo.c), spreading GPUs over NICs
 * that are equally near. InfiniBand ports are addressed by LID; Ethernet (RoCE) ports by a GID,
 * chosen as NCCL does (RoCEv2 over IPv4 first) unless MSCCLRT_IB_GID_INDEX names one.
 */
#include "net/net_ib.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "cuda/cuda_driver.h"

#include <stdio.h>
#include <string.h>

#define IB_MAX_DEVS 64

static bool gid_zero(const union ibv_gid *g) {
    static const uint8_t z[16];
    return memcmp(g->raw, z, 16) == 0;
}

/* ::ffff:a.b.c.d */
static bool gid_v4mapped(const union ibv_gid *g) {
    static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(g->raw, pre, 12) == 0;
}

static bool gid_linklocal(const union ibv_gid *g) {
    return g->raw[0] == 0xfe && (g->raw[1] & 0xc0) == 0x80;
}

int ib_pick_gid(const IbGidInfo *g, int n) {
    /* scored: a higher class wins, the lowest index among equals */
    int best = -1, best_score = 0;
    for (int i = 0; i < n; i++) {
        if (gid_zero(&g[i].gid)) continue;
        bool v2 = g[i].type == IBV_GID_TYPE_ROCE_V2;
        int score = v2 && gid_v4mapped(&g[i].gid) ? 4
                  : v2 && !gid_linklocal(&g[i].gid) ? 3
                  : gid_v4mapped(&g[i].gid) ? 2 : 1;
        if (score > best_score) best = i, best_score = score;
    }
    return best;
}

mscclrt_result ib_dev_list(IbDev *out, int max, int *count, bool quiet) {
    *count = 0;
    NetMatchList hca;
    mscclrt_result r = net_match_parse("MSCCLRT_IB_HCA", param_str(PARAM_IB_HCA), &hca);
    if (r != MSCCLRT_SUCCESS) return quiet ? MSCCLRT_SUCCESS : r;
    int ndev = 0;
    struct ibv_device **list = iv.get_device_list(&ndev);
    if (!list) return MSCCLRT_SUCCESS;   /* no devices (or no driver): no candidates */
    int k = 0;
    for (int i = 0; i < ndev && k < max; i++) {
        const char *name = iv.get_device_name(list[i]);
        if (!name || strlen(name) >= sizeof out[0].name) continue;
        struct ibv_context *c = iv.open_device(list[i]);
        if (!c) {
            if (!quiet) LOG_INFO(LOG_SUB_XPORT, "ib: cannot open %s; skipped", name);
            continue;
        }
        struct ibv_device_attr da;
        memset(&da, 0, sizeof da);
        int nports = iv.query_device(c, &da) == 0 ? da.phys_port_cnt : 0;
        for (int p = 1; p <= nports && k < max; p++) {
            if (!net_match(&hca, name, p)) continue;
            IbDev *d = &out[k];
            memset(d, 0, sizeof *d);
            if (iv.query_port(c, (uint8_t)p, &d->attr) != 0) continue;
            if (d->attr.state != IBV_PORT_ACTIVE) {
                if (!quiet) LOG_INFO(LOG_SUB_XPORT, "ib: %s port %d is not active; skipped",
                                     name, p);
                continue;
            }
            snprintf(d->name, sizeof d->name, "%s", name);
            d->port = p;
            d->gid_index = -1;
            k++;
        }
        iv.close_device(c);
    }
    iv.free_device_list(list);
    /* name order, so every rank of a node sees the same list (stable insertion sort) */
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && strcmp(out[j - 1].name, out[j].name) > 0; j--) {
            IbDev t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    *count = k;
    return MSCCLRT_SUCCESS;
}

/* PCI address of CUDA device ordinal dev ("dddd:bb:dd.0"); false when CUDA cannot tell. */
static bool gpu_pci(int dev, char *buf, size_t len) {
    CuDevice d;
    return cu_load() == MSCCLRT_SUCCESS && cu.cuDeviceGet(&d, dev) == CU_OK &&
           cu_device_pci(d, buf, len);
}

mscclrt_result ib_dev_choose(int rank, bool host_mem, int cu_device, IbDev *d) {
    static IbDev cand[IB_MAX_DEVS];   /* large: not on the stack; serialised below */
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    int n = 0;
    mscclrt_result r = ib_dev_list(cand, IB_MAX_DEVS, &n, false);
    if (r == MSCCLRT_SUCCESS && n == 0)
        r = rt_fail(MSCCLRT_ERR_UNAVAILABLE, "net: rank %d: no RDMA device with an active port "
                    "passes MSCCLRT_IB_HCA='%s' (%s); use MSCCLRT_NET=socket", rank,
                    param_str(PARAM_IB_HCA), iv.path);
    if (r != MSCCLRT_SUCCESS) {
        pthread_mutex_unlock(&mu);
        return r;
    }
    int pick = 0;
    char gpu[32];
    if (!host_mem && n > 1 && gpu_pci(cu_device, gpu, sizeof gpu)) {
        const char *root = net_sysfs_root();
        NetNic nics[IB_MAX_DEVS];
        int nn = 0;
        net_topo_nics(root, NET_NIC_IB, NULL, nics, IB_MAX_DEVS, &nn);
        NetDist dist[IB_MAX_DEVS], best = NET_DIST_FAR;
        for (int i = 0; i < n; i++) {
            dist[i] = NET_DIST_FAR;
            for (int j = 0; j < nn; j++)
                if (strcmp(nics[j].name, cand[i].name) == 0 && nics[j].pci[0])
                    dist[i] = net_topo_dist(root, gpu, &nics[j]);
            if (dist[i] < best) best = dist[i];
        }
        /* GPUs with several equally near ports spread over them by device ordinal */
        int ties = 0;
        for (int i = 0; i < n; i++) ties += dist[i] == best;
        int want = cu_device % (ties ? ties : 1);
        for (int i = 0; i < n; i++)
            if (dist[i] == best && want-- == 0) pick = i;
        LOG_INFO(LOG_SUB_XPORT, "rank %d: GPU %d (%s): RDMA device %s port %d (%s)", rank,
                 cu_device, gpu, cand[pick].name, cand[pick].port, net_dist_name(best));
    }
    *d = cand[pick];
    pthread_mutex_unlock(&mu);
    return MSCCLRT_SUCCESS;
}

mscclrt_result ib_dev_gid(int rank, struct ibv_context *ctx, IbDev *d) {
    d->gid_index = -1;
    if (d->attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
        if (d->attr.lid == 0)
            return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "net: rank %d: %s port %d is InfiniBand "
                           "but has no LID (is a subnet manager running?)", rank, d->name,
                           d->port);
        return MSCCLRT_SUCCESS;
    }
    long long want = -1;
    TRY(param_int(PARAM_IB_GID_INDEX, &want));
    int n = d->attr.gid_tbl_len;
    if (want >= 0) {
        if (want >= n)
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "net: rank %d: MSCCLRT_IB_GID_INDEX=%lld but "
                           "%s port %d has %d GIDs", rank, want, d->name, d->port, n);
        if (iv.query_gid(ctx, (uint8_t)d->port, (int)want, &d->gid) != 0 || gid_zero(&d->gid))
            return rt_fail(MSCCLRT_ERR_INVALID_ARG, "net: rank %d: MSCCLRT_IB_GID_INDEX=%lld: "
                           "%s port %d has no GID there", rank, want, d->name, d->port);
        d->gid_index = (int)want;
        return MSCCLRT_SUCCESS;
    }
    if (n > 256) n = 256;
    IbGidInfo g[256];
    for (int i = 0; i < n; i++) {
        memset(&g[i], 0, sizeof g[i]);
        g[i].type = -1;
        struct ibv_gid_entry e;
        if (iv.query_gid_ex && iv.query_gid_ex(ctx, (uint32_t)d->port, (uint32_t)i, &e, 0,
                                               sizeof e) == 0) {
            g[i].gid = e.gid;
            g[i].type = (int)e.gid_type;
        } else if (iv.query_gid(ctx, (uint8_t)d->port, i, &g[i].gid) != 0) {
            memset(&g[i].gid, 0, sizeof g[i].gid);
        }
    }
    int pick = ib_pick_gid(g, n);
    if (pick < 0)
        return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "net: rank %d: RoCE port %s:%d has no GID "
                       "(no IP address on its interface?)", rank, d->name, d->port);
    d->gid_index = pick;
    d->gid = g[pick].gid;
    LOG_INFO(LOG_SUB_XPORT, "rank %d: %s port %d: RoCE GID index %d (%s)", rank, d->name,
             d->port, pick, g[pick].type == IBV_GID_TYPE_ROCE_V2 ? "RoCEv2"
             : g[pick].type < 0 ? "type unknown" : "RoCEv1");
    return MSCCLRT_SUCCESS;
}

/*
 * algo_native_net.c - the native context's areas for peers on other nodes, in pinned host
 * memory the GPU maps, as NCCL keeps its network buffers where there is no GPUDirect RDMA: a
 * kernel writes its outgoing packets (and, MSCCLRT_NATIVE_NET_SLOT_HOST, its Simple pieces)
 * there for the proxy to send as they are, and the network receives a peer's straight into this
 * rank's incoming areas, which the kernel reads through the mapping. A packet then has no
 * copy-engine round trip on its way (its flags say it arrived, so no signal follows it either):
 * across two nodes a send/recv of 1 KiB took 59 us while it went through device memory and
 * takes 44 (NCCL 44; nvidia-h100-x2, loopback TCP, c18). The Simple pieces' data signals and
 * acknowledgements from other nodes land in host counters the same way: the receive thread
 * stores each value there itself, where a counter in device memory costs it a
 * cuStreamWriteValue64 per signal.
 */
#include "algo/algo_native_net.h"
#include "bootstrap/bootstrap.h"
#include "core/err.h"
#include "core/log.h"
#include "net/net.h"

#include <string.h>

/* bootstrap tags of the incoming areas' descriptors: "NP" packets, "NS" Simple slots, "NC"
 * counters */
static const int area_tag[] = {0x4e50, 0x4e53, 0x4e43};
static const char *const area_name[] = {"packet slots", "Simple slots", "signal counters"};
/* what each area holds, for the log line when it stays in device memory: [kind][incoming] */
static const char *const area_what[][2] = {
    {"outgoing packets to other nodes", "packets from other nodes"},
    {"outgoing pieces to other nodes", "pieces from other nodes"},
    {"", "signals from other nodes"},
};

/* `bytes` of zeroed pinned host memory the GPU maps at the same address, or 0 (logged: `what`
 * then stay in device memory) */
static CuDevPtr host_area(const mscclrt_comm *c, uint64_t bytes, const char *what) {
    char why[96];
    const CuDevPtr d = exec_host_mapped_alloc((size_t)bytes, why, sizeof why);
    if (!d)
        LOG_INFO(LOG_SUB_INIT, "rank %d: %s stay in device memory (pinned host memory: %s)",
                 c->rank, what, why);
    return d;
}

mscclrt_result native_net_host_out(mscclrt_comm *c, ExecCtx *x, NativeNetArea kind, uint64_t bytes,
                                   void **host) {
    if (*host || !x->net || bytes > NATIVE_NET_HOST_MAX) return MSCCLRT_SUCCESS;
    const CuDevPtr d = host_area(c, bytes, area_what[kind][0]);
    if (!d) return MSCCLRT_SUCCESS;
    const mscclrt_result res = net_reg_host_src(x->net, x, (uint64_t)d, (size_t)bytes);
    if (res == MSCCLRT_SUCCESS) *host = (void *)(uintptr_t)d;
    else cu.cuMemFreeHost((void *)(uintptr_t)d);
    return res;
}

/* This rank's incoming area: registered host memory and its descriptor, or none (d zeroed) */
static mscclrt_result host_in_alloc(mscclrt_comm *c, ExecCtx *x, NativeNetArea kind, uint64_t bytes,
                                    void **host, NetMemDesc *d) {
    const CuDevPtr h = host_area(c, bytes, area_what[kind][1]);
    if (!h) return MSCCLRT_SUCCESS;
    const mscclrt_result res = net_reg_host(x->net, x, (uint64_t)h, (size_t)bytes, d);
    if (res == MSCCLRT_SUCCESS) {
        *host = (void *)(uintptr_t)h;
    } else {
        cu.cuMemFreeHost((void *)(uintptr_t)h);
        memset(d, 0, sizeof *d);
    }
    return res;
}

mscclrt_result native_net_host_in(mscclrt_comm *c, ExecCtx *x, NativeNetArea kind, uint64_t bytes,
                                  bool want, void **host, uint64_t *win) {
    const int n = c->nranks, r = c->rank;
    *host = NULL;
    if (!x->net || !c->boot || !net_remote_count(x->net)) return MSCCLRT_SUCCESS;
    NetMemDesc mine;
    memset(&mine, 0, sizeof mine);
    /* a failure here still takes part in the exchange (an empty descriptor), so the peers do
     * not wait for it; it is reported after */
    mscclrt_result res = MSCCLRT_SUCCESS;
    if (want && bytes && bytes <= NATIVE_NET_HOST_MAX && net_stages_device(x->net))
        res = host_in_alloc(c, x, kind, bytes, host, &mine);
    /* in n - 1 steps, to rank r + s and from rank r - s, those on other nodes only */
    for (int s = 1; s < n; s++) {
        const int to = (r + s) % n, q = (r - s + n) % n;
        /* a bootstrap failure ends the exchange (each further step would wait its timeout) */
        if (net_peer_remote(x->net, to)) {
            const mscclrt_result sr = boot_send(c->boot, to, area_tag[kind], &mine, sizeof mine);
            if (sr != MSCCLRT_SUCCESS) return sr;
        }
        if (!net_peer_remote(x->net, q)) continue;
        NetMemDesc theirs;
        const mscclrt_result rr = boot_recv(c->boot, q, area_tag[kind], &theirs, sizeof theirs);
        if (rr != MSCCLRT_SUCCESS) return rr;
        if (theirs.bytes) {   /* empty: q keeps its scratch's slots */
            if (theirs.bytes < bytes) {
                if (res == MSCCLRT_SUCCESS)
                    res = rt_fail(MSCCLRT_ERR_INTERNAL, "rank %d: rank %d's incoming %s hold "
                                  "%llu bytes, the layout needs %llu", r, q, area_name[kind],
                                  (unsigned long long)theirs.bytes, (unsigned long long)bytes);
                continue;
            }
            uint64_t w = 0;
            const mscclrt_result ir = net_import(x->net, x, q, &theirs, &w);
            if (res == MSCCLRT_SUCCESS) res = ir;
            win[q] = ir == MSCCLRT_SUCCESS ? w : 0;
        }
    }
    if (res == MSCCLRT_SUCCESS && *host)
        LOG_INFO(LOG_SUB_INIT, "rank %d: incoming %s for other nodes in pinned host memory "
                 "(%llu bytes)", r, area_name[kind], (unsigned long long)bytes);
    return res;
}

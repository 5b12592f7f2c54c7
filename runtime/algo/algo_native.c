/*
 * algo_native.c - native algorithms on a communicator: the context they share (set up once,
 * when the communicator is made: a scratch buffer on every rank that every peer maps, laid out
 * as kernels/native_abi.h says), their kernels (NVRTC, once per source, kernel, dtype and
 * operator, through the kernel cache) and their launches on the caller's stream.
 *
 * The context rides on the executor: a synthetic plan whose every rank reaches every peer's
 * scratch and nothing else, so the executor's collective setup (one process: the group's setup
 * round; one process per rank: the bootstrap and CUDA IPC) allocates the scratch and fills the
 * peer table; this file only turns that table into an MnContext in device memory.
 */
#include "algo/algo.h"
#include "algo/algo_native.h"
#include "algo/algo_native_net.h"
#include "algo/algo_probe.h"
#include "bootstrap/bootstrap.h"
#include "codegen/codegen.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "exec/exec.h"
#include "net/net.h"
#include "peermem/peermem.h"
#include "proxy/proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct NativeKernel {
    const char *source;            /* key: the algorithm's source (NULL: the built-in file) */
    const char *kernel;            /* key */
    int dtype, op;                 /* key; -1 when the kernel does not depend on them */
    CuModule module;
    CuFunction fn;
    struct NativeKernel *next;
} NativeKernel;

struct NativeCtx {
    Plan *plan;                    /* owned: the synthetic plan of the context */
    ExecCtx *x;                    /* borrowed from the comm's context list */
    CuDevPtr dctx;                 /* MnContext followed by the peers' scratch bases */
    MnContext host;                /* what dctx holds */
    NativeKernel *kernels;
    PeerMem *pm;                   /* users' allocations shared with peers (NULL: no direct path) */
    PmLocalRank local;             /* pm's ops context in a group of one process */
    bool *reach;                   /* [nranks]: the kernels reach this rank (mapped, a window) */
    bool reach_all;                /* every rank (native_publish) */
    mscclrt_algo *net[MSCCLRT_COLL_COUNT]; /* across nodes: the built-in collectives as the
                                     fallback of algo_coll.c (not candidates), made on first use */
    uint64_t probe;                /* MSCCLRT_NATIVE_PROBE's ring (algo_probe.c), else 0 */
    void *pk_host;                 /* pinned host memory of the outgoing packets to other
                                     nodes (MnContext.pk_out), or NULL */
    void *pk_in_host;              /* pinned host memory of the incoming packets from other
                                     nodes (MnContext.pk_in_host), or NULL */
    void *slot_in_host;            /* pinned host memory of the incoming Simple pieces from other
                                     nodes (MnContext.slot_in_host), or NULL */
    void *slot_out_host;           /* ... of the outgoing ones (MnContext.slot_out), or NULL */
    void *ctr_in_host;             /* pinned host memory of the data and ack counters for
                                     senders on other nodes (MnContext.ctr_in_host), or NULL */
    uint64_t direct_min;           /* MSCCLRT_NATIVE_DIRECT_BYTES */
    uint64_t p2p_direct_min;       /* MSCCLRT_NATIVE_P2P_DIRECT_BYTES */
    bool p2p_pk_batch;             /* MSCCLRT_NATIVE_P2P_PK_BATCH */
    int p2p_direct_blocks;         /* MSCCLRT_NATIVE_P2P_DIRECT_BLOCKS (0: the group grid) */
    int direct_blocks;             /* MSCCLRT_NATIVE_DIRECT_BLOCKS */
};

/* the kernels tell a window from a mapping by its top byte (mscclrt_native.cuh Ctx::remote) */
_Static_assert(MN_WINDOW_TOP == NET_WIN_TAG >> 56, "native_abi.h MN_WINDOW_TOP is net.h's tag");

static const char BUILTIN_SOURCE[] = "#include \"native_builtin.cuh\"\n";
/* the direct kernel's module: its slot path inlined, no other kernel */
static const char DIRECT_SOURCE[] = "#define MSCCLRT_NATIVE_LIB_ONLY 1\n#include \"native_direct.cuh\"\n";

/* ---- the context -------------------------------------------------------------------------- */
/* node[q]: rank q's node (NULL: one node). A rank maps the scratch of the ranks of its own
 * node (CUDA IPC); with port (true) it reaches the others' through port channels, whose
 * windows and proxy the executor's setup makes as for any plan: send/recv across nodes. */
static Plan *native_plan(int n, uint64_t scratch, const int *node, bool port) {
    Plan *p = plan_new("mscclrt-native-context", PLAN_COLL_CUSTOM, n);
    if (!p) return NULL;
    p->max_size = scratch;          /* one input chunk of max_size bytes: scratch = max_size */
    p->alignment = 256;
    p->scratch_device = true;       /* counters live in it (native_abi.h) */
    for (int r = 0; r < n; r++) {
        PlanGpu *g = &p->gpus[r];
        g->input_chunks = g->output_chunks = g->scratch_chunks = 1;
        for (int q = 0; q < n; q++)
            if (q != r && (!node || node[q] == node[r] || port) &&
                plan_gpu_add_remote(g, q, PLAN_BUF_SCRATCH, !node || node[q] == node[r]
                                    ? PLAN_CHAN_MEMORY : PLAN_CHAN_PORT) < 0) {
                plan_free(p);
                return NULL;
            }
    }
    return p;
}

/* Bytes of the counter arrays of one kind: u64[MN_MAX_BLOCKS][n]. */
static uint64_t ctr_bytes(int n) { return (uint64_t)MN_MAX_BLOCKS * (uint64_t)n * 8; }

/* Where the packet slots start: after 4 arrays of Simple counters, 3 of packet counters and
 * one array's room for the direct path's counts. */
static uint64_t pk_offset(int n) { return (8 * ctr_bytes(n) + 255) / 256 * 256; }

uint64_t native_pk_slot_bytes(int n, uint64_t scratch) {
    /* packet slots take at most a quarter of the scratch: many ranks get smaller ones, and
     * below 256 bytes none (the slot-based protocol carries everything) */
    const uint64_t per = scratch / 4 / ((uint64_t)MN_MAX_BLOCKS * (uint64_t)n * 2) / 256 * 256;
    return per >= MN_PK_SLOT_BYTES ? MN_PK_SLOT_BYTES : per;
}

/* Bytes of the direct kernels' lanes (counters and record slots), 256-aligned; none beyond
 * MN_DIRECT_MAX_RANKS ranks, where there is no direct path. */
static uint64_t lane_bytes(int n) {
    if (n > MN_DIRECT_MAX_RANKS) return 0;
    const uint64_t b = (uint64_t)MN_LANE_CTRS * MN_DIRECT_BLOCKS * (uint64_t)n * 8 +
                       (uint64_t)MN_DIRECT_BLOCKS * (uint64_t)n * 2 * MN_LANE_REC_BYTES;
    return (b + 255) / 256 * 256;
}

/* One packet area: a slot per (block, peer, half); the layout of native_slot_bytes and the
 * offsets native_publish gives the kernels both come from it */
static uint64_t pk_area_bytes(int n, uint64_t scratch) {
    return (uint64_t)MN_MAX_BLOCKS * (uint64_t)n * 2 * native_pk_slot_bytes(n, scratch);
}

uint64_t native_slot_bytes(int n, uint64_t scratch, bool net, uint64_t *off_slots) {
    /* net: a second packet area, the outgoing packets to peers on other nodes (pk_out, where
     * they do not go to pinned host memory) */
    const uint64_t pk = pk_area_bytes(n, scratch) * (net ? 2 : 1);
    const uint64_t slots = pk_offset(n) + pk + lane_bytes(n);
    if (off_slots) *off_slots = slots;
    if (scratch <= slots) return 0;
    return (scratch - slots) / ((uint64_t)MN_MAX_BLOCKS * (uint64_t)n * 2) / 256 * 256;
}

uint64_t native_net_slot_bytes(int n, uint64_t slot, uint64_t want) {
    const uint64_t fit = NATIVE_NET_HOST_MAX / ((uint64_t)MN_MAX_BLOCKS * (uint64_t)n * 2) / 256 * 256;
    uint64_t s = want / 256 * 256;
    if (s > fit) s = fit;
    return s > slot ? s : slot;
}

/* The MnContext of rank c from its executor context (allocated, table filled). */
static mscclrt_result native_publish(mscclrt_comm *c, NativeCtx *nc) {
    const ExecCtx *x = nc->x;
    const int n = c->nranks;
    MnContext *m = &nc->host;
    memset(m, 0, sizeof *m);
    m->rank = (mk_u32)c->rank;
    m->nranks = (mk_u32)n;
    m->max_blocks = MN_MAX_BLOCKS;
    m->scratch = x->scratch;
    m->scratch_bytes = x->scratch_bytes;
    /* some peer on another node (a port remote in the synthetic plan): outgoing packet slots */
    const PlanGpu *g = &nc->plan->gpus[c->rank];
    bool net = false;
    for (int b = 0; b < g->nremotes; b++) net = net || !g->remotes[b].access[PLAN_CHAN_MEMORY];
    m->slot_bytes = native_slot_bytes(n, x->scratch_bytes, net, &m->off_slots);
    const uint64_t ctr = ctr_bytes(n);
    m->off_data_in = 0;
    m->off_ack_in = ctr;
    m->off_data_seen = 2 * ctr;
    m->off_ack_seen = 3 * ctr;
    m->off_pk_sent = 4 * ctr;
    m->off_pk_recv = 5 * ctr;
    m->off_pk_ack = 6 * ctr;
    m->off_stats = 7 * ctr;
    m->off_pk = pk_offset(n);
    m->pk_slot_bytes = native_pk_slot_bytes(n, x->scratch_bytes);
    const uint64_t pk_area = pk_area_bytes(n, x->scratch_bytes);
    if (net && m->pk_slot_bytes) {
        /* outgoing packets: pinned host memory, else the scratch's second packet area */
        TRY(native_net_host_out(c, nc->x, NATIVE_NET_PACKETS, pk_area, &nc->pk_host));
        m->pk_out = nc->pk_host ? (mk_u64)(uintptr_t)nc->pk_host : x->scratch + m->off_pk + pk_area;
    }
    m->off_lane = lane_bytes(n) ? m->off_pk + pk_area * (net ? 2 : 1) : 0;
    long long pk_max, net_pk_max, pk_in_host, slot_host, net_block, net_slot;
    TRY(param_int(PARAM_NATIVE_PACKET_BYTES, &pk_max));
    TRY(param_int(PARAM_NATIVE_NET_BLOCK_BYTES, &net_block));
    m->net_block_kib = (mk_u32)(net_block >> 10);
    long long push_rs;
    TRY(param_int(PARAM_NATIVE_PUSH_RS_BYTES, &push_rs));
    m->push_rs_min = (mk_u64)push_rs;
    TRY(param_int(PARAM_NATIVE_NET_PACKET_BYTES, &net_pk_max));
    TRY(param_int(PARAM_NATIVE_NET_PK_HOST, &pk_in_host));
    TRY(param_int(PARAM_NATIVE_NET_SLOT_HOST, &slot_host));
    TRY(param_int(PARAM_NATIVE_NET_SLOT_BYTES, &net_slot));
    m->net_slot_bytes = native_net_slot_bytes(n, m->slot_bytes, (uint64_t)net_slot);
    m->pk_max_bytes = (uint64_t)pk_max;
    m->net_pk_max = (uint64_t)net_pk_max;
    bool probe = false;
    TRY(algo_probe_enabled(&probe));
    if (probe && !nc->probe) TRY(algo_probe_alloc(&nc->probe));
    m->probe = nc->probe;
    if (m->slot_bytes == 0)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: the native scratch of %zu bytes "
                       "(MSCCLRT_NATIVE_SCRATCH_BYTES) leaves no slot for %d ranks x %d blocks x 2",
                       c->rank, x->scratch_bytes, n, MN_MAX_BLOCKS);
    /* the peers' scratch bases, then the windows of their incoming packet slots (peer_pk), of
     * their incoming Simple slots (peer_slot) and of their host counters (peer_ctr) */
    mk_u64 *peers = calloc(4 * (size_t)n, sizeof *peers);
    if (!peers) return rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory", c->rank);
    /* the table holds the mapped scratch of this node's ranks, then the windows of the other
     * nodes' ranks (port remotes), each in rank order (exec_fill_table); a rank the plan does
     * not reach stays 0 (send/recv to it is refused) */
    int k[2] = {0, 0}, nwin = 0;
    mscclrt_result res = MSCCLRT_SUCCESS;
    for (int q = 0; q < n; q++) {
        peers[q] = q == c->rank ? x->scratch : 0;
        for (int b = 0; b < g->nremotes; b++) {
            if (g->remotes[b].rank != q) continue;
            const int t = g->remotes[b].access[PLAN_CHAN_MEMORY] ? 0 : 1;
            peers[q] = x->tab[x->layout.tab_remote[t] + k[t]++];
            nwin += t;
        }
        nc->reach[q] = peers[q] != 0;
    }
    nc->reach_all = true;
    for (int q = 0; q < n; q++) nc->reach_all = nc->reach_all && nc->reach[q];
    m->fifo = nwin && x->layout.uses_proxy ? x->tab[x->layout.tab_proxy] : 0;
    if (nwin && (!m->fifo || !x->proxy))
        res = rt_fail(MSCCLRT_ERR_INTERNAL, "rank %d: the native context reaches %d rank(s) on "
                      "other nodes but has no port proxy", c->rank, nwin);
    /* incoming packets and pieces from other nodes: collective among the ranks that have such
     * peers, which every rank of the communicator reaching this point has (nwin) */
    if (res == MSCCLRT_SUCCESS && nwin && m->pk_slot_bytes && m->pk_out) {
        res = native_net_host_in(c, nc->x, NATIVE_NET_PACKETS, pk_area, pk_in_host != 0,
                                 &nc->pk_in_host, peers + n);
        m->pk_in_host = (mk_u64)(uintptr_t)nc->pk_in_host;
    }
    if (res == MSCCLRT_SUCCESS && nwin) {
        const uint64_t slot_area = (uint64_t)MN_MAX_BLOCKS * (uint64_t)n * 2 * m->net_slot_bytes;
        res = native_net_host_in(c, nc->x, NATIVE_NET_SLOTS, slot_area, slot_host != 0,
                                 &nc->slot_in_host, peers + 2 * n);
        m->slot_in_host = (mk_u64)(uintptr_t)nc->slot_in_host;
        /* and the outgoing pieces, which only this rank's kernels and proxy see (not
         * collective: its failure is reported after the exchange below, which the peers
         * wait for) */
        mscclrt_result out = MSCCLRT_SUCCESS;
        if (res == MSCCLRT_SUCCESS && slot_host)
            out = native_net_host_out(c, nc->x, NATIVE_NET_SLOTS, slot_area, &nc->slot_out_host);
        m->slot_out = (mk_u64)(uintptr_t)nc->slot_out_host;
        /* the counters of those pieces' signals and acknowledgements (Ctx::ctr_in) where the
         * pieces use host memory: the receive threads then store the values themselves */
        if (res == MSCCLRT_SUCCESS)
            res = native_net_host_in(c, nc->x, NATIVE_NET_COUNTERS, 2 * ctr, slot_host != 0,
                                     &nc->ctr_in_host, peers + 3 * n);
        m->ctr_in_host = (mk_u64)(uintptr_t)nc->ctr_in_host;
        if (res == MSCCLRT_SUCCESS) res = out;
    }
    /* the counters this rank raises through the proxy: its data, ack and packet-ack counters
     * at every window peer (data and ack in the peer's host counters where it has them), for
     * every block (the proxy counts per counter, from 0 as they start) */
    if (res == MSCCLRT_SUCCESS && nwin) {
        const int nctr = 3 * MN_MAX_BLOCKS * nwin;
        uint64_t *ctrs = malloc((size_t)nctr * sizeof *ctrs);
        if (!ctrs) res = rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory", c->rank);
        for (int q = 0, i = 0; ctrs && q < n; q++) {
            if (!net_is_window(peers[q])) continue;
            const uint64_t hc = peers[3 * n + q];
            for (int blk = 0; blk < MN_MAX_BLOCKS; blk++) {
                const uint64_t at = ((uint64_t)blk * (uint64_t)n + (uint64_t)c->rank) * 8;
                const uint64_t ack_at = at + ctr;   /* the acks follow the data counters */
                ctrs[i++] = hc ? hc + at : peers[q] + m->off_data_in + at;
                ctrs[i++] = hc ? hc + ack_at : peers[q] + m->off_ack_in + at;
                ctrs[i++] = peers[q] + m->off_pk_ack + at;
            }
        }
        if (ctrs) res = proxy_register(x->proxy, ctrs, nctr);
        free(ctrs);
    }
    const size_t bytes = sizeof *m + 4 * (size_t)n * sizeof *peers;
    if (res == MSCCLRT_SUCCESS)
        res = cu_check(cu.cuMemAlloc(&nc->dctx, bytes), "cuMemAlloc(native context)");
    if (res == MSCCLRT_SUCCESS) {
        m->peer_scratch = nc->dctx + sizeof *m;
        m->peer_pk = m->peer_scratch + (size_t)n * sizeof *peers;
        m->peer_slot = m->peer_pk + (size_t)n * sizeof *peers;
        m->peer_ctr = m->peer_slot + (size_t)n * sizeof *peers;
        res = cu_check(cu.cuMemcpyHtoD(nc->dctx, m, sizeof *m), "cuMemcpyHtoD(native context)");
    }
    if (res == MSCCLRT_SUCCESS)
        res = cu_check(cu.cuMemcpyHtoD(nc->dctx + sizeof *m, peers, 4 * (size_t)n * sizeof *peers),
                       "cuMemcpyHtoD(native peers)");
    free(peers);
    return res;
}

static void native_free(NativeCtx *nc) {
    if (!nc) return;
    while (nc->kernels) {
        NativeKernel *k = nc->kernels;
        nc->kernels = k->next;
        if (k->module) cu.cuModuleUnload(k->module);
        free(k);
    }
    pm_destroy(nc->pm);
    if (nc->probe) cu.cuMemFree((CuDevPtr)nc->probe);   /* reported (algo_native_report) or not */
    for (int k = 0; k < MSCCLRT_COLL_COUNT; k++)
        if (nc->net[k]) algo_release(nc->net[k]);
    /* the counters registered with the port proxy stay there: the proxy goes with the comm */
    if (nc->dctx) cu.cuMemFree(nc->dctx);
    /* the executor context is gone (its proxy drained, its host source released) */
    if (nc->pk_host) cu.cuMemFreeHost(nc->pk_host);
    if (nc->pk_in_host) cu.cuMemFreeHost(nc->pk_in_host);
    if (nc->slot_in_host) cu.cuMemFreeHost(nc->slot_in_host);
    if (nc->slot_out_host) cu.cuMemFreeHost(nc->slot_out_host);
    if (nc->ctr_in_host) cu.cuMemFreeHost(nc->ctr_in_host);
    free(nc->reach);
    plan_free(nc->plan);
    free(nc);
}

mscclrt_result algo_native_direct_stats(mscclrt_comm *c, uint64_t *direct, uint64_t *slots) {
    *direct = *slots = 0;
    NativeCtx *nc = c->algo ? c->algo->native : NULL;
    if (!nc || !nc->dctx) return MSCCLRT_SUCCESS;
    CuContext prev;
    TRY(exec_cuda_current(c, &prev));
    uint64_t v[2] = {0, 0};
    const mscclrt_result res = cu_check(cu.cuMemcpyDtoH(v, nc->host.scratch + nc->host.off_stats,
                                                        sizeof v), "cuMemcpyDtoH(direct counts)");
    exec_cuda_restore(c, prev);
    *direct = v[0], *slots = v[1];
    return res;
}

void algo_native_report(mscclrt_comm *c) {
    NativeCtx *nc = c->algo ? c->algo->native : NULL;
    if (nc && nc->probe) {
        CuContext prev;
        if (exec_cuda_current(c, &prev) == MSCCLRT_SUCCESS) {
            algo_probe_report(c->rank, nc->probe);   /* frees it */
            nc->probe = 0;
            exec_cuda_restore(c, prev);
        }
    }
    uint64_t direct = 0, slots = 0;
    if (c->algo && c->algo->native && c->algo->native->pm &&
        algo_native_direct_stats(c, &direct, &slots) == MSCCLRT_SUCCESS && direct + slots)
        LOG_INFO(LOG_SUB_EXEC, "rank %d: direct launches: %llu went direct, %llu took the slots",
                 c->rank, (unsigned long long)direct, (unsigned long long)slots);
}

void algo_native_free(mscclrt_comm *c) {
    AlgoComm *a = c->algo;
    if (!a || !a->native) return;
    native_free(a->native);   /* the executor context itself goes with the comm's list */
    a->native = NULL;
}

/* Peer memory for the n ranks of one process (cs[i] with ncs[i]): all of them or none (a rank
 * without would never go direct, but its peers would keep announcing to it); without it the
 * direct kernels take the slot path, so a failure here only logs. */
static void native_local_peermem(mscclrt_comm **cs, NativeCtx **ncs, int n) {
    PmLocalGroup *g = pm_local_group_new(n);
    bool ok = g != NULL;
    for (int i = 0; i < n && ok; i++) {
        CuContext prev;
        if (exec_cuda_current(cs[i], &prev) != MSCCLRT_SUCCESS) {
            ok = false;
            break;
        }
        ncs[i]->local = (PmLocalRank){.rank = cs[i]->rank, .device = cs[i]->device};
        ok = pm_create_local(&ncs[i]->pm, g, cs[i]->rank, n, &pm_local_ops, &ncs[i]->local) ==
             MSCCLRT_SUCCESS;
        exec_cuda_restore(cs[i], prev);
    }
    if (!ok) {
        LOG_INFO(LOG_SUB_INIT, "rank %d: no peer memory for this process's %d ranks (direct "
                 "collectives off): %s", cs[0]->rank, n, g ? mscclrt_last_error() : "out of memory");
        for (int i = 0; i < n; i++) {
            CuContext prev;
            if (!ncs[i]->pm || exec_cuda_current(cs[i], &prev) != MSCCLRT_SUCCESS) continue;
            pm_destroy(ncs[i]->pm);
            ncs[i]->pm = NULL;
            exec_cuda_restore(cs[i], prev);
        }
    }
    pm_local_group_drop(g);
}

mscclrt_result algo_native_init(mscclrt_comm **cs, int n) {
    if (n <= 0) return rt_fail(MSCCLRT_ERR_INTERNAL, "algo_native_init: %d communicators", n);
    long long scratch;
    TRY(param_int(PARAM_NATIVE_SCRATCH_BYTES, &scratch));
    if (scratch == 0) return MSCCLRT_SUCCESS;   /* native algorithms switched off */
    /* the context maps the scratch of this node's ranks through CUDA IPC; on a communicator
     * that spans nodes it reaches the others' through the port proxy (port), for send/recv and
     * for what no multi-node program serves (algo_coll.c). n > 1 only for a group of one
     * process: one node. */
    int *node = NULL;
    bool port = false;
    if (n == 1 && cs[0]->boot && boot_nnodes(cs[0]->boot) > 1) {
        node = calloc((size_t)cs[0]->nranks, sizeof *node);
        if (!node) return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
        for (int q = 0; q < cs[0]->nranks; q++) node[q] = boot_node_of(cs[0]->boot, q);
        /* the other nodes' ranks through port channels: they need the proxy, and one kernel
         * table entry each (with the proxy's, at most MK_TAB_MAX) */
        long long proxy_on = 0;
        const mscclrt_result pr0 = param_int(PARAM_PORT_PROXY, &proxy_on);
        if (pr0 != MSCCLRT_SUCCESS) {
            free(node);
            return pr0;
        }
        port = proxy_on != 0 && cs[0]->nranks <= MK_TAB_MAX;
        LOG_INFO(LOG_SUB_INIT, "rank %d: the communicator spans %d nodes: the native context "
                 "serves send/recv %s; collectives use the multi-node programs", cs[0]->rank,
                 boot_nnodes(cs[0]->boot), port ? "between any two ranks (across nodes through "
                 "the port proxy)" : "among the ranks of each node (MSCCLRT_PORT_PROXY=0 or too "
                 "many ranks for the kernel table: none across nodes)");
    }
    const double t0 = rt_now_s();
    NativeCtx **ncs = calloc((size_t)n, sizeof *ncs);
    mscclrt_result res = MSCCLRT_SUCCESS;
    if (!ncs) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory for native contexts");
        goto out;
    }
    for (int i = 0; i < n && res == MSCCLRT_SUCCESS; i++) {
        AlgoComm *a = algo_comm(cs[i]);
        if (!a) { res = MSCCLRT_ERR_SYSTEM; break; }
        ncs[i] = calloc(1, sizeof *ncs[i]);
        if (!ncs[i] || !(ncs[i]->reach = calloc((size_t)cs[i]->nranks, sizeof *ncs[i]->reach)) ||
            !(ncs[i]->plan = native_plan(cs[i]->nranks, (uint64_t)scratch, node, port))) {
            res = rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory for the native context",
                          cs[i]->rank);
            break;
        }
        a->native = ncs[i];
    }
    if (res != MSCCLRT_SUCCESS) goto out;
    {
        ExecCtx **xs = calloc((size_t)n, sizeof *xs);
        res = xs ? exec_setup_contexts(cs, n, ncs[0]->plan, xs)
                 : rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory for native contexts");
        for (int i = 0; xs && i < n; i++) ncs[i]->x = xs[i];
        free(xs);
    }
    for (int i = 0; i < n && res == MSCCLRT_SUCCESS; i++) {
        CuContext prev;
        TRY_GOTO(exec_cuda_current(cs[i], &prev), res, out);
        (void)exec_native_block_cap(cs[i], MN_MAX_BLOCKS);   /* now, while every comm of a
                                                                 group is there */
        res = native_publish(cs[i], ncs[i]);
        long long dmin = 0, dblocks = 0, pmin = 0, pbatch = 0, pdblocks = 0;
        mscclrt_result pr = param_int(PARAM_NATIVE_DIRECT_BYTES, &dmin);
        if (pr == MSCCLRT_SUCCESS) pr = param_int(PARAM_NATIVE_DIRECT_BLOCKS, &dblocks);
        if (pr == MSCCLRT_SUCCESS) pr = param_int(PARAM_NATIVE_P2P_DIRECT_BYTES, &pmin);
        if (pr == MSCCLRT_SUCCESS) pr = param_int(PARAM_NATIVE_P2P_PK_BATCH, &pbatch);
        if (pr == MSCCLRT_SUCCESS) pr = param_int(PARAM_NATIVE_P2P_DIRECT_BLOCKS, &pdblocks);
        ncs[i]->p2p_pk_batch = pbatch != 0;
        ncs[i]->p2p_direct_blocks = (int)pdblocks;
        ncs[i]->direct_min = (uint64_t)dmin;
        ncs[i]->p2p_direct_min = (uint64_t)pmin;
        ncs[i]->direct_blocks = (int)dblocks;
        /* the direct path, a rank per process: collective, so every such rank calls it
         * whatever happened before */
        if (n == 1 && cs[i]->boot && cs[i]->xport && !node) {   /* one node: collectives too */
            const mscclrt_result pc = pm_create(&ncs[i]->pm, cs[i]->boot, &pm_cuda_ops, cs[i]->xport);
            if (res == MSCCLRT_SUCCESS) res = pr;   /* a malformed variable fails the init */
            if (res == MSCCLRT_SUCCESS) res = pc;
        } else if (res == MSCCLRT_SUCCESS) {
            res = pr;
        }
        exec_cuda_restore(cs[i], prev);
    }
    /* the direct path, the ranks of one process: their peer memory talks in memory. Opt-in
     * until 4 and 8 ranks sharing one GPU pass with it: test_gpu_coll's 4 ranks on 2 GPUs
     * passed (59 s with a warm kernel cache; an earlier timeout at 110 s was the direct
     * module compiling cold, not a hang) */
    long long local = 0;
    if (res == MSCCLRT_SUCCESS) res = param_int(PARAM_NATIVE_DIRECT_LOCAL, &local);
    if (res == MSCCLRT_SUCCESS && n > 1 && local) native_local_peermem(cs, ncs, n);
    if (res == MSCCLRT_SUCCESS)
        LOG_INFO(LOG_SUB_INIT, "native context: %lld bytes of scratch per rank, slots of %llu "
                 "bytes, %d ranks set up in %.2f ms", scratch,
                 (unsigned long long)ncs[0]->host.slot_bytes, n, (rt_now_s() - t0) * 1e3);
out:
    free(node);
    if (res != MSCCLRT_SUCCESS)
        for (int i = 0; i < n; i++) {
            if (!ncs || !ncs[i]) continue;
            if (cs[i]->algo) cs[i]->algo->native = NULL;
            if (ncs[i]->x) exec_context_release(cs[i], ncs[i]->x);
            native_free(ncs[i]);
        }
    free(ncs);
    return res;
}

/* ---- kernels ------------------------------------------------------------------------------ */
/* MSCCLRT_NATIVE_PROBE: the timestamps compiled in (a module of its own in the cache); a
 * communicator with no rank on another node (no proxy FIFO) compiles the paths to other nodes out
 * (MN_NET 0, mscclrt_native.cuh): ptxas gives the send/recv kernels a 40-byte frame instead of
 * 104 and the collectives' kernel 588 bytes of spills instead of 724 */
char *native_module_source(const char *body, bool probe, bool net, int dt, int op, const char *T) {
    const size_t len = strlen(body) + strlen(T) + 256;
    char *src = malloc(len);
    if (src)
        snprintf(src, len, "%s%s#define MSCCLRT_DTYPE %d\n#define MSCCLRT_OP %d\n#define MSCCLRT_T %s\n%s",
                 probe ? "#define MN_PROBE 1\n" : "", net ? "" : "#define MN_NET 0\n", dt, op, T, body);
    return src;
}

static mscclrt_result native_kernel(mscclrt_comm *c, NativeCtx *nc, const char *source,
                                    const char *kernel, bool reduces, int dt, int op,
                                    CuFunction *fn) {
    const int kdt = reduces ? dt : -1, kop = reduces ? op : -1;
    for (NativeKernel *k = nc->kernels; k; k = k->next)
        if (k->source == source && strcmp(k->kernel, kernel) == 0 && k->dtype == kdt && k->op == kop) {
            *fn = k->fn;
            return MSCCLRT_SUCCESS;
        }
    const char *T = reduces ? cg_ctype((mscclrt_dtype)dt) : "mk::u8";
    if (!T) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "native kernel %s: dtype %d", kernel, dt);
    char *src = native_module_source(source ? source : BUILTIN_SOURCE, nc->probe != 0,
                                     nc->host.fifo != 0, reduces ? dt : -1, reduces ? op : 0, T);
    if (!src) return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
    char what[200];
    snprintf(what, sizeof what, "native kernel %s (%s, op %d)", kernel,
             reduces ? mscclrt_dtype_name((mscclrt_dtype)dt) : "bytes", kop);
    NativeKernel *k = calloc(1, sizeof *k);
    mscclrt_result res = k ? exec_module_load(c, src, kernel, what, &k->module, &k->fn)
                           : rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
    free(src);
    if (res != MSCCLRT_SUCCESS) {
        free(k);
        return res;
    }
    k->source = source;
    k->kernel = kernel;
    k->dtype = kdt;
    k->op = kop;
    k->next = nc->kernels;
    nc->kernels = k;
    *fn = k->fn;
    return MSCCLRT_SUCCESS;
}

/* Whether a built-in call launches the direct kernel. Every rank must answer alike (the kernels
 * exchange records first), so only what every rank's call shares counts: the collective, the
 * size, dtype and operator, the rank count; where each rank's buffers are is the kernel's
 * question. The reductions go direct for 2, 4 and 8 ranks, not for fp8, avg or PreMulSum
 * (kernels/native_direct.cuh). */
static bool direct_eligible(const NativeCtx *nc, const mscclrt_algo *algo,
                            const mscclrt_request *req, int n) {
    if (!nc->pm || algo->source || nc->direct_min == 0 || req->message_bytes < nc->direct_min ||
        !nc->host.off_lane || n > MN_DIRECT_MAX_RANKS)
        return false;
    switch (req->collective) {
    case MSCCLRT_COLL_ALLREDUCE: case MSCCLRT_COLL_REDUCESCATTER: case MSCCLRT_COLL_REDUCE:
        return (n == 2 || n == 4 || n == 8) && req->op < MSCCLRT_REDOP_COUNT &&
               req->op != MSCCLRT_AVG && req->dtype != MSCCLRT_FP8_E4M3 &&
               req->dtype != MSCCLRT_FP8_E5M2;
    case MSCCLRT_COLL_ALLGATHER: case MSCCLRT_COLL_ALLTOALL: case MSCCLRT_COLL_BROADCAST:
        return true;
    default:
        return false;
    }
}

/* ---- launches ----------------------------------------------------------------------------- */
uint64_t native_peer_bytes(const mscclrt_request *req, int nranks) {
    switch (req->collective) {
    case MSCCLRT_COLL_REDUCESCATTER: case MSCCLRT_COLL_SCATTER: return req->out_bytes;
    case MSCCLRT_COLL_ALLTOALL: return req->out_bytes / (uint64_t)(nranks > 0 ? nranks : 1);
    default: return req->in_bytes;   /* allreduce (one hop), allgather, gather, broadcast, reduce */
    }
}

void native_default_grid(uint64_t bytes, uint64_t peer, uint64_t pk_data, uint64_t pk_max,
                         int cap, bool shared, int *blocks, int *threads) {
    if (cap < 1 || cap > MN_MAX_BLOCKS) cap = MN_MAX_BLOCKS;
    /* packets: a block per MN_PK_GRID_BYTES of the peer's share, up to the cap (then each
     * block's share grows up to the slot's data), so every block's share is one message per
     * peer */
    if (pk_data && peer <= pk_max && peer <= (uint64_t)cap * pk_data) {
        if (*blocks <= 0) *blocks = (int)mn_pk_blocks(peer, pk_data, (mk_u32)cap);
        if (*threads <= 0) *threads = 512;
        return;
    }
    /* slots: all 32 blocks (each block's transfers wait on its own round trips, so more of
     * them overlap: on 2 x H200 32 blocks won at 4 MiB and up where 8 lost at 1 MiB). Ranks
     * sharing a process and GPU keep 8 up to 1 MiB: 4 such ranks on one H200 with 16 or 32
     * blocks there did not finish test_gpu_coll, with 8 they do (not understood yet) */
    const int b = bytes <= (64u << 10) ? 1
                : shared && bytes <= (1u << 20) ? 8
                : MN_MAX_BLOCKS;
    if (*blocks <= 0) *blocks = b < cap ? b : cap;
    if (*threads <= 0) *threads = bytes <= (64u << 10) ? 512 : 1024;
}

mscclrt_result algo_native_prepare(mscclrt_comm *c, const mscclrt_algo *algo,
                                   const mscclrt_request *req, int blocks, int threads,
                                   const void *extra, size_t extra_bytes, NativeLaunch *l) {
    AlgoComm *a = c->algo;
    NativeCtx *nc = a ? a->native : NULL;
    if (!nc)
        return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "rank %d: native algorithm '%s': this "
                       "communicator has no native context ("
                       "MSCCLRT_NATIVE_SCRATCH_BYTES=0)",
                       c->rank, algo->desc.name);
    if (extra_bytes > MN_EXTRA_BYTES)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "native algorithm '%s': %zu bytes of extra "
                       "arguments, at most %d", algo->desc.name, extra_bytes, MN_EXTRA_BYTES);
    if (blocks <= 0 && algo->default_blocks > 0) blocks = algo->default_blocks;
    if (threads <= 0 && algo->default_threads > 0) threads = algo->default_threads;
    if (blocks > MN_MAX_BLOCKS)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "native algorithm '%s': %d blocks (at most %d)",
                       algo->desc.name, blocks, MN_MAX_BLOCKS);
    const bool p2p = req->collective == MSCCLRT_COLL_SENDRECV && !algo->source;
    l->direct = !p2p && direct_eligible(nc, algo, req, c->nranks);
    /* the direct kernel's grid (the same on every rank: a parameter and the collective cap),
     * unless the caller chose one */
    if (l->direct && blocks <= 0) {
        blocks = native_direct_grid(req->collective, req->message_bytes, c->nranks,
                                    nc->host.push_rs_min, nc->direct_blocks,
                                    exec_native_block_cap(c, MN_DIRECT_BLOCKS));
        if (threads <= 0) threads = 1024;
    }
    /* send/recv groups have a fixed grid (both sides of a pair must cut alike): given here */
    if (blocks <= 0 || threads <= 0)
        native_default_grid(req->message_bytes, native_peer_bytes(req, c->nranks),
                            nc->host.pk_slot_bytes / 2, nc->host.pk_max_bytes,
                            exec_native_block_cap(c, MN_MAX_BLOCKS),
                            exec_context_share_max(c) > 1, &blocks, &threads);
    const int most = l->direct ? MN_DIRECT_BLOCKS : MN_MAX_BLOCKS;
    if (blocks < 1 || blocks > most || threads < 32 || threads > 1024 || threads % 32)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "native algorithm '%s': %d blocks x %d threads "
                       "(blocks 1..%d, threads a multiple of 32 up to 1024)", algo->desc.name,
                       blocks, threads, most);
    const char *kernel = p2p ? "mscclrt_native_p2p" : algo->kernel;
    const bool reduces = algo->reduces;
    CuContext prev;
    TRY(exec_cuda_current(c, &prev));
    const int kop = req->op >= MSCCLRT_REDOP_COUNT ? MN_OP_PREMULSUM : req->op;
    mscclrt_result res = l->direct
        ? native_kernel(c, nc, DIRECT_SOURCE, "mscclrt_native_direct", reduces, (int)req->dtype,
                        kop, &l->fn)
        : native_kernel(c, nc, algo->source, kernel, reduces, (int)req->dtype, kop, &l->fn);
    if (res == MSCCLRT_SUCCESS && c->clique)
        res = exec_share_check_blocks(c, l->fn, blocks, threads, algo->desc.name);
    exec_cuda_restore(c, prev);
    TRY(res);
    l->blocks = blocks;
    l->threads = threads;
    l->p2p = p2p;
    l->own = l->direct || !algo->source;   /* the built-in module, not a user's source */
    algo_native_fill(c, req, extra, extra_bytes, l);
    return MSCCLRT_SUCCESS;
}

/* The direct kernel's record: where this rank's buffers lie among its shared allocations
 * (announcing new ones) and what it has mapped of its peers' (taking their news first). A
 * buffer that cannot be shared goes as publication 0, and the kernel takes the slot path. */
static void native_direct_fill(mscclrt_comm *c, const mscclrt_request *req, NativeLaunch *l) {
    PeerMem *pm = c->algo->native->pm;
    MnDirect *d = &l->dargs;
    memset(d, 0, sizeof *d);
    CuContext prev;
    if (exec_cuda_current(c, &prev) != MSCCLRT_SUCCESS) return;   /* all zero: slot path */
    pm_poll(pm);
    MnDirectRec *r = &d->rec;
    pm_locate(pm, req->sendbuf, req->in_bytes, &r->spub, &r->sslot, &r->soff);
    if (req->recvbuf == req->sendbuf) {
        r->rpub = r->spub, r->rslot = r->sslot, r->roff = r->soff;
        r->flags |= MN_DIRECT_INPLACE | MN_DIRECT_SAME;
    } else {
        pm_locate(pm, req->recvbuf, req->out_bytes, &r->rpub, &r->rslot, &r->roff);
        /* buffers that overlap count as in place too: no direct form may then use the output
         * as staging (allreduce_push) */
        const uintptr_t s0 = (uintptr_t)req->sendbuf, r0 = (uintptr_t)req->recvbuf;
        if (s0 < r0 + req->out_bytes && r0 < s0 + req->in_bytes) r->flags |= MN_DIRECT_INPLACE;
    }
    pm_direct_args(pm, d);
    exec_cuda_restore(c, prev);
}

void algo_native_fill(mscclrt_comm *c, const mscclrt_request *req, const void *extra,
                      size_t extra_bytes, NativeLaunch *l) {
    MnArgs *m = &l->args;
    memset(m, 0, offsetof(MnArgs, extra));
    m->ctx = c->algo->native->dctx;
    m->in = (mk_u64)(uintptr_t)req->sendbuf;
    m->out = (mk_u64)(uintptr_t)req->recvbuf;
    m->in_bytes = req->in_bytes;
    m->out_bytes = req->out_bytes;
    m->coll = (mk_u32)req->collective;
    m->dtype = (mk_u32)req->dtype;
    m->op = req->op >= MSCCLRT_REDOP_COUNT ? MN_OP_PREMULSUM : (mk_u32)req->op;
    m->root = req->root;
    m->elem_bytes = (mk_u32)mscclrt_dtype_size(req->dtype);
    /* the count argument of the NCCL-shaped call */
    const uint64_t es = m->elem_bytes ? m->elem_bytes : 1;
    switch (req->collective) {
    case MSCCLRT_COLL_REDUCESCATTER: case MSCCLRT_COLL_SCATTER: m->count = req->out_bytes / es; break;
    case MSCCLRT_COLL_ALLTOALL: m->count = req->in_bytes / es / (uint64_t)c->nranks; break;
    case MSCCLRT_COLL_SENDRECV: m->count = req->message_bytes / es; break;
    default: m->count = req->in_bytes / es; break;
    }
    m->extra_bytes = extra_bytes;
    if (extra_bytes) memcpy(m->extra, extra, extra_bytes);
    l->comm = c;
    l->stream = req->stream;
    if (l->direct) native_direct_fill(c, req, l);
}

/* The direct kernel's grid: the variable's blocks, or by default 64; for alltoall 80 from
 * NATIVE_MID_ALLTOALL bytes and the wide grid from NATIVE_WIDE_ALLTOALL (nccl-tests -G 1 on
 * 2 x H200: c17, 1 GiB 1573 us on 64 blocks, 1508 on 128, NCCL 1479; c37/c38, twice each, 80
 * blocks (70 for the peers' blocks, 10 for the local one) 104.1-104.5 us at 64 MiB and
 * 388.2-388.7 at 256 MiB against 108.7-108.9 and 408.1-408.7 on 64, 111.6-111.8 and 404-406
 * on 96, NCCL 107.4 and 387.1; at 1 GiB 80, 96 and 128 within 0.4 %); never more than cap.
 * The same on every rank: the size is the call's. */
#define NATIVE_MID_ALLTOALL (64ull << 20)
#define NATIVE_MID_BLOCKS 80
#define NATIVE_WIDE_ALLTOALL (512ull << 20)
/* reduce_scatter of 2 ranks by stores (kernels/native_push.cuh, out of place from push_rs
 * bytes, MSCCLRT_NATIVE_PUSH_RS_BYTES; 0: never): a third of the grid sums what the rest
 * stores, so the storers keep the 64 blocks that move all_gather's bytes at full speed. The
 * grid is chosen before the records say whether every rank is out of place, so in-place calls
 * run the loads on it too, slower (c41, 2 x H200: 1 GiB 1674 us against 1607 on 64) */
#define NATIVE_PUSH_RS_BLOCKS 96
int native_direct_grid(mscclrt_coll coll, uint64_t bytes, int nranks, uint64_t push_rs, int param,
                       int cap) {
    const bool a2a = coll == MSCCLRT_COLL_ALLTOALL;
    int want = param > 0 ? param
             : a2a && bytes >= NATIVE_WIDE_ALLTOALL ? MN_DIRECT_BLOCKS
             : a2a && bytes >= NATIVE_MID_ALLTOALL ? NATIVE_MID_BLOCKS
             : coll == MSCCLRT_COLL_REDUCESCATTER && nranks == 2 && push_rs && bytes >= push_rs
                 ? NATIVE_PUSH_RS_BLOCKS : 64;
    if (want > cap) want = cap;
    return want < 1 ? 1 : want;
}

/* ---- the direct form of send/recv ------------------------------------------------------------- */
void algo_native_p2p_begin(mscclrt_comm *c, NativeLaunch *l) {
    const NativeCtx *nc = c->algo ? c->algo->native : NULL;
    memset(&l->p2pd, 0, sizeof l->p2pd);
    l->p2p_nrecv = 0;
    /* every rank has peer memory or none does (pm_create), so this is the same everywhere */
    /* its own threshold: a 1 MiB send/recv took 16.4-16.6 us direct and 18.5 through the
     * slots on 2 x H200 (nccl-tests -G 1), where the collectives' slot path wins up to 2 MiB */
    l->p2pd.min_bytes = nc && nc->pm && nc->p2p_direct_min ? nc->p2p_direct_min : ~0ull;
    /* the grid prepared for the group (the same on every rank): entries are cut over at most
     * this many blocks; the launch itself takes only what its entries need (p2p_grid) */
    l->p2pd.full_blocks = (mk_u32)l->blocks;
    /* entries that may go direct: their own grid, capped as the direct collectives' (the same
     * on every rank), all of them (MSCCLRT_NATIVE_P2P_DIRECT_BLOCKS) or by default those of
     * MN_P2P_WIDE_BYTES and more; their slot fallback keeps the group grid */
    const bool direct = nc && l->p2pd.min_bytes != ~0ull;
    l->p2pd.flags = mn_p2p_flags(nc && nc->p2p_pk_batch, direct,
                                 nc && nc->p2p_direct_blocks > 0 ? (mk_u32)nc->p2p_direct_blocks : 0,
                                 direct ? (mk_u32)exec_native_block_cap(c, MN_DIRECT_BLOCKS) : 0,
                                 (mk_u32)l->blocks);
}

/* The launch grid of a group: the most blocks one of its entries is cut over
 * (mn_p2p_entry_blocks, which the kernel applies to the same values), at least one. */
static int p2p_grid(mscclrt_comm *c, const NativeLaunch *l) {
    const NativeCtx *nc = c->algo ? c->algo->native : NULL;
    const uint64_t pk_data = nc ? nc->host.pk_slot_bytes / 2 : 0, pk_max = nc ? nc->host.pk_max_bytes : 0,
                   net_pk_max = nc ? nc->host.net_pk_max : 0,
                   net_block = nc ? (uint64_t)nc->host.net_block_kib << 10 : 0;
    mk_u32 most = 1;
    for (mk_u32 e = 0; e < l->args.np2p && e < MN_P2P_MAX; e++) {
        const MnP2p *o = &l->list.v[e];
        /* the kernel's "remote": the peer's scratch is a network window, i.e. another node */
        const int remote = c->boot && boot_node_of(c->boot, o->peer) != boot_node(c->boot);
        mk_u32 k = mn_p2p_entry_blocks(o->bytes, remote, pk_data, remote ? net_pk_max : pk_max,
                                       net_block, l->p2pd.full_blocks);
        /* one that may go direct (the kernel's test is narrower: a larger grid only idles) */
        if (!remote && o->peer != c->rank && o->bytes >= l->p2pd.min_bytes)
            k = mn_p2p_direct_blocks(l->p2pd.flags, k, o->bytes);
        if (k > most) most = k;
    }
    return (int)most;
}

void algo_native_p2p_recv(mscclrt_comm *c, NativeLaunch *l, int peer, void *buf, uint64_t bytes) {
    const int k = l->p2p_nrecv++;
    NativeCtx *nc = c->algo ? c->algo->native : NULL;
    if (k >= MN_P2P_DIRECT || !nc || !nc->pm || bytes < l->p2pd.min_bytes || peer == c->rank)
        return;   /* pub 0: the pair takes the slots */
    CuContext prev;
    if (exec_cuda_current(c, &prev) != MSCCLRT_SUCCESS) return;
    MnP2pRecv *e = &l->p2pd.recv[k];
    pm_locate(nc->pm, buf, bytes, &e->pub, &e->slot, &e->off);
    exec_cuda_restore(c, prev);
}

/* The kernel of a group of at most MN_P2P_SMALL entries: the same code with a 3 KiB smaller
 * argument (its module comes from the same compiled source); where it cannot be had, the
 * general one, which serves any group. */
static void p2p_small_kernel(mscclrt_comm *c, NativeCtx *nc, NativeLaunch *l) {
    if (!nc || l->args.np2p > MN_P2P_SMALL) return;
    CuContext prev;
    if (exec_cuda_current(c, &prev) != MSCCLRT_SUCCESS) return;
    CuFunction fn = NULL;
    if (native_kernel(c, nc, NULL, "mscclrt_native_p2p_small", false, 0, 0, &fn) == MSCCLRT_SUCCESS)
        l->fn = fn;
    exec_cuda_restore(c, prev);
}

void algo_native_p2p_end(mscclrt_comm *c, NativeLaunch *l) {
    NativeCtx *nc = c->algo ? c->algo->native : NULL;
    l->blocks = p2p_grid(c, l);
    p2p_small_kernel(c, nc, l);
    if (!nc || !nc->pm || l->p2pd.min_bytes == ~0ull) return;
    CuContext prev;
    if (exec_cuda_current(c, &prev) != MSCCLRT_SUCCESS) return;
    pm_poll(nc->pm);
    MnDirect d;
    memset(&d, 0, sizeof d);
    pm_direct_args(nc->pm, &d);
    l->p2pd.table = d.table;
    memcpy(l->p2pd.upto, d.rec.upto, sizeof l->p2pd.upto);
    exec_cuda_restore(c, prev);
}

static mscclrt_algo *builtin(mscclrt_coll coll);

bool algo_native_net_serves(const mscclrt_comm *c, const mscclrt_request *q) {
    const NativeCtx *nc = c->algo ? c->algo->native : NULL;
    if (!nc || !nc->host.fifo || !nc->reach_all) return false;   /* one node, no proxy, or not all */
    if ((unsigned)q->collective >= MSCCLRT_COLL_COUNT || q->collective == MSCCLRT_COLL_SENDRECV)
        return false;
    /* PreMulSum scales each piece into the peer's slot on the way: a store, so not across */
    if (q->op < 0 || q->op >= MSCCLRT_REDOP_COUNT) return false;
    /* the proxy reads a piece for another node after the kernel handed it over, and in-place
     * alltoall receives into the very block it sends to that peer: the peer's piece could land
     * first (algo_p2pcoll.c serves it through staging instead) */
    return !(q->collective == MSCCLRT_COLL_ALLTOALL && q->sendbuf == (const void *)q->recvbuf);
}

/* The measured rule: across two nodes over loopback TCP (nccl-tests reduce on 2 x H200, c19)
 * the built-in reduce took 46-65 us at 1-64 KiB where reduce/hier took 76-94, and 186 against
 * 147 at 256 KiB; all_reduce, reduce_scatter and all_gather were slower built-in at every size
 * (all_reduce 1 KiB 66 against 34) */
#define NATIVE_NET_REDUCE_BYTES (64ull << 10)

bool algo_native_net_first(const mscclrt_request *q, long long limit) {
    if (!q || q->collective == MSCCLRT_COLL_SENDRECV || !q->message_bytes) return false;
    if (limit < 0)
        return q->collective == MSCCLRT_COLL_REDUCE && q->message_bytes <= NATIVE_NET_REDUCE_BYTES;
    return q->message_bytes <= (uint64_t)limit;
}

/* the rule of a send/recv entry to another node that takes the slots (no packets), over a grid
 * of MN_MAX_BLOCKS */
int algo_native_net_blocks(const mscclrt_comm *c, uint64_t bytes) {
    const NativeCtx *nc = c->algo ? c->algo->native : NULL;
    return (int)mn_p2p_entry_blocks(bytes, 1, 0, 0, nc ? (uint64_t)nc->host.net_block_kib << 10 : 0,
                                    MN_MAX_BLOCKS);
}

const mscclrt_algo *algo_native_net_builtin(mscclrt_comm *c, mscclrt_coll coll) {
    NativeCtx *nc = c->algo ? c->algo->native : NULL;
    if (!nc || (unsigned)coll >= MSCCLRT_COLL_COUNT) return NULL;
    if (!nc->net[coll]) nc->net[coll] = builtin(coll);
    return nc->net[coll];
}

bool algo_native_reaches_all(const mscclrt_comm *c) {
    const NativeCtx *nc = c->algo ? c->algo->native : NULL;
    return nc && nc->reach_all;
}

bool algo_native_reaches(const mscclrt_comm *c, int peer) {
    const NativeCtx *nc = c->algo ? c->algo->native : NULL;
    return nc && nc->reach && peer >= 0 && peer < c->nranks && nc->reach[peer];
}

mscclrt_result algo_native_launch(NativeLaunch *l) {
    /* a native kernel on a communicator that spans nodes may push triggers: an idle proxy
     * thread wakes now, not at its next timed look */
    const NativeCtx *nc = l->comm->algo ? l->comm->algo->native : NULL;
    if (nc && nc->host.fifo) proxy_kick(nc->x->proxy);
    void *params[3] = {&l->args, l->direct ? (void *)&l->dargs : (void *)&l->list, &l->p2pd};
    return exec_launch_kernel(l->comm, l->fn, l->blocks, l->threads, params, l->stream, l->own,
                              "native kernel", l->p2p ? "mscclrt_native_p2p"
                                               : l->direct ? "mscclrt_native_direct" : "native");
}

/* ---- the built-in algorithms ---------------------------------------------------------------- */
static mscclrt_algo *builtin(mscclrt_coll coll) {
    mscclrt_algo *a = calloc(1, sizeof *a);
    char name[64];
    snprintf(name, sizeof name, "native/%s", mscclrt_coll_name(coll));
    if (!a || !(a->desc.name = strdup(name)) || !(a->kernel = strdup("mscclrt_native_coll")) ||
        !(a->desc.tags = strdup("default=1,native=1"))) {
        if (a) { free((char *)a->desc.name); free(a->kernel); free(a); }
        return NULL;
    }
    a->magic = ALGO_MAGIC;
    a->refs = 1;
    a->kind = MSCCLRT_ALGO_NATIVE;
    a->desc.collective = coll;
    a->desc.buffer_mode = MSCCLRT_BUFFER_ANY;
    a->reduces = coll == MSCCLRT_COLL_ALLREDUCE || coll == MSCCLRT_COLL_REDUCESCATTER ||
                 coll == MSCCLRT_COLL_REDUCE;
    return a;
}

mscclrt_result algo_native_builtins(AlgoSet *set, int world, int ranks_per_node) {
    long long scratch;
    TRY(param_int(PARAM_NATIVE_SCRATCH_BYTES, &scratch));
    if (scratch == 0) return MSCCLRT_SUCCESS;
    for (int k = 0; k < MSCCLRT_COLL_COUNT; k++) {
        /* across nodes the native context maps each node's ranks and reaches the others
         * through the port proxy: send/recv between any two, no collectives */
        if (ranks_per_node != world && k != MSCCLRT_COLL_SENDRECV) continue;
        mscclrt_algo *a = builtin((mscclrt_coll)k);
        if (!a) return rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory for the built-in algorithms");
        TRY(algo_set_add(set, a));   /* takes our reference */
    }
    return MSCCLRT_SUCCESS;
}

const char *algo_native_builtin_source(void) { return BUILTIN_SOURCE; }
const char *algo_native_direct_source(void) { return DIRECT_SOURCE; }

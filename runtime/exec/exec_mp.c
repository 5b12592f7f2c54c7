/*
 * exec_mp.c - communicators of one process per GPU (or one thread per GPU joining through a
 * unique id, or through the launcher's environment; runtime/comm makes them): their
 * transports once the TCP bootstrap (runtime/bootstrap) is up, and the collective setup of a
 * context through it: every rank agrees on
 * the scratch size, exports its send/recv allocations, scratch and state block with the CUDA IPC
 * transport (runtime/transport), sends the descriptors to every peer and maps the peers' ones.
 * Ranks on other nodes (boot_node_of) are reached through the network transport instead
 * (runtime/net): their buffers are registered there and their table entries are window
 * addresses, which only port channels through the proxy may use.
 */
#include "exec/exec.h"
#include "bootstrap/bootstrap.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "transport/transport.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXEC_MP_TAG 0x4558 /* "EX": bootstrap tag of setup descriptors */
#define EXEC_NET_TAG 0x454e /* "EN": bootstrap tag of network memory descriptors */

/* (node, process, device) of one rank: two equal ones share a CUDA context */
typedef struct { int node, pid, device; } RankPlace;

static int place_cmp(const void *a, const void *b) {
    const RankPlace *x = a, *y = b;
    if (x->node != y->node) return x->node < y->node ? -1 : 1;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    return x->device < y->device ? -1 : x->device > y->device;
}

/* The most ranks of the group that share one process and device (1: none share; devs: every
 * rank's device), or 0 when out of memory. Sorting keeps it O(n log n) for large groups. */
static int group_shares(const Boot *b, const int *devs, int n) {
    RankPlace *pl = malloc((size_t)n * sizeof *pl);
    if (!pl) return 0;
    for (int q = 0; q < n; q++)
        pl[q] = (RankPlace){boot_node_of(b, q), boot_pid_of(b, q), devs[q]};
    qsort(pl, (size_t)n, sizeof *pl, place_cmp);
    int most = 1;
    for (int q = 1, run = 1; q < n; q++) {
        run = place_cmp(&pl[q - 1], &pl[q]) == 0 ? run + 1 : 1;
        if (run > most) most = run;
    }
    free(pl);
    return most;
}

/* The GPU's PCI location as one number (domain, bus, device), -1 where the driver says none. */
static int pci_location(CuDevice d) {
    int dom = 0, bus = 0, dev = 0;
    if (cu.cuDeviceGetAttribute(&dom, CU_ATTR_PCI_DOMAIN_ID, d) != CU_OK ||
        cu.cuDeviceGetAttribute(&bus, CU_ATTR_PCI_BUS_ID, d) != CU_OK ||
        cu.cuDeviceGetAttribute(&dev, CU_ATTR_PCI_DEVICE_ID, d) != CU_OK)
        return -1;
    return (dom & 0x7fff) << 16 | (bus & 0xff) << 8 | (dev & 0xff);
}

/* Which ranks of the group share this rank's GPU (one CUDA context when also its process:
 * exec_share.c), learnt from every rank's device, and the fewest multiprocessors of any rank's
 * GPU (exec_native_block_cap). Collective. */
static mscclrt_result mp_sharing(mscclrt_comm *c, const char *fn) {
    /* device, SMs and PCI location per rank */
    int *devs = calloc(3 * (size_t)c->nranks, sizeof *devs);
    if (!devs) return rt_fail(MSCCLRT_ERR_SYSTEM, "%s: out of memory", fn);
    int sms = 0;
    if (cu.cuDeviceGetAttribute(&sms, CU_ATTR_SM_COUNT, c->dev) != CU_OK) sms = 0;
    devs[3 * c->rank] = c->device;
    devs[3 * c->rank + 1] = sms;
    devs[3 * c->rank + 2] = pci_location(c->dev);
    mscclrt_result res = boot_allgather(c->boot, devs, 3 * sizeof *devs);
    int sm_min = 0, same = 0;
    const int pci = devs[3 * c->rank + 2];
    for (int q = 0; q < c->nranks && res == MSCCLRT_SUCCESS; q++) {
        const int k = devs[3 * q + 1];
        if (k > 0 && (sm_min == 0 || k < sm_min)) sm_min = k;
        if (q == c->rank || boot_node_of(c->boot, q) != boot_node(c->boot)) continue;
        /* the same GPU: by PCI location where both know it (device ordinals differ between
         * processes that see different CUDA_VISIBLE_DEVICES), else by ordinal */
        const int qpci = devs[3 * q + 2];
        if (pci >= 0 && qpci >= 0 ? qpci == pci : devs[3 * q] == c->device) same++;
        if (devs[3 * q] == c->device && boot_pid_of(c->boot, q) == (int)getpid())
            c->shares_context = true;
    }
    c->sm_min = sm_min;
    c->gpu_shared = same > 0;
    /* compact to one device per rank (q <= 3q: read before written) */
    for (int q = 0; q < c->nranks; q++) devs[q] = devs[3 * q];
    if (res == MSCCLRT_SUCCESS) {
        c->context_share_max = group_shares(c->boot, devs, c->nranks);
        c->group_shares_context = c->context_share_max > 1;
        if (!c->context_share_max) res = rt_fail(MSCCLRT_ERR_SYSTEM, "%s: out of memory", fn);
    }
    if (same)   /* NCCL refuses this; libmscclrt allows it (tests run many ranks on one GPU) */
        LOG_INFO(LOG_SUB_INIT, "rank %d: %d other rank(s) of this group use device %d of this "
                 "host too", c->rank, same, c->device);
    free(devs);
    return res;
}

mscclrt_result exec_comm_connect(mscclrt_comm *c, Boot *boot, const char *fn) {
    c->boot = boot;
    CuContext prev;
    TRY(exec_cuda_current(c, &prev));
    mscclrt_result res = xport_ipc_create(&c->xport, c->boot);
    if (res == MSCCLRT_SUCCESS && boot_nnodes(boot) > 1) {   /* every rank sees the same count */
        NetOptions o = {.cu_ctx = c->ctx, .cu_device = c->device};
        res = net_create(&c->net, c->boot, &o);
    }
    exec_cuda_restore(c, prev);
    return res == MSCCLRT_SUCCESS ? mp_sharing(c, fn) : res;
}

/* A plan may reach a rank on another node only through port channels run by the proxy: there
 * is no mapping of that rank's memory for memory channels or SM stores to use. */
static mscclrt_result mp_check_remote(const mscclrt_comm *c, const ExecCtx *x) {
    const Plan *p = x->plan;
    const PlanGpu *g = &p->gpus[c->rank];
    for (int ch = 0; ch < g->npeers[0]; ch++)
        if (net_peer_remote(c->net, g->peers[0][ch]))
            return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s': rank %d has memory channel %d to rank "
                           "%d, which is on another node (only port channels cross nodes)",
                           PLAN_ESC(p->name), c->rank, ch, g->peers[0][ch]);
    for (int b = 0; b < g->nremotes; b++)
        if (g->remotes[b].access[0] && net_peer_remote(c->net, g->remotes[b].rank))
            return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s': rank %d reads or writes remote buffer "
                           "%d of rank %d through a memory channel, but that rank is on another "
                           "node", PLAN_ESC(p->name), c->rank, b, g->remotes[b].rank);
    bool port_remote = false;
    for (int ch = 0; ch < g->npeers[1]; ch++) port_remote |= net_peer_remote(c->net, g->peers[1][ch]);
    if (port_remote && !x->layout.uses_proxy)
        return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s': rank %d has port channels to another node, "
                       "which need the proxy (unset MSCCLRT_PORT_PROXY=0)", PLAN_ESC(p->name),
                       c->rank);
    return MSCCLRT_SUCCESS;
}

/* exec_scratch_host's rule with this communicator's network and MSCCLRT_SOCKET_HOST_SCRATCH */
static mscclrt_result scratch_to_host(mscclrt_comm *c, const ExecCtx *x, bool *yes) {
    long long most = 0;
    TRY(param_int(PARAM_SOCKET_HOST_SCRATCH, &most));
    *yes = exec_scratch_host(x->plan, x->scratch_bytes, net_stages_device(c->net),
                             net_remote_count(c->net), c->nranks, (uint64_t)most);
    return MSCCLRT_SUCCESS;
}

mscclrt_result exec_mp_setup(mscclrt_comm *c, ExecCtx *x) {
    const int n = c->nranks, r = c->rank;
    const Plan *p = x->plan;
    mscclrt_result res = MSCCLRT_SUCCESS;
    uint64_t *sizes = calloc((size_t)n, sizeof *sizes);
    mk_u64 *ptr = calloc((size_t)n * 4, sizeof *ptr);
    if (!sizes || !ptr) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory for the setup", r);
        goto out;
    }
    /* 1: one scratch size everywhere (the double-buffer half applies to peers' scratch too) */
    size_t mine = 0;
    TRY_GOTO(exec_scratch_size(p, r, x->keyed, x->send, x->recv, x->span, &mine), res, out);
    sizes[r] = mine;
    TRY_GOTO(boot_allgather(c->boot, sizes, sizeof *sizes), res, out);
    uint64_t most = 0;
    for (int q = 0; q < n; q++) most = sizes[q] > most ? sizes[q] : most;
    x->scratch_bytes = p->gpus[r].scratch_chunks ? (size_t)most : 0;
    TRY_GOTO(scratch_to_host(c, x, &x->scratch_host), res, out);
    TRY_GOTO(exec_ctx_alloc(c, x), res, out);
    TRY_GOTO(cu_check(cu.cuCtxSynchronize(), "cuCtxSynchronize(setup)"), res, out);
    /* 2: export send, recv, scratch (the state block when there is none) and state; a context
     * that is not keyed by buffers exports no user buffer (peers never reach them) */
    CuDevPtr own[4] = {(CuDevPtr)(uintptr_t)x->send, (CuDevPtr)(uintptr_t)x->recv,
                       x->scratch ? x->scratch : x->state, x->state};
    size_t len[4] = {x->send_range, x->recv_range,
                     x->scratch ? x->scratch_bytes : x->layout.state_bytes, x->layout.state_bytes};
    const int k0 = x->keyed ? 0 : 2;
    IpcDesc d[4];
    memset(d, 0, sizeof d);
    /* a host scratch has no peer on this node to map it (scratch_to_host) */
    for (int k = k0; k < 4; k++)
        if (!(k == 2 && x->scratch_host))
            TRY_GOTO(xport_ipc_export(c->xport, own[k], len[k], &d[k]), res, out);
    NetMemDesc nd[4];
    if (net_remote_count(c->net)) {   /* the same buffers, as targets for other nodes */
        TRY_GOTO(mp_check_remote(c, x), res, out);
        x->net = c->net;
        for (int k = k0; k < 4; k++)
            TRY_GOTO(k == 2 && x->scratch_host ? net_reg_host(c->net, x, own[k], len[k], &nd[k])
                                               : net_reg(c->net, x, own[k], len[k], &nd[k]), res, out);
    }
    x->xport = c->xport;
    x->imports = calloc((size_t)n * 4, sizeof *x->imports);
    if (!x->imports) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory for the setup", r);
        goto out;
    }
    /* 3: in n - 1 steps, to rank r + s and from rank r - s: a cuMem buffer's descriptor carries
     * a file descriptor through a Unix datagram socket whose queue holds few (sending to every
     * peer first filled it at 8 ranks, and every rank then waited for room) */
    for (int k = k0; k < 4; k++) ptr[r * 4 + k] = own[k];
    for (int s = 1; s < n; s++) {
        const int to = (r + s) % n, q = (r - s + n) % n;
        if (net_peer_remote(c->net, to)) {
            for (int k = k0; k < 4; k++)
                TRY_GOTO(boot_send(c->boot, to, EXEC_NET_TAG, &nd[k], sizeof nd[k]), res, out);
        } else {
            for (int k = k0; k < 4; k++)
                TRY_GOTO(xport_ipc_send(c->xport, to, EXEC_MP_TAG, &d[k]), res, out);
        }
        for (int k = k0; k < 4 && net_peer_remote(c->net, q); k++) {
            NetMemDesc pd;
            uint64_t win = 0;
            TRY_GOTO(boot_recv(c->boot, q, EXEC_NET_TAG, &pd, sizeof pd), res, out);
            TRY_GOTO(net_import(c->net, x, q, &pd, &win), res, out);
            ptr[q * 4 + k] = win;
        }
        for (int k = k0; k < 4 && !net_peer_remote(c->net, q); k++) {
            IpcDesc pd;
            CuDevPtr mapped = 0;
            TRY_GOTO(xport_ipc_recv(c->xport, q, EXEC_MP_TAG, &pd), res, out);
            TRY_GOTO(xport_ipc_import(c->xport, &pd, &mapped), res, out);
            x->imports[x->nimports++] = mapped;   /* closed with the context */
            ptr[q * 4 + k] = mapped;
        }
    }
    mk_u64 *sb = malloc((size_t)n * 4 * sizeof *sb);
    if (!sb) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "rank %d: out of memory for the setup", r);
        goto out;
    }
    for (int q = 0; q < n; q++) {
        sb[q] = ptr[q * 4 + 0];
        sb[n + q] = ptr[q * 4 + 1];
        sb[2 * n + q] = ptr[q * 4 + 2];
        sb[3 * n + q] = ptr[q * 4 + 3];
    }
    exec_fill_table(x, r, sb, sb + n, sb + 2 * n, sb + 3 * n);
    free(sb);
    TRY_GOTO(exec_nvls_setup(&c, &x, 1, c->boot), res, out);   /* switch channels, if any */
    /* every peer has mapped our memory before anyone launches */
    TRY_GOTO(boot_barrier(c->boot), res, out);
    LOG_INFO(LOG_SUB_EXEC, "rank %d: plan '%s' set up over IPC (scratch %zu bytes)", r,
             PLAN_ESC(p->name), x->scratch_bytes);
out:
    free(sizes);
    free(ptr);
    return res;
}

void exec_mp_quiesce(mscclrt_comm *c) {
    if (c->boot && boot_barrier(c->boot) != MSCCLRT_SUCCESS)
        LOG_WARN("rank %d: teardown barrier failed: %s", c->rank, mscclrt_last_error());
}

void exec_mp_close(mscclrt_comm *c) {
    net_destroy(c->net);   /* before the bootstrap it borrows */
    c->net = NULL;
    if (c->xport) xport_ipc_destroy(c->xport);
    c->xport = NULL;
    if (c->boot) boot_close(c->boot);
    c->boot = NULL;
}

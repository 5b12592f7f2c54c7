/*
 * net_topo.c - which NIC serves which GPU, from the PCI topology in sysfs: a device's canonical
 * path (realpath of /sys/bus/pci/devices/ADDR) lists its root complex ("pci0000:00") and every
 * bridge above it, so two devices share a PCIe switch when their paths share a bridge below
 * the root complex, a root complex when they share only that, and otherwise are compared by
 * NUMA node. The root is MSCCLRT_SYSFS_ROOT (tests build fake trees) or /sys.
 */
#include "net/net.h"
#include "core/err.h"
#include "core/log.h"
#include "core/param.h"
#include "cuda/cuda_driver.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *net_sysfs_root(void) {
    const char *r = param_str(PARAM_SYSFS_ROOT);
    return *r ? r : "/sys";
}

const char *net_dist_name(NetDist d) {
    static const char *const names[] = {"same PCIe switch", "same root complex",
                                        "same NUMA node", "other socket"};
    return d >= NET_DIST_SWITCH && d <= NET_DIST_FAR ? names[d] : "?";
}

static int read_int(const char *path, int dflt) {
    FILE *f = fopen(path, "r");
    if (!f) return dflt;
    int v = dflt;
    if (fscanf(f, "%d", &v) != 1) v = dflt;
    fclose(f);
    return v;
}

static int cmp_nic(const void *a, const void *b) {
    return strcmp(((const NetNic *)a)->name, ((const NetNic *)b)->name);
}

mscclrt_result net_topo_nics(const char *root, NetNicKind kind, const NetMatchList *l,
                             NetNic *out, int max, int *count) {
    *count = 0;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/class/%s", root, kind == NET_NIC_IB ? "infiniband" : "net");
    DIR *d = opendir(dir);
    if (!d) return MSCCLRT_SUCCESS;   /* no such class: no NICs of this kind */
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) && n < max) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof out[0].name) continue;
        if (!net_match(l, e->d_name, 0)) continue;
        NetNic *c = &out[n];
        memset(c, 0, sizeof *c);
        snprintf(c->name, sizeof c->name, "%s", e->d_name);
        c->kind = kind;
        c->numa = -1;
        char link[PATH_MAX + 300], real[PATH_MAX];
        snprintf(link, sizeof link, "%s/%s/device", dir, e->d_name);
        if (realpath(link, real)) {   /* virtual interfaces (lo, bridges) have no device */
            const char *base = strrchr(real, '/');
            snprintf(c->pci, sizeof c->pci, "%.31s", base ? base + 1 : real);
            char numa[PATH_MAX + 16];
            snprintf(numa, sizeof numa, "%s/numa_node", real);
            c->numa = read_int(numa, -1);
        }
        n++;
    }
    closedir(d);
    qsort(out, (size_t)n, sizeof *out, cmp_nic);
    *count = n;
    return MSCCLRT_SUCCESS;
}

/* The canonical path of PCI device addr, split at '/' into comps (pointers into buf). */
static int pci_path(const char *root, const char *addr, char *buf, size_t len, char **comps,
                    int maxc) {
    char link[PATH_MAX];
    snprintf(link, sizeof link, "%s/bus/pci/devices/%s", root, addr);
    if (!*addr || !realpath(link, buf) || strlen(buf) >= len) return 0;
    int n = 0;
    for (char *s = strtok(buf, "/"); s && n < maxc; s = strtok(NULL, "/")) comps[n++] = s;
    return n;
}

static int numa_of(const char *root, const char *addr) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/bus/pci/devices/%s/numa_node", root, addr);
    return read_int(p, -1);
}

NetDist net_topo_dist(const char *root, const char *gpu_pci, const NetNic *nic) {
    char gb[PATH_MAX], nb[PATH_MAX];
    char *g[64], *c[64];
    int ng = pci_path(root, gpu_pci, gb, sizeof gb, g, 64);
    int nn = pci_path(root, nic->pci, nb, sizeof nb, c, 64);
    int gi = -1, ni = -1;   /* the root complex component ("pciDDDD:BB") of each */
    for (int i = 0; i < ng && gi < 0; i++) if (strncmp(g[i], "pci", 3) == 0) gi = i;
    for (int i = 0; i < nn && ni < 0; i++) if (strncmp(c[i], "pci", 3) == 0) ni = i;
    if (gi >= 0 && ni >= 0 && strcmp(g[gi], c[ni]) == 0) {
        int k = 0;   /* bridges shared below the root complex (the devices themselves excluded) */
        while (gi + 1 + k < ng - 1 && ni + 1 + k < nn - 1 &&
               strcmp(g[gi + 1 + k], c[ni + 1 + k]) == 0)
            k++;
        return k > 0 ? NET_DIST_SWITCH : NET_DIST_ROOT;
    }
    int a = numa_of(root, gpu_pci), b = nic->numa;
    return a >= 0 && a == b ? NET_DIST_NUMA : NET_DIST_FAR;
}

mscclrt_result net_topo_assign(const char *root, const char *const *gpu_pci, int ngpus,
                               const NetNic *nics, int nnics, int *choice) {
    if (nnics <= 0) {
        for (int i = 0; i < ngpus; i++) choice[i] = -1;
        return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "net: no NIC to assign to %d GPU(s)", ngpus);
    }
    int *used = calloc((size_t)nnics, sizeof *used);
    if (!used) return rt_fail(MSCCLRT_ERR_SYSTEM, "net: out of memory");
    for (int i = 0; i < ngpus; i++) {
        int best = -1;
        NetDist bd = NET_DIST_FAR;
        for (int j = 0; j < nnics; j++) {
            NetDist d = net_topo_dist(root, gpu_pci[i], &nics[j]);
            /* nearest class first; among equals the NIC fewer GPUs use (spreads ties) */
            if (best < 0 || d < bd || (d == bd && used[j] < used[best])) {
                best = j;
                bd = d;
            }
        }
        choice[i] = best;
        used[best]++;
        LOG_INFO(LOG_SUB_XPORT, "net: GPU %s -> NIC %s (%s)", gpu_pci[i], nics[best].name,
                 net_dist_name(bd));
    }
    free(used);
    return MSCCLRT_SUCCESS;
}

void net_topo_log_gpu(int rank, int device) {
    CuDevice d;
    char gpu[32];
    if (cu.cuDeviceGet(&d, device) != CU_OK || !cu_device_pci(d, gpu, sizeof gpu)) return;
    const char *root = net_sysfs_root();
    NetMatchList hca, ifn;
    if (net_match_parse("MSCCLRT_IB_HCA", param_str(PARAM_IB_HCA), &hca) != MSCCLRT_SUCCESS ||
        net_match_parse("MSCCLRT_SOCKET_IFNAME", param_str(PARAM_SOCKET_IFNAME), &ifn) !=
        MSCCLRT_SUCCESS)
        return;
    for (int k = 0; k < 2; k++) {
        NetNic nics[64];
        int n = 0;
        NetNicKind kind = k == 0 ? NET_NIC_IB : NET_NIC_ETH;
        net_topo_nics(root, kind, k == 0 ? &hca : &ifn, nics, 64, &n);
        int best = -1;
        NetDist bd = NET_DIST_FAR;
        for (int j = 0; j < n; j++) {
            if (!nics[j].pci[0]) continue;   /* virtual interfaces serve no GPU */
            NetDist dd = net_topo_dist(root, gpu, &nics[j]);
            if (best < 0 || dd < bd) best = j, bd = dd;
        }
        if (best >= 0)
            LOG_INFO(LOG_SUB_XPORT, "rank %d: GPU %d (%s): nearest %s NIC %s (%s)", rank,
                     device, gpu, k == 0 ? "RDMA" : "Ethernet", nics[best].name,
                     net_dist_name(bd));
    }
}

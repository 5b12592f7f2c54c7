/*
 * test_net_topo.c - NIC selection against sysfs trees the test builds (devices/pci0000:XX/...
 * with bus/pci/devices and class/{infiniband,net} links, numa_node files): one NIC for all
 * GPUs; a NIC per GPU pair behind shared PCIe switches; NICs only on the other socket; ties
 * spread across GPUs; and the NCCL list syntax of MSCCLRT_IB_HCA / MSCCLRT_SOCKET_IFNAME
 * (prefixes, ports, '^' exclusion, '=' exact names, malformed lists).
 */
#include "net/net.h"
#include "core/err.h"
#include "../harness.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[1024];   /* short, so every path built from it fits */

static void mkdirs(const char *path) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(tmp, 0755); *p = '/'; }
    mkdir(tmp, 0755);
}

static void put_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) { fputs(text, f); fclose(f); }
}

/* A PCI device at chain (e.g. "pci0000:00/0000:00:01.0/0000:01:00.0") on numa node. */
static void pci_dev(const char *chain, int numa) {
    char dir[PATH_MAX], link[PATH_MAX], target[PATH_MAX], num[16];
    snprintf(dir, sizeof dir, "%s/devices/%s", root, chain);
    mkdirs(dir);
    snprintf(num, sizeof num, "%d\n", numa);
    char f[PATH_MAX + 16];
    snprintf(f, sizeof f, "%s/numa_node", dir);
    put_file(f, num);
    const char *addr = strrchr(chain, '/') + 1;
    snprintf(link, sizeof link, "%s/bus/pci/devices", root);
    mkdirs(link);
    snprintf(link, sizeof link, "%s/bus/pci/devices/%s", root, addr);
    snprintf(target, sizeof target, "../../../devices/%s", chain);
    symlink(target, link);
}

static void nic(const char *cls, const char *name, const char *chain) {
    char dir[PATH_MAX], link[PATH_MAX + 16], target[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/class/%s/%s", root, cls, name);
    mkdirs(dir);
    if (!chain) return;   /* virtual: no device link */
    snprintf(link, sizeof link, "%s/device", dir);
    snprintf(target, sizeof target, "../../../devices/%s", chain);
    symlink(target, link);
}

static void fresh_root(const char *tag) {
    snprintf(root, sizeof root, "%s/mscclrt-topo-%d-%s", getenv("TMPDIR") ? getenv("TMPDIR")
             : "/tmp", (int)getpid(), tag);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "cannot clean %s\n", root);
    mkdirs(root);
}

static void drop_root(void) {
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", root);
}

static NetNic nics[8];
static int n, choice[8];

static void case_0(void) {
        fresh_root("one");
        pci_dev("pci0000:00/0000:00:01.0/0000:01:00.0", 0);            /* GPU 0 */
        pci_dev("pci0000:00/0000:00:02.0/0000:02:00.0", 0);            /* GPU 1 */
        pci_dev("pci0000:00/0000:00:03.0/0000:03:00.0", 0);            /* NIC */
        nic("infiniband", "mlx5_0", "pci0000:00/0000:00:03.0/0000:03:00.0");
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_topo_nics(root, NET_NIC_IB, NULL, nics, 8, &n));
        CHECK_EQ_INT(1, n);
        CHECK_STR("0000:03:00.0", nics[0].pci);
        CHECK_EQ_INT(0, nics[0].numa);
        const char *g[] = {"0000:01:00.0", "0000:02:00.0"};
        CHECK_EQ_INT(NET_DIST_ROOT, net_topo_dist(root, g[0], &nics[0]));
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_topo_assign(root, g, 2, nics, n, choice));
        CHECK_EQ_INT(0, choice[0]);
        CHECK_EQ_INT(0, choice[1]);
        drop_root();
}

static void case_1(void) {
        fresh_root("pairs");
        /* two switches, each with two GPUs and one NIC; NICs listed in the opposite order */
        const char *sw[2] = {"pci0000:00/0000:00:01.0/0000:10:00.0",
                             "pci0000:00/0000:00:02.0/0000:20:00.0"};
        char c[8][PATH_MAX];
        for (int s = 0; s < 2; s++) {
            pci_dev(sw[s], 0);
            for (int k = 0; k < 3; k++) {
                snprintf(c[s * 3 + k], PATH_MAX, "%s/0000:%d1:0%d.0", sw[s], s + 1, k);
                pci_dev(c[s * 3 + k], 0);
            }
        }
        nic("infiniband", "mlx5_1", c[2]);
        nic("infiniband", "mlx5_0", c[5]);
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_topo_nics(root, NET_NIC_IB, NULL, nics, 8, &n));
        CHECK_EQ_INT(2, n);
        CHECK_STR("mlx5_0", nics[0].name);     /* sorted by name */
        const char *g[4];
        char a[4][32];
        for (int i = 0; i < 4; i++) {
            snprintf(a[i], sizeof a[i], "%s", strrchr(c[(i / 2) * 3 + i % 2], '/') + 1);
            g[i] = a[i];
        }
        CHECK_EQ_INT(NET_DIST_SWITCH, net_topo_dist(root, g[0], &nics[1]));
        CHECK_EQ_INT(NET_DIST_ROOT, net_topo_dist(root, g[0], &nics[0]));
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_topo_assign(root, g, 4, nics, n, choice));
        CHECK_EQ_INT(1, choice[0]);   /* GPUs 0, 1 share mlx5_1's switch */
        CHECK_EQ_INT(1, choice[1]);
        CHECK_EQ_INT(0, choice[2]);
        CHECK_EQ_INT(0, choice[3]);
        drop_root();
}

static void case_2(void) {
        fresh_root("far");
        pci_dev("pci0000:00/0000:00:01.0/0000:01:00.0", 0);   /* GPU 0, socket 0 */
        pci_dev("pci0000:00/0000:00:02.0/0000:02:00.0", 0);   /* GPU 1, socket 0 */
        pci_dev("pci0000:80/0000:80:01.0/0000:81:00.0", 1);   /* NICs on socket 1 */
        pci_dev("pci0000:80/0000:80:02.0/0000:82:00.0", 1);
        pci_dev("pci0000:40/0000:40:01.0/0000:41:00.0", 0);   /* socket 0, other root complex */
        nic("infiniband", "mlx5_0", "pci0000:80/0000:80:01.0/0000:81:00.0");
        nic("infiniband", "mlx5_1", "pci0000:80/0000:80:02.0/0000:82:00.0");
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_topo_nics(root, NET_NIC_IB, NULL, nics, 8, &n));
        const char *g[] = {"0000:01:00.0", "0000:02:00.0"};
        CHECK_EQ_INT(NET_DIST_FAR, net_topo_dist(root, g[0], &nics[0]));
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_topo_assign(root, g, 2, nics, n, choice));
        CHECK_EQ_INT(0, choice[0]);
        CHECK_EQ_INT(1, choice[1]);   /* equally far: the unused one */
        /* an Ethernet NIC on the GPUs' NUMA node beats them; lo has no device */
        nic("net", "eth9", "pci0000:40/0000:40:01.0/0000:41:00.0");
        nic("net", "lo", NULL);
        NetNic eth[4];
        int ne = 0;
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_topo_nics(root, NET_NIC_ETH, NULL, eth, 4, &ne));
        CHECK_EQ_INT(2, ne);
        CHECK_STR("", eth[1].pci);       /* lo */
        CHECK_EQ_INT(NET_DIST_NUMA, net_topo_dist(root, g[0], &eth[0]));
        CHECK_EQ_INT(NET_DIST_FAR, net_topo_dist(root, g[0], &eth[1]));
        /* MSCCLRT_IB_HCA-style filtering */
        NetMatchList l;
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_match_parse("MSCCLRT_IB_HCA", "^mlx5_0", &l));
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_topo_nics(root, NET_NIC_IB, &l, nics, 8, &n));
        CHECK_EQ_INT(1, n);
        CHECK_STR("mlx5_1", nics[0].name);
        drop_root();
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_topo_nics(root, NET_NIC_IB, NULL, nics, 8, &n));
        CHECK_EQ_INT(0, n);   /* no tree: no NICs, no error */
        CHECK_EQ_INT(MSCCLRT_ERR_UNAVAILABLE, net_topo_assign(root, g, 2, nics, 0, choice));
}

static void case_3(void) {
        NetMatchList l;
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_match_parse("X", "mlx5_0:1,mlx5_1", &l));
        CHECK_EQ_INT(2, l.n);
        CHECK(net_match(&l, "mlx5_0", 1));
        CHECK(!net_match(&l, "mlx5_0", 2));
        CHECK(net_match(&l, "mlx5_0", 0));      /* name-only question */
        CHECK(net_match(&l, "mlx5_10", 1));     /* prefix */
        CHECK(net_match(&l, "mlx5_1", 2));
        CHECK(!net_match(&l, "mlx4_0", 1));
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_match_parse("X", "=mlx5_1", &l));
        CHECK(net_match(&l, "mlx5_1", 1));
        CHECK(!net_match(&l, "mlx5_10", 1));    /* exact */
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_match_parse("X", "^docker,lo", &l));
        CHECK(!net_match(&l, "docker0", 0));
        CHECK(!net_match(&l, "lo", 0));
        CHECK(net_match(&l, "eth0", 0));
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_match_parse("X", "^=eth0", &l));
        CHECK(!net_match(&l, "eth0", 0));
        CHECK(net_match(&l, "eth01", 0));
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_match_parse("X", "", &l));
        CHECK(net_match(&l, "anything", 3));
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_match_parse("X", NULL, &l));
        CHECK_EQ_INT(MSCCLRT_SUCCESS, net_match_parse("X", "a,,b,", &l));
        CHECK_EQ_INT(2, l.n);
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, net_match_parse("MSCCLRT_IB_HCA", "mlx5_0:x", &l));
        CHECK_CONTAINS(mscclrt_last_error(), "MSCCLRT_IB_HCA");
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, net_match_parse("X", "mlx5_0:", &l));
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, net_match_parse("X", "mlx5_0:70000", &l));
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, net_match_parse("X", ":1", &l));
        char longname[200];
        memset(longname, 'a', sizeof longname - 1);
        longname[sizeof longname - 1] = 0;
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, net_match_parse("X", longname, &l));
        char many[400] = "";
        for (int i = 0; i < 40; i++) strcat(many, "e,");
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, net_match_parse("X", many, &l));
}

int main(void) {
    TEST("net/topo one NIC serves every GPU", case_0());
    TEST("net/topo a NIC per GPU pair behind PCIe switches", case_1());
    TEST("net/topo NICs on the other socket; ties spread across GPUs", case_2());
    TEST("net/match NCCL list syntax", case_3());
    return harness_report();
}

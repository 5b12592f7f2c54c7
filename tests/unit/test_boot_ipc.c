/*
 * test_boot_ipc.c - the IPC memory transport. Host-only parts run everywhere: descriptor checks,
 * transport selection by node (MSCCLRT_HOSTID children), and the clean "no CUDA driver" failure
 * that reaches every rank. With a GPU (probed in a child, so the parent never initialises CUDA
 * before forking), two forked ranks export, exchange, import and write into each other's legacy
 * (cuMemAlloc) and VMM (cuMemCreate, POSIX fd) buffers, and re-registration hits the caches.
 */
#include "bootstrap/boot_internal.h"
#include "transport/transport.h"
#include "cuda/cumem.h"
#include "core/err.h"
#include "../harness.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_OK(call) do { mscclrt_result r__ = (call); CHECK_EQ_INT(MSCCLRT_SUCCESS, r__); \
    if (r__ != MSCCLRT_SUCCESS) fprintf(stderr, "  -> %s\n", mscclrt_last_error()); } while (0)

static int wait_pids(const pid_t *pids, int n) {
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int st = 0;
        if (pids[i] <= 0 || waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            bad++;
            fprintf(stderr, "child %d: status 0x%x\n", i, st);
        }
    }
    return bad;
}

/* ---- descriptors ------------------------------------------------------------------------------ */

static IpcDesc good_desc(void) {
    IpcDesc d;
    memset(&d, 0, sizeof d);
    d.magic = IPC_DESC_MAGIC, d.version = IPC_DESC_VERSION, d.kind = IPC_KIND_LEGACY;
    d.owner_rank = 1, d.size = 1 << 20, d.offset = 4096, d.bytes = 65536;
    return d;
}

static void test_desc(void) {
    IpcDesc d = good_desc();
    CHECK_OK(ipc_desc_check(&d, 1));
    d.magic ^= 1;
    CHECK_EQ_INT(MSCCLRT_ERR_REMOTE, ipc_desc_check(&d, 1));
    CHECK_CONTAINS(mscclrt_last_error(), "rank 1 sent a descriptor with magic");
    d = good_desc(), d.version = 9;
    CHECK_EQ_INT(MSCCLRT_ERR_REMOTE, ipc_desc_check(&d, 1));
    d = good_desc(), d.kind = 3;
    CHECK_EQ_INT(MSCCLRT_ERR_REMOTE, ipc_desc_check(&d, 1));
    CHECK_CONTAINS(mscclrt_last_error(), "unknown kind 3");
    d = good_desc();
    CHECK_EQ_INT(MSCCLRT_ERR_REMOTE, ipc_desc_check(&d, 2));
    CHECK_CONTAINS(mscclrt_last_error(), "rank 2 sent a descriptor owned by rank 1");
    d = good_desc(), d.bytes = (1 << 20) - 4095;
    CHECK_EQ_INT(MSCCLRT_ERR_REMOTE, ipc_desc_check(&d, 1));
    CHECK_CONTAINS(mscclrt_last_error(), "outside its allocation of 1048576 bytes");
    d = good_desc(), d.offset = UINT64_MAX - 10, d.bytes = 100;   /* no wrap-around */
    CHECK_EQ_INT(MSCCLRT_ERR_REMOTE, ipc_desc_check(&d, 1));
}

/* ---- transport choice by node: re-executed children with their own MSCCLRT_HOSTID ----------- */

static int pick_child(void) {
    Boot *b = NULL;
    CHECK_OK(boot_init_env(&b));
    if (!b) return 1;
    int peer = 1 - boot_rank(b);
    bool same = strcmp(getenv("TEST_SAME"), "1") == 0;
    CHECK_EQ_INT(same, xport_ipc.can_connect(b, peer));
    CHECK(xport_pick(b, peer) == (same ? &xport_ipc : NULL));
    CHECK(xport_pick(b, boot_rank(b)) == &xport_ipc);
    CHECK_STR("ipc", xport_ipc.name);
    CHECK_OK(boot_barrier(b));
    boot_close(b);
    return h_failed ? 1 : 0;
}

static int test_pick(const char *host0, const char *host1) {
    BootAddr lo = {.family = 4, .addr = {127, 0, 0, 1}}, bound;
    int lfd;
    if (boot_listen(&lo, false, &lfd, &bound) != MSCCLRT_SUCCESS) return 1;
    close(lfd);
    int port = bound.port_be[0] << 8 | bound.port_be[1];
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        fflush(stdout);
        fflush(stderr);
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(30);
            char e[6][64];
            snprintf(e[0], 64, "MASTER_ADDR=127.0.0.1");
            snprintf(e[1], 64, "MASTER_PORT=%d", port);
            snprintf(e[2], 64, "RANK=%d", r);
            snprintf(e[3], 64, "WORLD_SIZE=2");
            snprintf(e[4], 64, "MSCCLRT_HOSTID=%s", r ? host1 : host0);
            snprintf(e[5], 64, "TEST_SAME=%d", strcmp(host0, host1) == 0);
            for (int i = 0; i < 6; i++) putenv(e[i]);
            static char name[] = "test_boot_ipc", flag[] = "--pick-child";
            char *argv[] = {name, flag, NULL};
            execv("/proc/self/exe", argv);
            _exit(127);
        }
    }
    return wait_pids(pids, 2);
}

/* ---- GPU: two forked ranks ------------------------------------------------------------------- */

/* A child that only reports how many devices it sees (0 without a driver). */
static int gpu_count(void) {
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0) {
        alarm(30);
        int n = 0;
        if (cu_load() == MSCCLRT_SUCCESS && cu.cuDeviceGetCount(&n) != CU_OK) n = 0;
        _exit(n > 100 ? 100 : n);
    }
    int st = 0;
    if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st)) return 0;
    return WEXITSTATUS(st);
}

typedef struct { CuDevPtr ptr; size_t size; bool vmm; } GpuBuf;

static mscclrt_result gpu_alloc(GpuBuf *g, bool vmm, int dev) {
    g->vmm = vmm;
    if (vmm) return cumem_alloc(&g->ptr, &g->size, 2 << 20, dev);
    g->size = 2 << 20;
    return cu_check(cu.cuMemAlloc(&g->ptr, g->size), "cuMemAlloc");
}

static void gpu_free(GpuBuf *g) {
    if (!g->ptr) return;
    if (g->vmm) cumem_free(g->ptr, g->size);
    else cu.cuMemFree(g->ptr);
    g->ptr = 0;
}

/* One round on one kind of memory between ranks 0 and 1. */
static void gpu_round(Boot *b, XportIpc *x, bool vmm, int dev, int tag) {
    int rank = boot_rank(b), peer = 1 - rank;
    GpuBuf g = {0};
    CHECK_OK(gpu_alloc(&g, vmm, dev));
    if (!g.ptr) return;
    CHECK_OK(cu_check(cu.cuMemsetD8(g.ptr, 0, g.size), "cuMemsetD8"));
    /* the clearing must land before the peer can write: a memset is asynchronous, and with both
     * ranks on one GPU the peer's write could otherwise run first and be cleared */
    CHECK_OK(cu_check(cu.cuCtxSynchronize(), "cuCtxSynchronize"));
    IpcDesc mine, theirs;
    CHECK_OK(xport_ipc_export(x, g.ptr + 4096, 65536, &mine));
    CHECK_EQ_INT(vmm ? IPC_KIND_VMM : IPC_KIND_LEGACY, mine.kind);
    CHECK_EQ_INT(4096, mine.offset);
    CHECK_EQ_INT(g.size, mine.size);
    CHECK_OK(xport_ipc_exchange(x, peer, tag, &mine, &theirs));
    CHECK_EQ_INT(peer, theirs.owner_rank);
    CuDevPtr pp = 0, pp2 = 0;
    CHECK_OK(xport_ipc_import(x, &theirs, &pp));
    /* write into the peer's buffer through the mapping; the peer checks its own memory */
    if (pp) CHECK_OK(cu_check(cu.cuMemsetD8(pp, (unsigned char)(0x40 + rank), 256), "cuMemsetD8 peer"));
    CHECK_OK(cu_check(cu.cuCtxSynchronize(), "cuCtxSynchronize"));
    CHECK_OK(boot_barrier(b));
    unsigned char host[256];
    CHECK_OK(cu_check(cu.cuMemcpyDtoH(host, g.ptr + 4096, sizeof host), "cuMemcpyDtoH"));
    int bad = 0;
    for (int i = 0; i < 256; i++) bad += host[i] != 0x40 + peer;
    CHECK_EQ_INT(0, bad);
    /* registering another range of the same allocation reuses the export and the mapping */
    IpcDesc mine2, theirs2;
    CHECK_OK(xport_ipc_export(x, g.ptr + 8192, 4096, &mine2));
    CHECK_EQ_INT(mine.export_id, mine2.export_id);
    CHECK_OK(xport_ipc_exchange(x, peer, tag + 1, &mine2, &theirs2));
    CHECK_OK(xport_ipc_import(x, &theirs2, &pp2));
    CHECK_EQ_INT(pp + 4096, pp2);
    CHECK_OK(xport_ipc_close(x, pp2));
    CHECK_OK(xport_ipc_close(x, pp));
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, xport_ipc_close(x, pp));
    /* a range past the allocation's end is refused */
    IpcDesc bad_desc;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, xport_ipc_export(x, g.ptr + g.size - 16, 32, &bad_desc));
    CHECK_OK(boot_barrier(b));   /* nobody frees memory the peer may still map */
    xport_ipc_deregister(x, g.ptr);
    gpu_free(&g);
}

static int gpu_child(const BootId *id, int rank, int ndev) {
    alarm(60);
    Boot *b = NULL;
    XportIpc *x = NULL;
    CHECK_OK(cu_load());
    int dev = rank % ndev, vmm_ok = 0, fd_ok = 0;
    CuDevice d;
    CuContext ctx;
    CHECK_OK(cu_check(cu.cuDeviceGet(&d, dev), "cuDeviceGet"));
    CHECK_OK(cu_check(cu.cuDevicePrimaryCtxRetain(&ctx, d), "cuDevicePrimaryCtxRetain"));
    CHECK_OK(cu_check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent"));
    cu.cuDeviceGetAttribute(&vmm_ok, CU_ATTR_VMM_SUPPORTED, d);
    cu.cuDeviceGetAttribute(&fd_ok, CU_ATTR_POSIX_FD_SUPPORTED, d);
    CHECK_OK(boot_init(&b, id, rank, 2, 20000));
    if (b) CHECK_OK(xport_ipc_create(&x, b));
    if (x) {
        gpu_round(b, x, false, dev, 10);
        if (vmm_ok && fd_ok) gpu_round(b, x, true, dev, 20);
        else if (rank == 0) printf("(device %d: no VMM/POSIX fd support; VMM round skipped)\n", dev);
    }
    xport_ipc_destroy(x);
    boot_close(b);
    return h_failed ? 1 : 0;
}

static void test_gpu(int ndev) {
    BootId id;
    CHECK_OK(boot_get_unique_id(&id));
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        fflush(stdout);
        fflush(stderr);
        pids[r] = fork();
        if (pids[r] == 0) _exit(gpu_child(&id, r, ndev));
    }
    CHECK_EQ_INT(0, wait_pids(pids, 2));
}

/* Thread mode: two ranks as threads of one process; imports return the exporter's own pointer. */
typedef struct { const BootId *id; int rank, ndev, failed; } GpuThread;

static void *gpu_thread(void *p) {
    GpuThread *t = p;
    Boot *b = NULL;
    XportIpc *x = NULL;
    CuDevice d;
    CuContext ctx;
    GpuBuf g = {0};
    int dev = t->rank % t->ndev, peer = 1 - t->rank;
    if (cu_check(cu.cuDeviceGet(&d, dev), "cuDeviceGet") || cu_check(cu.cuDevicePrimaryCtxRetain(&ctx, d), "retain") ||
        cu_check(cu.cuCtxSetCurrent(ctx), "set current") || boot_init(&b, t->id, t->rank, 2, 20000) ||
        xport_ipc_create(&x, b) || gpu_alloc(&g, false, dev)) {
        t->failed++;
        fprintf(stderr, "gpu thread %d: %s\n", t->rank, mscclrt_last_error());
        goto out;
    }
    IpcDesc mine, theirs;
    CuDevPtr pp = 0;
    unsigned char host[64];
    if (cu_check(cu.cuMemsetD8(g.ptr, 0, g.size), "memset") || xport_ipc_export(x, g.ptr + 512, 1024, &mine) ||
        xport_ipc_exchange(x, peer, 30, &mine, &theirs) || xport_ipc_import(x, &theirs, &pp)) {
        t->failed++;
        fprintf(stderr, "gpu thread %d: %s\n", t->rank, mscclrt_last_error());
        goto out;
    }
    t->failed += pp != theirs.base + 512;   /* same process: the exporter's address itself */
    t->failed += cu_check(cu.cuMemsetD8(pp, (unsigned char)(0x60 + t->rank), sizeof host), "memset peer") != 0;
    t->failed += cu_check(cu.cuCtxSynchronize(), "sync") != 0;
    t->failed += boot_barrier(b) != 0;
    t->failed += cu_check(cu.cuMemcpyDtoH(host, g.ptr + 512, sizeof host), "DtoH") != 0;
    for (size_t i = 0; i < sizeof host; i++) t->failed += host[i] != 0x60 + peer;
    t->failed += xport_ipc_close(x, pp) != 0;
    t->failed += boot_barrier(b) != 0;
out:
    xport_ipc_destroy(x);
    gpu_free(&g);
    boot_close(b);
    return NULL;
}

static int gpu_threads_child(const BootId *id, int ndev) {
    alarm(60);
    if (cu_load() != MSCCLRT_SUCCESS) return 1;
    pthread_t th[2];
    GpuThread t[2];
    for (int r = 0; r < 2; r++) {
        t[r] = (GpuThread){.id = id, .rank = r, .ndev = ndev};
        pthread_create(&th[r], NULL, gpu_thread, &t[r]);
    }
    int failed = 0;
    for (int r = 0; r < 2; r++) {
        pthread_join(th[r], NULL);
        failed += t[r].failed;
    }
    return failed ? 1 : 0;
}

static void test_gpu_threads(int ndev) {
    BootId id;
    CHECK_OK(boot_get_unique_id(&id));
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0) _exit(gpu_threads_child(&id, ndev));
    CHECK_EQ_INT(0, wait_pids(&p, 1));
}

/* Without a driver, xport_ipc_create fails on every rank with UNAVAILABLE, none hangs. */
static int nodriver_child(const BootId *id, int rank) {
    alarm(30);
    Boot *b = NULL;
    XportIpc *x = (XportIpc *)1;
    CHECK_OK(boot_init(&b, id, rank, 2, 5000));
    if (!b) return 1;
    CHECK_EQ_INT(MSCCLRT_ERR_UNAVAILABLE, xport_ipc_create(&x, b));
    CHECK(x == NULL);
    CHECK_CONTAINS(mscclrt_last_error(), "ipc: rank");
    CHECK_OK(boot_barrier(b));   /* the group is still usable */
    boot_close(b);
    return h_failed ? 1 : 0;
}

static void test_nodriver(void) {
    BootId id;
    CHECK_OK(boot_get_unique_id(&id));
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        fflush(stdout);
        fflush(stderr);
        pids[r] = fork();
        if (pids[r] == 0) _exit(nodriver_child(&id, r));
    }
    CHECK_EQ_INT(0, wait_pids(pids, 2));
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--pick-child") == 0) return pick_child();
    alarm(180);
    setenv("MSCCLRT_SOCKET_IFNAME", "lo", 0);
    TEST("xport/desc-check", test_desc());
    TEST("xport/pick-same-node", CHECK_EQ_INT(0, test_pick("hostA", "hostA")));
    TEST("xport/pick-other-node", CHECK_EQ_INT(0, test_pick("hostA", "hostB")));
    int ndev = gpu_count();
    if (ndev == 0) {
        TEST("xport/ipc-no-driver", test_nodriver());
        TEST_SKIP("xport/ipc-gpu", "a GPU");
        TEST_SKIP("xport/ipc-gpu-threads", "a GPU");
    } else {
        TEST_SKIP("xport/ipc-no-driver", "a machine without a CUDA driver");
        TEST("xport/ipc-gpu", test_gpu(ndev));
        TEST("xport/ipc-gpu-threads", test_gpu_threads(ndev));
    }
    return harness_report();
}

/*
 * test_gpu_p2p_nodes.c - send/recv on a communicator that spans nodes: 4 processes (rank r on
 * GPU r % ndev) split into two "nodes" of two ranks by MSCCLRT_HOSTID. Between the ranks of a
 * node, grouped send/recv (both directions at once, an odd count, two rounds on the same
 * buffers and one more on new ones) is served and correct; to a rank of the other node it is
 * refused with MSCCLRT_ERR_UNAVAILABLE naming both nodes. Skips (77) without a GPU.
 */
#include "../harness.h"

#include "core/err.h"
#include "cuda/cuda_driver.h"
#include "mscclrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NR 4

static float value(int from, int to, size_t i, int k) { return (float)(from * 100 + to * 10 + (int)(i % 7) + k); }

static int child(mscclrt_unique_id id, int r, int ndev) {
    char hostid[32];
    snprintf(hostid, sizeof hostid, "node-%d", r / 2);
    setenv("MSCCLRT_HOSTID", hostid, 1);
    setenv("MSCCLRT_NET", "socket", 0);          /* the nodes share this host: loopback TCP */
    setenv("MSCCLRT_SOCKET_IFNAME", "lo", 0);
    mscclrt_comm *comm = NULL;
    if (mscclrt_comm_init_rank(&comm, NR, id, r, r % ndev) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", r, mscclrt_last_error());
        return 1;
    }
    CuContext ctx = NULL;
    CuDevice dev;
    cu.cuDeviceGet(&dev, r % ndev);
    cu.cuDevicePrimaryCtxRetain(&ctx, dev);
    cu.cuCtxSetCurrent(ctx);
    CuStream st = NULL;
    cu.cuStreamCreate(&st, 1);
    const int mate = r ^ 1, far = (r + 2) % NR;
    const size_t n = (1u << 18) + 5;
    float *host = malloc(n * 4);
    int bad = !host;
    for (int k = 0; k < 3 && !bad; k++) {
        CuDevPtr sb = 0, rb = 0;
        if (cu.cuMemAlloc(&sb, n * 4) != CU_OK || cu.cuMemAlloc(&rb, n * 4) != CU_OK) {
            bad = 1;
            break;
        }
        for (int again = 0; again < (k == 0 ? 2 : 1) && !bad; again++) {
            for (size_t i = 0; i < n; i++) host[i] = value(r, mate, i, k);
            cu.cuMemcpyHtoD(sb, host, n * 4);
            cu.cuMemsetD8(rb, 0xff, n * 4);
            mscclrt_group_start();
            mscclrt_result a = mscclrt_send(comm, (void *)(uintptr_t)sb, n, MSCCLRT_FLOAT32, mate, st);
            mscclrt_result b = mscclrt_recv(comm, (void *)(uintptr_t)rb, n, MSCCLRT_FLOAT32, mate, st);
            mscclrt_result e = mscclrt_group_end();
            if (a || b || e || cu.cuStreamSynchronize(st) != CU_OK) {
                fprintf(stderr, "rank %d: send/recv with rank %d: %s\n", r, mate, mscclrt_last_error());
                bad = 1;
                break;
            }
            cu.cuMemcpyDtoH(host, rb, n * 4);
            for (size_t i = 0; i < n && !bad; i++)
                if (host[i] != value(mate, r, i, k)) {
                    fprintf(stderr, "rank %d: round %d: element %zu from rank %d: got %g, want %g\n",
                            r, k, i, mate, host[i], value(mate, r, i, k));
                    bad = 1;
                }
        }
        cu.cuMemFree(sb);
        cu.cuMemFree(rb);
    }
    /* the other node: refused, with both nodes named, and the comm still works after it */
    const mscclrt_result far_r = mscclrt_send(comm, (void *)(uintptr_t)1, 1, MSCCLRT_FLOAT32, far, st);
    if (far_r != MSCCLRT_ERR_UNAVAILABLE || !strstr(mscclrt_last_error(), "another node")) {
        fprintf(stderr, "rank %d: send to rank %d of the other node: result %d (%s)\n", r, far,
                (int)far_r, mscclrt_last_error());
        bad = 1;
    }
    free(host);
    cu.cuStreamDestroy(st);
    mscclrt_comm_destroy(comm);
    cu.cuDevicePrimaryCtxRelease(dev);
    return bad;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *name = "gpu p2p across nodes: send/recv within each node of 2, refused between nodes";
    pid_t probe = fork();   /* the parent must not initialise CUDA before fork */
    if (probe == 0) {
        int c = 0;
        if (cu_load() != MSCCLRT_SUCCESS) _exit(77);
        _exit(cu.cuDeviceGetCount(&c) == CU_OK && c > 0 ? (c > 8 ? 8 : c) : 77);
    }
    int st = 0;
    waitpid(probe, &st, 0);
    const int ndev = WIFEXITED(st) ? WEXITSTATUS(st) : 77;
    if (ndev == 77) {
        TEST_SKIP(name, "a GPU");
        return 0;
    }
    mscclrt_unique_id id;
    if (mscclrt_get_unique_id(&id) != MSCCLRT_SUCCESS) return 1;
    pid_t kids[NR];
    fflush(stdout);
    for (int r = 0; r < NR; r++) {
        kids[r] = fork();
        if (kids[r] == 0) {
            alarm(240);
            _exit(child(id, r, ndev) ? 1 : 0);
        }
    }
    int bad = 0;
    for (int r = 0; r < NR; r++) {
        waitpid(kids[r], &st, 0);
        bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    TEST(name, CHECK_EQ_INT(0, bad));
    return harness_report();
}

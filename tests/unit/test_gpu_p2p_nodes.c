/*
 * test_gpu_p2p_nodes.c - send/recv on a communicator that spans nodes: 4 processes (rank r on
 * GPU r % ndev) split into two "nodes" of two ranks by MSCCLRT_HOSTID, over loopback TCP.
 *   - between the ranks of a node (mapped memory): grouped send/recv, both directions at once,
 *     an odd count, two rounds on the same buffers and one more on new ones;
 *   - between the nodes (the port proxy and the network): the same with the rank of the other
 *     node, at sizes from one element to several slots' worth per block (odd counts), and a
 *     group that talks to both at once (node mate and the other node, both directions);
 *   - allgather, in-place alltoall, broadcast, gather and scatter of 1001 bytes, which no
 *     multi-node program fits: composed of send/recv (algo_p2pcoll.c), checked; allreduce,
 *     reducescatter and reduce of 1001 floats (allreduce also in place): the built-in
 *     collectives over the port proxy;
 *   - with MSCCLRT_PORT_PROXY=0 a new communicator refuses send/recv to the other node with
 *     MSCCLRT_ERR_UNAVAILABLE naming both nodes (there is no path without the proxy), and still
 *     serves the node mate.
 * Skips (77) without a GPU.
 */
#include "../harness.h"
#include "gpu_probe.h"

#include "core/err.h"
#include "cuda/cuda_driver.h"
#include "mscclrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NR 4

static float value(int from, int to, size_t i, int k) { return (float)(from * 100 + to * 10 + (int)(i % 7) + k); }

/* One group: this rank sends to each peer of peers[] and receives from each (n floats each,
 * round k's values), then checks what arrived. 0 or 1 (with a message). */
/* P2P_TRACE=1: each step on stderr before it runs, so a run cut short shows where it waited */
static void step(int r, const char *what, size_t n, int peer, int k) {
    static int on = -1;
    if (on < 0) on = getenv("P2P_TRACE") != NULL;
    if (on) fprintf(stderr, "rank %d: %s of %zu with rank %d, round %d\n", r, what, n, peer, k);
}

/* cuStreamSynchronize with a deadline: a hang fails the step (with its name) instead of the
 * whole run's time limit. CU_OK when the stream finished. */
static CuResult sync_within(CuStream st, int secs) {
    for (long waited = 0; waited < secs * 1000L; waited++) {
        const CuResult q = cu.cuStreamQuery(st);
        if (q != CU_ERR_NOT_READY) return q;
        usleep(1000);
    }
    fprintf(stderr, "stream not finished after %d s\n", secs);
    return CU_ERR_NOT_READY;
}

static int exchange(mscclrt_comm *comm, int r, const int *peers, int np, size_t n, int k,
                    CuStream st, CuDevPtr *sb, CuDevPtr *rb, float *host) {
    step(r, np > 1 ? "send/recv (2 peers)" : "send/recv", n, peers[0], k);
    for (int j = 0; j < np; j++) {
        for (size_t i = 0; i < n; i++) host[i] = value(r, peers[j], i, k);
        cu.cuMemcpyHtoD(sb[j], host, n * 4);
        cu.cuMemsetD8(rb[j], 0xff, n * 4);
    }
    mscclrt_result res = mscclrt_group_start();
    for (int j = 0; j < np && res == MSCCLRT_SUCCESS; j++) {
        res = mscclrt_send(comm, (void *)(uintptr_t)sb[j], n, MSCCLRT_FLOAT32, peers[j], st);
        if (res == MSCCLRT_SUCCESS)
            res = mscclrt_recv(comm, (void *)(uintptr_t)rb[j], n, MSCCLRT_FLOAT32, peers[j], st);
    }
    const mscclrt_result e = mscclrt_group_end();
    if (res || e || sync_within(st, 30) != CU_OK) {
        fprintf(stderr, "rank %d: send/recv of %zu floats with rank %d%s: %s\n", r, n, peers[0],
                np > 1 ? " and more" : "", mscclrt_last_error());
        return 1;
    }
    for (int j = 0; j < np; j++) {
        cu.cuMemcpyDtoH(host, rb[j], n * 4);
        for (size_t i = 0; i < n; i++)
            if (host[i] != value(peers[j], r, i, k)) {
                fprintf(stderr, "rank %d: %zu floats, round %d: element %zu from rank %d: got %g, "
                        "want %g\n", r, n, k, i, peers[j], host[i], value(peers[j], r, i, k));
                return 1;
            }
    }
    return 0;
}

static uint8_t bval(int rank, size_t i) { return (uint8_t)(rank * 37 + i * 11 + 5); }

/* Collectives of an odd byte count across the nodes, which no multi-node program fits: they
 * run as send/recv composed (algo_p2pcoll.c), alltoall in place through staging. 0 or 1. */
static int composed(mscclrt_comm *comm, int r, CuStream st, CuDevPtr sb, CuDevPtr rb) {
    const size_t c = 1001, n = NR;
    uint8_t *h = malloc(n * c), *g = malloc(n * c);
    int bad = !h || !g;
    for (int which = 0; which < 5 && !bad; which++) {
        step(r, "composed collective", c, which % NR, which);
        const int root = which % NR;
        size_t in = c, out = c;
        mscclrt_result res;
        for (size_t i = 0; i < n * c; i++) h[i] = bval(r, i);
        cu.cuMemcpyHtoD(sb, h, n * c);
        cu.cuMemsetD8(rb, 0, n * c);
        const char *what = "";
        switch (which) {
        case 0: what = "allgather"; out = n * c;
            res = mscclrt_allgather(comm, (void *)(uintptr_t)sb, (void *)(uintptr_t)rb, c, MSCCLRT_UINT8, st); break;
        case 1: what = "alltoall in place"; in = out = n * c;
            res = mscclrt_alltoall(comm, (void *)(uintptr_t)sb, (void *)(uintptr_t)sb, c, MSCCLRT_UINT8, st); break;
        case 2: what = "broadcast";
            res = mscclrt_broadcast(comm, (void *)(uintptr_t)sb, (void *)(uintptr_t)rb, c, MSCCLRT_UINT8, root, st); break;
        case 3: what = "gather"; out = r == root ? n * c : 0;
            res = mscclrt_gather(comm, (void *)(uintptr_t)sb, (void *)(uintptr_t)rb, c, MSCCLRT_UINT8, root, st); break;
        default: what = "scatter"; in = n * c;
            res = mscclrt_scatter(comm, (void *)(uintptr_t)sb, (void *)(uintptr_t)rb, c, MSCCLRT_UINT8, root, st); break;
        }
        (void)in;
        if (res != MSCCLRT_SUCCESS || sync_within(st, 30) != CU_OK) {
            fprintf(stderr, "rank %d: %s of %zu bytes across nodes: %s\n", r, what, c, mscclrt_last_error());
            bad = 1;
            break;
        }
        cu.cuMemcpyDtoH(g, which == 1 ? sb : rb, out ? out : 1);
        for (size_t i = 0; i < out && !bad; i++) {
            const size_t blk = i / c, j = i % c;
            const uint8_t want = which == 0 ? bval((int)blk, j) : which == 1 ? bval((int)blk, (size_t)r * c + j)
                               : which == 2 ? bval(root, i) : which == 3 ? bval((int)blk, j)
                               : bval(root, (size_t)r * c + i);
            if (g[i] != want) {
                fprintf(stderr, "rank %d: %s of %zu bytes across nodes (root %d): byte %zu: got %u, "
                        "want %u\n", r, what, c, root, i, g[i], want);
                bad = 1;
            }
        }
    }
    free(h);
    free(g);
    return bad;
}

static float fval(int rank, size_t i) { return (float)(rank + 1) + (float)(i % 5); }

/* Reductions of 1001 floats across the nodes (4004 bytes: no multi-node program fits): the
 * built-in collectives' slot path, pieces to the other node through the port proxy; allreduce
 * also in place (the result must not overwrite a contribution the proxy has yet to read). 0 or 1. */
static int reductions(mscclrt_comm *comm, int r, CuStream st, CuDevPtr sb, CuDevPtr rb) {
    const size_t c = 1001, n = NR;
    float *h = malloc(n * c * sizeof *h);
    int bad = !h;
    for (int which = 0; which < 4 && !bad; which++) {
        step(r, "reduction over the proxy", 1001, -1, which);
        const int root = 1;
        for (size_t i = 0; i < n * c; i++) h[i] = fval(r, i);
        cu.cuMemcpyHtoD(sb, h, n * c * sizeof *h);
        cu.cuMemsetD8(rb, 0, n * c * sizeof *h);
        mscclrt_result res;
        const char *what;
        size_t out = c;
        if (which == 0) {
            what = "allreduce (sum)";
            res = mscclrt_allreduce(comm, (void *)(uintptr_t)sb, (void *)(uintptr_t)rb, c, MSCCLRT_FLOAT32, MSCCLRT_SUM, st);
        } else if (which == 1) {
            what = "reducescatter (sum)";
            res = mscclrt_reducescatter(comm, (void *)(uintptr_t)sb, (void *)(uintptr_t)rb, c, MSCCLRT_FLOAT32, MSCCLRT_SUM, st);
        } else if (which == 3) {
            what = "allreduce (sum, in place)";
            res = mscclrt_allreduce(comm, (void *)(uintptr_t)sb, (void *)(uintptr_t)sb, c, MSCCLRT_FLOAT32, MSCCLRT_SUM, st);
        } else {
            what = "reduce (max, root 1)";
            out = r == root ? c : 0;
            res = mscclrt_reduce(comm, (void *)(uintptr_t)sb, (void *)(uintptr_t)rb, c, MSCCLRT_FLOAT32, MSCCLRT_MAX, root, st);
        }
        if (res != MSCCLRT_SUCCESS || sync_within(st, 30) != CU_OK) {
            fprintf(stderr, "rank %d: %s of %zu floats across nodes: %s\n", r, what, c, mscclrt_last_error());
            bad = 1;
            break;
        }
        cu.cuMemcpyDtoH(h, which == 3 ? sb : rb, c * sizeof *h);
        for (size_t i = 0; i < out && !bad; i++) {
            const size_t at = which == 1 ? (size_t)r * c + i : i;   /* reducescatter: my block */
            float want = 0;
            for (int q = 0; q < NR; q++)
                want = which == 2 ? (q == 0 || fval(q, at) > want ? fval(q, at) : want) : want + fval(q, at);
            if (h[i] != want) {
                fprintf(stderr, "rank %d: %s of %zu floats across nodes: element %zu: got %g, want "
                        "%g\n", r, what, c, i, h[i], want);
                bad = 1;
            }
        }
    }
    free(h);
    return bad;
}

/* A rank in a process of its own, exec'd with its variables set (rank_exec): the library
 * reads its parameters once per process, so a forked rank would inherit what its parent read
 * (the unique id's creation reads them) and every rank would be on one node. noproxy:
 * MSCCLRT_PORT_PROXY=0. */
static int child(mscclrt_unique_id id, int r, int ndev, bool noproxy) {
    mscclrt_comm *comm = NULL;
    if (mscclrt_comm_init_rank(&comm, NR, id, r, r % ndev) != MSCCLRT_SUCCESS) {
        fprintf(stderr, "rank %d%s: %s\n", r, noproxy ? " (MSCCLRT_PORT_PROXY=0)" : "",
                mscclrt_last_error());
        return 1;
    }
    CuDevice dev;
    gpu_enter(r % ndev, &dev);
    CuStream st = NULL;
    cu.cuStreamCreate(&st, 1);
    const int mate = r ^ 1, far = (r + 2) % NR;
    const size_t big = (8u << 20) + 5;           /* several slots per block at 4 ranks */
    float *host = malloc(big * 4);
    CuDevPtr sb[2] = {0, 0}, rb[2] = {0, 0};
    int bad = !host;
    for (int j = 0; j < 2 && !bad; j++)
        bad = cu.cuMemAlloc(&sb[j], big * 4) != CU_OK || cu.cuMemAlloc(&rb[j], big * 4) != CU_OK;
    if (noproxy) {
        /* no proxy, no path across nodes: refused with both nodes named; the mate still served */
        const mscclrt_result far_r = bad ? MSCCLRT_ERR_UNAVAILABLE
            : mscclrt_send(comm, (void *)(uintptr_t)sb[0], 1, MSCCLRT_FLOAT32, far, st);
        if (far_r != MSCCLRT_ERR_UNAVAILABLE || !strstr(mscclrt_last_error(), "another node")) {
            fprintf(stderr, "rank %d: MSCCLRT_PORT_PROXY=0: send to rank %d of the other node: "
                    "result %d (%s)\n", r, far, (int)far_r, mscclrt_last_error());
            bad = 1;
        }
        if (!bad) bad = exchange(comm, r, &mate, 1, 1000, 5, st, sb, rb, host);
    }
    /* the node mate: rounds on the same buffers, then on new ones */
    for (int k = 0; k < 3 && !bad && !noproxy; k++) {
        if (k == 2) {
            cu.cuMemFree(sb[0]);
            cu.cuMemFree(rb[0]);
            bad = cu.cuMemAlloc(&sb[0], big * 4) != CU_OK || cu.cuMemAlloc(&rb[0], big * 4) != CU_OK;
        }
        if (!bad) bad = exchange(comm, r, &mate, 1, (1u << 18) + 5, k, st, sb, rb, host);
    }
    /* the other node, small to large (odd counts), twice each: the counters carry over */
    const size_t sizes[] = {1, 1000, (1u << 16) + 3, (1u << 20) + 7, (3u << 20) + 1, big};
    for (int i = 0; i < 6 && !bad && !noproxy; i++)
        for (int k = 0; k < 2 && !bad; k++) bad = exchange(comm, r, &far, 1, sizes[i], k, st, sb, rb, host);
    /* both at once: the node mate and the other node in one group */
    const int both[2] = {mate, far};
    for (int k = 0; k < 2 && !bad && !noproxy; k++)
        bad = exchange(comm, r, both, 2, (1u << 20) + 3, k, st, sb, rb, host);
    if (!bad && !noproxy) bad = composed(comm, r, st, sb[1], rb[1]);
    if (!bad && !noproxy) bad = reductions(comm, r, st, sb[1], rb[1]);
    if (bad) mscclrt_comm_abort(comm);   /* a peer may be gone or its kernel still waiting */
    else mscclrt_comm_destroy(comm);
    for (int j = 0; j < 2; j++) {
        if (sb[j]) cu.cuMemFree(sb[j]);
        if (rb[j]) cu.cuMemFree(rb[j]);
    }
    free(host);
    cu.cuStreamDestroy(st);
    cu.cuDevicePrimaryCtxRelease(dev);
    return bad;
}

/* the forked rank r becomes a new process of this program with its node's variables */
static void rank_exec(const mscclrt_unique_id *id, int r, int ndev, int phase) {
    char hostid[32], hex[2 * sizeof *id + 1], args[3][16];
    snprintf(hostid, sizeof hostid, "node-%d", r / 2);
    setenv("MSCCLRT_HOSTID", hostid, 1);
    setenv("MSCCLRT_NET", "socket", 0);          /* the nodes share this host: loopback TCP */
    setenv("MSCCLRT_SOCKET_IFNAME", "lo", 0);
    if (phase == 1) setenv("MSCCLRT_PORT_PROXY", "0", 1);
    const unsigned char *b = (const unsigned char *)id;
    for (size_t i = 0; i < sizeof *id; i++) snprintf(hex + 2 * i, 3, "%02x", b[i]);
    snprintf(args[0], sizeof args[0], "%d", r);
    snprintf(args[1], sizeof args[1], "%d", ndev);
    snprintf(args[2], sizeof args[2], "%d", phase);
    execl("/proc/self/exe", "test_gpu_p2p_nodes", "--rank", args[0], args[1], args[2], hex,
          (char *)NULL);
    _exit(127);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1 && strcmp(argv[1], "--rank") == 0) {   /* rank_exec's process */
        if (argc != 6) return 2;   /* never the whole test again: it would fork ranks itself */
        mscclrt_unique_id id;
        unsigned char *b = (unsigned char *)&id;
        if (strlen(argv[5]) != 2 * sizeof id) return 2;
        for (size_t i = 0; i < sizeof id; i++) {
            unsigned v = 0;
            if (sscanf(argv[5] + 2 * i, "%2x", &v) != 1) return 2;
            b[i] = (unsigned char)v;
        }
        alarm(240);
        return child(id, atoi(argv[2]), atoi(argv[3]), atoi(argv[4]) == 1) ? 1 : 0;
    }
    const char *name = "gpu p2p across nodes: send/recv within and between two nodes of 2 ranks";
    const int ndev = gpu_probe_count(8);
    if (ndev == 0) {
        TEST_SKIP(name, "a GPU");
        return 0;
    }
    /* each phase's unique id from a process of its own (the coordinator), whose ranks are
     * new processes (rank_exec) */
    int bad = 0;
    for (int phase = 0; phase < 2; phase++) {   /* with the proxy, then MSCCLRT_PORT_PROXY=0 */
        fflush(stdout);
        const pid_t coord = fork();
        if (coord == 0) {
            mscclrt_unique_id id;
            if (mscclrt_get_unique_id(&id) != MSCCLRT_SUCCESS) _exit(NR);
            pid_t kids[NR];
            for (int r = 0; r < NR; r++) {
                kids[r] = fork();
                if (kids[r] == 0) rank_exec(&id, r, ndev, phase);
            }
            int failed = 0;
            for (int r = 0; r < NR; r++) {
                int ks = 0;
                waitpid(kids[r], &ks, 0);
                failed += !WIFEXITED(ks) || WEXITSTATUS(ks) != 0;
            }
            _exit(failed);
        }
        int st = 0;
        waitpid(coord, &st, 0);
        bad += WIFEXITED(st) ? WEXITSTATUS(st) : NR;
    }
    TEST(name, CHECK_EQ_INT(0, bad));
    return harness_report();
}

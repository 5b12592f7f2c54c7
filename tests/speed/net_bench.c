/*
 * net_bench.c - throughput and latency of the socket transport of port channels between two
 * processes of this machine (loopback), against a plain TCP stream between the same two
 * processes in the same run. Host buffers by default; --gpu stages device memory (one GPU,
 * both ranks on it) and also times the parts of the staging path (DtoH into pinned memory,
 * HtoD from pinned memory). Sizes 4 KiB to --max (default 1 GiB).
 *   usage: net_bench [--gpu] [--max BYTES] [--nsocks N] [--lat-bytes N] [--lat-only]
 *                    [--spinner busy|yield] [--window BYTES [--window-piece BYTES]
 *                    [--window-depth N]]
 * --spinner starts one more thread in each rank that spins throughout, busy or yielding the core
 * at every turn: under `taskset -c 0` (every thread on one core, as mpirun binds a rank by
 * default) it shows what a thread that never yields does to the transport's woken threads.
 * Output: one line per size: size, transport GB/s, plain stream GB/s, ratio; then the
 * round-trip latencies of a --lat-bytes (default 8) put+signal and of a message of that size
 * on the plain stream (median and mean of 2000 round trips). --lat-only skips the sizes.
 * --window BYTES (host buffers) also times the built-in send/recv's protocol across nodes both
 * ways at once: pieces of --window-piece (256 KiB) into --window-depth (2, the kernel's two
 * halves) slots of the peer's area, each reused once the peer acknowledged what it held.
 */
#include "net/net_internal.h"
#include "core/err.h"
#include "cuda/cuda_driver.h"

#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TAG 0x4e42

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int die(const char *what) {
    fprintf(stderr, "net_bench: %s: %s\n", what, mscclrt_last_error());
    return 1;
}
#define OK(call, what) do { if ((call) != MSCCLRT_SUCCESS) return die(what); } while (0)

static uint64_t iters_for(uint64_t size) {
    uint64_t it = (512ull << 20) / size;   /* about 512 MiB per size, at least 4 messages */
    return it < 4 ? 4 : it > 20000 ? 20000 : it;
}

/* Rank 1's listen address to rank 0 (an allgather of two addresses). */
static mscclrt_result addr_of_rank1(Boot *b, int rank, NetAddr *a) {
    NetAddr both[2];
    memset(both, 0, sizeof both);
    both[rank] = *a;
    TRY(boot_allgather(b, both, sizeof *both));
    *a = both[1];
    return MSCCLRT_SUCCESS;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of n samples (sorts them). */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* --window BYTES (0: none), --window-piece BYTES, --window-depth N: the two-way windowed
 * exchange */
static uint64_t window, wpiece = 256u << 10, wdepth = 2;

/* --spinner: 0 none, 1 busy, 2 yielding; the thread stops when spin_stop is set */
static int spinner;
static atomic_int spin_stop;
static void *spin_main(void *arg) {
    (void)arg;
    while (!atomic_load_explicit(&spin_stop, memory_order_relaxed))
        if (spinner == 2) sched_yield();
    return NULL;
}

static int rank_run(int rank, const BootId *id, bool gpu, uint64_t max, int nsocks,
                    uint64_t lat_bytes, bool lat_only);
static int rank_main(int rank, const BootId *id, bool gpu, uint64_t max, int nsocks,
                     uint64_t lat_bytes, bool lat_only) {
    pthread_t th;
    const bool spin = spinner && pthread_create(&th, NULL, spin_main, NULL) == 0;
    int rc = rank_run(rank, id, gpu, max, nsocks, lat_bytes, lat_only);
    atomic_store(&spin_stop, 1);
    if (spin) pthread_join(th, NULL);
    return rc;
}

static int rank_run(int rank, const BootId *id, bool gpu, uint64_t max, int nsocks,
                    uint64_t lat_bytes, bool lat_only) {
    Boot *b = NULL;
    OK(boot_init(&b, id, rank, 2, 30000), "boot_init");
    CuContext ctx = NULL;
    if (gpu) {
        OK(cu_load(), "cu_load");
        CuDevice d;
        OK(cu_check(cu.cuDeviceGet(&d, 0), "cuDeviceGet"), "device");
        OK(cu_check(cu.cuDevicePrimaryCtxRetain(&ctx, d), "ctx"), "ctx");
        OK(cu_check(cu.cuCtxSetCurrent(ctx), "ctx"), "ctx");
    }
    NetOptions o = {.host_mem = !gpu, .cu_ctx = ctx, .cu_device = 0, .nsocks = nsocks,
                    .force = "socket", .ifname = "lo"};
    Net *n = NULL;
    OK(net_create(&n, b, &o), "net_create");
    uint64_t buf = 0, ctr = 0;
    if (gpu) {
        CuDevPtr p = 0, c = 0;
        OK(cu_check(cu.cuMemAlloc(&p, max), "cuMemAlloc"), "alloc");
        OK(cu_check(cu.cuMemAlloc(&c, 64), "cuMemAlloc"), "alloc");
        cu.cuMemsetD8(c, 0, 64);
        buf = p, ctr = c;
    } else {
        buf = (uint64_t)(uintptr_t)malloc(max);
        ctr = (uint64_t)(uintptr_t)calloc(8, 8);
        if (!buf || !ctr) return die("malloc");
        memset((void *)(uintptr_t)buf, 1, max);
    }
    NetMemDesc d[2], pd[2];
    OK(net_reg(n, &o, buf, max, &d[0]), "net_reg");
    OK(net_reg(n, &o, ctr, 64, &d[1]), "net_reg");
    const int peer = 1 - rank;
    OK(boot_send(b, peer, TAG, d, sizeof d), "send");
    OK(boot_recv(b, peer, TAG, pd, sizeof pd), "recv");
    uint64_t wbuf, wctr;
    OK(net_import(n, &o, peer, &pd[0], &wbuf), "import");
    OK(net_import(n, &o, peer, &pd[1], &wctr), "import");
    /* the plain stream: rank 1 listens, rank 0 connects */
    NetAddr a;
    int lfd = -1, fd = -1;
    if (rank == 1) {
        OK(net_sock_pick("lo", &a), "pick");
        OK(net_sock_listen(&a, &lfd), "listen");
    }
    OK(addr_of_rank1(b, rank, &a), "addr");
    if (rank == 0) OK(net_sock_connect(&a, 1, 10000, &fd), "connect");
    else if ((fd = accept(lfd, NULL, NULL)) < 0) return die("accept");
    char *hb = malloc(max < (64u << 20) ? max : (64u << 20));   /* plain stream's host buffer */
    if (!hb) return die("malloc");
    const size_t hbl = max < (64u << 20) ? max : (64u << 20);
    if (rank == 0 && !lat_only)
        printf("%12s %10s %10s %7s\n", "bytes", "net GB/s", "plain GB/s", "ratio");
    for (uint64_t size = 4096; !lat_only && size <= max; size *= 4) {
        uint64_t it = iters_for(size);
        OK(boot_barrier(b), "barrier");
        double tn = 0, tp = 0;
        if (rank == 0) {
            double t0 = now_s();
            for (uint64_t i = 0; i < it; i++) OK(net_put(n, wbuf, buf, size), "put");
            OK(net_flush(n), "flush");
            tn = now_s() - t0;
        }
        OK(boot_barrier(b), "barrier");
        if (rank == 0) {   /* plain: send it*size bytes, wait for the 1-byte answer */
            double t0 = now_s();
            for (uint64_t i = 0; i < it; i++)
                for (uint64_t o2 = 0; o2 < size; o2 += hbl)
                    if (net_sock_send_all(fd, hb, size - o2 < hbl ? size - o2 : hbl, -1))
                        return die("plain send");
            char c;
            if (net_sock_recv_all(fd, &c, 1, -1)) return die("plain ack");
            tp = now_s() - t0;
            printf("%12llu %10.2f %10.2f %6.0f%%\n", (unsigned long long)size,
                   size * it / tn / 1e9, size * it / tp / 1e9, 100 * tp / tn);
            fflush(stdout);
        } else {
            for (uint64_t left = size * it; left;) {
                uint64_t k = left < hbl ? left : hbl;
                if (net_sock_recv_all(fd, hb, k, -1)) return die("plain recv");
                left -= k;
            }
            char c = 1;
            if (net_sock_send_all(fd, &c, 1, -1)) return die("plain ack");
        }
    }
    /* --window: the built-in send/recv's protocol across nodes, both ways at once. Each rank
     * sends `window` bytes to the other in pieces of wpiece bytes into wdepth slots of the
     * peer's area (2: the kernel's two halves): piece k (from 0) goes into slot k % wdepth once
     * the peer has acknowledged piece k - wdepth, then the signal k + 1 at the peer's counter 0; each rank acknowledges every piece it
     * sees with the signal (count) at the peer's counter 1. An acknowledgement travels against
     * the other direction's data (MSCCLRT_SOCKET_CONTROL keeps socket 0 free of large pieces). */
    if (window) {
        const uint64_t K = window / wpiece;
        volatile uint64_t *in = (volatile uint64_t *)(uintptr_t)ctr;   /* [0] data, [1] acks */
        OK(boot_barrier(b), "barrier");
        double t0 = now_s();
        uint64_t sent = 0, got = 0;
        while (sent < K || got < K) {
            bool moved = false;
            if (sent < K && (sent < wdepth ||
                              __atomic_load_n(&in[1], __ATOMIC_ACQUIRE) >= sent - wdepth + 1)) {
                OK(net_put(n, wbuf + (sent % wdepth) * wpiece, buf, wpiece), "put");
                OK(net_signal(n, wctr, sent + 1), "signal");
                sent++;
                moved = true;
            }
            if (got < K && __atomic_load_n(&in[0], __ATOMIC_ACQUIRE) > got) {
                got++;
                OK(net_signal(n, wctr + 8, got), "ack");
                moved = true;
            }
            if (!moved) sched_yield();
        }
        while (__atomic_load_n(&in[1], __ATOMIC_ACQUIRE) < K) sched_yield();
        const double t = now_s() - t0;
        if (rank == 0)
            printf("window: %llu bytes each way in pieces of %llu, %llu in flight: %.1f us, "
                   "%.2f GB/s each way\n", (unsigned long long)window, (unsigned long long)wpiece,
                   (unsigned long long)wdepth, t * 1e6, window / t / 1e9);
        fflush(stdout);
        memset((void *)(uintptr_t)ctr, 0, 16);   /* the counters again from 0 below */
        OK(boot_barrier(b), "barrier");
    }
    /* latency: ping-pong of a lat_bytes put + signal, then of lat_bytes on the plain stream;
     * each round trip timed alone (the median resists the shared machine's hiccups) */
    OK(boot_barrier(b), "barrier");
    enum { ROUNDS = 2000 };
    static double rt[ROUNDS];
    double sum_net = 0;
    for (int i = 1; i <= ROUNDS; i++) {
        double t0 = now_s();
        if (rank == 0) {
            OK(net_put(n, wbuf, buf, lat_bytes), "put");
            OK(net_signal(n, wctr, (uint64_t)i), "signal");
        }
        uint64_t v = 0;   /* wait for the peer's signal number i */
        do {
            if (gpu) cu.cuMemcpyDtoH(&v, ctr, 8);
            else v = __atomic_load_n((uint64_t *)(uintptr_t)ctr, __ATOMIC_ACQUIRE);
            if (v < (uint64_t)i) sched_yield();   /* leave the CPU to the socket threads */
        } while (v < (uint64_t)i);
        if (rank == 1) {
            OK(net_put(n, wbuf, buf, lat_bytes), "put");
            OK(net_signal(n, wctr, (uint64_t)i), "signal");
        }
        rt[i - 1] = now_s() - t0;
        sum_net += rt[i - 1];
    }
    double med_net = median(rt, ROUNDS);
    OK(boot_barrier(b), "barrier");
    char *m = malloc(lat_bytes);
    if (!m) return die("malloc");
    memset(m, 0, lat_bytes);
    double sum_plain = 0;
    for (int i = 0; i < ROUNDS; i++) {
        double t0 = now_s();
        if (rank == 0 && net_sock_send_all(fd, m, lat_bytes, -1)) return die("ping");
        if (net_sock_recv_all(fd, m, lat_bytes, -1)) return die("pong");
        if (rank == 1 && net_sock_send_all(fd, m, lat_bytes, -1)) return die("ping");
        rt[i] = now_s() - t0;
        sum_plain += rt[i];
    }
    free(m);
    double med_plain = median(rt, ROUNDS);
    if (rank == 0)
        printf("round trip, %llu bytes: put+signal median %.1f us (mean %.1f), plain stream "
               "median %.1f us (mean %.1f)\n", (unsigned long long)lat_bytes, med_net * 1e6,
               sum_net / ROUNDS * 1e6, med_plain * 1e6, sum_plain / ROUNDS * 1e6);
    if (gpu && rank == 0) {   /* the staging path's parts: DtoH and HtoD through pinned memory */
        void *pin = NULL;
        OK(cu_check(cu.cuMemHostAlloc(&pin, 64u << 20, 0), "cuMemHostAlloc"), "pin");
        double t1 = now_s();
        for (int i = 0; i < 16; i++) cu.cuMemcpyDtoH(pin, buf, 64u << 20);
        double dtoh = (now_s() - t1) / 16;
        t1 = now_s();
        for (int i = 0; i < 16; i++) cu.cuMemcpyHtoD(buf, pin, 64u << 20);
        double htod = (now_s() - t1) / 16;
        printf("staging parts, 64 MiB: DtoH to pinned %.2f GB/s, HtoD from pinned %.2f GB/s\n",
               (64u << 20) / dtoh / 1e9, (64u << 20) / htod / 1e9);
        cu.cuMemFreeHost(pin);
    }
    OK(boot_barrier(b), "barrier");
    close(fd);
    if (lfd >= 0) close(lfd);
    net_release(n, &o);
    net_destroy(n);
    boot_close(b);
    return 0;
}

int main(int argc, char **argv) {
    bool gpu = false;
    uint64_t max = 1ull << 30;
    int nsocks = 2;
    uint64_t lat_bytes = 8;
    bool lat_only = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--gpu") == 0) gpu = true;
        else if (strcmp(argv[i], "--lat-only") == 0) lat_only = true;
        else if (strcmp(argv[i], "--lat-bytes") == 0 && i + 1 < argc)
            lat_bytes = strtoull(argv[++i], 0, 10);
        else if (strcmp(argv[i], "--max") == 0 && i + 1 < argc) max = strtoull(argv[++i], 0, 10);
        else if (strcmp(argv[i], "--nsocks") == 0 && i + 1 < argc) nsocks = atoi(argv[++i]);
        else if (strcmp(argv[i], "--window") == 0 && i + 1 < argc) window = strtoull(argv[++i], 0, 10);
        else if (strcmp(argv[i], "--window-piece") == 0 && i + 1 < argc)
            wpiece = strtoull(argv[++i], 0, 10);
        else if (strcmp(argv[i], "--window-depth") == 0 && i + 1 < argc)
            wdepth = strtoull(argv[++i], 0, 10);
        else if (strcmp(argv[i], "--spinner") == 0 && i + 1 < argc &&
                 (strcmp(argv[i + 1], "busy") == 0 || strcmp(argv[i + 1], "yield") == 0))
            spinner = strcmp(argv[++i], "busy") == 0 ? 1 : 2;
        else if (strcmp(argv[i], "--child") == 0 && i + 2 < argc) {
            BootId id;
            for (int k = 0; k < BOOT_ID_BYTES; k++) {
                unsigned v = 0;
                sscanf(argv[i + 2] + 2 * k, "%2x", &v);
                id.bytes[k] = (unsigned char)v;
            }
            return rank_main(atoi(argv[i + 1]), &id, gpu, max, nsocks, lat_bytes, lat_only);
        } else {
            fprintf(stderr, "usage: net_bench [--gpu] [--max BYTES] [--nsocks N] [--lat-bytes N] "
                    "[--lat-only] [--spinner busy|yield] [--window BYTES [--window-piece BYTES] "
                    "[--window-depth N]]\n");
            return 2;
        }
    }
    if (max < 4096) max = 4096;
    if (window && (gpu || wpiece == 0 || wdepth < 1 || wdepth > 64 || wdepth * wpiece > max ||
                   window < wpiece)) {
        fprintf(stderr, "net_bench: --window needs host buffers, 1 to 64 slots (--window-depth) "
                "of --window-piece bytes within --max, and a piece at most the window\n");
        return 2;
    }
    BootId id;
    OK(boot_get_unique_id(&id), "boot_get_unique_id");
    char hex[2 * BOOT_ID_BYTES + 1], ms[32], ns[16], ls[32];
    for (int k = 0; k < BOOT_ID_BYTES; k++) sprintf(hex + 2 * k, "%02x", id.bytes[k]);
    snprintf(ms, sizeof ms, "%llu", (unsigned long long)max);
    snprintf(ns, sizeof ns, "%d", nsocks);
    snprintf(ls, sizeof ls, "%llu", (unsigned long long)lat_bytes);
    char wins[32], wps[32], wds[32];
    snprintf(wins, sizeof wins, "%llu", (unsigned long long)window);
    snprintf(wds, sizeof wds, "%llu", (unsigned long long)wdepth);
    snprintf(wps, sizeof wps, "%llu", (unsigned long long)wpiece);
    pid_t pid[2];
    for (int r = 0; r < 2; r++) {
        fflush(stdout);
        if ((pid[r] = fork()) == 0) {
            setenv("MSCCLRT_HOSTID", r ? "bench-node1" : "bench-node0", 1);
            const char *args[28];
            int k = 0;
            args[k++] = argv[0];
            args[k++] = "--max", args[k++] = ms;
            args[k++] = "--nsocks", args[k++] = ns;
            args[k++] = "--lat-bytes", args[k++] = ls;
            if (gpu) args[k++] = "--gpu";
            if (lat_only) args[k++] = "--lat-only";
            if (window) args[k++] = "--window", args[k++] = wins, args[k++] = "--window-piece",
                        args[k++] = wps, args[k++] = "--window-depth", args[k++] = wds;
            if (spinner) args[k++] = "--spinner", args[k++] = spinner == 1 ? "busy" : "yield";
            args[k++] = "--child", args[k++] = r ? "1" : "0", args[k++] = hex;
            args[k] = NULL;
            execv(argv[0], (char *const *)args);
            _exit(127);
        }
    }
    int bad = 0;
    for (int r = 0; r < 2; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    return bad ? 1 : 0;
}

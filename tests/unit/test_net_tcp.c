/*
 * test_net_tcp.c - the socket transport of port channels between processes of this machine,
 * with host buffers: ranks are split into "nodes" by MSCCLRT_HOSTID in re-executed children
 * (the environment is read once per process). Puts of 1 B to 64 MiB at odd sizes and offsets,
 * each followed by a signal the receiver checks the data behind (ordering over 3 sockets, and
 * over the default count with its narrow and wide puts, and with MSCCLRT_SOCKET_SPREAD_BUSY's puts
 * in flight together, and with MSCCLRT_SOCKET_PUT_SIGNAL's put and signal in one write), flush;
 * MSCCLRT_SOCKET_NSOCKS=0 refused;
 * a plan's flush (net_flush_sources) that lets the source be overwritten at once; 4
 * ranks on 2 nodes; a burst of small puts that overfills the sockets (messages the
 * caller began inline and the tx thread finishes); the same in device mode on the fake CUDA
 * driver (tests/tools/fake_cuda.c: staging slots, the receive stream, signals as stream
 * writes) and puts from a registered host source (no staging copy); a peer that dies (closed
 * sockets) and a peer that stops answering (SIGSTOP) must
 * give errors naming the rank within the timeout, never a hang.
 */
#define BIG (64u << 20)
#include "test_net_util.h"
#include "fake_cuda_ctx.h"
#include "cuda/cuda_driver.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>

static int tcp_open(Side *s, int rank, int n, const BootId *id, int nsocks, int timeout_ms) {
    NetOptions o = {.host_mem = true, .timeout_ms = timeout_ms, .nsocks = nsocks,
                    .force = "socket", .ifname = "lo"};
    return side_open(s, rank, n, id, &o, "socket", NULL);
}

/* Device mode on the fake driver, which this child must have loaded (LD_LIBRARY_PATH set by
 * the parent): its "device" pointers are host addresses, so Side's buffers serve as both. */
static int tcp_open_dev(Side *s, int rank, int n, const BootId *id, int nsocks) {
    CuContext ctx = NULL;
    if (fake_cuda_context(&ctx)) return 1;
    NetOptions o = {.host_mem = false, .cu_ctx = ctx, .cu_device = 0, .timeout_ms = 10000,
                    .nsocks = nsocks, .force = "socket", .ifname = "lo"};
    return h_failed ? 1 : side_open(s, rank, n, id, &o, "socket", NULL);
}

/* A rank's side with nsocks sockets per peer: host buffers, or device mode on the fake driver. */
static int tcp_open_mode(Side *s, int rank, int n, const BootId *id, int nsocks, bool dev) {
    return dev ? tcp_open_dev(s, rank, n, id, nsocks) : tcp_open(s, rank, n, id, nsocks, 10000);
}

/* ---- every rank puts to every remote rank at many sizes; checks what it receives ------------ */
static int rank_exchange_with(int rank, int n, const BootId *id, bool dev, int nsocks) {
    Side s;
    if (tcp_open_mode(&s, rank, n, id, nsocks, dev)) return 1;
    static const uint64_t sizes[] = {1, 3, 8, 4095, 4097, 65537, 256u << 10, (512u << 10) + 1,
                                     (1u << 20) + 7, (8u << 20) - 5, BIG};
    const int nsz = (int)(sizeof sizes / sizeof *sizes);
    unsigned char *src = malloc(BIG + 64);
    if (!src) return 1;
    for (int k = 0; k < nsz; k++)   /* odd destination offsets */
        exchange_round(&s, src, sizes[k], (uint64_t)(k * 13) % 64, k);
    /* bad input: out of range, not a window, misaligned signal; nothing crashes */
    for (int q = 0; q < n; q++) {
        if (!net_peer_remote(s.net, q)) continue;
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, net_put(s.net, s.win_recv[q] + (uint64_t)n *
                     (BIG + 64) - 4, (uint64_t)(uintptr_t)src, 8));
        CHECK_EQ_INT(MSCCLRT_ERR_INTERNAL, net_put(s.net, 0x1000, (uint64_t)(uintptr_t)src, 8));
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, net_signal(s.net, s.win_ctr[q] + 3, 1));
        break;
    }
    free(src);
    CHECK_OK(boot_barrier(s.boot));
    side_close(&s);
    return h_failed ? 1 : 0;
}

static int rank_exchange(int rank, int n, const BootId *id, bool dev) {
    return rank_exchange_with(rank, n, id, dev, 3);
}

/* MSCCLRT_SOCKET_SPREAD_BUSY=1 over the default socket count: round k puts `len` bytes to
 * every remote rank as `parts` puts back to back (a plan's pieces in flight together: all but
 * the first find the peer busy and spread over every socket), then one signal; the receiver
 * checks all of them behind it. Lone puts (exchange_round) keep to the first sockets. */
static void burst_round(Side *s, unsigned char *src, uint64_t len, int parts, int k) {
    for (uint64_t i = 0; i < len; i++) src[i] = pat(s->rank, i, k);
    const uint64_t part = (len + (uint64_t)parts - 1) / (uint64_t)parts;
    for (int q = 0; q < s->n; q++) {
        if (!net_peer_remote(s->net, q)) continue;
        uint64_t dst = s->win_recv[q] + (uint64_t)s->rank * (BIG + 64);
        for (uint64_t o = 0; o < len; o += part)
            CHECK_OK(net_put(s->net, dst + o, (uint64_t)(uintptr_t)src + o,
                             len - o < part ? len - o : part));
        CHECK_OK(net_signal(s->net, s->win_ctr[q] + (uint64_t)s->rank * 8, (uint64_t)k + 1));
    }
    exchange_check(s, len, 0, k);
}

/* net_put_signal with MSCCLRT_SOCKET_PUT_SIGNAL=on (1) or off (0): one-piece puts up to 64 KiB
 * and their signal in one write, larger ones (and every one when off) as put then signal; the
 * data is always behind the signal. Then plain puts and signals again, the counts continuing. */
static int rank_put_signal(int rank, int n, const BootId *id, bool dev, const char *on) {
    setenv("MSCCLRT_SOCKET_PUT_SIGNAL", on, 1);
    Side s;
    if (tcp_open_mode(&s, rank, n, id, 3, dev)) return 1;
    /* what the proxy pairs: up to the inline size when on, nothing when off */
    CHECK_EQ_INT(on[0] == '1' ? TCP_INLINE : 0, net_put_signal_max(s.net));
    unsigned char *src = malloc(BIG + 64);
    if (!src) return 1;
    static const uint64_t sizes[] = {1, 8, 4095, 65536, 65537, 300001, (1u << 20) + 7};
    int k = 0;
    for (int r = 0; r < 2; r++)   /* twice: the second round finds the sockets warm */
        for (int i = 0; i < 7; i++) exchange_round_as(&s, src, sizes[i], (uint64_t)i * 8, k++, true);
    for (int i = 0; i < 7; i++) exchange_round(&s, src, sizes[i], (uint64_t)i * 8 + 3, k++);
    /* bad input through the pair: a misaligned signal and a put out of its window */
    for (int q = 0; q < n; q++) {
        if (!net_peer_remote(s.net, q)) continue;
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, net_put_signal(s.net, s.win_recv[q], (uint64_t)(uintptr_t)src,
                                                             8, s.win_ctr[q] + 3, 1));
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, net_put_signal(s.net, s.win_recv[q] + (uint64_t)n *
                     (BIG + 64) - 4, (uint64_t)(uintptr_t)src, 8, s.win_ctr[q], 1));
        break;
    }
    free(src);
    CHECK_OK(boot_barrier(s.boot));
    side_close(&s);
    return h_failed ? 1 : 0;
}

static int rank_spread_busy(int rank, int n, const BootId *id, bool dev) {
    setenv("MSCCLRT_SOCKET_SPREAD_BUSY", "1", 1);
    Side s;
    if (tcp_open_mode(&s, rank, n, id, 0, dev)) return 1;
    unsigned char *src = malloc(BIG + 64);
    if (!src) return 1;
    int k = 0;
    /* 4 pieces of 128 KiB + 1 (allreduce/hier_pipe's at 1 MiB), 8 of about 100 KiB, 16 of 65 KiB
     * (just above the inline size), 3 of 500 KiB (just under the wide size) */
    static const struct { uint64_t len; int parts; } bursts[] = {
        {4 * (128u << 10) + 4, 4}, {8 * 100003u, 8}, {16 * ((64u << 10) + 1), 16},
        {3 * (500u << 10), 3}};
    for (int b = 0; b < 4; b++) burst_round(&s, src, bursts[b].len, bursts[b].parts, k++);
    static const uint64_t lone[] = {65537, 100003, (256u << 10) + 3, (512u << 10) - 1};
    for (int b = 0; b < 4; b++) exchange_round(&s, src, lone[b], (uint64_t)b * 8 + 1, k++);
    free(src);
    CHECK_OK(boot_barrier(s.boot));
    side_close(&s);
    return h_failed ? 1 : 0;
}

/* MSCCLRT_SOCKET_NSOCKS=0 is refused by name, before any connection */
static int rank_nsocks_zero(int rank, int n, const BootId *id) {
    setenv("MSCCLRT_SOCKET_NSOCKS", "0", 1);
    Boot *b = NULL;
    CHECK_OK(boot_init(&b, id, rank, n, 10000));
    if (!b) return 1;
    NetOptions o = {.host_mem = true, .timeout_ms = 5000, .force = "socket", .ifname = "lo"};
    Net *net = NULL;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, net_create(&net, b, &o));
    CHECK(net == NULL);
    CHECK(strstr(mscclrt_last_error(), "MSCCLRT_SOCKET_NSOCKS=0") != NULL);
    boot_close(b);
    return h_failed ? 1 : 0;
}

/* ---- a burst: more small puts than the sockets hold ------------------------------------------
 * Rank 0 puts 6000 pieces of 4093 bytes (about 24 MB, beyond loopback's socket buffers) back
 * to back into consecutive offsets of rank 1's area, then one signal. Small pieces are written
 * inline by the caller until a socket would block; the tx thread must finish such a message
 * before anything else goes on that socket (an ACK included), or the stream breaks. */
static int rank_burst(int rank, int n, const BootId *id, bool dev) {
    Side s;
    if (tcp_open_mode(&s, rank, n, id, 2, dev)) return 1;
    enum { PIECES = 6000, LEN = 4093 };
    unsigned char *src = malloc((size_t)PIECES * LEN);
    if (!src) return 1;
    for (uint64_t i = 0; i < (uint64_t)PIECES * LEN; i++) src[i] = pat(0, i, 7);
    if (rank == 0) {
        for (int k = 0; k < PIECES; k++) {
            CHECK_OK(net_put(s.net, s.win_recv[1] + (uint64_t)k * LEN,
                             (uint64_t)(uintptr_t)(src + (size_t)k * LEN), LEN));
            if (k % 1000 == 999) CHECK_OK(net_flush(s.net));   /* ACKs amid the burst */
        }
        CHECK_OK(net_signal(s.net, s.win_ctr[1], 1));
        CHECK_OK(net_flush(s.net));
    } else {
        CHECK(wait_ctr(&s, 0, 1));
        uint64_t bad = first_bad(s.recv, 0, (uint64_t)PIECES * LEN, 7);
        if (bad != (uint64_t)PIECES * LEN)
            fprintf(stderr, "burst: first bad byte %llu\n", (unsigned long long)bad);
        CHECK(bad == (uint64_t)PIECES * LEN);
    }
    free(src);
    CHECK_OK(boot_barrier(s.boot));
    side_close(&s);
    return h_failed ? 1 : 0;
}

/* ---- consecutive puts whose pieces travel on different sockets ------------------------------
 * Rank 0 sends 300 rounds back to back over 4 sockets: a put of 1.5 MiB + 1 (four pieces, one
 * per socket) into one of 8 slots, then the signal k + 1. Rank 1 checks a slot as soon as its
 * signal shows and acknowledges it, so rank 0 may reuse it. A signal must wait for the pieces
 * sent before it on every socket: counting landed pieces alone lets a piece of the next round
 * on a socket that ran ahead stand in for one still on its way, and rank 1 then sees old data. */
static int rank_reorder(int rank, int n, const BootId *id, bool dev) {
    Side s;
    if (tcp_open_mode(&s, rank, n, id, 4, dev)) return 1;
    enum { ROUNDS = 300, SLOTS = 8 };
    const uint64_t len = (3u << 19) + 1, slot = 2u << 20;
    unsigned char *src = malloc((size_t)SLOTS * slot);
    if (!src) return 1;
    int bad_rounds = 0;
    for (int k = 0; k < ROUNDS && !h_failed; k++) {
        const int sl = k % SLOTS;
        if (rank == 0) {
            if (k >= SLOTS) CHECK(wait_ctr(&s, 1, (uint64_t)(k - SLOTS + 1)));   /* slot free */
            unsigned char *b = src + (size_t)sl * slot;
            for (uint64_t i = 0; i < len; i++) b[i] = pat(0, i, k);
            CHECK_OK(net_put(s.net, s.win_recv[1] + (uint64_t)sl * slot, (uint64_t)(uintptr_t)b,
                             len));
            CHECK_OK(net_signal(s.net, s.win_ctr[1], (uint64_t)k + 1));
        } else {
            CHECK(wait_ctr(&s, 0, (uint64_t)k + 1));
            uint64_t bad = first_bad(s.recv + (size_t)sl * slot, 0, len, k);
            if (bad != len && bad_rounds++ < 3)
                fprintf(stderr, "reorder: round %d: first bad byte %llu\n", k, (unsigned long long)bad);
            CHECK(bad == len);
            CHECK_OK(net_signal(s.net, s.win_ctr[0] + 8, (uint64_t)k + 1));
        }
    }
    if (rank == 0) CHECK(wait_ctr(&s, 1, ROUNDS));
    free(src);
    CHECK_OK(boot_barrier(s.boot));
    side_close(&s);
    return h_failed ? 1 : 0;
}

/* ---- a plan's flush: the sources are read, the peer's receipt is left to the signal ---------
 * Rank 0 puts 24 MB (beyond loopback's socket buffers, so host mode leaves most of it to the tx
 * threads, which send from the caller's memory) and calls net_flush_sources; then it
 * overwrites the source and signals. Rank 1 must find the original bytes behind the signal:
 * a flush that returned before the sources were read would let the overwrite through. */
/* Rank 0 puts len bytes (pattern 11) in three puts, as a plan's three channels would, at
 * offset `at` of rank 1's area, calls net_flush_sources, overwrites the source and signals sig;
 * rank 1 waits for sig and must find the original bytes. */
static void sources_round(Side *s, unsigned char *src, uint64_t len, uint64_t at, uint64_t sig,
                          const char *what) {
    if (s->rank == 0) {
        for (uint64_t i = 0; i < len; i++) src[i] = pat(0, i, 11);
        for (int k = 0; k < 3; k++)
            CHECK_OK(net_put(s->net, s->win_recv[1] + at + (uint64_t)k * (len / 3),
                             (uint64_t)(uintptr_t)(src + (size_t)k * (len / 3)), len / 3));
        CHECK_OK(net_flush_sources(s->net));
        memset(src, 0xEE, len);
        CHECK_OK(net_signal(s->net, s->win_ctr[1], sig));
        CHECK_OK(net_flush(s->net));
    } else {
        CHECK(wait_ctr(s, 0, sig));
        uint64_t bad = first_bad(s->recv + at, 0, len, 11);
        if (bad != len) fprintf(stderr, "%s: first bad byte %llu\n", what, (unsigned long long)bad);
        CHECK(bad == len);
    }
}

static int rank_sources(int rank, int n, const BootId *id, bool dev) {
    Side s;
    if (tcp_open_mode(&s, rank, n, id, 2, dev)) return 1;
    const uint64_t len = 24u << 20;
    unsigned char *src = malloc(len);
    if (!src) return 1;
    sources_round(&s, src, len, 0, 1, "sources");
    free(src);
    CHECK_OK(boot_barrier(s.boot));
    side_close(&s);
    return h_failed ? 1 : 0;
}

/* Puts of 1 B..1 MiB + 7 (pattern k for size k): rank 0 puts each from src to window win at
 * at[k], signals k + 1 and flushes (landed: the source may change); rank 1 waits for each signal
 * and checks rbuf + at[k]. */
static const uint64_t put_sizes[] = {1, 1000, 4097, 65537, (1u << 20) + 7};
#define NPUT_SIZES 5
static void sizes_round(Side *s, int rank, unsigned char *src, uint64_t win,
                        const unsigned char *rbuf, const uint64_t *at, const char *what) {
    for (int k = 0; k < NPUT_SIZES; k++) {
        if (rank == 0) {
            for (uint64_t i = 0; i < put_sizes[k]; i++) src[i] = pat(0, i, k);
            CHECK_OK(net_put(s->net, win + at[k], (uint64_t)(uintptr_t)src, put_sizes[k]));
            CHECK_OK(net_signal(s->net, s->win_ctr[1], (uint64_t)k + 1));
            CHECK_OK(net_flush(s->net));
        } else {
            CHECK(wait_ctr(s, 0, (uint64_t)k + 1));
            const uint64_t bad = first_bad(rbuf + at[k], 0, put_sizes[k], k);
            if (bad != put_sizes[k])
                fprintf(stderr, "%s: %llu bytes: first bad byte %llu\n", what,
                        (unsigned long long)put_sizes[k], (unsigned long long)bad);
            CHECK(bad == put_sizes[k]);
        }
    }
}

/* ---- device mode: puts from a registered host source ------------------------------------------
 * Rank 0's source is host memory the GPU would write through its mapping, registered with
 * net_reg_host_src, and the fake driver fails the first cuMemcpyDtoHAsync of the process
 * (FAKE_CUDA_FAIL): puts of 1 B..1 MiB + 7 must go straight from it, without a staging copy.
 * Then 24 MB in three puts, a plan's flush, the source overwritten, a signal: rank 1 must find
 * the original bytes (the flush waited until the sockets had written them). Once released, the
 * source is device memory again: its put is staged, and meets the failing copy. */
static int rank_hostsrc(int rank, int n, const BootId *id) {
    Side s;
    if (tcp_open_dev(&s, rank, n, id, 2)) return 1;
    const uint64_t len = 24u << 20, at = 16u << 20;
    uint64_t offs[NPUT_SIZES];
    for (int k = 0; k < NPUT_SIZES; k++) offs[k] = (uint64_t)k * (2u << 20);
    unsigned char *src = malloc(len);
    if (!src) return 1;
    if (rank == 0) {
        CHECK_OK(net_reg_host_src(s.net, &s, (uint64_t)(uintptr_t)src, len));
        CHECK(net_host_src(s.net, (uint64_t)(uintptr_t)src + len - 8, 8));
        CHECK(!net_host_src(s.net, (uint64_t)(uintptr_t)src + len - 8, 9));
    }
    sizes_round(&s, rank, src, s.win_recv[1], s.recv, offs, "hostsrc");
    sources_round(&s, src, len, at, 6, "hostsrc");
    if (rank == 0) {
        net_release(s.net, &s);
        CHECK(!net_host_src(s.net, (uint64_t)(uintptr_t)src, 8));
        CHECK(net_put(s.net, s.win_recv[1], (uint64_t)(uintptr_t)src, 8) != MSCCLRT_SUCCESS);
    }
    free(src);
    CHECK_OK(boot_barrier(s.boot));
    side_close(&s);
    return h_failed ? 1 : 0;
}

/* ---- device mode: a region of pinned host memory (net_reg_host) ------------------------------
 * Each rank registers a host area with net_reg_host (what a plan's scratch becomes when only the
 * network reaches it) and imports its peer's. The fake driver fails the first staging copy in
 * either direction (FAKE_CUDA_FAIL): rank 0's puts of 1 B..1 MiB + 7 from its host area into
 * rank 1's must go out unstaged and land without a copy into device memory, each before the
 * signal that follows it. */
static int rank_hostreg(int rank, int n, const BootId *id) {
    Side s;
    if (tcp_open_dev(&s, rank, n, id, 2)) return 1;
    const uint64_t area = 8u << 20;
    uint64_t offs[NPUT_SIZES];
    for (int k = 0; k < NPUT_SIZES; k++)
        offs[k] = (uint64_t)k * (3u << 20) % (area - put_sizes[k]) / 16 * 16;
    unsigned char *h = calloc(1, area);
    if (!h) return 1;
    NetMemDesc mine, theirs;
    uint64_t win = 0;
    CHECK_OK(net_reg_host(s.net, &s, (uint64_t)(uintptr_t)h, area, &mine));
    CHECK(net_host_src(s.net, (uint64_t)(uintptr_t)h + area - 16, 16));   /* a source too */
    const int peer = 1 - rank;
    CHECK_OK(boot_send(s.boot, peer, TAG_DESC + 7, &mine, sizeof mine));
    CHECK_OK(boot_recv(s.boot, peer, TAG_DESC + 7, &theirs, sizeof theirs));
    CHECK_OK(net_import(s.net, &s, peer, &theirs, &win));
    sizes_round(&s, rank, h, win, h, offs, "hostreg");
    CHECK_OK(boot_barrier(s.boot));
    side_close(&s);   /* releases the host region and its source with the rest */
    free(h);
    return h_failed ? 1 : 0;
}

/* ---- faults ------------------------------------------------------------------------------- */
/* mode 1: rank 1 dies after the setup (killed: its sockets close); mode 2: rank 1 stops (SIGSTOP);
 * mode 3: rank 1 stops, and rank 0 waits with net_flush_sources (its sockets fill, so the
 * sources are never all read). Rank 0 puts and flushes: the error must name rank 1 within the
 * 1.5 s timeout. */
static int rank_fault(int rank, int n, const BootId *id, int mode) {
    Side s;
    if (tcp_open(&s, rank, n, id, 2, 1500)) return 1;
    CHECK_OK(boot_barrier(s.boot));
    if (rank == 1) {
        /* no goodbye: the kernel closes the sockets (SIGKILL, not _exit: under TSan _exit
         * finalizes while the receive threads go on, and they took the puts and the flush) */
        if (mode == 1) raise(SIGKILL);
        raise(SIGSTOP);               /* the parent kills us once rank 0 is done */
        _exit(0);
    }
    usleep(100 * 1000);
    unsigned char *src = calloc(1, BIG);
    double t0 = now_s();
    mscclrt_result r = MSCCLRT_SUCCESS;
    if (mode == 3) {   /* 32 MiB: queued whole (64 pieces, no wait for room), far more than the
                        * sockets take: 8 MiB fitted once into two sockets' buffers (autotuned up
                        * to tcp_wmem's 4 MiB each) and the flush returned (under TSan) */
        r = net_put(s.net, s.win_recv[1], (uint64_t)(uintptr_t)src, 32u << 20);
        if (r == MSCCLRT_SUCCESS) r = net_flush_sources(s.net);
    }
    for (int i = 0; i < 4 && r == MSCCLRT_SUCCESS && mode != 3; i++)
        r = net_put(s.net, s.win_recv[1], (uint64_t)(uintptr_t)src, BIG);
    if (r == MSCCLRT_SUCCESS && mode != 3) r = net_flush(s.net);
    double dt = now_s() - t0;
    CHECK(r != MSCCLRT_SUCCESS);
    CHECK_CONTAINS(mscclrt_last_error(), "rank 1");
    if (mode == 1) CHECK_EQ_INT(MSCCLRT_ERR_REMOTE, r);
    else CHECK(r == MSCCLRT_ERR_TIMEOUT || r == MSCCLRT_ERR_REMOTE);
    CHECK(dt < 5.0);
    fprintf(stderr, "rank 0 saw after %.2f s: %s\n", dt, mscclrt_last_error());
    /* later calls keep failing, at once */
    t0 = now_s();
    CHECK(net_put(s.net, s.win_recv[1], (uint64_t)(uintptr_t)src, 8) != MSCCLRT_SUCCESS ||
          net_flush(s.net) != MSCCLRT_SUCCESS);
    CHECK(now_s() - t0 < 5.0);
    free(src);
    side_close(&s);
    return h_failed ? 1 : 0;
}

/* ---- the parent: re-executes itself per rank with MSCCLRT_HOSTID set ---------------------- */
static char fake_dir[PATH_MAX + 32];   /* LD_LIBRARY_PATH of device-mode ranks */

/* Rank 1 of a "fault" scenario is the faulty one: rank 0's verdict counts. Device-mode
 * scenarios ("dev-...") run their ranks on the fake CUDA driver. */
static int run(const char *scen, int n, const char *const *hostids) {
    const char *const dev_env[] = {"LD_LIBRARY_PATH", fake_dir,
                                   /* dev-hostsrc: a staging copy fails; dev-hostreg: one each
                                    * way */
                                   strncmp(scen, "dev-host", 8) == 0 ? "FAKE_CUDA_FAIL" : NULL,
                                   strcmp(scen, "dev-hostreg") == 0
                                       ? "cuMemcpyDtoHAsync:1,cuMemcpyHtoDAsync:1"
                                       : "cuMemcpyDtoHAsync:1", NULL};
    return run_ranks(scen, n, hostids, strncmp(scen, "dev-", 4) == 0 ? dev_env : NULL,
                     strncmp(scen, "fault", 5) == 0 ? 1 : -1, 0);
}

/* the sender's piece size (tcp_piece_bytes) */
static void t_piece_bytes(void) {
    const uint64_t K = 1024, M = K * K;
    /* not split, or something queued already: the configured size */
    CHECK_EQ_INT(512 * K, tcp_piece_bytes(M, 512 * K, 256 * K, false, true));
    CHECK_EQ_INT(512 * K, tcp_piece_bytes(M, 512 * K, 256 * K, true, false));
    /* split and idle: a quarter, at most the configured size ... */
    CHECK_EQ_INT(128 * K, tcp_piece_bytes(512 * K, 512 * K, 256 * K, true, true));
    CHECK_EQ_INT(256 * K, tcp_piece_bytes(M, 512 * K, 256 * K, true, true));
    CHECK_EQ_INT(512 * K, tcp_piece_bytes(8 * M, 512 * K, 256 * K, true, true));
    CHECK_EQ_INT(64 * K, tcp_piece_bytes(256 * K, 512 * K, 256 * K, true, true));
    CHECK_EQ_INT(32 * K, tcp_piece_bytes(M, 32 * K, 256 * K, true, true));   /* the configured cap */
    /* ... and only puts of MSCCLRT_SOCKET_SPLIT_MIN_BYTES (256 KiB by default) or more */
    CHECK_EQ_INT(512 * K, tcp_piece_bytes(256 * K - 1, 512 * K, 256 * K, true, true));
    CHECK_EQ_INT(512 * K, tcp_piece_bytes(128 * K, 512 * K, 256 * K, true, true));
    CHECK_EQ_INT(512 * K, tcp_piece_bytes(1, 512 * K, 256 * K, true, true));
    CHECK_EQ_INT(132 * K, tcp_piece_bytes(528 * K - 5, 512 * K, 256 * K, true, true));   /* 4 KiB steps */
    /* a lower MSCCLRT_SOCKET_SPLIT_MIN_BYTES: two 64 KiB pieces are the least split */
    CHECK_EQ_INT(64 * K, tcp_piece_bytes(128 * K, 512 * K, 128 * K, true, true));
    CHECK_EQ_INT(64 * K, tcp_piece_bytes(192 * K, 512 * K, 128 * K, true, true));
    CHECK_EQ_INT(512 * K, tcp_piece_bytes(128 * K - 1, 512 * K, 128 * K, true, true));
    CHECK(tcp_put_splits(128 * K, 128 * K) && !tcp_put_splits(64 * K, 64 * K));
}

/* who writes a message when its socket is idle (tcp_writes_inline): the poster, except a
 * split put's staged pieces, which go to the send thread so that staging and sending overlap,
 * and staged pieces above MSCCLRT_SOCKET_STAGED_INLINE_BYTES */
static void t_writes_inline(void) {
    const uint64_t K = 1024, D = 64 * K;   /* MSCCLRT_SOCKET_STAGED_INLINE_BYTES' default */
    CHECK(tcp_writes_inline(false, false, false, 0, 0, 0));              /* a signal or flush */
    CHECK(tcp_writes_inline(true, true, false, 64 * K, 0, D));           /* a small staged put */
    CHECK(!tcp_writes_inline(true, true, false, 64 * K + 1, 1 << 20, 1 << 20)); /* a larger one */
    CHECK(!tcp_writes_inline(true, true, true, 64 * K, 1 << 20, D));     /* a split put's piece */
    CHECK(!tcp_writes_inline(true, true, true, 4 * K, 1 << 20, D));
    /* MSCCLRT_SOCKET_STAGED_INLINE_BYTES: 0 sends every staged piece to the send thread */
    CHECK(!tcp_writes_inline(true, true, false, 1, 1 << 20, 0));
    CHECK(tcp_writes_inline(true, true, false, 16 * K, 0, 16 * K));
    CHECK(!tcp_writes_inline(true, true, false, 16 * K + 1, 0, 16 * K));
    CHECK(tcp_writes_inline(true, false, false, 64 * K, 64 * K, 0));     /* host bytes: inline_max */
    CHECK(tcp_writes_inline(true, false, true, 64 * K, 64 * K, 0));      /* no copy to wait for */
    CHECK(!tcp_writes_inline(true, false, false, 64 * K + 1, 64 * K, D));
    CHECK(!tcp_writes_inline(true, false, false, 1, 0, D));
}

/* the sender's choice of socket for a piece (tcp_piece_socket) */
static void t_piece_socket(void) {
    /* small puts and one socket: socket 0, control or not */
    CHECK_EQ_INT(0, tcp_piece_socket(1, 5, 4, false, 0));
    CHECK_EQ_INT(0, tcp_piece_socket(TCP_INLINE, 5, 4, true, 0));
    CHECK_EQ_INT(0, tcp_piece_socket(TCP_INLINE + 1, 5, 1, true, 0));
    /* large: round-robin over every socket, or over 1..n-1 with socket 0 kept for control */
    int seen[4] = {0, 0, 0, 0}, seen_c[4] = {0, 0, 0, 0};
    for (uint32_t k = 0; k < 12; k++) {
        seen[tcp_piece_socket(1u << 20, k, 4, false, 0)]++;
        seen_c[tcp_piece_socket(1u << 20, k, 4, true, 0)]++;
    }
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(3, seen[i]);
    CHECK_EQ_INT(0, seen_c[0]);
    for (int i = 1; i < 4; i++) CHECK_EQ_INT(4, seen_c[i]);
    CHECK_EQ_INT(1, tcp_piece_socket(1u << 20, 0, 2, true, 0));
    CHECK_EQ_INT(1, tcp_piece_socket(1u << 20, 7, 2, true, 0));
    CHECK_EQ_INT(1, tcp_piece_socket(1u << 20, 7, 2, false, 0));
    CHECK_EQ_INT(0, tcp_piece_socket(1u << 20, 8, 2, false, 0));
    /* below MSCCLRT_SOCKET_WIDE_BYTES: only the first two of the data sockets */
    int narrow[4] = {0, 0, 0, 0}, narrow_c[4] = {0, 0, 0, 0};
    for (uint32_t k = 0; k < 12; k++) {
        narrow[tcp_piece_socket(128u << 10, k, 4, false, 512u << 10)]++;
        narrow_c[tcp_piece_socket(128u << 10, k, 4, true, 512u << 10)]++;
    }
    CHECK(narrow[0] == 6 && narrow[1] == 6 && narrow[2] == 0 && narrow[3] == 0);
    CHECK(narrow_c[0] == 0 && narrow_c[1] == 6 && narrow_c[2] == 6 && narrow_c[3] == 0);
    CHECK_EQ_INT(3, tcp_piece_socket(512u << 10, 3, 4, false, 512u << 10));   /* at the bound: all */
    CHECK_EQ_INT(1, tcp_piece_socket(128u << 10, 3, 2, false, 512u << 10));   /* two: as before */
}

/* MSCCLRT_SOCKET_SPREAD_BUSY: which puts ask whether the peer is idle, and the wide_bytes they
 * pass to tcp_piece_socket */
/* MSCCLRT_SOCKET_PUT_SIGNAL: which puts travel with their signal */
static void t_joins_signal(void) {
    CHECK(!tcp_joins_signal(0, 512u << 10));   /* nothing to carry: the signal alone */
    CHECK(tcp_joins_signal(1, 512u << 10));
    CHECK(tcp_joins_signal(TCP_INLINE, 512u << 10));
    CHECK(!tcp_joins_signal(TCP_INLINE + 1, 512u << 10));   /* may leave socket 0 */
    CHECK(!tcp_joins_signal(32u << 10, 16u << 10));         /* two pieces of the sender's size */
    CHECK(tcp_joins_signal(16u << 10, 16u << 10));
}

static void t_put_wide(void) {
    const uint64_t K = 1024, W = 512 * K;
    /* off (the default): by size alone, the peer's state never asked */
    CHECK(!tcp_spread_asks(128 * K, W, false));
    CHECK_EQ_INT(W, tcp_put_wide(128 * K, W, false, false));
    /* on: only puts between the inline size and the wide size ask ... */
    CHECK(!tcp_spread_asks(TCP_INLINE, W, true));
    CHECK(tcp_spread_asks(TCP_INLINE + 1, W, true));
    CHECK(tcp_spread_asks(W - 1, W, true));
    CHECK(!tcp_spread_asks(W, W, true));
    CHECK(!tcp_spread_asks(128 * K, 0, true));   /* WIDE_BYTES=0: everything spreads anyway */
    /* ... and spread (0) when the peer is busy, keep to the first sockets when it is idle */
    CHECK_EQ_INT(0, tcp_put_wide(128 * K, W, true, false));
    CHECK_EQ_INT(W, tcp_put_wide(128 * K, W, true, true));
    CHECK_EQ_INT(W, tcp_put_wide(TCP_INLINE, W, true, false));   /* inline: socket 0 regardless */
    CHECK_EQ_INT(W, tcp_put_wide(W, W, true, false));
    /* the socket a busy 128 KiB put gets: any of the four (seq 3 -> socket 3), an idle one's
     * only the first two */
    CHECK_EQ_INT(3, tcp_piece_socket(128 * K, 3, 4, false, tcp_put_wide(128 * K, W, true, false)));
    CHECK_EQ_INT(1, tcp_piece_socket(128 * K, 3, 4, false, tcp_put_wide(128 * K, W, true, true)));
}

/* MSCCLRT_SOCKET_NSOCKS=-1: four sockets while no rank has more than four ranks on other nodes */
static void t_nsocks_auto(void) {
    const int two_by_one[] = {0, 1}, two_by_four[] = {0, 0, 0, 0, 1, 1, 1, 1};
    const int two_by_eight[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    const int uneven[] = {0, 0, 0, 0, 0, 1};   /* rank 5 has 5 ranks on another node */
    const int five_by_one[] = {0, 1, 2, 3, 4}, six_by_one[] = {0, 1, 2, 3, 4, 5};
    CHECK_EQ_INT(4, net_nsocks_auto(two_by_one, 2, 2));
    CHECK_EQ_INT(4, net_nsocks_auto(two_by_four, 8, 2));
    CHECK_EQ_INT(2, net_nsocks_auto(two_by_eight, 16, 2));
    CHECK_EQ_INT(2, net_nsocks_auto(uneven, 6, 2));
    CHECK_EQ_INT(4, net_nsocks_auto(five_by_one, 5, 5));
    CHECK_EQ_INT(2, net_nsocks_auto(six_by_one, 6, 6));
    CHECK_EQ_INT(2, net_nsocks_auto(two_by_one, 2, 1));   /* one node: no sockets are opened */
}

static int rank_main(const char *scen, int rank, int n, const BootId *id) {
    const bool dev = strncmp(scen, "dev-", 4) == 0;
    if (dev) scen += 4;
    /* pieces smaller than a receiver's largest, and unlike on the two sides: each rank cuts
     * its puts its own way (MSCCLRT_SOCKET_PIECE_BYTES) */
    if (strcmp(scen, "exchange-piece") == 0) {
        setenv("MSCCLRT_SOCKET_PIECE_BYTES", rank % 2 ? "65536" : "16384", 1);
        return rank_exchange(rank, n, id, dev);
    }
    /* the exchange under one setting of the sender's choices */
    static const struct { const char *scen, *var, *val; } exchange_with_env[] = {
        /* puts cut in 4 where the pipe is idle: 256 KiB as 64 KiB pieces, which in device mode
         * go staged to the send threads, not written by the poster */
        {"exchange-split", "MSCCLRT_SOCKET_SPLIT", "1"},
        /* every staged piece through the send threads */
        {"exchange-staged-queued", "MSCCLRT_SOCKET_STAGED_INLINE_BYTES", "0"},
    };
    for (size_t i = 0; i < sizeof exchange_with_env / sizeof *exchange_with_env; i++)
        if (strcmp(scen, exchange_with_env[i].scen) == 0) {
            setenv(exchange_with_env[i].var, exchange_with_env[i].val, 1);
            return rank_exchange(rank, n, id, dev);
        }
    /* socket 0 kept for control: large puts on the other sockets only, signals still after
     * the pieces sent before them on every socket (MSCCLRT_SOCKET_CONTROL) */
    if (strcmp(scen, "reorder-control") == 0 || strcmp(scen, "exchange-control") == 0) {
        setenv("MSCCLRT_SOCKET_CONTROL", "1", 1);
        return scen[0] == 'r' ? rank_reorder(rank, n, id, dev) : rank_exchange(rank, n, id, dev);
    }
    /* the default socket count (-1: by the layout, 4 here) and the narrow/wide spreading of
     * MSCCLRT_SOCKET_WIDE_BYTES over them */
    if (strcmp(scen, "exchange-auto") == 0) return rank_exchange_with(rank, n, id, dev, 0);
    if (strcmp(scen, "spread-busy") == 0) return rank_spread_busy(rank, n, id, dev);
    if (strcmp(scen, "put-signal") == 0) return rank_put_signal(rank, n, id, dev, "1");
    if (strcmp(scen, "put-signal-off") == 0) return rank_put_signal(rank, n, id, dev, "0");
    if (strcmp(scen, "nsocks-zero") == 0) return rank_nsocks_zero(rank, n, id);
    return strcmp(scen, "exchange") == 0 ? rank_exchange(rank, n, id, dev)
           : strcmp(scen, "burst") == 0 ? rank_burst(rank, n, id, dev)
           : strcmp(scen, "sources") == 0 ? rank_sources(rank, n, id, dev)
           : strcmp(scen, "reorder") == 0 ? rank_reorder(rank, n, id, dev)
           : strcmp(scen, "hostsrc") == 0 ? rank_hostsrc(rank, n, id)
           : strcmp(scen, "hostreg") == 0 ? rank_hostreg(rank, n, id)
           : strcmp(scen, "fault-close") == 0 ? rank_fault(rank, n, id, 1)
           : strcmp(scen, "fault-sources") == 0 ? rank_fault(rank, n, id, 3)
           : rank_fault(rank, n, id, 2);
}

int main(int argc, char **argv) {
    int rc = net_test_child(argc, argv, 60, rank_main);
    if (rc >= 0) return rc;
    static const char *const two[] = {"nodeA", "nodeB"};
    static const char *const four[] = {"nodeA", "nodeA", "nodeB", "nodeB"};
    static const char *const four4[] = {"n0", "n1", "n2", "n3"};
    TEST("net/tcp puts 1 B..64 MiB, signals after data, flush (2 ranks, 2 nodes)",
         CHECK_EQ_INT(0, run("exchange", 2, two)));
    TEST("net/tcp all pairs across nodes (4 ranks, 2 nodes)",
         CHECK_EQ_INT(0, run("exchange", 4, four)));
    TEST("net/tcp all pairs across nodes (4 ranks, 4 nodes)",
         CHECK_EQ_INT(0, run("exchange", 4, four4)));
    TEST("net/tcp the default socket count (4 for 2 ranks a node) spreads puts of 512 KiB and "
         "more over all, smaller ones over 2: puts 1 B..64 MiB (4 ranks, 2 nodes)",
         CHECK_EQ_INT(0, run("exchange-auto", 4, four)));
    TEST("net/tcp MSCCLRT_SOCKET_SPREAD_BUSY=1: puts in flight together spread over every socket, "
         "lone ones keep to two; data before each signal (4 ranks, 2 nodes)",
         CHECK_EQ_INT(0, run("spread-busy", 4, four)));
    TEST("net/tcp MSCCLRT_SOCKET_PUT_SIGNAL=1: a put of up to 64 KiB and its signal in one write, "
         "larger ones in turn; data before each signal (4 ranks, 2 nodes)",
         CHECK_EQ_INT(0, run("put-signal", 4, four)));
    TEST("net/tcp net_put_signal with MSCCLRT_SOCKET_PUT_SIGNAL=0: put, then signal (2 ranks)",
         CHECK_EQ_INT(0, run("put-signal-off", 2, two)));
    TEST("net/tcp MSCCLRT_SOCKET_NSOCKS=0 is refused by name (2 ranks)",
         CHECK_EQ_INT(0, run("nsocks-zero", 2, two)));
    TEST("net/tcp a burst of small puts beyond the socket buffers (2 ranks)",
         CHECK_EQ_INT(0, run("burst", 2, two)));
    TEST("net/tcp a signal waits for the pieces before it on every socket (2 ranks, 4 sockets)",
         CHECK_EQ_INT(0, run("reorder", 2, two)));
    TEST("net/tcp the socket of each piece, socket 0 kept for control or not", t_piece_socket());
    TEST("net/tcp a put that finds the pipe idle is split where the threads run apart", t_piece_bytes());
    TEST("net/tcp a split put's staged pieces go to the send thread", t_writes_inline());
    TEST("net/tcp MSCCLRT_SOCKET_NSOCKS=-1: four sockets while a rank has few ranks on other nodes", t_nsocks_auto());
    TEST("net/tcp MSCCLRT_SOCKET_SPREAD_BUSY: a put under the wide size spreads only when others "
         "are in flight", t_put_wide());
    TEST("net/tcp MSCCLRT_SOCKET_PUT_SIGNAL: one-piece puts on socket 0 travel with their signal",
         t_joins_signal());
    TEST("net/tcp socket 0 kept for control (MSCCLRT_SOCKET_CONTROL=1): a signal waits for the "
         "pieces on the other sockets (2 ranks, 4 sockets)", CHECK_EQ_INT(0, run("reorder-control", 2, two)));
    TEST("net/tcp socket 0 kept for control: puts 1 B..64 MiB (4 ranks, 2 nodes)",
         CHECK_EQ_INT(0, run("exchange-control", 4, four)));
    TEST("net/tcp a plan's flush returns once the sources are read (2 ranks)",
         CHECK_EQ_INT(0, run("sources", 2, two)));
    char lib[sizeof fake_dir + 16];
    fake_cuda_dir(fake_dir, sizeof fake_dir);
    snprintf(lib, sizeof lib, "%s/libcuda.so.1", fake_dir);
    TEST("net/tcp device mode (fake driver): puts 1 B..64 MiB, signals after data (2 ranks)",
         CHECK(access(lib, R_OK) == 0); CHECK_EQ_INT(0, run("dev-exchange", 2, two)));
    TEST("net/tcp device mode (fake driver): pieces of 16 and 64 KiB (MSCCLRT_SOCKET_PIECE_BYTES), "
         "signals after data (2 ranks)", CHECK_EQ_INT(0, run("dev-exchange-piece", 2, two)));
    TEST("net/tcp device mode: puts split into pieces staged by the send threads, signals after "
         "data (2 ranks)", CHECK_EQ_INT(0, run("dev-exchange-split", 2, two)));
    TEST("net/tcp device mode: MSCCLRT_SOCKET_STAGED_INLINE_BYTES=0, every staged piece by the "
         "send threads (2 ranks)", CHECK_EQ_INT(0, run("dev-exchange-staged-queued", 2, two)));
    TEST("net/tcp device mode (fake driver): the default socket count, narrow and wide puts "
         "(2 ranks)", CHECK_EQ_INT(0, run("dev-exchange-auto", 2, two)));
    TEST("net/tcp device mode (fake driver): MSCCLRT_SOCKET_SPREAD_BUSY=1, puts in flight "
         "together and lone ones (2 ranks)", CHECK_EQ_INT(0, run("dev-spread-busy", 2, two)));
    TEST("net/tcp device mode (fake driver): MSCCLRT_SOCKET_PUT_SIGNAL=1, staged puts with their "
         "signal in one write (2 ranks)", CHECK_EQ_INT(0, run("dev-put-signal", 2, two)));
    TEST("net/tcp device mode (fake driver): all pairs across nodes (4 ranks, 2 nodes)",
         CHECK_EQ_INT(0, run("dev-exchange", 4, four)));
    TEST("net/tcp device mode (fake driver): a burst of small puts (2 ranks)",
         CHECK_EQ_INT(0, run("dev-burst", 2, two)));
    TEST("net/tcp device mode (fake driver): a signal waits for every socket's pieces",
         CHECK_EQ_INT(0, run("dev-reorder", 2, two)));
    TEST("net/tcp device mode (fake driver): socket 0 kept for control, signals after data",
         CHECK_EQ_INT(0, run("dev-reorder-control", 2, two)));
    TEST("net/tcp device mode (fake driver): a plan's flush waits for the staging copies",
         CHECK_EQ_INT(0, run("dev-sources", 2, two)));
    TEST("net/tcp device mode (fake driver): puts from a host source go unstaged; its flush",
         CHECK_EQ_INT(0, run("dev-hostsrc", 2, two)));
    TEST("net/tcp device mode (fake driver): a host region receives without a device copy",
         CHECK_EQ_INT(0, run("dev-hostreg", 2, two)));
    TEST("net/tcp a peer that closes its sockets is named", CHECK_EQ_INT(0, run("fault-close", 2, two)));
    TEST("net/tcp a peer that stops answering is named within the timeout",
         CHECK_EQ_INT(0, run("fault-silent", 2, two)));
    TEST("net/tcp a plan's flush to a peer that stops answering ends within the timeout",
         CHECK_EQ_INT(0, run("fault-sources", 2, two)));
    return harness_report();
}

/*
 * test_peermem.c - peer memory's bookkeeping without a GPU (runtime/peermem): forked ranks
 * with a bootstrap and the real datagram channel, on PmOps that keep a fake allocation table.
 * Announcing once per allocation and finding sub-ranges at their offsets; a reused address (a
 * new buffer id) retired and announced again, and peers unmapping the old mapping; memory that
 * cannot be shared refused once and not tried again; the 64-slot limit; a mapping failure and
 * a malformed or out-of-order message marking the peer, whose upto then reads 0; announcements
 * that find a peer's queue full kept in order and delivered by later polls; a rank that cannot
 * make its table leaves every rank without peer memory; the ranks of one process talking
 * through their in-memory queues.
 */
#include "peermem/pm_internal.h"
#include "core/err.h"
#include "../harness.h"
#include "fork_ranks.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define CHECK_OK(call) do { mscclrt_result r__ = (call); CHECK_EQ_INT(MSCCLRT_SUCCESS, r__); \
    if (r__ != MSCCLRT_SUCCESS) fprintf(stderr, "  -> %s\n", mscclrt_last_error()); } while (0)

/* ---- fake allocations: base = (k + 1) << 32, 1 MiB each, buffer id per k ----------------- */
#define FAKE_N 80
#define FAKE_SIZE (1u << 20)
#define MAP_SHIFT 0x100000000000ull          /* where a peer's allocation "maps" here */
static uint64_t fake_id[FAKE_N];
static int describes, maps, unmaps, forgets, fd_maps;
static int my_memfd = -1;    /* the fd that travels with this rank's first allocation ("VMM") */
static uint64_t refuse_base, bad_map_base;    /* describe refuses / map fails for this base */

static uint64_t fbase(int k) { return (uint64_t)(k + 1) << 32; }

static mscclrt_result f_resolve(void *ctx, uint64_t p, uint64_t *base, uint64_t *size, uint64_t *id) {
    (void)ctx;
    for (int k = 0; k < FAKE_N; k++)
        if (p >= fbase(k) && p < fbase(k) + FAKE_SIZE) {
            *base = fbase(k), *size = FAKE_SIZE, *id = fake_id[k];
            return MSCCLRT_SUCCESS;
        }
    return rt_fail(MSCCLRT_ERR_INVALID_ARG, "%#llx is not fake device memory", (unsigned long long)p);
}
static mscclrt_result f_describe(void *ctx, uint64_t base, uint64_t size, IpcDesc *d, int *fd) {
    PeerMem *pm = *(PeerMem **)ctx;
    describes++;
    *fd = -1;
    if (base == refuse_base) return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "fake: not shareable");
    if (pm && base == fbase(pm->rank)) *fd = my_memfd;   /* borrowed, as the transport's */
    memset(d, 0, sizeof *d);
    d->magic = IPC_DESC_MAGIC, d->version = IPC_DESC_VERSION, d->kind = IPC_KIND_LEGACY;
    d->owner_rank = pm ? pm->rank : -1;
    d->base = base, d->size = size, d->bytes = size;
    return MSCCLRT_SUCCESS;
}
static void f_forget(void *ctx, uint64_t base) { (void)ctx, (void)base; forgets++; }
static mscclrt_result f_map(void *ctx, const IpcDesc *d, int fd, uint64_t *base) {
    (void)ctx;
    if (d->base == fbase(d->owner_rank)) {   /* its fd came along: read what the owner wrote */
        char got[32] = "", want[32];
        snprintf(want, sizeof want, "memory of rank %d", d->owner_rank);
        if (fd >= 0 && pread(fd, got, sizeof got - 1, 0) > 0 && strcmp(got, want) == 0) fd_maps++;
    }
    if (fd >= 0) close(fd);
    if (d->base == bad_map_base) return rt_fail(MSCCLRT_ERR_SYSTEM, "fake: cannot map %#llx",
                                                (unsigned long long)d->base);
    maps++;
    *base = d->base + MAP_SHIFT;
    return MSCCLRT_SUCCESS;
}
static void f_unmap(void *ctx, uint64_t base) { (void)ctx, (void)base; unmaps++; }
static int fail_table_on = -1;   /* the rank whose table allocation fails (-1: none) */
static int fail_table_rank;      /* this process's rank */
static mscclrt_result f_table_alloc(void *ctx, size_t bytes, uint64_t *dev) {
    (void)ctx;
    if (fail_table_on >= 0 && fail_table_rank == fail_table_on)
        return rt_fail(MSCCLRT_ERR_SYSTEM, "fake: no memory for the table");
    void *h = calloc(1, bytes);   /* the "device" table */
    *dev = (uint64_t)(uintptr_t)h;
    return h ? MSCCLRT_SUCCESS : rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory");
}
static mscclrt_result f_table_write(void *ctx, uint64_t dev, const void *src, size_t n) {
    (void)ctx;
    memcpy((void *)(uintptr_t)dev, src, n);
    return MSCCLRT_SUCCESS;
}
static void f_table_free(void *ctx, uint64_t dev) { (void)ctx; free((void *)(uintptr_t)dev); }
static const PmOps fake_ops = {f_resolve, f_describe, f_forget, f_map, f_unmap, f_table_alloc,
                               f_table_write, f_table_free};

/* entry (q, slot) of the kernels' table, as the "device" holds it */
static const MnPeerMem *dev_entry(const PeerMem *pm, int q, uint32_t slot) {
    return (const MnPeerMem *)(uintptr_t)pm->table_dev + (size_t)q * MN_PM_SLOTS + slot;
}

static int pending(const PeerMem *pm) {
    int k = 0;
    for (int q = 0; q < pm->nranks; q++) k += pm->out[q].n - pm->out[q].head;
    return k;
}
/* polls until peer's upto reaches want (or 3 s pass) */
static void poll_until(PeerMem *pm, int peer, uint32_t want) {
    for (int i = 0; i < 3000 && pm_upto(pm, peer) < want && !pm_peer_broken(pm, peer); i++) {
        pm_poll(pm);
        if (pm_upto(pm, peer) < want) usleep(1000);
    }
}
static void flush_all(PeerMem *pm) {
    for (int i = 0; i < 3000 && pending(pm); i++) {
        pm_poll(pm);
        if (pending(pm)) usleep(1000);
    }
}

static void locate(PeerMem *pm, uint64_t p, size_t n, uint32_t *pub, uint32_t *slot, uint64_t *off) {
    pm_locate(pm, (const void *)(uintptr_t)p, n, pub, slot, off);
}

/* ---- the scenario, on two ranks -------------------------------------------------------------- */
static void scenario(Boot *b, PeerMem *pm) {
    const int rank = boot_rank(b), peer = 1 - rank;
    uint32_t pub, slot;
    uint64_t off;
    /* 1. announce once; a sub-range of the same allocation at its offset, no new message */
    locate(pm, fbase(rank) + 256, 4096, &pub, &slot, &off);
    CHECK_EQ_INT(1, pub);
    CHECK_EQ_INT(256, (long long)off);
    const uint32_t first_slot = slot;
    locate(pm, fbase(rank) + 8192, 4096, &pub, &slot, &off);
    CHECK_EQ_INT(1, pub);
    CHECK_EQ_INT(first_slot, slot);
    CHECK_EQ_INT(8192, (long long)off);
    CHECK_EQ_INT(1, describes);
    /* a buffer running past its allocation, and one that is not device memory: not shared */
    locate(pm, fbase(rank) + FAKE_SIZE - 16, 32, &pub, &slot, &off);
    CHECK_EQ_INT(0, pub);
    locate(pm, 12345, 4, &pub, &slot, &off);
    CHECK_EQ_INT(0, pub);
    poll_until(pm, peer, 1);
    CHECK_EQ_INT(1, pm_upto(pm, peer));
    CHECK_EQ_INT(1, fd_maps);   /* the "VMM" allocation's descriptor arrived with it */
    const MnPeerMem *e = dev_entry(pm, peer, first_slot);
    CHECK_EQ_INT(1, (long long)e->pub);
    CHECK_EQ_INT((long long)(fbase(peer) + MAP_SHIFT), (long long)e->base);
    MnDirect d;
    memset(&d, 0, sizeof d);
    pm_direct_args(pm, &d);
    CHECK_EQ_INT(1, d.rec.upto[peer]);
    CHECK_EQ_INT((long long)pm->table_dev, (long long)d.table);
    CHECK_OK(boot_barrier(b));

    /* 2. the same address, a new allocation: retired (message 2), announced again (3) */
    fake_id[rank] += 1000;
    locate(pm, fbase(rank), 64, &pub, &slot, &off);
    CHECK_EQ_INT(3, pub);
    CHECK_EQ_INT(1, pm_live_shares(pm));
    CHECK_EQ_INT(1, forgets);
    poll_until(pm, peer, 3);
    CHECK_EQ_INT(3, pm_upto(pm, peer));
    CHECK_EQ_INT(1, unmaps);
    CHECK_EQ_INT(2, maps);
    e = dev_entry(pm, peer, slot);
    CHECK_EQ_INT(3, (long long)e->pub);
    CHECK_OK(boot_barrier(b));

    /* 3. memory that cannot be shared: refused once, never described again */
    refuse_base = fbase(2 + rank);
    const int before = describes;
    locate(pm, fbase(2 + rank), 64, &pub, &slot, &off);
    CHECK_EQ_INT(0, pub);
    locate(pm, fbase(2 + rank) + 64, 64, &pub, &slot, &off);
    CHECK_EQ_INT(0, pub);
    CHECK_EQ_INT(before + 1, describes);
    refuse_base = 0;

    /* 4. 64 slots: rank 0 fills them (while rank 1 does not poll: its queue fills, the outbox
     * keeps the rest), the 65th is not shared; rank 1 then gets all of them, in order */
    if (rank == 0) {
        for (int k = 4; k < 4 + MN_PM_SLOTS - 1; k++) {
            locate(pm, fbase(k), 64, &pub, &slot, &off);
            CHECK(pub > 3);
        }
        CHECK_EQ_INT(MN_PM_SLOTS, pm_live_shares(pm));
        locate(pm, fbase(4 + MN_PM_SLOTS), 64, &pub, &slot, &off);
        CHECK_EQ_INT(0, pub);
        CHECK(pending(pm) > 0);   /* more than a datagram queue holds (net.unix.max_dgram_qlen) */
    }
    CHECK_OK(boot_barrier(b));
    if (rank == 0) flush_all(pm);
    else poll_until(pm, 0, 3 + MN_PM_SLOTS - 1);
    CHECK_EQ_INT(0, pending(pm));
    if (rank == 1) {
        CHECK_EQ_INT(3 + MN_PM_SLOTS - 1, pm_upto(pm, 0));
        CHECK(!pm_peer_broken(pm, 0));
    }
    CHECK_OK(boot_barrier(b));

}

/* 6. a peer breaking the protocol: a message that skips numbers, then a malformed one */
static void hostile(Boot *b, PeerMem *pm) {
    const int rank = boot_rank(b), peer = 1 - rank;
    if (rank == 1) {
        PmMsgWire m = {.magic = PM_MAGIC, .version = PM_VERSION, .kind = PM_RETIRE,
                       .pub = pm->last_pub + 5, .slot = 0};
        bool sent = false;
        CHECK_OK(pm->chan->post(pm->chan, 0, &m, -1, &sent));
        CHECK(sent);
    }
    CHECK_OK(boot_barrier(b));
    if (rank == 0) {
        for (int i = 0; i < 1000 && !pm_peer_broken(pm, peer); i++) {
            pm_poll(pm);
            usleep(1000);
        }
        CHECK(pm_peer_broken(pm, peer));
        MnDirect d;
        pm_direct_args(pm, &d);
        CHECK_EQ_INT(0, d.rec.upto[peer]);   /* no launch touches rank 1's memory now */
    }
    CHECK_OK(boot_barrier(b));
}

/* 7. an announcement whose mapping fails marks the announcer: rank 0 reuses the address of
 * an allocation rank 1 mapped in step 4, and this time rank 1 cannot map it */
static void map_failure(Boot *b, PeerMem *pm) {
    const int rank = boot_rank(b);
    bad_map_base = fbase(60);
    if (rank == 0) {
        fake_id[60] += 7;
        uint32_t pub, slot;
        uint64_t off;
        locate(pm, fbase(60), 64, &pub, &slot, &off);   /* retire + announce again */
        CHECK(pub > 0);
    }
    CHECK_OK(boot_barrier(b));
    if (rank == 1) {
        for (int i = 0; i < 1000 && !pm_peer_broken(pm, 0); i++) {
            pm_poll(pm);
            usleep(1000);
        }
        CHECK(pm_peer_broken(pm, 0));
        MnDirect d;
        pm_direct_args(pm, &d);
        CHECK_EQ_INT(0, d.rec.upto[0]);
    }
    CHECK_OK(boot_barrier(b));
}

typedef void (*Step)(Boot *, PeerMem *);

/* 8. all or none: rank 1 cannot make its table, so neither rank gets peer memory (a rank
 * without it would still be announced to) and pm_create succeeds on both */
static int child_agree(const BootId *id, int rank) {
    alarm(60);
    Boot *b = NULL;
    static PeerMem *pm;
    fail_table_on = 1;
    fail_table_rank = rank;
    CHECK_OK(boot_init(&b, id, rank, 2, 5000));
    if (b) CHECK_OK(pm_create(&pm, b, &fake_ops, &pm));
    CHECK(pm == NULL);
    pm_destroy(pm);
    boot_close(b);
    return h_failed ? 1 : 0;
}

static int child(const BootId *id, int rank, Step step) {
    alarm(60);
    for (int k = 0; k < FAKE_N; k++) fake_id[k] = 100 + (uint64_t)k;
    my_memfd = memfd_create("peermem-test", MFD_CLOEXEC);
    char text[32];
    const int tl = snprintf(text, sizeof text, "memory of rank %d", rank);
    CHECK(my_memfd >= 0 && write(my_memfd, text, (size_t)tl) == tl);
    Boot *b = NULL;
    static PeerMem *pm;
    CHECK_OK(boot_init(&b, id, rank, 2, 5000));
    if (b) CHECK_OK(pm_create(&pm, b, &fake_ops, &pm));
    CHECK(pm != NULL);
    if (pm) step(b, pm);
    pm_destroy(pm);
    boot_close(b);
    return h_failed ? 1 : 0;
}

/* a rank of run_forked: the step to run, or NULL for all_or_none's child_agree */
static int rank_main(const BootId *id, int rank, int n, void *arg) {
    (void)n;
    Step step = *(Step *)arg;
    return step ? child(id, rank, step) : child_agree(id, rank);
}

static int run_forked(Step step) {
    return fork_ranks(2, rank_main, &step);
}

static void steps_all(Boot *b, PeerMem *pm) {
    scenario(b, pm);
    map_failure(b, pm);
}

/* 9. the ranks of one process: the in-memory channel carries the same messages */
static void local_group(void) {
    for (int k = 0; k < FAKE_N; k++) fake_id[k] = 100 + (uint64_t)k;
    describes = maps = unmaps = forgets = fd_maps = 0;
    fail_table_on = -1;
    my_memfd = -1;
    PmLocalGroup *g = pm_local_group_new(2);
    CHECK(g != NULL);
    static PeerMem *pms[2];
    for (int r = 0; g && r < 2; r++) CHECK_OK(pm_create_local(&pms[r], g, r, 2, &fake_ops, &pms[r]));
    pm_local_group_drop(g);   /* the PeerMems hold it */
    if (!pms[0] || !pms[1]) return;
    uint32_t pub, slot;
    uint64_t off;
    locate(pms[0], fbase(5) + 64, 64, &pub, &slot, &off);
    CHECK_EQ_INT(1, pub);
    CHECK_EQ_INT(0, pm_upto(pms[1], 0));
    pm_poll(pms[1]);
    CHECK_EQ_INT(1, pm_upto(pms[1], 0));
    CHECK_EQ_INT((long long)(fbase(5) + MAP_SHIFT), (long long)dev_entry(pms[1], 0, slot)->base);
    /* reused address: retired and announced again, in order, through the same queue */
    fake_id[5] += 1;
    locate(pms[0], fbase(5), 64, &pub, &slot, &off);
    CHECK_EQ_INT(3, pub);
    pm_poll(pms[1]);
    CHECK_EQ_INT(3, pm_upto(pms[1], 0));
    CHECK_EQ_INT(1, unmaps);
    CHECK(!pm_peer_broken(pms[1], 0));
    /* a rank's own queue holds nothing of its own; the other direction works alike */
    pm_poll(pms[0]);
    CHECK_EQ_INT(0, pm_upto(pms[0], 1));
    locate(pms[1], fbase(6), 64, &pub, &slot, &off);
    pm_poll(pms[0]);
    CHECK_EQ_INT(1, pm_upto(pms[0], 1));
    pm_destroy(pms[0]);
    pm_destroy(pms[1]);   /* the last reference frees the group */
}

int main(void) {
    alarm(120);
    setenv("MSCCLRT_SOCKET_IFNAME", "lo", 0);
    TEST("peermem/announce_reuse_refuse_slots_outbox", CHECK_EQ_INT(0, run_forked(steps_all)));
    TEST("peermem/hostile_out_of_order", CHECK_EQ_INT(0, run_forked(hostile)));
    TEST("peermem/all_or_none", CHECK_EQ_INT(0, run_forked(NULL)));
    TEST("peermem/one_process", local_group());
    return harness_report();
}

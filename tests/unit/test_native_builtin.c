/*
 * test_native_builtin.c - the built-in native algorithms without a GPU: NVRTC compiles their
 * source (kernels/native_builtin.cuh through the embedded device library) for every dtype and
 * operator they are specialised for, PreMulSum and the byte-moving variant included; the
 * native scratch layout leaves aligned, non-empty slots for 1 to 1024 ranks (or says it cannot),
 * packet slots that fit a quarter of the scratch; and the default grid sends a call as packets
 * exactly while its bytes per peer are at most MSCCLRT_NATIVE_PACKET_BYTES.
 * Skips (77) where NVRTC cannot be loaded.
 */
#include "../harness.h"
#include "algo/algo_native.h"
#include "codegen/codegen.h"
#include "core/err.h"
#include "exec/exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* body as native_kernel builds its module (native_module_source), checked by NVRTC for sm_90 */
static bool compile_as(int dt, int op, const char *T, const char *body, bool probe, bool net) {
    char *src = native_module_source(body, probe, net, dt, op, T);
    if (!src) return false;
    char what[64];
    snprintf(what, sizeof what, "builtin %s op %d%s%s", T, op, probe ? " probe" : "",
             net ? "" : " one node");
    mscclrt_result r = cg_check_source(src, 90, what);
    if (r != MSCCLRT_SUCCESS) fprintf(stderr, "%s\n", mscclrt_last_error());
    free(src);
    return r == MSCCLRT_SUCCESS;
}
static bool compile_src(int dt, int op, const char *T, const char *body) {
    return compile_as(dt, op, T, body, false, true);
}
static bool compile(int dt, int op, const char *T) {
    return compile_src(dt, op, T, algo_native_builtin_source());
}

/* the direct kernel's module (kernels/native_direct.cuh, its slot path inlined): the byte-moving
 * variant, the reductions it serves, and those it leaves to the slots (fp8, avg, PreMulSum) */
static void t_direct_compiles(void) {
    const char *d = algo_native_direct_source();
    CHECK(compile_src(-1, 0, "mk::u8", d));
    CHECK(compile_src(MSCCLRT_FLOAT32, MSCCLRT_SUM, cg_ctype(MSCCLRT_FLOAT32), d));
    CHECK(compile_src(MSCCLRT_BFLOAT16, MSCCLRT_MAX, cg_ctype(MSCCLRT_BFLOAT16), d));
    CHECK(compile_src(MSCCLRT_FLOAT16, MSCCLRT_AVG, cg_ctype(MSCCLRT_FLOAT16), d));
    CHECK(compile_src(MSCCLRT_FP8_E4M3, MSCCLRT_SUM, cg_ctype(MSCCLRT_FP8_E4M3), d));
    CHECK(compile_src(MSCCLRT_INT64, MN_OP_PREMULSUM, cg_ctype(MSCCLRT_INT64), d));
}

/* MSCCLRT_NATIVE_PROBE's modules: the same sources with the timestamps compiled in */
static void t_probe_compiles(void) {
    const char *b = algo_native_builtin_source(), *d = algo_native_direct_source();
    CHECK(compile_as(MSCCLRT_FLOAT16, MSCCLRT_SUM, cg_ctype(MSCCLRT_FLOAT16), b, true, true));
    CHECK(compile_as(-1, 0, "mk::u8", b, true, true));
    CHECK(compile_as(MSCCLRT_FLOAT16, MSCCLRT_SUM, cg_ctype(MSCCLRT_FLOAT16), d, true, true));
}

/* a communicator on one node (no proxy FIFO): native_kernel's module defines MN_NET 0, which
 * compiles the paths to other nodes out; one that spans nodes does not */
static void t_single_node_compiles(void) {
    const char *b = algo_native_builtin_source(), *d = algo_native_direct_source();
    char *one = native_module_source(b, false, false, -1, 0, "mk::u8");
    char *net = native_module_source(b, true, true, 3, 2, "float");
    CHECK(one && strstr(one, "#define MN_NET 0\n") && !strstr(one, "MN_PROBE"));
    CHECK(net && !strstr(net, "MN_NET") && strstr(net, "#define MN_PROBE 1\n") &&
          strstr(net, "#define MSCCLRT_DTYPE 3\n#define MSCCLRT_OP 2\n#define MSCCLRT_T float\n"));
    CHECK(net && strcmp(net + strlen(net) - strlen(b), b) == 0);   /* the body last, whole */
    free(one);
    free(net);
    CHECK(compile_as(-1, 0, "mk::u8", b, false, false));
    CHECK(compile_as(MSCCLRT_BFLOAT16, MSCCLRT_SUM, cg_ctype(MSCCLRT_BFLOAT16), b, false, false));
    CHECK(compile_as(MSCCLRT_FLOAT16, MSCCLRT_SUM, cg_ctype(MSCCLRT_FLOAT16), d, false, false));
    CHECK(compile_as(MSCCLRT_FLOAT16, MSCCLRT_SUM, cg_ctype(MSCCLRT_FLOAT16), d, true, false));
}

static void t_compiles(bool all) {
    CHECK(compile(-1, 0, "mk::u8"));
    for (int dt = 0; dt < MSCCLRT_DTYPE_COUNT; dt++)
        for (int op = 0; op <= MN_OP_PREMULSUM; op++) {
            if (!all && dt != MSCCLRT_FLOAT32 && dt != MSCCLRT_BFLOAT16 && dt != MSCCLRT_FP8_E4M3 &&
                dt != MSCCLRT_INT64)
                continue;
            CHECK(compile(dt, op, cg_ctype((mscclrt_dtype)dt)));
        }
}

static void t_layout(void) {
    for (int n = 1; n <= 1024; n *= 2) {
        uint64_t off = 0;
        const uint64_t slot = native_slot_bytes(n, 32u << 20, false, &off);
        if (n <= 256) CHECK(slot >= 256);
        if (!slot) continue;
        CHECK_EQ_INT(0, slot % 256);
        CHECK_EQ_INT(0, off % 256);
        const uint64_t pk = native_pk_slot_bytes(n, 32u << 20);
        CHECK_EQ_INT(0, pk % 256);
        CHECK(pk <= MN_PK_SLOT_BYTES);
        if (n <= 2) CHECK_EQ_INT(MN_PK_SLOT_BYTES, pk);              /* full packet slots */
        if (n <= 8) CHECK(pk >= 2 * MN_PK_GRID_BYTES);  /* a grid share fits, LL16 doubling it */
        CHECK((uint64_t)MN_MAX_BLOCKS * n * 2 * pk <= (32u << 20) / 4); /* a quarter at most */
        /* 7 counter arrays and the direct path's counts, then packet slots, then slots */
        CHECK(off >= 8ull * MN_MAX_BLOCKS * (uint64_t)n * 8 + (uint64_t)MN_MAX_BLOCKS * n * 2 * pk);
        CHECK(off + (uint64_t)MN_MAX_BLOCKS * n * 2 * slot <= (32u << 20)); /* slots fit */
        /* up to 8 ranks, the direct kernels' lanes lie between the packet slots and the slots */
        if (n <= MN_DIRECT_MAX_RANKS)
            CHECK(off >= 8ull * MN_MAX_BLOCKS * (uint64_t)n * 8 + (uint64_t)MN_MAX_BLOCKS * n * 2 * pk +
                         (uint64_t)MN_LANE_CTRS * MN_DIRECT_BLOCKS * n * 8 +
                         (uint64_t)MN_DIRECT_BLOCKS * n * 2 * MN_LANE_REC_BYTES);
    }
    CHECK_EQ_INT(0, native_slot_bytes(8, 4096, false, NULL));   /* too small: refused, not negative */
    /* across nodes a second packet area (outgoing packets): the slots start that much later */
    for (int n = 2; n <= 16; n *= 2) {
        uint64_t off = 0, off_net = 0;
        const uint64_t slot = native_slot_bytes(n, 32u << 20, false, &off);
        const uint64_t slot_net = native_slot_bytes(n, 32u << 20, true, &off_net);
        CHECK_EQ_INT((uint64_t)MN_MAX_BLOCKS * n * 2 * native_pk_slot_bytes(n, 32u << 20), off_net - off);
        CHECK(slot_net > 0 && slot_net <= slot && slot_net % 256 == 0);
        CHECK(off_net + (uint64_t)MN_MAX_BLOCKS * n * 2 * slot_net <= (32u << 20));
    }
    CHECK_EQ_INT(0, native_pk_slot_bytes(1024, 32u << 20)); /* no packet slots for 1024 ranks */
}

/* The host Simple slots across nodes (MnContext.net_slot_bytes): the wanted size where the area
 * fits 64 MiB, less where it would not, never below the scratch's slot, 256-byte multiples. */
static void t_net_slot(void) {
    const uint64_t slot = native_slot_bytes(2, 32u << 20, true, NULL);
    CHECK_EQ_INT(512u << 10, native_net_slot_bytes(2, slot, 512u << 10));   /* 64 MiB exactly */
    CHECK_EQ_INT(256u << 10, native_net_slot_bytes(2, slot, (256u << 10) + 100));
    CHECK_EQ_INT(256u << 10, native_net_slot_bytes(4, 1024, 512u << 10));   /* reduced to fit */
    CHECK_EQ_INT(128u << 10, native_net_slot_bytes(8, 1024, 512u << 10));
    CHECK_EQ_INT(slot, native_net_slot_bytes(2, slot, 0));                  /* 0: the scratch's */
    CHECK_EQ_INT(slot, native_net_slot_bytes(2, slot, 4096));               /* never below it */
    for (int n = 2; n <= 1024; n *= 2) {
        const uint64_t s = native_net_slot_bytes(n, 256, 512u << 10);
        CHECK(s >= 256 && s % 256 == 0);
        CHECK(s == 256 || (uint64_t)MN_MAX_BLOCKS * n * 2 * s <= (64u << 20));
    }
}

/* The kernels send packets when a block's share, round16(ceil(peer / blocks)), fits a packet
 * slot's data: the default grid must give that for every size up to pk_max, and never a grid
 * outside 1..MN_MAX_BLOCKS. */
static void t_grid(void) {
    const uint64_t pk_data = MN_PK_DATA_BYTES, pk_max = 256u << 10;
    static const uint64_t sizes[] = {1, 7, 8, 15, 16, 1000, 8191, 8192, 8193, 65535, 65536,
                                     200001, 262143, 262144, 262145, 1u << 20, 1u << 30};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        int b = 0, t = 0;
        native_default_grid(sizes[i], sizes[i], pk_data, pk_max, MN_MAX_BLOCKS, false, &b, &t);
        CHECK(b >= 1 && b <= MN_MAX_BLOCKS);
        CHECK(t >= 32 && t <= 1024 && t % 32 == 0);
        const uint64_t share = ((sizes[i] + (uint64_t)b - 1) / (uint64_t)b + 15) / 16 * 16;
        /* packets (the kernel's pk_fits: within pk_max, the share fits a slot's data), a
         * block per MN_PK_GRID_BYTES up to the cap */
        if (sizes[i] <= pk_max) {
            CHECK(share <= pk_data);
            const uint64_t want = (sizes[i] + MN_PK_GRID_BYTES - 1) / MN_PK_GRID_BYTES;
            CHECK_EQ_INT((int)(want < 1 ? 1 : want > MN_MAX_BLOCKS ? MN_MAX_BLOCKS : want), b);
        }
        int b2 = 0, t2 = 0;   /* no packet slots: the size rule alone */
        native_default_grid(sizes[i], sizes[i], 0, pk_max, MN_MAX_BLOCKS, false, &b2, &t2);
        CHECK(b2 >= 1 && b2 <= MN_MAX_BLOCKS);
        int b8 = 0, t8 = 0;   /* a cap of 16 (8 ranks on a 132-SM GPU): 16 blocks at most */
        native_default_grid(sizes[i], sizes[i], pk_data, pk_max, 16, true, &b8, &t8);
        CHECK(b8 >= 1 && b8 <= 16);
        int bs = 0, ts = 0;   /* ranks sharing a GPU: 8 blocks on the slot path up to 1 MiB */
        native_default_grid(sizes[i], sizes[i], 0, pk_max, MN_MAX_BLOCKS, true, &bs, &ts);
        CHECK(sizes[i] <= (64u << 10) ? bs == 1 : sizes[i] <= (1u << 20) ? bs == 8 : bs == 32);
        int b3 = 5, t3 = 0;   /* a given block count stays */
        native_default_grid(sizes[i], sizes[i], pk_data, pk_max, MN_MAX_BLOCKS, false, &b3, &t3);
        CHECK_EQ_INT(5, b3);
    }
    /* MSCCLRT_NATIVE_PACKET_BYTES=1 MiB: 32 blocks carry 1 MiB per peer as packets, 512 KiB
     * too; beyond 32 slots' data the slots */
    int bp = 0, tp = 0;
    native_default_grid(1u << 20, 1u << 20, pk_data, 1u << 20, MN_MAX_BLOCKS, false, &bp, &tp);
    CHECK_EQ_INT(MN_MAX_BLOCKS, bp);
    CHECK(((1u << 20) + MN_MAX_BLOCKS - 1) / MN_MAX_BLOCKS <= pk_data);
    CHECK_EQ_INT(512, tp);
    CHECK_EQ_INT(32, (int)mn_p2p_entry_blocks(512u << 10, 0, pk_data, 1u << 20, 0, 32));
    CHECK_EQ_INT(8, (int)mn_p2p_entry_blocks(1u << 20, 0, pk_data, 1u << 20, 0, 8)); /* > 8 x 32 K: grid */
}

/* A send/recv entry's blocks (mn_p2p_entry_blocks, which the kernel and the host's launch grid
 * both apply): within a node packet-sized messages take one block per packet message, so each
 * block's share fits one (the kernel's packet test), larger ones the whole group grid; to
 * another node one block per MiB; always 1..full. */
static void t_p2p_blocks(void) {
    const uint64_t pk_data = MN_PK_DATA_BYTES, pk_max = 256u << 10;
    static const uint64_t sizes[] = {1, 16, 1024, 8191, 8192, 8193, 65536, 262143, 262144,
                                     262145, 1u << 20, (3u << 20) + 5, 1u << 30};
    static const uint32_t fulls[] = {1, 8, 32};
    for (size_t f = 0; f < sizeof fulls / sizeof *fulls; f++)
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            const uint64_t n = sizes[i];
            const uint32_t full = fulls[f];
            const uint32_t k = mn_p2p_entry_blocks(n, 0, pk_data, pk_max, 0, full);
            CHECK(k >= 1 && k <= full);
            const uint64_t share = ((n + k - 1) / k + 15) / 16 * 16;
            if (n <= pk_max && n <= full * pk_data) {
                CHECK(share <= pk_data);                        /* packets fit each block */
                const uint64_t want = (n + MN_PK_GRID_BYTES - 1) / MN_PK_GRID_BYTES; /* a block per grid share */
                CHECK_EQ_INT((int)(want < full ? want : full), (int)k);
            } else {
                CHECK_EQ_INT((int)full, (int)k);
            }
            /* to another node: packets up to the limit (here pk_max) where the grid holds them,
             * one block per packet message, each block's share fitting one; else a block per MiB */
            const uint32_t kr = mn_p2p_entry_blocks(n, 1, pk_data, pk_max, 0, full);
            const uint64_t mib = n >> 20;
            if (n <= pk_max && n <= full * pk_data) {
                CHECK_EQ_INT((int)((n + pk_data - 1) / pk_data), (int)kr);
                CHECK(kr >= 1 && kr <= full);
                CHECK(((n + kr - 1) / kr + 15) / 16 * 16 <= pk_data);
            } else {
                CHECK_EQ_INT((int)(mib < 1 ? 1 : mib < full ? mib : full), (int)kr);
            }
            /* a limit of one message's data: one block up to it, the MiB rule beyond */
            const uint32_t k1 = mn_p2p_entry_blocks(n, 1, pk_data, pk_data, 0, full);
            CHECK_EQ_INT((int)(n <= pk_data || mib < 1 ? 1 : mib < full ? mib : full), (int)k1);
            /* no packet slots: the whole grid */
            CHECK_EQ_INT((int)full, (int)mn_p2p_entry_blocks(n, 0, 0, pk_max, 0, full));
        }
    CHECK_EQ_INT(1, (int)mn_p2p_entry_blocks(1024, 0, pk_data, pk_max, 0, 0));   /* full 0 is 1 */
    CHECK_EQ_INT(8, (int)mn_p2p_entry_blocks(256u << 10, 1, pk_data, 1u << 20, 0, 32));  /* 8 x 32 KiB */
    CHECK_EQ_INT(32, (int)mn_p2p_entry_blocks(1u << 20, 1, pk_data, 1u << 20, 0, 32));
    CHECK_EQ_INT(1, (int)mn_p2p_entry_blocks(1u << 20, 1, pk_data, 1u << 20, 0, 16)); /* grid too small */
    CHECK_EQ_INT(2, (int)mn_p2p_entry_blocks((2u << 20) + 1, 1, pk_data, 1u << 20, 0, 32)); /* MiB rule */
    /* MSCCLRT_NATIVE_NET_BLOCK_BYTES: a block per net_block bytes to another node */
    CHECK_EQ_INT(4, (int)mn_p2p_entry_blocks(1u << 20, 1, pk_data, 32768, 256u << 10, 32));
    CHECK_EQ_INT(3, (int)mn_p2p_entry_blocks((1u << 20) - 1, 1, pk_data, 32768, 256u << 10, 32));
    CHECK_EQ_INT(1, (int)mn_p2p_entry_blocks(100000, 1, pk_data, 32768, 256u << 10, 32));
    CHECK_EQ_INT(8, (int)mn_p2p_entry_blocks(1u << 20, 1, pk_data, 32768, 128u << 10, 8)); /* grid */
    CHECK_EQ_INT(1, (int)mn_p2p_entry_blocks(1024, 0, pk_data, pk_max, 0, 32));
    CHECK_EQ_INT(8, (int)mn_p2p_entry_blocks(65536, 0, pk_data, pk_max, 0, 32));
    CHECK_EQ_INT(32, (int)mn_p2p_entry_blocks(262144, 0, pk_data, pk_max, 0, 32));
    CHECK_EQ_INT(32, (int)mn_p2p_entry_blocks(262145, 0, pk_data, pk_max, 0, 32));
    /* an entry that may go direct: the grid in flags (MSCCLRT_NATIVE_P2P_DIRECT_BLOCKS) or,
     * with none there, the wide grid from MN_P2P_WIDE_BYTES on and its own below; the batch
     * bit does not leak into it */
    const uint64_t big = MN_P2P_WIDE_BYTES;
    CHECK_EQ_INT(32, (int)mn_p2p_direct_blocks(0, 32, big));
    CHECK_EQ_INT(32, (int)mn_p2p_direct_blocks(MN_P2P_PK_BATCH, 32, 1 << 20));
    CHECK_EQ_INT(64, (int)mn_p2p_direct_blocks((64u << MN_P2P_DIRECT_BLOCKS_SHIFT) | MN_P2P_PK_BATCH, 32, 1 << 20));
    CHECK_EQ_INT(128, (int)mn_p2p_direct_blocks(128u << MN_P2P_DIRECT_BLOCKS_SHIFT, 8, 1 << 20));
    const mk_u32 wide = (mk_u32)MN_P2P_WIDE_BLOCKS << MN_P2P_WIDE_SHIFT | MN_P2P_PK_BATCH;
    CHECK_EQ_INT(32, (int)mn_p2p_direct_blocks(wide, 32, big - 1));
    CHECK_EQ_INT(MN_P2P_WIDE_BLOCKS, (int)mn_p2p_direct_blocks(wide, 32, big));
    CHECK_EQ_INT(MN_P2P_WIDE_BLOCKS, (int)mn_p2p_direct_blocks(wide, 32, 1ull << 30));
    /* an explicit grid wins over the wide one at every size */
    CHECK_EQ_INT(64, (int)mn_p2p_direct_blocks(wide | 64u << MN_P2P_DIRECT_BLOCKS_SHIFT, 32, big));
    CHECK(MN_DIRECT_BLOCKS < 256 && MN_P2P_WIDE_BLOCKS <= MN_DIRECT_BLOCKS);   /* fit 8 bits */
    /* the host's flags: batch alone without direct entries; by default the wide grid, capped,
     * and only where it beats the group grid; an explicit grid, capped */
    CHECK_EQ_INT((int)MN_P2P_PK_BATCH, (int)mn_p2p_flags(1, 0, 64, 128, 32));
    CHECK_EQ_INT(0, (int)mn_p2p_flags(0, 0, 0, 128, 32));
    CHECK_EQ_INT((int)wide, (int)mn_p2p_flags(1, 1, 0, 128, 32));
    CHECK_EQ_INT(64, (int)mn_p2p_direct_blocks(mn_p2p_flags(1, 1, 0, 64, 32), 32, big));
    CHECK_EQ_INT((int)MN_P2P_PK_BATCH, (int)mn_p2p_flags(1, 1, 0, 32, 32));   /* 32 blocks cap */
    CHECK_EQ_INT(32, (int)mn_p2p_direct_blocks(mn_p2p_flags(0, 1, 0, 16, 32), 32, 1ull << 30));
    CHECK_EQ_INT(64, (int)mn_p2p_direct_blocks(mn_p2p_flags(0, 1, 64, 128, 32), 32, 1 << 20));
    CHECK_EQ_INT(16, (int)mn_p2p_direct_blocks(mn_p2p_flags(0, 1, 64, 16, 32), 32, 1 << 20));
}

/* The block cap: the fewest multiprocessors over the most ranks sharing a process and GPU. */
/* The direct kernel's grid (native_direct_grid): an explicit variable everywhere; by default
 * 64, for alltoall 80 from 64 MiB and the wide grid from 512 MiB, for reduce_scatter of 2 ranks
 * by stores 96 from its threshold; always within the cap */
static void t_direct_grid(void) {
    const uint64_t big = 512ull << 20, mid = 64ull << 20, ps = 32ull << 20;
    CHECK_EQ_INT(64, native_direct_grid(MSCCLRT_COLL_ALLREDUCE, 1ull << 30, 2, ps, 0, 128));
    CHECK_EQ_INT(64, native_direct_grid(MSCCLRT_COLL_ALLGATHER, mid, 2, ps, 0, 128));
    CHECK_EQ_INT(64, native_direct_grid(MSCCLRT_COLL_ALLTOALL, mid - 1, 2, ps, 0, 128));
    CHECK_EQ_INT(80, native_direct_grid(MSCCLRT_COLL_ALLTOALL, mid, 2, ps, 0, 128));
    CHECK_EQ_INT(80, native_direct_grid(MSCCLRT_COLL_ALLTOALL, big - 1, 2, ps, 0, 128));
    CHECK_EQ_INT(72, native_direct_grid(MSCCLRT_COLL_ALLTOALL, mid, 2, ps, 0, 72));   /* the cap */
    /* reduce_scatter of 2 ranks by stores (MSCCLRT_NATIVE_PUSH_RS_BYTES, here 32 MiB): both
     * roles' blocks */
    CHECK_EQ_INT(64, native_direct_grid(MSCCLRT_COLL_REDUCESCATTER, (32ull << 20) - 1, 2, ps, 0, 128));
    CHECK_EQ_INT(96, native_direct_grid(MSCCLRT_COLL_REDUCESCATTER, 32ull << 20, 2, ps, 0, 128));
    CHECK_EQ_INT(64, native_direct_grid(MSCCLRT_COLL_REDUCESCATTER, 1ull << 30, 4, ps, 0, 128));
    CHECK_EQ_INT(66, native_direct_grid(MSCCLRT_COLL_REDUCESCATTER, 1ull << 30, 2, ps, 0, 66));
    CHECK_EQ_INT(64, native_direct_grid(MSCCLRT_COLL_REDUCESCATTER, 1ull << 30, 2, 0, 0, 128));  /* off */
    CHECK_EQ_INT(MN_DIRECT_BLOCKS, native_direct_grid(MSCCLRT_COLL_ALLTOALL, big, 2, ps, 0, 128));
    CHECK_EQ_INT(MN_DIRECT_BLOCKS, native_direct_grid(MSCCLRT_COLL_ALLTOALL, 1ull << 30, 2, ps, 0, 128));
    CHECK_EQ_INT(33, native_direct_grid(MSCCLRT_COLL_ALLTOALL, 1ull << 30, 2, ps, 0, 33));   /* shared GPU */
    CHECK_EQ_INT(33, native_direct_grid(MSCCLRT_COLL_ALLGATHER, 1ull << 20, 2, ps, 0, 33));
    CHECK_EQ_INT(32, native_direct_grid(MSCCLRT_COLL_ALLTOALL, 1ull << 30, 2, ps, 32, 128));  /* explicit */
    CHECK_EQ_INT(128, native_direct_grid(MSCCLRT_COLL_REDUCESCATTER, 1024, 2, ps, 128, 128));
    CHECK_EQ_INT(16, native_direct_grid(MSCCLRT_COLL_REDUCESCATTER, 1024, 2, ps, 128, 16));
    CHECK_EQ_INT(1, native_direct_grid(MSCCLRT_COLL_ALLREDUCE, 1024, 2, ps, 0, 0));
}

/* MSCCLRT_NATIVE_NET_BYTES's rule (algo_native_net_first): every collective but send/recv, of
 * 1 byte up to the limit; never with a limit of 0 or for an empty call; with -1 (the default)
 * reduce of 1 byte to 64 KiB alone */
static void t_net_first(void) {
    mscclrt_request q;
    memset(&q, 0, sizeof q);
    for (int c = 0; c < MSCCLRT_COLL_COUNT; c++) {
        q.collective = (mscclrt_coll)c;
        const bool coll = c != MSCCLRT_COLL_SENDRECV;
        q.message_bytes = 1;
        CHECK_EQ_INT(coll, algo_native_net_first(&q, 1));
        CHECK_EQ_INT(0, algo_native_net_first(&q, 0));
        q.message_bytes = 16u << 20;
        CHECK_EQ_INT(coll, algo_native_net_first(&q, 16u << 20));
        CHECK_EQ_INT(0, algo_native_net_first(&q, (16u << 20) - 1));
        const bool reduce = c == MSCCLRT_COLL_REDUCE;
        CHECK_EQ_INT(0, algo_native_net_first(&q, -1));
        q.message_bytes = 64u << 10;
        CHECK_EQ_INT(reduce, algo_native_net_first(&q, -1));
        q.message_bytes = (64u << 10) + 1;
        CHECK_EQ_INT(0, algo_native_net_first(&q, -1));
        q.message_bytes = 1;
        CHECK_EQ_INT(reduce, algo_native_net_first(&q, -1));
        q.message_bytes = 0;
        CHECK_EQ_INT(0, algo_native_net_first(&q, 1u << 30));
        CHECK_EQ_INT(0, algo_native_net_first(&q, -1));
    }
    CHECK_EQ_INT(0, algo_native_net_first(NULL, 1u << 30));
}

static void t_block_cap(void) {
    static const struct { int share, sms, want; } v[] = {
        {1, 132, 32}, {2, 132, 32}, {4, 132, 32}, {8, 132, 16}, {8, 108, 13},
        {5, 108, 21}, {200, 132, 1}, {8, 0, 16},   /* unknown size: as 128 */
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        mscclrt_comm c;
        memset(&c, 0, sizeof c);
        c.context_share_max = v[i].share;
        c.sm_min = v[i].sms;
        CHECK_EQ_INT(v[i].want, exec_native_block_cap(&c, MN_MAX_BLOCKS));
        CHECK_EQ_INT(v[i].want < 8 ? v[i].want : 8, exec_native_block_cap(&c, 8));
    }
    /* the direct path's larger grid: every rank's blocks resident at once on the GPU they
     * share (4 ranks of 64 blocks on one 132-SM GPU were refused as a hang) */
    static const struct { int share, sms, want; } d[] = {
        {1, 132, MN_DIRECT_BLOCKS}, {2, 132, 66}, {3, 132, 44}, {4, 132, 33}, {4, 0, 32}, {8, 132, 16},
    };
    for (size_t i = 0; i < sizeof d / sizeof *d; i++) {
        mscclrt_comm c;
        memset(&c, 0, sizeof c);
        c.context_share_max = d[i].share;
        c.sm_min = d[i].sms;
        const int cap = exec_native_block_cap(&c, MN_DIRECT_BLOCKS);
        CHECK_EQ_INT(d[i].want, cap);
        CHECK(d[i].share * cap <= (d[i].sms ? d[i].sms : 128));
    }
}

/* The built-in algorithms of a layout: every collective and send/recv on one node; across
 * nodes send/recv only (the native context reaches each node's ranks). */
static void t_builtins(void) {
    static const struct { int world, rpn, want; } v[] = {{4, 4, MSCCLRT_COLL_COUNT}, {4, 2, 1}, {8, 1, 1}};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        AlgoSet s = {0, NULL};
        CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_native_builtins(&s, v[i].world, v[i].rpn));
        CHECK_EQ_INT(v[i].want, s.n);
        if (v[i].want == 1 && s.n == 1) CHECK_STR("native/sendrecv", s.v[0]->desc.name);
        for (int k = 0; k < s.n; k++) mscclrt_algo_free((mscclrt_algo *)s.v[k]);
        free(s.v);
    }
}

int main(void) {
    if (cg_check_source("extern \"C\" __global__ void k() {}", 90, "probe") != MSCCLRT_SUCCESS) {
        return harness_skip("NVRTC (the CUDA toolkit's libnvrtc)", mscclrt_last_error());
    }
    TEST("native builtin: scratch layout for 1..1024 ranks", t_layout());
    TEST("native builtin: host slots across nodes (net_slot_bytes)", t_net_slot());
    TEST("native builtin: every collective on one node, send/recv only across nodes", t_builtins());
    TEST("native builtin: default grid sends packets up to the packet limit", t_grid());
    TEST("native builtin: send/recv entries take the blocks their size needs (direct ones their own grid)", t_p2p_blocks());
    TEST("native builtin: block cap where ranks share a process and GPU", t_block_cap());
    TEST("native builtin: the direct grid (64; alltoall of 512 MiB and more on 128)", t_direct_grid());
    TEST("native builtin: MSCCLRT_NATIVE_NET_BYTES sends collectives to the built-in one first", t_net_first());
    TEST("native builtin: NVRTC compiles the direct kernel's module", t_direct_compiles());
    TEST("native builtin: NVRTC compiles the modules with the timestamp probe", t_probe_compiles());
    TEST("native builtin: NVRTC compiles the modules of one node (MN_NET 0)", t_single_node_compiles());
    TEST("native builtin: NVRTC compiles every dtype x operator (PreMulSum too)",
         t_compiles(getenv("MSCCLRT_TEST_QUICK") == NULL));
    return harness_report();
}

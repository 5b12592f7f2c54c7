/*
 * algo_select_default.c - the default selector: the tuning table first, then the first
 * registered candidate (plan-based before native), then size heuristics from BENCHMARKS.md,
 * then native/<collective> (on one node), then the first candidate.
 */
#include "algo/algo.h"

#include <stdio.h>
#include <string.h>

/* ---- the default selector --------------------------------------------------------------------- */

#define KB (1ull << 10)
#define MB (1ull << 20)

/* Size heuristics, in order of preference (BENCHMARKS.md: 2 and 4 x H200): the first row whose
 * collective and size band (max 0: unbounded) match and whose algorithm is a candidate wins.
 * Each algorithm's own rules (buffer mode, symmetric buffers, root, plan geometry) have already
 * filtered the candidates. */
static const struct {
    mscclrt_coll coll;
    uint64_t min, max;
    const char *name;
    int nmax;   /* world sizes up to this (0: any): bands measured on 2 GPUs alone */
} prefer[] = {
    /* one-shot packets for small messages, two-phase packets up to 1 MB */
    {MSCCLRT_COLL_ALLREDUCE, 0, 64 * KB, "stdlib/allreduce/allpair_packet", 0},
    {MSCCLRT_COLL_ALLREDUCE, 0, 256 * KB, "stdlib/allreduce/hier_packet", 0},
    {MSCCLRT_COLL_ALLREDUCE, 0, 1 * MB, "stdlib/allreduce/rs_ag_packet", 0},
    /* 2 ranks of a node, larger: the built-in direct path on any buffers beats the plans that
     * need windows (nccl-tests -R 2 -G 1 at 1 GiB on 2 x H200: rs_ag_read_oop 3148 us against
     * the built-in one's 2979; see the other collectives' rows below) */
    {MSCCLRT_COLL_ALLREDUCE, 0, 0, "native/allreduce", 2},
    /* large: read-reduce-write on peers' buffers (in place, symmetric), the 1 GiB winner */
    {MSCCLRT_COLL_ALLREDUCE, 16 * MB, 0, "stdlib/allreduce/rs_ag_read", 0},
    /* the same out of place (rs_ag_read is in place only) */
    {MSCCLRT_COLL_ALLREDUCE, 16 * MB, 0, "stdlib/allreduce/rs_ag_read_oop", 0},
    {MSCCLRT_COLL_ALLREDUCE, 0, 0, "stdlib/allreduce/rs_ag_simple", 0},
    {MSCCLRT_COLL_ALLREDUCE, 0, 0, "stdlib/allreduce/rs_ag_read", 0},
    {MSCCLRT_COLL_ALLREDUCE, 0, 0, "stdlib/allreduce/hier", 0},
    /* across nodes (only the multi-node programs are candidates there): one cross-node packet
     * hop up to 256 KB (the row above), the two-level Simple plan on windows, else the Simple
     * plan through scratch that any buffers can use, and the packet plan (up to its 1 MB) only
     * where that one does not fit. Packets carry twice the bytes over the network: across two
     * nodes over loopback TCP (2 x H200, c21/c22) hier_packet took 786-1106 us at 1 MiB where
     * the same two Simple hops through scratch (reducescatter + allgather hier_scratch) took
     * 510-580, NCCL 500-520; hier_scratch itself took 1428-1930 at 4 MiB, NCCL 1544-1592.
     * From 1 MiB the same two hops pipelined in pieces (c55, the socket threads on the GPU's
     * CPUs: 1 MiB 485-487 us against hier_scratch's 673-686 and NCCL's 541-549; 4-16 MiB
     * level with hier_scratch) */
    {MSCCLRT_COLL_ALLREDUCE, 1 * MB, 0, "stdlib/allreduce/hier_pipe", 0},
    {MSCCLRT_COLL_ALLREDUCE, 0, 0, "stdlib/allreduce/hier_scratch", 0},
    {MSCCLRT_COLL_ALLREDUCE, 0, 0, "stdlib/allreduce/hier_packet", 0},
    /* across nodes, small: one packet hop straight to every rank (no signals, no second hop;
     * allreduce's 42.9 us at 1 KB against hier plans' 78-101 us for the others on 2 nodes of
     * one H200, BENCHMARKS.md) */
    /* 2 nodes of one rank: the packet hop further (2 x H200, loopback TCP, c61, 2 runs, us,
     * NCCL / hier, which needs no windows with one rank a node / hier_packet): reducescatter
     * 256 KiB 127,107 / 182,155 / 133,120 and 512 KiB 184,163 / 219,250 / 148,191; allgather
     * 256 KiB 132,122 / 177,157 / 130,148 (at 512 KiB mixed); beyond, the Simple plans (1 MiB:
     * ahead of NCCL) */
    {MSCCLRT_COLL_REDUCESCATTER, 0, 512 * KB, "stdlib/reducescatter/hier_packet", 2},
    {MSCCLRT_COLL_ALLGATHER, 0, 256 * KB, "stdlib/allgather/hier_packet", 2},
    {MSCCLRT_COLL_ALLGATHER, 0, 64 * KB, "stdlib/allgather/hier_packet", 0},
    {MSCCLRT_COLL_REDUCESCATTER, 0, 64 * KB, "stdlib/reducescatter/hier_packet", 0},
    {MSCCLRT_COLL_ALLTOALL, 0, 64 * KB, "stdlib/alltoall/hier_packet", 0},
    /* across nodes, each collective's hier program (it writes into peers' buffers: windows),
     * then hier_scratch (any buffers: peers write only scratch) */
    {MSCCLRT_COLL_ALLGATHER, 0, 0, "stdlib/allgather/hier", 0},
    {MSCCLRT_COLL_ALLGATHER, 0, 0, "stdlib/allgather/hier_scratch", 0},
    {MSCCLRT_COLL_REDUCESCATTER, 0, 0, "stdlib/reducescatter/hier", 0},
    {MSCCLRT_COLL_REDUCESCATTER, 0, 0, "stdlib/reducescatter/hier_scratch", 0},
    {MSCCLRT_COLL_BROADCAST, 0, 0, "stdlib/broadcast/hier", 0},
    {MSCCLRT_COLL_BROADCAST, 0, 0, "stdlib/broadcast/hier_scratch", 0},
    {MSCCLRT_COLL_REDUCE, 0, 0, "stdlib/reduce/hier", 0},
    {MSCCLRT_COLL_REDUCE, 0, 0, "stdlib/reduce/hier_scratch", 0},
    {MSCCLRT_COLL_ALLTOALL, 0, 0, "stdlib/alltoall/hier", 0},
    {MSCCLRT_COLL_ALLTOALL, 0, 0, "stdlib/alltoall/hier_scratch", 0},
    {MSCCLRT_COLL_GATHER, 0, 0, "stdlib/gather/hier", 0},
    {MSCCLRT_COLL_GATHER, 0, 0, "stdlib/gather/hier_scratch", 0},
    {MSCCLRT_COLL_SCATTER, 0, 0, "stdlib/scatter/hier", 0},
    {MSCCLRT_COLL_SCATTER, 0, 0, "stdlib/scatter/hier_scratch", 0},
    /* 2 ranks (2 x H200, nccl-tests -G 1): the one-shot packet plans up to 1 MiB (allgather
     * 256 KiB 5.63 us, 1 MiB 9.62; NCCL 7.64, 10.42) and 256 KiB (reducescatter 1 KiB 4.72,
     * 256 KiB 6.18; NCCL 5.97, 7.48; at 1 MiB 14.12 against the native 13.60); broadcast's
     * native one up to 256 KiB (1-64 KiB 5.0-5.5 us, the packet plan's handshake 6.3-8.7;
     * NCCL 5.2-6.1) */
    {MSCCLRT_COLL_ALLGATHER, 0, 1 * MB, "stdlib/allgather/packet", 2},
    {MSCCLRT_COLL_REDUCESCATTER, 0, 256 * KB, "stdlib/reducescatter/packet", 2},
    {MSCCLRT_COLL_BROADCAST, 0, 0, "native/broadcast", 2},
    /* 2 ranks, above the packet plans: the built-in direct path rather than the plans that
     * need windows (-R 2 -G 1 at 1 GiB, 2 x H200: alltoall/fullmesh 1988 us against 1573,
     * broadcast/direct 5751 against 2896; allgather/copyengine at 1 GiB and
     * reducescatter/fullmesh_read from 64 MiB did not finish within 90 s) */
    {MSCCLRT_COLL_ALLGATHER, 0, 0, "native/allgather", 2},
    {MSCCLRT_COLL_REDUCESCATTER, 0, 0, "native/reducescatter", 2},
    {MSCCLRT_COLL_ALLTOALL, 0, 0, "native/alltoall", 2},
    {MSCCLRT_COLL_ALLGATHER, 0, 64 * KB, "stdlib/allgather/packet", 0},
    /* from 64 MB the copy engines beat SM copies (BENCHMARKS: they meet between 16 and 64 MB) */
    {MSCCLRT_COLL_ALLGATHER, 64 * MB, 0, "stdlib/allgather/copyengine", 0},
    {MSCCLRT_COLL_ALLGATHER, 0, 0, "stdlib/allgather/fullmesh", 0},
    {MSCCLRT_COLL_REDUCESCATTER, 0, 0, "stdlib/reducescatter/fullmesh_read", 0},
    {MSCCLRT_COLL_BROADCAST, 0, 64 * KB, "stdlib/broadcast/packet", 0},
    {MSCCLRT_COLL_BROADCAST, 0, 0, "stdlib/broadcast/direct", 0},
    {MSCCLRT_COLL_ALLTOALL, 0, 0, "stdlib/alltoall/fullmesh", 0},
};

static int find_cand(const char *name, const mscclrt_algo *const *cand, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(cand[i]->desc.name, name) == 0) return i;
    return -1;
}

bool algo_default_select_with(const AlgoTuning *t, const mscclrt_request *req,
                              const mscclrt_algo *const *cand, int n, mscclrt_choice *choice) {
    if (n <= 0) return false;
    if (t && algo_tuning_choose(t, req, cand, n, choice)) return true;
    *choice = (mscclrt_choice){0};
    /* the user's own algorithms come first: plan-based, then native */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if (cand[i]->kind == (pass ? MSCCLRT_ALGO_NATIVE : MSCCLRT_ALGO_PLAN) &&
                algo_is_registered(cand[i])) {
                choice->algo = cand[i];
                return true;
            }
    const uint64_t b = req->message_bytes;
    for (size_t r = 0; r < sizeof prefer / sizeof *prefer; r++) {
        if (prefer[r].coll != req->collective || b < prefer[r].min ||
            (prefer[r].max && b > prefer[r].max) ||
            (prefer[r].nmax && req->world_size > prefer[r].nmax))
            continue;
        /* the built-in collectives serve one node (across nodes only as the last resort) */
        if (!strncmp(prefer[r].name, "native/", 7) && req->ranks_per_node != req->world_size)
            continue;
        int i = find_cand(prefer[r].name, cand, n);
        if (i >= 0) {
            choice->algo = cand[i];
            return true;
        }
    }
    /* across nodes there are no built-in native algorithms (algo_native_builtins): the first
     * candidate */
    int i = -1;
    if (req->ranks_per_node == req->world_size) {
        char native[64];
        snprintf(native, sizeof native, "native/%s", mscclrt_coll_name(req->collective));
        i = find_cand(native, cand, n);
    }
    choice->algo = cand[i >= 0 ? i : 0];
    return true;
}

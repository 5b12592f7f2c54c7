/*
 * test_exec_scratch.c - the scratch size of a GPU context (exec_scratch_bytes, the arithmetic of
 * exec_scratch_size without a device): sized from the buffers' allocations capped by the plan's
 * largest message, chunks rounded to the alignment, LL packets doubling it, and double-buffered
 * scratch made of two equal halves of a multiple of 256 bytes — also for the smallest messages,
 * where the half used to round down to 0 and double buffering silently stopped — and its
 * relation to the spec's exact size that plan_geom gives the CPU backend; and the growth of a
 * context not keyed by buffers when a call needs more scratch than it has (exec_scratch_grow_span:
 * 1 GiB through a plan whose scratch grows with the message was refused at 64 MiB before).
 */
#include "../harness.h"
#include "exec/exec.h"

static Plan *plan(bool ll, bool dbl, int in_chunks, int out_chunks, int scratch_chunks) {
    Plan *p = plan_new("scratch", PLAN_COLL_ALLGATHER, 2);
    p->protocol_ll = ll;
    p->double_scratch = dbl;
    for (int r = 0; r < 2; r++) {
        p->gpus[r].input_chunks = in_chunks;
        p->gpus[r].output_chunks = out_chunks;
        p->gpus[r].scratch_chunks = scratch_chunks;
    }
    return p;
}

static void t_double_halves(void) {
    Plan *p = plan(true, true, 2, 4, 4);
    /* 64-byte allocation: chunk 32, 4 chunks as packets = 256 per half */
    CHECK_EQ_INT(512, exec_scratch_bytes(p, 0, 64, 128));
    /* 16 bytes: chunk 8 -> 16 (alignment), 4 x 16 x 2 = 128 -> a 256-byte half */
    CHECK_EQ_INT(512, exec_scratch_bytes(p, 0, 16, 32));
    /* every size: two equal halves, each a multiple of 256 and at least the need */
    int ok = 1;
    for (uint64_t room = 16; room < (1u << 20) && ok; room = room * 3 + 16) {
        uint64_t b = exec_scratch_bytes(p, 1, room, 2 * room);
        uint64_t chunk = (room + 1) / 2, need = ((chunk + 15) / 16 * 16) * 4 * 2;
        ok = b % 512 == 0 && b / 2 >= need;
        if (!ok) fprintf(stderr, "room %llu: %llu bytes\n", (unsigned long long)room, (unsigned long long)b);
    }
    CHECK(ok);
    plan_free(p);
}

static void t_single(void) {
    Plan *p = plan(false, false, 3, 3, 3);
    /* 3000 bytes: chunk 1000 -> 1008, x3 = 3024 -> 3072 */
    CHECK_EQ_INT(3072, exec_scratch_bytes(p, 0, 3000, 3000));
    p->max_size = 1 << 20;   /* the plan's largest message caps a huge allocation */
    CHECK_EQ_INT(exec_scratch_bytes(p, 0, 1 << 20, 1 << 20), exec_scratch_bytes(p, 0, 1ull << 34, 1ull << 34));
    p->gpus[0].scratch_chunks = 0;
    CHECK_EQ_INT(0, exec_scratch_bytes(p, 0, 4096, 4096));
    p->gpus[0].scratch_chunks = 2;
    p->gpus[0].input_chunks = 0;   /* no input chunks: sized from the output */
    CHECK_EQ_INT(256, exec_scratch_bytes(p, 0, 0, 96)); /* chunk 32 x 2 = 64 -> 256 */
    plan_free(p);
}

/* One formula, plan_scratch_bytes: with allocations exactly the message, the GPU's scratch is
 * the CPU backend's (plan_geom, the spec's exact size) with each half rounded up to 256 bytes. */
static void t_same_as_geom(void) {
    Plan *p = plan(true, true, 2, 4, 4);
    p->max_size = UINT64_MAX;
    int ok = 1, compared = 0;
    for (uint64_t in = 32; in < (1u << 22) && ok; in = in * 3 + 32) { /* 2 chunks of 16k */
        PlanGeom g;
        PlanErr err;
        if (!plan_geom(p, 1, in, 2 * in, &g, &err)) continue;   /* sizes the plan refuses */
        compared++;
        uint64_t gpu = exec_scratch_bytes(p, 1, in, 2 * in);
        uint64_t want = (g.scratch_half + 255) / 256 * 256 * 2;
        ok = gpu == want && g.scratch_half * 2 == g.scratch_bytes &&
             g.scratch_half == (in / 2) * 4 * 2;                /* 4 chunks as LL packets */
        if (!ok) fprintf(stderr, "in %llu: geom %llu, exec %llu\n", (unsigned long long)in,
                         (unsigned long long)g.scratch_bytes, (unsigned long long)gpu);
    }
    CHECK(ok);
    CHECK(compared >= 6);
    plan_free(p);
}

/* reuse_resources plans (MSCCL++'s multi-node defaults) get spec §3.5's fixed 64 MiB whatever
 * the buffers: sizing them from a 16 KB allocation once failed every GPU call. */
static void t_reuse_resources(void) {
    Plan *p = plan(true, true, 2, 4, 4);
    p->reuse_resources = true;
    CHECK_EQ_INT((uint64_t)1 << 26, exec_scratch_bytes(p, 0, 1024, 4096));
    CHECK_EQ_INT((uint64_t)1 << 26, exec_scratch_bytes(p, 1, 1ull << 34, 1ull << 34));
    p->gpus[0].scratch_chunks = 0;
    CHECK_EQ_INT(0, exec_scratch_bytes(p, 0, 1024, 4096));
    plan_free(p);
}

/* Contexts are tied to the call's buffers only when some rank reaches a peer's input or output:
 * scratch-only plans serve any buffers without an exchange per allocation. */
static void t_keys_buffers(void) {
    Plan *p = plan(true, false, 2, 4, 4);
    CHECK(!exec_plan_keys_buffers(p));
    plan_gpu_add_remote(&p->gpus[1], 0, PLAN_BUF_SCRATCH, PLAN_CHAN_MEMORY);
    CHECK(!exec_plan_keys_buffers(p));
    plan_gpu_add_remote(&p->gpus[0], 1, PLAN_BUF_OUTPUT, PLAN_CHAN_MEMORY);
    CHECK(exec_plan_keys_buffers(p));
    plan_free(p);
    p = plan(false, false, 2, 2, 0);
    plan_gpu_add_remote(&p->gpus[0], 1, PLAN_BUF_INPUT, PLAN_CHAN_PORT);
    CHECK(exec_plan_keys_buffers(p));
    plan_free(p);
}

/* Growth: none while every rank's need fits; else a power-of-two span, at least double the old,
 * whose scratch holds every rank's need; reuse_resources plans never grow (fixed 64 MiB). */
static void t_grow(void) {
    Plan *p = plan(false, false, 2, 4, 8);   /* scratch of 8 chunks: 4x the input */
    p->gpus[1].scratch_chunks = 16;          /* ranks differ: the largest need decides */
    const uint64_t span = (uint64_t)1 << 26;
    uint64_t have = exec_scratch_bytes(p, 1, span, span);
    CHECK_EQ_INT(0, exec_scratch_grow_span(p, 1 << 20, 2 << 20, span, have));
    CHECK_EQ_INT(0, exec_scratch_grow_span(p, span, 2 * span, span, have));
    const uint64_t big = (uint64_t)1 << 28;   /* 16 chunks of 128 MiB: offsets below 4 GiB */
    uint64_t s = exec_scratch_grow_span(p, big, 2 * big, span, have);
    CHECK(s >= 2 * big && (s & (s - 1)) == 0);
    for (int q = 0; q < 2; q++) {
        PlanGeom g;
        PlanErr err;
        CHECK(plan_geom(p, q, big, 2 * big, &g, &err));
        CHECK(exec_scratch_bytes(p, q, s, s) >= g.scratch_bytes);
    }
    /* just over what the scratch serves: at least twice the old span (a sweep sets up O(log)
     * times), and enough for the larger of the two buffers */
    CHECK_EQ_INT(4 * span, exec_scratch_grow_span(p, span + 256, 2 * span + 512, span, have));
    /* a grown context then serves that size */
    uint64_t have2 = exec_scratch_bytes(p, 1, 4 * span, 4 * span);
    CHECK_EQ_INT(0, exec_scratch_grow_span(p, span + 256, 2 * span + 512, 4 * span, have2));
    p->reuse_resources = true;
    CHECK_EQ_INT(0, exec_scratch_grow_span(p, big, 2 * big, span, have));
    plan_free(p);
}

/* Where a multi-process context's scratch lives: pinned host memory only where nothing but the
 * socket transport reaches it and it is small enough (exec_scratch_host). */
static void t_host_rule(void) {
    Plan *p = plan(true, false, 1, 2, 2);
    const uint64_t mb = 1u << 20, most = 64 * mb;
    CHECK(exec_scratch_host(p, 4 * mb, true, 1, 2, most));        /* 2 nodes of 1 rank */
    CHECK(exec_scratch_host(p, 64 * mb, true, 7, 8, most));       /* 8 nodes of 1 */
    CHECK(!exec_scratch_host(p, 64 * mb + 1, true, 1, 2, most));  /* too large */
    CHECK(!exec_scratch_host(p, 4 * mb, true, 1, 2, 0));          /* switched off */
    CHECK(!exec_scratch_host(p, 0, true, 1, 2, most));            /* no scratch */
    CHECK(!exec_scratch_host(p, 4 * mb, false, 1, 2, most));      /* ib or host mode */
    CHECK(!exec_scratch_host(p, 4 * mb, true, 2, 4, most));       /* a peer on this node */
    CHECK(!exec_scratch_host(p, 4 * mb, true, 0, 2, most));       /* one node */
    p->scratch_device = true;                                     /* the native context */
    CHECK(!exec_scratch_host(p, 4 * mb, true, 1, 2, most));
    plan_free(p);
}

int main(void) {
    TEST("exec scratch: unkeyed contexts grow for larger messages (power-of-two spans)", t_grow());
    TEST("exec scratch: reuse_resources plans get the fixed 64 MiB", t_reuse_resources());
    TEST("exec scratch: contexts keyed by buffers only for plans reaching peers' input/output", t_keys_buffers());
    TEST("exec scratch: double-buffered halves of 256 bytes, also for tiny messages", t_double_halves());
    TEST("exec scratch: alignment, the plan's size cap, no scratch, output-based chunks", t_single());
    TEST("exec scratch: plan_geom's, each half rounded to 256 bytes", t_same_as_geom());
    TEST("exec scratch: pinned host memory only where the socket transport alone reaches it",
         t_host_rule());
    return harness_report();
}

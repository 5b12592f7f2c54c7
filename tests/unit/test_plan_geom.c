/*
 * test_plan_geom.c - chunk geometry (spec §3) on the worked examples of spec §2.9 and §3.8, each
 * size check with its message, call sizes per collective, and the public plan API built on them
 * (mscclrt_plan_*, data type and operator names).
 */
#include "../harness.h"
#include "test_plan_util.h"
#include "core/api_plan.h"

static Plan *load(const char *name) {
    char path[256];
    PlanErr e;
    snprintf(path, sizeof path, COMPAT_DIR "%s.json", name);
    Plan *p = plan_load_file(path, &e);
    if (!p) fprintf(stderr, "%s\n", e.msg);
    return p;
}

/* spec §2.9: 2-rank LL allgather, in-place, 1 MiB per rank (2 MiB output) */
static Plan *mini_allgather(void) {
    Plan *p = plan_new("ag_pkt", PLAN_COLL_ALLGATHER, 2);
    p->protocol_ll = true;
    p->inplace = true;
    p->double_scratch = true;
    for (int r = 0; r < 2; r++) {
        PlanGpu *g = &p->gpus[r];
        g->input_chunks = 1;
        g->output_chunks = 2;
        g->scratch_chunks = 2;
        plan_gpu_add_peer(g, PLAN_CHAN_MEMORY, 1 - r);
        plan_gpu_add_remote(g, 1 - r, PLAN_BUF_SCRATCH, PLAN_CHAN_MEMORY);
        plan_gpu_ensure_tbs(g, 2);
        plan_tb_use_channel(&g->tbs[0], PLAN_CHAN_MEMORY, 0);
        plan_tb_use_remote(&g->tbs[0], PLAN_CHAN_MEMORY, 0);
        PlanOp op;
        plan_op_init(&op, PLAN_OP_PPKT);
        op.chan_type = PLAN_CHAN_MEMORY;
        op.nsrc = op.ndst = 1;
        op.src[0] = (PlanRef){PLAN_REF_LOCAL, PLAN_BUF_OUTPUT, 0, (uint32_t)r, 1, -1};
        op.dst[0] = (PlanRef){PLAN_REF_REMOTE, PLAN_BUF_INPUT, 0, (uint32_t)r, 1, -1};
        plan_tb_append(&g->tbs[0], &op);
        plan_op_init(&op, PLAN_OP_UPKT);
        op.nsrc = op.ndst = 1;
        op.src[0] = (PlanRef){PLAN_REF_LOCAL, PLAN_BUF_SCRATCH, 0, (uint32_t)(1 - r), 1, -1};
        op.dst[0] = (PlanRef){PLAN_REF_LOCAL, PLAN_BUF_OUTPUT, 0, (uint32_t)(1 - r), 1, -1};
        plan_tb_append(&g->tbs[1], &op);
    }
    return p;
}

static void t_worked_examples(void) {
    PlanErr e;
    PlanGeom g;
    /* §3.8: allreduce_packet.json, 1 MiB per rank: 4 chunks of 256 KiB, scratch
     * 256 KiB * 4 * 2 (LL) * 2 (double) = 4 MiB, halves at 0 and 2 MiB */
    Plan *p = load("allreduce_packet");
    CHECK(p && plan_geom(p, 0, 1 << 20, 1 << 20, &g, &e));
    CHECK_EQ_INT(256 << 10, g.chunk_bytes);
    CHECK_EQ_INT(4 << 20, g.scratch_bytes);
    CHECK_EQ_INT(2 << 20, g.scratch_half);
    /* ppkt src=i[2..4): 512 KiB of data at byte 524288 */
    CHECK_EQ_INT(524288, 2 * g.chunk_bytes);
    plan_free(p);

    /* §2.9: the chunk is 1 MiB (input 1 MiB / 1 chunk), output 2 chunks */
    p = mini_allgather();
    CHECK(p && plan_validate(p, "ag_pkt", &e));
    uint64_t in, out;
    plan_call_sizes(p, 2 << 20, &in, &out);
    CHECK_EQ_INT(1 << 20, in);
    CHECK_EQ_INT(2 << 20, out);
    CHECK(plan_geom(p, 1, in, out, &g, &e));
    CHECK_EQ_INT(1 << 20, g.chunk_bytes);
    /* sized from the message: 1 MiB * 2 chunks * 2 (LL) * 2 (double) */
    CHECK_EQ_INT(8 << 20, g.scratch_bytes);
    CHECK_EQ_INT(4 << 20, g.scratch_half);
    plan_free(p);

    /* Simple plan without double buffering: no half */
    p = load("reduce");
    CHECK(p && plan_geom(p, 1, 4096, 4096, &g, &e));
    CHECK_EQ_INT(4096 / p->gpus[1].input_chunks, g.chunk_bytes);
    CHECK_EQ_INT(g.chunk_bytes * p->gpus[1].scratch_chunks, g.scratch_bytes);
    CHECK_EQ_INT(0, g.scratch_half);
    plan_free(p);
}

static void t_errors(void) {
    PlanErr e;
    PlanGeom g;
    Plan *p = load("allreduce_packet");
    if (!p) return;
    CHECK(!plan_geom(p, 0, 100, 100, &g, &e));
    CHECK_STR("plan 'allreduce_pkt': input of 100 bytes is not a multiple of "
              "buffer_alignment 16", e.msg);
    CHECK(!plan_geom(p, 0, 48, 48, &g, &e));
    CHECK_STR("plan 'allreduce_pkt': input of 48 bytes does not split into 4 chunks of a "
              "multiple of 16 bytes (buffer_alignment)", e.msg);
    CHECK(!plan_geom(p, 0, 64, 128, &g, &e));
    CHECK_STR("plan 'allreduce_pkt': size per chunk inconsistent: input 64 bytes / 4 chunks = "
              "16, output 128 bytes / 4 chunks = 32", e.msg);
    CHECK(!plan_geom(p, 2, 64, 64, &g, &e));
    CHECK_STR("plan 'allreduce_pkt': rank 2 is outside 0..1", e.msg);
    p->min_size = 4096;
    p->max_size = 8192;
    CHECK(!plan_geom(p, 0, 1024, 1024, &g, &e));
    CHECK_STR("plan 'allreduce_pkt': input of 1024 bytes is outside the plan's message size "
              "range [4096, 8192]", e.msg);
    CHECK(plan_geom(p, 0, 8192, 8192, &g, &e));
    CHECK(!plan_geom(p, 0, 8256, 8256, &g, &e));
    plan_free(p);

    /* allgather checks the output size */
    p = load("transfer_pack");
    p->max_size = 1024;
    CHECK(plan_geom(p, 0, 512, 1024, &g, &e));
    CHECK(!plan_geom(p, 0, 1024, 2048, &g, &e));
    CHECK_CONTAINS(e.msg, "output of 2048 bytes is outside the plan's message size range");
    plan_free(p);

    /* 32-bit op records: 16 chunks of 512 MiB */
    p = load("allreduce");
    CHECK(!plan_geom(p, 0, 8ull << 30, 8ull << 30, &g, &e));
    CHECK_STR("plan 'allreduce': chunks of 536870912 bytes put offsets beyond 4 GiB (16 chunks): "
              "the executor's op records are 32-bit", e.msg);
    plan_free(p);

    /* pipeline iterations are uint16 on the device: unit 1 KiB, one chunk of 64 MiB + 1 KiB */
    p = plan_load_file("tests/plans/loader_base.json", &e);
    CHECK(p != NULL);
    uint64_t chunk = (64ull << 20) + 1024;
    CHECK(p && !plan_geom(p, 0, 2 * chunk, 2 * chunk, &g, &e));
    CHECK_STR("plan 'loader_base': gpus[0].threadblocks[0].ops[9]: the pipeline needs 65537 "
              "iterations of 1024 bytes for chunks of 67109888 bytes, more than the executor's "
              "65535", e.msg);
    CHECK(p && plan_geom(p, 0, 2 * (64ull << 20) - 2048, 2 * (64ull << 20) - 2048, &g, &e));
    plan_free(p);
}

static void t_call_sizes(void) {
    uint64_t in, out;
    Plan *p = plan_new("rs", PLAN_COLL_REDUCESCATTER, 2);
    for (int r = 0; r < 2; r++) {
        p->gpus[r].input_chunks = 2;
        p->gpus[r].output_chunks = 1;
    }
    plan_call_sizes(p, 4096, &in, &out);
    CHECK_EQ_INT(4096, in);
    CHECK_EQ_INT(2048, out);
    p->collective = PLAN_COLL_BROADCAST;
    plan_call_sizes(p, 4096, &in, &out);
    CHECK(in == 4096 && out == 4096);
    p->collective = PLAN_COLL_SENDRECV;
    plan_call_sizes(p, 4096, &in, &out);
    CHECK(in == 4096 && out == 4096);
    p->collective = PLAN_COLL_ALLREDUCE;
    plan_call_sizes(p, 4096, &in, &out);
    CHECK(in == 4096 && out == 4096);
    /* the rooted collectives: scatter counts like reducescatter (the input is the message),
     * gather like allgather (the output), reduce like allreduce (both) */
    p->collective = PLAN_COLL_SCATTER;
    plan_call_sizes(p, 4096, &in, &out);
    CHECK(in == 4096 && out == 2048);
    p->collective = PLAN_COLL_REDUCE;
    plan_call_sizes(p, 4096, &in, &out);
    CHECK(in == 4096 && out == 4096);
    for (int r = 0; r < 2; r++) {
        p->gpus[r].input_chunks = 1;
        p->gpus[r].output_chunks = 2;
    }
    p->collective = PLAN_COLL_GATHER;
    plan_call_sizes(p, 4096, &in, &out);
    CHECK(in == 2048 && out == 4096);
    /* and the size range applies to the output of a gather, as of an allgather */
    PlanGeom g;
    PlanErr e;
    p->max_size = 2048;
    CHECK(!plan_geom(p, 0, 2048, 4096, &g, &e));
    CHECK_CONTAINS(e.msg, "output of 4096 bytes is outside the plan's message size range");
    p->collective = PLAN_COLL_SCATTER;
    CHECK(plan_geom(p, 0, 2048, 4096, &g, &e));
    plan_free(p);
    /* the names round-trip through the loader and the writer */
    static const char *names[] = {"reduce", "gather", "scatter"};
    for (int i = 0; i < 3; i++) {
        PlanCollective c;
        CHECK(plan_coll_from_name(names[i], &c));
        CHECK_STR(names[i], plan_coll_name(c));
        Plan *q = plan_new("rooted", c, 2);
        for (int r = 0; q && r < 2; r++) q->gpus[r].input_chunks = q->gpus[r].output_chunks = 1;
        char *json = q ? plan_to_json(q, true, NULL) : NULL;
        Plan *back = json ? plan_parse(json, strlen(json), "rooted.json", &e) : NULL;
        if (!back && json) fprintf(stderr, "%s\n", e.msg);
        CHECK(back && back->collective == c && !strcmp(back->collective_name, names[i]));
        plan_free(back);
        free(json);
        plan_free(q);
    }
}

/* A message whose chunks would put op offsets beyond 4 GiB: allreduce/hier_scratch at N=2 keeps
 * 8 chunks of scratch, so 1 GiB (chunks of 512 MiB) is refused by the geometry and served as
 * pieces; an allgather is not elementwise and gets none. */
static void t_pieces(void) {
    PlanErr e;
    Plan *p = plan_load_file("tests/golden/stdlib/allreduce/hier_scratch.N2.json", &e);
    CHECK(p != NULL);
    if (!p) return;
    const uint64_t G1 = 1ull << 30;
    PlanGeom g;
    CHECK(!plan_geom(p, 0, G1, G1, &g, &e));
    CHECK_CONTAINS(e.msg, "beyond 4 GiB");
    CHECK(plan_elementwise(p));
    const uint64_t piece = plan_piece_bytes(p, G1);
    CHECK(piece > 0 && piece < G1);
    /* every piece, the last (the rest) included, is a message every rank accepts */
    for (uint64_t off = 0; piece && off < G1; off += piece) {
        const uint64_t len = G1 - off < piece ? G1 - off : piece;
        for (int r = 0; r < p->ngpus; r++) CHECK(plan_geom(p, r, len, len, &g, &e));
    }
    CHECK_EQ_INT(2, (long long)((G1 + piece - 1) / piece));   /* as few as the limit allows */
    CHECK_EQ_INT(0, (long long)plan_piece_bytes(p, 1u << 20));   /* fits whole: no pieces */
    CHECK_EQ_INT(0, (long long)plan_piece_bytes(p, G1 + 8));     /* not aligned: geometry's error */
    /* 5 GiB + a unit: uneven pieces, each accepted */
    const uint64_t odd = 5 * G1 + 64;
    const uint64_t pc = plan_piece_bytes(p, odd);
    CHECK(pc > 0);
    for (uint64_t off = 0; pc && off < odd; off += pc) {
        const uint64_t len = odd - off < pc ? odd - off : pc;
        CHECK(plan_geom(p, 0, len, len, &g, &e) && plan_geom(p, 1, len, len, &g, &e));
    }
    /* the public size check serves it */
    mscclrt_plan *h = NULL;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_plan_load(&h, "tests/golden/stdlib/allreduce/hier_scratch.N2.json"));
    size_t in = 0, out = 0;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_plan_call_sizes(h, G1, &in, &out));
    CHECK(in == G1 && out == G1);
    mscclrt_plan_free(h);
    plan_free(p);
    Plan *ag = plan_load_file("tests/golden/stdlib/allgather/hier_scratch.N2.json", &e);
    CHECK(ag && !plan_elementwise(ag));
    if (ag) CHECK_EQ_INT(0, (long long)plan_piece_bytes(ag, 4 * G1));
    plan_free(ag);
}

static void t_api(void) {
    mscclrt_plan *h = (mscclrt_plan *)1;
    CHECK_EQ_INT(MSCCLRT_ERR_PLAN, mscclrt_plan_load(&h, "tests/plans/nope.json"));
    CHECK(h == NULL);
    CHECK_STR("tests/plans/nope.json: cannot open: No such file or directory",
              mscclrt_last_error());
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_plan_load(NULL, "x"));
    CHECK_EQ_INT(MSCCLRT_ERR_PLAN, mscclrt_plan_parse(&h, "{\"name\":1}", 10, "inline"));
    CHECK_STR("inline: name: expected a string, got a number", mscclrt_last_error());
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_plan_load(&h, COMPAT_DIR "transfer_pack.json"));
    CHECK(api_plan_model(h) != NULL && api_plan_model(NULL) == NULL);
    mscclrt_plan_info info;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_plan_get_info(h, &info));
    CHECK_STR("allgather", info.collective);
    CHECK(info.nranks == 2 && info.protocol_ll == 1 && info.inplace == 1 && info.alignment == 16);
    CHECK(info.max_message_size == UINT64_MAX && info.threads_per_block == 1024);
    size_t in, out, minb;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_plan_call_sizes(h, 1 << 20, &in, &out));
    CHECK(in == 512 << 10 && out == 1 << 20);
    CHECK_EQ_INT(MSCCLRT_ERR_PLAN, mscclrt_plan_call_sizes(h, 48, &in, &out));
    CHECK_STR("mscclrt_plan_call_sizes: message of 48 bytes: plan 'transfer_pack': input of 24 "
              "bytes is not a multiple of buffer_alignment 16", mscclrt_last_error());
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_plan_min_bytes(h, &minb));
    CHECK_EQ_INT(32, minb);
    mscclrt_plan_free(h);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_plan_load(&h, COMPAT_DIR "allreduce.json"));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_plan_min_bytes(h, &minb));
    CHECK_EQ_INT(256, minb); /* 16 chunks of 16 bytes */
    ((Plan *)api_plan_model(h))->min_size = 1000;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_plan_min_bytes(h, &minb));
    CHECK_EQ_INT(1024, minb);
    ((Plan *)api_plan_model(h))->max_size = 1023;
    CHECK_EQ_INT(MSCCLRT_ERR_PLAN, mscclrt_plan_min_bytes(h, &minb));
    mscclrt_plan_free(h);
    mscclrt_plan_free(NULL);
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_plan_get_info(NULL, &info));
    CHECK_STR("mscclrt_plan_get_info: plan argument is NULL", mscclrt_last_error());

    /* names of data types and operators */
    mscclrt_dtype t;
    mscclrt_redop op;
    CHECK_STR("bfloat16", mscclrt_dtype_name(MSCCLRT_BFLOAT16));
    CHECK_STR("fp8_e5m2", mscclrt_dtype_name(MSCCLRT_FP8_E5M2));
    CHECK_STR("invalid", mscclrt_dtype_name(MSCCLRT_DTYPE_COUNT));
    CHECK_EQ_INT(2, mscclrt_dtype_size(MSCCLRT_FLOAT16));
    CHECK_EQ_INT(8, mscclrt_dtype_size(MSCCLRT_UINT64));
    CHECK_EQ_INT(0, mscclrt_dtype_size((mscclrt_dtype)99));
    for (int i = 0; i < MSCCLRT_DTYPE_COUNT; i++)
        CHECK(mscclrt_dtype_parse(mscclrt_dtype_name((mscclrt_dtype)i), &t) == MSCCLRT_SUCCESS &&
              t == (mscclrt_dtype)i);
    CHECK(mscclrt_dtype_parse("half", &t) == MSCCLRT_SUCCESS && t == MSCCLRT_FLOAT16);
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_dtype_parse("float17", &t));
    CHECK_CONTAINS(mscclrt_last_error(), "unknown data type 'float17'");
    for (int i = 0; i < MSCCLRT_REDOP_COUNT; i++)
        CHECK(mscclrt_redop_parse(mscclrt_redop_name((mscclrt_redop)i), &op) == MSCCLRT_SUCCESS &&
              op == (mscclrt_redop)i);
    CHECK_STR("max", mscclrt_redop_name(MSCCLRT_MAX));
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_redop_parse("xor", &op));
}

int main(void) {
    TEST("plan_geom/worked_examples", t_worked_examples());
    TEST("plan_geom/errors", t_errors());
    TEST("plan_geom/call_sizes", t_call_sizes());
    TEST("plan_geom/pieces", t_pieces());
    TEST("plan_geom/api", t_api());
    return harness_report();
}

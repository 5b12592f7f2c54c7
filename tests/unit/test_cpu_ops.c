/*
 * test_cpu_ops.c - the semantics of every op on the CPU backend, on tiny plans built in memory
 * with the plan_model.c constructors: local copies and reductions, memory and port channel data
 * ops, LL16/LL8 packets with double scratch over repeated calls, pipelines, thread-block
 * groups, semaphores, barriers, switch emulation, contexts, plan errors, the timeout message
 * and the serial scheduler (replayable seeds, immediate deadlock reports).
 */
#include "check/check.h"
#include "core/err.h"
#include "cpu/cpu.h"
#include "plan.h"
#include "../harness.h"

#include <stdlib.h>
#include <string.h>

#define CH 16                      /* bytes per chunk in every test (4 floats) */
#define NF (CH / 4)

static mscclrt_cpu_comm *comm2, *comm3;

/* ---- plan building ------------------------------------------------------------------------ */
static Plan *mk(int n, PlanCollective c, int chunks, int scratch) {
    Plan *p = plan_new("t", c, n);
    for (int r = 0; r < n; r++) {
        p->gpus[r].input_chunks = p->gpus[r].output_chunks = (uint32_t)chunks;
        p->gpus[r].scratch_chunks = (uint32_t)scratch;
    }
    return p;
}

static PlanTb *tb_of(Plan *p, int r, int tb) {
    plan_gpu_ensure_tbs(&p->gpus[r], tb + 1);
    return &p->gpus[r].tbs[tb];
}

static PlanRef L(PlanBuf b, int idx, int size) {
    PlanRef r = {PLAN_REF_LOCAL, b, 0, (uint32_t)idx, (uint32_t)size, -1};
    return r;
}

/* A remote entry of TB (r, tb) for `owner`'s buffer b through access type t. */
static PlanRef R(Plan *p, int r, int tb, PlanChanType t, int owner, PlanBuf b, int idx, int size) {
    int g = plan_gpu_add_remote(&p->gpus[r], owner, b, t);
    int local = plan_tb_use_remote(tb_of(p, r, tb), t, g);
    PlanRef ref = {PLAN_REF_REMOTE, b, local, (uint32_t)idx, (uint32_t)size, -1};
    return ref;
}

static PlanOp op0(PlanOpKind k) {
    PlanOp o;
    plan_op_init(&o, k);
    return o;
}

static void add(Plan *p, int r, int tb, PlanOp *o) {
    plan_tb_append(tb_of(p, r, tb), o);
}

static void add2(Plan *p, int r, int tb, PlanOpKind k, PlanRef s, PlanRef d) {
    PlanOp o = op0(k);
    o.nsrc = o.ndst = 1;
    o.src[0] = s;
    o.dst[0] = d;
    add(p, r, tb, &o);
}

/* A channel of type t from r to peer, used by TB (r, tb); returns the TB-local index. */
static int chan(Plan *p, int r, int tb, PlanChanType t, int peer) {
    int g = plan_gpu_add_peer(&p->gpus[r], t, peer);
    return plan_tb_use_channel(tb_of(p, r, tb), t, g);
}

static void sig(Plan *p, int r, int tb, PlanOpKind k, PlanChanType t, int local) {
    PlanOp o = op0(k);
    o.chan_type = t;
    o.nchan = 1;
    o.chan_ids[0] = local;
    add(p, r, tb, &o);
}

/* ---- running ---------------------------------------------------------------------------------- */
typedef struct {
    float in[4][8 * NF], out[4][8 * NF];
    void *send[4], *recv[4];
} Bufs;

static void bufs_init(Bufs *b, int n, bool inplace, int seed) {
    for (int r = 0; r < n; r++)
        for (int k = 0; k < 8 * NF; k++) {
            b->in[r][k] = (float)(100 * r + k + seed);
            b->out[r][k] = -1;
        }
    for (int r = 0; r < n; r++) {
        b->send[r] = b->in[r];
        b->recv[r] = inplace ? b->in[r] : b->out[r];
    }
}

static mscclrt_result run(mscclrt_cpu_comm *c, Plan *p, Bufs *b, size_t in, size_t out,
                          mscclrt_redop op, mscclrt_packet pk) {
    mscclrt_result r = cpu_execute(c, p, b->send, b->recv, in, out, MSCCLRT_FLOAT32, op, pk);
    if (r != MSCCLRT_SUCCESS) fprintf(stderr, "execute: %s\n", mscclrt_last_error());
    return r;
}

static bool chunk_eq(const float *a, const float *b) {
    return memcmp(a, b, CH) == 0;
}

/* ---- tests -------------------------------------------------------------------------------------- */
static void t_copy(void) {
    Plan *p = mk(2, PLAN_COLL_CUSTOM, 2, 0);
    for (int r = 0; r < 2; r++) add2(p, r, 0, PLAN_OP_COPY, L(PLAN_BUF_INPUT, 0, 1), L(PLAN_BUF_OUTPUT, 1, 1));
    Bufs b;
    bufs_init(&b, 2, false, 0);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, run(comm2, p, &b, 2 * CH, 2 * CH, MSCCLRT_SUM, MSCCLRT_LL16));
    CHECK(chunk_eq(b.out[1] + NF, b.in[1]));
    CHECK(b.out[1][0] == -1);
    plan_free(p);
}

/* put + signal/wait, then get with different src and dst indices (no offset swap) */
static void t_put_get(PlanChanType t) {
    Plan *p = mk(2, PLAN_COLL_CUSTOM, 3, 0);
    int c0 = chan(p, 0, 0, t, 1), c1 = chan(p, 1, 0, t, 0);
    PlanOp o = op0(PLAN_OP_PUT);
    o.chan_type = t;
    o.nsrc = o.ndst = 1;
    o.src[0] = L(PLAN_BUF_INPUT, 0, 1);
    o.dst[0] = R(p, 0, 0, t, 1, PLAN_BUF_OUTPUT, 0, 1);
    if (t == PLAN_CHAN_PORT) {
        o.nchan = 1;
        o.chan_ids[0] = c0;
    }
    add(p, 0, 0, &o);
    sig(p, 0, 0, PLAN_OP_SIGNAL, t, c0);
    sig(p, 1, 0, PLAN_OP_WAIT, t, c1);
    o = op0(PLAN_OP_GET);
    o.chan_type = t;
    o.nsrc = o.ndst = 1;
    o.nchan = 1;
    o.chan_ids[0] = c1;
    o.src[0] = R(p, 1, 0, t, 0, PLAN_BUF_INPUT, 1, 1);
    o.dst[0] = L(PLAN_BUF_OUTPUT, 2, 1);
    add(p, 1, 0, &o);
    for (int it = 0; it < 3; it++) {
        Bufs b;
        bufs_init(&b, 2, false, it);
        CHECK_EQ_INT(MSCCLRT_SUCCESS, run(comm2, p, &b, 3 * CH, 3 * CH, MSCCLRT_SUM, MSCCLRT_LL16));
        CHECK(chunk_eq(b.out[1], b.in[0]));
        CHECK(chunk_eq(b.out[1] + 2 * NF, b.in[0] + NF));   /* peer i[1] -> o[2]: no swap */
        CHECK(b.out[1][NF] == -1);
    }
    plan_free(p);
}

/* pws (port): data and the signal in one op; pwsf and flush */
static void t_port_pws(void) {
    Plan *p = mk(2, PLAN_COLL_CUSTOM, 2, 0);
    int c0 = chan(p, 0, 0, PLAN_CHAN_PORT, 1), c1 = chan(p, 1, 0, PLAN_CHAN_PORT, 0);
    PlanOp o = op0(PLAN_OP_PWS);
    o.chan_type = PLAN_CHAN_PORT;
    o.nsrc = o.ndst = o.nchan = 1;
    o.chan_ids[0] = c0;
    o.src[0] = L(PLAN_BUF_INPUT, 0, 1);
    o.dst[0] = R(p, 0, 0, PLAN_CHAN_PORT, 1, PLAN_BUF_OUTPUT, 0, 1);
    add(p, 0, 0, &o);
    o.kind = PLAN_OP_PWSF;
    o.src[0] = L(PLAN_BUF_INPUT, 1, 1);
    o.dst[0].index = 1;
    add(p, 0, 0, &o);
    sig(p, 0, 0, PLAN_OP_FLUSH, PLAN_CHAN_PORT, c0);
    sig(p, 1, 0, PLAN_OP_WAIT, PLAN_CHAN_PORT, c1);
    sig(p, 1, 0, PLAN_OP_WAIT, PLAN_CHAN_PORT, c1);
    add2(p, 1, 0, PLAN_OP_RE, L(PLAN_BUF_OUTPUT, 0, 1), L(PLAN_BUF_INPUT, 0, 1));
    tb_of(p, 1, 0)->ops[2].nsrc = 2;
    tb_of(p, 1, 0)->ops[2].src[1] = L(PLAN_BUF_OUTPUT, 1, 1);
    Bufs b;
    bufs_init(&b, 2, false, 0);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, run(comm2, p, &b, 2 * CH, 2 * CH, MSCCLRT_SUM, MSCCLRT_LL16));
    for (int k = 0; k < NF; k++) CHECK(b.in[1][k] == b.in[0][k] + b.in[0][NF + k]);
    plan_free(p);
}

/* port ppkt copies packets as they are: cpkt i[0] -> s[0]; port ppkt s[0] -> peer s[1];
 * the peer unpacks s[1] -> o[0] */
static void t_port_ppkt(mscclrt_packet pk) {
    Plan *p = mk(2, PLAN_COLL_CUSTOM, 1, 2);
    p->protocol_ll = true;
    int c0 = chan(p, 0, 0, PLAN_CHAN_PORT, 1);
    chan(p, 1, 0, PLAN_CHAN_PORT, 0);
    add2(p, 0, 0, PLAN_OP_CPKT, L(PLAN_BUF_INPUT, 0, 1), L(PLAN_BUF_SCRATCH, 0, 1));
    PlanOp o = op0(PLAN_OP_PPKT);
    o.chan_type = PLAN_CHAN_PORT;
    o.nsrc = o.ndst = o.nchan = 1;
    o.chan_ids[0] = c0;
    o.src[0] = L(PLAN_BUF_SCRATCH, 0, 1);
    o.dst[0] = R(p, 0, 0, PLAN_CHAN_PORT, 1, PLAN_BUF_SCRATCH, 1, 1);
    add(p, 0, 0, &o);
    add2(p, 1, 0, PLAN_OP_UPKT, L(PLAN_BUF_SCRATCH, 1, 1), L(PLAN_BUF_OUTPUT, 0, 1));
    for (int it = 0; it < 2; it++) {
        Bufs b;
        bufs_init(&b, 2, false, it);
        CHECK_EQ_INT(MSCCLRT_SUCCESS, run(comm2, p, &b, CH, CH, MSCCLRT_SUM, pk));
        CHECK(chunk_eq(b.out[1], b.in[0]));
    }
    plan_free(p);
}

/* re (local), rre (remote read), res/rres (remote write) with several operators */
static void t_reduce_family(void) {
    mscclrt_redop ops[] = {MSCCLRT_SUM, MSCCLRT_PROD, MSCCLRT_MIN, MSCCLRT_MAX};
    Plan *p = mk(2, PLAN_COLL_CUSTOM, 4, 0);
    for (int r = 0; r < 2; r++) {
        int q = 1 - r;
        PlanOp o = op0(PLAN_OP_RE);                /* o[0] = i[0] (op) i[1] */
        o.nsrc = 2;
        o.ndst = 1;
        o.src[0] = L(PLAN_BUF_INPUT, 0, 1);
        o.src[1] = L(PLAN_BUF_INPUT, 1, 1);
        o.dst[0] = L(PLAN_BUF_OUTPUT, 0, 1);
        add(p, r, 0, &o);
        o = op0(PLAN_OP_RRE);                      /* o[1] = i[2] (op) peer i[2] */
        o.chan_type = PLAN_CHAN_MEMORY;
        o.nsrc = 2;
        o.ndst = 1;
        o.src[0] = L(PLAN_BUF_INPUT, 2, 1);
        o.src[1] = R(p, r, 0, PLAN_CHAN_MEMORY, q, PLAN_BUF_INPUT, 2, 1);
        o.dst[0] = L(PLAN_BUF_OUTPUT, 1, 1);
        add(p, r, 0, &o);
        if (r == 0) {                              /* rank 0: res and rres write rank 1's o[2], o[3] */
            o = op0(PLAN_OP_RES);
            o.chan_type = PLAN_CHAN_MEMORY;
            o.nsrc = 2;
            o.ndst = 2;
            o.src[0] = L(PLAN_BUF_INPUT, 3, 1);
            o.src[1] = L(PLAN_BUF_INPUT, 0, 1);
            o.dst[0] = L(PLAN_BUF_OUTPUT, 2, 1);
            o.dst[1] = R(p, 0, 0, PLAN_CHAN_MEMORY, 1, PLAN_BUF_OUTPUT, 2, 1);
            add(p, 0, 0, &o);
            o.kind = PLAN_OP_RRES;
            o.src[1] = R(p, 0, 0, PLAN_CHAN_MEMORY, 1, PLAN_BUF_INPUT, 3, 1);
            o.dst[0] = L(PLAN_BUF_OUTPUT, 3, 1);
            o.dst[1] = R(p, 0, 0, PLAN_CHAN_MEMORY, 1, PLAN_BUF_OUTPUT, 3, 1);
            add(p, 0, 0, &o);
        }
    }
    for (unsigned k = 0; k < sizeof ops / sizeof *ops; k++) {
        Bufs b;
        bufs_init(&b, 2, false, (int)k);
        CHECK_EQ_INT(MSCCLRT_SUCCESS, run(comm2, p, &b, 4 * CH, 4 * CH, ops[k], MSCCLRT_LL16));
        float want[NF];
        for (int r = 0; r < 2; r++) {
            memcpy(want, b.in[r], CH);
            dtype_reduce(MSCCLRT_FLOAT32, ops[k], want, b.in[r] + NF, NF);
            CHECK(chunk_eq(b.out[r], want));
            memcpy(want, b.in[r] + 2 * NF, CH);
            dtype_reduce(MSCCLRT_FLOAT32, ops[k], want, b.in[1 - r] + 2 * NF, NF);
            CHECK(chunk_eq(b.out[r] + NF, want));
        }
        memcpy(want, b.in[0] + 3 * NF, CH);
        dtype_reduce(MSCCLRT_FLOAT32, ops[k], want, b.in[0], NF);
        CHECK(chunk_eq(b.out[0] + 2 * NF, want) && chunk_eq(b.out[1] + 2 * NF, want));
        memcpy(want, b.in[0] + 3 * NF, CH);
        dtype_reduce(MSCCLRT_FLOAT32, ops[k], want, b.in[1] + 3 * NF, NF);
        CHECK(chunk_eq(b.out[0] + 3 * NF, want) && chunk_eq(b.out[1] + 3 * NF, want));
    }
    plan_free(p);
}

/* Packets on 3 ranks, LL16 and LL8, double scratch, repeated calls:
 * rank 0: ppkt i[0] -> r1 s[0]; cpkt i[1] -> s[1]; upkt s[1] -> o[1]
 * rank 1: rppkt s[0] -> r2 s[0]; repkt [i[1], s[0]] -> o[0];
 *         recspkt [i[2], s[0]] -> [o[2], s[2], r2 s[1]]; upkt s[2] -> o[3]
 * rank 2: respkt [i[0], s[0]] -> [o[0], r0 s[2]]; recpkt [i[1], s[1]] -> [o[1], s[3]];
 *         upkt s[3] -> o[2]
 * rank 0: upkt s[2] -> o[2] */
static Plan *packet_plan(void) {
    Plan *p = mk(3, PLAN_COLL_CUSTOM, 4, 4);
    p->protocol_ll = true;
    p->double_scratch = true;
    PlanOp o = op0(PLAN_OP_PPKT);
    o.chan_type = PLAN_CHAN_MEMORY;
    o.nsrc = o.ndst = 1;
    o.src[0] = L(PLAN_BUF_INPUT, 0, 1);
    o.dst[0] = R(p, 0, 0, PLAN_CHAN_MEMORY, 1, PLAN_BUF_SCRATCH, 0, 1);
    add(p, 0, 0, &o);
    add2(p, 0, 0, PLAN_OP_CPKT, L(PLAN_BUF_INPUT, 1, 1), L(PLAN_BUF_SCRATCH, 1, 1));
    add2(p, 0, 0, PLAN_OP_UPKT, L(PLAN_BUF_SCRATCH, 1, 1), L(PLAN_BUF_OUTPUT, 1, 1));
    add2(p, 0, 1, PLAN_OP_UPKT, L(PLAN_BUF_SCRATCH, 2, 1), L(PLAN_BUF_OUTPUT, 2, 1));

    o = op0(PLAN_OP_RPPKT);
    o.chan_type = PLAN_CHAN_MEMORY;
    o.nsrc = o.ndst = 1;
    o.src[0] = L(PLAN_BUF_SCRATCH, 0, 1);
    o.dst[0] = R(p, 1, 0, PLAN_CHAN_MEMORY, 2, PLAN_BUF_SCRATCH, 0, 1);
    add(p, 1, 0, &o);
    o = op0(PLAN_OP_REPKT);
    o.nsrc = 2;
    o.ndst = 1;
    o.src[0] = L(PLAN_BUF_INPUT, 1, 1);
    o.src[1] = L(PLAN_BUF_SCRATCH, 0, 1);
    o.dst[0] = L(PLAN_BUF_OUTPUT, 0, 1);
    add(p, 1, 0, &o);
    o = op0(PLAN_OP_RECSPKT);
    o.chan_type = PLAN_CHAN_MEMORY;
    o.nsrc = 2;
    o.ndst = 3;
    o.src[0] = L(PLAN_BUF_INPUT, 2, 1);
    o.src[1] = L(PLAN_BUF_SCRATCH, 0, 1);
    o.dst[0] = L(PLAN_BUF_OUTPUT, 2, 1);
    o.dst[1] = L(PLAN_BUF_SCRATCH, 2, 1);
    o.dst[2] = R(p, 1, 1, PLAN_CHAN_MEMORY, 2, PLAN_BUF_SCRATCH, 1, 1);
    add(p, 1, 1, &o);
    add2(p, 1, 1, PLAN_OP_UPKT, L(PLAN_BUF_SCRATCH, 2, 1), L(PLAN_BUF_OUTPUT, 3, 1));

    o = op0(PLAN_OP_RESPKT);
    o.chan_type = PLAN_CHAN_MEMORY;
    o.nsrc = 2;
    o.ndst = 2;
    o.src[0] = L(PLAN_BUF_INPUT, 0, 1);
    o.src[1] = L(PLAN_BUF_SCRATCH, 0, 1);
    o.dst[0] = L(PLAN_BUF_OUTPUT, 0, 1);
    o.dst[1] = R(p, 2, 0, PLAN_CHAN_MEMORY, 0, PLAN_BUF_SCRATCH, 2, 1);
    add(p, 2, 0, &o);
    o = op0(PLAN_OP_RECPKT);
    o.nsrc = 2;
    o.ndst = 2;
    o.src[0] = L(PLAN_BUF_INPUT, 1, 1);
    o.src[1] = L(PLAN_BUF_SCRATCH, 1, 1);
    o.dst[0] = L(PLAN_BUF_OUTPUT, 1, 1);
    o.dst[1] = L(PLAN_BUF_SCRATCH, 3, 1);
    add(p, 2, 0, &o);
    add2(p, 2, 0, PLAN_OP_UPKT, L(PLAN_BUF_SCRATCH, 3, 1), L(PLAN_BUF_OUTPUT, 2, 1));
    return p;
}

static void t_packets(mscclrt_packet pk) {
    Plan *p = packet_plan();
    for (int it = 0; it < 4; it++) {      /* both scratch halves, twice; stale packets ignored */
        Bufs b;
        bufs_init(&b, 3, false, 10 * it);
        CHECK_EQ_INT(MSCCLRT_SUCCESS, run(comm3, p, &b, 4 * CH, 4 * CH, MSCCLRT_SUM, pk));
        float w[NF];
        CHECK(chunk_eq(b.out[0] + NF, b.in[0] + NF));                     /* cpkt/upkt */
        for (int k = 0; k < NF; k++) w[k] = b.in[0][k] + b.in[1][NF + k];  /* repkt */
        CHECK(chunk_eq(b.out[1], w));
        for (int k = 0; k < NF; k++) w[k] = b.in[0][k] + b.in[1][2 * NF + k];
        CHECK(chunk_eq(b.out[1] + 2 * NF, w));                             /* recspkt */
        CHECK(chunk_eq(b.out[1] + 3 * NF, w));                             /* its packets */
        CHECK(chunk_eq(b.out[2] + NF, b.out[2] + 2 * NF));                 /* recpkt */
        for (int k = 0; k < NF; k++) w[k] = b.in[0][k] + b.in[1][2 * NF + k] + b.in[2][NF + k];
        CHECK(chunk_eq(b.out[2] + NF, w));
        for (int k = 0; k < NF; k++) w[k] = b.in[0][k] + b.in[2][k];      /* rppkt + respkt */
        CHECK(chunk_eq(b.out[2], w));
        CHECK(chunk_eq(b.out[0] + 2 * NF, w));
    }
    CHECK_EQ_INT(1, cpu_comm_contexts(comm3) >= 1);
    plan_free(p);
}

/* The packet layout is faithful: a plan whose scratch is too small for packets fails. */
static void t_packet_scratch_size(void) {
    Plan *p = mk(2, PLAN_COLL_CUSTOM, 2, 2);
    p->protocol_ll = false;                /* "Simple": scratch not doubled for packets */
    add2(p, 0, 0, PLAN_OP_CPKT, L(PLAN_BUF_INPUT, 0, 2), L(PLAN_BUF_SCRATCH, 0, 2));
    Bufs b;
    bufs_init(&b, 2, false, 0);
    CHECK_EQ_INT(MSCCLRT_ERR_PLAN, cpu_execute(comm2, p, b.send, b.recv, 2 * CH, 2 * CH,
                                               MSCCLRT_FLOAT32, MSCCLRT_SUM, MSCCLRT_LL16));
    CHECK_CONTAINS(mscclrt_last_error(), "rank 0 tb 0 op 0 (cpkt): dst entry 0 addresses bytes "
                                         "[0, 64) of rank 0's scratch buffer, which has 32 bytes");
    p->protocol_ll = true;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, run(comm2, p, &b, 2 * CH, 2 * CH, MSCCLRT_SUM, MSCCLRT_LL16));
    plan_free(p);
}

/* pipeline: a copy in units of a quarter chunk walks the whole chunk; a packet op inside a
 * pipeline re-processes its whole range each iteration */
static void t_pipeline(void) {
    Plan *p = mk(1, PLAN_COLL_CUSTOM, 1, 1);
    p->protocol_ll = true;
    p->alignment = 4;
    PlanOp pl = op0(PLAN_OP_PIPELINE);
    pl.unit_size = CH / 4;
    pl.num_chunks = 1;
    pl.ninner = 3;
    pl.inner = calloc(3, sizeof *pl.inner);
    pl.inner[0] = op0(PLAN_OP_COPY);
    pl.inner[0].nsrc = pl.inner[0].ndst = 1;
    pl.inner[0].src[0] = L(PLAN_BUF_INPUT, 0, 1);
    pl.inner[0].dst[0] = L(PLAN_BUF_OUTPUT, 0, 1);
    pl.inner[1] = op0(PLAN_OP_CPKT);
    pl.inner[1].nsrc = pl.inner[1].ndst = 1;
    pl.inner[1].src[0] = L(PLAN_BUF_INPUT, 0, 1);
    pl.inner[1].dst[0] = L(PLAN_BUF_SCRATCH, 0, 1);
    pl.inner[2] = op0(PLAN_OP_UPKT);
    pl.inner[2].nsrc = pl.inner[2].ndst = 1;
    pl.inner[2].src[0] = L(PLAN_BUF_SCRATCH, 0, 1);
    pl.inner[2].dst[0] = L(PLAN_BUF_INPUT, 0, 1);
    add(p, 0, 0, &pl);
    plan_op_release(&pl);
    mscclrt_cpu_comm *c1;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, cpu_comm_create(&c1, 1));
    Bufs b;
    bufs_init(&b, 1, false, 0);
    float in0[NF];
    memcpy(in0, b.in[0], CH);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, run(c1, p, &b, CH, CH, MSCCLRT_SUM, MSCCLRT_LL16));
    CHECK(chunk_eq(b.out[0], in0));
    CHECK(chunk_eq(b.in[0], in0));
    cpu_comm_destroy(c1);
    plan_free(p);
}

/* tbg: three 16-byte units split over two blocks (2 + 1); each block copies its slice */
static void t_tbg(void) {
    Plan *p = mk(1, PLAN_COLL_CUSTOM, 1, 0);
    for (int t = 0; t < 2; t++) {
        PlanOp o = op0(PLAN_OP_COPY);
        o.nsrc = o.ndst = 1;
        o.src[0] = L(PLAN_BUF_INPUT, 0, 1);
        o.dst[0] = L(PLAN_BUF_OUTPUT, 0, 1);
        o.tbg_id = t;
        o.tbg_size = 2;
        add(p, 0, t, &o);
    }
    mscclrt_cpu_comm *c1;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, cpu_comm_create(&c1, 1));
    Bufs b;
    bufs_init(&b, 1, false, 0);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, run(c1, p, &b, 3 * CH, 3 * CH, MSCCLRT_SUM, MSCCLRT_LL16));
    CHECK(memcmp(b.out[0], b.in[0], 3 * CH) == 0);
    /* only the second block: it owns the last unit only */
    p->gpus[0].tbs[0].nops = 0;
    bufs_init(&b, 1, false, 1);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, run(c1, p, &b, 3 * CH, 3 * CH, MSCCLRT_SUM, MSCCLRT_LL16));
    CHECK(b.out[0][0] == -1 && b.out[0][2 * NF - 1] == -1);
    CHECK(memcmp(b.out[0] + 2 * NF, b.in[0] + 2 * NF, CH) == 0);
    p->gpus[0].tbs[0].nops = 1;
    cpu_comm_destroy(c1);
    plan_free(p);
}

/* semaphores (init once per context) and barriers (persistent): TB1 consumes what TB0 wrote */
static void t_sem_barrier(void) {
    Plan *p = mk(1, PLAN_COLL_CUSTOM, 3, 0);
    plan_gpu_add_semaphore(&p->gpus[0], 0);
    add2(p, 0, 0, PLAN_OP_COPY, L(PLAN_BUF_INPUT, 0, 1), L(PLAN_BUF_OUTPUT, 0, 1));
    PlanOp o = op0(PLAN_OP_SEM_RELEASE);
    o.nsem = 1;
    add(p, 0, 0, &o);
    o.kind = PLAN_OP_SEM_ACQUIRE;
    add(p, 0, 1, &o);
    add2(p, 0, 1, PLAN_OP_COPY, L(PLAN_BUF_OUTPUT, 0, 1), L(PLAN_BUF_OUTPUT, 1, 1));
    PlanOp bar = op0(PLAN_OP_BARRIER);
    bar.barrier_id = 3;
    bar.num_threadblocks = 2;
    add(p, 0, 1, &bar);
    add(p, 0, 0, &bar);
    add2(p, 0, 0, PLAN_OP_COPY, L(PLAN_BUF_OUTPUT, 1, 1), L(PLAN_BUF_OUTPUT, 2, 1));
    mscclrt_cpu_comm *c1;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, cpu_comm_create(&c1, 1));
    for (int it = 0; it < 3; it++) {
        Bufs b;
        bufs_init(&b, 1, false, it);
        CHECK_EQ_INT(MSCCLRT_SUCCESS, run(c1, p, &b, 3 * CH, 3 * CH, MSCCLRT_SUM, MSCCLRT_LL16));
        CHECK(chunk_eq(b.out[0] + 2 * NF, b.in[0]));
    }
    /* an unbalanced semaphore: a second acquire with no release blocks -> timeout message */
    add(p, 0, 1, &o);
    Bufs b;
    bufs_init(&b, 1, false, 0);
    CHECK_EQ_INT(MSCCLRT_ERR_TIMEOUT, cpu_execute(c1, p, b.send, b.recv, 3 * CH, 3 * CH,
                                                  MSCCLRT_FLOAT32, MSCCLRT_SUM, MSCCLRT_LL16));
    CHECK_CONTAINS(mscclrt_last_error(), "rank 0 tb 1 op 3 (sem_acquire): waiting on semaphore 0");
    cpu_comm_destroy(c1);
    plan_free(p);
}

/* switch emulation: glres over {0,1} from i into o, and gstorepkt through scratch:
 * rank r: glres i[r] -> o[r] (all members); cpkt i[r] -> s[0]; gstorepkt s[0] -> s[1+r] (all);
 *         upkt s[1+q] -> o[2+q] for q in {0,1} */
static void t_switch(void) {
    int ranks[2] = {0, 1};
    Plan *p = mk(2, PLAN_COLL_CUSTOM, 4, 4);
    p->protocol_ll = true;
    for (int r = 0; r < 2; r++) {
        int si = plan_gpu_add_switch(&p->gpus[r], PLAN_BUF_INPUT, ranks, 2);
        int so = plan_gpu_add_switch(&p->gpus[r], PLAN_BUF_OUTPUT, ranks, 2);
        int ss = plan_gpu_add_switch(&p->gpus[r], PLAN_BUF_SCRATCH, ranks, 2);
        int li = plan_tb_use_channel(tb_of(p, r, 0), PLAN_CHAN_SWITCH, si);
        int lo = plan_tb_use_channel(tb_of(p, r, 0), PLAN_CHAN_SWITCH, so);
        int ls = plan_tb_use_channel(tb_of(p, r, 1), PLAN_CHAN_SWITCH, ss);
        PlanOp o = op0(PLAN_OP_GLRES);
        o.chan_type = PLAN_CHAN_SWITCH;
        o.nsrc = o.ndst = 1;
        o.src[0] = (PlanRef){PLAN_REF_SWITCH, PLAN_BUF_INPUT, li, (uint32_t)r, 1, -1};
        o.dst[0] = (PlanRef){PLAN_REF_SWITCH, PLAN_BUF_OUTPUT, lo, (uint32_t)r, 1, -1};
        add(p, r, 0, &o);
        add2(p, r, 1, PLAN_OP_CPKT, L(PLAN_BUF_INPUT, r, 1), L(PLAN_BUF_SCRATCH, 0, 1));
        o = op0(PLAN_OP_GSTOREPKT);
        o.chan_type = PLAN_CHAN_SWITCH;
        o.nsrc = o.ndst = 1;
        o.src[0] = L(PLAN_BUF_SCRATCH, 0, 1);
        o.dst[0] = (PlanRef){PLAN_REF_SWITCH, PLAN_BUF_SCRATCH, ls, (uint32_t)(1 + r), 1, -1};
        add(p, r, 1, &o);
        for (int q = 0; q < 2; q++)
            add2(p, r, 2 + q, PLAN_OP_UPKT, L(PLAN_BUF_SCRATCH, 1 + q, 1), L(PLAN_BUF_OUTPUT, 2 + q, 1));
    }
    Bufs b;
    bufs_init(&b, 2, false, 0);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, run(comm2, p, &b, 4 * CH, 4 * CH, MSCCLRT_MAX, MSCCLRT_LL8));
    for (int r = 0; r < 2; r++) {
        for (int k = 0; k < 2 * NF; k++)
            CHECK(b.out[r][k] == (b.in[0][k] > b.in[1][k] ? b.in[0][k] : b.in[1][k]));
        for (int q = 0; q < 2; q++) CHECK(chunk_eq(b.out[r] + (2 + q) * NF, b.in[q] + q * NF));
    }
    plan_free(p);

    /* gstore: rank r broadcasts its i[r] into everyone's o[r] */
    p = mk(2, PLAN_COLL_CUSTOM, 2, 0);
    for (int r = 0; r < 2; r++) {
        int so = plan_gpu_add_switch(&p->gpus[r], PLAN_BUF_OUTPUT, ranks, 2);
        int lo = plan_tb_use_channel(tb_of(p, r, 0), PLAN_CHAN_SWITCH, so);
        PlanOp o = op0(PLAN_OP_GSTORE);
        o.chan_type = PLAN_CHAN_SWITCH;
        o.nsrc = o.ndst = 1;
        o.src[0] = L(PLAN_BUF_INPUT, r, 1);
        o.src[0].rank = r;
        o.dst[0] = (PlanRef){PLAN_REF_SWITCH, PLAN_BUF_OUTPUT, lo, (uint32_t)r, 1, -1};
        add(p, r, 0, &o);
    }
    bufs_init(&b, 2, false, 3);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, run(comm2, p, &b, 2 * CH, 2 * CH, MSCCLRT_SUM, MSCCLRT_LL16));
    for (int r = 0; r < 2; r++) {
        CHECK(chunk_eq(b.out[r], b.in[0]));
        CHECK(chunk_eq(b.out[r] + NF, b.in[1] + NF));
    }
    plan_free(p);
}

/* reuse_resources: a 64 MiB scratch per context (spec §3.5), addressed as usual when its
 * per-chunk window is larger than a chunk */
static void t_reuse(void) {
    Plan *p = mk(1, PLAN_COLL_CUSTOM, 2, 2);
    p->reuse_resources = true;
    add2(p, 0, 0, PLAN_OP_COPY, L(PLAN_BUF_INPUT, 0, 2), L(PLAN_BUF_SCRATCH, 0, 2));
    add2(p, 0, 0, PLAN_OP_COPY, L(PLAN_BUF_SCRATCH, 1, 1), L(PLAN_BUF_OUTPUT, 0, 1));
    add2(p, 0, 0, PLAN_OP_COPY, L(PLAN_BUF_SCRATCH, 0, 1), L(PLAN_BUF_OUTPUT, 1, 1));
    mscclrt_cpu_comm *c1;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, cpu_comm_create(&c1, 1));
    for (int it = 0; it < 2; it++) {
        Bufs b;
        bufs_init(&b, 1, false, it);
        CHECK_EQ_INT(MSCCLRT_SUCCESS, run(c1, p, &b, 2 * CH, 2 * CH, MSCCLRT_SUM, MSCCLRT_LL16));
        CHECK(chunk_eq(b.out[0], b.in[0] + NF));
        CHECK(chunk_eq(b.out[0] + NF, b.in[0]));
    }
    plan_free(p);
    /* 2^20 scratch chunks: a 64-byte window per chunk, smaller than the 128-byte chunk, so a
     * pipeline of 64-byte units cycles through scratch bytes [0, 64) (spec §5.0): after it,
     * scratch holds the last unit at 0 and zeros behind it */
    p = mk(1, PLAN_COLL_CUSTOM, 1, 0);
    p->reuse_resources = true;
    p->gpus[0].scratch_chunks = 1u << 20;
    PlanOp pl = op0(PLAN_OP_PIPELINE);
    pl.unit_size = 64;
    pl.num_chunks = 1;
    pl.ninner = 1;
    pl.inner = calloc(1, sizeof *pl.inner);
    pl.inner[0] = op0(PLAN_OP_COPY);
    pl.inner[0].nsrc = pl.inner[0].ndst = 1;
    pl.inner[0].src[0] = L(PLAN_BUF_INPUT, 0, 1);
    pl.inner[0].dst[0] = L(PLAN_BUF_SCRATCH, 0, 1);
    add(p, 0, 0, &pl);
    plan_op_release(&pl);
    add2(p, 0, 0, PLAN_OP_COPY, L(PLAN_BUF_SCRATCH, 0, 1), L(PLAN_BUF_OUTPUT, 0, 1));
    Bufs b;
    bufs_init(&b, 1, false, 7);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, run(c1, p, &b, 128, 128, MSCCLRT_SUM, MSCCLRT_LL16));
    CHECK(memcmp(b.out[0], b.in[0] + 16, 64) == 0);
    CHECK(b.out[0][16] == 0 && b.out[0][31] == 0);
    cpu_comm_destroy(c1);
    plan_free(p);
}

/* contexts are cached per (plan, buffers, sizes) and reused */
static void t_contexts(void) {
    mscclrt_cpu_comm *c;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, cpu_comm_create(&c, 2));
    Plan *p = mk(2, PLAN_COLL_CUSTOM, 2, 0);
    for (int r = 0; r < 2; r++) add2(p, r, 0, PLAN_OP_COPY, L(PLAN_BUF_INPUT, 0, 1), L(PLAN_BUF_OUTPUT, 1, 1));
    Bufs b, b2;
    bufs_init(&b, 2, false, 0);
    bufs_init(&b2, 2, false, 0);
    for (int i = 0; i < 3; i++) run(c, p, &b, 2 * CH, 2 * CH, MSCCLRT_SUM, MSCCLRT_LL16);
    CHECK_EQ_INT(1, cpu_comm_contexts(c));
    run(c, p, &b2, 2 * CH, 2 * CH, MSCCLRT_SUM, MSCCLRT_LL16);
    CHECK_EQ_INT(2, cpu_comm_contexts(c));
    run(c, p, &b, 4 * CH, 4 * CH, MSCCLRT_SUM, MSCCLRT_LL16);
    CHECK_EQ_INT(3, cpu_comm_contexts(c));
    /* a size that does not split into chunks */
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, cpu_execute(c, p, b.send, b.recv, 3 * CH, 3 * CH,
                                                      MSCCLRT_FLOAT32, MSCCLRT_SUM, MSCCLRT_LL16));
    CHECK_CONTAINS(mscclrt_last_error(), "does not split into 2 chunks of a multiple of");
    cpu_comm_destroy(c);
    plan_free(p);
}

/* avg: sum, then the allreduce's output divided by the rank count */
static void t_avg(void) {
    Plan *p = mk(2, PLAN_COLL_ALLREDUCE, 1, 0);
    for (int r = 0; r < 2; r++) {
        PlanOp o = op0(PLAN_OP_RRE);
        o.chan_type = PLAN_CHAN_MEMORY;
        o.nsrc = 2;
        o.ndst = 1;
        o.src[0] = L(PLAN_BUF_INPUT, 0, 1);
        o.src[1] = R(p, r, 0, PLAN_CHAN_MEMORY, 1 - r, PLAN_BUF_INPUT, 0, 1);
        o.dst[0] = L(PLAN_BUF_OUTPUT, 0, 1);
        add(p, r, 0, &o);
    }
    Bufs b;
    bufs_init(&b, 2, false, 0);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, run(comm2, p, &b, CH, CH, MSCCLRT_AVG, MSCCLRT_LL16));
    for (int k = 0; k < NF; k++) CHECK(b.out[1][k] == (b.in[0][k] + b.in[1][k]) / 2);
    plan_free(p);
}

/* the public entry points: a plan through JSON and the loader, and argument checks */
static void t_public_api(void) {
    Plan *p = mk(2, PLAN_COLL_ALLREDUCE, 2, 0);
    for (int r = 0; r < 2; r++) add2(p, r, 0, PLAN_OP_COPY, L(PLAN_BUF_INPUT, 0, 1), L(PLAN_BUF_OUTPUT, 1, 1));
    char *json = plan_to_json(p, true, NULL);
    mscclrt_plan *h = NULL;
    CHECK(json != NULL);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_plan_parse(&h, json, strlen(json), "<test>"));
    if (!h) fprintf(stderr, "parse: %s\n", mscclrt_last_error());
    mscclrt_cpu_comm *c = NULL;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_cpu_comm_create(&c, 2));
    Bufs b;
    bufs_init(&b, 2, false, 0);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_cpu_execute(c, h, b.send, b.recv, 2 * CH, 2 * CH,
                                                      MSCCLRT_FLOAT32, MSCCLRT_SUM, MSCCLRT_LL16));
    CHECK(chunk_eq(b.out[1] + NF, b.in[1]));
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_cpu_execute(NULL, h, b.send, b.recv, 2 * CH,
                 2 * CH, MSCCLRT_FLOAT32, MSCCLRT_SUM, MSCCLRT_LL16));
    CHECK_CONTAINS(mscclrt_last_error(), "mscclrt_cpu_execute: comm is NULL");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_cpu_execute(c, NULL, b.send, b.recv, 2 * CH,
                 2 * CH, MSCCLRT_FLOAT32, MSCCLRT_SUM, MSCCLRT_LL16));
    CHECK_CONTAINS(mscclrt_last_error(), "plan is NULL");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_cpu_execute(c, h, b.send, b.recv, 2 * CH,
                 2 * CH, (mscclrt_dtype)99, MSCCLRT_SUM, MSCCLRT_LL16));
    CHECK_CONTAINS(mscclrt_last_error(), "dtype 99 out of range");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_cpu_execute(c, h, b.send, b.recv, 2 * CH,
                 2 * CH, MSCCLRT_FLOAT32, MSCCLRT_SUM, (mscclrt_packet)7));
    mscclrt_cpu_comm *c0 = (mscclrt_cpu_comm *)&b;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_cpu_comm_create(&c0, 0));
    CHECK(c0 == NULL);
    mscclrt_cpu_comm *c3 = NULL;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_cpu_comm_create(&c3, 3));
    CHECK_EQ_INT(MSCCLRT_ERR_PLAN, mscclrt_cpu_execute(c3, h, b.send, b.recv, 2 * CH, 2 * CH,
                                                       MSCCLRT_FLOAT32, MSCCLRT_SUM, MSCCLRT_LL16));
    CHECK_CONTAINS(mscclrt_last_error(), "is for 2 ranks, the communicator has 3");
    mscclrt_cpu_comm_destroy(c3);
    mscclrt_cpu_comm_destroy(c);
    mscclrt_cpu_comm_destroy(NULL);
    mscclrt_plan_free(h);
    free(json);
    plan_free(p);
}

/* a plan that deadlocks: rank 1 waits for a signal rank 0 never sends */
static void t_timeout(void) {
    Plan *p = mk(2, PLAN_COLL_CUSTOM, 1, 0);
    chan(p, 0, 0, PLAN_CHAN_MEMORY, 1);
    int c1 = chan(p, 1, 0, PLAN_CHAN_MEMORY, 0);
    add2(p, 0, 0, PLAN_OP_COPY, L(PLAN_BUF_INPUT, 0, 1), L(PLAN_BUF_OUTPUT, 0, 1));
    add2(p, 1, 0, PLAN_OP_COPY, L(PLAN_BUF_INPUT, 0, 1), L(PLAN_BUF_OUTPUT, 0, 1));
    add2(p, 1, 0, PLAN_OP_COPY, L(PLAN_BUF_INPUT, 0, 1), L(PLAN_BUF_OUTPUT, 0, 1));
    add2(p, 1, 0, PLAN_OP_NOP, L(PLAN_BUF_INPUT, 0, 1), L(PLAN_BUF_OUTPUT, 0, 1));
    sig(p, 1, 0, PLAN_OP_WAIT, PLAN_CHAN_MEMORY, c1);
    Bufs b;
    bufs_init(&b, 2, false, 0);
    mscclrt_result r = cpu_execute(comm2, p, b.send, b.recv, CH, CH, MSCCLRT_FLOAT32,
                                   MSCCLRT_SUM, MSCCLRT_LL16);
    CHECK_EQ_INT(MSCCLRT_ERR_TIMEOUT, r);
    CHECK_CONTAINS(mscclrt_last_error(), "rank 1 tb 0 op 3 (wait): waiting for a signal on memory "
                                         "channel 0 from rank 0 (received 0, need 1)");
    /* the communicator is usable afterwards: the wait's pair signals now */
    sig(p, 0, 0, PLAN_OP_SIGNAL, PLAN_CHAN_MEMORY, 0);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, run(comm2, p, &b, CH, CH, MSCCLRT_SUM, MSCCLRT_LL16));
    plan_free(p);
}

/* the serial scheduler: a racy plan (rank 0 puts into rank 1's output[0] with no signal while
 * rank 1 copies output[0] to output[1]) gives both results over some seeds, the same result
 * for the same seed every time; a deadlock fails at once, naming the seed */
static void t_serial(void) {
    Plan *p = mk(2, PLAN_COLL_CUSTOM, 2, 0);
    chan(p, 0, 0, PLAN_CHAN_MEMORY, 1);
    chan(p, 1, 0, PLAN_CHAN_MEMORY, 0);
    add2(p, 0, 0, PLAN_OP_PUT, L(PLAN_BUF_INPUT, 0, 1),
         R(p, 0, 0, PLAN_CHAN_MEMORY, 1, PLAN_BUF_OUTPUT, 0, 1));
    tb_of(p, 0, 0)->ops[0].chan_type = PLAN_CHAN_MEMORY;
    add2(p, 1, 0, PLAN_OP_COPY, L(PLAN_BUF_OUTPUT, 0, 1), L(PLAN_BUF_OUTPUT, 1, 1));
    mscclrt_cpu_comm *c;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, cpu_comm_create(&c, 2));
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_cpu_comm_set_seed(NULL, 1));
    int early = 0, late = 0;
    for (unsigned long long seed = 1; seed <= 32; seed++) {
        bool first[2];
        for (int k = 0; k < 2; k++) {
            CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_cpu_comm_set_seed(c, seed));
            Bufs b;
            bufs_init(&b, 2, false, 0);
            CHECK_EQ_INT(MSCCLRT_SUCCESS, run(c, p, &b, 2 * CH, 2 * CH, MSCCLRT_SUM, MSCCLRT_LL16));
            first[k] = chunk_eq(b.out[1] + NF, b.in[0]);   /* the put came first */
        }
        CHECK(first[0] == first[1]);
        if (first[0]) early++;
        else late++;
    }
    CHECK(early > 0 && late > 0);
    /* a wait nobody signals: every block waits, reported at once */
    Plan *q = mk(2, PLAN_COLL_CUSTOM, 1, 0);
    chan(q, 0, 0, PLAN_CHAN_MEMORY, 1);
    int c1 = chan(q, 1, 0, PLAN_CHAN_MEMORY, 0);
    sig(q, 1, 0, PLAN_OP_WAIT, PLAN_CHAN_MEMORY, c1);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_cpu_comm_set_seed(c, 5));
    Bufs b;
    bufs_init(&b, 2, false, 0);
    CHECK_EQ_INT(MSCCLRT_ERR_TIMEOUT, cpu_execute(c, q, b.send, b.recv, CH, CH, MSCCLRT_FLOAT32,
                                                  MSCCLRT_SUM, MSCCLRT_LL16));
    CHECK_CONTAINS(mscclrt_last_error(), "deadlock: every unfinished thread block waits (serial "
                                         "schedule, seed 5, call 0): rank 1 tb 0 op 0 (wait): "
                                         "waiting for a signal");
    /* seed 0: back to a thread per rank */
    sig(q, 0, 0, PLAN_OP_SIGNAL, PLAN_CHAN_MEMORY, 0);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_cpu_comm_set_seed(c, 0));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, run(c, q, &b, CH, CH, MSCCLRT_SUM, MSCCLRT_LL16));
    cpu_comm_destroy(c);
    plan_free(q);
    plan_free(p);
}

int main(void) {
    setenv("MSCCLRT_CPU_TIMEOUT_MS", "1500", 1);  /* read once, at the first comm */
    if (cpu_comm_create(&comm2, 2) != MSCCLRT_SUCCESS || cpu_comm_create(&comm3, 3) != MSCCLRT_SUCCESS)
        return 1;
    TEST("cpu_ops/copy", t_copy());
    TEST("cpu_ops/memory_put_get", t_put_get(PLAN_CHAN_MEMORY));
    TEST("cpu_ops/port_put_get", t_put_get(PLAN_CHAN_PORT));
    TEST("cpu_ops/port_pws_pwsf_flush", t_port_pws());
    TEST("cpu_ops/port_ppkt_ll16", t_port_ppkt(MSCCLRT_LL16));
    TEST("cpu_ops/port_ppkt_ll8", t_port_ppkt(MSCCLRT_LL8));
    TEST("cpu_ops/re_rre_res_rres", t_reduce_family());
    TEST("cpu_ops/packets_ll16", t_packets(MSCCLRT_LL16));
    TEST("cpu_ops/packets_ll8", t_packets(MSCCLRT_LL8));
    TEST("cpu_ops/packet_scratch_size", t_packet_scratch_size());
    TEST("cpu_ops/pipeline", t_pipeline());
    TEST("cpu_ops/tbg", t_tbg());
    TEST("cpu_ops/semaphores_barrier", t_sem_barrier());
    TEST("cpu_ops/switch_emulation", t_switch());
    TEST("cpu_ops/reuse_resources", t_reuse());
    TEST("cpu_ops/contexts", t_contexts());
    TEST("cpu_ops/avg", t_avg());
    TEST("cpu_ops/public_api", t_public_api());
    TEST("cpu_ops/timeout", t_timeout());
    TEST("cpu_ops/serial_schedules", t_serial());
    cpu_comm_destroy(comm2);
    cpu_comm_destroy(comm3);
    return harness_report();
}

/*
 * test_check_bufs.c - the per-rank buffers of a checked CPU call (runtime/check/check_bufs.c),
 * which mscclrt_cpu_check_plan and mscclrt-run share: the in-place layouts of spec §3.7
 * (allgather's input and reducescatter's output at the rank's block of its one buffer, the
 * others' input and output the same memory), separate buffers out of place, and a fill that
 * marks every output and keeps a copy of every input; free leaves nothing and may repeat.
 */
#include "../harness.h"

#include "check/check.h"

#include <string.h>

static bool all_fill(const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != CHECK_FILL_BYTE) return false;
    return true;
}

static void t_inplace(void) {
    CheckBufs b;
    /* allgather: 3 ranks, 64 bytes in, 192 out: the input is block r of the output */
    CHECK(check_bufs_alloc(&b, PLAN_COLL_ALLGATHER, 3, 64, 192, true));
    for (int r = 0; r < 3; r++) {
        CHECK(b.recv[r] == b.own[r]);
        CHECK(b.send[r] == b.own[r] + 64 * r);
        CHECK(b.own_send[r] == NULL);
    }
    check_bufs_free(&b);
    /* reducescatter: 4 ranks, 256 in, 64 out: the output is block r of the input */
    CHECK(check_bufs_alloc(&b, PLAN_COLL_REDUCESCATTER, 4, 256, 64, true));
    for (int r = 0; r < 4; r++) {
        CHECK(b.send[r] == b.own[r]);
        CHECK(b.recv[r] == b.own[r] + 64 * r);
    }
    check_bufs_free(&b);
    /* allreduce: one buffer is both */
    CHECK(check_bufs_alloc(&b, PLAN_COLL_ALLREDUCE, 2, 128, 128, true));
    CHECK(b.send[0] == b.recv[0] && b.send[1] == b.recv[1] && b.send[0] != b.send[1]);
    check_bufs_free(&b);
}

static void t_out_of_place_and_fill(void) {
    CheckBufs b;
    CHECK(check_bufs_alloc(&b, PLAN_COLL_ALLGATHER, 2, 16, 32, false));
    CHECK(b.send[0] == b.own_send[0] && b.recv[0] == b.own[0] && b.send[0] != b.recv[0]);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, check_bufs_fill(&b, MSCCLRT_FLOAT32, MSCCLRT_SUM, 7));
    unsigned char want[16];
    for (int r = 0; r < 2; r++) {
        CHECK(all_fill(b.recv[r], 32));
        CHECK(memcmp(b.inputs[r], b.send[r], 16) == 0);
        CHECK_EQ_INT(MSCCLRT_SUCCESS, check_fill(MSCCLRT_FLOAT32, MSCCLRT_SUM, want, 4, 7, r));
        CHECK(memcmp(b.inputs[r], want, 16) == 0);   /* rank r's input of seed 7 */
    }
    CHECK(memcmp(b.inputs[0], b.inputs[1], 16) != 0);
    check_bufs_free(&b);
    check_bufs_free(&b);   /* a second free is a no-op */
    CHECK(b.send == NULL && b.inputs == NULL && b.nranks == 0);
    /* zero bytes: every buffer still exists (malloc(0) may be NULL) */
    CHECK(check_bufs_alloc(&b, PLAN_COLL_ALLREDUCE, 2, 0, 0, false));
    CHECK(b.send[1] != NULL && b.recv[1] != NULL && b.inputs[1] != NULL);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, check_bufs_fill(&b, MSCCLRT_FLOAT32, MSCCLRT_SUM, 1));
    check_bufs_free(&b);
}

int main(void) {
    TEST("check_bufs/inplace", t_inplace());
    TEST("check_bufs/out_of_place_and_fill", t_out_of_place_and_fill());
    return harness_report();
}

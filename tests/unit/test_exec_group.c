/*
 * test_exec_group.c - group end's order for launches prepared by the layers above
 * (exec_group_defer): every deferred call of a group is prepared (EXEC_DEFER_PREPARE: its
 * kernels loaded) before any is run, then each is run in call order; a simulated group only
 * discards them. Ranks sharing a context in one process need this: a module's first load waits
 * for the kernels running in its context, so a send/recv group whose 16-entry kernel loaded at
 * launch hung behind another rank's spinning kernel, and a load made by group end's own thread
 * must count as inside the group (test_gpu_coll 4 on 2 GPUs waited out the shared-device load
 * barrier's timeout per load). No GPU: the
 * deferred calls here only record their stages.
 */
#include "../harness.h"

#include "exec/exec.h"
#include "mscclrt.h"

#include <stdlib.h>
#include <string.h>

static char seq[64];
static int nseq;

/* arg: a malloc'd name character; records "<stage><name>" (d, p or r) */
static int prepared_outside;   /* preparations that saw exec_in_group() false */

static mscclrt_result record(void *arg, ExecDeferStage stage) {
    if (stage == EXEC_DEFER_PREPARE && !exec_in_group()) prepared_outside++;
    if (nseq + 2 < (int)sizeof seq) {
        seq[nseq++] = "dpr"[stage];
        seq[nseq++] = *(const char *)arg;
        seq[nseq] = 0;
    }
    return MSCCLRT_SUCCESS;
}

static mscclrt_result failing_prepare(void *arg, ExecDeferStage stage) {
    record(arg, stage);
    return stage == EXEC_DEFER_PREPARE ? MSCCLRT_ERR_UNAVAILABLE : MSCCLRT_SUCCESS;
}

static void *name(char ch) {
    char *p = malloc(1);
    if (p) *p = ch;
    return p;
}

int main(void) {
    /* the group touches no field of a comm that has only deferred calls: two distinct handles */
    static char fake[2][64];
    mscclrt_comm *c0 = (mscclrt_comm *)(void *)fake[0], *c1 = (mscclrt_comm *)(void *)fake[1];

    TEST("exec group: every deferred call prepared before any runs, then run in call order", {
        nseq = 0;
        CHECK((mscclrt_group_start()) == MSCCLRT_SUCCESS);
        CHECK(exec_in_group());
        CHECK((exec_group_defer(c0, record, name('a'), NULL)) == MSCCLRT_SUCCESS);
        CHECK((exec_group_defer(c1, record, name('b'), NULL)) == MSCCLRT_SUCCESS);
        CHECK((exec_group_defer(c0, record, name('c'), NULL)) == MSCCLRT_SUCCESS);
        CHECK((mscclrt_group_end()) == MSCCLRT_SUCCESS);
        CHECK(strcmp(seq, "papbpcrarbrc") == 0);
        /* prepared inside the group: a kernel load there must not wait at the load barrier of
         * ranks sharing a device (exec_share_after_load), which only this thread would reach */
        CHECK_EQ_INT(0, prepared_outside);
        CHECK(!exec_in_group());
    });
    TEST("exec group: a simulated group discards its deferred calls, preparing none", {
        nseq = 0;
        double us = -1;
        CHECK((mscclrt_group_start()) == MSCCLRT_SUCCESS);
        CHECK((exec_group_defer(c0, record, name('a'), NULL)) == MSCCLRT_SUCCESS);
        CHECK((exec_group_defer(c1, record, name('b'), NULL)) == MSCCLRT_SUCCESS);
        CHECK((mscclrt_group_simulate_end(&us)) == MSCCLRT_SUCCESS);
        CHECK(strcmp(seq, "dadb") == 0);
        CHECK(us > 0);
    });
    TEST("exec group: a call whose preparation fails is not run, the others are, the group fails", {
        nseq = 0;
        CHECK((mscclrt_group_start()) == MSCCLRT_SUCCESS);
        CHECK((exec_group_defer(c0, record, name('a'), NULL)) == MSCCLRT_SUCCESS);
        CHECK((exec_group_defer(c1, failing_prepare, name('b'), NULL)) == MSCCLRT_SUCCESS);
        CHECK(mscclrt_group_end() == MSCCLRT_ERR_UNAVAILABLE);
        CHECK(strcmp(seq, "papbra") == 0);
    });
    return harness_report();
}

/*
 * test_nvls.c - the driver-free part of switch (NVLS multicast) channels (transport/nvls.c):
 * multicast groups from a plan (root, matching channel on each member, membership, the
 * consistency error), granularity rounding and the binding-range error, the refusal while
 * MSCCLRT_ENABLE_NVLS is off, and that the driver-side entry points refuse before touching the
 * driver when it is off. Never enables NVLS and never needs a GPU.
 */
#include "../harness.h"
#include "test_plan_util.h"

#include "core/err.h"
#include "cuda/cuda_driver.h"
#include "transport/transport.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* The Cu* types the multicast entries take, as cuda.h lays them out (test_nvls_cuabi.c pins
 * cuda.h's side to the same numbers). */
_Static_assert(sizeof(CuMulticastObjectProp) == 32, "CUmulticastObjectProp size");
_Static_assert(offsetof(CuMulticastObjectProp, size) == 8, "CUmulticastObjectProp.size");
_Static_assert(offsetof(CuMulticastObjectProp, handleTypes) == 16, "CUmulticastObjectProp.handleTypes");
_Static_assert(offsetof(CuMulticastObjectProp, flags) == 24, "CUmulticastObjectProp.flags");
_Static_assert(CU_MC_GRAN_MINIMUM == 0 && CU_MC_GRAN_RECOMMENDED == 1, "multicast granularity flags");
_Static_assert(CU_ATTR_MULTICAST_SUPPORTED == 132, "CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED");

/* 3 ranks: rank 0 is in {0,1} twice (i, then o) and in {2,0} on scratch (rooted at rank 2,
 * declared between the two), so occurrence counting and roots other than the lowest rank
 * both matter. */
static Plan *three_ranks(PlanBuf rank1_second) {
    Plan *p = plan_new("nvls3", PLAN_COLL_ALLREDUCE, 3);
    if (!p) return NULL;
    const int g01[] = {0, 1}, g20[] = {2, 0};
    bool ok = plan_gpu_add_switch(&p->gpus[0], PLAN_BUF_INPUT, g01, 2) == 0 &&
              plan_gpu_add_switch(&p->gpus[0], PLAN_BUF_SCRATCH, g20, 2) == 1 &&
              plan_gpu_add_switch(&p->gpus[0], PLAN_BUF_OUTPUT, g01, 2) == 2 &&
              plan_gpu_add_switch(&p->gpus[1], PLAN_BUF_INPUT, g01, 2) == 0 &&
              plan_gpu_add_switch(&p->gpus[1], rank1_second, g01, 2) == 1 &&
              plan_gpu_add_switch(&p->gpus[2], PLAN_BUF_SCRATCH, g20, 2) == 0;
    if (!ok) {
        plan_free(p);
        return NULL;
    }
    return p;
}

static void groups_three(void) {
    Plan *p = three_ranks(PLAN_BUF_OUTPUT);
    CHECK(p != NULL);
    if (!p) return;
    CHECK(nvls_plan_uses(p));
    CHECK(nvls_plan_binds(p, 0, PLAN_BUF_SCRATCH));
    CHECK(nvls_plan_binds(p, 0, PLAN_BUF_OUTPUT));
    CHECK(!nvls_plan_binds(p, 1, PLAN_BUF_SCRATCH));
    CHECK(nvls_plan_binds(p, 2, PLAN_BUF_SCRATCH));
    CHECK(!nvls_plan_binds(p, 2, PLAN_BUF_INPUT));
    CHECK(!nvls_plan_binds(p, 3, PLAN_BUF_INPUT));
    /* the k-th group of a rank containing m is m's k-th group containing the rank */
    CHECK_EQ_INT(0, nvls_match(p, 0, 0, 1));
    CHECK_EQ_INT(1, nvls_match(p, 0, 2, 1));
    CHECK_EQ_INT(0, nvls_match(p, 0, 1, 2));
    CHECK_EQ_INT(1, nvls_match(p, 2, 0, 0));
    CHECK_EQ_INT(2, nvls_match(p, 1, 1, 0));
    CHECK_EQ_INT(0, nvls_match(p, 1, 0, 0));
    CHECK_EQ_INT(1, nvls_match(p, 0, 1, 0));   /* itself */
    CHECK_EQ_INT(-1, nvls_match(p, 0, 1, 1));  /* rank 1 is not in {2,0} */
    CHECK_EQ_INT(-1, nvls_match(p, 0, 3, 1));  /* no such channel */
    CHECK_EQ_INT(-1, nvls_match(p, 0, 0, 5));  /* no such rank */
    NvlsChan ch;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, nvls_chan(p, 0, 1, &ch));
    CHECK_EQ_INT(2, ch.root);
    CHECK_EQ_INT(0, ch.root_sw);
    CHECK_EQ_INT(1, ch.pos);
    CHECK_EQ_INT(2, ch.nmembers);
    CHECK_EQ_INT(PLAN_BUF_SCRATCH, ch.buf);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, nvls_chan(p, 0, 2, &ch));
    CHECK_EQ_INT(0, ch.root);
    CHECK_EQ_INT(2, ch.root_sw);
    CHECK_EQ_INT(0, ch.pos);
    CHECK_EQ_INT(PLAN_BUF_OUTPUT, ch.buf);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, nvls_chan(p, 1, 1, &ch));
    CHECK_EQ_INT(0, ch.root);
    CHECK_EQ_INT(2, ch.root_sw);   /* (root 0, its channel 2) names the group on every member */
    CHECK_EQ_INT(1, ch.pos);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, nvls_chan(p, 2, 0, &ch));
    CHECK_EQ_INT(2, ch.root);
    CHECK_EQ_INT(0, ch.root_sw);
    CHECK_EQ_INT(0, ch.pos);
    CHECK_EQ_INT(MSCCLRT_ERR_INTERNAL, nvls_chan(p, 1, 2, &ch));
    plan_free(p);
}

static void groups_mismatch(void) {
    /* rank 1's second {0,1} channel binds i where rank 0's binds o */
    Plan *p = three_ranks(PLAN_BUF_INPUT);
    CHECK(p != NULL);
    if (!p) return;
    NvlsChan ch;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, nvls_chan(p, 0, 0, &ch));
    CHECK_EQ_INT(MSCCLRT_ERR_PLAN, nvls_chan(p, 0, 2, &ch));
    CHECK_STR("plan 'nvls3': rank 0 switch channel 2: rank 1 does not declare the same switch "
              "channel (same ranks, same buffer, same order); multicast groups are created "
              "collectively", mscclrt_last_error());
    CHECK_EQ_INT(MSCCLRT_ERR_PLAN, nvls_chan(p, 1, 1, &ch));
    CHECK_CONTAINS(mscclrt_last_error(), "rank 1 switch channel 1: rank 0 does not declare");
    plan_free(p);
    /* a group that leaves out its own rank */
    p = plan_new("nvls_self", PLAN_COLL_ALLREDUCE, 3);
    CHECK(p != NULL);
    if (!p) return;
    const int g12[] = {1, 2};
    CHECK_EQ_INT(0, plan_gpu_add_switch(&p->gpus[0], PLAN_BUF_INPUT, g12, 2));
    CHECK_EQ_INT(MSCCLRT_ERR_PLAN, nvls_chan(p, 0, 0, &ch));
    CHECK_CONTAINS(mscclrt_last_error(), "plan 'nvls_self': rank 0 switch channel 0: rank 1 does "
                   "not declare the same switch channel");
    plan_free(p);
}

static void groups_compat(void) {
    PlanErr e;
    Plan *p = plan_load_file(COMPAT_DIR "reduce_nvls.json", &e);
    CHECK(p != NULL);
    if (!p) return;
    CHECK(nvls_plan_uses(p));
    for (int r = 0; r < p->ngpus; r++) {
        CHECK_EQ_INT(1, p->gpus[r].nswitch);
        CHECK(nvls_plan_binds(p, r, PLAN_BUF_INPUT));
        CHECK(!nvls_plan_binds(p, r, PLAN_BUF_SCRATCH));
        NvlsChan ch;
        CHECK_EQ_INT(MSCCLRT_SUCCESS, nvls_chan(p, r, 0, &ch));
        CHECK_EQ_INT(0, ch.root);
        CHECK_EQ_INT(0, ch.root_sw);
        CHECK_EQ_INT(r, ch.pos);
        CHECK_EQ_INT(p->ngpus, ch.nmembers);
    }
    plan_free(p);
    /* plans without switch channels never take part */
    for (int i = 0; i < NCOMPAT; i++) {
        char path[256];
        snprintf(path, sizeof path, COMPAT_DIR "%s.json", compat_plans[i]);
        p = plan_load_file(path, &e);
        CHECK(p != NULL);
        if (!p) continue;
        bool any = false;
        for (int r = 0; r < p->ngpus; r++) any = any || p->gpus[r].nswitch > 0;
        CHECK_EQ_INT(any, nvls_plan_uses(p));
        CHECK_EQ_INT(strcmp(compat_plans[i], "reduce_nvls") == 0, nvls_plan_uses(p));
        plan_free(p);
    }
    CHECK(!nvls_plan_uses(NULL));
}

static void rounding(void) {
    size_t out = 7;
    const size_t mib2 = (size_t)2 << 20;
    CHECK(nvls_round_up(0, mib2, &out));
    CHECK_EQ_INT(0, out);
    CHECK(nvls_round_up(1, mib2, &out));
    CHECK_EQ_INT(mib2, out);
    CHECK(nvls_round_up(mib2, mib2, &out));
    CHECK_EQ_INT(mib2, out);
    CHECK(nvls_round_up(mib2 + 1, mib2, &out));
    CHECK_EQ_INT(2 * mib2, out);
    CHECK(nvls_round_up(4 << 20, (size_t)512 << 20, &out));
    CHECK_EQ_INT((size_t)512 << 20, out);
    CHECK(!nvls_round_up(5, 0, &out));
    CHECK(!nvls_round_up(SIZE_MAX - 3, mib2, &out));
    CHECK(nvls_round_up(SIZE_MAX, 1, &out));
    CHECK(out == SIZE_MAX);
}

static void ranges(void) {
    const size_t g = (size_t)2 << 20;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, nvls_check_range(1, 0, "sendbuf (input)", 0x7f0000000000ull, 4 * g, g));
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG,
                 nvls_check_range(1, 0, "sendbuf (input)", 0x7f0000000000ull + 4096, 4 * g, g));
    CHECK_STR("rank 1: switch channel 0 binds the sendbuf (input) allocation [0x7f0000001000, "
              "+8388608 bytes) to a multicast object, but the driver binds whole multicast granules "
              "of 2097152 bytes: its address is not a multiple of 2097152; allocate the buffer with "
              "cuMemCreate at a size that is a multiple of 2097152 and map it at an address aligned "
              "to it (cuMemAddressReserve alignment)", mscclrt_last_error());
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG,
                 nvls_check_range(3, 2, "recvbuf (output)", 0x7f0000000000ull, g + 256, g));
    CHECK_CONTAINS(mscclrt_last_error(), "rank 3: switch channel 2 binds the recvbuf (output)");
    CHECK_CONTAINS(mscclrt_last_error(), "its size is not a multiple of 2097152");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, nvls_check_range(0, 0, "sendbuf (input)", 0, 0, g));
    CHECK_EQ_INT(MSCCLRT_ERR_INTERNAL, nvls_check_range(0, 0, "sendbuf (input)", 0, g, 0));
}

/* Off (this program never sets MSCCLRT_ENABLE_NVLS): the exact refusal, and every driver-side
 * entry point fails at its gate without reaching the driver (no driver is loaded here). */
static void off(void) {
    PlanErr e;
    Plan *p = plan_load_file(COMPAT_DIR "reduce_nvls.json", &e);
    CHECK(p != NULL);
    if (!p) return;
    CHECK_EQ_INT(MSCCLRT_ERR_UNAVAILABLE, nvls_check_enabled(p, 0, 0));
    CHECK_STR("plan 'allreduce_nvls' uses switch (NVLS multicast) channels, which are off unless "
              "MSCCLRT_ENABLE_NVLS=1", mscclrt_last_error());
    NvlsCtx *nv = NULL;
    CuDevPtr ptr = 1;
    int acc[1] = {0};
    CHECK_EQ_INT(MSCCLRT_ERR_INTERNAL, nvls_scratch_alloc(&nv, p, 0, 0, 1 << 20, acc, 1, &ptr));
    CHECK_CONTAINS(mscclrt_last_error(), "nvls_scratch_alloc: multicast setup reached while NVLS is off");
    CHECK(nv == NULL);
    NvlsMem m[2];
    memset(m, 0, sizeof m);
    NvlsCtx *nvs[2] = {NULL, NULL};
    for (int r = 0; r < 2; r++) {
        m[r].rank = r;
        m[r].nv = &nvs[r];
    }
    CHECK_EQ_INT(MSCCLRT_ERR_INTERNAL, nvls_setup_local(p, m, p->ngpus));
    CHECK_CONTAINS(mscclrt_last_error(), "nvls_setup_local: multicast setup reached while NVLS is off");
    CHECK_EQ_INT(MSCCLRT_ERR_INTERNAL, nvls_setup_boot(p, &m[0], NULL));
    CHECK_CONTAINS(mscclrt_last_error(), "nvls_setup_boot: multicast setup reached while NVLS is off");
    CHECK(nvs[0] == NULL && nvs[1] == NULL);
    CHECK(!cu.multicast && !cu.cuMulticastCreate);   /* nothing resolved the multicast API */
    CHECK(nvls_mc_addr(NULL, 0) == 0);
    nvls_ctx_free(NULL);
    plan_free(p);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    TEST("nvls groups of a 3-rank plan (roots, matching channels)", groups_three());
    TEST("nvls inconsistent switch groups are refused", groups_mismatch());
    TEST("nvls groups of the compat plans", groups_compat());
    TEST("nvls granularity rounding", rounding());
    TEST("nvls binding range checks", ranges());
    if (getenv("MSCCLRT_ENABLE_NVLS")) /* never enable it here: this runs on shared hosts too */
        TEST_SKIP("nvls refused while MSCCLRT_ENABLE_NVLS is off", "MSCCLRT_ENABLE_NVLS unset");
    else
        TEST("nvls refused while MSCCLRT_ENABLE_NVLS is off", off());
    return harness_report();
}

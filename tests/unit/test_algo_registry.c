/*
 * test_algo_registry.c - algorithms and the collection without a GPU (runtime/algo/
 * algo_registry.c): collective names, descriptions taken from stdlib plans compiled by libmscclc
 * (names, size ranges, buffer modes, symmetric buffers), desc overrides and their refusals,
 * native algorithms from source and files, reference counts, the collection (register,
 * duplicates, unregister, list order, find, many threads at once), every reason algo_fits gives,
 * and the selector chain over candidates (user selector, no opinion, replacement, a choice that
 * does not fit, bad blocks/threads, NULL restoring the default).
 */
#include "../harness.h"
#include "test_plan_util.h"

#include "algo/algo.h"
#include "core/api_plan.h"
#include "mscclc.h"
#include "mscclrt.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Compiles .coll text with -D N=n into a loaded public plan (NULL on any failure, printed). */
static mscclrt_plan *compile_text(const char *what, const char *src, int n) {
    MscclcDefine def = {"N", n};
    MscclcOptions opt = {.filename = what, .defines = &def, .ndefines = 1};
    MscclcResult res;
    mscclrt_plan *plan = NULL;
    if (mscclc_compile(src, strlen(src), &opt, &res) != MSCCLC_OK) {
        fprintf(stderr, "%s N=%d: %s\n", what, n, res.diagnostics);
    } else {
        char *json = plan_to_json(res.plan, true, NULL);
        if (!json || mscclrt_plan_parse(&plan, json, strlen(json), what) != MSCCLRT_SUCCESS)
            fprintf(stderr, "%s N=%d: %s\n", what, n, mscclrt_last_error());
        free(json);
    }
    mscclc_result_free(&res);
    return plan;
}

static mscclrt_plan *stdlib_plan(const char *prog, int n) {
    char path[256];
    snprintf(path, sizeof path, "stdlib/%s.coll", prog);
    char *src = tp_read_file(path, NULL);
    CHECK(src != NULL);
    mscclrt_plan *p = src ? compile_text(path, src, n) : NULL;
    free(src);
    return p;
}

static const char *native_src = "extern \"C\" __global__ void k(MnArgs a) {}\n";

static mscclrt_algo *native(const char *name, mscclrt_coll coll) {
    mscclrt_algo_desc d = {.name = name, .collective = coll};
    mscclrt_algo *a = NULL;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_source(&a, native_src, "k", &d));
    return a;
}

/* A request for coll of `bytes` on a world of n ranks (one node), as the collective layer
 * fills it: in/out bytes as nccl-tests counts the message. */
static mscclrt_request request(mscclrt_coll coll, uint64_t bytes, int n) {
    mscclrt_request r = {.collective = coll, .message_bytes = bytes, .in_bytes = bytes,
                         .out_bytes = bytes, .dtype = MSCCLRT_FLOAT32, .op = MSCCLRT_SUM,
                         .world_size = n, .ranks_per_node = n, .root = -1, .peer = -1,
                         .arch = 90};
    if (coll == MSCCLRT_COLL_ALLGATHER || coll == MSCCLRT_COLL_GATHER) r.in_bytes = bytes / n;
    if (coll == MSCCLRT_COLL_REDUCESCATTER || coll == MSCCLRT_COLL_SCATTER) r.out_bytes = bytes / n;
    if (coll == MSCCLRT_COLL_BROADCAST || coll == MSCCLRT_COLL_REDUCE) r.root = 0;
    return r;
}

static void t_coll_names(void) {
    for (int c = 0; c < MSCCLRT_COLL_COUNT; c++) {
        mscclrt_coll back;
        CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_coll_parse(mscclrt_coll_name((mscclrt_coll)c), &back));
        CHECK_EQ_INT(c, back);
    }
    CHECK_STR("reducescatter", mscclrt_coll_name(MSCCLRT_COLL_REDUCESCATTER));
    CHECK_STR("invalid", mscclrt_coll_name(MSCCLRT_COLL_COUNT));
    mscclrt_coll c;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_coll_parse("allsum", &c));
    CHECK_CONTAINS(mscclrt_last_error(), "unknown collective 'allsum'");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_coll_parse(NULL, &c));
}

/* Descriptions from stdlib plans for N = 2, 4, 8: everything comes from each plan itself. */
/* A reuse_resources plan (MSCCL++'s fixed 64 MiB scratch) fits only while its chunks fit that
 * scratch: selection routes larger calls to another algorithm instead of failing the call. */
static void t_reuse_resources_fit(void) {
    mscclrt_plan *pp = stdlib_plan("allreduce/rs_ag_simple", 2);
    if (!pp) return;
    /* the loaded model, flagged as MSCCL++'s multi-node defaults flag their plans */
    Plan *m = (Plan *)api_plan_model(pp);
    m->reuse_resources = true;
    mscclrt_algo *a = NULL;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&a, pp, NULL));
    const uint64_t per_chunk = (uint64_t)1 << 26;
    mscclrt_request small = request(MSCCLRT_COLL_ALLREDUCE, 1 << 20, 2);
    small.inplace = 1;
    small.symmetric = 1;   /* rs_ag_simple reaches peers' buffers: windows */
    const char *why = NULL;
    CHECK(a && algo_fits(a, &small, &why));

    mscclrt_request big = request(MSCCLRT_COLL_ALLREDUCE, per_chunk * m->gpus[0].input_chunks, 2);
    big.inplace = big.symmetric = 1;
    why = NULL;
    CHECK(a && !algo_fits(a, &big, &why));
    CHECK(why && strstr(why, "reuse_resources"));

    mscclrt_algo_free(a);
    mscclrt_plan_free(pp);
}

static void t_from_plan_stdlib(void) {
    static const int ns[] = {2, 4, 8};
    for (int i = 0; i < 3; i++) {
        int n = ns[i];
        mscclrt_plan *pp = stdlib_plan("allreduce/allpair_packet", n);
        mscclrt_plan *pr = stdlib_plan("allreduce/rs_ag_read", n);
        mscclrt_plan *pg = stdlib_plan("allgather/fullmesh", n);
        mscclrt_algo *ap = NULL, *ar = NULL, *ag = NULL;
        CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&ap, pp, NULL));
        CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&ar, pr, NULL));
        CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&ag, pg, NULL));
        if (!ap || !ar || !ag) goto out;
        mscclrt_algo_desc d;
        CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_get_desc(ap, &d));
        CHECK_STR("allreduce_allpair_packet", d.name);
        CHECK_EQ_INT(MSCCLRT_COLL_ALLREDUCE, d.collective);
        CHECK_EQ_INT(0, d.min_bytes);
        CHECK_EQ_INT(1 << 20, d.max_bytes);              /* sizes 0 .. 1M */
        CHECK_EQ_INT(n, d.world_size);
        CHECK_EQ_INT(0, d.ranks_per_node);
        CHECK_EQ_INT(MSCCLRT_BUFFER_OUTOFPLACE, d.buffer_mode);
        CHECK_EQ_INT(MSCCLRT_ALGO_PLAN, mscclrt_algo_kind_of(ap));
        CHECK(!ap->needs_symmetric);                      /* packets go to peers' scratch only */
        CHECK_CONTAINS(d.tags, "latency");
        CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_get_desc(ar, &d));
        CHECK_STR("allreduce_rs_ag_read", d.name);
        CHECK_EQ_INT(MSCCLRT_BUFFER_INPLACE, d.buffer_mode);
        CHECK_EQ_INT(0, d.max_bytes);                     /* no upper bound */
        CHECK(ar->needs_symmetric);                       /* reads and writes peers' input */
        CHECK_STR("bandwidth,two_phase", d.tags);
        CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_get_desc(ag, &d));
        CHECK_EQ_INT(MSCCLRT_COLL_ALLGATHER, d.collective);
        CHECK(ag->needs_symmetric);                       /* puts into peers' output */
        /* each algorithm keeps its own buffer mode, whatever was asked first (MSCCL++'s
         * DslAlgorithm::bufferMode cached one for the whole process) */
        CHECK_EQ_INT(MSCCLRT_BUFFER_OUTOFPLACE, ap->desc.buffer_mode);
        CHECK_EQ_INT(MSCCLRT_BUFFER_INPLACE, ar->desc.buffer_mode);
    out:
        mscclrt_algo_free(ap);
        mscclrt_algo_free(ar);
        mscclrt_algo_free(ag);
        mscclrt_plan_free(pp);
        mscclrt_plan_free(pr);
        mscclrt_plan_free(pg);
    }
}

static void t_from_plan_desc(void) {
    mscclrt_plan *pp = stdlib_plan("allreduce/allpair_packet", 4);
    mscclrt_plan *pr = stdlib_plan("allreduce/rs_ag_read", 4);
    mscclrt_algo *a = NULL;
    /* non-zero fields override */
    mscclrt_algo_desc d = {.name = "mine", .max_bytes = 65536, .min_arch = 80, .max_arch = 100,
                           .ranks_per_node = 4, .buffer_mode = MSCCLRT_BUFFER_INPLACE,
                           .tags = "k=v"};
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&a, pp, &d));
    if (a) {
        CHECK_STR("mine", a->desc.name);
        CHECK(a->desc.name != d.name);                    /* copied */
        CHECK_EQ_INT(65536, a->desc.max_bytes);
        CHECK_EQ_INT(80, a->desc.min_arch);
        CHECK_EQ_INT(4, a->desc.ranks_per_node);
        CHECK_EQ_INT(MSCCLRT_BUFFER_INPLACE, a->desc.buffer_mode);   /* narrowed */
        CHECK_STR("k=v", a->desc.tags);
        CHECK_EQ_INT(4, a->desc.world_size);
    }
    mscclrt_algo_free(a);
    /* buffer_mode 0 (any) keeps the plan's own: an out-of-place plan is not widened */
    d = (mscclrt_algo_desc){.buffer_mode = MSCCLRT_BUFFER_ANY};
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&a, pp, &d));
    if (a) CHECK_EQ_INT(MSCCLRT_BUFFER_OUTOFPLACE, a->desc.buffer_mode);
    mscclrt_algo_free(a);
    /* refusals, each naming the plan and the field */
    d = (mscclrt_algo_desc){.buffer_mode = MSCCLRT_BUFFER_OUTOFPLACE};
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_plan(&a, pr, &d));
    CHECK_CONTAINS(mscclrt_last_error(), "plan 'allreduce_rs_ag_read' is in place");
    CHECK(a == NULL);
    d = (mscclrt_algo_desc){.world_size = 8};
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_plan(&a, pp, &d));
    CHECK_CONTAINS(mscclrt_last_error(), "has 4 ranks, desc->world_size says 8");
    d = (mscclrt_algo_desc){.collective = MSCCLRT_COLL_ALLGATHER};
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_plan(&a, pp, &d));
    CHECK_CONTAINS(mscclrt_last_error(), "is a allreduce plan, desc->collective says allgather");
    d = (mscclrt_algo_desc){.ranks_per_node = 3};
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_plan(&a, pp, &d));
    CHECK_CONTAINS(mscclrt_last_error(), "not a multiple of desc->ranks_per_node 3");
    d = (mscclrt_algo_desc){.min_bytes = 100, .max_bytes = 10};
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_plan(&a, pp, &d));
    CHECK_CONTAINS(mscclrt_last_error(), "desc->min_bytes 100 is above desc->max_bytes 10");
    d = (mscclrt_algo_desc){.buffer_mode = (mscclrt_buffer_mode)7};
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_plan(&a, pp, &d));
    CHECK_CONTAINS(mscclrt_last_error(), "desc->buffer_mode 7");
    d = (mscclrt_algo_desc){.min_arch = 100, .max_arch = 90};
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_plan(&a, pp, &d));
    CHECK_CONTAINS(mscclrt_last_error(), "[100, 90]");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_plan(&a, NULL, NULL));
    CHECK_CONTAINS(mscclrt_last_error(), "plan argument is NULL");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_plan(NULL, pp, NULL));
    /* a custom plan needs its collective from desc */
    const char *custom = "param N = 2\nprogram c {\n collective custom\n chunks in = 1, out = 1\n"
                         " ranks N\n}\nfor r in 0..N {\n copy(rank(r).output[0:1], rank(r).input[0:1])\n}\n";
    mscclrt_plan *pc = compile_text("custom.coll", custom, 2);
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_plan(&a, pc, NULL));
    CHECK_CONTAINS(mscclrt_last_error(), "plan 'c' has collective 'custom': say which collective");
    d = (mscclrt_algo_desc){.collective = MSCCLRT_COLL_BROADCAST, .tags = "root=1"};
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&a, pc, &d));
    if (a) {
        CHECK_EQ_INT(MSCCLRT_COLL_BROADCAST, a->desc.collective);
        mscclrt_request r = request(MSCCLRT_COLL_BROADCAST, 1024, 2);
        const char *why = NULL;
        CHECK(!algo_fits(a, &r, &why));                   /* root 0 asked, the plan's is 1 */
        CHECK_STR("its plan's root is rank 1, not 0", why);
        r.root = 1;
        CHECK(algo_fits(a, &r, &why));
    }
    mscclrt_algo_free(a);
    mscclrt_plan_free(pc);
    mscclrt_plan_free(pp);
    mscclrt_plan_free(pr);
}

static void t_native(void) {
    mscclrt_algo *a = NULL;
    mscclrt_algo_desc d = {.name = "my_allreduce", .collective = MSCCLRT_COLL_ALLREDUCE,
                           .min_bytes = 1024, .buffer_mode = MSCCLRT_BUFFER_ANY};
    char src[128];
    strcpy(src, native_src);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_source(&a, src, "k", &d));
    src[0] = 'X';                                         /* the source was copied */
    if (a) {
        CHECK_EQ_INT(MSCCLRT_ALGO_NATIVE, mscclrt_algo_kind_of(a));
        CHECK_STR(native_src, a->source);
        CHECK_STR("k", a->kernel);
        CHECK(a->reduces);
        CHECK_EQ_INT(0, a->default_blocks);
        CHECK_EQ_INT(0, a->default_threads);
        CHECK(a->plan == NULL);
    }
    mscclrt_algo_free(a);
    mscclrt_algo *g = native("my_allgather", MSCCLRT_COLL_ALLGATHER);
    CHECK(g && !g->reduces);
    mscclrt_algo_free(g);
    mscclrt_algo *rd = native("my_reduce", MSCCLRT_COLL_REDUCE);
    CHECK(rd && rd->reduces);
    mscclrt_algo_free(rd);
    /* refusals */
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_source(&a, native_src, "k", NULL));
    CHECK_CONTAINS(mscclrt_last_error(), "desc is NULL (desc->name and desc->collective are required)");
    d.name = NULL;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_source(&a, native_src, "k", &d));
    CHECK_CONTAINS(mscclrt_last_error(), "desc->name is NULL");
    d.name = "";
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_source(&a, native_src, "k", &d));
    CHECK_CONTAINS(mscclrt_last_error(), "desc->name must have 1..256 bytes, not 0");
    d.name = "x";
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_source(&a, native_src, "1k", &d));
    CHECK_CONTAINS(mscclrt_last_error(), "kernel '1k' is not a C identifier");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_source(&a, NULL, "k", &d));
    CHECK_CONTAINS(mscclrt_last_error(), "source argument is NULL");
    d.collective = MSCCLRT_COLL_COUNT;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_source(&a, native_src, "k", &d));
    CHECK_CONTAINS(mscclrt_last_error(), "desc->collective 9 is not a collective");
    d.collective = MSCCLRT_COLL_ALLREDUCE;
    d.world_size = 6;
    d.ranks_per_node = 4;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_source(&a, native_src, "k", &d));
    CHECK_CONTAINS(mscclrt_last_error(), "desc->world_size 6 is not a multiple of desc->ranks_per_node 4");
    d.world_size = d.ranks_per_node = 0;
    /* from a file */
    char path[] = "/tmp/test_algo_native_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK(write(fd, native_src, strlen(native_src)) == (ssize_t)strlen(native_src));
        close(fd);
        CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_file(&a, path, "k", &d));
        if (a) CHECK_STR(native_src, a->source);
        mscclrt_algo_free(a);
        unlink(path);
    }
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_file(&a, path, "k", &d));
    CHECK_CONTAINS(mscclrt_last_error(), path);
    CHECK_CONTAINS(mscclrt_last_error(), "cannot open: No such file or directory");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_from_file(&a, "/tmp", "k", &d));
    CHECK_CONTAINS(mscclrt_last_error(), "/tmp: not a regular file");
    /* handles that are not algorithms */
    mscclrt_algo_desc out;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_get_desc(NULL, &out));
    mscclrt_algo_free(NULL);
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_clean_cached_contexts(NULL));
}

static int refs(const mscclrt_algo *a) {
    return __atomic_load_n(&a->refs, __ATOMIC_RELAXED);
}

static void t_refcount_and_generation(void) {
    mscclrt_algo *a = native("rc", MSCCLRT_COLL_ALLREDUCE);
    if (!a) return;
    CHECK_EQ_INT(1, refs(a));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_register(a));
    CHECK_EQ_INT(2, refs(a));
    mscclrt_algo_free(a);                                 /* the registry keeps it alive */
    CHECK_EQ_INT(1, refs(a));
    CHECK(mscclrt_algo_find("rc") == a);
    mscclrt_algo_desc d;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_get_desc(a, &d));
    CHECK_STR("rc", d.name);
    uint64_t g = a->generation;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_clean_cached_contexts(a));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_clean_cached_contexts(a));
    CHECK_EQ_INT(g + 2, a->generation);
    algo_retain(a);                                       /* to look at it after unregister */
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_unregister("rc"));
    CHECK_EQ_INT(1, refs(a));
    CHECK(mscclrt_algo_find("rc") == NULL);
    CHECK(algo_check(a) == a);
    algo_release(a);                                      /* the last reference: freed */
}

static void t_collection(void) {
    mscclrt_plan *pp = stdlib_plan("allreduce/allpair_packet", 2);
    mscclrt_plan *pg = stdlib_plan("allgather/packet", 2);
    mscclrt_algo *n1 = native("n1", MSCCLRT_COLL_ALLREDUCE), *n2 = native("n2", MSCCLRT_COLL_ALLREDUCE);
    mscclrt_algo *p1 = NULL, *p2 = NULL, *g1 = NULL;
    mscclrt_algo_desc d1 = {.name = "p1"}, d2 = {.name = "p2"}, dg = {.name = "g1"};
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&p1, pp, &d1));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&p2, pp, &d2));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&g1, pg, &dg));
    if (!n1 || !n2 || !p1 || !p2 || !g1) return;
    uint64_t e0 = algo_registry_epoch();
    /* registration order n1, p1, g1, n2, p2: listed plan-based first, then native */
    mscclrt_algo *order[] = {n1, p1, g1, n2, p2};
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_register(order[i]));
    CHECK(algo_registry_epoch() == e0 + 5);
    CHECK(algo_is_registered(p1) && !algo_is_registered(NULL));
    const mscclrt_algo *v[8];
    int n = -1;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_list(MSCCLRT_COLL_COUNT, v, 8, &n));
    CHECK_EQ_INT(5, n);
    if (n == 5) {
        CHECK(v[0] == p1 && v[1] == g1 && v[2] == p2 && v[3] == n1 && v[4] == n2);
    }
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_list(MSCCLRT_COLL_ALLREDUCE, v, 8, &n));
    CHECK_EQ_INT(4, n);
    if (n == 4) CHECK(v[0] == p1 && v[1] == p2 && v[2] == n1 && v[3] == n2);
    v[1] = NULL;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_list(MSCCLRT_COLL_ALLREDUCE, v, 1, &n));
    CHECK_EQ_INT(4, n);                                   /* how many there are in all */
    CHECK(v[0] == p1 && v[1] == NULL);                    /* only max written */
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_list(MSCCLRT_COLL_BROADCAST, NULL, 0, &n));
    CHECK_EQ_INT(0, n);
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_list(MSCCLRT_COLL_ALLREDUCE, NULL, 4, &n));
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_list((mscclrt_coll)42, v, 4, &n));
    /* a duplicate name is refused, naming it; so is registering a handle twice */
    mscclrt_algo *dup = native("p1", MSCCLRT_COLL_ALLGATHER);
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_USAGE, mscclrt_algo_register(dup));
    CHECK_CONTAINS(mscclrt_last_error(), "an algorithm named 'p1' is already registered");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_USAGE, mscclrt_algo_register(n1));
    mscclrt_algo_free(dup);
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_register(NULL));
    CHECK(mscclrt_algo_find("g1") == g1);
    CHECK(mscclrt_algo_find("nope") == NULL && mscclrt_algo_find(NULL) == NULL);
    /* unregister keeps the others' order */
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_unregister("p1"));
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_algo_unregister("p1"));
    CHECK_CONTAINS(mscclrt_last_error(), "no registered algorithm is named 'p1'");
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_list(MSCCLRT_COLL_COUNT, v, 8, &n));
    CHECK_EQ_INT(4, n);
    if (n == 4) CHECK(v[0] == g1 && v[1] == p2 && v[2] == n1 && v[3] == n2);
    for (int i = 0; i < 5; i++) {
        if (order[i] != p1) CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_unregister(order[i]->desc.name));
        mscclrt_algo_free(order[i]);
    }
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_list(MSCCLRT_COLL_COUNT, NULL, 0, &n));
    CHECK_EQ_INT(0, n);
    mscclrt_plan_free(pp);
    mscclrt_plan_free(pg);
}

/* ---- many threads ---------------------------------------------------------------------------- */

#define NTHREADS 8
#define PER_THREAD 64

static int same_name_wins;
static int thread_failures[NTHREADS];    /* the harness counters are not thread-safe: each thread
                                           counts its own failures, main checks them */

static void *reg_thread(void *arg) {
    int t = (int)(intptr_t)arg, bad = 0;
    for (int i = 0; i < PER_THREAD; i++) {
        char name[64];
        snprintf(name, sizeof name, "t%d_%d", t, i);
        mscclrt_algo_desc d = {.name = name, .collective = (mscclrt_coll)(i % MSCCLRT_COLL_COUNT)};
        mscclrt_algo *a = NULL;
        if (mscclrt_algo_from_source(&a, native_src, "k", &d) != MSCCLRT_SUCCESS) {
            bad++;
            continue;
        }
        bad += mscclrt_algo_register(a) != MSCCLRT_SUCCESS;
        mscclrt_algo_free(a);
        const mscclrt_algo *v[4];
        int n;
        bad += mscclrt_algo_list(MSCCLRT_COLL_COUNT, v, 4, &n) != MSCCLRT_SUCCESS;
        bad += mscclrt_algo_find(name) == NULL;
        if (i % 2) bad += mscclrt_algo_unregister(name) != MSCCLRT_SUCCESS;
    }
    /* every thread races for one name: exactly one registration wins */
    mscclrt_algo_desc d = {.name = "contested", .collective = MSCCLRT_COLL_ALLREDUCE};
    mscclrt_algo *a = NULL;
    bad += mscclrt_algo_from_source(&a, native_src, "k", &d) != MSCCLRT_SUCCESS;
    if (a && mscclrt_algo_register(a) == MSCCLRT_SUCCESS) __atomic_add_fetch(&same_name_wins, 1, __ATOMIC_RELAXED);
    mscclrt_algo_free(a);
    thread_failures[t] = bad;
    return NULL;
}

static void t_threads(void) {
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) pthread_create(&th[t], NULL, reg_thread, (void *)(intptr_t)t);
    for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++) CHECK_EQ_INT(0, thread_failures[t]);
    CHECK_EQ_INT(1, same_name_wins);
    int n = 0;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_list(MSCCLRT_COLL_COUNT, NULL, 0, &n));
    CHECK_EQ_INT(NTHREADS * PER_THREAD / 2 + 1, n);
    /* every survivor is there once, with its own name */
    for (int t = 0; t < NTHREADS; t++)
        for (int i = 0; i < PER_THREAD; i += 2) {
            char name[64];
            snprintf(name, sizeof name, "t%d_%d", t, i);
            const mscclrt_algo *a = mscclrt_algo_find(name);
            CHECK(a && !strcmp(a->desc.name, name) && refs(a) == 1);
            CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_unregister(name));
        }
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_unregister("contested"));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_list(MSCCLRT_COLL_COUNT, NULL, 0, &n));
    CHECK_EQ_INT(0, n);
}

/* ---- algo_fits: every reason ----------------------------------------------------------------- */

static void fits_not(const mscclrt_algo *a, const mscclrt_request *r, const char *want) {
    const char *why = NULL;
    CHECK(!algo_fits(a, r, &why));
    CHECK_CONTAINS(why, want);
}

static void t_fits(void) {
    mscclrt_plan *pp = stdlib_plan("allreduce/allpair_packet", 4);
    mscclrt_plan *pr = stdlib_plan("allreduce/rs_ag_read", 4);
    mscclrt_plan *pg = stdlib_plan("allgather/packet", 4);
    mscclrt_plan *ps = stdlib_plan("sendrecv/ring", 4);
    mscclrt_algo *ap = NULL, *ar = NULL, *ag = NULL, *as = NULL;
    mscclrt_algo_desc dp = {.min_arch = 80, .max_arch = 90, .ranks_per_node = 4};
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&ap, pp, &dp));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&ar, pr, NULL));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&ag, pg, NULL));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&as, ps, NULL));
    if (!ap || !ar || !ag || !as) return;
    mscclrt_request r = request(MSCCLRT_COLL_ALLREDUCE, 4096, 4);
    CHECK(algo_fits(ap, &r, NULL));
    r.collective = MSCCLRT_COLL_ALLGATHER;
    fits_not(ap, &r, "it serves allreduce, not allgather");
    r = request(MSCCLRT_COLL_ALLREDUCE, 2 << 20, 4);
    fits_not(ap, &r, "2097152 bytes is above its maximum of 1048576");
    r = request(MSCCLRT_COLL_ALLREDUCE, 4096, 4);
    r.arch = 70;
    fits_not(ap, &r, "sm_70 is below its minimum architecture sm_80");
    r.arch = 100;
    fits_not(ap, &r, "sm_100 is above its maximum architecture sm_90");
    r = request(MSCCLRT_COLL_ALLREDUCE, 4096, 8);
    fits_not(ap, &r, "it is for 4 ranks, not 8");
    r = request(MSCCLRT_COLL_ALLREDUCE, 4096, 4);
    r.ranks_per_node = 2;
    fits_not(ap, &r, "it is for 4 ranks per node, not 2");
    r = request(MSCCLRT_COLL_ALLREDUCE, 4096, 4);
    r.inplace = 1;
    fits_not(ap, &r, "it runs only out of place");
    r.inplace = 0;
    r.symmetric = 1;
    fits_not(ar, &r, "it runs only in place");
    r.inplace = 1;
    r.symmetric = 0;
    fits_not(ar, &r, "which must lie in windows registered on the communicator");
    r.symmetric = 1;
    r.message_bytes = r.in_bytes = r.out_bytes = 1 << 20;
    CHECK(algo_fits(ar, &r, NULL));
    r = request(MSCCLRT_COLL_ALLREDUCE, 4096, 4);
    r.dtype = MSCCLRT_DTYPE_COUNT;
    fits_not(ap, &r, "data type 12 is not a data type");
    /* the plan's own size rules: bytes as mscclrt_plan_call_sizes counts them ... */
    r = request(MSCCLRT_COLL_ALLREDUCE, 4096, 4);
    r.out_bytes = 2048;
    fits_not(ap, &r, "has 4096 input and 4096 output bytes per rank in its plan, not 4096 and 2048");
    r = request(MSCCLRT_COLL_ALLGATHER, 4096, 4);
    CHECK(algo_fits(ag, &r, NULL));                       /* allgather: the output is the message */
    r.in_bytes = 4096;
    fits_not(ag, &r, "has 1024 input and 4096 output bytes per rank in its plan, not 4096 and 4096");
    /* ... and every rank's chunk geometry (allpair_packet at N=4: N chunks of 16 bytes) */
    r = request(MSCCLRT_COLL_ALLREDUCE, 4096 + 16, 4);
    fits_not(ap, &r, "does not split into 4 chunks");
    /* an alignment that splits elements of a reduction: a plan with alignment 4 and float64 */
    const char *al4 = "param N = 2\nprogram al4 {\n collective allreduce\n ranks N\n alignment 4\n}\n"
                      "for r in 0..N {\n copy(rank(r).output[0:N], rank(r).input[0:N])\n}\n";
    mscclrt_plan *p4 = compile_text("al4.coll", al4, 2);
    mscclrt_algo *a4 = NULL;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_plan(&a4, p4, NULL));
    r = request(MSCCLRT_COLL_ALLREDUCE, 64, 2);
    if (a4) CHECK(algo_fits(a4, &r, NULL));
    r.dtype = MSCCLRT_FLOAT64;
    if (a4) fits_not(a4, &r, "its plan's buffer_alignment 4 splits float64 elements of 8 bytes");
    mscclrt_algo_free(a4);
    mscclrt_plan_free(p4);
    /* a plan-based sendrecv moves the group's data, not one send */
    r = request(MSCCLRT_COLL_SENDRECV, 4096, 4);
    r.symmetric = 1;                                      /* it writes peers' output */
    CHECK(algo_fits(as, &r, NULL));
    r.peer = 1;
    fits_not(as, &r, "a send or receive with one peer needs a native algorithm");
    /* the minimum size; a native algorithm has no plan rules, only its description */
    mscclrt_algo_desc dn = {.name = "n", .collective = MSCCLRT_COLL_ALLREDUCE, .min_bytes = 1024,
                            .max_bytes = 1 << 20, .world_size = 4, .buffer_mode = MSCCLRT_BUFFER_ANY};
    mscclrt_algo *an = NULL;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_source(&an, native_src, "k", &dn));
    r = request(MSCCLRT_COLL_ALLREDUCE, 512, 4);
    if (an) fits_not(an, &r, "512 bytes is below its minimum of 1024");
    r = request(MSCCLRT_COLL_ALLREDUCE, 4096 + 4, 4);     /* no chunk rule for native */
    r.inplace = 1;
    if (an) CHECK(algo_fits(an, &r, NULL));
    mscclrt_algo_free(an);
    fits_not(NULL, &r, "not a live algorithm");
    mscclrt_algo_free(ap);
    mscclrt_algo_free(ar);
    mscclrt_algo_free(ag);
    mscclrt_algo_free(as);
    mscclrt_plan_free(pp);
    mscclrt_plan_free(pr);
    mscclrt_plan_free(pg);
    mscclrt_plan_free(ps);
}

/* ---- the selector chain ---------------------------------------------------------------------- */

typedef struct {
    int ret;                     /* what the selector returns */
    const mscclrt_algo *pick;    /* its choice */
    int blocks, threads;
    int calls, last_n;
} Sel;

static int selector(const mscclrt_request *req, const mscclrt_algo *const *cand, int n,
                    mscclrt_choice *choice, void *user) {
    Sel *s = user;
    (void)req;
    (void)cand;
    s->calls++;
    s->last_n = n;
    if (s->ret == 1) *choice = (mscclrt_choice){s->pick, s->blocks, s->threads};
    return s->ret;
}

static int other_selector(const mscclrt_request *req, const mscclrt_algo *const *cand, int n,
                          mscclrt_choice *choice, void *user) {
    (void)req;
    (void)user;
    *choice = (mscclrt_choice){cand[n - 1], 8, 256};
    return 1;
}

static void t_selector_chain(void) {
    mscclrt_algo *x = native("native/allreduce", MSCCLRT_COLL_ALLREDUCE);
    mscclrt_algo *y = native("y", MSCCLRT_COLL_ALLREDUCE);
    mscclrt_algo *g = native("g", MSCCLRT_COLL_ALLGATHER);
    if (!x || !y || !g) return;
    const mscclrt_algo *cand[] = {y, x};
    mscclrt_request r = request(MSCCLRT_COLL_ALLREDUCE, 4096, 4);
    mscclrt_choice c;
    /* no selector: the default one (no registered candidate: native/allreduce) */
    CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_select_from(&r, cand, 2, &c));
    CHECK(c.algo == x && c.blocks == 0 && c.threads == 0);
    /* a user selector's choice is taken */
    Sel s = {.ret = 1, .pick = y, .blocks = 16, .threads = 512};
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_set_selector(selector, &s));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_select_from(&r, cand, 2, &c));
    CHECK(c.algo == y && c.blocks == 16 && c.threads == 512);
    CHECK_EQ_INT(1, s.calls);
    CHECK_EQ_INT(2, s.last_n);
    /* "no opinion": the default selector decides */
    s.ret = 0;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_select_from(&r, cand, 2, &c));
    CHECK(c.algo == x && c.blocks == 0);
    CHECK_EQ_INT(2, s.calls);
    /* a choice that does not fit is an error naming the algorithm and why */
    s.ret = 1;
    s.pick = g;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_USAGE, algo_select_from(&r, cand, 2, &c));
    CHECK_CONTAINS(mscclrt_last_error(), "selector: chose 'g' for allreduce of 4096 bytes");
    CHECK_CONTAINS(mscclrt_last_error(), "which does not fit: it serves allgather, not allreduce");
    s.pick = NULL;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_USAGE, algo_select_from(&r, cand, 2, &c));
    CHECK_CONTAINS(mscclrt_last_error(), "returned 1 (a choice) with no algorithm");
    s.pick = y;
    s.blocks = 2000;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_USAGE, algo_select_from(&r, cand, 2, &c));
    CHECK_CONTAINS(mscclrt_last_error(), "chose 2000 blocks for 'y'");
    s.blocks = 0;
    s.threads = 100;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_USAGE, algo_select_from(&r, cand, 2, &c));
    CHECK_CONTAINS(mscclrt_last_error(), "chose 100 threads per block for 'y' (0, the algorithm's own, or a multiple of 32");
    s.threads = 2048;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_USAGE, algo_select_from(&r, cand, 2, &c));
    s.threads = 1024;
    s.blocks = 1024;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_select_from(&r, cand, 2, &c));
    s.ret = 7;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_USAGE, algo_select_from(&r, cand, 2, &c));
    CHECK_CONTAINS(mscclrt_last_error(), "selector: returned 7");
    /* a negative answer: the selector failed (and reported why itself) */
    s.ret = -1;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_USAGE, algo_select_from(&r, cand, 2, &c));
    CHECK_CONTAINS(mscclrt_last_error(), "selector: failed (returned -1) for allreduce of 4096 bytes");
    /* the public chain over candidates, without a communicator, is the same chain */
    s.ret = 1;
    s.pick = y;
    s.blocks = 4;
    s.threads = 64;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_select_among(&r, cand, 2, &c));
    CHECK(c.algo == y && c.blocks == 4 && c.threads == 64);
    s.ret = -3;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_USAGE, mscclrt_select_among(&r, cand, 2, &c));
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_select_among(NULL, cand, 2, &c));
    CHECK_CONTAINS(mscclrt_last_error(), "mscclrt_select_among: req is NULL");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_select_among(&r, NULL, 2, &c));
    const char *why = NULL;
    CHECK_EQ_INT(1, mscclrt_algo_fits(y, &r, &why));
    CHECK(why == NULL);
    CHECK_EQ_INT(0, mscclrt_algo_fits(g, &r, &why));
    CHECK(why && strstr(why, "it serves allgather, not allreduce"));
    CHECK_EQ_INT(0, mscclrt_algo_fits(NULL, &r, &why));
    CHECK_EQ_INT(0, mscclrt_algo_fits(y, NULL, NULL));
    const mscclrt_algo *bogus[] = {y, (const mscclrt_algo *)&s};
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_select_among(&r, bogus, 2, &c));
    CHECK_CONTAINS(mscclrt_last_error(), "cand[1] is not a live algorithm");
    s.ret = 1;
    s.blocks = 1024;
    s.threads = 1024;
    /* registering again replaces the selector */
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_set_selector(other_selector, NULL));
    int calls = s.calls;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_select_from(&r, cand, 2, &c));
    CHECK(c.algo == x && c.blocks == 8 && c.threads == 256);
    CHECK_EQ_INT(calls, s.calls);
    /* NULL restores the default */
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_set_selector(NULL, NULL));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_select_from(&r, cand, 2, &c));
    CHECK(c.algo == x && c.blocks == 0 && c.threads == 0);
    /* nothing to choose from */
    CHECK_EQ_INT(MSCCLRT_ERR_UNAVAILABLE, algo_select_from(&r, cand, 0, &c));
    CHECK_CONTAINS(mscclrt_last_error(), "no algorithm serves allreduce of 4096 bytes");
    r.collective = (mscclrt_coll)77;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, algo_select_from(&r, cand, 2, &c));
    /* the communicator entry points refuse what is not a communicator */
    r = request(MSCCLRT_COLL_ALLREDUCE, 4096, 4);
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_select(NULL, &r, &c));
    CHECK_CONTAINS(mscclrt_last_error(), "mscclrt_select: comm is NULL");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, algo_select(NULL, &r, &c));
    mscclrt_algo_free(x);
    mscclrt_algo_free(y);
    mscclrt_algo_free(g);
}

int main(void) {
    TEST("algo registry: reuse_resources plans fit only while their fixed scratch holds the chunks", t_reuse_resources_fit());
    TEST("algo/coll_names", t_coll_names());
    TEST("algo/from_plan_stdlib", t_from_plan_stdlib());
    TEST("algo/from_plan_desc", t_from_plan_desc());
    TEST("algo/native", t_native());
    TEST("algo/refcount_generation", t_refcount_and_generation());
    TEST("algo/collection", t_collection());
    TEST("algo/collection_threads", t_threads());
    TEST("algo/fits", t_fits());
    TEST("algo/selector_chain", t_selector_chain());
    return harness_report();
}

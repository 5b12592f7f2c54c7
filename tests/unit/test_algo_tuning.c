/*
 * test_algo_tuning.c - the tuning table (runtime/algo/algo_tuning.c): a good table and the
 * precedence of its entries (first match among the candidates; every filter), every kind of bad
 * table with the message naming the file, the entry and the field, and MSCCLRT_TUNING_FILE read
 * by the process: a missing or bad file is one warning naming it and the defaults decide (issue
 * 22: a failed tuner's missing table made every collective of the drop-in fail), a good one
 * decides the default selector's choice (a fresh process, this program re-run with --select);
 * large objects are checked for duplicate keys in well under a second. Every bad table is also
 * refused, with the same message, by the public validator mscclrt_tuning_validate.
 */
#include "../harness.h"

#include "algo/algo.h"
#include "core/err.h"
#include "mscclrt.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static mscclrt_algo *mk(const char *name, mscclrt_coll coll) {
    mscclrt_algo_desc d = {.name = name, .collective = coll};
    mscclrt_algo *a = NULL;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_algo_from_source(&a, "x", "k", &d));
    return a;
}

static mscclrt_request request(mscclrt_coll coll, uint64_t bytes) {
    return (mscclrt_request){.collective = coll, .message_bytes = bytes, .in_bytes = bytes,
                             .out_bytes = bytes, .dtype = MSCCLRT_BFLOAT16, .op = MSCCLRT_SUM,
                             .world_size = 8, .ranks_per_node = 8, .root = -1, .peer = -1,
                             .arch = 90};
}

static AlgoTuning *parse(const char *text) {
    AlgoTuning *t = NULL;
    mscclrt_result r = algo_tuning_parse(text, strlen(text), "tune.json", &t);
    if (r != MSCCLRT_SUCCESS) fprintf(stderr, "%s\n", mscclrt_last_error());
    CHECK_EQ_INT(MSCCLRT_SUCCESS, r);
    return t;
}

static const char *good =
    "{\"version\": 1, \"meta\": {\"tuner\": \"mscclrt-tune\", \"gpus\": [\"H200\"]},\n"
    " \"entries\": [\n"
    "  {\"collective\": \"allreduce\", \"world_size\": 8, \"ranks_per_node\": 8, \"arch\": 90,\n"
    "   \"dtype\": \"bfloat16\", \"min_bytes\": 0, \"max_bytes\": 65536,\n"
    "   \"algorithm\": \"stdlib/allreduce/allpair_packet\", \"blocks\": 4, \"threads\": 512},\n"
    "  {\"collective\": \"allreduce\", \"dtype\": \"any\", \"op\": \"max\", \"max_bytes\": 65536,\n"
    "   \"algorithm\": \"mine\", \"blocks\": 2},\n"
    "  {\"collective\": \"allreduce\", \"max_bytes\": 1048576, \"algorithm\": \"native/allreduce\",\n"
    "   \"threads\": 1024},\n"
    "  {\"collective\": \"allreduce\", \"min_bytes\": 1048577, \"algorithm\": \"absent\"},\n"
    "  {\"collective\": \"allgather\", \"world_size\": 4, \"algorithm\": \"stdlib/allgather/packet\"}\n"
    " ]}\n";

static void t_good(void) {
    AlgoTuning *t = parse(good);
    if (!t) return;
    CHECK_EQ_INT(5, algo_tuning_count(t));
    mscclrt_algo *pk = mk("stdlib/allreduce/allpair_packet", MSCCLRT_COLL_ALLREDUCE);
    mscclrt_algo *mine = mk("mine", MSCCLRT_COLL_ALLREDUCE);
    mscclrt_algo *nat = mk("native/allreduce", MSCCLRT_COLL_ALLREDUCE);
    mscclrt_algo *ag = mk("stdlib/allgather/packet", MSCCLRT_COLL_ALLGATHER);
    const mscclrt_algo *cand[] = {nat, mine, pk};
    mscclrt_choice c;
    /* the first entry that matches and names a candidate wins, with its blocks and threads */
    mscclrt_request r = request(MSCCLRT_COLL_ALLREDUCE, 4096);
    CHECK(algo_tuning_choose(t, &r, cand, 3, &c));
    CHECK(c.algo == pk && c.blocks == 4 && c.threads == 512);
    /* each filter of entry 0 in turn: the next entries decide */
    r.dtype = MSCCLRT_FLOAT16;
    CHECK(algo_tuning_choose(t, &r, cand, 3, &c));
    CHECK(c.algo == nat && c.blocks == 0 && c.threads == 1024);
    r.op = MSCCLRT_MAX;
    CHECK(algo_tuning_choose(t, &r, cand, 3, &c));
    CHECK(c.algo == mine && c.blocks == 2 && c.threads == 0);
    r = request(MSCCLRT_COLL_ALLREDUCE, 4096);
    r.arch = 100;
    CHECK(algo_tuning_choose(t, &r, cand, 3, &c) && c.algo == nat);
    r.arch = 90;
    r.world_size = 16;
    CHECK(algo_tuning_choose(t, &r, cand, 3, &c) && c.algo == nat);
    r.world_size = 8;
    r.ranks_per_node = 4;
    CHECK(algo_tuning_choose(t, &r, cand, 3, &c) && c.algo == nat);
    /* the size range, both ends inclusive */
    r = request(MSCCLRT_COLL_ALLREDUCE, 65536);
    CHECK(algo_tuning_choose(t, &r, cand, 3, &c) && c.algo == pk);
    r = request(MSCCLRT_COLL_ALLREDUCE, 65537);
    CHECK(algo_tuning_choose(t, &r, cand, 3, &c) && c.algo == nat);
    r = request(MSCCLRT_COLL_ALLREDUCE, 1048576);
    CHECK(algo_tuning_choose(t, &r, cand, 3, &c) && c.algo == nat);
    /* an entry whose algorithm is not a candidate (absent, or not fitting) is passed over */
    r = request(MSCCLRT_COLL_ALLREDUCE, 4096);
    const mscclrt_algo *no_pk[] = {nat, mine};
    CHECK(algo_tuning_choose(t, &r, no_pk, 2, &c) && c.algo == nat);
    r = request(MSCCLRT_COLL_ALLREDUCE, 2 << 20);
    CHECK(!algo_tuning_choose(t, &r, cand, 3, &c));
    /* other collectives */
    const mscclrt_algo *agc[] = {ag};
    r = request(MSCCLRT_COLL_ALLGATHER, 4096);
    CHECK(!algo_tuning_choose(t, &r, agc, 1, &c));      /* world 8, the entry is for 4 */
    r.world_size = r.ranks_per_node = 4;
    CHECK(algo_tuning_choose(t, &r, agc, 1, &c) && c.algo == ag);
    r = request(MSCCLRT_COLL_BROADCAST, 4096);
    CHECK(!algo_tuning_choose(t, &r, cand, 3, &c));
    /* the table comes before everything else in the default selector */
    r = request(MSCCLRT_COLL_ALLREDUCE, 4096);
    r.dtype = MSCCLRT_FLOAT16;
    CHECK(algo_default_select_with(t, &r, cand, 3, &c) && c.algo == nat && c.threads == 1024);
    CHECK(algo_default_select_with(NULL, &r, cand, 3, &c) && c.algo == pk && c.threads == 0);
    /* an empty table is valid */
    AlgoTuning *e = parse("{\"version\": 1, \"entries\": []}");
    CHECK_EQ_INT(0, algo_tuning_count(e));
    CHECK(!algo_tuning_choose(e, &r, cand, 3, &c));
    algo_tuning_free(e);
    algo_tuning_free(t);
    algo_tuning_free(NULL);
    mscclrt_algo_free(pk);
    mscclrt_algo_free(mine);
    mscclrt_algo_free(nat);
    mscclrt_algo_free(ag);
}

/* Each bad table fails with MSCCLRT_ERR_INVALID_ARG and this message, both from the reader
 * and from the public validator (python/mscclrt's only check), which reports no entries. */
static void bad(const char *text, const char *want) {
    AlgoTuning *t = (AlgoTuning *)1;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, algo_tuning_parse(text, strlen(text), "tune.json", &t));
    CHECK(t == NULL);
    CHECK_CONTAINS(mscclrt_last_error(), want);
    int n = -1;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG,
                 mscclrt_tuning_validate("tune.json", text, strlen(text), &n));
    CHECK_EQ_INT(0, n);
    CHECK_CONTAINS(mscclrt_last_error(), want);
}

#define E(x) "{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"algorithm\": \"a\"}, " x "]}"

static void t_bad(void) {
    /* not JSON, and the wrong shapes at the top */
    bad("{\"version\": 1,\n \"entries\": [}", "tune.json:2:14: not JSON (syntax error)");
    bad("{\"version\": 1, \"entries\": [", "tune.json:1:28: not JSON (syntax error at the end of the text)");
    bad("", "tune.json:1:1: not JSON");
    bad("[1, 2]", "tune.json: expected a JSON object at the top level, got an array");
    bad("{\"entries\": []}", "tune.json: version: missing");
    bad("{\"version\": 2, \"entries\": []}", "tune.json: version: 2 is not supported (this library reads version 1)");
    bad("{\"version\": \"1\", \"entries\": []}", "tune.json: version: expected a number, got a string");
    bad("{\"version\": 1}", "tune.json: entries: missing");
    bad("{\"version\": 1, \"entries\": {}}", "tune.json: entries: expected an array, got an object");
    bad("{\"version\": 1, \"entries\": [], \"extra\": 1}", "tune.json: unknown field 'extra' (expected version, entries or meta)");
    bad("{\"version\": 1, \"version\": 1, \"entries\": []}", "tune.json: version: appears twice");
    /* entries: the index and the field are named */
    bad(E("3"), "tune.json: entries[1]: expected an object, got a number");
    bad(E("{\"algorithm\": \"a\"}"), "tune.json: entries[1].collective: missing");
    bad(E("{\"collective\": \"allreduce\"}"), "tune.json: entries[1].algorithm: missing");
    bad(E("{\"collective\": \"allsum\", \"algorithm\": \"a\"}"), "entries[1].collective: unknown collective 'allsum'");
    bad(E("{\"collective\": 1, \"algorithm\": \"a\"}"), "entries[1].collective: expected a string, got a number");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": true}"), "entries[1].algorithm: expected a string, got a boolean");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"\"}"), "entries[1].algorithm: empty name");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"stdlib/allreduce/nope\"}"),
        "entries[1].algorithm: unknown algorithm 'stdlib/allreduce/nope' (no such stdlib program)");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"stdlib/allgather/packet\"}"),
        "entries[1].algorithm: 'stdlib/allgather/packet' does not serve allreduce");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"native/allgather\"}"),
        "entries[1].algorithm: 'native/allgather' does not serve allreduce");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"dtype\": \"bf17\"}"),
        "entries[1].dtype: unknown data type 'bf17'");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"dtype\": 9}"),
        "entries[1].dtype: expected a string, got a number");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"op\": \"xor\"}"),
        "entries[1].op: unknown operator 'xor'");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"min_bytes\": -1}"),
        "entries[1].min_bytes: -1 is negative");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"max_bytes\": 1.5}"),
        "entries[1].max_bytes: 1.5 is not an integer");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"max_bytes\": 1e300}"),
        "entries[1].max_bytes: 1.0000000000000001e+300 is larger than 2^53");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"max_bytes\": \"64K\"}"),
        "entries[1].max_bytes: expected a number, got a string");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"min_bytes\": 10, \"max_bytes\": 5}"),
        "entries[1].min_bytes: 10 is above max_bytes 5");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"world_size\": -8}"),
        "entries[1].world_size: -8 is negative");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"world_size\": 8, \"ranks_per_node\": 3}"),
        "entries[1].ranks_per_node: 3 does not divide world_size 8");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"arch\": null}"),
        "entries[1].arch: expected a number, got null");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"blocks\": 2000}"),
        "entries[1].blocks: 2000 is larger than 1024");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"threads\": 100}"),
        "entries[1].threads: 100 is not a multiple of 32");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"max_byte\": 5}"),
        "entries[1]: unknown field 'max_byte'");
    bad(E("{\"collective\": \"allreduce\", \"algorithm\": \"a\", \"algorithm\": \"b\"}"),
        "entries[1].algorithm: appears twice");
    const char nul[] = "{\"version\": 1,\0 \"entries\": []}";
    AlgoTuning *t = NULL;
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, algo_tuning_parse(nul, sizeof nul - 1, "tune.json", &t));
    CHECK_CONTAINS(mscclrt_last_error(), "tune.json: contains a NUL byte");
    /* files */
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, algo_tuning_load("/nonexistent/tune.json", &t));
    CHECK_CONTAINS(mscclrt_last_error(),
                   "tuning table /nonexistent/tune.json: cannot read: No such file");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, algo_tuning_load("/tmp", &t));
    CHECK_CONTAINS(mscclrt_last_error(),
                   "tuning table /tmp: cannot read: a directory, not a regular file");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, algo_tuning_load("/dev/zero", &t));
    CHECK_CONTAINS(mscclrt_last_error(), "tuning table /dev/zero: cannot read: a device");
}

/* ---- MSCCLRT_TUNING_FILE ---------------------------------------------------------------------- */

static char self[4096];

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* mscclrt_tuning_validate: text or file, the count of a good table, the name it gives a text
 * without one, a call with nothing to check; and it installs nothing (no epoch bump). */
static void t_validate(void) {
    uint64_t epoch = algo_registry_epoch();
    int n = -1;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_tuning_validate(NULL, good, strlen(good), &n));
    CHECK_EQ_INT(5, n);
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_tuning_validate(NULL, good, strlen(good), NULL));
    char file[] = "/tmp/test_algo_validate_XXXXXX";
    int fd = mkstemp(file);
    if (fd >= 0) close(fd);
    write_file(file, good);
    n = -1;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_tuning_validate(file, NULL, 0, &n));
    CHECK_EQ_INT(5, n);
    write_file(file, "{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", "
                     "\"algorithm\": \"a\", \"blocks\": 4096}]}");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_tuning_validate(file, NULL, 0, &n));
    char want[256];
    snprintf(want, sizeof want, "%s: entries[0].blocks: 4096 is larger than 1024", file);
    CHECK_CONTAINS(mscclrt_last_error(), want);
    unlink(file);
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_tuning_validate(file, NULL, 0, &n));
    CHECK_CONTAINS(mscclrt_last_error(), "cannot read: No such file");
    const char *top = "{\"version\": 1}";
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_tuning_validate(NULL, top, strlen(top), &n));
    CHECK_CONTAINS(mscclrt_last_error(), "<tuning table>: entries: missing");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_tuning_validate(NULL, NULL, 0, &n));
    CHECK_CONTAINS(mscclrt_last_error(), "mscclrt_tuning_validate: neither a text nor a path");
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_tuning_validate("", NULL, 0, &n));
    CHECK(algo_registry_epoch() == epoch);
}

/* --select: the default choice among three candidates under this process's tuning file. */
static int child_select(void) {
    mscclrt_algo *pk = mk("stdlib/allreduce/allpair_packet", MSCCLRT_COLL_ALLREDUCE);
    mscclrt_algo *nat = mk("native/allreduce", MSCCLRT_COLL_ALLREDUCE);
    const mscclrt_algo *cand[] = {nat, pk};
    mscclrt_request r = request(MSCCLRT_COLL_ALLREDUCE, 4096);
    mscclrt_choice c;
    if (algo_select_from(&r, cand, 2, &c) != MSCCLRT_SUCCESS) printf("error: %s\n", mscclrt_last_error());
    else printf("%s %d %d\n", c.algo->desc.name, c.blocks, c.threads);
    mscclrt_algo_free(pk);
    mscclrt_algo_free(nat);
    return 0;
}

/* Runs --select under MSCCLRT_TUNING_FILE=file (and MSCCLRT_DEBUG=WARN): its first line in
 * out, and how many lines of its standard error name the file (warn, may be NULL). */
static void child(const char *file, char *out, size_t n, int *warn) {
    char cmd[9000], errf[] = "/tmp/test_algo_tune_err_XXXXXX";
    int fd = mkstemp(errf);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    snprintf(cmd, sizeof cmd, "MSCCLRT_DEBUG=WARN MSCCLRT_TUNING_FILE='%s' '%s' --select 2>'%s'",
             file, self, errf);
    FILE *p = popen(cmd, "r");
    out[0] = 0;
    if (p && !fgets(out, (int)n, p)) out[0] = 0;
    if (p) CHECK_EQ_INT(0, pclose(p));
    if (warn) {
        *warn = 0;
        char line[4096];
        FILE *e = fopen(errf, "r");
        while (e && *file && fgets(line, sizeof line, e))
            if (strstr(line, "WARN") && strstr(line, "MSCCLRT_TUNING_FILE=") && strstr(line, file))
                ++*warn;
        if (e) fclose(e);
    }
    unlink(errf);
}

static void t_env(const char *badfile) {
    /* this process: MSCCLRT_TUNING_FILE names a bad file (set before anything read the
     * environment); selection goes on with the defaults, and leaves no error text */
    mscclrt_algo *nat = mk("native/allreduce", MSCCLRT_COLL_ALLREDUCE);
    const mscclrt_algo *cand[] = {nat};
    mscclrt_request r = request(MSCCLRT_COLL_ALLREDUCE, 4096);
    mscclrt_choice c;
    rt_clear_error();
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_select_from(&r, cand, 1, &c));
        CHECK(c.algo == nat && c.blocks == 0 && c.threads == 0);
        CHECK_STR("", mscclrt_last_error());
    }
    const AlgoTuning *t = (const AlgoTuning *)1;
    CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_tuning_process(&t));
    CHECK(t == NULL);
    mscclrt_algo_free(nat);
    /* fresh processes: a good file decides; none, a missing one or a bad one leaves the
     * heuristics, a missing or bad one with one warning naming it (however many selections) */
    char good_file[] = "/tmp/test_algo_tune_XXXXXX", out[2048];
    int fd = mkstemp(good_file);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    write_file(good_file, "{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", "
                          "\"algorithm\": \"native/allreduce\", \"blocks\": 24, \"threads\": 640}]}");
    int warn = -1;
    child(good_file, out, sizeof out, &warn);
    CHECK_STR("native/allreduce 24 640\n", out);
    CHECK_EQ_INT(0, warn);
    child("", out, sizeof out, NULL);
    CHECK_STR("stdlib/allreduce/allpair_packet 0 0\n", out);
    child("/nonexistent/tune.json", out, sizeof out, &warn);
    CHECK_STR("stdlib/allreduce/allpair_packet 0 0\n", out);
    CHECK_EQ_INT(1, warn);
    child(badfile, out, sizeof out, &warn);
    CHECK_STR("stdlib/allreduce/allpair_packet 0 0\n", out);
    CHECK_EQ_INT(1, warn);
    unlink(good_file);
}

/* A table whose top-level object holds 80 000 keys: the duplicate check used to compare every
 * pair (11 s); now it sorts. A duplicate among them is still found, and named; a bound of 5 s
 * keeps a slow CI machine from failing. */
static void t_many_keys(void) {
    const int nkeys = 80000;
    size_t cap = (size_t)nkeys * 24 + 256, w = 0;
    char *text = malloc(cap);
    CHECK(text != NULL);
    if (!text) return;
    for (int dup = 0; dup < 2; dup++) {
        w = (size_t)snprintf(text, cap, "{\"version\": 1, \"entries\": []");
        for (int i = 0; i < nkeys; i++)
            w += (size_t)snprintf(text + w, cap - w, ", \"k%d\": %d",
                                  dup && i == nkeys - 1 ? 4321 : i, i);
        w += (size_t)snprintf(text + w, cap - w, "}");
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        AlgoTuning *t = NULL;
        mscclrt_result res = algo_tuning_parse(text, w, "big.json", &t);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, res);
        if (dup) CHECK_CONTAINS(mscclrt_last_error(), "big.json: k4321: appears twice");
        else CHECK_CONTAINS(mscclrt_last_error(), "unknown field 'k0'");
        if (s >= 5.0) fprintf(stderr, "80000 keys took %.2f s\n", s);
        CHECK(s < 5.0);
        algo_tuning_free(t);
    }
    /* and inside an entry, where duplicates were always caught */
    AlgoTuning *t = NULL;
    const char *e = "{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", "
                    "\"algorithm\": \"x\", \"collective\": \"allgather\"}]}";
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, algo_tuning_parse(e, strlen(e), "d.json", &t));
    CHECK_CONTAINS(mscclrt_last_error(), "d.json: entries[0].collective: appears twice");
    free(text);
}

/* mscclrt_tuning_load in this process (after t_env: the environment's file was ignored): a good
 * table replaces it and decides; a bad one is refused and the table in use stays; NULL drops
 * the table (the heuristics decide again). */
static void t_reload(void) {
    mscclrt_algo *pk = mk("stdlib/allreduce/allpair_packet", MSCCLRT_COLL_ALLREDUCE);
    mscclrt_algo *nat = mk("native/allreduce", MSCCLRT_COLL_ALLREDUCE);
    const mscclrt_algo *cand[] = {nat, pk};
    mscclrt_request r = request(MSCCLRT_COLL_ALLREDUCE, 4096);
    mscclrt_choice c;
    char file[] = "/tmp/test_algo_reload_XXXXXX", bad[] = "/tmp/test_algo_reload_bad_XXXXXX";
    int fd = mkstemp(file);
    if (fd >= 0) close(fd);
    fd = mkstemp(bad);
    if (fd >= 0) close(fd);
    write_file(file, "{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", "
                     "\"algorithm\": \"native/allreduce\", \"blocks\": 12, \"threads\": 256}]}");
    write_file(bad, "{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\"}]}");
    uint64_t epoch = algo_registry_epoch();
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_tuning_load(file));
    CHECK(algo_registry_epoch() != epoch);   /* cached selections are stale */
    CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_select_from(&r, cand, 2, &c));
    CHECK(c.algo == nat && c.blocks == 12 && c.threads == 256);
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_tuning_load(bad));
    CHECK_CONTAINS(mscclrt_last_error(), "entries[0]");
    CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_select_from(&r, cand, 2, &c));
    CHECK(c.algo == nat && c.blocks == 12);   /* the good table stays */
    CHECK_EQ_INT(MSCCLRT_ERR_INVALID_ARG, mscclrt_tuning_load("/nonexistent/t.json"));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, mscclrt_tuning_load(NULL));
    CHECK_EQ_INT(MSCCLRT_SUCCESS, algo_select_from(&r, cand, 2, &c));
    CHECK(c.algo == pk && c.blocks == 0);     /* no table: the size heuristics */
    unlink(file);
    unlink(bad);
    mscclrt_algo_free(pk);
    mscclrt_algo_free(nat);
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--select")) return child_select();
    ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
    if (l > 0) self[l] = 0;
    char badfile[] = "/tmp/test_algo_badtune_XXXXXX";
    int fd = mkstemp(badfile);
    if (fd >= 0) close(fd);
    write_file(badfile, "{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", "
                        "\"algorithm\": \"a\", \"threads\": 48}]}");
    setenv("MSCCLRT_TUNING_FILE", badfile, 1);
    TEST("algo_tuning/good", t_good());
    TEST("algo_tuning/bad", t_bad());
    TEST("algo_tuning/validate", t_validate());
    TEST("algo_tuning/env", t_env(badfile));
    TEST("algo_tuning/reload", t_reload());
    TEST("algo_tuning/many_keys", t_many_keys());
    unlink(badfile);
    return harness_report();
}

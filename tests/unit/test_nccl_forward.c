/*
 * test_nccl_forward.c - loading the real NCCL (runtime/nccl/nccl_forward.c) with the fake NCCL
 * libraries of tests/tools/fake_nccl.c, which sit beside this program in $(BUILD)/tests: a
 * missing path, a directory, a library that is not NCCL, a copy of the drop-in, an old NCCL with
 * missing symbols, the full table, calls that reach the fake (its log), RTLD_DEEPBIND at work,
 * MSCCLRT_NCCL_LIB_PATH through nccl_real() from several threads, and MSCCLRT_FORCE_NCCL parsing.
 */
#define MSCCLRT_NCCL_DEVICE_TYPES   /* ncclTeam_t by value */
#include "../harness.h"
#include "nccl/nccl_forward.h"

#include <dlfcn.h>
#include <libgen.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[PATH_MAX - 64], fake[PATH_MAX], fake_old[PATH_MAX], fake_marked[PATH_MAX];
static char logpath[PATH_MAX];
static char why[1024];

/* The whole log the fake libraries wrote since the last call, then truncated. */
static char *read_log(void) {
    static char buf[8192];
    FILE *f = fopen(logpath, "r");
    size_t n = 0;
    buf[0] = 0;
    if (f) {
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
    }
    buf[n] = 0;
    f = fopen(logpath, "w");
    if (f) fclose(f);
    return buf;
}

static void *call_real(void *arg) {
    (void)arg;
    return (void *)nccl_real();
}

/* Rows of nccl_funcs.def whose pointer is NULL, each named on stderr. */
static int null_rows(const NcclReal *t) {
    int n = 0;
#define NCCL_FN(ret, name, params, args) \
    if (!t->name) { n++; fprintf(stderr, "no %s\n", #name); }
#include "nccl/nccl_funcs.def"
    return n;
}

/* MSCCLRT_NCCL_LIB_PATH unset: in a child, before this process reads any variable */
static int child_without_path(void) {
    unsetenv("MSCCLRT_NCCL_LIB_PATH");
    if (nccl_real() != NULL) return 1;
    if (!strstr(nccl_real_why(), "MSCCLRT_NCCL_LIB_PATH is not set")) return 2;
    nccl_forward_explain(why, sizeof why, "ncclTeamWorld");
    if (!strstr(why, "ncclTeamWorld needs the real NCCL, and none is loaded")) return 3;
    return 0;
}

/* MSCCLRT_FORCE_NCCL through nccl_force_mask */
static int child_force_good(void) {
    unsigned m = 0;
    const char *w = NULL;
    setenv("MSCCLRT_FORCE_NCCL", "allreduce, sendrecv", 1);
    if (nccl_force_mask(&m, &w) != ncclSuccess) return 1;
    if (m != (NCCL_COLL(ALLREDUCE) | NCCL_COLL(SENDRECV)) || strcmp(w, "") != 0) return 2;
    return 0;
}

static int child_force_bad(void) {
    unsigned m = 99;
    const char *w = NULL;
    setenv("MSCCLRT_FORCE_NCCL", "allgather,bogus", 1);
    setenv("MSCCLRT_DEBUG", "NONE", 1);     /* the warning it logs is not this test's output */
    for (int i = 0; i < 2; i++) {           /* the same answer every time */
        if (nccl_force_mask(&m, &w) != ncclInvalidArgument) return 1;
        if (m != 0 || !strstr(w, "unknown collective 'bogus'")) return 2;
    }
    return 0;
}

static int in_child(int (*fn)(void)) {
    int st = -1;
    pid_t pid = fork();
    if (pid == 0) _exit(fn());
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return 101;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

int main(int argc, char **argv) {
    NcclReal r;
    char self[PATH_MAX];

    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(dir, sizeof dir, "%s", dirname(self));
    snprintf(fake, sizeof fake, "%s/libfake_nccl.so", dir);
    snprintf(fake_old, sizeof fake_old, "%s/libfake_nccl_old.so", dir);
    snprintf(fake_marked, sizeof fake_marked, "%s/libfake_nccl_marked.so", dir);
    snprintf(logpath, sizeof logpath, "%s/test_nccl_forward.%d.log", dir, (int)getpid());
    setenv("FAKE_NCCL_LOG", logpath, 1);
    read_log();
    (void)argc;

    /* variables are read once per process: these run in children forked before any is read */
    TEST("nccl_forward/env_unset", { CHECK_EQ_INT(0, in_child(child_without_path)); });
    TEST("nccl_forward/force_env", {
        CHECK_EQ_INT(0, in_child(child_force_good));
        CHECK_EQ_INT(0, in_child(child_force_bad));
    });

    TEST("nccl_forward/missing_path", {
        CHECK_EQ_INT(ncclInvalidUsage, nccl_forward_open(&r, "/nonexistent/libnccl.so.2", why,
                                                         sizeof why));
        CHECK_CONTAINS(why, "cannot load the real NCCL from '/nonexistent/libnccl.so.2'");
        CHECK_CONTAINS(why, "No such file");
        CHECK(r.handle == NULL && r.ncclAllReduce == NULL);
        CHECK_EQ_INT(ncclInvalidUsage, nccl_forward_open(&r, "", why, sizeof why));
        CHECK_CONTAINS(why, "no path");
    });

    TEST("nccl_forward/directory", {
        CHECK_EQ_INT(ncclInvalidUsage, nccl_forward_open(&r, dir, why, sizeof why));
        CHECK_CONTAINS(why, "it is a directory");
        CHECK_CONTAINS(why, "libnccl.so.2");
    });

    TEST("nccl_forward/not_nccl", {     /* the C library: loads, but has no ncclGetVersion */
        Dl_info info;
        CHECK(dladdr((void *)&dlopen, &info) && info.dli_fname);
        CHECK_EQ_INT(ncclInvalidUsage, nccl_forward_open(&r, info.dli_fname, why, sizeof why));
        CHECK_CONTAINS(why, "no ncclGetVersion, so it is not an NCCL library");
        CHECK(r.handle == NULL);
    });

    TEST("nccl_forward/not_a_library", {
        CHECK_EQ_INT(ncclInvalidUsage, nccl_forward_open(&r, argv[0], why, sizeof why));
        CHECK_CONTAINS(why, "cannot load the real NCCL from");
    });

    /* Loaded into the global scope first: its nccl* functions then come before any
     * RTLD_LOCAL library's in symbol lookup, like the drop-in's when it is preloaded. */
    void *marked = dlopen(fake_marked, RTLD_NOW | RTLD_GLOBAL);
    TEST("nccl_forward/copy_of_shim", {
        CHECK(marked != NULL);
        CHECK_EQ_INT(ncclInvalidUsage, nccl_forward_open(&r, fake_marked, why, sizeof why));
        CHECK_CONTAINS(why, "it is a copy of libmscclrt_nccl");
    });

    TEST("nccl_forward/table", {
        CHECK_EQ_INT(ncclSuccess, nccl_forward_open(&r, fake, why, sizeof why));
        CHECK_EQ_INT(22809, r.version);
        CHECK_EQ_INT(0, r.missing);
        CHECK(r.handle != NULL);
        CHECK(strstr(r.path, "/libfake_nccl.so") != NULL);
        CHECK_EQ_INT(0, null_rows(&r));
    });

    TEST("nccl_forward/calls_reach_fake", {
        ncclUniqueId id;
        ncclComm_t comm = NULL;
        int n = 0;
        read_log();
        CHECK_EQ_INT(ncclSuccess, r.ncclGetUniqueId(&id));
        CHECK_EQ_INT(ncclSuccess, r.ncclCommInitRank(&comm, 4, id, 2));
        CHECK_EQ_INT(ncclSuccess, r.ncclCommCount(comm, &n));
        CHECK_EQ_INT(4, n);
        CHECK_EQ_INT(ncclSuccess, r.ncclAllReduce((void *)0x1000, (void *)0x2000, 77, ncclFloat32,
                                                  ncclSum, comm, NULL));
        ncclTeam_t t = r.ncclTeamWorld(comm);
        CHECK_EQ_INT(4, t.nRanks);
        CHECK_EQ_INT(2, t.rank);
        CHECK_EQ_INT(ncclSuccess, r.ncclCommDestroy(comm));
        char *log = read_log();
        CHECK_CONTAINS(log, "ncclGetUniqueId\n");
        CHECK_CONTAINS(log, "ncclCommInitRank nranks=4 rank=2 id=F");
        CHECK_CONTAINS(log, "ncclAllReduce sendbuff=0x1000 recvbuff=0x2000 count=77 datatype=7 "
                            "op=0");
        CHECK_CONTAINS(log, "ncclTeamWorld comm=");
        CHECK_CONTAINS(log, "ncclCommDestroy comm=");
    });

    TEST("nccl_forward/deepbind", {
        /* the fake's ncclCommInitRank calls ncclGetVersion through its PLT: with RTLD_DEEPBIND it
         * gets its own (22809), without it the marked library's (29999) in the global scope */
        ncclUniqueId id;
        ncclComm_t comm = NULL;
        memset(&id, 'x', sizeof id);
        read_log();
        CHECK_EQ_INT(ncclSuccess, r.ncclCommInitRank(&comm, 2, id, 0));
        r.ncclCommDestroy(comm);
        char *log = read_log();
        if (r.deepbind) CHECK_CONTAINS(log, "via_version=22809");
        else CHECK_CONTAINS(log, "via_version=29999");   /* sanitizer build: no DEEPBIND */
    });
    nccl_forward_close(&r);
    CHECK(r.handle == NULL && r.ncclGetVersion == NULL);

    TEST("nccl_forward/old_nccl", {     /* 2.27: no revoke, no device API */
        CHECK_EQ_INT(ncclSuccess, nccl_forward_open(&r, fake_old, why, sizeof why));
        CHECK_EQ_INT(22703, r.version);
        CHECK_EQ_INT(13, r.missing);
        CHECK(r.ncclAllReduce != NULL && r.ncclCommShrink != NULL);
        CHECK(r.ncclCommRevoke == NULL && r.ncclDevCommCreate == NULL && r.ncclTeamWorld == NULL);
        CHECK(r.ncclResetDebugInitInternal == NULL);
        nccl_forward_close(&r);
    });

    TEST("nccl_forward/nccl_real", {
        pthread_t th[4];
        void *got[4];
        setenv("MSCCLRT_NCCL_LIB_PATH", fake_old, 1);
        for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, call_real, NULL);
        for (int i = 0; i < 4; i++) pthread_join(th[i], &got[i]);
        const NcclReal *rr = nccl_real();
        CHECK(rr != NULL);
        for (int i = 0; i < 4; i++) CHECK(got[i] == (void *)rr);
        CHECK_STR("", nccl_real_why());
        CHECK_EQ_INT(22703, rr ? rr->version : 0);
        setenv("MSCCLRT_NCCL_LIB_PATH", fake, 1);     /* read once: no effect now */
        CHECK(nccl_real() == rr);
        nccl_forward_explain(why, sizeof why, "ncclDevCommCreate");
        CHECK_CONTAINS(why, "ncclDevCommCreate needs the real NCCL, and the one loaded "
                            "(version 22703");
        CHECK_CONTAINS(why, "does not export it");
    });

    TEST("nccl_forward/force_parse", {
        unsigned m = 99;
        CHECK_EQ_INT(ncclSuccess, nccl_force_parse("", &m, why, sizeof why));
        CHECK_EQ_INT(0, m);
        CHECK_EQ_INT(ncclSuccess, nccl_force_parse(NULL, &m, why, sizeof why));
        CHECK_EQ_INT(0, m);
        CHECK_EQ_INT(ncclSuccess, nccl_force_parse("allreduce", &m, why, sizeof why));
        CHECK_EQ_INT(NCCL_COLL(ALLREDUCE), m);
        CHECK_EQ_INT(ncclSuccess, nccl_force_parse("allreduce,allgather,sendrecv", &m, why,
                                                   sizeof why));
        CHECK_EQ_INT(NCCL_COLL(ALLREDUCE) | NCCL_COLL(ALLGATHER) | NCCL_COLL(SENDRECV), m);
        CHECK_EQ_INT(ncclSuccess, nccl_force_parse(" ReduceScatter , broadcast,,reduce, ", &m,
                                                   why, sizeof why));
        CHECK_EQ_INT(NCCL_COLL(REDUCESCATTER) | NCCL_COLL(BROADCAST) | NCCL_COLL(REDUCE), m);
        CHECK_EQ_INT(ncclSuccess, nccl_force_parse("alltoall,gather,scatter", &m, why, sizeof why));
        CHECK_EQ_INT(NCCL_COLL(ALLTOALL) | NCCL_COLL(GATHER) | NCCL_COLL(SCATTER), m);
        CHECK_EQ_INT(ncclSuccess, nccl_force_parse("all", &m, why, sizeof why));
        CHECK_EQ_INT(NCCL_COLL_ALL, m);
        CHECK_EQ_INT(0x1ff, NCCL_COLL_ALL);
        CHECK_EQ_INT(ncclSuccess, nccl_force_parse("ALL,allreduce", &m, why, sizeof why));
        CHECK_EQ_INT(NCCL_COLL_ALL, m);
        CHECK_EQ_INT(ncclInvalidArgument, nccl_force_parse("allreduce,bogus,gather", &m, why,
                                                           sizeof why));
        CHECK_EQ_INT(0, m);
        CHECK_CONTAINS(why, "MSCCLRT_FORCE_NCCL: unknown collective 'bogus'");
        CHECK_CONTAINS(why, "known: all, allreduce");
        CHECK_EQ_INT(ncclInvalidArgument, nccl_force_parse("allreduces", &m, why, sizeof why));
        CHECK_CONTAINS(why, "'allreduces'");
        CHECK_EQ_INT(ncclInvalidArgument, nccl_force_parse("all reduce", &m, why, sizeof why));
        CHECK_CONTAINS(why, "'all reduce'");
    });

    if (marked) dlclose(marked);
    unlink(logpath);
    return harness_report();
}

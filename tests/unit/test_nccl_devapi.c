/*
 * test_nccl_devapi.c - the device-API host calls (runtime/nccl/nccl_devapi.c) forward to the
 * real NCCL on the real communicator behind ours, here the fake NCCL beside this program; with
 * no real NCCL, or one without the device API (the fake 2.27), and with a NULL or dead comm
 * they fail with the documented result or neutral value and a last error that says why.
 * nccl_comm_real and nccl_set_last_error, which the entry points define in the library, are
 * test doubles here.
 */
#define MSCCLRT_NCCL_DEVICE_TYPES
#include "../harness.h"
#include "nccl/nccl_comm.h"
#include "nccl/nccl_forward.h"

#include <libgen.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- test doubles for the entry points' side ------------------------------------------------- */
struct ncclComm {
    ncclComm_t real;            /* the fake NCCL's comm; NULL: "its init failed" */
};

static char last_error[1024];

void nccl_set_last_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

ncclComm_t nccl_comm_real(ncclComm_t ours, ncclResult_t *err) {
    if (!ours->real) {
        nccl_set_last_error("test: no real communicator");
        *err = ncclRemoteError;
    }
    return ours->real;
}

static char dir[PATH_MAX - 64], fake[PATH_MAX], fake_old[PATH_MAX], logpath[PATH_MAX];

static char *read_log(void) {
    static char buf[8192];
    FILE *f = fopen(logpath, "r");
    size_t n = 0;
    if (f) {
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
    }
    buf[n] = 0;
    if ((f = fopen(logpath, "w"))) fclose(f);
    return buf;
}

#define FAIL_IF(c, code) \
    do { if (c) { fprintf(stderr, "child: %s\n", #c); return code; } } while (0)

/* Every call without a real NCCL: each fails and says the library is not set. */
static int child_no_real(void) {
    struct ncclComm ours = {NULL};
    ncclDevComm_t dc;
    ncclDevCommRequirements_t reqs;
    ncclLsaBarrierHandle_t lh;
    ncclGinBarrierHandle_t gh;
    ncclLLA2AHandle_t ah;
    ncclDevResourceRequirements_t rq;
    ncclTeam_t t;
    const char *unset = "needs the real NCCL, and none is loaded: MSCCLRT_NCCL_LIB_PATH is not set";

    unsetenv("MSCCLRT_NCCL_LIB_PATH");
    memset(&reqs, 0, sizeof reqs);
    memset(&dc, 0, sizeof dc);
    FAIL_IF(ncclDevCommCreate(&ours, &reqs, &dc) != ncclInvalidUsage, 1);
    FAIL_IF(!strstr(last_error, "ncclDevCommCreate") || !strstr(last_error, unset), 2);
    FAIL_IF(ncclDevCommDestroy(&ours, &dc) != ncclInvalidUsage, 3);
    last_error[0] = 0;
    t = ncclTeamWorld(&ours);
    FAIL_IF(t.nRanks != 0 || t.rank != 0 || t.stride != 0, 4);
    FAIL_IF(!strstr(last_error, "ncclTeamWorld needs the real NCCL"), 5);
    t = ncclTeamLsa(&ours);
    FAIL_IF(t.nRanks != 0 || !strstr(last_error, "ncclTeamLsa"), 6);
    t = ncclTeamRail(&ours);
    FAIL_IF(t.nRanks != 0 || !strstr(last_error, "ncclTeamRail"), 7);
    FAIL_IF(ncclTeamRankToWorld(&ours, t, 0) != -1 || !strstr(last_error, "RankToWorld"), 8);
    FAIL_IF(ncclTeamRankToLsa(&ours, t, 0) != -1 || !strstr(last_error, "RankToLsa"), 9);
    FAIL_IF(ncclLsaBarrierCreateRequirement(t, 1, &lh, &rq) != ncclInvalidUsage, 10);
    FAIL_IF(ncclGinBarrierCreateRequirement(&ours, t, 1, &gh, &rq) != ncclInvalidUsage, 11);
    FAIL_IF(ncclLLA2ACalcSlots(8, 8) != 0 || !strstr(last_error, "ncclLLA2ACalcSlots"), 12);
    FAIL_IF(ncclLLA2ACreateRequirement(1, 8, &ah, &rq) != ncclInvalidUsage, 13);
    last_error[0] = 0;
    ncclResetDebugInitInternal();
    FAIL_IF(!strstr(last_error, "ncclResetDebugInitInternal") || !strstr(last_error, unset), 14);
    return 0;
}

/* An NCCL 2.27 without the device API: the calls fail and name the library's version. */
static int child_old_real(void) {
    struct ncclComm ours = {NULL};
    ncclDevComm_t dc;
    setenv("MSCCLRT_NCCL_LIB_PATH", fake_old, 1);
    FAIL_IF(nccl_real() == NULL, 1);
    FAIL_IF(ncclDevCommCreate(&ours, NULL, &dc) != ncclInvalidUsage, 2);
    FAIL_IF(!strstr(last_error, "the one loaded (version 22703"), 3);
    FAIL_IF(!strstr(last_error, "does not export it"), 4);
    FAIL_IF(ncclLLA2ACalcSlots(8, 8) != 0, 5);
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
    char self[PATH_MAX];
    struct ncclComm ours = {NULL}, dead = {NULL};
    ncclUniqueId id;
    const NcclReal *r;

    (void)argc;
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(dir, sizeof dir, "%s", dirname(self));
    snprintf(fake, sizeof fake, "%s/libfake_nccl.so", dir);
    snprintf(fake_old, sizeof fake_old, "%s/libfake_nccl_old.so", dir);
    snprintf(logpath, sizeof logpath, "%s/test_nccl_devapi.%d.log", dir, (int)getpid());
    setenv("FAKE_NCCL_LOG", logpath, 1);

    /* variables are read once per process: these run in children forked before any is read */
    TEST("nccl_devapi/no_real_nccl", { CHECK_EQ_INT(0, in_child(child_no_real)); });
    TEST("nccl_devapi/old_real_nccl", { CHECK_EQ_INT(0, in_child(child_old_real)); });

    setenv("MSCCLRT_NCCL_LIB_PATH", fake, 1);
    r = nccl_real();
    CHECK(r != NULL);
    if (!r) return harness_report();
    memset(&id, 'u', sizeof id);
    CHECK_EQ_INT(ncclSuccess, r->ncclCommInitRank(&ours.real, 8, id, 3));
    read_log();

    TEST("nccl_devapi/devcomm", {
        ncclDevComm_t dc;
        ncclDevCommRequirements_t reqs;
        memset(&reqs, 0, sizeof reqs);
        reqs.lsaBarrierCount = 5;
        memset(&dc, 0xff, sizeof dc);
        CHECK_EQ_INT(ncclSuccess, ncclDevCommCreate(&ours, &reqs, &dc));
        CHECK_EQ_INT(3, dc.rank);
        CHECK_EQ_INT(8, dc.nRanks);
        CHECK_EQ_INT(ncclSuccess, ncclDevCommDestroy(&ours, &dc));
        char *log = read_log();
        CHECK_CONTAINS(log, "ncclDevCommCreate comm=");
        CHECK_CONTAINS(log, "lsaBarrierCount=5");
        CHECK_CONTAINS(log, "ncclDevCommDestroy comm=");
        CHECK_CONTAINS(log, "devComm.nRanks=8");
    });

    TEST("nccl_devapi/teams", {
        ncclTeam_t w = ncclTeamWorld(&ours);
        ncclTeam_t l = ncclTeamLsa(&ours);
        ncclTeam_t rail = ncclTeamRail(&ours);
        CHECK_EQ_INT(8, w.nRanks);
        CHECK_EQ_INT(3, w.rank);
        CHECK_EQ_INT(1, w.stride);
        CHECK_EQ_INT(8, l.nRanks);
        CHECK_EQ_INT(1, rail.nRanks);
        CHECK_EQ_INT(8, rail.stride);
        CHECK_EQ_INT(16, ncclTeamRankToWorld(&ours, rail, 2));
        CHECK_EQ_INT(2, ncclTeamRankToLsa(&ours, l, 2));
        char *log = read_log();
        CHECK_CONTAINS(log, "ncclTeamWorld comm=");
        CHECK_CONTAINS(log, "ncclTeamLsa comm=");
        CHECK_CONTAINS(log, "ncclTeamRail comm=");
        CHECK_CONTAINS(log, "ncclTeamRankToWorld comm=");
        CHECK_CONTAINS(log, "team.nRanks=1 rank=2");
        CHECK_CONTAINS(log, "ncclTeamRankToLsa comm=");
    });

    TEST("nccl_devapi/requirements", {
        ncclLsaBarrierHandle_t lh;
        ncclGinBarrierHandle_t gh;
        ncclLLA2AHandle_t ah;
        ncclDevResourceRequirements_t rq;
        ncclTeam_t w = ncclTeamWorld(&ours);
        CHECK_EQ_INT(ncclSuccess, ncclLsaBarrierCreateRequirement(w, 4, &lh, &rq));
        CHECK_EQ_INT(4, lh.nBarriers);
        CHECK(rq.outBufferHandle == &lh.bufHandle);
        CHECK_EQ_INT(ncclSuccess, ncclGinBarrierCreateRequirement(&ours, w, 2, &gh, &rq));
        CHECK_EQ_INT(2, rq.ginSignalCount);
        CHECK_EQ_INT(24, ncclLLA2ACalcSlots(8, 24));
        CHECK_EQ_INT(ncclSuccess, ncclLLA2ACreateRequirement(2, 24, &ah, &rq));
        CHECK_EQ_INT(24, ah.nSlots);
        ncclResetDebugInitInternal();
        char *log = read_log();
        CHECK_CONTAINS(log, "ncclLsaBarrierCreateRequirement team.nRanks=8 nBarriers=4");
        CHECK_CONTAINS(log, "ncclGinBarrierCreateRequirement comm=");
        CHECK_CONTAINS(log, "ncclLLA2ACalcSlots maxElts=8 maxEltSize=24");
        CHECK_CONTAINS(log, "ncclLLA2ACreateRequirement nBlocks=2 nSlots=24");
        CHECK_CONTAINS(log, "ncclResetDebugInitInternal");
    });

    TEST("nccl_devapi/bad_comm", {
        ncclDevComm_t dc;
        ncclTeam_t t;
        last_error[0] = 0;
        CHECK_EQ_INT(ncclInvalidArgument, ncclDevCommCreate(NULL, NULL, &dc));
        CHECK_STR("ncclDevCommCreate: comm argument is NULL", last_error);
        t = ncclTeamLsa(NULL);
        CHECK_EQ_INT(0, t.nRanks);
        CHECK_STR("ncclTeamLsa: comm argument is NULL", last_error);
        /* a comm whose real communicator cannot be made: nccl_comm_real's result and text */
        CHECK_EQ_INT(ncclRemoteError, ncclDevCommCreate(&dead, NULL, &dc));
        CHECK_STR("test: no real communicator", last_error);
        CHECK_EQ_INT(-1, ncclTeamRankToWorld(&dead, t, 0));
        CHECK_EQ_INT(ncclRemoteError, ncclGinBarrierCreateRequirement(&dead, t, 1, NULL, NULL));
        CHECK_STR("", read_log());      /* nothing reached the fake */
    });

    r->ncclCommDestroy(ours.real);
    unlink(logpath);
    return harness_report();
}

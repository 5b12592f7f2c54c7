/*
 * nccl_devapi.c - the host calls of NCCL's device API (nccl_device.h): ncclDevCommCreate/Destroy,
 * the team queries, and the requirements of LSA/GIN barriers and LL all-to-all. A program that
 * uses the device API runs NVIDIA's device code, which reads a devcomm and resource handles only
 * the real NCCL can fill, so every call is forwarded to the real NCCL, on the real communicator
 * behind ours (nccl_comm_real). Without a real NCCL, or with one that lacks the call, a call
 * fails: ncclInvalidUsage, or for calls that return no ncclResult_t the neutral value named at
 * each, and in both cases the last error (ncclGetLastError) says why.
 */
#define MSCCLRT_NCCL_DEVICE_TYPES
#include "nccl/nccl_abi.h"
#include "nccl/nccl_comm.h"
#include "nccl/nccl_forward.h"

#include <limits.h>

/* The last error for a call of `fn` the real NCCL cannot serve; ncclInvalidUsage to return. */
static ncclResult_t unavailable(const char *fn) {
    char buf[PATH_MAX + 512];
    nccl_set_last_error("%s", nccl_forward_explain(buf, sizeof buf, fn));
    return ncclInvalidUsage;
}

/* The real communicator behind `comm` for a call of `fn`; NULL with *err and the last error set. */
static ncclComm_t real_comm(const char *fn, ncclComm_t comm, ncclResult_t *err) {
    if (!comm) {
        nccl_set_last_error("%s: comm argument is NULL", fn);
        *err = ncclInvalidArgument;
        return NULL;
    }
    return nccl_comm_real(comm, err);
}

/* What the team queries return when they cannot be served: a team of no ranks. */
static const ncclTeam_t no_team = {0, 0, 0};

ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs,
                               ncclDevComm_t *outDevComm) {
    const NcclReal *r = nccl_real();
    ncclResult_t err;
    ncclComm_t rc;
    if (!r || !r->ncclDevCommCreate) return unavailable("ncclDevCommCreate");
    if (!(rc = real_comm("ncclDevCommCreate", comm, &err))) return err;
    return r->ncclDevCommCreate(rc, reqs, outDevComm);
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm) {
    const NcclReal *r = nccl_real();
    ncclResult_t err;
    ncclComm_t rc;
    if (!r || !r->ncclDevCommDestroy) return unavailable("ncclDevCommDestroy");
    if (!(rc = real_comm("ncclDevCommDestroy", comm, &err))) return err;
    return r->ncclDevCommDestroy(rc, devComm);
}

/* ncclTeamWorld, ncclTeamLsa, ncclTeamRail: no_team when they cannot be served. */
ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
    const NcclReal *r = nccl_real();
    ncclResult_t err;
    ncclComm_t rc;
    if (!r || !r->ncclTeamWorld) {
        unavailable("ncclTeamWorld");
        return no_team;
    }
    if (!(rc = real_comm("ncclTeamWorld", comm, &err))) return no_team;
    return r->ncclTeamWorld(rc);
}

ncclTeam_t ncclTeamLsa(ncclComm_t comm) {
    const NcclReal *r = nccl_real();
    ncclResult_t err;
    ncclComm_t rc;
    if (!r || !r->ncclTeamLsa) {
        unavailable("ncclTeamLsa");
        return no_team;
    }
    if (!(rc = real_comm("ncclTeamLsa", comm, &err))) return no_team;
    return r->ncclTeamLsa(rc);
}

ncclTeam_t ncclTeamRail(ncclComm_t comm) {
    const NcclReal *r = nccl_real();
    ncclResult_t err;
    ncclComm_t rc;
    if (!r || !r->ncclTeamRail) {
        unavailable("ncclTeamRail");
        return no_team;
    }
    if (!(rc = real_comm("ncclTeamRail", comm, &err))) return no_team;
    return r->ncclTeamRail(rc);
}

/* ncclTeamRankToWorld, ncclTeamRankToLsa: -1 (no rank) when they cannot be served. */
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
    const NcclReal *r = nccl_real();
    ncclResult_t err;
    ncclComm_t rc;
    if (!r || !r->ncclTeamRankToWorld) {
        unavailable("ncclTeamRankToWorld");
        return -1;
    }
    if (!(rc = real_comm("ncclTeamRankToWorld", comm, &err))) return -1;
    return r->ncclTeamRankToWorld(rc, team, rank);
}

int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
    const NcclReal *r = nccl_real();
    ncclResult_t err;
    ncclComm_t rc;
    if (!r || !r->ncclTeamRankToLsa) {
        unavailable("ncclTeamRankToLsa");
        return -1;
    }
    if (!(rc = real_comm("ncclTeamRankToLsa", comm, &err))) return -1;
    return r->ncclTeamRankToLsa(rc, team, rank);
}

ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                             ncclLsaBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq) {
    const NcclReal *r = nccl_real();
    if (!r || !r->ncclLsaBarrierCreateRequirement)
        return unavailable("ncclLsaBarrierCreateRequirement");
    return r->ncclLsaBarrierCreateRequirement(team, nBarriers, outHandle, outReq);
}

ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq) {
    const NcclReal *r = nccl_real();
    ncclResult_t err;
    ncclComm_t rc;
    if (!r || !r->ncclGinBarrierCreateRequirement)
        return unavailable("ncclGinBarrierCreateRequirement");
    if (!(rc = real_comm("ncclGinBarrierCreateRequirement", comm, &err))) return err;
    return r->ncclGinBarrierCreateRequirement(rc, team, nBarriers, outHandle, outReq);
}

/* 0 slots when it cannot be served (ncclLLA2ACreateRequirement then fails too). */
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
    const NcclReal *r = nccl_real();
    if (!r || !r->ncclLLA2ACalcSlots) {
        unavailable("ncclLLA2ACalcSlots");
        return 0;
    }
    return r->ncclLLA2ACalcSlots(maxElts, maxEltSize);
}

ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,
                                        ncclDevResourceRequirements_t *outReq) {
    const NcclReal *r = nccl_real();
    if (!r || !r->ncclLLA2ACreateRequirement) return unavailable("ncclLLA2ACreateRequirement");
    return r->ncclLLA2ACreateRequirement(nBlocks, nSlots, outHandle, outReq);
}

/* Re-reads NCCL_DEBUG and related variables in the real NCCL; without one there is no NCCL
 * logging to reset, and the last error says so. */
void ncclResetDebugInitInternal(void) {
    const NcclReal *r = nccl_real();
    if (!r || !r->ncclResetDebugInitInternal) {
        unavailable("ncclResetDebugInitInternal");
        return;
    }
    r->ncclResetDebugInitInternal();
}

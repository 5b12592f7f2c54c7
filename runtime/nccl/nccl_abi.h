/*
 * nccl_abi.h - the NCCL 2.28 application binary interface, as libmscclrt_nccl.so implements it:
 * the types, constants and prototypes a program built against NVIDIA's nccl.h 2.28.9 relies on.
 * Written for this project from the facts of that header (values, layouts, signatures); the
 * build installs it as include/nccl.h. tests/cases/nccl_abi.sh checks every value, layout and
 * prototype against the real header. Needs no CUDA header: cudaStream_t is declared opaquely.
 *
 * The device API (nccl_device.h) is NVIDIA's C++/CUDA library; this header only declares what
 * its host calls' signatures name. Its structs stay incomplete unless MSCCLRT_NCCL_DEVICE_TYPES
 * is defined before inclusion (our own sources do): then they get their 2.28.9 layouts. Left
 * incomplete, NVIDIA's nccl_device.h may be included after this header and define them itself.
 */
#ifndef NCCL_H_
#define NCCL_H_
#define MSCCLRT_NCCL_ABI_H 1

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#if defined(MSCCLRT_NCCL_DEVICE_TYPES) && !defined(__cplusplus)
#include <stdbool.h>
#endif

/* ---- version --------------------------------------------------------------------------------- */
#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""
/* Version codes: up to 2.8 the minor had one digit (2.8.4 is 2804); from 2.9 on it has two
 * (2.28.9 is 22809). ncclGetVersion() and ncclConfig_t.version use this encoding. */
#define NCCL_VERSION(X, Y, Z) \
    (((X) <= 2 && (Y) <= 8) ? ((X) * 1000 + (Y) * 100 + (Z)) : ((X) * 10000 + (Y) * 100 + (Z)))
#define NCCL_VERSION_CODE 22809

/* Exported from libmscclrt_nccl.so even though the library builds with -fvisibility=hidden. */
#if defined(__GNUC__)
#define NCCL_ABI_EXPORT __attribute__((visibility("default")))
#else
#define NCCL_ABI_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA runtime's stream handle, declared the way cuda_runtime.h declares it so that both
 * headers can be included in either order. */
typedef struct CUstream_st *cudaStream_t;

/* ---- handles --------------------------------------------------------------------------------- */
typedef struct ncclComm *ncclComm_t;             /* a communicator; struct ncclComm is the shim's */
typedef struct ncclWindow_vidmem *ncclWindow_t;  /* a registered memory window */
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
/* Opaque bytes from ncclGetUniqueId, passed by value to every rank's init call. */
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* ---- results --------------------------------------------------------------------------------- */
typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,   /* a CUDA call failed */
    ncclSystemError = 2,          /* an OS call failed */
    ncclInternalError = 3,        /* a bug in the library */
    ncclInvalidArgument = 4,      /* a bad value from the caller */
    ncclInvalidUsage = 5,         /* a call that is not allowed now */
    ncclRemoteError = 6,          /* a peer failed or went away */
    ncclInProgress = 7,           /* a non-blocking operation has not finished yet */
    ncclNumResults = 8
} ncclResult_t;

/* ---- configuration constants ----------------------------------------------------------------- */
#define NCCL_CONFIG_UNDEF_INT INT_MIN   /* an int field of ncclConfig_t left to the library */
#define NCCL_CONFIG_UNDEF_PTR NULL      /* a pointer field left to the library */
#define NCCL_SPLIT_NOCOLOR -1           /* ncclCommSplit color: this rank joins no new comm */
#define NCCL_UNDEF_FLOAT -1.0f          /* ncclSimInfo_t.estimatedTime before a simulation */

/* ncclCommWindowRegister winFlags */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01    /* every rank registers a buffer of the same size */
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy bits */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink shrinkFlags */
#define NCCL_SHRINK_DEFAULT 0x00        /* the parent is idle */
#define NCCL_SHRINK_ABORT 0x01          /* abort the parent's pending operations first */

/* ncclCommRevoke revokeFlags: must be 0 */
#define NCCL_REVOKE_DEFAULT 0x00

/* ---- ncclConfig_t ---------------------------------------------------------------------------- */
/* Communicator attributes, in their 2.28 layout. The first three fields identify the caller's
 * layout: the library reads only the fields that the caller's size and version include, so
 * callers built against older or newer NCCL headers work (runtime/nccl/nccl_config.c).
 * Every field that is NCCL_CONFIG_UNDEF_* is left to the library. */
typedef struct ncclConfig_v22800 {
    size_t size;                /* sizeof(ncclConfig_t) as the caller compiled it */
    unsigned int magic;         /* 0xcafebeef: set by NCCL_CONFIG_INITIALIZER */
    unsigned int version;       /* NCCL_VERSION_CODE of the caller's header */
    int blocking;               /* 0: init and collectives may return ncclInProgress */
    int cgaClusterSize;         /* thread-block cluster size of the kernels */
    int minCTAs;                /* fewest thread blocks per kernel */
    int maxCTAs;                /* most thread blocks per kernel */
    const char *netName;        /* network plugin to use, by name */
    int splitShare;             /* ncclCommSplit children share the parent's resources */
    int trafficClass;           /* network traffic class */
    const char *commName;       /* a name for logs */
    int collnetEnable;          /* use CollNet (in-network reduction) */
    int CTAPolicy;              /* NCCL_CTA_POLICY_* bits */
    int shrinkShare;            /* ncclCommShrink children share the parent's resources */
    int nvlsCTAs;               /* thread blocks of NVLS (NVLink SHARP) kernels */
    int nChannelsPerNetPeer;    /* channels per network peer (2.28) */
    int nvlinkCentricSched;     /* NVLink-utilisation-centric scheduling (2.28) */
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER {                                                                \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),          \
    NCCL_CONFIG_UNDEF_INT /* blocking */, NCCL_CONFIG_UNDEF_INT /* cgaClusterSize */,            \
    NCCL_CONFIG_UNDEF_INT /* minCTAs */, NCCL_CONFIG_UNDEF_INT /* maxCTAs */,                    \
    NCCL_CONFIG_UNDEF_PTR /* netName */, NCCL_CONFIG_UNDEF_INT /* splitShare */,                 \
    NCCL_CONFIG_UNDEF_INT /* trafficClass */, NCCL_CONFIG_UNDEF_PTR /* commName */,              \
    NCCL_CONFIG_UNDEF_INT /* collnetEnable */, NCCL_CONFIG_UNDEF_INT /* CTAPolicy */,            \
    NCCL_CONFIG_UNDEF_INT /* shrinkShare */, NCCL_CONFIG_UNDEF_INT /* nvlsCTAs */,               \
    NCCL_CONFIG_UNDEF_INT /* nChannelsPerNetPeer */,                                             \
    NCCL_CONFIG_UNDEF_INT /* nvlinkCentricSched */                                               \
}

/* ---- ncclSimInfo_t: what ncclGroupSimulateEnd reports ---------------------------------------- */
typedef struct ncclSimInfo_v22200 {
    size_t size;                /* sizeof(ncclSimInfo_t) as the caller compiled it */
    unsigned int magic;         /* 0x74685283 */
    unsigned int version;       /* NCCL_VERSION_CODE of the caller's header */
    float estimatedTime;        /* simulated time of the group, in microseconds */
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER {                                                              \
    sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),         \
    NCCL_UNDEF_FLOAT                                                                             \
}

/* ---- reduction operators --------------------------------------------------------------------- */
/* Built-in operators are 0 .. ncclNumOps-1. ncclRedOpCreatePreMulSum hands out dynamic operators
 * numbered from ncclNumOps up to ncclMaxRedOp, the largest value that keeps the enum int-sized. */
typedef enum {
    ncclSum = 0,
    ncclProd = 1,
    ncclMax = 2,
    ncclMin = 3,
    ncclAvg = 4,
    ncclNumOps = 5,
    ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

/* ---- data types ------------------------------------------------------------------------------ */
typedef enum {
    ncclInt8 = 0, ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2, ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6, ncclHalf = 6,
    ncclFloat32 = 7, ncclFloat = 7,
    ncclFloat64 = 8, ncclDouble = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10,        /* FP8 E4M3 */
    ncclFloat8e5m2 = 11,        /* FP8 E5M2 */
    ncclNumTypes = 12
} ncclDataType_t;

/* Where ncclRedOpCreatePreMulSum's scalar lives and when it is read. */
typedef enum {
    ncclScalarDevice = 0,         /* device memory, read by each collective while it runs */
    ncclScalarHostImmediate = 1   /* host memory, read before ncclRedOpCreatePreMulSum returns */
} ncclScalarResidence_t;

/* ---- device-API types named by host calls (nccl_device.h) ------------------------------------ */
typedef uint32_t ncclDevResourceHandle;                 /* a buffer in a devcomm's resources */
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;                       /* a GPU-initiated-network signal id */
typedef uint32_t ncclGinCounter_t;                      /* a GPU-initiated-network counter id */

typedef struct ncclDevComm ncclDevComm_t;               /* kernels' view; from ncclDevCommCreate */
typedef struct ncclTeam ncclTeam_t;                     /* a set of ranks: {nRanks, rank, stride} */
typedef struct ncclMultimemHandle ncclMultimemHandle_t;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclTeamRequirements ncclTeamRequirements_t;

#ifdef MSCCLRT_NCCL_DEVICE_TYPES
/* The 2.28.9 layouts, for the shim's sources and tests (see the file header). */
struct ncclTeam {
    int nRanks;                 /* ranks in the team */
    int rank;                   /* this rank's index in the team */
    int stride;                 /* distance between consecutive team members in world ranks */
};

struct ncclMultimemHandle {
    void *mcBasePtr;            /* base of the multicast mapping */
};

struct ncclLsaBarrierHandle {
    ncclDevResourceHandle_t bufHandle;  /* the barrier's state buffer */
    int nBarriers;
};

struct ncclGinBarrierHandle {
    ncclGinSignal_t signal0;            /* first of the barrier's signals */
    ncclDevResourceHandle_t bufHandle;  /* the barrier's state buffer */
};

struct ncclLLA2AHandle {
    ncclDevResourceHandle_t bufHandle;  /* the all-to-all's slot buffer */
    uint32_t nSlots;
};

/* One resource a devcomm must hold; the *out* pointers are written by ncclDevCommCreate. */
struct ncclDevResourceRequirements {
    ncclDevResourceRequirements_t *next;    /* next in the list, or NULL */
    size_t bufferSize, bufferAlign;
    ncclDevResourceHandle_t *outBufferHandle;
    int ginSignalCount;
    int ginCounterCount;
    ncclGinSignal_t *outGinSignalStart;
    ncclGinCounter_t *outGinCounterStart;
};

struct ncclTeamRequirements {
    ncclTeamRequirements_t *next;           /* next in the list, or NULL */
    ncclTeam_t team;
    bool multimem;                          /* needs a multicast mapping over the team */
    ncclMultimemHandle_t *outMultimemHandle;
};

/* What the caller asks ncclDevCommCreate for. */
struct ncclDevCommRequirements {
    ncclDevResourceRequirements_t *resourceRequirementsList;
    ncclTeamRequirements_t *teamRequirementsList;
    bool lsaMultimem;                       /* multicast over the load/store-accessible team */
    int barrierCount;
    int lsaBarrierCount;
    int railGinBarrierCount;
    int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
    bool ginForceEnable;
    int ginContextCount;                    /* a hint */
    int ginSignalCount;                     /* ids start at 0 */
    int ginCounterCount;                    /* ids start at 0 */
};

/* A window as device code sees it (ncclWindow_t points to one of these). */
struct ncclWindow_vidmem {
    void *winHost;
    char *lsaFlatBase;                      /* rank 0's first byte in the flat LSA mapping */
    int lsaRank;
    int worldRank;
    uint32_t stride4G;
    uint32_t mcOffset4K;
    uint32_t ginOffset4K;
    void *ginWins[4];                       /* one per GIN context */
};

struct ncclDevCommWindowTable;              /* C++ only in NVIDIA's headers; pointed to */

/* The device communicator, passed by value to kernels. */
struct ncclDevComm {
    int rank, nRanks;
    uint32_t nRanks_rcp32;                  /* reciprocal of nRanks for fast division */
    int lsaRank, lsaSize;
    uint32_t lsaSize_rcp32;
    struct ncclDevCommWindowTable *windowTable;
    ncclWindow_t resourceWindow;
    struct ncclWindow_vidmem resourceWindow_inlined;
    ncclMultimemHandle_t lsaMultimem;
    ncclLsaBarrierHandle_t lsaBarrier;
    ncclGinBarrierHandle_t railGinBarrier;
    uint8_t ginContextCount;
    uint8_t ginTypes[4];
    void *ginHandles[4];
    uint32_t ginSignalBase;
    int ginSignalCount;
    uint32_t ginCounterBase;
    int ginCounterCount;
    uint64_t *ginSignalShadows;
};
#endif /* MSCCLRT_NCCL_DEVICE_TYPES */

/* ---- functions: each row of nccl_funcs.def, and its pnccl* profiling twin where NCCL has one */
#define NCCL_FN(ret, name, params, args) \
    NCCL_ABI_EXPORT ret name params; NCCL_ABI_EXPORT ret p##name params;
#define NCCL_INT_FN(ret, name, params, args) NCCL_ABI_EXPORT ret name params;
#include "nccl_funcs.def"

#ifdef __cplusplus
}
#endif
#endif /* NCCL_H_ */

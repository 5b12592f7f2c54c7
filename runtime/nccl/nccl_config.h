/*
 * nccl_config.h - reads the ncclConfig_t a caller passes to ncclCommInitRankConfig, ncclCommSplit,
 * ncclCommShrink or ncclCommInitRankScalable, whatever NCCL header it was built against (the
 * struct only ever grew at its end), into one normalised NcclConfig with every default applied.
 *
 * Which fields the caller's struct has is decided by both its `size` and its `version`: a field
 * is read only if it lies inside `size` bytes and `version` is at least the NCCL version that
 * added it (as NCCL itself reads configs). Fields beyond the newest layout we know (2.31/2.32's
 * ncclConfig_v23100) are ignored. A `size` too small for the fields its `version` promises, a
 * wrong magic or an out-of-range value is ncclInvalidArgument with a message naming the field.
 */
#ifndef MSCCLRT_NCCL_CONFIG_H
#define MSCCLRT_NCCL_CONFIG_H

#include "nccl/nccl_abi.h"

#include <stddef.h>
#include <stdint.h>

#define NCCL_CONFIG_MAGIC 0xcafebeefu
#define NCCL_CFG_AUTO NCCL_CONFIG_UNDEF_INT    /* in NcclConfig: "the library decides" */
#define NCCL_CFG_MAX_CTAS 64                   /* NCCL's channel limit: maxCTAs' default */

/*
 * Every field after the header, in ncclConfig_t order:
 * X(field, kind, since, default, lo, hi)
 *   kind     INT: valid values lo..hi; BITS: a combination of the bits of hi;
 *            BITS_ALL: BITS or INT_MAX ("every bit, also future ones"); STR: a string or NULL
 *   since    the version code of the NCCL that added the field; 0 where NCCL does not check the
 *            version before reading it (the field is then read whenever `size` covers it)
 *   default  the value when the caller leaves it NCCL_CONFIG_UNDEF_*; NCCL_CFG_AUTO where the
 *            library picks at run time (NCCL's defaults, from its init.cc)
 */
#define NCCL_CONFIG_FIELDS(X) \
    X(blocking,            INT,      21400, 1,                 0, 1)                 \
    X(cgaClusterSize,      INT,      21700, 4,                 0, INT_MAX)           \
    X(minCTAs,             INT,      21700, 1,                 1, INT_MAX)           \
    X(maxCTAs,             INT,      21700, NCCL_CFG_MAX_CTAS, 1, INT_MAX)           \
    X(netName,             STR,      21700, 0,                 0, 0)                 \
    X(splitShare,          INT,      0,     0,                 0, 1)                 \
    X(trafficClass,        INT,      22500, NCCL_CFG_AUTO,     INT_MIN + 1, INT_MAX) \
    X(commName,            STR,      0,     0,                 0, 0)                 \
    X(collnetEnable,       INT,      22700, 0,                 0, 1)                 \
    X(CTAPolicy,           BITS,     22700, 0,                 0, 0x3)               \
    X(shrinkShare,         INT,      22700, 0,                 0, 1)                 \
    X(nvlsCTAs,            INT,      22700, NCCL_CFG_AUTO,     1, INT_MAX)           \
    X(nChannelsPerNetPeer, INT,      22800, NCCL_CFG_AUTO,     1, NCCL_CFG_MAX_CTAS) \
    X(nvlinkCentricSched,  INT,      22800, 0,                 0, 1)                 \
    X(graphUsageMode,      INT,      22900, 2,                 0, 2)                 \
    X(numRmaCtx,           INT,      22900, 1,                 0, INT_MAX)           \
    X(maxP2pPeers,         INT,      23000, NCCL_CFG_AUTO,     1, INT_MAX)           \
    X(graphStreamOrdering, INT,      23005, NCCL_CFG_AUTO,     0, 1)                 \
    X(launchOrderImplicit, INT,      23100, NCCL_CFG_AUTO,     0, 1)                 \
    X(numRmaSig,           INT,      23100, 1,                 0, INT_MAX)           \
    X(rmaEagerInit,        INT,      23100, 0,                 0, 1)                 \
    X(hostCftMode,         INT,      23100, NCCL_CFG_AUTO,     1, 3)                 \
    X(nvlsHostMode,        BITS_ALL, 23100, 0,                 0, 0x3)

/* NCCL_CFG_<field>: the field's bit number in NcclConfig.given */
typedef enum {
#define NCCL_CFG_ENUM(f, kind, since, def, lo, hi) NCCL_CFG_##f,
    NCCL_CONFIG_FIELDS(NCCL_CFG_ENUM)
#undef NCCL_CFG_ENUM
    NCCL_CFG_COUNT
} NcclConfigField;

/* A communicator's configuration after nccl_config_read: every field valid, defaults applied.
 * Field names are ncclConfig_t's, so one table (NCCL_CONFIG_FIELDS) drives both. */
typedef struct NcclConfig {
    size_t size;                /* the caller's ncclConfig_t.size; 0 when it passed no config */
    unsigned version;           /* the caller's ncclConfig_t.version; 0 when no config */
    uint32_t given;             /* bit NCCL_CFG_<field> set: the caller chose this field's value */
    int blocking;               /* 1: calls return when done; 0: they may return ncclInProgress */
    int cgaClusterSize;         /* thread-block cluster size, 0 = none */
    int minCTAs;                /* fewest thread blocks per kernel, >= 1 */
    int maxCTAs;                /* most thread blocks per kernel, >= minCTAs */
    char *netName;              /* owned copy; NULL: the default network */
    int splitShare;             /* 0/1: split children share the parent's resources */
    int trafficClass;           /* network traffic class, or NCCL_CFG_AUTO */
    char *commName;             /* owned copy; NULL: unnamed */
    int collnetEnable;          /* 0/1 */
    int CTAPolicy;              /* NCCL_CTA_POLICY_* bits */
    int shrinkShare;            /* 0/1: shrink children share the parent's resources */
    int nvlsCTAs;               /* thread blocks of NVLS kernels, or NCCL_CFG_AUTO */
    int nChannelsPerNetPeer;    /* 1..NCCL_CFG_MAX_CTAS, or NCCL_CFG_AUTO */
    int nvlinkCentricSched;     /* 0/1 */
    int graphUsageMode;         /* 0..2: how the comm is used in CUDA graphs (2.29) */
    int numRmaCtx;              /* one-sided (RMA) contexts, 0 disables RMA (2.29) */
    int maxP2pPeers;            /* >= 1, or NCCL_CFG_AUTO (2.30) */
    int graphStreamOrdering;    /* 0/1, or NCCL_CFG_AUTO (2.30.5) */
    int launchOrderImplicit;    /* 0/1, or NCCL_CFG_AUTO (2.31) */
    int numRmaSig;              /* RMA signals (2.31) */
    int rmaEagerInit;           /* 0/1: set RMA up at init (2.31) */
    int hostCftMode;            /* 1..3, or NCCL_CFG_AUTO (2.31) */
    int nvlsHostMode;           /* host NVLS components disabled: bits of 0x3, or INT_MAX (2.31) */
} NcclConfig;

/* Reads the caller's config (NULL: none; every field gets its default) into *out. On
 * success *out owns copies of the strings: release with nccl_config_free. On failure *out owns
 * nothing and `why` (why_len bytes, may be 0) holds the reason, e.g.
 * "ncclConfig_t.blocking is 7: must be 0 or 1". ncclInvalidArgument for a bad config,
 * ncclSystemError when a string cannot be copied. */
ncclResult_t nccl_config_read(NcclConfig *out, const ncclConfig_t *cfg, char *why, size_t why_len);
/* Frees the strings; the struct may be partly filled or already freed (fields are reset). */
void nccl_config_free(NcclConfig *c);
/* *dst = a deep copy of *src (for a ncclCommSplit child that inherits its parent's config). */
ncclResult_t nccl_config_dup(NcclConfig *dst, const NcclConfig *src, char *why, size_t why_len);
/* A 2.28 ncclConfig_t holding the fields the caller gave and NCCL_CONFIG_UNDEF_* elsewhere, to
 * hand to the real NCCL (which then applies its own defaults). Its strings point into *c. */
void nccl_config_to_abi(const NcclConfig *c, ncclConfig_t *out);
/* Formats a reason into why (why_len bytes; nothing when why is NULL or why_len 0): the
 * why/why_len convention of nccl_config and nccl_forward. */
void nccl_say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Bytes a config of this version must have: the end of the last field it promises (16 for a
 * version older than every field). */
size_t nccl_config_min_size(unsigned version);

#endif

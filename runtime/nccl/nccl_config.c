/*
 * nccl_config.c - ncclConfig_t of any NCCL version -> NcclConfig (see nccl_config.h for the
 * rules). The caller's struct is read byte-wise at the offsets of the widest layout we know, and
 * never past its own `size`, so a smaller (older) or larger (newer) struct is read safely.
 * String fields (netName, commName) are user pointers that may be garbage (a struct not made
 * with NCCL_CONFIG_INITIALIZER, memory reused): they are copied through process_vm_readv, which
 * reports an unreadable address as EFAULT instead of crashing, and never beyond
 * NCCL_CFG_NAME_MAX bytes.
 */
#include "nccl/nccl_config.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* The layout of NCCL 2.31/2.32's ncclConfig_v23100, the newest we know; only its offsets are
 * used. Every older layout is a prefix of it. */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking, cgaClusterSize, minCTAs, maxCTAs;
    const char *netName;
    int splitShare, trafficClass;
    const char *commName;
    int collnetEnable, CTAPolicy, shrinkShare, nvlsCTAs;
    int nChannelsPerNetPeer, nvlinkCentricSched;                      /* 2.28 */
    int graphUsageMode, numRmaCtx;                                    /* 2.29 */
    int maxP2pPeers;                                                  /* 2.30 */
    int graphStreamOrdering;                                          /* 2.30.5 */
    int launchOrderImplicit, numRmaSig, rmaEagerInit, hostCftMode, nvlsHostMode;   /* 2.31 */
} ConfigLayout;

#define HEADER_BYTES (offsetof(ConfigLayout, version) + sizeof(unsigned int))

/* Our 2.28 ncclConfig_t must be a prefix of the widest layout, field for field
 * (nccl_config_to_abi writes it at ConfigLayout's offsets). */
#define SAME_OFFSET(f) static_assert(offsetof(ncclConfig_t, f) == offsetof(ConfigLayout, f), \
                                     "ncclConfig_t." #f " is not where newer layouts have it");
SAME_OFFSET(blocking) SAME_OFFSET(cgaClusterSize) SAME_OFFSET(minCTAs) SAME_OFFSET(maxCTAs)
SAME_OFFSET(netName) SAME_OFFSET(splitShare) SAME_OFFSET(trafficClass) SAME_OFFSET(commName)
SAME_OFFSET(collnetEnable) SAME_OFFSET(CTAPolicy) SAME_OFFSET(shrinkShare) SAME_OFFSET(nvlsCTAs)
SAME_OFFSET(nChannelsPerNetPeer) SAME_OFFSET(nvlinkCentricSched)
#undef SAME_OFFSET
static_assert(sizeof(ncclConfig_t) == offsetof(ConfigLayout, graphUsageMode),
              "ncclConfig_t is not the 2.28 layout");

enum { K_INT, K_BITS, K_BITS_ALL, K_STR };

typedef struct {
    const char *name;           /* ncclConfig_t's field name, for messages */
    int kind;                   /* K_* */
    unsigned since;             /* version code that added the field; 0: size decides alone */
    size_t off;                 /* offset in the caller's struct */
    size_t width;               /* bytes: sizeof(int) or sizeof(char *) */
    size_t dst;                 /* offset in NcclConfig */
    int def;                    /* default of an int field */
    int lo, hi;                 /* K_INT: valid range; K_BITS*: hi is the mask of valid bits */
} FieldInfo;

static const FieldInfo fields[NCCL_CFG_COUNT] = {
#define ROW(f, kind_, since_, def_, lo_, hi_)                                                    \
    {.name = #f, .kind = K_##kind_, .since = since_, .off = offsetof(ConfigLayout, f),           \
     .width = sizeof(((ConfigLayout *)0)->f), .dst = offsetof(NcclConfig, f), .def = def_,      \
     .lo = lo_, .hi = hi_},
    NCCL_CONFIG_FIELDS(ROW)
#undef ROW
};

void nccl_say(char *why, size_t len, const char *fmt, ...) {
    va_list ap;
    if (!why || len == 0) return;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

static bool is_present(const FieldInfo *f, size_t size, unsigned version) {
    return f->off + f->width <= size && version >= f->since;
}

size_t nccl_config_min_size(unsigned version) {
    size_t need = HEADER_BYTES;
    for (int i = 0; i < NCCL_CFG_COUNT; i++) {
        const FieldInfo *f = &fields[i];
        if (f->since != 0 && version >= f->since && f->off + f->width > need)
            need = f->off + f->width;
    }
    return need;
}

/* "must be 0 or 1", "must be >= 1", "must be in [1, 3]", "must use only the bits of 0x3" */
static void explain_range(char *buf, size_t len, const FieldInfo *f) {
    if (f->kind == K_BITS || f->kind == K_BITS_ALL)
        snprintf(buf, len, "must use only the bits of 0x%x%s", (unsigned)f->hi,
                 f->kind == K_BITS_ALL ? " (or be INT_MAX)" : "");
    else if (f->lo == 0 && f->hi == 1)
        snprintf(buf, len, "must be 0 or 1");
    else if (f->hi == INT_MAX)
        snprintf(buf, len, "must be >= %d", f->lo);
    else
        snprintf(buf, len, "must be in [%d, %d]", f->lo, f->hi);
}

static bool int_valid(const FieldInfo *f, int v) {
    switch (f->kind) {
    case K_BITS_ALL:
        if (v == INT_MAX) return true;
        /* fall through */
    case K_BITS:
        return v >= 0 && (v & ~f->hi) == 0;
    default:
        return v >= f->lo && v <= f->hi;
    }
}

/* The longest netName or commName read: NCCL's names are short; garbage without a NUL nearby
 * must not be read for ever. */
#define NCCL_CFG_NAME_MAX 4096

/* A copy of the caller's string at p, read without trusting p: 0 and *out (malloc'd) on
 * success, EFAULT when p is not readable memory, ENAMETOOLONG past NCCL_CFG_NAME_MAX bytes,
 * ENOMEM. Reads page by page (a string may end just before an unmapped page). Where the kernel
 * refuses process_vm_readv (seccomp: ENOSYS, EPERM), the string is read directly, still
 * bounded. */
static int copy_user_str(const char *p, char **out) {
    char *buf = malloc(NCCL_CFG_NAME_MAX + 1);
    *out = NULL;
    if (!buf) return ENOMEM;
    const long page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
    size_t got = 0;
    while (got <= NCCL_CFG_NAME_MAX) {
        uintptr_t a = (uintptr_t)(p + got);
        size_t chunk = (size_t)page - (size_t)(a % (uintptr_t)page);
        if (chunk > NCCL_CFG_NAME_MAX + 1 - got) chunk = NCCL_CFG_NAME_MAX + 1 - got;
        struct iovec local = {buf + got, chunk}, remote = {(void *)a, chunk};
        ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (r < 0 && (errno == ENOSYS || errno == EPERM)) {
            size_t n = strnlen(p, NCCL_CFG_NAME_MAX + 1);   /* no safe way: bounded at least */
            memcpy(buf, p, n);
            got = n;
            buf[n] = 0;
            break;
        }
        if (r <= 0) {
            free(buf);
            return EFAULT;
        }
        void *nul = memchr(buf + got, 0, (size_t)r);
        got += (size_t)r;
        if (nul) {
            got = (size_t)((char *)nul - buf);
            break;
        }
    }
    if (got > NCCL_CFG_NAME_MAX) {
        free(buf);
        return ENAMETOOLONG;
    }
    *out = buf;
    return 0;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

void nccl_config_free(NcclConfig *c) {
    if (!c) return;
    free(c->netName);
    free(c->commName);
    c->netName = c->commName = NULL;
}

static void set_defaults(NcclConfig *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < NCCL_CFG_COUNT; i++)
        if (fields[i].kind != K_STR) memcpy((char *)c + fields[i].dst, &fields[i].def, sizeof(int));
}

ncclResult_t nccl_config_read(NcclConfig *out, const ncclConfig_t *cfg, char *why, size_t why_len) {
    const unsigned char *raw = (const unsigned char *)cfg;
    char range[64];
    size_t size;
    unsigned magic, version;

    set_defaults(out);
    if (!cfg) return ncclSuccess;
    memcpy(&size, raw + offsetof(ConfigLayout, size), sizeof size);
    if (size < HEADER_BYTES) {
        nccl_say(why, why_len, "ncclConfig_t.size is %zu: too small to hold size, magic and version "
            "(%zu bytes); was it set with NCCL_CONFIG_INITIALIZER?", size, (size_t)HEADER_BYTES);
        return ncclInvalidArgument;
    }
    memcpy(&magic, raw + offsetof(ConfigLayout, magic), sizeof magic);
    memcpy(&version, raw + offsetof(ConfigLayout, version), sizeof version);
    if (magic != NCCL_CONFIG_MAGIC) {
        nccl_say(why, why_len, "ncclConfig_t.magic is 0x%08x, not 0x%08x: the config was not set "
            "with NCCL_CONFIG_INITIALIZER", magic, NCCL_CONFIG_MAGIC);
        return ncclInvalidArgument;
    }
    if (size < nccl_config_min_size(version)) {
        nccl_say(why, why_len, "ncclConfig_t.size is %zu but version %u has %zu bytes of fields: "
            "size and version do not belong together", size, version,
            nccl_config_min_size(version));
        return ncclInvalidArgument;
    }
    out->size = size;
    out->version = version;

    for (int i = 0; i < NCCL_CFG_COUNT; i++) {
        const FieldInfo *f = &fields[i];
        if (!is_present(f, size, version)) continue;
        if (f->kind == K_STR) {
            const char *s;
            memcpy(&s, raw + f->off, sizeof s);
            if (s == NCCL_CONFIG_UNDEF_PTR) continue;
            char *copy;
            int e = copy_user_str(s, &copy);
            if (e) {
                if (e == ENOMEM)
                    nccl_say(why, why_len, "ncclConfig_t.%s: out of memory", f->name);
                else if (e == EFAULT)
                    nccl_say(why, why_len, "ncclConfig_t.%s is %p, which is not readable memory "
                        "(set it to a C string or NULL, or start from NCCL_CONFIG_INITIALIZER)",
                        f->name, (const void *)s);
                else
                    nccl_say(why, why_len, "ncclConfig_t.%s at %p has no NUL within %d bytes: "
                        "not a C string", f->name, (const void *)s, NCCL_CFG_NAME_MAX);
                nccl_config_free(out);
                return e == ENOMEM ? ncclSystemError : ncclInvalidArgument;
            }
            memcpy((char *)out + f->dst, &copy, sizeof copy);
        } else {
            int v;
            memcpy(&v, raw + f->off, sizeof v);
            if (v == NCCL_CONFIG_UNDEF_INT) continue;
            if (!int_valid(f, v)) {
                explain_range(range, sizeof range, f);
                nccl_say(why, why_len, "ncclConfig_t.%s is %d: %s (or NCCL_CONFIG_UNDEF_INT)", f->name,
                    v, range);
                nccl_config_free(out);
                return ncclInvalidArgument;
            }
            memcpy((char *)out + f->dst, &v, sizeof v);
        }
        out->given |= 1u << i;
    }

    /* minCTAs above maxCTAs is an error when the caller chose both; a minCTAs alone raises the
     * default maxCTAs to it (the caller asked for at least that many) */
    if (out->minCTAs > out->maxCTAs) {
        if (!(out->given & (1u << NCCL_CFG_maxCTAs))) {
            out->maxCTAs = out->minCTAs;
        } else {
            nccl_say(why, why_len, "ncclConfig_t.minCTAs is %d but maxCTAs is %d: minCTAs must not "
                "exceed maxCTAs", out->minCTAs, out->maxCTAs);
            nccl_config_free(out);
            return ncclInvalidArgument;
        }
    }
    return ncclSuccess;
}

ncclResult_t nccl_config_dup(NcclConfig *dst, const NcclConfig *src, char *why, size_t why_len) {
    *dst = *src;
    dst->netName = dst->commName = NULL;
    if ((src->netName && !(dst->netName = dup_str(src->netName))) ||
        (src->commName && !(dst->commName = dup_str(src->commName)))) {
        nccl_say(why, why_len, "ncclConfig_t: out of memory copying the net or comm name");
        nccl_config_free(dst);
        return ncclSystemError;
    }
    return ncclSuccess;
}

void nccl_config_to_abi(const NcclConfig *c, ncclConfig_t *out) {
    ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
    *out = init;
    for (int i = 0; i < NCCL_CFG_COUNT; i++) {
        const FieldInfo *f = &fields[i];
        if (!(c->given & (1u << i)) || f->off + f->width > sizeof *out) continue;
        memcpy((char *)out + f->off, (const char *)c + f->dst, f->width);
    }
}

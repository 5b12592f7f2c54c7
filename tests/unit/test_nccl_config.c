/*
 * test_nccl_config.c - nccl_config_read (runtime/nccl/nccl_config.c) on ncclConfig_t byte images
 * laid out as NCCL 2.17, 2.27, 2.28, 2.29, 2.30, 2.31 and a future version build them: only the
 * fields the caller's size and version include are read (the bytes after `size` are filled with
 * garbage that would fail validation), defaults fill the rest, and bad headers and values fail
 * with messages that name the field and the value. String fields are read without trusting
 * their pointers (issue 22 item 11: a bad commName crashed ncclCommInitRankConfig): an unmapped
 * address or a string with no NUL within 4096 bytes is ncclInvalidArgument; and without a CUDA
 * driver ncclCommInitRank is ncclSystemError, as in NCCL.
 */
#include "../harness.h"
#include "nccl/nccl_config.h"

#include "cuda/cuda_driver.h"
#include "mscclrt.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Offsets written out by hand (x86-64 / aarch64 LP64), independently of nccl_config.c's table. */
enum {
    O_SIZE = 0, O_MAGIC = 8, O_VERSION = 12, O_BLOCKING = 16, O_CGA = 20, O_MINCTAS = 24,
    O_MAXCTAS = 28, O_NETNAME = 32, O_SPLITSHARE = 40, O_TRAFFIC = 44, O_COMMNAME = 48,
    O_COLLNET = 56, O_CTAPOLICY = 60, O_SHRINKSHARE = 64, O_NVLSCTAS = 68,
    O_NCHPERPEER = 72, O_NVLCENTRIC = 76,                               /* 2.28 */
    O_GRAPHUSAGE = 80, O_NUMRMACTX = 84,                                /* 2.29 */
    O_MAXP2P = 88,                                                      /* 2.30 */
    O_GRAPHORDER = 92,                                                  /* 2.30.5 */
    O_LAUNCHIMPL = 96, O_NUMRMASIG = 100, O_RMAEAGER = 104, O_HOSTCFT = 108, O_NVLSHOST = 112,
    IMAGE = 256                         /* room for a future, bigger struct */
};

static unsigned char img[IMAGE];

static void put_int(size_t off, int v) { memcpy(img + off, &v, sizeof v); }
static void put_ptr(size_t off, const char *p) { memcpy(img + off, &p, sizeof p); }

/* A config as NCCL_CONFIG_INITIALIZER of that version makes it (every field undefined), with
 * garbage after `size` bytes. `fields_end` is where the version's last field ends. */
static const ncclConfig_t *image(unsigned version, size_t size, size_t fields_end) {
    memset(img, 0x7f, sizeof img);      /* 0x7f7f7f7f: out of range for every int field */
    memcpy(img + O_SIZE, &size, sizeof size);
    put_int(O_MAGIC, (int)0xcafebeef);
    put_int(O_VERSION, (int)version);
    for (size_t off = O_BLOCKING; off < fields_end; off += 4) {
        if (off == O_NETNAME || off == O_COMMNAME) {
            put_ptr(off, NULL);
            off += 4;
        } else {
            put_int(off, NCCL_CONFIG_UNDEF_INT);
        }
    }
    return (const ncclConfig_t *)img;
}

static char why[256];

static ncclResult_t rd(NcclConfig *c, const ncclConfig_t *cfg) {
    why[0] = 0;
    return nccl_config_read(c, cfg, why, sizeof why);
}

static void check_defaults_from(const NcclConfig *c, int first_field) {
    /* every field from first_field on must hold its default */
    if (first_field <= NCCL_CFG_blocking) CHECK_EQ_INT(1, c->blocking);
    if (first_field <= NCCL_CFG_splitShare) CHECK_EQ_INT(0, c->splitShare);
    if (first_field <= NCCL_CFG_nChannelsPerNetPeer)
        CHECK_EQ_INT(NCCL_CFG_AUTO, c->nChannelsPerNetPeer);
    if (first_field <= NCCL_CFG_nvlinkCentricSched) CHECK_EQ_INT(0, c->nvlinkCentricSched);
    if (first_field <= NCCL_CFG_graphUsageMode) CHECK_EQ_INT(2, c->graphUsageMode);
    if (first_field <= NCCL_CFG_numRmaCtx) CHECK_EQ_INT(1, c->numRmaCtx);
    if (first_field <= NCCL_CFG_maxP2pPeers) CHECK_EQ_INT(NCCL_CFG_AUTO, c->maxP2pPeers);
    if (first_field <= NCCL_CFG_graphStreamOrdering)
        CHECK_EQ_INT(NCCL_CFG_AUTO, c->graphStreamOrdering);
    if (first_field <= NCCL_CFG_launchOrderImplicit)
        CHECK_EQ_INT(NCCL_CFG_AUTO, c->launchOrderImplicit);
    if (first_field <= NCCL_CFG_numRmaSig) CHECK_EQ_INT(1, c->numRmaSig);
    if (first_field <= NCCL_CFG_rmaEagerInit) CHECK_EQ_INT(0, c->rmaEagerInit);
    if (first_field <= NCCL_CFG_hostCftMode) CHECK_EQ_INT(NCCL_CFG_AUTO, c->hostCftMode);
    if (first_field <= NCCL_CFG_nvlsHostMode) CHECK_EQ_INT(0, c->nvlsHostMode);
}

int main(void) {
    NcclConfig c;

    TEST("nccl_config/none", {
        CHECK_EQ_INT(ncclSuccess, rd(&c, NULL));
        CHECK_EQ_INT(0, c.given);
        CHECK_EQ_INT(0, c.version);
        CHECK_EQ_INT(4, c.cgaClusterSize);
        CHECK_EQ_INT(1, c.minCTAs);
        CHECK_EQ_INT(NCCL_CFG_MAX_CTAS, c.maxCTAs);
        CHECK(c.netName == NULL && c.commName == NULL);
        CHECK_EQ_INT(NCCL_CFG_AUTO, c.trafficClass);
        CHECK_EQ_INT(NCCL_CTA_POLICY_DEFAULT, c.CTAPolicy);
        check_defaults_from(&c, 0);
        nccl_config_free(&c);
    });

    TEST("nccl_config/our_initializer", {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        CHECK_EQ_INT(80, sizeof cfg);
        CHECK_EQ_INT(ncclSuccess, rd(&c, &cfg));
        CHECK_EQ_INT(22809, c.version);
        CHECK_EQ_INT(0, c.given);
        check_defaults_from(&c, 0);
        nccl_config_free(&c);
    });

    TEST("nccl_config/v21700", {       /* 2.17: blocking .. netName; 40 bytes */
        const ncclConfig_t *cfg = image(21700, 40, 40);
        put_int(O_BLOCKING, 0);
        put_ptr(O_NETNAME, "Socket");
        CHECK_EQ_INT(ncclSuccess, rd(&c, cfg));
        CHECK_STR("", why);
        CHECK_EQ_INT(0, c.blocking);
        CHECK_STR("Socket", c.netName);
        CHECK(c.netName != (const char *)"Socket");     /* a copy, owned */
        CHECK(c.commName == NULL);
        CHECK_EQ_INT((1u << NCCL_CFG_blocking) | (1u << NCCL_CFG_netName), c.given);
        check_defaults_from(&c, NCCL_CFG_splitShare);
        nccl_config_free(&c);
        CHECK(c.netName == NULL);
    });

    TEST("nccl_config/v22700", {       /* 2.27: through nvlsCTAs; 72 bytes */
        const ncclConfig_t *cfg = image(22700, 72, 72);
        put_int(O_BLOCKING, 0);
        put_int(O_MINCTAS, 2);
        put_int(O_MAXCTAS, 8);
        put_ptr(O_COMMNAME, "trainer");
        put_int(O_SPLITSHARE, 1);
        put_int(O_TRAFFIC, 3);
        put_int(O_COLLNET, 1);
        put_int(O_CTAPOLICY, NCCL_CTA_POLICY_ZERO | NCCL_CTA_POLICY_EFFICIENCY);
        put_int(O_SHRINKSHARE, 1);
        put_int(O_NVLSCTAS, 16);
        CHECK_EQ_INT(ncclSuccess, rd(&c, cfg));
        CHECK_STR("", why);
        CHECK_EQ_INT(72, c.size);
        CHECK_EQ_INT(22700, c.version);
        CHECK_EQ_INT(0, c.blocking);
        CHECK_EQ_INT(2, c.minCTAs);
        CHECK_EQ_INT(8, c.maxCTAs);
        CHECK_STR("trainer", c.commName);
        CHECK_EQ_INT(1, c.splitShare);
        CHECK_EQ_INT(3, c.trafficClass);
        CHECK_EQ_INT(1, c.collnetEnable);
        CHECK_EQ_INT(3, c.CTAPolicy);
        CHECK_EQ_INT(1, c.shrinkShare);
        CHECK_EQ_INT(16, c.nvlsCTAs);
        check_defaults_from(&c, NCCL_CFG_nChannelsPerNetPeer);   /* the garbage was not read */
        nccl_config_free(&c);
    });

    TEST("nccl_config/v22800", {       /* 2.28: + nChannelsPerNetPeer, nvlinkCentricSched; 80 */
        const ncclConfig_t *cfg = image(22800, 80, 80);
        put_int(O_NCHPERPEER, 4);
        put_int(O_NVLCENTRIC, 1);
        CHECK_EQ_INT(ncclSuccess, rd(&c, cfg));
        CHECK_STR("", why);
        CHECK_EQ_INT(4, c.nChannelsPerNetPeer);
        CHECK_EQ_INT(1, c.nvlinkCentricSched);
        CHECK_EQ_INT((1u << NCCL_CFG_nChannelsPerNetPeer) | (1u << NCCL_CFG_nvlinkCentricSched),
                     c.given);
        check_defaults_from(&c, NCCL_CFG_graphUsageMode);
        ncclConfig_t back;
        nccl_config_to_abi(&c, &back);
        CHECK_EQ_INT(sizeof back, back.size);
        CHECK_EQ_INT(0xcafebeef, back.magic);
        CHECK_EQ_INT(NCCL_VERSION_CODE, back.version);
        CHECK_EQ_INT(4, back.nChannelsPerNetPeer);
        CHECK_EQ_INT(1, back.nvlinkCentricSched);
        CHECK_EQ_INT(NCCL_CONFIG_UNDEF_INT, back.blocking);     /* not given: left to NCCL */
        CHECK(back.netName == NULL);
        nccl_config_free(&c);
    });

    TEST("nccl_config/v22900", {       /* 2.29: + graphUsageMode, numRmaCtx; 88 */
        const ncclConfig_t *cfg = image(22900, 88, 88);
        put_int(O_GRAPHUSAGE, 1);
        put_int(O_NUMRMACTX, 0);
        CHECK_EQ_INT(ncclSuccess, rd(&c, cfg));
        CHECK_STR("", why);
        CHECK_EQ_INT(1, c.graphUsageMode);
        CHECK_EQ_INT(0, c.numRmaCtx);
        check_defaults_from(&c, NCCL_CFG_maxP2pPeers);
        nccl_config_free(&c);
    });

    TEST("nccl_config/v23000", {       /* 2.30.0: + maxP2pPeers; sizeof 96 with 4 bytes padding */
        const ncclConfig_t *cfg = image(23000, 96, 92);
        put_int(O_MAXP2P, 8);
        CHECK_EQ_INT(ncclSuccess, rd(&c, cfg));
        CHECK_STR("", why);
        CHECK_EQ_INT(8, c.maxP2pPeers);
        check_defaults_from(&c, NCCL_CFG_graphStreamOrdering);  /* padding is not a 2.30.5 field */
        nccl_config_free(&c);
    });

    TEST("nccl_config/v23100", {       /* 2.31/2.32: nine fields after 2.28's; sizeof 120 */
        const ncclConfig_t *cfg = image(23100, 120, 116);
        put_int(O_NCHPERPEER, 2);
        put_int(O_GRAPHUSAGE, 0);
        put_int(O_NUMRMACTX, 2);
        put_int(O_MAXP2P, 16);
        put_int(O_GRAPHORDER, 1);
        put_int(O_LAUNCHIMPL, 0);
        put_int(O_NUMRMASIG, 5);
        put_int(O_RMAEAGER, 1);
        put_int(O_HOSTCFT, 3);
        put_int(O_NVLSHOST, INT32_MAX);
        CHECK_EQ_INT(ncclSuccess, rd(&c, cfg));
        CHECK_STR("", why);
        CHECK_EQ_INT(2, c.nChannelsPerNetPeer);
        CHECK_EQ_INT(0, c.graphUsageMode);
        CHECK_EQ_INT(2, c.numRmaCtx);
        CHECK_EQ_INT(16, c.maxP2pPeers);
        CHECK_EQ_INT(1, c.graphStreamOrdering);
        CHECK_EQ_INT(0, c.launchOrderImplicit);
        CHECK_EQ_INT(5, c.numRmaSig);
        CHECK_EQ_INT(1, c.rmaEagerInit);
        CHECK_EQ_INT(3, c.hostCftMode);
        CHECK_EQ_INT(INT32_MAX, c.nvlsHostMode);
        CHECK_EQ_INT(1, c.blocking);
        nccl_config_free(&c);
    });

    TEST("nccl_config/future", {       /* a newer NCCL: more fields after 2.31's are ignored */
        const ncclConfig_t *cfg = image(23500, 160, 160);
        put_int(O_NVLSHOST, 2);
        CHECK_EQ_INT(ncclSuccess, rd(&c, cfg));
        CHECK_STR("", why);
        CHECK_EQ_INT(2, c.nvlsHostMode);
        CHECK_EQ_INT(160, c.size);
        nccl_config_free(&c);
    });

    TEST("nccl_config/min_size", {
        CHECK_EQ_INT(16, nccl_config_min_size(21300));
        CHECK_EQ_INT(20, nccl_config_min_size(21400));
        CHECK_EQ_INT(40, nccl_config_min_size(21700));
        CHECK_EQ_INT(72, nccl_config_min_size(22700));
        CHECK_EQ_INT(80, nccl_config_min_size(22800));
        CHECK_EQ_INT(80, nccl_config_min_size(22809));
        CHECK_EQ_INT(88, nccl_config_min_size(22900));
        CHECK_EQ_INT(92, nccl_config_min_size(23000));
        CHECK_EQ_INT(96, nccl_config_min_size(23005));
        CHECK_EQ_INT(116, nccl_config_min_size(23100));
        CHECK_EQ_INT(116, nccl_config_min_size(99999));
    });

    TEST("nccl_config/too_small", {
        const ncclConfig_t *cfg = image(22800, 8, 80);
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        CHECK_CONTAINS(why, "ncclConfig_t.size is 8");
        cfg = image(22800, 0, 80);
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        CHECK_CONTAINS(why, "ncclConfig_t.size is 0");
        cfg = image(22800, 72, 72);     /* a 2.27-sized struct claiming 2.28 */
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        CHECK_CONTAINS(why, "size is 72 but version 22800 has 80 bytes");
        cfg = image(23100, 96, 96);
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        CHECK_CONTAINS(why, "version 23100 has 116 bytes");
        CHECK(c.netName == NULL && c.commName == NULL);
    });

    TEST("nccl_config/bad_magic", {
        const ncclConfig_t *cfg = image(22800, 80, 80);
        put_int(O_MAGIC, 0x12345678);
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        CHECK_CONTAINS(why, "ncclConfig_t.magic is 0x12345678, not 0xcafebeef");
    });

    TEST("nccl_config/bad_values", {
        const ncclConfig_t *cfg = image(23100, 120, 116);
        put_int(O_BLOCKING, 7);
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        CHECK_STR("ncclConfig_t.blocking is 7: must be 0 or 1 (or NCCL_CONFIG_UNDEF_INT)", why);
        cfg = image(23100, 120, 116);
        put_ptr(O_NETNAME, "IB");       /* a copied string must not leak on a later failure */
        put_int(O_MINCTAS, 0);
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        CHECK_STR("ncclConfig_t.minCTAs is 0: must be >= 1 (or NCCL_CONFIG_UNDEF_INT)", why);
        CHECK(c.netName == NULL);
        cfg = image(23100, 120, 116);
        put_int(O_MINCTAS, 8);
        put_int(O_MAXCTAS, 4);
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        CHECK_CONTAINS(why, "minCTAs is 8 but maxCTAs is 4");
        cfg = image(23100, 120, 116);
        put_int(O_CTAPOLICY, 4);
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        CHECK_STR("ncclConfig_t.CTAPolicy is 4: must use only the bits of 0x3 "
                  "(or NCCL_CONFIG_UNDEF_INT)", why);
        cfg = image(23100, 120, 116);
        put_int(O_NCHPERPEER, 65);
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        CHECK_CONTAINS(why, "nChannelsPerNetPeer is 65: must be in [1, 64]");
        cfg = image(23100, 120, 116);
        put_int(O_HOSTCFT, 0);
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        CHECK_CONTAINS(why, "hostCftMode is 0: must be in [1, 3]");
        cfg = image(23100, 120, 116);
        put_int(O_NVLSHOST, 4);
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        CHECK_CONTAINS(why, "nvlsHostMode is 4: must use only the bits of 0x3 (or be INT_MAX)");
        cfg = image(22900, 88, 88);
        put_int(O_GRAPHUSAGE, 3);
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        CHECK_CONTAINS(why, "graphUsageMode is 3: must be in [0, 2]");
    });

    TEST("nccl_config/min_ctas_alone", {   /* minCTAs above the default maxCTAs raises it */
        const ncclConfig_t *cfg = image(22800, 80, 80);
        put_int(O_MINCTAS, 100);
        CHECK_EQ_INT(ncclSuccess, rd(&c, cfg));
        CHECK_EQ_INT(100, c.minCTAs);
        CHECK_EQ_INT(100, c.maxCTAs);
        nccl_config_free(&c);
    });

    TEST("nccl_config/dup", {
        NcclConfig d;
        const ncclConfig_t *cfg = image(22800, 80, 80);
        put_ptr(O_NETNAME, "IB");
        put_ptr(O_COMMNAME, "pg0");
        CHECK_EQ_INT(ncclSuccess, rd(&c, cfg));
        CHECK_EQ_INT(ncclSuccess, nccl_config_dup(&d, &c, why, sizeof why));
        CHECK_STR("IB", d.netName);
        CHECK_STR("pg0", d.commName);
        CHECK(d.netName != c.netName && d.commName != c.commName);
        CHECK_EQ_INT(c.given, d.given);
        nccl_config_free(&c);
        CHECK_STR("pg0", d.commName);
        nccl_config_free(&d);
        nccl_config_free(&d);           /* twice is harmless */
    });

    TEST("nccl_config/bad_pointers", {
        const long page = sysconf(_SC_PAGESIZE);
        char *two = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
        CHECK(two != MAP_FAILED);
        if (two != MAP_FAILED) {
            CHECK_EQ_INT(0, munmap(two + page, (size_t)page));   /* the second page: unmapped */
            const ncclConfig_t *cfg = image(22800, 80, 80);
            put_ptr(O_COMMNAME, (const char *)1);
            CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
            CHECK(strstr(why, "ncclConfig_t.commName is 0x1, which is not readable memory") != NULL);
            put_ptr(O_COMMNAME, two + page);
            CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
            CHECK(strstr(why, "not readable memory") != NULL);
            put_ptr(O_COMMNAME, NULL);
            put_ptr(O_NETNAME, two + page);
            CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
            CHECK(strstr(why, "ncclConfig_t.netName") != NULL);
            /* a name that ends just before the unmapped page is fine */
            memcpy(two + page - 4, "pg0", 4);
            put_ptr(O_NETNAME, NULL);
            put_ptr(O_COMMNAME, two + page - 4);
            CHECK_EQ_INT(ncclSuccess, rd(&c, cfg));
            CHECK_STR("pg0", c.commName);
            nccl_config_free(&c);
            /* no NUL before the unmapped page: unreadable, not a crash */
            memset(two, 'x', (size_t)page);
            put_ptr(O_COMMNAME, two);
            CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
            munmap(two, (size_t)page);
        }
        /* no NUL within the 4096-byte bound */
        static char longname[10000];
        memset(longname, 'y', sizeof longname - 1);
        const ncclConfig_t *cfg = image(22800, 80, 80);
        put_ptr(O_COMMNAME, longname);
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        CHECK(strstr(why, "no NUL within 4096 bytes") != NULL);
        longname[4097] = 0;                 /* 4097 bytes: one too many */
        CHECK_EQ_INT(ncclInvalidArgument, rd(&c, cfg));
        longname[4096] = 0;                 /* 4096: the longest name read */
        CHECK_EQ_INT(ncclSuccess, rd(&c, cfg));
        CHECK_EQ_INT(4096, (long long)strlen(c.commName));
        nccl_config_free(&c);
        /* the whole call: refused with the reason, no crash */
        ncclUniqueId id;
        memset(&id, 0, sizeof id);
        ncclComm_t comm = NULL;
        put_ptr(O_COMMNAME, (const char *)16);
        CHECK_EQ_INT(ncclInvalidArgument, ncclCommInitRankConfig(&comm, 1, id, 0, (ncclConfig_t *)cfg));
        CHECK(comm == NULL);
        CHECK(strstr(ncclGetLastError(NULL), "commName is 0x10") != NULL);
    });

    TEST("nccl_config/no_cuda_driver", {
        if (cu_load() == MSCCLRT_SUCCESS) {
            printf("(a CUDA driver is present: the no-driver result is not checked)\n");
        } else {
            ncclUniqueId id;
            ncclComm_t comm = NULL;
            CHECK_EQ_INT(ncclSuccess, ncclGetUniqueId(&id));
            CHECK_EQ_INT(ncclSystemError, ncclCommInitRank(&comm, 1, id, 0));
            CHECK(comm == NULL);
            void *p = NULL;
            CHECK_EQ_INT(ncclSystemError, ncclMemAlloc(&p, 4096));
        }
    });

    return harness_report();
}

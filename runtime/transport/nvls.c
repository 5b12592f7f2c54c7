/*
 * nvls.c - switch (NVLS multicast) channels: one multicast object per (context, switch channel),
 * created by the group's root, joined by every member's device, bound to each member's cuMem
 * allocation of the channel's buffer and mapped for its kernels (transport.h, "NVLS").
 * Unreachable unless MSCCLRT_ENABLE_NVLS=1 and the driver resolved the multicast API: every
 * function that reaches a cuMulticast* entry checks both first (nvls_gate).
 */
#include "transport/transport.h"
#include "core/err.h"
#include "core/intmath.h"
#include "core/log.h"
#include "core/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NVLS_MAGIC 0x534c564eu        /* "NVLS" */
#define NVLS_TAG_UP   0x4e55          /* member -> root: its binding */
#define NVLS_TAG_DOWN 0x4e44          /* root -> member: the object (its fd goes through FdPass) */
#define NVLS_FD_KEY   0x4e564c5300000000ull

/* One multicast object; shared by the members' bindings in one process (refs), else refs = 1. */
typedef struct NvlsGroup {
    CuMemHandle mc;
    bool created;                     /* mc is a live handle (created or imported) */
    size_t size;                      /* object size (RECOMMENDED granularity multiple) */
    size_t gran;                      /* that granularity: the VA alignment of mappings */
    int refs;                         /* atomic */
} NvlsGroup;

/* One rank's switch channel. */
typedef struct NvlsBind {
    NvlsGroup *grp;                   /* NULL until its group exists */
    CuDevice dev;
    bool added;                       /* cuMulticastAddDevice done for dev */
    size_t bound;                     /* bytes bound at multicast offset 0; 0 = not bound */
    CuDevPtr va;                      /* reserved range of the multicast mapping */
    size_t va_len;
    bool mapped;
} NvlsBind;

struct NvlsCtx {
    int nsw;
    NvlsBind *b;                      /* [nsw] */
    /* the cuMem scratch (nvls_scratch_alloc) */
    CuMemHandle sh;
    bool sh_live, smapped;
    CuDevPtr sva;
    size_t slen;
};

/* ---- plan logic (no driver) ---------------------------------------------------------------------- */

bool nvls_plan_uses(const Plan *p) {
    for (int r = 0; p && r < p->ngpus; r++)
        if (p->gpus[r].nswitch > 0) return true;
    return false;
}

bool nvls_plan_binds(const Plan *p, int rank, PlanBuf b) {
    if (!p || rank < 0 || rank >= p->ngpus) return false;
    for (int s = 0; s < p->gpus[rank].nswitch; s++)
        if (p->gpus[rank].switches[s].buf == b) return true;
    return false;
}

static bool in_group(const PlanSwitch *s, int rank) {
    for (int i = 0; i < s->nranks; i++)
        if (s->ranks[i] == rank) return true;
    return false;
}

int nvls_match(const Plan *p, int rank, int sw, int member) {
    if (!p || rank < 0 || rank >= p->ngpus || member < 0 || member >= p->ngpus) return -1;
    const PlanGpu *g = &p->gpus[rank];
    if (sw < 0 || sw >= g->nswitch || !in_group(&g->switches[sw], member)) return -1;
    if (member == rank) return sw;
    int k = 0;
    for (int s = 0; s < sw; s++) k += in_group(&g->switches[s], member);
    const PlanGpu *gm = &p->gpus[member];
    for (int s = 0; s < gm->nswitch; s++)
        if (in_group(&gm->switches[s], rank) && k-- == 0) return s;
    return -1;
}

mscclrt_result nvls_chan(const Plan *p, int rank, int sw, NvlsChan *out) {
    memset(out, 0, sizeof *out);
    if (!p || rank < 0 || rank >= p->ngpus || sw < 0 || sw >= p->gpus[rank].nswitch)
        return rt_fail(MSCCLRT_ERR_INTERNAL, "nvls: rank %d switch channel %d does not exist", rank, sw);
    const PlanSwitch *s = &p->gpus[rank].switches[sw];
    out->buf = s->buf;
    out->nmembers = s->nranks;
    out->members = s->ranks;
    out->pos = -1;
    out->root = rank;   /* until the group is known: never a message to a stranger */
    if (s->nranks < 1)
        return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s': rank %d switch channel %d has no ranks",
                       PLAN_ESC(p->name), rank, sw);
    out->root = s->ranks[0];
    for (int i = 0; i < s->nranks; i++) {
        int q = s->ranks[i];
        if (q == rank) out->pos = i;
        int qs = nvls_match(p, rank, sw, q);
        const PlanSwitch *m = qs >= 0 ? &p->gpus[q].switches[qs] : NULL;
        bool same = m && m->nranks == s->nranks && m->buf == s->buf;
        for (int j = 0; same && j < s->nranks; j++) same = m->ranks[j] == s->ranks[j];
        if (!same)
            return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s': rank %d switch channel %d: rank %d does not "
                           "declare the same switch channel (same ranks, same buffer, same order); "
                           "multicast groups are created collectively", PLAN_ESC(p->name), rank,
                           sw, q);
        if (q == out->root) out->root_sw = qs;
    }
    if (out->pos < 0)
        return rt_fail(MSCCLRT_ERR_PLAN, "plan '%s': rank %d switch channel %d: its group does not "
                       "contain rank %d itself", PLAN_ESC(p->name), rank, sw, rank);
    return MSCCLRT_SUCCESS;
}

bool nvls_round_up(size_t n, size_t gran, size_t *out) {
    if (gran == 0) return false;
    size_t r = n % gran;
    if (r == 0) {
        *out = n;
        return true;
    }
    if (n > SIZE_MAX - (gran - r)) return false;
    *out = n + (gran - r);
    return true;
}

mscclrt_result nvls_check_range(int rank, int sw, const char *what, CuDevPtr base, size_t bytes,
                                size_t gran) {
    if (gran == 0)
        return rt_fail(MSCCLRT_ERR_INTERNAL, "nvls: rank %d: multicast granularity is 0", rank);
    if (base % gran == 0 && bytes % gran == 0 && bytes > 0) return MSCCLRT_SUCCESS;
    return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: switch channel %d binds the %s allocation "
                   "[%#llx, +%zu bytes) to a multicast object, but the driver binds whole multicast "
                   "granules of %zu bytes: its %s is not a multiple of %zu; allocate the buffer with "
                   "cuMemCreate at a size that is a multiple of %zu and map it at an address aligned "
                   "to it (cuMemAddressReserve alignment)", rank, sw, what, base, bytes, gran,
                   base % gran ? "address" : "size", gran, gran);
}

/* ---- the gate ------------------------------------------------------------------------------------- */

mscclrt_result nvls_check_enabled(const Plan *p, int rank, CuDevice dev) {
    long long on;
    TRY(param_int(PARAM_ENABLE_NVLS, &on));
    if (on != 1)
        return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "plan '%s' uses switch (NVLS multicast) channels, "
                       "which are off unless MSCCLRT_ENABLE_NVLS=1", PLAN_ESC(p->name));
    TRY(cu_load());
    if (!cu.multicast)
        return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "plan '%s' uses switch (NVLS multicast) channels, but "
                       "the CUDA driver (%d.%d) lacks the multicast API (cuMulticastCreate and "
                       "friends: CUDA 12.1 or later)", PLAN_ESC(p->name), cu.version / 1000,
                       cu.version % 1000 / 10);
    int supported = 0;
    TRY(cu_check(cu.cuDeviceGetAttribute(&supported, CU_ATTR_MULTICAST_SUPPORTED, dev),
                 "cuDeviceGetAttribute(MULTICAST_SUPPORTED)"));
    if (!supported)
        return rt_fail(MSCCLRT_ERR_UNAVAILABLE, "plan '%s' uses switch (NVLS multicast) channels, but "
                       "rank %d's device %d does not support multicast "
                       "(CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is 0: NVLS needs NVSwitch-connected "
                       "GPUs of sm_90 or later with the fabric manager running)",
                       PLAN_ESC(p->name), rank, (int)dev);
    return MSCCLRT_SUCCESS;
}

/* Every function below that calls a multicast entry passes here first. */
static mscclrt_result nvls_gate(const char *where) {
    long long on;
    TRY(param_int(PARAM_ENABLE_NVLS, &on));
    if (on != 1 || !cu.multicast || !cu.cuMulticastCreate)
        return rt_fail(MSCCLRT_ERR_INTERNAL, "%s: multicast setup reached while NVLS is off "
                       "(MSCCLRT_ENABLE_NVLS=%lld, driver multicast API %s)", where,
                       on, cu.multicast ? "resolved" : "not resolved");
    return MSCCLRT_SUCCESS;
}

/* ---- contexts ------------------------------------------------------------------------------------- */

static mscclrt_result ctx_get(NvlsCtx **nv, int nsw) {
    if (*nv) {
        if ((*nv)->nsw != nsw)
            return rt_fail(MSCCLRT_ERR_INTERNAL, "nvls: context made for %d switch channels, used "
                           "for %d", (*nv)->nsw, nsw);
        return MSCCLRT_SUCCESS;
    }
    NvlsCtx *x = calloc(1, sizeof *x);
    if (x && nsw > 0 && !(x->b = calloc((size_t)nsw, sizeof *x->b))) {
        free(x);
        x = NULL;
    }
    if (!x) return rt_fail(MSCCLRT_ERR_SYSTEM, "nvls: out of memory for %d switch channels", nsw);
    x->nsw = nsw;
    *nv = x;
    return MSCCLRT_SUCCESS;
}

CuDevPtr nvls_mc_addr(const NvlsCtx *nv, int sw) {
    if (!nv || sw < 0 || sw >= nv->nsw || !nv->b[sw].mapped) return 0;
    return nv->b[sw].va;
}

static void group_unref(NvlsGroup *g) {
    if (!g || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    if (g->created) cu.cuMemRelease(g->mc);
    free(g);
}

void nvls_ctx_free(NvlsCtx *x) {
    if (!x) return;
    /* unbind, unmap, release: in that order, then the memory that was bound */
    for (int s = 0; s < x->nsw; s++) {
        NvlsBind *b = &x->b[s];
        if (b->bound && b->grp && cu.cuMulticastUnbind) {
            CuResult r = cu.cuMulticastUnbind(b->grp->mc, b->dev, 0, b->bound);
            if (r != CU_OK) LOG_WARN("nvls: cuMulticastUnbind of switch channel %d failed (%d)", s, r);
        }
        b->bound = 0;
    }
    for (int s = 0; s < x->nsw; s++) {
        NvlsBind *b = &x->b[s];
        if (b->mapped) cu.cuMemUnmap(b->va, b->va_len);
        if (b->va) cu.cuMemAddressFree(b->va, b->va_len);
        group_unref(b->grp);
    }
    if (x->smapped) cu.cuMemUnmap(x->sva, x->slen);
    if (x->sva) cu.cuMemAddressFree(x->sva, x->slen);
    if (x->sh_live) cu.cuMemRelease(x->sh);
    free(x->b);
    free(x);
}

/* ---- memory ----------------------------------------------------------------------------------------- */

static mscclrt_result mc_gran(int ndev, size_t size, int option, size_t *g) {
    CuMulticastObjectProp mp = {.numDevices = (unsigned)(ndev > 0 ? ndev : 1), .size = size,
                                .handleTypes = CU_MEM_HANDLE_POSIX_FD, .flags = 0};
    *g = 0;
    TRY(cu_check(cu.cuMulticastGetGranularity(g, &mp, option), "cuMulticastGetGranularity"));
    if (*g == 0) return rt_fail(MSCCLRT_ERR_CUDA, "cuMulticastGetGranularity returned 0");
    return MSCCLRT_SUCCESS;
}

mscclrt_result nvls_scratch_alloc(NvlsCtx **nv, const Plan *p, int rank, int ordinal,
                                  size_t bytes, const int *access, int naccess, CuDevPtr *ptr) {
    TRY(nvls_gate("nvls_scratch_alloc"));
    *ptr = 0;
    TRY(ctx_get(nv, p->gpus[rank].nswitch));
    NvlsCtx *x = *nv;
    if (x->sh_live)
        return rt_fail(MSCCLRT_ERR_INTERNAL, "nvls: rank %d: scratch allocated twice", rank);
    int ndev = 1;
    for (int s = 0; s < p->gpus[rank].nswitch; s++)
        if (p->gpus[rank].switches[s].buf == PLAN_BUF_SCRATCH && p->gpus[rank].switches[s].nranks > ndev)
            ndev = p->gpus[rank].switches[s].nranks;
    CuMemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOC_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_POSIX_FD;   /* the IPC transport exports it */
    prop.location.type = CU_MEM_LOC_DEVICE;
    prop.location.id = ordinal;
    size_t ag = 0, mg = 0, len = 0;
    TRY(cu_check(cu.cuMemGetAllocationGranularity(&ag, &prop, CU_MEM_GRAN_MINIMUM),
                 "cuMemGetAllocationGranularity(scratch)"));
    TRY(mc_gran(ndev, bytes, CU_MC_GRAN_MINIMUM, &mg));
    if (ag == 0) ag = 1;
    const size_t gran = (size_t)rt_lcm(ag, mg);   /* both granules; 0 on overflow */
    if (gran == 0 || !nvls_round_up(bytes, gran, &len) || len == 0)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: scratch of %zu bytes cannot be rounded to "
                       "the multicast granularity %zu", rank, bytes, gran);
    char what[160];
    snprintf(what, sizeof what, "rank %d: cuMemCreate(multicast scratch, %zu bytes on device %d)",
             rank, len, ordinal);
    TRY(cu_check(cu.cuMemCreate(&x->sh, len, &prop, 0), what));
    x->sh_live = true;
    x->slen = len;
    TRY(cu_check(cu.cuMemAddressReserve(&x->sva, len, gran, 0, 0), "cuMemAddressReserve(scratch)"));
    TRY(cu_check(cu.cuMemMap(x->sva, len, 0, x->sh, 0), "cuMemMap(scratch)"));
    x->smapped = true;
    CuMemAccessDesc *acc = calloc((size_t)(naccess > 0 ? naccess : 0) + 1, sizeof *acc);
    if (!acc) return rt_fail(MSCCLRT_ERR_SYSTEM, "nvls: out of memory");
    int nacc = 0;
    acc[nacc++] = (CuMemAccessDesc){.location = {.type = CU_MEM_LOC_DEVICE, .id = ordinal},
                                    .flags = CU_MEM_ACCESS_RW};
    for (int i = 0; i < naccess; i++) {
        bool dup = false;
        for (int j = 0; j < nacc; j++) dup = dup || acc[j].location.id == access[i];
        if (!dup)
            acc[nacc++] = (CuMemAccessDesc){.location = {.type = CU_MEM_LOC_DEVICE, .id = access[i]},
                                            .flags = CU_MEM_ACCESS_RW};
    }
    mscclrt_result res = cu_check(cu.cuMemSetAccess(x->sva, len, acc, (size_t)nacc),
                                  "cuMemSetAccess(scratch)");
    free(acc);
    if (res != MSCCLRT_SUCCESS) return res;
    LOG_INFO(LOG_SUB_XPORT, "rank %d: multicast-capable scratch %zu bytes (granule %zu) at %#llx",
             rank, len, gran, x->sva);
    *ptr = x->sva;
    return MSCCLRT_SUCCESS;
}

/* The range rank m binds for its switch channel sw of buffer buf, checked (i/o: a cuMem
 * allocation aligned to the multicast granularity; s: the scratch of nvls_scratch_alloc). */
static mscclrt_result bind_range(const NvlsMem *m, int sw, PlanBuf buf, int nmembers,
                                 CuDevPtr *base, size_t *len) {
    const NvlsCtx *x = *m->nv;
    if (buf == PLAN_BUF_SCRATCH) {
        if (!m->base[PLAN_BUF_SCRATCH])
            return rt_fail(MSCCLRT_ERR_PLAN, "rank %d: switch channel %d binds the scratch buffer, "
                           "but this rank's context has none (scratch_chunks is 0)", m->rank, sw);
        if (!x || !x->smapped || x->sva != m->base[PLAN_BUF_SCRATCH])
            return rt_fail(MSCCLRT_ERR_INTERNAL, "rank %d: switch channel %d binds the scratch, "
                           "which did not come from nvls_scratch_alloc", m->rank, sw);
        *base = x->sva;
        *len = x->slen;
        return MSCCLRT_SUCCESS;
    }
    const char *what = buf == PLAN_BUF_INPUT ? "sendbuf (input)" : "recvbuf (output)";
    *base = m->base[buf];
    *len = m->bytes[buf];
    CuMemHandle h;
    if (cu.cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)*base) != CU_OK)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "rank %d: switch channel %d binds the %s allocation "
                       "[%#llx, +%zu bytes) to an NVLS multicast object, but it is not a cuMem (VMM) "
                       "allocation; multicast binds only such memory: allocate it with cuMemCreate + "
                       "cuMemMap (POSIX fd handle type) or a VMM allocator (ncclMemAlloc, PyTorch "
                       "expandable segments), at a multiple of the multicast granularity",
                       m->rank, sw, what, *base, *len);
    cu.cuMemRelease(h);   /* Retain took a reference; the user's mapping keeps the memory */
    size_t g = 0;
    TRY(mc_gran(nmembers, *len, CU_MC_GRAN_MINIMUM, &g));
    return nvls_check_range(m->rank, sw, what, *base, *len, g);
}

static mscclrt_result group_new(int nmembers, size_t most, NvlsGroup **out) {
    *out = NULL;
    size_t gran = 0, size = 0;
    TRY(mc_gran(nmembers, most, CU_MC_GRAN_RECOMMENDED, &gran));
    if (!nvls_round_up(most, gran, &size) || size == 0)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "nvls: a binding of %zu bytes cannot be rounded to "
                       "the multicast granularity %zu", most, gran);
    NvlsGroup *g = calloc(1, sizeof *g);
    if (!g) return rt_fail(MSCCLRT_ERR_SYSTEM, "nvls: out of memory");
    CuMulticastObjectProp mp = {.numDevices = (unsigned)nmembers, .size = size,
                                .handleTypes = CU_MEM_HANDLE_POSIX_FD, .flags = 0};
    char what[160];
    snprintf(what, sizeof what, "cuMulticastCreate(%d devices, %zu bytes)", nmembers, size);
    mscclrt_result r = cu_check(cu.cuMulticastCreate(&g->mc, &mp), what);
    if (r != MSCCLRT_SUCCESS) {
        free(g);
        return r;
    }
    g->created = true;
    g->size = size;
    g->gran = gran;
    *out = g;
    return MSCCLRT_SUCCESS;
}

static void group_attach(NvlsBind *b, NvlsGroup *g, CuDevice dev) {
    __atomic_add_fetch(&g->refs, 1, __ATOMIC_ACQ_REL);
    b->grp = g;
    b->dev = dev;
}

static mscclrt_result add_device(NvlsBind *b, int rank, int sw) {
    char what[120];
    snprintf(what, sizeof what, "rank %d: switch channel %d: cuMulticastAddDevice(device %d)", rank,
             sw, (int)b->dev);
    TRY(cu_check(cu.cuMulticastAddDevice(b->grp->mc, b->dev), what));
    b->added = true;
    return MSCCLRT_SUCCESS;
}

/* Binds [base, +len) at multicast offset 0 and maps the object for b->dev. */
static mscclrt_result bind_map(NvlsCtx *x, NvlsBind *b, int rank, int sw, PlanBuf buf,
                               CuDevPtr base, size_t len) {
    char what[200];
    if (buf == PLAN_BUF_SCRATCH) {
        snprintf(what, sizeof what, "rank %d: switch channel %d: cuMulticastBindMem(scratch, %zu bytes)",
                 rank, sw, len);
        TRY(cu_check(cu.cuMulticastBindMem(b->grp->mc, 0, x->sh, 0, len, 0), what));
    } else {
        snprintf(what, sizeof what, "rank %d: switch channel %d: cuMulticastBindAddr(%s %#llx, %zu bytes)",
                 rank, sw, plan_buf_long_name(buf), base, len);
        TRY(cu_check(cu.cuMulticastBindAddr(b->grp->mc, 0, base, len, 0), what));
    }
    b->bound = len;
    size_t n = b->grp->size;
    TRY(cu_check(cu.cuMemAddressReserve(&b->va, n, b->grp->gran, 0, 0),
                 "cuMemAddressReserve(multicast)"));
    b->va_len = n;
    TRY(cu_check(cu.cuMemMap(b->va, n, 0, b->grp->mc, 0), "cuMemMap(multicast)"));
    b->mapped = true;
    CuMemAccessDesc acc = {.location = {.type = CU_MEM_LOC_DEVICE, .id = (int)b->dev},
                           .flags = CU_MEM_ACCESS_RW};
    TRY(cu_check(cu.cuMemSetAccess(b->va, n, &acc, 1), "cuMemSetAccess(multicast)"));
    LOG_INFO(LOG_SUB_XPORT, "rank %d: switch channel %d: %s bound (%zu of %zu bytes), multicast at %#llx",
             rank, sw, plan_buf_long_name(buf), len, n, b->va);
    return MSCCLRT_SUCCESS;
}

/* ---- single process ------------------------------------------------------------------------------- */

/* The group whose root is rank r's switch channel sw: every member is in m[]. */
static mscclrt_result group_local(const Plan *p, NvlsMem *m, int r, int sw, const NvlsChan *ch) {
    const int nm = ch->nmembers;
    int *msw = calloc((size_t)nm, sizeof *msw);
    CuDevPtr *base = calloc((size_t)nm, sizeof *base);
    size_t *len = calloc((size_t)nm, sizeof *len);
    mscclrt_result res = MSCCLRT_SUCCESS;
    NvlsGroup *g = NULL;
    if (!msw || !base || !len) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "nvls: out of memory");
        goto out;
    }
    size_t most = 0;
    for (int i = 0; i < nm; i++) {
        int q = ch->members[i];
        msw[i] = nvls_match(p, r, sw, q);
        for (int j = 0; j < i; j++)
            if (m[ch->members[j]].dev == m[q].dev) {
                res = rt_fail(MSCCLRT_ERR_INVALID_USAGE, "plan '%s': ranks %d and %d of switch "
                              "channel %d (rank %d) share device %d; a multicast group needs one "
                              "GPU per rank", PLAN_ESC(p->name), ch->members[j], q, sw, r,
                              (int)m[q].dev);
                goto out;
            }
        TRY_GOTO(cu_check(cu.cuCtxSetCurrent(m[q].ctx), "cuCtxSetCurrent"), res, out);
        TRY_GOTO(bind_range(&m[q], msw[i], ch->buf, nm, &base[i], &len[i]), res, out);
        if (len[i] > most) most = len[i];
    }
    TRY_GOTO(cu_check(cu.cuCtxSetCurrent(m[r].ctx), "cuCtxSetCurrent"), res, out);
    TRY_GOTO(group_new(nm, most, &g), res, out);
    for (int i = 0; i < nm; i++) {
        NvlsBind *b = &(*m[ch->members[i]].nv)->b[msw[i]];
        if (b->grp) {
            res = rt_fail(MSCCLRT_ERR_INTERNAL, "nvls: rank %d switch channel %d joined twice",
                          ch->members[i], msw[i]);
            goto out;
        }
        group_attach(b, g, m[ch->members[i]].dev);
    }
    for (int i = 0; i < nm; i++)
        TRY_GOTO(add_device(&(*m[ch->members[i]].nv)->b[msw[i]], ch->members[i], msw[i]), res, out);
    /* every device is in the group: bind and map each member's memory */
    for (int i = 0; i < nm; i++) {
        int q = ch->members[i];
        TRY_GOTO(cu_check(cu.cuCtxSetCurrent(m[q].ctx), "cuCtxSetCurrent"), res, out);
        TRY_GOTO(bind_map(*m[q].nv, &(*m[q].nv)->b[msw[i]], q, msw[i], ch->buf, base[i], len[i]),
                 res, out);
    }
    LOG_INFO(LOG_SUB_XPORT, "plan '%s': multicast group of rank %d's switch channel %d: %d devices, "
             "%zu bytes", PLAN_ESC(p->name), r, sw, nm, g->size);
out:
    if (g && g->refs == 0) { /* created but attached to no binding */
        cu.cuMemRelease(g->mc);
        free(g);
    }
    free(msw);
    free(base);
    free(len);
    return res;
}

mscclrt_result nvls_setup_local(const Plan *p, NvlsMem *m, int nranks) {
    TRY(nvls_gate("nvls_setup_local"));
    if (nranks != p->ngpus)
        return rt_fail(MSCCLRT_ERR_INTERNAL, "nvls: %d ranks for a plan of %d", nranks, p->ngpus);
    for (int r = 0; r < nranks; r++) {
        if (m[r].rank != r)
            return rt_fail(MSCCLRT_ERR_INTERNAL, "nvls: setup entry %d is rank %d", r, m[r].rank);
        TRY(ctx_get(m[r].nv, p->gpus[r].nswitch));
    }
    for (int r = 0; r < nranks; r++)
        for (int sw = 0; sw < p->gpus[r].nswitch; sw++) {
            NvlsChan ch;
            TRY(nvls_chan(p, r, sw, &ch));
            if (ch.root == r) TRY(group_local(p, m, r, sw, &ch));
        }
    return MSCCLRT_SUCCESS;
}

/* ---- one process per rank ------------------------------------------------------------------------- */

/* What a member tells its root (UP) and the root its members (DOWN). */
typedef struct NvlsMsg {
    uint32_t magic;
    int32_t status;                   /* the sender's mscclrt_result so far; 0 = fine */
    int32_t sender;
    int32_t sw;                       /* the sender's switch index of the group */
    uint64_t bytes;                   /* UP: the member's binding; DOWN: the object's size */
    uint64_t gran;                    /* DOWN: the object's granularity */
    uint64_t key;                     /* DOWN: the FdPass key of the handle */
    char why[216];                    /* status != 0: the sender's error */
} NvlsMsg;
_Static_assert(sizeof(NvlsMsg) == 256, "NvlsMsg is a wire format");

typedef struct NvlsVote {
    int32_t status;
    int32_t rank;
    char why[248];
} NvlsVote;
_Static_assert(sizeof(NvlsVote) == 256, "NvlsVote is a wire format");

static mscclrt_result status_of(int32_t s) {
    return s > 0 && s <= MSCCLRT_ERR_INTERNAL ? (mscclrt_result)s : MSCCLRT_ERR_REMOTE;
}

/* Records the first local failure (res) with its text. */
static void note(mscclrt_result res, int32_t *status, char *why, size_t n) {
    if (res == MSCCLRT_SUCCESS || *status != 0) return;
    *status = (int32_t)res;
    snprintf(why, n, "%s", mscclrt_last_error());
}

static mscclrt_result msg_recv(Boot *b, int from, int tag, int me, NvlsMsg *msg) {
    TRY(boot_recv(b, from, tag, msg, sizeof *msg));
    msg->why[sizeof msg->why - 1] = 0;
    if (msg->magic != NVLS_MAGIC || msg->sender != from)
        return rt_fail(MSCCLRT_ERR_REMOTE, "nvls: rank %d: rank %d sent a malformed setup message "
                       "(magic %#x, sender %d)", me, from, msg->magic, (int)msg->sender);
    return MSCCLRT_SUCCESS;
}

/* Collective: every rank's status; the first failure becomes everyone's error. */
static mscclrt_result agree(Boot *b, int32_t status, const char *why, const char *step) {
    int n = boot_nranks(b), r = boot_rank(b);
    NvlsVote *v = calloc((size_t)n, sizeof *v);
    if (!v) return rt_fail(MSCCLRT_ERR_SYSTEM, "nvls: out of memory for %d ranks", n);
    v[r].status = status;
    v[r].rank = r;
    snprintf(v[r].why, sizeof v[r].why, "%s", status ? why : "");
    mscclrt_result res = boot_allgather(b, v, sizeof *v);
    for (int q = 0; q < n && res == MSCCLRT_SUCCESS; q++)
        if (v[q].status != 0) {
            v[q].why[sizeof v[q].why - 1] = 0;
            res = q == r ? rt_fail(status_of(status), "%s", why)
                         : rt_fail(status_of(v[q].status), "rank %d: NVLS setup (%s) failed on rank "
                                   "%d: %s", r, step, q, v[q].why);
        }
    free(v);
    return res;
}

mscclrt_result nvls_setup_boot(const Plan *p, NvlsMem *me, Boot *b) {
    TRY(nvls_gate("nvls_setup_boot"));
    const int r = me->rank, nsw = p->gpus[r].nswitch;
    if (r != boot_rank(b))
        return rt_fail(MSCCLRT_ERR_INTERNAL, "nvls: rank %d set up through rank %d's bootstrap", r,
                       boot_rank(b));
    int32_t st = 0;                   /* this rank's first failure, carried through the protocol */
    char why[216] = "";
    FdPass *fp = NULL;
    mscclrt_result res = fdpass_create(&fp, b);    /* collective */
    if (res != MSCCLRT_SUCCESS) return res;
    NvlsChan *ch = calloc((size_t)(nsw ? nsw : 1), sizeof *ch);
    CuDevPtr *base = calloc((size_t)(nsw ? nsw : 1), sizeof *base);
    size_t *len = calloc((size_t)(nsw ? nsw : 1), sizeof *len);
    if (!ch || !base || !len) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "nvls: rank %d: out of memory", r);
        goto out;
    }
    TRY_GOTO(ctx_get(me->nv, nsw), res, out);
    /* 1: the groups (root and members are known even when a check fails, so the protocol below
     * still reaches every peer and the failure travels with it) and what this rank binds */
    for (int sw = 0; sw < nsw; sw++) {
        mscclrt_result cr = nvls_chan(p, r, sw, &ch[sw]);
        note(cr, &st, why, sizeof why);
        if (cr == MSCCLRT_SUCCESS && !st)
            note(bind_range(me, sw, ch[sw].buf, ch[sw].nmembers, &base[sw], &len[sw]), &st, why,
                 sizeof why);
    }
    /* 2: members tell their roots (buffered sends: nobody blocks before everyone has sent).
     * The k-th group of a member whose root is R pairs with R's k-th group rooted at R that
     * contains the member (identical channel lists, nvls_match), so FIFO order matches them. */
    for (int sw = 0; sw < nsw; sw++) {
        if (ch[sw].root == r) continue;
        NvlsMsg msg = {.magic = NVLS_MAGIC, .status = st, .sender = r, .sw = sw, .bytes = len[sw]};
        snprintf(msg.why, sizeof msg.why, "%s", why);
        TRY_GOTO(boot_send(b, ch[sw].root, NVLS_TAG_UP, &msg, sizeof msg), res, out);
    }
    /* 3: roots create and hand out their objects */
    for (int sw = 0; sw < nsw; sw++) {
        if (ch[sw].root != r) continue;
        int32_t gst = st;
        char gwhy[216];
        snprintf(gwhy, sizeof gwhy, "%s", why);
        size_t most = len[sw];
        for (int i = 0; i < ch[sw].nmembers; i++) {
            int q = ch[sw].members[i];
            if (q == r) continue;
            NvlsMsg msg;
            TRY_GOTO(msg_recv(b, q, NVLS_TAG_UP, r, &msg), res, out);
            if (msg.status && !gst) {
                gst = msg.status;
                snprintf(gwhy, sizeof gwhy, "rank %d: %.190s", q, msg.why);
            }
            if (msg.bytes > most) most = (size_t)msg.bytes;
        }
        NvlsGroup *g = NULL;
        int fd = -1;
        if (!gst) note(group_new(ch[sw].nmembers, most, &g), &gst, gwhy, sizeof gwhy);
        if (g) group_attach(&(*me->nv)->b[sw], g, me->dev);
        if (!gst) {
            CuResult cr = cu.cuMemExportToShareableHandle(&fd, g->mc, CU_MEM_HANDLE_POSIX_FD, 0);
            if (cr != CU_OK) {
                fd = -1;
                note(cu_check(cr, "cuMemExportToShareableHandle(multicast)"), &gst, gwhy, sizeof gwhy);
            }
        }
        for (int i = 0; i < ch[sw].nmembers; i++) {
            int q = ch[sw].members[i];
            if (q == r) continue;
            NvlsMsg msg = {.magic = NVLS_MAGIC, .status = gst, .sender = r, .sw = sw,
                           .bytes = g ? g->size : 0, .gran = g ? g->gran : 0,
                           .key = NVLS_FD_KEY | (uint64_t)sw};
            snprintf(msg.why, sizeof msg.why, "%s", gwhy);
            res = boot_send(b, q, NVLS_TAG_DOWN, &msg, sizeof msg);
            if (res == MSCCLRT_SUCCESS && !gst) res = fdpass_send(fp, q, msg.key, fd);
            if (res != MSCCLRT_SUCCESS) {
                if (fd >= 0) close(fd);
                goto out;
            }
        }
        if (fd >= 0) close(fd);
        if (gst && !st) {
            st = gst;
            snprintf(why, sizeof why, "%s", gwhy);
        }
    }
    /* 4: members import their roots' objects */
    for (int sw = 0; sw < nsw; sw++) {
        if (ch[sw].root == r) continue;
        NvlsMsg msg;
        TRY_GOTO(msg_recv(b, ch[sw].root, NVLS_TAG_DOWN, r, &msg), res, out);
        if (msg.status) {
            if (!st) {
                st = msg.status;
                snprintf(why, sizeof why, "rank %d: %.190s", ch[sw].root, msg.why);
            }
            continue;
        }
        int fd = -1;
        TRY_GOTO(fdpass_recv(fp, ch[sw].root, msg.key, &fd), res, out);
        if (!st) {
            NvlsGroup *g = calloc(1, sizeof *g);
            if (!g) {
                note(rt_fail(MSCCLRT_ERR_SYSTEM, "nvls: out of memory"), &st, why, sizeof why);
            } else {
                CuResult cr = cu.cuMemImportFromShareableHandle(&g->mc, (void *)(uintptr_t)fd,
                                                               CU_MEM_HANDLE_POSIX_FD);
                if (cr == CU_OK) {
                    g->created = true;
                    g->size = (size_t)msg.bytes;
                    g->gran = (size_t)msg.gran;
                    group_attach(&(*me->nv)->b[sw], g, me->dev);
                } else {
                    free(g);
                    note(cu_check(cr, "cuMemImportFromShareableHandle(multicast)"), &st, why,
                         sizeof why);
                }
            }
        }
        close(fd);
    }
    /* 5: every member adds its device; then all devices are in (the vote is the barrier) */
    for (int sw = 0; sw < nsw && !st; sw++) note(add_device(&(*me->nv)->b[sw], r, sw), &st, why, sizeof why);
    TRY_GOTO(agree(b, st, why, "creating and joining the multicast groups"), res, out);
    /* 6: bind and map; nobody launches before every member has bound (second vote) */
    for (int sw = 0; sw < nsw && !st; sw++)
        note(bind_map(*me->nv, &(*me->nv)->b[sw], r, sw, ch[sw].buf, base[sw], len[sw]), &st, why,
             sizeof why);
    TRY_GOTO(agree(b, st, why, "binding memory to the multicast groups"), res, out);
    LOG_INFO(LOG_SUB_XPORT, "rank %d: plan '%s': %d switch channel(s) bound to multicast groups", r,
             PLAN_ESC(p->name), nsw);
out:
    fdpass_destroy(fp);
    free(ch);
    free(base);
    free(len);
    return res;
}

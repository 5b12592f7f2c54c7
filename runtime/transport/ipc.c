/*
 * ipc.c - the "ipc" transport: device memory shared between ranks of one host. Legacy
 * allocations travel as cuIpc handles inside the descriptor; cuMem/VMM allocations as POSIX
 * fds through FdPass, imported with cuMemImportFromShareableHandle + reserve + map + access.
 * Exports are cached per allocation and imports per (exporting process, export id), so
 * registering the same memory again costs no driver call and no second fd; legacy handles are
 * opened once per process and context (ipc_legacy.c), whatever transport instance asks.
 */
#include "transport/transport.h"
#include "core/err.h"
#include "core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define IPC_INFO_MAGIC 0x4d534949u   /* "MSII" */

/* What each rank tells the others at create. */
typedef struct IpcRankInfo {
    uint32_t magic;
    uint16_t version;
    uint16_t cuda_ok;        /* 1 if this rank loaded the CUDA driver */
    int32_t rank;
    int32_t pid;
    uint64_t nonce;          /* the process nonce: equal nonces = same process */
} IpcRankInfo;
static_assert(sizeof(IpcRankInfo) == 24, "IpcRankInfo is a wire format");

typedef struct IpcExport {   /* one registered local allocation */
    struct IpcExport *next;
    CuDevPtr base;
    size_t size;
    unsigned long long buffer_id;   /* CUDA's id of the allocation; 0 if unknown */
    IpcKind kind;
    uint64_t export_id;
    int device;
    CuIpcMemHandle legacy;   /* IPC_KIND_LEGACY */
    int fd;                  /* IPC_KIND_VMM: owned exported descriptor; -1 otherwise */
    uint8_t *fd_sent;        /* owned, [nranks]: that peer already holds the fd */
} IpcExport;

typedef struct IpcImport {   /* one mapped peer allocation */
    struct IpcImport *next;
    uint64_t nonce, export_id;   /* key */
    int owner_rank;
    IpcKind kind;
    bool same_process;       /* mapped is the exporter's own address: nothing to unmap */
    CuDevPtr mapped;         /* local address of the allocation's base */
    size_t size;
    int refs;
} IpcImport;

typedef struct IpcFd {       /* a VMM descriptor received from a peer; kept until destroy so a
                                later re-import needs no second exchange */
    struct IpcFd *next;
    uint64_t nonce, export_id;
    int fd;                  /* owned */
} IpcFd;

struct XportIpc {
    Boot *boot;              /* borrowed */
    FdPass *fdpass;          /* owned */
    IpcRankInfo *info;       /* owned, [nranks] */
    IpcExport *exports;      /* owned list */
    IpcImport *imports;      /* owned list */
    IpcFd *fds;              /* owned list */
};

static bool ipc_can_connect(const Boot *b, int peer);

/* ---- process identity --------------------------------------------------------------------- */

static pthread_once_t nonce_once = PTHREAD_ONCE_INIT;
static uint64_t process_nonce;
static uint64_t export_counter;   /* atomically incremented */

static void nonce_init(void) {
    if (getrandom(&process_nonce, sizeof process_nonce, 0) != (ssize_t)sizeof process_nonce) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        process_nonce = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32 ^ (uint64_t)ts.tv_sec;
    }
    if (!process_nonce) process_nonce = 1;
}

static uint64_t my_nonce(void) {
    pthread_once(&nonce_once, nonce_init);
    return process_nonce;
}

/* ---- descriptors ----------------------------------------------------------------------------- */

mscclrt_result ipc_desc_check(const IpcDesc *d, int sender) {
    if (d->magic != IPC_DESC_MAGIC || d->version != IPC_DESC_VERSION)
        return rt_fail(MSCCLRT_ERR_REMOTE, "ipc: rank %d sent a descriptor with magic 0x%08x version %u "
                       "(want 0x%08x version %u)", sender, d->magic, d->version, IPC_DESC_MAGIC, IPC_DESC_VERSION);
    if (d->kind != IPC_KIND_LEGACY && d->kind != IPC_KIND_VMM)
        return rt_fail(MSCCLRT_ERR_REMOTE, "ipc: rank %d sent a descriptor of unknown kind %u (want 1 or 2)",
                       sender, d->kind);
    if (sender >= 0 && d->owner_rank != sender)
        return rt_fail(MSCCLRT_ERR_REMOTE, "ipc: rank %d sent a descriptor owned by rank %d", sender,
                       (int)d->owner_rank);
    if (d->size == 0 || d->offset > d->size || d->bytes > d->size - d->offset)
        return rt_fail(MSCCLRT_ERR_REMOTE, "ipc: rank %d's descriptor has range [%llu, +%llu) outside its "
                       "allocation of %llu bytes", (int)d->owner_rank, (unsigned long long)d->offset,
                       (unsigned long long)d->bytes, (unsigned long long)d->size);
    return MSCCLRT_SUCCESS;
}

static bool same_process(const XportIpc *x, int rank) {
    return x->info[rank].nonce == my_nonce();
}

/* ---- create / destroy ------------------------------------------------------------------------ */

mscclrt_result xport_ipc_create(XportIpc **out, Boot *b) {
    mscclrt_result res;
    if (!out || !b) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "xport_ipc_create: NULL argument");
    *out = NULL;
    int rank = boot_rank(b), n = boot_nranks(b);
    /* load the driver, but take part in the collective steps either way, so a rank without a
     * driver makes every rank fail with its name instead of leaving them to time out */
    char why[512] = "";
    mscclrt_result cu_res = cu_load();
    if (cu_res != MSCCLRT_SUCCESS) snprintf(why, sizeof why, "%s", mscclrt_last_error());
    XportIpc *x = calloc(1, sizeof *x);
    if (!x) return rt_fail(MSCCLRT_ERR_SYSTEM, "xport_ipc_create: out of memory");
    x->boot = b;
    x->info = calloc((size_t)n, sizeof *x->info);
    if (!x->info) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "xport_ipc_create: out of memory for %d ranks", n);
        goto fail;
    }
    TRY_GOTO(fdpass_create(&x->fdpass, b), res, fail);
    x->info[rank] = (IpcRankInfo){.magic = IPC_INFO_MAGIC, .version = IPC_DESC_VERSION,
                                  .cuda_ok = cu_res == MSCCLRT_SUCCESS, .rank = rank,
                                  .pid = (int32_t)getpid(), .nonce = my_nonce()};
    TRY_GOTO(boot_allgather(b, x->info, sizeof *x->info), res, fail);
    if (cu_res != MSCCLRT_SUCCESS) {
        res = rt_fail(cu_res, "ipc: rank %d: %s", rank, why);
        goto fail;
    }
    for (int r = 0; r < n; r++) {
        const IpcRankInfo *i = &x->info[r];
        if (i->magic != IPC_INFO_MAGIC || i->version != IPC_DESC_VERSION || i->rank != r) {
            res = rt_fail(MSCCLRT_ERR_REMOTE, "ipc: rank %d sent malformed transport info (magic 0x%08x "
                          "version %u rank %d)", r, i->magic, i->version, (int)i->rank);
            goto fail;
        }
        if (!i->cuda_ok) {
            res = rt_fail(MSCCLRT_ERR_UNAVAILABLE, "ipc: rank %d: rank %d has no usable CUDA driver", rank, r);
            goto fail;
        }
    }
    *out = x;
    return MSCCLRT_SUCCESS;
fail:
    xport_ipc_destroy(x);
    return res;
}

static void export_free(IpcExport *e) {
    if (e->fd >= 0) close(e->fd);
    free(e->fd_sent);
    free(e);
}

static mscclrt_result import_unmap(IpcImport *im) {
    mscclrt_result r = MSCCLRT_SUCCESS;
    if (im->same_process) return r;
    if (im->kind == IPC_KIND_LEGACY) {
        r = ipc_legacy_close(im->mapped);
    } else {
        r = cu_check(cu.cuMemUnmap(im->mapped, im->size), "ipc: cuMemUnmap");
        mscclrt_result r2 = cu_check(cu.cuMemAddressFree(im->mapped, im->size), "ipc: cuMemAddressFree");
        if (r == MSCCLRT_SUCCESS) r = r2;
    }
    return r;
}

void xport_ipc_destroy(XportIpc *x) {
    if (!x) return;
    while (x->imports) {
        IpcImport *im = x->imports;
        x->imports = im->next;
        import_unmap(im);
        free(im);
    }
    while (x->exports) {
        IpcExport *e = x->exports;
        x->exports = e->next;
        export_free(e);
    }
    while (x->fds) {
        IpcFd *f = x->fds;
        x->fds = f->next;
        close(f->fd);
        free(f);
    }
    fdpass_destroy(x->fdpass);
    free(x->info);
    free(x);
}

/* ---- export ------------------------------------------------------------------------------------ */

static IpcExport *export_find(XportIpc *x, CuDevPtr ptr, IpcExport ***link) {
    for (IpcExport **pp = &x->exports; *pp; pp = &(*pp)->next)
        if (ptr >= (*pp)->base && ptr < (*pp)->base + (*pp)->size) {
            if (link) *link = pp;
            return *pp;
        }
    return NULL;
}

void xport_ipc_deregister(XportIpc *x, CuDevPtr ptr) {
    IpcExport **link, *e = x ? export_find(x, ptr, &link) : NULL;
    if (!e) return;
    *link = e->next;
    export_free(e);
}

/* Makes the handle of a new registration (the driver calls happen here, once per allocation). */
static mscclrt_result export_new(XportIpc *x, CuDevPtr ptr, CuDevPtr base, size_t size,
                                 unsigned long long buffer_id, IpcExport **out) {
    int rank = boot_rank(x->boot);
    IpcExport *e = calloc(1, sizeof *e);
    uint8_t *sent = calloc((size_t)boot_nranks(x->boot), 1);
    if (!e || !sent) {
        free(e);
        free(sent);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "ipc: out of memory");
    }
    e->base = base, e->size = size, e->buffer_id = buffer_id, e->fd = -1, e->fd_sent = sent;
    e->export_id = __atomic_add_fetch(&export_counter, 1, __ATOMIC_RELAXED);
    e->device = -1;
    cu.cuPointerGetAttribute(&e->device, IPC_PTR_ATTR_DEVICE_ORDINAL, ptr);
    CuMemHandle h;
    mscclrt_result res;
    if (cu.cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)ptr) == CU_OK) {
        /* cuMem/VMM memory: a POSIX fd, passed to each peer once */
        e->kind = IPC_KIND_VMM;
        int fd = -1;
        CuResult r = cu.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_POSIX_FD, 0);
        cu.cuMemRelease(h);   /* drop the reference Retain took; the mapping keeps the memory */
        if (r != CU_OK) {
            char what[200];
            snprintf(what, sizeof what, "ipc: rank %d: cuMemExportToShareableHandle of the allocation at "
                     "%#llx (%zu bytes; was it created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR?)",
                     rank, base, size);
            res = cu_check(r, what);
            goto fail;
        }
        e->fd = fd;
    } else {
        e->kind = IPC_KIND_LEGACY;
        CuResult r = cu.cuIpcGetMemHandle(&e->legacy, base);
        if (r != CU_OK) {
            int capable = 0;   /* a boolean: the driver may write one byte of it */
            if (cu.cuPointerGetAttribute(&capable, IPC_PTR_ATTR_LEGACY_IPC_CAPABLE, ptr) != CU_OK) capable = -1;
            char what[240];
            snprintf(what, sizeof what, "ipc: rank %d: cuIpcGetMemHandle of the allocation at %#llx (%zu bytes%s)",
                     rank, base, size, capable == 0 ? "; not IPC-capable: allocate with cudaMalloc/cuMemAlloc "
                     "or cuMemCreate with POSIX fd handles, not from a stream-ordered pool" : "");
            res = cu_check(r, what);
            goto fail;
        }
    }
    LOG_INFO(LOG_SUB_XPORT, "rank %d: exported %s allocation %#llx (+%zu) as id %llu", rank,
             e->kind == IPC_KIND_VMM ? "VMM" : "legacy", base, size, (unsigned long long)e->export_id);
    *out = e;
    return MSCCLRT_SUCCESS;
fail:
    export_free(e);
    return res;
}

mscclrt_result xport_ipc_export(XportIpc *x, CuDevPtr ptr, size_t bytes, IpcDesc *desc) {
    if (!x || !desc) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "xport_ipc_export: NULL argument");
    int rank = boot_rank(x->boot);
    if (!ptr || !bytes)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "xport_ipc_export: rank %d: empty buffer (ptr %#llx, %zu bytes)",
                       rank, ptr, bytes);
    CuDevPtr base = 0;
    size_t size = 0;
    CuResult r = cu.cuMemGetAddressRange(&base, &size, ptr);
    if (r != CU_OK) {
        char what[120];
        snprintf(what, sizeof what, "xport_ipc_export: rank %d: %#llx is not device memory (cuMemGetAddressRange)",
                 rank, ptr);
        return cu_check(r, what);
    }
    if (ptr - base > size || bytes > size - (ptr - base))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "xport_ipc_export: rank %d: [%#llx, +%zu) runs past the end of "
                       "its allocation [%#llx, +%zu) (a buffer must lie in one allocation)", rank, ptr, bytes,
                       base, size);
    unsigned long long buffer_id = 0;
    cu.cuPointerGetAttribute(&buffer_id, IPC_PTR_ATTR_BUFFER_ID, ptr);
    IpcExport **link, *e = export_find(x, ptr, &link);
    if (e && (e->base != base || e->size != size || e->buffer_id != buffer_id)) {
        /* the memory was freed and reallocated behind our back: the old handle is stale */
        LOG_INFO(LOG_SUB_XPORT, "rank %d: allocation at %#llx changed; exporting it again", rank, base);
        *link = e->next;
        export_free(e);
        e = NULL;
    }
    if (!e) {
        TRY(export_new(x, ptr, base, size, buffer_id, &e));
        e->next = x->exports;
        x->exports = e;
    }
    memset(desc, 0, sizeof *desc);
    desc->magic = IPC_DESC_MAGIC;
    desc->version = IPC_DESC_VERSION;
    desc->kind = (uint16_t)e->kind;
    desc->owner_rank = rank;
    desc->owner_pid = (int32_t)getpid();
    desc->owner_nonce = my_nonce();
    desc->export_id = e->export_id;
    desc->base = e->base;
    desc->size = e->size;
    desc->offset = ptr - e->base;
    desc->bytes = bytes;
    desc->device = e->device;
    if (e->kind == IPC_KIND_LEGACY) memcpy(desc->handle, &e->legacy, sizeof e->legacy);
    return MSCCLRT_SUCCESS;
}

/* ---- exchange ---------------------------------------------------------------------------------- */

static int fd_lookup(const XportIpc *x, uint64_t nonce, uint64_t id) {
    for (const IpcFd *f = x->fds; f; f = f->next)
        if (f->nonce == nonce && f->export_id == id) return f->fd;
    return -1;
}

static IpcImport *import_find(XportIpc *x, uint64_t nonce, uint64_t id) {
    for (IpcImport *im = x->imports; im; im = im->next)
        if (im->nonce == nonce && im->export_id == id) return im;
    return NULL;
}

/* Whether desc's export still needs its fd here: VMM memory, neither mapped nor its fd kept. */
static bool fd_wanted(XportIpc *x, const IpcDesc *d) {
    return d->kind == IPC_KIND_VMM && fd_lookup(x, d->owner_nonce, d->export_id) < 0 &&
           !import_find(x, d->owner_nonce, d->export_id);
}

/* Keeps fd (taken over: closed when it cannot be kept) for xport_ipc_import of desc. */
static mscclrt_result fd_keep(XportIpc *x, const IpcDesc *d, int fd) {
    IpcFd *f = malloc(sizeof *f);
    if (!f) {
        close(fd);
        return rt_fail(MSCCLRT_ERR_SYSTEM, "ipc: out of memory");
    }
    f->nonce = d->owner_nonce, f->export_id = d->export_id, f->fd = fd;
    f->next = x->fds;
    x->fds = f;
    return MSCCLRT_SUCCESS;
}

mscclrt_result xport_ipc_send(XportIpc *x, int peer, int tag, const IpcDesc *desc) {
    if (!x || !desc) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "xport_ipc_send: NULL argument");
    int rank = boot_rank(x->boot);
    if (peer < 0 || peer >= boot_nranks(x->boot))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "xport_ipc_send: peer %d out of range [0, %d)", peer,
                       boot_nranks(x->boot));
    if (!ipc_can_connect(x->boot, peer))
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "xport_ipc_send: rank %d: rank %d is on another node (%d, "
                       "this is %d); CUDA IPC works inside one host", rank, peer, boot_node_of(x->boot, peer),
                       boot_node(x->boot));
    if (desc->magic != IPC_DESC_MAGIC || desc->owner_nonce != my_nonce() || desc->owner_rank != rank)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "xport_ipc_send: rank %d: the descriptor was not exported "
                       "by this rank", rank);
    if (desc->kind == IPC_KIND_VMM && !same_process(x, peer)) {
        IpcExport *e = NULL;
        for (IpcExport *i = x->exports; i; i = i->next)
            if (i->export_id == desc->export_id) e = i;
        if (!e)
            return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "xport_ipc_send: rank %d: export %llu was deregistered",
                           rank, (unsigned long long)desc->export_id);
        if (!e->fd_sent[peer]) {
            TRY(fdpass_send(x->fdpass, peer, e->export_id, e->fd));
            e->fd_sent[peer] = 1;
        }
    }
    return boot_send(x->boot, peer, tag, desc, sizeof *desc);
}

mscclrt_result xport_ipc_recv(XportIpc *x, int peer, int tag, IpcDesc *desc) {
    if (!x || !desc) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "xport_ipc_recv: NULL argument");
    if (peer < 0 || peer >= boot_nranks(x->boot))
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "xport_ipc_recv: peer %d out of range [0, %d)", peer,
                       boot_nranks(x->boot));
    if (!ipc_can_connect(x->boot, peer))
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "xport_ipc_recv: rank %d: rank %d is on another node (%d, "
                       "this is %d); CUDA IPC works inside one host", boot_rank(x->boot), peer,
                       boot_node_of(x->boot, peer), boot_node(x->boot));
    TRY(boot_recv(x->boot, peer, tag, desc, sizeof *desc));
    TRY(ipc_desc_check(desc, peer));
    if (desc->owner_nonce != x->info[peer].nonce)
        return rt_fail(MSCCLRT_ERR_REMOTE, "ipc: rank %d sent a descriptor exported by another process", peer);
    if (!same_process(x, peer) && fd_wanted(x, desc)) {
        int fd = -1;
        TRY(fdpass_recv(x->fdpass, peer, desc->export_id, &fd));
        TRY(fd_keep(x, desc, fd));
    }
    return MSCCLRT_SUCCESS;
}

int xport_ipc_export_fd(XportIpc *x, const IpcDesc *desc) {
    if (!x || !desc || desc->kind != IPC_KIND_VMM || desc->owner_nonce != my_nonce()) return -1;
    for (const IpcExport *e = x->exports; e; e = e->next)
        if (e->export_id == desc->export_id) return e->fd;
    return -1;
}

mscclrt_result xport_ipc_adopt_fd(XportIpc *x, const IpcDesc *desc, int fd) {
    if (!x || !desc || fd < 0) {
        if (fd >= 0) close(fd);
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "xport_ipc_adopt_fd: NULL argument or no descriptor");
    }
    if (!fd_wanted(x, desc)) {
        close(fd);   /* not needed: legacy memory, or this export's fd is here already */
        return MSCCLRT_SUCCESS;
    }
    return fd_keep(x, desc, fd);
}

mscclrt_result xport_ipc_exchange(XportIpc *x, int peer, int tag, const IpcDesc *mine, IpcDesc *theirs) {
    TRY(xport_ipc_send(x, peer, tag, mine));
    return xport_ipc_recv(x, peer, tag, theirs);
}

/* ---- import ------------------------------------------------------------------------------------ */

/* Same process: give the current device access to the exporter's memory. */
static mscclrt_result grant_local(const IpcDesc *d, int my_dev) {
    if (d->device == my_dev) return MSCCLRT_SUCCESS;
    if (d->kind == IPC_KIND_VMM) {
        CuMemAccessDesc acc = {.location = {.type = CU_MEM_LOC_DEVICE, .id = my_dev}, .flags = CU_MEM_ACCESS_RW};
        return cu_check(cu.cuMemSetAccess(d->base, d->size, &acc, 1), "ipc: cuMemSetAccess (same process)");
    }
    CuContext owner = NULL;
    TRY(cu_check(cu.cuPointerGetAttribute(&owner, IPC_PTR_ATTR_CONTEXT, d->base),
                 "ipc: cuPointerGetAttribute(CONTEXT) of a same-process peer buffer"));
    CuResult r = cu.cuCtxEnablePeerAccess(owner, 0);
    if (r == CU_ERR_PEER_ACCESS_ALREADY_ENABLED) return MSCCLRT_SUCCESS;
    return cu_check(r, "ipc: cuCtxEnablePeerAccess (same process)");
}

static mscclrt_result map_vmm(XportIpc *x, const IpcDesc *d, int my_dev, CuDevPtr *out) {
    int fd = fd_lookup(x, d->owner_nonce, d->export_id);
    if (fd < 0)
        return rt_fail(MSCCLRT_ERR_INVALID_USAGE, "xport_ipc_import: rank %d: no descriptor received for rank "
                       "%d's export %llu (import only what xport_ipc_recv returned)", boot_rank(x->boot),
                       (int)d->owner_rank, (unsigned long long)d->export_id);
    CuMemHandle h;
    CuDevPtr va = 0;
    mscclrt_result res;
    TRY(cu_check(cu.cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_POSIX_FD),
                 "ipc: cuMemImportFromShareableHandle"));
    TRY_GOTO(cu_check(cu.cuMemAddressReserve(&va, d->size, 0, 0, 0), "ipc: cuMemAddressReserve"), res, fail);
    TRY_GOTO(cu_check(cu.cuMemMap(va, d->size, 0, h, 0), "ipc: cuMemMap"), res, fail);
    CuMemAccessDesc acc = {.location = {.type = CU_MEM_LOC_DEVICE, .id = my_dev}, .flags = CU_MEM_ACCESS_RW};
    if ((res = cu_check(cu.cuMemSetAccess(va, d->size, &acc, 1), "ipc: cuMemSetAccess")) != MSCCLRT_SUCCESS) {
        cu.cuMemUnmap(va, d->size);
        goto fail;
    }
    cu.cuMemRelease(h);   /* the mapping holds the memory from here on */
    *out = va;
    return MSCCLRT_SUCCESS;
fail:
    if (va) cu.cuMemAddressFree(va, d->size);
    cu.cuMemRelease(h);
    return res;
}

mscclrt_result xport_ipc_import(XportIpc *x, const IpcDesc *desc, CuDevPtr *peer_ptr) {
    if (!x || !desc || !peer_ptr) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "xport_ipc_import: NULL argument");
    *peer_ptr = 0;
    TRY(ipc_desc_check(desc, -1));
    int owner = desc->owner_rank;
    if (owner < 0 || owner >= boot_nranks(x->boot) || desc->owner_nonce != x->info[owner].nonce)
        return rt_fail(MSCCLRT_ERR_INVALID_ARG, "xport_ipc_import: the descriptor's owner rank %d is not a "
                       "member of this group", owner);
    IpcImport *im = import_find(x, desc->owner_nonce, desc->export_id);
    if (im) {
        im->refs++;
        *peer_ptr = im->mapped + desc->offset;
        return MSCCLRT_SUCCESS;
    }
    CuDevice my_dev = 0;
    TRY(cu_check(cu.cuCtxGetDevice(&my_dev), "xport_ipc_import: cuCtxGetDevice (is a context current?)"));
    im = calloc(1, sizeof *im);
    if (!im) return rt_fail(MSCCLRT_ERR_SYSTEM, "ipc: out of memory");
    im->nonce = desc->owner_nonce, im->export_id = desc->export_id, im->owner_rank = owner;
    im->kind = (IpcKind)desc->kind, im->size = desc->size, im->refs = 1;
    mscclrt_result r;
    if (desc->owner_nonce == my_nonce()) {
        im->same_process = true;
        im->mapped = desc->base;
        r = grant_local(desc, my_dev);
    } else if (desc->kind == IPC_KIND_LEGACY) {
        CuIpcMemHandle h;
        memcpy(&h, desc->handle, sizeof h);
        r = ipc_legacy_open(&h, owner, &im->mapped);
    } else {
        r = map_vmm(x, desc, my_dev, &im->mapped);
    }
    if (r != MSCCLRT_SUCCESS) {
        free(im);
        return r;
    }
    LOG_INFO(LOG_SUB_XPORT, "rank %d: mapped rank %d's %s allocation (%llu bytes) at %#llx", boot_rank(x->boot),
             owner, desc->kind == IPC_KIND_VMM ? "VMM" : "legacy", (unsigned long long)desc->size, im->mapped);
    im->next = x->imports;
    x->imports = im;
    *peer_ptr = im->mapped + desc->offset;
    return MSCCLRT_SUCCESS;
}

mscclrt_result xport_ipc_close(XportIpc *x, CuDevPtr peer_ptr) {
    if (!x) return rt_fail(MSCCLRT_ERR_INVALID_ARG, "xport_ipc_close: NULL argument");
    for (IpcImport **pp = &x->imports; *pp; pp = &(*pp)->next) {
        IpcImport *im = *pp;
        if (peer_ptr < im->mapped || peer_ptr >= im->mapped + im->size) continue;
        if (--im->refs > 0) return MSCCLRT_SUCCESS;
        *pp = im->next;
        mscclrt_result r = import_unmap(im);
        free(im);
        return r;
    }
    return rt_fail(MSCCLRT_ERR_INVALID_ARG, "xport_ipc_close: rank %d: %#llx is not an imported peer pointer",
                   boot_rank(x->boot), peer_ptr);
}

/* ---- the table --------------------------------------------------------------------------------- */

static bool ipc_can_connect(const Boot *b, int peer) {
    return boot_node_of(b, peer) >= 0 && boot_node_of(b, peer) == boot_node(b);
}
static mscclrt_result ipc_create(void **ctx, Boot *b) {
    XportIpc *x = NULL;
    mscclrt_result r = xport_ipc_create(&x, b);
    *ctx = x;
    return r;
}
static void ipc_destroy(void *ctx) { xport_ipc_destroy(ctx); }
static mscclrt_result ipc_export(void *ctx, CuDevPtr ptr, size_t bytes, XportDesc *desc) {
    IpcDesc d;
    memset(desc, 0, sizeof *desc);
    TRY(xport_ipc_export(ctx, ptr, bytes, &d));
    memcpy(desc->bytes, &d, sizeof d);
    return MSCCLRT_SUCCESS;
}
static mscclrt_result ipc_send(void *ctx, int peer, int tag, const XportDesc *desc) {
    IpcDesc d;
    memcpy(&d, desc->bytes, sizeof d);
    return xport_ipc_send(ctx, peer, tag, &d);
}
static mscclrt_result ipc_recv(void *ctx, int peer, int tag, XportDesc *desc) {
    IpcDesc d;
    memset(desc, 0, sizeof *desc);
    TRY(xport_ipc_recv(ctx, peer, tag, &d));
    memcpy(desc->bytes, &d, sizeof d);
    return MSCCLRT_SUCCESS;
}
static mscclrt_result ipc_import(void *ctx, const XportDesc *desc, CuDevPtr *peer_ptr) {
    IpcDesc d;
    memcpy(&d, desc->bytes, sizeof d);
    return xport_ipc_import(ctx, &d, peer_ptr);
}
static mscclrt_result ipc_close(void *ctx, CuDevPtr peer_ptr) { return xport_ipc_close(ctx, peer_ptr); }

const Transport xport_ipc = {
    .name = "ipc", .can_connect = ipc_can_connect, .create = ipc_create, .destroy = ipc_destroy,
    .export_mem = ipc_export, .send_desc = ipc_send, .recv_desc = ipc_recv, .import_mem = ipc_import,
    .close_mem = ipc_close,
};

const Transport *const xport_all[] = {&xport_ipc, NULL};

const Transport *xport_pick(const Boot *b, int peer) {
    for (int i = 0; xport_all[i]; i++)
        if (xport_all[i]->can_connect(b, peer)) return xport_all[i];
    return NULL;
}

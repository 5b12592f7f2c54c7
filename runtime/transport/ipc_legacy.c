/*
 * ipc_legacy.c - the process's one table of opened legacy CUDA IPC handles. The driver lets a
 * process open a cuIpcMemHandle once per context: a second cuIpcOpenMemHandle of the same
 * allocation fails with CUDA_ERROR_ALREADY_MAPPED, whichever communicator, transport instance
 * or buffer range asks. So every import of a legacy handle goes through this table: keyed on
 * (CUDA context, handle bytes), it opens a handle on first use, hands the same mapping to every
 * later importer, counts references, and closes it when the last one lets go.
 */
#include "transport/transport.h"
#include "core/err.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* CUDA_ERROR_ALREADY_MAPPED: the handle was opened in this context by someone outside the
 * table (the application itself, or another library) */
#define CU_ERR_ALREADY_MAPPED 208

typedef struct LegacyMap {
    struct LegacyMap *next;
    CuContext ctx;
    CuIpcMemHandle handle;
    CuDevPtr mapped;
    int refs;
} LegacyMap;

static pthread_mutex_t legacy_lock = PTHREAD_MUTEX_INITIALIZER;
static LegacyMap *legacy_maps;   /* few entries: one per peer allocation mapped */

mscclrt_result ipc_legacy_open(const CuIpcMemHandle *h, int owner_rank, CuDevPtr *mapped) {
    CuContext ctx = NULL;
    TRY(cu_check(cu.cuCtxGetCurrent(&ctx), "ipc: cuCtxGetCurrent"));
    mscclrt_result res = MSCCLRT_SUCCESS;
    pthread_mutex_lock(&legacy_lock);
    LegacyMap *m = legacy_maps;
    while (m && (m->ctx != ctx || memcmp(&m->handle, h, sizeof *h) != 0)) m = m->next;
    if (m) {
        m->refs++;
        *mapped = m->mapped;
        goto out;
    }
    m = calloc(1, sizeof *m);
    if (!m) {
        res = rt_fail(MSCCLRT_ERR_SYSTEM, "ipc: out of memory");
        goto out;
    }
    CuResult r = cu.cuIpcOpenMemHandle(&m->mapped, *h, CU_IPC_LAZY_ENABLE_PEER_ACCESS);
    if (r != CU_OK) {
        free(m);
        res = r == CU_ERR_ALREADY_MAPPED
            ? rt_fail(MSCCLRT_ERR_INVALID_USAGE, "ipc: rank %d's allocation is already open in "
                      "this process outside libmscclrt (cuIpcOpenMemHandle: "
                      "CUDA_ERROR_ALREADY_MAPPED); a process can open one allocation once",
                      owner_rank)
            : cu_check(r, "ipc: cuIpcOpenMemHandle");
        goto out;
    }
    m->ctx = ctx;
    m->handle = *h;
    m->refs = 1;
    m->next = legacy_maps;
    legacy_maps = m;
    *mapped = m->mapped;
out:
    pthread_mutex_unlock(&legacy_lock);
    return res;
}

mscclrt_result ipc_legacy_close(CuDevPtr mapped) {
    mscclrt_result res = MSCCLRT_SUCCESS;
    pthread_mutex_lock(&legacy_lock);
    LegacyMap **pp = &legacy_maps;
    while (*pp && (*pp)->mapped != mapped) pp = &(*pp)->next;
    LegacyMap *m = *pp;
    if (!m) {
        res = rt_fail(MSCCLRT_ERR_INTERNAL, "ipc: closing %#llx, which no legacy import mapped",
                      (unsigned long long)mapped);
    } else if (--m->refs == 0) {
        *pp = m->next;
        res = cu_check(cu.cuIpcCloseMemHandle(m->mapped), "ipc: cuIpcCloseMemHandle");
        free(m);
    }
    pthread_mutex_unlock(&legacy_lock);
    return res;
}

/*
 * cu_primary.c - the library's one reference to each device's primary context, taken on first
 * use and kept for the life of the process. The primary context is shared by the CUDA runtime
 * and every library of the process, and the driver destroys it, every allocation in it freed,
 * when its last reference is released. A runtime that adopts a context the library's retain
 * made active need not hold a reference of its own: a communicator's release then took the
 * application's memory with it (PyTorch wrote into its own caching allocator's blocks and hit
 * unallocated memory after the tuner recovered a communicator: per-GPU torch_backend tune,
 * 2 x H200). So comms borrow the reference taken here and never release it.
 */
#include "cuda/cuda_driver.h"
#include "core/err.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct PrimaryRef {
    struct PrimaryRef *next;
    CuDevice dev;
    CuContext ctx;
} PrimaryRef;

static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static PrimaryRef *primary_refs;   /* one per device used: a handful */

mscclrt_result cu_primary_ctx(CuDevice dev, CuContext *ctx) {
    mscclrt_result res = MSCCLRT_SUCCESS;
    pthread_mutex_lock(&primary_lock);
    PrimaryRef *p = primary_refs;
    while (p && p->dev != dev) p = p->next;
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p) {
            res = rt_fail(MSCCLRT_ERR_SYSTEM, "out of memory for device %d's context", (int)dev);
        } else if ((res = cu_check(cu.cuDevicePrimaryCtxRetain(&p->ctx, dev),
                                   "cuDevicePrimaryCtxRetain")) != MSCCLRT_SUCCESS) {
            free(p);
            p = NULL;
        } else {
            p->dev = dev;
            p->next = primary_refs;
            primary_refs = p;
        }
    }
    if (p) *ctx = p->ctx;
    pthread_mutex_unlock(&primary_lock);
    return res;
}

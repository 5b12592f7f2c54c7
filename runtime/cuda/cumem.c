/*
 * cumem.c - cuMem (VMM) allocations with a POSIX fd handle type, mapped for their device
 * (see cumem.h): create, reserve, map, release the handle (the mapping keeps the memory),
 * set access; every step undone when a later one fails.
 */
#include "cuda/cumem.h"
#include "core/err.h"

#include <string.h>

mscclrt_result cumem_alloc(CuDevPtr *ptr, size_t *size, size_t bytes, int device) {
    *ptr = 0;
    *size = 0;
    CuMemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOC_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_POSIX_FD;
    prop.location.type = CU_MEM_LOC_DEVICE;
    prop.location.id = device;
    size_t gran = 0;
    TRY(cu_check(cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_GRAN_MINIMUM),
                 "cuMemGetAllocationGranularity"));
    size_t n = gran ? (bytes + gran - 1) / gran * gran : bytes;
    if (n == 0) n = gran ? gran : 1;
    CuMemHandle h;
    TRY(cu_check(cu.cuMemCreate(&h, n, &prop, 0), "cuMemCreate"));
    CuDevPtr va = 0;
    mscclrt_result res = cu_check(cu.cuMemAddressReserve(&va, n, 0, 0, 0), "cuMemAddressReserve");
    if (res == MSCCLRT_SUCCESS) {
        res = cu_check(cu.cuMemMap(va, n, 0, h, 0), "cuMemMap");
        if (res != MSCCLRT_SUCCESS) cu.cuMemAddressFree(va, n);
    }
    cu.cuMemRelease(h);
    TRY(res);
    CuMemAccessDesc acc = {.location = {.type = CU_MEM_LOC_DEVICE, .id = device},
                           .flags = CU_MEM_ACCESS_RW};
    res = cu_check(cu.cuMemSetAccess(va, n, &acc, 1), "cuMemSetAccess");
    if (res != MSCCLRT_SUCCESS) {
        cumem_free(va, n);
        return res;
    }
    *ptr = va;
    *size = n;
    return MSCCLRT_SUCCESS;
}

void cumem_free(CuDevPtr ptr, size_t size) {
    if (!ptr) return;
    cu.cuMemUnmap(ptr, size);
    cu.cuMemAddressFree(ptr, size);
}

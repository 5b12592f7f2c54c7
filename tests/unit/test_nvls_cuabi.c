/*
 * test_nvls_cuabi.c - the multicast constants and CUmulticastObjectProp layout that
 * cuda_driver.h restates (test_nvls.c pins its side to the same numbers), checked against the
 * real <cuda.h> at compile time, and the multicast entry points' prototypes as cuda_driver.h
 * spells them (with cuda.h's types). Skipped where no CUDA headers exist.
 */
#include <stddef.h>
#include <stdio.h>

#include "real_cuda_h.h"

#ifdef HAVE_CUDA_H
_Static_assert(sizeof(CUmulticastObjectProp) == 32, "CUmulticastObjectProp size");
_Static_assert(offsetof(CUmulticastObjectProp, size) == 8, "size");
_Static_assert(offsetof(CUmulticastObjectProp, handleTypes) == 16, "handleTypes");
_Static_assert(offsetof(CUmulticastObjectProp, flags) == 24, "flags");
_Static_assert(CU_MULTICAST_GRANULARITY_MINIMUM == 0 && CU_MULTICAST_GRANULARITY_RECOMMENDED == 1,
               "granularity flags");
_Static_assert(CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED == 132, "MULTICAST_SUPPORTED");
_Static_assert(sizeof(CUmemGenericAllocationHandle) == sizeof(unsigned long long), "handle");
_Static_assert(sizeof(CUdevice) == sizeof(int), "CUdevice is an int");
/* cuda_driver.h's CU_MULTICAST_FUNCTIONS, with Cu* spelled as cuda.h's types */
#define SAME(fn, type) _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), type), #fn)
SAME(cuMulticastCreate, CUresult (*)(CUmemGenericAllocationHandle *, const CUmulticastObjectProp *));
SAME(cuMulticastAddDevice, CUresult (*)(CUmemGenericAllocationHandle, CUdevice));
SAME(cuMulticastBindMem, CUresult (*)(CUmemGenericAllocationHandle, size_t, CUmemGenericAllocationHandle,
                                      size_t, size_t, unsigned long long));
SAME(cuMulticastBindAddr, CUresult (*)(CUmemGenericAllocationHandle, size_t, CUdeviceptr, size_t,
                                       unsigned long long));
SAME(cuMulticastUnbind, CUresult (*)(CUmemGenericAllocationHandle, CUdevice, size_t, size_t));
#endif

int main(void) {
#ifdef HAVE_CUDA_H
    printf("testing nvls/cuda-abi ... passed\n");
#else
    printf("testing nvls/cuda-abi ... skipped (needs the CUDA headers)\n");
#endif
    return 0;
}

/*
 * test_launch_cuabi.c - the launch structures and constants that cuda_driver.h restates for
 * programmatic dependent launch (CuLaunchAttr, CuLaunchConfig, the attribute id, the PCI
 * location attributes; test_launch_pdl.c pins its side to the same numbers), checked against
 * the real <cuda.h> at compile time, and cuLaunchKernelEx's prototype as cuda_driver.h spells
 * it. Skipped where no CUDA headers exist.
 */
#include <stddef.h>
#include <stdio.h>

#include "real_cuda_h.h"

#ifdef HAVE_CUDA_H
_Static_assert(sizeof(CUlaunchAttribute) == 72 && offsetof(CUlaunchAttribute, value) == 8,
               "CUlaunchAttribute");
_Static_assert(sizeof(CUlaunchConfig) == 56 && offsetof(CUlaunchConfig, sharedMemBytes) == 24 &&
                   offsetof(CUlaunchConfig, hStream) == 32 && offsetof(CUlaunchConfig, attrs) == 40 &&
                   offsetof(CUlaunchConfig, numAttrs) == 48, "CUlaunchConfig");
_Static_assert(offsetof(CUlaunchAttribute, value.programmaticStreamSerializationAllowed) == 8,
               "programmaticStreamSerializationAllowed");
_Static_assert((int)CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION == 6, "attribute id");
_Static_assert((int)CU_DEVICE_ATTRIBUTE_PCI_BUS_ID == 33 && (int)CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID == 34 &&
                   (int)CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID == 50, "PCI location attributes");
#define SAME(fn, type) _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), type), #fn)
SAME(cuLaunchKernelEx, CUresult (*)(const CUlaunchConfig *, CUfunction, void **, void **));
#endif

int main(void) {
#ifdef HAVE_CUDA_H
    printf("testing launch/cuda-abi ... passed\n");
    return 0;
#else
    printf("testing launch/cuda-abi ... skipped (needs <cuda.h>, the CUDA toolkit's driver API "
           "header)\n");
    return 77;
#endif
}

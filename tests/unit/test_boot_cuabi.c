/*
 * test_boot_cuabi.c - the transport's CUDA constants (ipc_abi.h) and the descriptor layout
 * checked against the real <cuda.h> at compile time. cuda_driver.h is not included here: its
 * Cu* names are kept apart from cuda.h's on purpose. Skipped where no CUDA headers exist.
 */
#include <stdio.h>

#include "transport/ipc_abi.h"

#include "real_cuda_h.h"

#ifdef HAVE_CUDA_H
_Static_assert((int)IPC_PTR_ATTR_CONTEXT == (int)CU_POINTER_ATTRIBUTE_CONTEXT, "CONTEXT");
_Static_assert((int)IPC_PTR_ATTR_BUFFER_ID == (int)CU_POINTER_ATTRIBUTE_BUFFER_ID, "BUFFER_ID");
_Static_assert((int)IPC_PTR_ATTR_DEVICE_ORDINAL == (int)CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, "DEVICE_ORDINAL");
_Static_assert((int)IPC_PTR_ATTR_LEGACY_IPC_CAPABLE == (int)CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, "IPC_CAPABLE");
_Static_assert(IPC_HANDLE_BYTES == CU_IPC_HANDLE_SIZE && IPC_HANDLE_BYTES == sizeof(CUipcMemHandle), "handle");
/* values the transport takes from cuda_driver.h, restated here as cuda.h spells them */
_Static_assert(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR == 1, "posix fd handle type");
_Static_assert(CU_MEM_LOCATION_TYPE_DEVICE == 1 && CU_MEM_ACCESS_FLAGS_PROT_READWRITE == 3, "access");
_Static_assert(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS == 1, "lazy peer access");
_Static_assert(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED == 704, "already enabled");
_Static_assert(sizeof(CUdeviceptr) == sizeof(unsigned long long), "CUdeviceptr is 64-bit");
#endif

int main(void) {
#ifdef HAVE_CUDA_H
    printf("testing xport/cuda-abi ... passed\n");
#else
    printf("testing xport/cuda-abi ... skipped (needs the CUDA headers)\n");
#endif
    return 0;
}

/*
 * ipc_abi.h - CUDA driver values the IPC transport uses that cuda_driver.h does not name
 * (cuda.h's CU_POINTER_ATTRIBUTE_* and CU_IPC_HANDLE_SIZE). No includes, so a test can put it
 * next to the real <cuda.h> and check every value (tests/unit/test_boot_cuabi.c).
 */
#ifndef MSCCLRT_IPC_ABI_H
#define MSCCLRT_IPC_ABI_H

enum {
    IPC_PTR_ATTR_CONTEXT = 1,              /* CU_POINTER_ATTRIBUTE_CONTEXT */
    IPC_PTR_ATTR_BUFFER_ID = 7,            /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
    IPC_PTR_ATTR_DEVICE_ORDINAL = 9,       /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */
    IPC_PTR_ATTR_LEGACY_IPC_CAPABLE = 10,  /* CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE */
    IPC_HANDLE_BYTES = 64,                 /* CU_IPC_HANDLE_SIZE */
};

#endif

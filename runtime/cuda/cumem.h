/*
 * cumem.h - device memory from the cuMem (VMM) API the way PyTorch's expandable segments and
 * NCCL's cuMem mode allocate it: a physical allocation exportable as a POSIX fd, mapped at a
 * reserved address range, read/write for its device. For the GPU checks and tests that run
 * plans on such buffers; the transports only meet them as users' pointers.
 */
#ifndef MSCCLRT_CUMEM_H
#define MSCCLRT_CUMEM_H

#include "cuda/cuda_driver.h"

/* bytes rounded up to the allocation granularity of `device`; *size gets the mapped size.
 * On failure nothing stays allocated and *ptr is 0. */
mscclrt_result cumem_alloc(CuDevPtr *ptr, size_t *size, size_t bytes, int device);
/* Unmaps and frees what cumem_alloc made (ptr 0: nothing). */
void cumem_free(CuDevPtr ptr, size_t size);

#endif

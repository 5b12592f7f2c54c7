/*
 * cu_capture.c - the library's own threads and users' CUDA-graph captures: each such thread
 * switches itself to the relaxed capture interaction mode once, at its start (as NCCL's proxy
 * thread does), so that its allocations, module loads and stream or event queries neither fail
 * nor invalidate a capture another thread runs in the global mode.
 */
#include "cuda/cuda_driver.h"

void cu_capture_relaxed(void) {
    if (!cu.cuThreadExchangeStreamCaptureMode) return;
    int mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    (void)cu.cuThreadExchangeStreamCaptureMode(&mode);   /* the old mode is not restored: the
                                                            thread is ours for its whole life */
}

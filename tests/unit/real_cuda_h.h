/*
 * real_cuda_h.h - the real <cuda.h> for the *_cuabi tests, which check the constants and
 * layouts the runtime restates (cuda_driver.h, ipc_abi.h) against it at compile time:
 * HAVE_CUDA_H is defined where the header exists, and those tests skip where it does not.
 * cuda_driver.h is never included beside it: its Cu* names are kept apart on purpose.
 */
#ifndef TEST_REAL_CUDA_H_H
#define TEST_REAL_CUDA_H_H
#if defined(__has_include)
#if __has_include(<cuda.h>)
#include <cuda.h>
#define HAVE_CUDA_H 1
#endif
#endif
#endif

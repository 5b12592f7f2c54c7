/*
 * mscclrt_device.cuh - the device library that every generated kernel includes (through NVRTC,
 * from the strings embedded at build time): types and reductions, synchronisation, data ops.
 * Generated code (runtime/codegen) calls only mk:: functions and reads only plan_abi.h structs.
 */
#ifndef MSCCLRT_DEVICE_CUH
#define MSCCLRT_DEVICE_CUH
#include "plan_abi.h"
#include "mk_types.cuh"
#include "mk_sync.cuh"
#include "mk_data.cuh"
#include "mk_proxy.cuh"
#endif

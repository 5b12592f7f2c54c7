/*
 * protos.cc - every row of runtime/nccl/nccl_funcs.def, compiled against NVIDIA's nccl.h and
 * nccl_device.h: a pointer of the row's type is initialised with the real function (and its
 * pnccl twin for nccl.h rows), so a parameter or return type that differs does not compile.
 * Our nccl_abi.h declares its prototypes from the same rows; facts.def checks that its types
 * are the real ones. ncclResetDebugInitInternal is in no header: nothing to compare.
 */
#include <nccl.h>
#include <nccl_device.h>

#define NCCL_FN(ret, name, params, args) \
    ret (*const check_##name) params = &name; \
    ret (*const check_p##name) params = &p##name;
#define NCCL_DEV_FN(ret, name, params, args) ret (*const check_##name) params = &name;
#define NCCL_INT_FN(ret, name, params, args)
#include "nccl_funcs.def"

/*
 * ours.c - the facts of facts.def as our nccl_abi.h states them (C11); nccl_abi.sh links this
 * with real.cc, where NVIDIA's headers state them, and main.c compares the two.
 */
#define MSCCLRT_NCCL_DEVICE_TYPES
#include "nccl/nccl_abi.h"

#include <stddef.h>

#define ALIGNOF(t) _Alignof(t)

int abi_ours(long long *out);
int abi_ours(long long *out) {
    ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    int n = 0;
#define FACT(group, e) out[n++] = (long long)(e);
#include "facts.def"
#undef FACT
    return n;
}

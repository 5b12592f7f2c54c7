/*
 * load_real.c - nccl_forward_open (runtime/nccl/nccl_forward.c) on NVIDIA's libnccl.so.2 2.28.9
 * itself (argv[1]): it loads, reports 22809, and exports every row of nccl_funcs.def, so the
 * table the drop-in forwards through is complete for the NCCL PyTorch 2.11 pins. No GPU needed:
 * ncclGetVersion touches no device.
 */
#include "nccl/nccl_forward.h"

#include <stdio.h>

int main(int argc, char **argv) {
    NcclReal r;
    char why[1024];
    int missing = 0;

    if (argc != 2) return 2;
    if (nccl_forward_open(&r, argv[1], why, sizeof why) != ncclSuccess) {
        fprintf(stderr, "%s\n", why);
        return 1;
    }
#define NCCL_FN(ret, name, params, args) \
    if (!r.name) { fprintf(stderr, "libnccl.so.2 does not export %s\n", #name); missing++; }
#include "nccl/nccl_funcs.def"
    printf("loaded %s: version %d, %d of nccl_funcs.def missing, %s\n", r.path, r.version,
           r.missing, r.deepbind ? "RTLD_DEEPBIND" : "without RTLD_DEEPBIND");
    missing += r.version != NCCL_VERSION_CODE;
    nccl_forward_close(&r);
    return missing == 0 ? 0 : 1;
}

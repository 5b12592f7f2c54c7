# shellcheck shell=sh disable=SC2034 # np and xs: read by the sourcing script
# nt_env.sh - sourced by the scripts that run nccl-tests under MPI beside the real NCCL
# (nt_compare.sh, nt_sets.sh), after nccl_tests_build.sh: the runs' common setting. Multicast
# off for both libraries (NCCL_NVLS_ENABLE=0, the NVLS guard built into $BUILD/lib and
# preloaded), the kernel cache, np (NT_NPROCS, else the GPU count) and xs, the "-x NAME" mpirun
# words that pass every MSCCLRT_* variable of the caller to the ranks. Needs BUILD.
export NCCL_NVLS_ENABLE=0
unset MSCCLRT_ENABLE_NVLS NCCL_TESTS_DEVICE
guard=$PWD/$BUILD/lib/libnvls_guard.so
[ -f "$guard" ] || gcc -shared -fPIC tests/gpu/nvls_guard.c -o "$guard" || exit 1
export LD_PRELOAD="$guard"
export MSCCLRT_CACHE_DIR="${MSCCLRT_CACHE_DIR:-$PWD/$BUILD/kernel-cache}"
np=${NT_NPROCS:-$(sh tests/gpu/gpu_count.sh)}
xs=$(env | sed -n 's/^\(MSCCLRT_[A-Z_0-9]*\)=.*/-x \1/p' | tr '\n' ' ')

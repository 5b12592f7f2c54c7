#!/bin/sh
# torch_dropin.sh - PyTorch with backend="nccl" served by the drop-in: torchrun with 2, 4 and 8
# processes, every rank on cuda:0 (or GPU_PER_RANK=1: one process per GPU), LD_PRELOAD=libmscclrt_nccl.so (tests/gpu/torch_dropin.py says
# what is checked). Correctness only: ranks sharing one GPU take turns on it.
#   BUILD=build sh tests/gpu/torch_dropin.sh        (TORCH_NPROCS="2 4 8" to choose)
# Then once more at the first count with TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1 (every
# allocator segment registered through ncclCommRegister).
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
log=${GPU_LOG_DIR:-$BUILD/gpu-logs}
mkdir -p "$log"
python3 -c 'import torch' 2>/dev/null || { echo "torch_dropin.sh: no PyTorch"; exit 77; }
so=$PWD/$BUILD/lib/nccl/libnccl.so.2   # the stand-in: soname libnccl.so.2, so torch's own NCCL is not loaded beside it
[ -f "$so" ] || { echo "torch_dropin.sh: $so missing"; exit 1; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset MSCCLRT_ENABLE_NVLS
guard=$PWD/$BUILD/lib/libnvls_guard.so
[ -f "$guard" ] || gcc -shared -fPIC tests/gpu/nvls_guard.c -o "$guard" || exit 1
export LD_LIBRARY_PATH="$PWD/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MSCCLRT_CACHE_DIR="${MSCCLRT_CACHE_DIR:-$PWD/$BUILD/kernel-cache}"
# GPU_PER_RANK=1: one process per GPU (the process counts default to the GPU count), else
# every rank on cuda:0
export GPU_PER_RANK=${GPU_PER_RANK:-0}
ngpu=$(sh tests/gpu/gpu_count.sh)
[ "$GPU_PER_RANK" = 1 ] && [ -z "$TORCH_NPROCS" ] && TORCH_NPROCS=$ngpu
export PYTHONUNBUFFERED=1
status=0
# one N LOG LABEL [VAR=VALUE...]: torchrun of tests/gpu/torch_dropin.py on N processes with the
# drop-in preloaded (and the variables), its test lines tagged with LABEL (empty: none)
one() {
    on=$1 olog=$2 olabel=$3
    shift 3
    t0=$(date +%s)
    env "$@" LD_PRELOAD="$guard:$so" timeout 400 torchrun --standalone --nproc_per_node "$on" \
        tests/gpu/torch_dropin.py >"$olog" 2>&1
    rc=$?
    echo "($(($(date +%s) - t0)) s, rc $rc)" >>"$olog"
    grep '^testing ' "$olog" | sed "s/ \.\.\. /${olabel:+ ($olabel)} ... /"
    if [ $rc -ne 0 ]; then
        echo "testing torch run N=$on${olabel:+ ($olabel)} ... failed (rc $rc; $olog)"
        grep -iE 'error|exception|Traceback' "$olog" | head -8 | sed 's/^/    /'
        status=1
    fi
}
for n in ${TORCH_NPROCS:-2 4 8}; do
    one "$n" "$log/torch_np$n.log" ""
done
# PyTorch's allocator hook: every segment the caching allocator makes is registered with the
# communicator (ncclCommRegister) and deregistered when freed; the same checks must pass
n=${TORCH_NPROCS:-2}
n=${n%% *}
one "$n" "$log/torch_np${n}_hook.log" "allocator hook" TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1
exit $status

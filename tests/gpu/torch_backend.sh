#!/bin/sh
# torch_backend.sh - python/mscclrt: torchrun with 2, 4 and 8 processes on cuda:0 (or, with
# GPU_PER_RANK=1, one process per GPU)
# running tests/gpu/torch_backend.py: backend="mscclrt" (every collective, eager and in CUDA
# graphs, torch.compile), the tuner with a candidate that hangs on purpose, and backend="nccl"
# with the drop-in preloaded and a Python selector.
#   BUILD=build sh tests/gpu/torch_backend.sh     (TORCH_NPROCS="2 4 8", TORCH_MODES="backend tune dropin")
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
log=${GPU_LOG_DIR:-$BUILD/gpu-logs}
mkdir -p "$log"
python3 -c 'import torch' 2>/dev/null || { echo "torch_backend.sh: no PyTorch"; exit 77; }
so=$PWD/$BUILD/lib/nccl/libnccl.so.2   # the stand-in: soname libnccl.so.2, so torch's own NCCL is not loaded beside it
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset MSCCLRT_ENABLE_NVLS
guard=$PWD/$BUILD/lib/libnvls_guard.so
[ -f "$guard" ] || gcc -shared -fPIC tests/gpu/nvls_guard.c -o "$guard" || exit 1
export LD_LIBRARY_PATH="$PWD/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MSCCLRT_LIB_DIR="$PWD/$BUILD/lib" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export MSCCLRT_CACHE_DIR="${MSCCLRT_CACHE_DIR:-$PWD/$BUILD/kernel-cache}"
# GPU_PER_RANK=1: one process per GPU (the process counts default to the GPU count), else
# every rank on cuda:0
export GPU_PER_RANK=${GPU_PER_RANK:-0}
ngpu=$(sh tests/gpu/gpu_count.sh)
[ "$GPU_PER_RANK" = 1 ] && [ -z "$TORCH_NPROCS" ] && TORCH_NPROCS=$ngpu
export PYTHONUNBUFFERED=1 CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
status=0
for mode in ${TORCH_MODES:-backend tune dropin}; do
    for n in ${TORCH_NPROCS:-2 4 8}; do
        [ "$mode" = tune ] && [ "$n" -lt 2 ] && continue
        pre="$guard"
        [ "$mode" = dropin ] && pre="$guard:$so"
        t0=$(date +%s)
        case $log in /*) tt=$log/tune_np$n.json ;; *) tt=$PWD/$log/tune_np$n.json ;; esac
        tf=
        [ "$mode" = dropin ] && [ -f "$tt" ] && tf=$tt   # the tune mode's table, if it ran
        MSCCLRT_TUNING_FILE=$tf TUNE_TABLE=$tt LD_PRELOAD="$pre" timeout 500 torchrun --standalone \
            --nproc_per_node "$n" tests/gpu/torch_backend.py "$mode" >"$log/torchpy_${mode}_np$n.log" 2>&1
        rc=$?
        echo "($(($(date +%s) - t0)) s, rc $rc)" >>"$log/torchpy_${mode}_np$n.log"
        grep '^testing ' "$log/torchpy_${mode}_np$n.log" | sed "s|torch_backend/$mode/|torch_backend/$mode/np$n/|"
        if [ $rc -ne 0 ]; then
            echo "testing torch_backend/$mode/np$n run ... failed (rc $rc; $log/torchpy_${mode}_np$n.log)"
            grep -iE 'error|exception|Traceback' "$log/torchpy_${mode}_np$n.log" | head -8 | sed 's/^/    /'
            status=1
        fi
    done
done
exit $status

#!/bin/sh
# torch_bench.sh - the PyTorch rows of the 8-GPU run, side by side in one call: torchrun with one
# process per GPU (NPROC, default all GPUs) running tests/gpu/torch_bench.py three times: our
# drop-in under backend="nccl" (LD_PRELOAD), PyTorch's own NCCL, and backend="mscclrt". Prints
# a table (us per call) per configuration and the joined table last. NVLS stays off.
#   BUILD=build sh tests/gpu/torch_bench.sh      (MAX_BYTES=1073741824 NPROC=8; BENCH_DEVICE=0
#   puts every rank on GPU 0 to try the script on one GPU: correctness only, the times mean nothing)
# TB_REPEAT=3 runs the three configurations that many times, interleaved (ours, nccl, mscclrt,
# ours, ...), and the joined table gives each row's median: a single eager run is noisy (an
# outlier moved between configurations from one call to the next, c13 and c17).
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
log=${GPU_LOG_DIR:-$BUILD/gpu-logs}
mkdir -p "$log"
python3 -c 'import torch' 2>/dev/null || { echo "torch_bench.sh: no PyTorch"; exit 77; }
n=${NPROC:-$(sh tests/gpu/gpu_count.sh)}
max=${MAX_BYTES:-1073741824}
so=$PWD/$BUILD/lib/nccl/libnccl.so.2   # the stand-in: soname libnccl.so.2, so torch's own NCCL is not loaded beside it
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset MSCCLRT_ENABLE_NVLS
guard=$PWD/$BUILD/lib/libnvls_guard.so
[ -f "$guard" ] || gcc -shared -fPIC tests/gpu/nvls_guard.c -o "$guard" || exit 1
export LD_LIBRARY_PATH="$PWD/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MSCCLRT_LIB_DIR="$PWD/$BUILD/lib" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export MSCCLRT_CACHE_DIR="${MSCCLRT_CACHE_DIR:-$PWD/$BUILD/kernel-cache}" PYTHONUNBUFFERED=1
status=0
reps=${TB_REPEAT:-1}
for name in ours nccl mscclrt; do : >"$log/torch_bench_$name.rows"; done
rep=1
while [ "$rep" -le "$reps" ]; do
for cfg in ours:nccl:"$guard:$so" nccl:nccl:"$guard" mscclrt:mscclrt:"$guard"; do
    name=${cfg%%:*} rest=${cfg#*:}
    backend=${rest%%:*} pre=${rest#*:}
    if [ -n "$BENCH_DEVICE" ] && [ "$name" = nccl ]; then   # NCCL refuses ranks sharing a GPU
        echo "testing torch_bench/nccl ... skipped (ranks share GPU $BENCH_DEVICE)"
        continue
    fi
    run=$log/torch_bench_$name$([ "$reps" -gt 1 ] && echo ".$rep").log
    LD_PRELOAD="$pre" timeout 580 torchrun --standalone --nproc_per_node "$n" \
        tests/gpu/torch_bench.py "$backend" "$max" >"$run" 2>&1 || status=1
    grep '^testing ' "$run" | sed "s|torch_bench/$backend/|torch_bench/$name/|"
    grep '^row ' "$run" | sed "s/^row /$name /" >>"$log/torch_bench_$name.rows"
done
rep=$((rep + 1))
done
echo "what dtype bytes mode | ours(drop-in) | nccl | mscclrt(backend) us$([ "$reps" -gt 1 ] && echo ", median of $reps runs")"
# one line per row: its key and the median of its runs (tests/gpu/median.awk)
join_rows() {
    awk '{print $2"|"$3"|"$4"|"$5, $6}' "$log/torch_bench_$1.rows" | awk -f tests/gpu/median.awk | sort
}
join_rows ours >"$log/a" ; join_rows nccl >"$log/b"; join_rows mscclrt >"$log/c"
join -a1 -e- -o 0,1.2,2.2 "$log/a" "$log/b" | join -a1 -e- -o 0,1.2,1.3,2.2 - "$log/c" | tr '|' ' ' | sort -k3,3n
exit $status

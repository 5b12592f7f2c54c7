#!/bin/sh
# nt_compare.sh - NVIDIA's nccl-tests beside the real NCCL, one process per GPU, in one call: each
# binary runs with the real NCCL (the nvidia-nccl wheel's libnccl.so.2, or NCCL_REAL_LIB_DIR) and
# then with libmscclrt_nccl.so (our lib/nccl/libnccl.so.2 first on LD_LIBRARY_PATH), with the
# same flags. Prints, per binary and size, the time in microseconds (best of out-of-place and
# in-place) of NCCL and ours, their ratio NCCL/ours (above 1: ours is faster), ours' bus
# bandwidth and every #wrong. This is how BENCHMARKS.md's nccl-tests tables are made; it
# measures, it asserts only that every run ended and was correct.
#   BUILD=build NCCL_TESTS_SRC=DIR sh tests/gpu/nt_compare.sh
#   NT_BINS="all_reduce_perf ..."  NT_ARGS="-b 1K -e 1G -f 4 -d half -c 1 -w 5 -n 20 -G 1"
#   NT_NPROCS (default: the GPU count)  NT_TIMEOUT (seconds per run, default 120)
#   NT_BASE_LIB=DIR  also runs an earlier build of ours (DIR holds its nccl/libnccl.so.2 and
#   libmscclrt.so.*), printed as a last column: before/after a change, in the same call
# Multicast stays off for both (NCCL_NVLS_ENABLE=0, the NVLS guard preloaded). Logs: $GPU_LOG_DIR.
# Every MSCCLRT_* variable reaches the ranks: with MSCCLRT_NATIVE_PROBE=1 each rank's "mscclrt
# probe:" lines (where the native kernels spend a launch, libmscclrt(3)) end the *_ours.log files.
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
src=${NCCL_TESTS_SRC:-../shared/third_party/nccl-tests}
mpi=${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}
cuda=${CUDA_HOME:-/usr/local/cuda}
log=${GPU_LOG_DIR:-$BUILD/gpu-logs}/nt_compare
mkdir -p "$log"
command -v mpirun >/dev/null 2>&1 || { echo "skipped (needs mpirun)"; exit 77; }
# shellcheck source=tests/gpu/nccl_wheel.sh
. tests/gpu/nccl_wheel.sh
real=${NCCL_REAL_LIB_DIR:-$(nccl_wheel_dir)}
[ -f "$real/libnccl.so.2" ] || { echo "skipped (needs the real NCCL: NCCL_REAL_LIB_DIR or the nvidia-nccl wheel)"; exit 77; }
# shellcheck source=tests/gpu/nccl_tests_build.sh
. tests/gpu/nccl_tests_build.sh
# shellcheck source=tests/gpu/nt_env.sh
. tests/gpu/nt_env.sh
args=${NT_ARGS:-"-b 1K -e 1G -f 4 -d half -c 1 -w 5 -n 20 -G 1"}
bins=${NT_BINS:-"all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf sendrecv_perf broadcast_perf reduce_perf"}
ours_path="$PWD/$BUILD/lib/nccl:$PWD/$BUILD/lib"
status=0
# run NAME LIBPATH: one binary under mpirun with LIBPATH first; its log is $log/NAME.log
# every MSCCLRT_* variable of the caller reaches the ranks (e.g. MSCCLRT_NATIVE_SCRATCH_BYTES: xs)
run() {
    # shellcheck disable=SC2086 # args and xs are words on purpose
    LD_LIBRARY_PATH="$2${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout "${NT_TIMEOUT:-120}" \
        mpirun --allow-run-as-root --oversubscribe -np "$np" -x LD_PRELOAD -x LD_LIBRARY_PATH \
        -x NCCL_NVLS_ENABLE $xs "$out/$b" -g 1 $args >"$log/$1.log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] && ! grep -q 'Out of bounds values : 0 OK' "$log/$1.log" && rc=1
    [ "$rc" -eq 0 ] || { echo "nt_compare: $1 failed (rc $rc; $log/$1.log)"; tail -3 "$log/$1.log"; status=1; }
}
# rows FILE: "size time busbw wrong" per size, time the best of out-of-place and in-place
rows() { awk -f tests/gpu/nt_rows.awk "$1"; }
for b in $bins; do
    [ -x "$out/$b" ] || { echo "nt_compare: $b not built"; status=1; continue; }
    run "${b%_perf}_nccl" "$real"
    run "${b%_perf}_ours" "$ours_path"
    [ -n "$NT_BASE_LIB" ] && run "${b%_perf}_base" "$NT_BASE_LIB/nccl:$NT_BASE_LIB"
    echo "## ${b%_perf} (np $np, $args): size, NCCL us, ours us, NCCL/ours, ours busbw GB/s, #wrong nccl/ours${NT_BASE_LIB:+, base us}"
    for v in nccl ours base; do
        [ -f "$log/${b%_perf}_$v.log" ] && rows "$log/${b%_perf}_$v.log" >"$log/${b%_perf}_$v.rows"
    done
    [ -n "$NT_BASE_LIB" ] || : >"$log/${b%_perf}_base.rows"
    awk 'FILENAME ~ /_nccl.rows$/ { t[$1] = $2; w[$1] = $4; next }
         FILENAME ~ /_base.rows$/ { bt[$1] = $2; next }
         { n = ($1 in t) ? t[$1] : 0; r = ($2 > 0) ? n / $2 : 0
           printf "%12s %10.2f %10.2f %6.2f %8.1f %s/%d %s\n", $1, n, $2, r, $3, ($1 in w) ? w[$1] : "-", $4, ($1 in bt) ? bt[$1] : ""
           if ($4 != 0) bad = 1 } END { exit bad }' \
        "$log/${b%_perf}_nccl.rows" "$log/${b%_perf}_base.rows" "$log/${b%_perf}_ours.rows" || status=1
done
exit $status

#!/bin/sh
# nccl_tests.sh - NVIDIA's nccl-tests against the drop-in (libmscclrt_nccl.so standing in for
# libnccl.so.2), one process per rank under MPI, every rank on GPU 0 (NCCL_TESTS_DEVICE=0): the
# ranks share the GPU, so this proves correctness (#wrong 0, exit 0), not speed. Builds
# nccl-tests (MPI=1) against our nccl.h into $BUILD/nccl-tests-mpi first.
#   BUILD=build sh tests/gpu/nccl_tests.sh            (make test-gpu runs it)
# NT_NPROCS="2 4 8"   process counts;  NT_FULL=1: -d all -o all at every count (default: at 2
# every dtype with sum and, for the reducing collectives, every operator with float; larger
# steps at 4 and 8);
# every binary also runs with -G 2 (CUDA graphs) at every count
# NT_BINS="all_reduce_perf ..." the binaries to run (default: all eleven).
# NT_R2_ONLY=1: only the symmetric-window runs past the plans' thresholds (-R 2, eager and -G 2).
# NT_NO_REG=1: none of the registered-buffer runs (-R 1, -R 2), only NT_BINS'.
# GPU_PER_RANK=1: one process per GPU (nccl-tests' own device choice; the process counts
# default to the GPU count) instead of every rank on GPU 0.
# NCCL_TESTS_SRC, MPI_HOME, CUDA_HOME locate the sources and tools. Logs: $GPU_LOG_DIR.
# NT_BUILD_ONLY=1: build $BUILD/nccl-tests-mpi and stop (tests/gpu/net_bench.sh uses it).
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
src=${NCCL_TESTS_SRC:-../shared/third_party/nccl-tests}
mpi=${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}
cuda=${CUDA_HOME:-/usr/local/cuda}
log=${GPU_LOG_DIR:-$BUILD/gpu-logs}
mkdir -p "$log"
command -v mpirun >/dev/null 2>&1 || { echo "nccl_tests.sh: no mpirun"; exit 77; }
# shellcheck source=tests/gpu/nccl_tests_build.sh
. tests/gpu/nccl_tests_build.sh
[ "${NT_BUILD_ONLY:-0}" = 1 ] && exit 0

export NCCL_NVLS_ENABLE=0
unset MSCCLRT_ENABLE_NVLS
guard=$PWD/$BUILD/lib/libnvls_guard.so
[ -f "$guard" ] || gcc -shared -fPIC tests/gpu/nvls_guard.c -o "$guard" || exit 1
export LD_PRELOAD="$guard"
export MSCCLRT_CACHE_DIR="${MSCCLRT_CACHE_DIR:-$PWD/$BUILD/kernel-cache}"
status=0
devopt="-x NCCL_TESTS_DEVICE=0"
if [ "${GPU_PER_RANK:-0}" = 1 ]; then
    devopt=""
    unset NCCL_TESTS_DEVICE
    [ -n "$NT_NPROCS" ] || NT_NPROCS=$(sh tests/gpu/gpu_count.sh)
fi
one() { # name, nprocs, binary, args...
    name=$1; np=$2; bin=$3; shift 3
    t0=$(date +%s)
    # shellcheck disable=SC2086 # devopt is empty or two words
    timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$np" $devopt \
        -x LD_PRELOAD -x LD_LIBRARY_PATH -x MSCCLRT_CACHE_DIR -x NCCL_NVLS_ENABLE \
        -x MSCCLRT_DEBUG -x MSCCLRT_NCCL_LIB_PATH -x MSCCLRT_FORCE_NCCL \
        "$out/$bin" -g 1 -c 1 -w 1 -n 2 "$@" >"$log/$name.log" 2>&1
    rc=$?
    echo "($(($(date +%s) - t0)) s, rc $rc)" >>"$log/$name.log"
    # nccl-tests' footer: every wrong value counted; its exit status is non-zero on errors
    if [ $rc -eq 0 ] && grep -q 'Out of bounds values : 0 OK' "$log/$name.log"; then
        echo "testing nccl-tests $name ... passed"
    else
        echo "testing nccl-tests $name ... failed (rc $rc; $log/$name.log)"
        grep -v '^#' "$log/$name.log" | grep -iE 'wrong|error|fail|abort' | head -5 | sed 's/^/    /'
        tail -3 "$log/$name.log" | sed 's/^/    /'
        status=1
    fi
}
bins=${NT_BINS:-"all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf reduce_perf alltoall_perf alltoallv_perf sendrecv_perf gather_perf scatter_perf hypercube_perf"}
for np in ${NT_NPROCS:-2 4 8}; do
    [ -n "$NT_R2_ONLY" ] && bins=""
    for b in $bins; do
        [ -x "$out/$b" ] || { echo "testing nccl-tests $b np$np ... failed (not built)"; status=1; continue; }
        if [ -n "$NT_FULL" ]; then
            one "${b%_perf}_np${np}_all" "$np" "$b" -b 8 -e 1M -f 16 -d all -o all
        elif [ "$np" = 2 ]; then
            # every dtype with sum, every operator with float: each (dtype, operator) pair is a
            # kernel to compile, and all 60 took over 5 minutes for all_reduce alone on 2 GPUs
            one "${b%_perf}_np${np}_dtypes" "$np" "$b" -b 8 -e 1M -f 16 -d all -o sum
            case $b in   # the operators matter only where the collective reduces
            all_reduce_perf | reduce_scatter_perf | reduce_perf)
                one "${b%_perf}_np${np}_ops" "$np" "$b" -b 8 -e 1M -f 16 -d float -o all ;;
            esac
        else
            one "${b%_perf}_np${np}" "$np" "$b" -b 8 -e 4M -f 32
        fi
        # CUDA-graph launches (nccl-tests captures its calls and replays the graph)
        one "${b%_perf}_np${np}_graph" "$np" "$b" -b 8 -e 1M -f 32 -G 2
    done
    # registered buffers (local registration and symmetric windows)
    [ -n "$NT_NO_REG" ] && continue
    [ -z "$NT_R2_ONLY" ] && one "all_reduce_np${np}_R1" "$np" all_reduce_perf -b 8 -e 1M -f 32 -R 1
    [ -z "$NT_R2_ONLY" ] && one "all_reduce_np${np}_R2" "$np" all_reduce_perf -b 8 -e 1M -f 32 -R 2
    [ -z "$NT_R2_ONLY" ] && one "all_gather_np${np}_R2" "$np" all_gather_perf -b 8 -e 1M -f 32 -R 2
    # symmetric windows past the plans' size thresholds, eager and captured: nccl-tests moves
    # its buffers by an offset every iteration, so most calls meet buffers a plan keyed by its
    # buffers has no context for (captured ones failed with 'invalid usage', eager ones set up
    # a context per offset)
    for b in all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf broadcast_perf reduce_perf; do
        [ -x "$out/$b" ] || continue
        one "${b%_perf}_np${np}_R2_sizes" "$np" "$b" -b 1K -e 16M -f 4 -R 2 -n 4
        one "${b%_perf}_np${np}_R2_graph" "$np" "$b" -b 1K -e 16M -f 4 -R 2 -G 2 -n 4
    done
done
exit $status

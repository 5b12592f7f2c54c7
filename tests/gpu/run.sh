#!/bin/sh
# run.sh - the GPU tests (`make test-gpu`, or directly: BUILD=build sh tests/gpu/run.sh with a
# prebuilt build dir, as on GPU machines that cannot build). Multicast stays off: NVLS is never
# enabled and the NVLS guard is preloaded into every GPU process. Runs the compat plans and the
# 2-rank stdlib plans (tests/golden/stdlib/*/*.N2.json) through test_gpu_exec, one process per
# rank (test_gpu_mp), then a short mscclrt-perf check. Logs go to $GPU_LOG_DIR when set.
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
export NCCL_NVLS_ENABLE=0
unset MSCCLRT_ENABLE_NVLS
guard=$BUILD/lib/libnvls_guard.so
if [ ! -f "$guard" ]; then
    gcc -shared -fPIC tests/gpu/nvls_guard.c -o "$guard" || { echo "run.sh: cannot build the NVLS guard" >&2; exit 1; }
fi
export LD_PRELOAD="$PWD/$guard${LD_PRELOAD:+:$LD_PRELOAD}"
export LD_LIBRARY_PATH="$PWD/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MSCCLRT_CACHE_DIR="${MSCCLRT_CACHE_DIR:-$PWD/$BUILD/kernel-cache}"
log=${GPU_LOG_DIR:-$BUILD/gpu-logs}
mkdir -p "$log" "$MSCCLRT_CACHE_DIR"
status=0
run() { # name, command...
    name=$1
    shift
    "$@" >"$log/$name.log" 2>&1
    rc=$?
    grep '^testing ' "$log/$name.log"
    if [ $rc -eq 77 ]; then echo "testing $name ... skipped"; return 0; fi
    if [ $rc -ne 0 ]; then
        echo "testing $name ... failed (rc $rc; log $log/$name.log)"
        tail -20 "$log/$name.log" | sed 's/^/    /'
        status=1
    fi
}
run gpu_compat "$BUILD/tests/test_gpu_exec"
run gpu_multiprocess "$BUILD/tests/test_gpu_mp"
stdlib=$(ls tests/golden/stdlib/*/*.N2.json 2>/dev/null)
if [ -n "$stdlib" ]; then
    # shellcheck disable=SC2086
    run gpu_stdlib "$BUILD/tests/test_gpu_exec" $stdlib
fi
if [ -x "$BUILD/bin/mscclrt-perf" ]; then
    run perf_check "$BUILD/bin/mscclrt-perf" -g 2 -b 1K -e 4M -f 4 -w 2 -n 10 -c 1 \
        --plan tests/plans/compat/allreduce_packet.json
fi
exit $status

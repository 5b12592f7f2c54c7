#!/bin/sh
# nccl_tests_build.sh - NVIDIA's nccl-tests builds against the drop-in as it would against NCCL:
# our nccl.h (with NVIDIA's nccl_device.h from the 2.28.9 wheel, which nccl-tests includes for
# NCCL >= 2.28) and libmscclrt_nccl.so as libnccl.so, out of tree into $BUILD/nccl-tests; every
# *_perf binary must exist and need libnccl.so.2. One architecture (sm_90) keeps the build short;
# MPI off. Rebuilt from scratch when our header changes (nccl-tests' own rules do not see it).
# nccl-tests is an optional input, never copied here: its sources in NCCL_TESTS_SRC, else in the
# shared checkout beside this repository (../shared/third_party/nccl-tests). Skips, saying what it
# needs, without them, without nvcc, and while the entry points are missing.
cd "$(dirname "$0")/../.." || exit 2
BUILD=${BUILD:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
src=${NCCL_TESTS_SRC:-../shared/third_party/nccl-tests}
# the stand-in (soname libnccl.so.2): what -lnccl must record
so=$BUILD/lib/nccl/libnccl.so.2
perfs="all_reduce all_gather broadcast reduce_scatter reduce alltoall alltoallv scatter gather
       sendrecv hypercube"

if [ ! -f "$so" ]; then
    echo "$so not built: entry points missing (runtime/nccl/nccl_api*.c)"
    echo "skipped (needs runtime/nccl/nccl_api*.c)"
    exit 77
fi
if [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
    echo "nccl_tests_build: no $CUDA_HOME/bin/nvcc (set CUDA_HOME); nccl-tests needs it"
    echo "skipped (needs nvcc: the CUDA toolkit in CUDA_HOME)"
    exit 77
fi
if [ ! -f "$src/src/Makefile" ]; then
    if [ -n "${NCCL_TESTS_SRC:-}" ]; then
        echo "nccl_tests_build: NCCL_TESTS_SRC=$src holds no nccl-tests (no src/Makefile)"
        exit 1
    fi
    echo "nccl_tests_build: no nccl-tests sources in $src; to build them against the drop-in:"
    echo "    git clone https://github.com/NVIDIA/nccl-tests && NCCL_TESTS_SRC=\$PWD/nccl-tests make test"
    echo "skipped (needs nccl-tests: NCCL_TESTS_SRC=DIR or ../shared/third_party/nccl-tests)"
    exit 77
fi
nccl=$BUILD/third_party/nccl-2.28.9
sh tests/tools/fetch_nccl.sh "$nccl" || exit 1

top=$(pwd)
out=$top/$BUILD/nccl-tests
home=$out/home
mkdir -p "$home/include" "$home/lib" || exit 2
# NCCL_HOME as nccl-tests expects it: include/nccl.h and lib/libnccl.so
cp runtime/nccl/nccl_abi.h "$home/include/nccl.h"
cp runtime/nccl/nccl_funcs.def "$home/include/"
rm -rf "$home/include/nccl_device" "$home/include/nccl_device.h"
cp -r "$nccl/include/nccl_device" "$nccl/include/nccl_device.h" "$home/include/"
ln -sf "$top/$so" "$home/lib/libnccl.so"
ln -sf "$top/$so" "$home/lib/libnccl.so.2"

stamp=$(cat "$home/include/nccl.h" "$home/include/nccl_funcs.def" | cksum)
if [ "$(cat "$out/header.cksum" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$out/build"
fi
start=$(date +%s)
make -C "$src/src" -j2 BUILDDIR="$out/build" NCCL_HOME="$home" CUDA_HOME="$CUDA_HOME" \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" MPI=0 >"$out/make.log" 2>&1
rc=$?
echo "nccl_tests_build: make took $(( $(date +%s) - start )) s (log: $out/make.log)"
if [ $rc != 0 ]; then
    tail -40 "$out/make.log"
    echo "testing nccl_tests_build/make ... failed"
    exit 1
fi
echo "$stamp" >"$out/header.cksum"
echo "testing nccl_tests_build/make ... passed"

st=0
for p in $perfs; do
    bin=$out/build/${p}_perf
    if [ ! -x "$bin" ]; then
        echo "nccl_tests_build: $bin was not built"
        echo "testing nccl_tests_build/${p}_perf ... failed"; st=1; continue
    fi
    if readelf -d "$bin" | grep -q 'NEEDED.*\[libnccl\.so\.2\]'; then
        echo "testing nccl_tests_build/${p}_perf ... passed"
    else
        echo "nccl_tests_build: $bin does not need libnccl.so.2:"
        readelf -d "$bin" | grep NEEDED
        echo "testing nccl_tests_build/${p}_perf ... failed"; st=1
    fi
done
exit $st

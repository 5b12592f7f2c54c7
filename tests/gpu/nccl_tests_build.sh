# shellcheck shell=sh disable=SC2154 # sourced: the caller sets src, mpi, cuda, log and BUILD
# nccl_tests_build.sh - sourced by the nccl-tests scripts (nccl_tests.sh, nt_compare.sh): builds
# NVIDIA's nccl-tests (MPI=1) against our nccl.h into $BUILD/nccl-tests-mpi ($out), linked to
# libnccl.so.2 by soname, so LD_LIBRARY_PATH picks ours ($home/lib) or the real NCCL at run time.
# Needs: BUILD, src (sources), mpi, cuda, log; exits 77 (skip) without sources, 1 on failure.
# nccl-tests is an optional input, never copied into the repository
if [ ! -f "$src/src/Makefile" ]; then
    echo "nccl_tests.sh: no nccl-tests sources in $src (git clone https://github.com/NVIDIA/nccl-tests;" \
         "then NCCL_TESTS_SRC=DIR)"
    echo "skipped (needs nccl-tests: NCCL_TESTS_SRC=DIR or ../shared/third_party/nccl-tests)"
    exit 77
fi
[ -f "$BUILD/lib/nccl/libnccl.so.2" ] || { echo "nccl_tests.sh: $BUILD/lib/nccl/libnccl.so.2 missing"; exit 1; }

# NCCL_HOME for nccl-tests: our header and our library under the names it links
home=$PWD/$BUILD/nccl-home
mkdir -p "$home/include" "$home/lib"
cp "$BUILD/include/nccl.h" "$BUILD/include/nccl_funcs.def" "$home/include/"
# nccl-tests includes NVIDIA's nccl_device.h for NCCL >= 2.28 (device-API kernels it runs only on
# request): take it from the 2.28.9 wheel (tests/tools/fetch_nccl.sh) or PyTorch's environment
dev=${NCCL_DEVICE_INCLUDE:-}
[ -n "$dev" ] || { [ -f "$BUILD/third_party/nccl-2.28.9/include/nccl_device.h" ] && dev=$BUILD/third_party/nccl-2.28.9/include; }
[ -n "$dev" ] || dev=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "include"))' 2>/dev/null)
if [ ! -f "$dev/nccl_device.h" ]; then
    echo "testing nccl-tests build (MPI) ... failed (no nccl_device.h: set NCCL_DEVICE_INCLUDE)"; exit 1
fi
rm -rf "$home/include/nccl_device" "$home/include/nccl_device.h"
cp -r "$dev/nccl_device" "$dev/nccl_device.h" "$home/include/"
ln -sf "$PWD/$BUILD/lib/nccl/libnccl.so.2" "$home/lib/libnccl.so.2"
ln -sf libnccl.so.2 "$home/lib/libnccl.so"
out=$PWD/$BUILD/nccl-tests-mpi
# the link resolves our library's own needs (libcjson) through the same path as the runs
export LD_LIBRARY_PATH="$home/lib:$PWD/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if ! make -s -C "$src/src" MPI=1 MPI_HOME="$mpi" NCCL_HOME="$home" CUDA_HOME="$cuda" \
        BUILDDIR="$out" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" -j"$(nproc)" \
        >"$log/nccl_tests_build.log" 2>&1; then
    echo "testing nccl-tests build (MPI) ... failed"; tail -20 "$log/nccl_tests_build.log"; exit 1
fi
echo "testing nccl-tests build (MPI) ... passed"

#!/bin/sh
# bench.sh - the side-by-side benchmark behind BENCHMARKS.md: compiles the stdlib plans for the
# GPUs present and runs mscclrt-perf with --lib both (our plans and the real NCCL, one harness,
# one run), fp16, CUDA-graph mode, nccl-tests columns; small allreduce also with one thread per
# GPU, as nccl-tests' anchors run. Multicast stays off (NCCL_NVLS_ENABLE=0,
# NVLS guard preloaded). Usage: BUILD=build sh tests/gpu/bench.sh  (results in $BENCH_DIR)
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
N=${N:-$(sh tests/gpu/gpu_count.sh)}
[ "$N" -ge 2 ] || { echo "bench.sh: needs at least 2 GPUs" >&2; exit 77; }
export NCCL_NVLS_ENABLE=0
unset MSCCLRT_ENABLE_NVLS
guard=$BUILD/lib/libnvls_guard.so
[ -f "$guard" ] || gcc -shared -fPIC tests/gpu/nvls_guard.c -o "$guard" || exit 1
export LD_PRELOAD="$PWD/$guard${LD_PRELOAD:+:$LD_PRELOAD}"
export LD_LIBRARY_PATH="$PWD/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MSCCLRT_CACHE_DIR="${MSCCLRT_CACHE_DIR:-$PWD/$BUILD/kernel-cache}"
out=${BENCH_DIR:-$BUILD/bench}
mkdir -p "$out/plans"
ITERS=${ITERS:-50}
for p in allreduce/allpair_packet allreduce/rs_ag_packet allreduce/rs_ag_read \
         allgather/packet allgather/fullmesh allgather/copyengine reducescatter/fullmesh_read; do
    "$BUILD/bin/mscclc" "stdlib/$p.coll" -D N="$N" -o "$out/plans/$(echo "$p" | tr / _).json" || exit 1
done
# the large-allreduce candidates beside rs_ag_read's default (T=32): more blocks, and puts
"$BUILD/bin/mscclc" stdlib/allreduce/rs_ag_read.coll -D N="$N" -D T=64 -o "$out/plans/allreduce_rs_ag_read_T64.json" || exit 1
"$BUILD/bin/mscclc" stdlib/allreduce/rs_ag_simple.coll -D N="$N" -o "$out/plans/allreduce_rs_ag_simple.json" || exit 1
P=$out/plans
perf() { # name, args...
    name=$1
    shift
    echo "## $name: mscclrt-perf $*" | tee "$out/$name.txt"
    "$BUILD/bin/mscclrt-perf" -g "$N" -G 1 -w 5 -n "$ITERS" -d half -c 1 --lib both "$@" \
        >>"$out/$name.txt" 2>&1
    echo "   rc=$?"
}
perf ar_allpair  -C allreduce --plan "$P/allreduce_allpair_packet.json" -b 1K -e 1M -f 4
# one thread per GPU, as nccl-tests' anchors run (all_reduce_perf -t N -g 1): each GPU's graph
# is launched by its own thread, so no GPU waits for the others' launches
perf ar_allpair_tpg -t "$N" -g 1 -C allreduce --plan "$P/allreduce_allpair_packet.json" -b 1K -e 1M -f 4 -n 200
perf ar_rsag_pkt -C allreduce --plan "$P/allreduce_rs_ag_packet.json" -b 64K -e 4M -f 4
perf ar_rsag_read -C allreduce --plan "$P/allreduce_rs_ag_read.json" -b 1M -e 1G -f 4 -n 20
perf ar_rsag_read_T64 -C allreduce --plan "$P/allreduce_rs_ag_read_T64.json" -b 64M -e 1G -f 4 -n 20 --lib mscclrt
perf ar_rsag_simple -C allreduce --plan "$P/allreduce_rs_ag_simple.json" -b 64M -e 1G -f 4 -n 20 --lib mscclrt
perf ag_packet   -C allgather --plan "$P/allgather_packet.json" -b 1K -e 4M -f 4
perf ag_fullmesh -C allgather --plan "$P/allgather_fullmesh.json" -b 1M -e 1G -f 8 -n 20
perf ag_copyeng  -C allgather --plan "$P/allgather_copyengine.json" -b 16M -e 1G -f 4 -n 20
perf rs_read     -C reducescatter --plan "$P/reducescatter_fullmesh_read.json" -b 1M -e 1G -f 8 -n 20

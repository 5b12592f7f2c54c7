#!/bin/sh
# demo.sh - the main job of `make run`: compile the stdlib one-shot allreduce for 8 ranks, show
# its plan, run it on the CPU reference backend with a correctness check, and on GPUs when the
# machine has at least 8 of them. BUILD names the build directory (default build). The plan is
# shown as a summary (header and one line per rank); DUMP=full (`make run DUMP=full`) prints
# every operation.
set -e
BUILD=${BUILD:-build}
N=${N:-8}
PROG=${PROG:-stdlib/allreduce/allpair_packet.coll}
out=$BUILD/demo
mkdir -p "$out"
echo "== mscclc $PROG -D N=$N"
"$BUILD/bin/mscclc" "$PROG" -D N="$N" -o "$out/allreduce.json"
if [ "${DUMP:-summary}" = full ]; then
    echo "== mscclc --dump"
    "$BUILD/bin/mscclc" --dump "$out/allreduce.json"
else
    echo "== mscclc --dump --summary (make run DUMP=full: every operation)"
    "$BUILD/bin/mscclc" --dump --summary "$out/allreduce.json"
fi
echo "== mscclrt-run on the CPU reference backend (float32 sum, 64 KiB, checked)"
"$BUILD/bin/mscclrt-run" "$out/allreduce.json" --ranks "$N" --size 65536 --dtype float32 \
    --op sum --backend cpu --iters 3 --check
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$ngpu" -ge "$N" ] && [ -x "$BUILD/bin/mscclrt-perf" ]; then
    echo "== mscclrt-perf on $N GPUs"
    "$BUILD/bin/mscclrt-perf" -C allreduce --plan "$out/allreduce.json" -g "$N" -b 1K -e 64K -f 4 -c 1
else
    echo "== no $N GPUs here: GPU run skipped"
fi

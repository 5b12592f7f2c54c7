#!/bin/sh
# fuzz_plan_cpu.sh - runs every plan the loader accepts on the CPU backend (fuzz_plan.c built
# with -DFUZZ_RUN_CPU, tests/fuzz/fuzz_run_cpu.c): a plan that loads must run or fail cleanly
# with a message, never crash, trip a sanitizer or hang. Seeds: tests/fuzz/corpus_plan, the
# compat plans and the golden plans of the compiler. With clang: libFuzzer, then always the
# standalone mutation driver, FUZZ_SECONDS (default 30) each, under ASan + UBSan
# (tests/fuzz/fuzz_lib.sh). Crashing inputs are kept in $BUILD/fuzz/ for replay:
#   $BUILD/fuzz/fuzz_plan_cpu_sa -t 0 FILE
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
OUT=$BUILD/fuzz
mkdir -p "$OUT" || exit 2
SECS=${FUZZ_SECONDS:-30}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$BUILD/gen/kernel_sources.c" ] || [ ! -f "$BUILD/gen/stdlib_sources.c" ] ||
   [ ! -f "$BUILD/lib/libmscclc.a" ]; then
    echo "fuzz_plan_cpu: $BUILD/gen/*_sources.c or libmscclc.a missing (run make first)"; exit 1
fi
# libmscclrt's sources (the NCCL drop-in is not part of it); its algorithm layer compiles the
# embedded stdlib through the compiler, taken from libmscclc.a
RT=$(ls runtime/*/*.c | grep -v '^runtime/cmd/\|^runtime/shim/\|^runtime/nccl/')
SRC="tests/fuzz/fuzz_plan.c tests/fuzz/fuzz_run_cpu.c $RT $BUILD/gen/kernel_sources.c $BUILD/gen/stdlib_sources.c"
FLAGS="-g -O1 -std=c11 -D_GNU_SOURCE -DFUZZ_RUN_CPU -Iruntime/include -Iruntime -Iruntime/plan -Ikernels \
-Icompiler -I$BUILD/gen -isystem $CUDA_HOME/include -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
LIBS="$BUILD/lib/libmscclc.a -lcjson -lm -lpthread -ldl"
export MSCCLRT_CPU_TIMEOUT_MS=${MSCCLRT_CPU_TIMEOUT_MS:-300}   # a deadlocked plan fails fast
seeds=$OUT/plan_cpu_seeds
rm -rf "$seeds" && mkdir -p "$seeds" || exit 2
cp tests/fuzz/corpus_plan/* "$seeds"/
for f in tests/plans/compat/*.json tests/golden/ok/*.json; do cp "$f" "$seeds/$(echo "$f" | tr / _)"; done
. tests/fuzz/fuzz_lib.sh
fuzz_libfuzzer fuzz_plan_cpu "$SECS" 65536 "$seeds"
fuzz_standalone fuzz_plan_cpu "$SECS" "$seeds"
exit $fuzz_status

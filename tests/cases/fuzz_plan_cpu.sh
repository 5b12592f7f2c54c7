#!/bin/sh
# fuzz_plan_cpu.sh - runs every plan the loader accepts on the CPU backend (fuzz_plan.c built
# with -DFUZZ_RUN_CPU, tests/fuzz/fuzz_run_cpu.c): a plan that loads must run or fail cleanly
# with a message, never crash, trip a sanitizer or hang. Seeds: tests/fuzz/corpus_plan, the
# compat plans and the golden plans of the compiler. With clang: libFuzzer, then always the
# standalone mutation driver, FUZZ_SECONDS (default 30) each, under ASan + UBSan. Crashing
# inputs are kept in $BUILD/fuzz/ for replay:  $BUILD/fuzz/fuzz_plan_cpu_sa -t 0 FILE
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
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export MSCCLRT_CPU_TIMEOUT_MS=${MSCCLRT_CPU_TIMEOUT_MS:-300}   # a deadlocked plan fails fast
status=0
seeds=$OUT/plan_cpu_seeds
rm -rf "$seeds" && mkdir -p "$seeds" || exit 2
cp tests/fuzz/corpus_plan/* "$seeds"/
for f in tests/plans/compat/*.json tests/golden/ok/*.json; do cp "$f" "$seeds/$(echo "$f" | tr / _)"; done

# 1. libFuzzer
# shellcheck disable=SC2086
if command -v clang >/dev/null 2>&1 &&
   clang $FLAGS -fsanitize=fuzzer,address,undefined $SRC $LIBS -o "$OUT/fuzz_plan_cpu_lf" \
       >"$OUT/build_cpu_lf.log" 2>&1; then
    rm -rf "$OUT/corpus_cpu" && mkdir -p "$OUT/corpus_cpu"
    if timeout $((SECS + 120)) "$OUT/fuzz_plan_cpu_lf" -max_total_time="$SECS" -max_len=65536 \
           -rss_limit_mb=2048 -timeout=10 -artifact_prefix="$OUT/cpu-" "$OUT/corpus_cpu" "$seeds" \
           >"$OUT/libfuzzer_cpu.log" 2>&1; then
        echo "testing fuzz_plan_cpu/libfuzzer ... passed"
        grep -E '^fuzz_plan_cpu:|^Done' "$OUT/libfuzzer_cpu.log" | sed 's/^/    /'
    else
        echo "testing fuzz_plan_cpu/libfuzzer ... failed"
        grep -A30 -E 'ERROR|fuzz_plan|SUMMARY|timeout' "$OUT/libfuzzer_cpu.log" | head -60 | sed 's/^/    /'
        status=1
    fi
else
    echo "testing fuzz_plan_cpu/libfuzzer ... skipped"
    echo "    (no clang with libFuzzer; see $OUT/build_cpu_lf.log)"
fi

# 2. standalone mutation driver under ASan + UBSan, always
CC_SA=${CC:-cc}
command -v clang >/dev/null 2>&1 && CC_SA=clang
# shellcheck disable=SC2086
if ! $CC_SA $FLAGS -DFUZZ_STANDALONE -fsanitize=address,undefined $SRC $LIBS \
        -o "$OUT/fuzz_plan_cpu_sa" >"$OUT/build_cpu_sa.log" 2>&1; then
    echo "testing fuzz_plan_cpu/standalone ... failed"
    head -20 "$OUT/build_cpu_sa.log" | sed 's/^/    /'
    exit 1
fi
if timeout $((SECS + 120)) "$OUT/fuzz_plan_cpu_sa" -t "$SECS" -s "$(date +%s)" \
        -o "$OUT/crash-cpu-standalone.json" "$seeds" >"$OUT/standalone_cpu.log" 2>&1; then
    echo "testing fuzz_plan_cpu/standalone ... passed"
    sed 's/^/    /' "$OUT/standalone_cpu.log"
else
    echo "testing fuzz_plan_cpu/standalone ... failed"
    head -60 "$OUT/standalone_cpu.log" | sed 's/^/    /'
    status=1
fi
exit $status

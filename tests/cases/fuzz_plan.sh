#!/bin/sh
# fuzz_plan.sh - fuzzes the plan loader (tests/fuzz/fuzz_plan.c) for about 20 s from the seed
# corpus tests/fuzz/corpus_plan: with libFuzzer (clang -fsanitize=fuzzer,address,undefined) when
# available, and always with the standalone ASan/UBSan mutation driver. Any crash, sanitizer
# report or leak fails the test; crashing inputs are kept in $BUILD/fuzz/ for replay:
#   $BUILD/fuzz/fuzz_plan_sa -t 0 $BUILD/fuzz/crash-*
# FUZZ_SECONDS (default 20) sets the total fuzzing time (builds come on top).
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
OUT=$BUILD/fuzz
mkdir -p "$OUT" || exit 2
SECS=${FUZZ_SECONDS:-20}
# the plan loader's sources are the Makefile's PLAN_SRC (a list written here drifted once:
# a new runtime/plan file made the harness unlinkable and the test "skipped")
PLAN_SRC=$(${MAKE:-make} --no-print-directory -s print-PLAN_SRC) || exit 2
[ -n "$PLAN_SRC" ] || { echo "fuzz_plan: the Makefile's PLAN_SRC is empty"; exit 1; }
SRC="tests/fuzz/fuzz_plan.c $PLAN_SRC"
FLAGS="-g -O1 -std=c11 -D_GNU_SOURCE -Iruntime/plan -Ikernels -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
sa_secs=$SECS

# 1. libFuzzer: skipped only when there is no clang with libFuzzer at all (a probe); a clang
# that has it but cannot build the harness is a failure, never a skip
# shellcheck disable=SC2086
if command -v clang >/dev/null 2>&1 &&
   echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
       clang -x c -fsanitize=fuzzer - -o "$OUT/probe_lf" >/dev/null 2>&1; then
  if ! clang $FLAGS -fsanitize=fuzzer,address,undefined $SRC -lcjson -lm -lpthread -o "$OUT/fuzz_plan_lf" \
       >"$OUT/build_lf.log" 2>&1; then
    echo "testing fuzz_plan/libfuzzer ... failed"
    echo "    (the harness does not build; $OUT/build_lf.log:)"
    head -20 "$OUT/build_lf.log" | sed 's/^/    /'
    status=1
  else
    lf_secs=$((SECS * 2 / 3))
    sa_secs=$((SECS - lf_secs))
    rm -rf "$OUT/corpus_new" && mkdir -p "$OUT/corpus_new"
    if "$OUT/fuzz_plan_lf" -max_total_time="$lf_secs" -max_len=65536 -rss_limit_mb=2048 \
           -timeout=10 -artifact_prefix="$OUT/" "$OUT/corpus_new" tests/fuzz/corpus_plan \
           >"$OUT/libfuzzer.log" 2>&1; then
        echo "testing fuzz_plan/libfuzzer ... passed"
    else
        echo "testing fuzz_plan/libfuzzer ... failed"
        grep -A30 -E 'ERROR|fuzz_plan:|SUMMARY' "$OUT/libfuzzer.log" | head -60 | sed 's/^/    /'
        status=1
    fi
  fi
else
    echo "testing fuzz_plan/libfuzzer ... skipped"
    echo "    (no clang with libFuzzer; see $OUT/build_lf.log)"
fi

# 2. standalone mutation driver under ASan + UBSan
CC_SA=cc
command -v clang >/dev/null 2>&1 && CC_SA=clang
# shellcheck disable=SC2086
if ! $CC_SA $FLAGS -DFUZZ_STANDALONE -fsanitize=address,undefined $SRC -lcjson -lm -lpthread \
        -o "$OUT/fuzz_plan_sa" >"$OUT/build_sa.log" 2>&1; then
    echo "testing fuzz_plan/standalone ... failed"
    echo "    (cannot build with -fsanitize=address,undefined; $OUT/build_sa.log:)"
    head -20 "$OUT/build_sa.log" | sed 's/^/    /'
    exit 1
fi
if "$OUT/fuzz_plan_sa" -t "$sa_secs" -s "$(date +%s)" -o "$OUT/crash-standalone.json" tests/fuzz/corpus_plan \
        >"$OUT/standalone.log" 2>&1; then
    echo "testing fuzz_plan/standalone ... passed"
    sed 's/^/    /' "$OUT/standalone.log"
else
    echo "testing fuzz_plan/standalone ... failed"
    head -60 "$OUT/standalone.log" | sed 's/^/    /'
    status=1
fi
exit $status

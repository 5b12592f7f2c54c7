#!/bin/sh
# fuzz_plan.sh - fuzzes the plan loader (tests/fuzz/fuzz_plan.c) for about 20 s from the seed
# corpus tests/fuzz/corpus_plan: with libFuzzer (clang -fsanitize=fuzzer,address,undefined) when
# available, and always with the standalone ASan/UBSan mutation driver (tests/fuzz/fuzz_lib.sh).
# Any crash, sanitizer report or leak fails the test; crashing inputs are kept in $BUILD/fuzz/
# for replay:  $BUILD/fuzz/fuzz_plan_sa -t 0 $BUILD/fuzz/crash-fuzz_plan-*
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
LIBS="-lcjson -lm -lpthread"
. tests/fuzz/fuzz_lib.sh
# two thirds of the time to libFuzzer when there is one, the rest (or all) to the driver
lf_secs=$((SECS * 2 / 3))
sa_secs=$SECS
fuzz_libfuzzer fuzz_plan "$lf_secs" 65536 tests/fuzz/corpus_plan && sa_secs=$((SECS - lf_secs))
fuzz_standalone fuzz_plan "$sa_secs" tests/fuzz/corpus_plan
exit $fuzz_status

#!/bin/sh
# fuzz_pm.sh - fuzzes peer memory's checks on what a peer sends (tests/fuzz/fuzz_pm.c driving
# runtime/peermem/pm_wire.c: every announcement or retirement a peer could forge, against the
# state the checks guard, accepted ones applied) from the seed corpus tests/fuzz/corpus_pm: with
# libFuzzer when clang has it, and always with the standalone mutation driver, both under ASan +
# UBSan (tests/fuzz/fuzz_lib.sh). Briefly in `make test` (FUZZ_SECONDS, default 5). Crashing
# inputs stay in $BUILD/fuzz/ for replay:  $BUILD/fuzz/fuzz_pm_sa -t 0 $BUILD/fuzz/crash-fuzz_pm*
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
OUT=$BUILD/fuzz
mkdir -p "$OUT" || exit 2
SECS=${FUZZ_PM_SECONDS:-${FUZZ_SECONDS:-5}}
SRC="tests/fuzz/fuzz_pm.c runtime/peermem/pm_wire.c"
FLAGS="-g -O1 -std=c11 -D_GNU_SOURCE -Iruntime/include -Iruntime -Iruntime/plan -Ikernels -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
LIBS=
. tests/fuzz/fuzz_lib.sh
fuzz_libfuzzer fuzz_pm "$SECS" 4096 tests/fuzz/corpus_pm
fuzz_standalone fuzz_pm "$SECS" -r 2000000 tests/fuzz/corpus_pm
exit $fuzz_status

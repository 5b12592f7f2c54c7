#!/bin/sh
# fuzz_net.sh - fuzzes the socket transport's receiver checks (tests/fuzz/fuzz_net.c driving
# runtime/net/net_wire.c: every header a peer could send, against a table of registered regions
# backed by heap buffers, accepted ones applied) from the seed corpus tests/fuzz/corpus_net:
# with libFuzzer when clang has it, and always with the standalone mutation driver, both under
# ASan + UBSan. Briefly in `make test` (FUZZ_SECONDS, default 5, and at most FUZZ_NET_RUNS
# mutants, default 2000000, for the standalone driver); `make test-sanitize` sets
# FUZZ_NET_SECONDS=60. A harness that does not build fails the test: a fuzzer that silently
# stops running checks nothing. Crashing inputs stay in $BUILD/fuzz/ for replay:
#   $BUILD/fuzz/fuzz_net_sa -t 0 $BUILD/fuzz/crash-net-*
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
OUT=$BUILD/fuzz
mkdir -p "$OUT" || exit 2
SECS=${FUZZ_NET_SECONDS:-${FUZZ_SECONDS:-5}}
RUNS=${FUZZ_NET_RUNS:-2000000}
SRC="tests/fuzz/fuzz_net.c runtime/net/net_wire.c"
FLAGS="-g -O1 -std=c11 -D_GNU_SOURCE -Iruntime/include -Iruntime -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0

# 1. libFuzzer, when clang has it (it is not a build dependency)
# shellcheck disable=SC2086
if command -v clang >/dev/null 2>&1 && echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
        clang -x c -fsanitize=fuzzer - -o "$OUT/probe_net" >/dev/null 2>&1; then
    if ! clang $FLAGS -fsanitize=fuzzer,address,undefined $SRC -o "$OUT/fuzz_net_lf" >"$OUT/build_net_lf.log" 2>&1; then
        echo "testing fuzz_net/libfuzzer ... failed"
        head -20 "$OUT/build_net_lf.log" | sed 's/^/    /'
        status=1
    else
        rm -rf "$OUT/corpus_net" && mkdir -p "$OUT/corpus_net"
        if timeout $((SECS + 120)) "$OUT/fuzz_net_lf" -max_total_time="$SECS" -max_len=2048 \
               -rss_limit_mb=2048 -timeout=10 -artifact_prefix="$OUT/crash-net-lf-" \
               "$OUT/corpus_net" tests/fuzz/corpus_net >"$OUT/libfuzzer_net.log" 2>&1; then
            echo "testing fuzz_net/libfuzzer ... passed"
            grep -E '^Done' "$OUT/libfuzzer_net.log" | sed 's/^/    /'
        else
            echo "testing fuzz_net/libfuzzer ... failed"
            grep -A30 -E 'ERROR|fuzz_net:|SUMMARY' "$OUT/libfuzzer_net.log" | head -60 | sed 's/^/    /'
            status=1
        fi
    fi
else
    echo "testing fuzz_net/libfuzzer ... skipped"
    echo "    (no clang with libFuzzer)"
fi

# 2. the standalone mutation driver under ASan + UBSan, always: not building it is a failure
CC_SA=${CC:-cc}
command -v clang >/dev/null 2>&1 && CC_SA=clang
# shellcheck disable=SC2086
if ! $CC_SA $FLAGS -DFUZZ_STANDALONE -fsanitize=address,undefined $SRC -o "$OUT/fuzz_net_sa" \
        >"$OUT/build_net_sa.log" 2>&1; then
    echo "testing fuzz_net/standalone ... failed"
    echo "    (the standalone harness does not build with $CC_SA -fsanitize=address,undefined:)"
    head -20 "$OUT/build_net_sa.log" | sed 's/^/    /'
    exit 1
fi
if timeout $((SECS + 120)) "$OUT/fuzz_net_sa" -t "$SECS" -r "$RUNS" -s "$(date +%s)" \
        -o "$OUT/crash-net-standalone.bin" tests/fuzz/corpus_net >"$OUT/standalone_net.log" 2>&1; then
    echo "testing fuzz_net/standalone ... passed"
    sed 's/^/    /' "$OUT/standalone_net.log"
else
    echo "testing fuzz_net/standalone ... failed"
    head -60 "$OUT/standalone_net.log" | sed 's/^/    /'
    status=1
fi
exit $status

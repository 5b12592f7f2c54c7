#!/bin/sh
# fuzz_coll.sh - fuzzes the mscclc front end (tests/fuzz/fuzz_coll.c) for a bounded time and fails
# on any crash, leak, sanitizer report or timeout. With clang + libFuzzer: -fsanitize=fuzzer,
# address,undefined for FUZZ_SECONDS (default 30) seconds; otherwise the standalone driver under
# ASan+UBSan replays the corpus and random mutations of it for the same time.
BUILD=${BUILD:-build}
SECS=${FUZZ_SECONDS:-30}
gen=$BUILD/gen
if [ ! -f "$gen/parse.c" ] || [ ! -f "$gen/lex.c" ]; then
    echo "fuzz_coll: $gen/parse.c not generated (run make first)"; exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fuzz_coll.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
srcs="tests/fuzz/fuzz_coll.c $(ls compiler/*.c | grep -v compiler/main.c) runtime/plan/*.c $gen/parse.c $gen/lex.c"
inc="-D_GNU_SOURCE -Iruntime/include -Iruntime -Iruntime/plan -Ikernels -Icompiler -I$gen"
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

if command -v clang >/dev/null 2>&1 && echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
        clang -x c -fsanitize=fuzzer - -o "$tmp/probe" >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    clang -std=gnu11 -g -O1 $inc $san -fsanitize=fuzzer $srcs -lcjson -lm -o "$tmp/fuzz" || {
        echo "fuzz_coll: cannot build the libFuzzer target"; exit 1; }
    mkdir -p "$tmp/corpus"
    ASAN_OPTIONS=detect_leaks=1 "$tmp/fuzz" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
        -max_len=4096 -artifact_prefix="$tmp/" -print_final_stats=1 "$tmp/corpus" tests/fuzz/corpus_coll \
        >"$tmp/log" 2>&1
    rc=$?
    tail -5 "$tmp/log"
    if [ $rc != 0 ]; then
        grep -A30 'ERROR\|runtime error\|deadly\|timeout' "$tmp/log" | head -60
        for a in "$tmp"/crash-* "$tmp"/leak-* "$tmp"/timeout-* "$tmp"/oom-*; do
            [ -f "$a" ] && { echo "input $(basename "$a"):"; od -c "$a" | head -20; }
        done
        echo "testing fuzz/coll-libfuzzer ... failed"; exit 1
    fi
    echo "testing fuzz/coll-libfuzzer ... passed"
    exit 0
fi

CC=${CC:-cc}
# shellcheck disable=SC2086
$CC -std=gnu11 -g -O1 -DFUZZ_STANDALONE $inc $san $srcs -lcjson -lm -o "$tmp/fuzz" || {
    echo "fuzz_coll: cannot build the standalone fuzzer"; exit 1; }
if ASAN_OPTIONS=detect_leaks=1 timeout $((SECS + 60)) "$tmp/fuzz" "$SECS" tests/fuzz/corpus_coll/*.coll; then
    echo "testing fuzz/coll-standalone ... passed"
else
    echo "testing fuzz/coll-standalone ... failed"; exit 1
fi

#!/bin/sh
# fuzz_coll.sh - fuzzes the mscclc front end (tests/fuzz/fuzz_coll.c) and fails on any crash,
# leak, sanitizer report, internal error or timeout. Two fuzzers, FUZZ_SECONDS (default 30) each,
# seeded from the golden programs (tests/golden/ok, tests/golden/err), the standard library and
# tests/fuzz/corpus_coll: libFuzzer (-fsanitize=fuzzer,address,undefined, with the language's
# dictionary tests/fuzz/coll.dict) when clang has it, and always the project's own token-aware
# mutator under ASan+UBSan (in 20 minutes libFuzzer alone missed what it found in seconds).
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
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
status=0

# the seeds: one directory of .coll files (libFuzzer reads directories)
mkdir -p "$tmp/seeds" "$tmp/corpus"
for f in tests/golden/ok/*.coll tests/golden/err/*.coll stdlib/*/*.coll tests/fuzz/corpus_coll/*.coll; do
    cp "$f" "$tmp/seeds/$(echo "$f" | tr / _)"
done
echo "fuzz_coll: $(ls "$tmp/seeds" | wc -l) seed programs, $SECS s per fuzzer"

# 1. libFuzzer, when clang has it
# shellcheck disable=SC2086
if command -v clang >/dev/null 2>&1 && echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
        clang -x c -fsanitize=fuzzer - -o "$tmp/probe" >/dev/null 2>&1; then
    if ! clang -std=gnu11 -g -O1 $inc $san -fsanitize=fuzzer $srcs -lcjson -lm -o "$tmp/fuzz_lf"; then
        echo "fuzz_coll: cannot build the libFuzzer target"
        echo "testing fuzz/coll-libfuzzer ... failed"; status=1
    else
        timeout $((SECS + 120)) "$tmp/fuzz_lf" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
            -max_len=8192 -dict=tests/fuzz/coll.dict -artifact_prefix="$tmp/" -print_final_stats=1 \
            "$tmp/corpus" "$tmp/seeds" >"$tmp/log" 2>&1
        rc=$?
        tail -5 "$tmp/log"
        if [ $rc != 0 ]; then
            grep -A30 'ERROR\|runtime error\|deadly\|timeout\|internal error' "$tmp/log" | head -60
            for a in "$tmp"/crash-* "$tmp"/leak-* "$tmp"/timeout-* "$tmp"/oom-*; do
                [ -f "$a" ] && { echo "input $(basename "$a"):"; od -c "$a" | head -20; }
            done
            echo "testing fuzz/coll-libfuzzer ... failed"; status=1
        else
            echo "testing fuzz/coll-libfuzzer ... passed"
        fi
    fi
else
    echo "testing fuzz/coll-libfuzzer ... skipped (needs clang with libFuzzer, -fsanitize=fuzzer)"
fi

# 2. the project's own mutator, always
CC=${CC:-cc}
# shellcheck disable=SC2086
if ! $CC -std=gnu11 -g -O1 -DFUZZ_STANDALONE $inc $san $srcs -lcjson -lm -o "$tmp/fuzz_sa"; then
    echo "fuzz_coll: cannot build the standalone fuzzer"
    echo "testing fuzz/coll-standalone ... failed"; exit 1
fi
if timeout $((SECS + 120)) "$tmp/fuzz_sa" "$SECS" "$tmp"/seeds/*.coll; then
    echo "testing fuzz/coll-standalone ... passed"
else
    echo "testing fuzz/coll-standalone ... failed"; status=1
fi
exit $status

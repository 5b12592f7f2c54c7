# fuzz_lib.sh - sourced by tests/cases/fuzz_net.sh, fuzz_plan.sh and fuzz_plan_cpu.sh: builds a
# fuzz target (with tests/fuzz/fuzz_driver.c) under ASan + UBSan twice, for libFuzzer when clang
# has it and as the standalone driver always, runs each, and prints one
# "testing NAME/libfuzzer|standalone ... passed|failed|skipped" line each. A harness that does
# not build fails its test, never skips it: a fuzzer that silently stops running checks nothing.
# The caller sets OUT (binaries, logs and crashing inputs: $OUT/crash-NAME-*), and SRC, FLAGS
# and LIBS (lists, split on spaces); fuzz_status is 1 once anything failed.
fuzz_status=0
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# fuzz_build NAME KIND LOG CC EXTRA-FLAGS...: $OUT/NAME_KIND, or the build log's head and 1
fuzz_build() {
    fb_bin=$OUT/$1_$2 fb_log=$OUT/$1_build_$2.log fb_cc=$3
    shift 3
    # shellcheck disable=SC2086
    if "$fb_cc" $FLAGS "$@" $SRC tests/fuzz/fuzz_driver.c $LIBS -o "$fb_bin" >"$fb_log" 2>&1; then
        return 0
    fi
    echo "    (the harness does not build with $fb_cc $*; $fb_log:)"
    head -20 "$fb_log" | sed 's/^/    /'
    return 1
}

# fuzz_report NAME KIND LOG STATUS: the test's line; on failure the log's interesting part
fuzz_report() {
    if [ "$4" = 0 ]; then
        echo "testing $1/$2 ... passed"
        grep -E "^$1:|^Done" "$3" | sed 's/^/    /'
    else
        echo "testing $1/$2 ... failed"
        grep -A30 -E "ERROR|SUMMARY|timeout|^$1:" "$3" | head -60 | sed 's/^/    /'
        fuzz_status=1
    fi
}

# fuzz_libfuzzer NAME SECONDS MAX_LEN SEED-DIR...: libFuzzer from the seeds (new inputs go to a
# fresh $OUT/NAME_corpus). Returns 1 when skipped (no clang with libFuzzer; it is not a build
# dependency), so that the caller may give its time to the standalone driver.
fuzz_libfuzzer() {
    fl_name=$1 fl_secs=$2 fl_len=$3
    shift 3
    if ! command -v clang >/dev/null 2>&1 ||
       ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
           clang -x c -fsanitize=fuzzer - -o "$OUT/probe_lf" >/dev/null 2>&1; then
        echo "testing $fl_name/libfuzzer ... skipped (needs clang with libFuzzer, -fsanitize=fuzzer)"
        return 1
    fi
    if ! fuzz_build "$fl_name" lf clang -fsanitize=fuzzer,address,undefined; then
        echo "testing $fl_name/libfuzzer ... failed"
        fuzz_status=1
        return 0
    fi
    rm -rf "$OUT/${fl_name}_corpus" && mkdir -p "$OUT/${fl_name}_corpus" || exit 2
    timeout $((fl_secs + 120)) "$OUT/${fl_name}_lf" -max_total_time="$fl_secs" -max_len="$fl_len" \
        -rss_limit_mb=2048 -timeout=10 -artifact_prefix="$OUT/crash-$fl_name-lf-" \
        "$OUT/${fl_name}_corpus" "$@" >"$OUT/${fl_name}_libfuzzer.log" 2>&1
    fuzz_report "$fl_name" libfuzzer "$OUT/${fl_name}_libfuzzer.log" $?
    return 0
}

# fuzz_standalone NAME SECONDS [DRIVER-OPTION...] SEED...: the standalone driver with a seed of
# this second (printed first, for -s); a crashing input goes to $OUT/crash-NAME-standalone,
# to replay with  $OUT/NAME_sa -t 0 $OUT/crash-NAME-standalone
fuzz_standalone() {
    fs_name=$1 fs_secs=$2
    shift 2
    fs_cc=${CC:-cc}
    command -v clang >/dev/null 2>&1 && fs_cc=clang
    if ! fuzz_build "$fs_name" sa "$fs_cc" -DFUZZ_STANDALONE -fsanitize=address,undefined; then
        echo "testing $fs_name/standalone ... failed"
        fuzz_status=1
        return
    fi
    timeout $((fs_secs + 120)) "$OUT/${fs_name}_sa" -t "$fs_secs" -s "$(date +%s)" \
        -o "$OUT/crash-$fs_name-standalone" "$@" >"$OUT/${fs_name}_standalone.log" 2>&1
    fuzz_report "$fs_name" standalone "$OUT/${fs_name}_standalone.log" $?
}

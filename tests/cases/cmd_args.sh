#!/bin/sh
# cmd_args.sh - the number options of mscclrt-run and mscclrt-perf (one strict parser, numarg.c):
# signs, spaces, other bases, exponents, NaN and 64-bit overflow are refused with exit status 2
# and a message naming the option and the value; leading zeros are decimal. mscclrt-perf parses
# its options before it looks for a GPU, so this runs anywhere; under `make test-sanitize` it
# runs in the UBSan builds, where a float-to-integer overflow would abort ("runtime error").
BUILD=${BUILD:-build}
RUN=$BUILD/bin/mscclrt-run
PERF=$BUILD/bin/mscclrt-perf
plan=tests/golden/ok/port_ops.json
for b in "$RUN" "$PERF"; do [ -x "$b" ] || { echo "cmd_args: $b not built"; exit 1; }; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# t NAME WANT_STATUS WANT_TEXT command args...: exit status and a substring of stdout+stderr,
# and no sanitizer report
t() {
    name=$1 want=$2 text=$3
    shift 3
    "$@" >"$tmp/out" 2>&1
    st=$?
    if [ "$st" = "$want" ] && grep -qF -- "$text" "$tmp/out" && ! grep -q "runtime error" "$tmp/out"
    then
        echo "testing cmd_args/$name ... passed"
    else
        echo "cmd_args/$name: want status $want and '$text', got status $st:"
        cat "$tmp/out"
        echo "testing cmd_args/$name ... failed"
        fail=1
    fi
}

# mscclrt-run
t run_size_space 2 "--size ' -5': a sign or a space is not allowed" "$RUN" "$plan" --size " -5"
t run_size_minus 2 "--size '-5': a sign or a space is not allowed" "$RUN" "$plan" --size -5
t run_size_plus 2 "--size '+5': a sign or a space is not allowed" "$RUN" "$plan" --size +5
t run_size_hex 2 "--size '0x100': not a decimal number" "$RUN" "$plan" --size 0x100
t run_size_overflow 2 "--size '99999999999999999999': too large" "$RUN" "$plan" \
    --size 99999999999999999999
t run_size_suffix_overflow 2 "--size '17179869184G': too large" "$RUN" "$plan" --size 17179869184G
t run_size_suffix 2 "--size '64X': unknown suffix 'X' (K, M or G)" "$RUN" "$plan" --size 64X
t run_size_zero 0 "0 bytes, float32, in-place, Simple, backend cpu: an empty call, nothing to run, check passed" "$RUN" "$plan" --size 0 --check
t run_size_decimal 0 "65536 bytes" "$RUN" "$plan" --size 065536 --check   # not octal
t run_size_k 0 "65536 bytes" "$RUN" "$plan" --size 64k --check
t run_ranks 2 "--ranks '1e3': not a decimal number; expected a rank count in [1, 4096]" \
    "$RUN" "$plan" --ranks 1e3
t run_seed 2 "--seed '-1': a sign or a space is not allowed" "$RUN" "$plan" --seed -1
t run_iters 2 "--iters '0x10': not a decimal number" "$RUN" "$plan" --iters 0x10
t run_timeout 2 "--timeout '86401': expected seconds in [1, 86400]" "$RUN" "$plan" --timeout 86401

# mscclrt-perf: values that were undefined behaviour (float to size_t) or overflowed g*t
t perf_b_exp 2 "-b '1e30': not a decimal number" "$PERF" -b 1e30
t perf_b_minus 2 "-b '-1': a sign or a space is not allowed" "$PERF" -b -1
t perf_b_nan 2 "-b 'nan': not a decimal number" "$PERF" -b nan
t perf_e_inf 2 "-e 'inf': not a decimal number" "$PERF" -e inf
t perf_e_overflow 2 "-e '99999999999G': too large" "$PERF" -e 99999999999G
t perf_i_minus 2 "-i '-1K': a sign or a space is not allowed" "$PERF" -i -1K
t perf_gt_overflow 2 "-g '65536': expected a GPU count per thread in [1, 64]" \
    "$PERF" -g 65536 -t 65536
t perf_t_range 2 "-t '65': expected a thread count in [1, 64]" "$PERF" -t 65
t perf_gt_product 2 "-g 64 -t 2: 128 ranks, more than 64" "$PERF" -g 64 -t 2
t perf_f_nan 2 "-f 'nan': not a decimal number" "$PERF" -f nan
t perf_f_exp 2 "-f '1e30': not a decimal number" "$PERF" -f 1e30
t perf_f_range 2 "-f '0.5': expected a factor in [1, 1024]" "$PERF" -f 0.5
t perf_n_zero 2 "-n '0': expected a call count in [1, 1000000]" "$PERF" -n 0
t perf_w_atoi 2 "-w '5x': not a decimal number" "$PERF" -w 5x
t perf_c_range 2 "-c '2': expected a check flag in [0, 1]" "$PERF" -c 2
t perf_e_below_b 2 "-e 1024 is smaller than -b 2048" "$PERF" -b 2K -e 1K
# good values get past option parsing to the next check (no --plan given)
t perf_ok 2 "give at least one --plan" "$PERF" -b 010 -e 1M -f 1.5 -g 2 -t 2 -w 0 -n 5 -G 0 -c 0

# ---- the first hour: unknown options, --version, --help with descriptions, the command's name
t run_unknown 2 "mscclrt-run: unknown option --foo" "$RUN" "$plan" --foo
t run_unknown_last 2 "unknown option --foo" "$RUN" "$plan" --check --foo
t run_needs_value 2 "option --size needs a value" "$RUN" "$plan" --size
t run_version 0 "mscclrt-run 0.1.0" "$RUN" --version
t run_help 0 "--check                    check every rank's output" "$RUN" --help
t run_no_static_alone 2 "mscclrt-run: --no-static-check: only with --check" "$RUN" "$plan" \
    --no-static-check
t perf_version 0 "mscclrt-perf 0.1.0" "$PERF" --version
t perf_help 0 "--plan FILE                    an algorithm" "$PERF" --help
t perf_name 2 "mscclrt-perf: invalid option -- 'x'" "$PERF" -x
"$PERF" -x 2>&1 | grep -q "bin/mscclrt-perf"
if [ $? = 0 ]; then echo "testing cmd_args/perf_basename ... failed"; fail=1
else echo "testing cmd_args/perf_basename ... passed"; fi
exit $fail

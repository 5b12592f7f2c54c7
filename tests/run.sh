#!/bin/sh
# run.sh - the test driver of `make test`: runs every unit-test binary in $BUILD/tests and every
# case script in tests/cases/*.sh, one line per test, then the summary "N passed, N failed".
# A script may report several tests by printing lines "testing NAME ... passed|failed|skipped";
# otherwise its exit status counts (0 passed, 77 skipped, anything else failed).
# ONLY="word ..." limits the run to the unit tests and scripts whose names contain one of the words.
BUILD=${BUILD:-build}
export BUILD
cd "$(dirname "$0")/.." || exit 2
pass=0; fail=0; skip=0
log=$BUILD/test-logs
mkdir -p "$log"

selected() { # name: is it in the ONLY list (or is there no list)?
    [ -z "$ONLY" ] && return 0
    for w in $ONLY; do case "$1" in *"$w"*) return 0 ;; esac; done
    return 1
}

count() { # $1 = name, $2 = exit status, $3 = output file
    n_p=$(grep -c '^testing .* \.\.\. passed$' "$3")
    n_f=$(grep -c '^testing .* \.\.\. failed$' "$3")
    n_s=$(grep -c '^testing .* \.\.\. skipped$' "$3")
    if [ $((n_p + n_f + n_s)) -gt 0 ]; then
        grep '^testing .* \.\.\. \(passed\|failed\|skipped\)$' "$3"
        if [ "$2" != 0 ] && [ "$2" != 77 ] && [ "$n_f" = 0 ]; then n_f=1; echo "testing $1 ... failed (exit $2)"; fi
    else
        case $2 in
            0) n_p=1; echo "testing $1 ... passed" ;;
            77) n_s=1; echo "testing $1 ... skipped" ;;
            *) n_f=1; echo "testing $1 ... failed" ;;
        esac
    fi
    if [ "$n_f" != 0 ]; then sed 's/^/    | /' "$3" | grep -v '^    | testing .* passed$' | tail -40; fi
    pass=$((pass + n_p)); fail=$((fail + n_f)); skip=$((skip + n_s))
}

for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    selected "$(basename "$t")" || continue
    name=unit/$(basename "$t")
    "$t" >"$log/$(basename "$t").log" 2>&1
    count "$name" $? "$log/$(basename "$t").log"
done
for s in tests/cases/*.sh; do
    [ -f "$s" ] || continue
    name=$(basename "$s" .sh)
    selected "$name" || continue
    sh "$s" >"$log/$name.log" 2>&1
    count "$name" $? "$log/$name.log"
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]

#!/bin/sh
# run.sh - the test driver of `make test`: runs every unit-test binary in $BUILD/tests and every
# case script in tests/cases/*.sh, one line per test, then the summary "N passed, N failed,
# N skipped" (CI reads that last line), preceded by the skips grouped by reason.
# A script may report several tests by printing lines "testing NAME ... passed|failed|skipped";
# otherwise its exit status counts (0 passed, 77 skipped, anything else failed).
# A skip says why, so that a user learns what a test needs and how to provide it: the line is
# "testing NAME ... skipped (REASON)", or, for a script or binary that exits 77 as a whole, its
# output has a line "skipped (REASON)" (the last one counts). REASON reads best as "needs ...".
# ONLY="word ..." limits the run to the unit tests and scripts whose names contain one of the words.
BUILD=${BUILD:-build}
export BUILD
cd "$(dirname "$0")/.." || exit 2
pass=0; fail=0; skip=0
log=$BUILD/test-logs
mkdir -p "$log"
skips=$log/.skips      # one "REASON<TAB>NAME" line per skip, for the summary
: >"$skips"

selected() { # name: is it in the ONLY list (or is there no list)?
    [ -z "$ONLY" ] && return 0
    for w in $ONLY; do case "$1" in *"$w"*) return 0 ;; esac; done
    return 1
}

# a result line: "passed" and "failed" end it; "skipped" may carry "(REASON)"
RESULT_RE='^testing .* \.\.\. \(passed\|failed\|skipped\( (.*)\)\?\)$'

count() { # $1 = name, $2 = exit status, $3 = output file
    n_p=$(grep -c '^testing .* \.\.\. passed$' "$3")
    n_f=$(grep -c '^testing .* \.\.\. failed$' "$3")
    n_s=$(grep -c '^testing .* \.\.\. skipped\( (.*)\)\?$' "$3")
    if [ $((n_p + n_f + n_s)) -gt 0 ]; then
        grep "$RESULT_RE" "$3"
        sed -n 's/^testing \(.*\) \.\.\. skipped\( (\(.*\))\)\?$/\3\t\1/p' "$3" >>"$skips"
        if [ "$2" != 0 ] && [ "$2" != 77 ] && [ "$n_f" = 0 ]; then n_f=1; echo "testing $1 ... failed (exit $2)"; fi
    else
        case $2 in
            0) n_p=1; echo "testing $1 ... passed" ;;
            77) n_s=1
                why=$(sed -n 's/^skipped (\(.*\))$/\1/p' "$3" | tail -n 1)
                printf '%s\t%s\n' "$why" "$1" >>"$skips"
                echo "testing $1 ... skipped${why:+ ($why)}" ;;
            *) n_f=1; echo "testing $1 ... failed" ;;
        esac
    fi
    if [ "$n_f" != 0 ]; then sed 's/^/    | /' "$3" | grep -v '^    | testing .* passed$' | tail -40; fi
    pass=$((pass + n_p)); fail=$((fail + n_f)); skip=$((skip + n_s))
}

# the skips grouped by reason, the most frequent first, each with the first few tests it covers:
#      3 need a GPU
#          unit/test_gpu_coll, unit/test_gpu_exec, unit/test_gpu_mp
# ("needs" becomes "need" for several); skips without a reason are listed as such
skip_summary() {
    [ -s "$skips" ] || return 0
    echo "skipped, by reason:"
    sort -t "$(printf '\t')" -k1,1 -k2 "$skips" | awk -F '\t' '
        { r = ($1 == "") ? "(no reason given)" : $1
          if (!(r in n)) order[++k] = r
          n[r]++
          if (n[r] <= 4) names[r] = names[r] (n[r] > 1 ? ", " : "") $2 }
        END { for (i = 1; i <= k; i++)          # most frequent first (a stable selection sort)
                  for (j = i + 1; j <= k; j++)
                      if (n[order[j]] > n[order[i]]) { t = order[i]; order[i] = order[j]; order[j] = t }
              for (i = 1; i <= k; i++) { r = order[i]; c = n[r]; shown = r
                  if (c > 1) sub(/^needs /, "need ", shown)
                  printf "%6d %s\n         %s%s\n", c, shown, names[r],
                         (c > 4 ? sprintf(" and %d more", c - 4) : "") } }'
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
skip_summary
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]

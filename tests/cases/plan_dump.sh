#!/bin/sh
# plan_dump.sh - the text and dot dumps of a compat plan and of the loader's base plan must match
# tests/golden/dump/<plan>.txt and <plan>.dot (the views `mscclc --dump` prints, made by
# plan_dump.c and driven here through $BUILD/tests/test_plan_dump). UPDATE=1 rewrites them.
BUILD=${BUILD:-build}
DUMP=$BUILD/tests/test_plan_dump
GOLD=tests/golden/dump
cd "$(dirname "$0")/../.." || exit 2
if [ ! -x "$DUMP" ]; then
    echo "plan_dump: $DUMP not built" >&2
    exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/plan_dump.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
status=0
for plan in tests/plans/compat/reduce_pack.json tests/plans/compat/reduce_nvls.json \
            tests/plans/loader_base.json; do
    name=$(basename "$plan" .json)
    for kind in txt dot; do
        test="plan_dump/$name.$kind"
        gold=$GOLD/$name.$kind
        out=$tmp/$name.$kind
        if [ "$kind" = dot ]; then flag=--dot; else flag=; fi
        # shellcheck disable=SC2086
        if ! "$DUMP" --dump $flag "$plan" >"$out" 2>"$tmp/err"; then
            echo "testing $test ... failed"
            sed 's/^/    /' "$tmp/err"
            status=1
        elif [ "$UPDATE" = 1 ]; then
            mkdir -p "$GOLD"
            cp "$out" "$gold.tmp" && mv "$gold.tmp" "$gold"
            echo "testing $test ... passed"
        elif [ ! -f "$gold" ]; then
            echo "testing $test ... failed"
            echo "    no golden file $gold (run make test UPDATE=1)"
            status=1
        elif cmp -s "$out" "$gold"; then
            echo "testing $test ... passed"
        else
            echo "testing $test ... failed"
            diff -u "$gold" "$out" | head -40 | sed 's/^/    /'
            status=1
        fi
    done
done
exit $status

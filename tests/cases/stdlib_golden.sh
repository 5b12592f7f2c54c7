#!/bin/sh
# stdlib_golden.sh - every stdlib program compiled for N = 2, 4, 8 must match its golden plan
# tests/golden/stdlib/<collective>/<name>.N<k>.json (hierarchical programs with G = N/2).
# The compiler's "producer" line is ignored. UPDATE=1 rewrites the golden files. Then: the
# programs the library embeds ($BUILD/gen/stdlib_sources.c) are the tree's.
BUILD=${BUILD:-build}
MSCCLC=$BUILD/bin/mscclc
GOLD=tests/golden/stdlib
cd "$(dirname "$0")/../.." || exit 2
if [ ! -x "$MSCCLC" ]; then
    echo "stdlib_golden: $MSCCLC not built" >&2
    exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stdlib_golden.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
status=0
for prog in stdlib/*/*.coll; do
    coll=$(basename "$(dirname "$prog")")
    name=$(basename "$prog" .coll)
    for n in 2 4 8; do
        defs="-D N=$n"
        if grep -q '^param G ' "$prog"; then defs="$defs -D G=$((n / 2))"; fi
        test="stdlib/$coll/$name N=$n"
        gold=$GOLD/$coll/$name.N$n.json
        out=$tmp/$coll.$name.N$n.json
        # shellcheck disable=SC2086
        if ! "$MSCCLC" "$prog" $defs -o "$out" >"$tmp/log" 2>&1; then
            echo "testing $test ... failed"
            sed 's/^/    /' "$tmp/log"
            status=1
            continue
        fi
        if [ "$UPDATE" = 1 ]; then
            mkdir -p "$(dirname "$gold")"
            cp "$out" "$gold.tmp" && mv "$gold.tmp" "$gold"
            echo "testing $test ... passed"
        elif [ ! -f "$gold" ]; then
            echo "testing $test ... failed"
            echo "    no golden file $gold (run make test UPDATE=1)"
            status=1
        elif grep -v '^ *"producer":' "$out" >"$tmp/a" &&
             grep -v '^ *"producer":' "$gold" >"$tmp/b" &&
             cmp -s "$tmp/a" "$tmp/b"; then
            echo "testing $test ... passed"
        else
            echo "testing $test ... failed"
            diff "$tmp/b" "$tmp/a" | head -20 | sed 's/^/    /'
            status=1
        fi
    done
done
# the library embeds the same programs as the tree holds (build/gen/stdlib_sources.c follows the
# file list: a program removed by a branch switch once stayed embedded and was selected)
gen=$BUILD/gen/stdlib_sources.c
if [ -f "$gen" ]; then
    grep -o '"[a-z0-9_]*/[a-z0-9_]*\.coll"' "$gen" | tr -d '"' | sort -u >"$tmp/embedded"
    (cd stdlib && ls ./*/*.coll) | sed 's|^\./||' | sort >"$tmp/tree"
    if cmp -s "$tmp/embedded" "$tmp/tree"; then
        echo "testing stdlib/embedded is the tree's ... passed"
    else
        echo "testing stdlib/embedded is the tree's ... failed"
        diff "$tmp/tree" "$tmp/embedded" | sed 's/^/    /'
        status=1
    fi
fi
exit $status

#!/bin/sh
# readme_tour.sh - README.md's five-minute tour, run as written, so the README cannot drift: every
# `build/bin/...` command of the tour (steps 2-4; step 5's mscclrt-perf needs GPUs and is left to
# make test-gpu) and step 6's `cc run_plan.c $(pkg-config ...) ...` (against a `make install`
# into a temporary prefix) run in a scratch copy of the tree's layout and must exit 0; step 2's
# example error must be what mscclc prints.
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
top=$PWD
tmp=$(mktemp -d "${TMPDIR:-/tmp}/readme_tour.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
st=0
r() { if [ "$2" = 0 ]; then echo "testing readme_tour/$1 ... passed"; else echo "testing readme_tour/$1 ... failed"; st=1; fi; }

# the tour: from its heading to the next one
awk '/^## A five-minute tour/ {on = 1; next} /^## / {on = 0} on' README.md >"$tmp/tour.md"
[ -s "$tmp/tour.md" ] || { echo "readme_tour: no '## A five-minute tour' in README.md"; exit 1; }
# the commands: every `...` span that starts with build/bin/ or cc, in order
grep -o '`[^`]*`' "$tmp/tour.md" | sed 's/^`//; s/`$//' |
    grep -E '^(build/bin/|cc )' >"$tmp/cmds"
grep -q '^build/bin/mscclc ' "$tmp/cmds" && grep -q '^build/bin/mscclrt-run ' "$tmp/cmds" &&
    grep -q '^cc ' "$tmp/cmds"
r found-commands $?

# a scratch tree: the build, the tests, a copy of examples/ (step 6 builds in it)
mkdir -p "$tmp/work"
ln -s "$top/$BUILD" "$tmp/work/build"
ln -s "$top/tests" "$tmp/work/tests"
cp -r examples "$tmp/work/examples"
make --no-print-directory BUILD="$BUILD" install PREFIX="$tmp/prefix" >"$tmp/install.log" 2>&1
r make-install $?

n=0
while IFS= read -r cmd; do
    n=$((n + 1))
    case $cmd in
        build/bin/mscclrt-perf*) echo "testing readme_tour/cmd$n ... skipped (needs GPUs: mscclrt-perf)"; continue ;;
        cc\ *) dir=$tmp/work/examples ;;
        *) dir=$tmp/work ;;
    esac
    (cd "$dir" && env -u LD_LIBRARY_PATH PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" \
        PATH="$tmp/prefix/bin:$PATH" sh -c "$cmd") >"$tmp/out" 2>&1
    rc=$?
    [ $rc = 0 ] || { echo "$ $cmd"; tail -20 "$tmp/out"; }
    r "cmd$n" $rc
done <"$tmp/cmds"

# step 2's example error, as printed
awk '/Errors come with a position/ {on = 1; next} on && /```/ {if (inblk) exit; inblk = 1; next}
     on && inblk' "$tmp/tour.md" | sed 's/^   //' >"$tmp/want.err"
(cd "$tmp/work" && build/bin/mscclc tests/golden/err/chunk_range.coll -o /dev/null) 2>"$tmp/got.err"
[ -s "$tmp/want.err" ] && cmp -s "$tmp/want.err" "$tmp/got.err"
rc=$?; [ $rc = 0 ] || diff "$tmp/want.err" "$tmp/got.err"
r example-error $rc
exit $st

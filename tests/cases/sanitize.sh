#!/bin/sh
# sanitize.sh - part of `make test`: runs `make test-sanitize` (plan loader, compiler, CPU
# backend and the commands' option parsing under ASan+UBSan; CPU backend under TSan; option
# parsing under clang's UBSan where clang is installed: in $BUILD-asan, $BUILD-tsan and
# $BUILD-ubsan) and reports its tests as its own. Skipped when already inside a sanitizer run or with SKIP_SANITIZE=1.
BUILD=${BUILD:-build}
[ -n "$MSCCL_IN_SANITIZE" ] && { echo "skipped (already inside make test-sanitize)"; exit 77; }
[ -n "$SKIP_SANITIZE" ] && { echo "skipped (SKIP_SANITIZE is set)"; exit 77; }
cd "$(dirname "$0")/../.." || exit 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
MSCCL_IN_SANITIZE=1 make --no-print-directory BUILD="$BUILD" test-sanitize >"$out" 2>&1
rc=$?
sed -e 's/^testing \([^ ]*\)/testing sanitize\/\1/' "$out" | grep -v '^  [A-Z]* *[^ ]*-\(asan\|tsan\|ubsan\)/'
exit $rc

#!/bin/sh
# nt_sets.sh - the parts of tests/gpu/nt_sets.sh that need no GPU: its table join
# (tests/gpu/nt_join.awk) on written rows, and the set checks of a dry run (NT_DRY=1): an unknown
# set, a directory without libnccl.so.2, a name given twice and a bad repeat count are refused
# before anything runs; good sets print their runs interleaved (every set once per repeat).
cd "$(dirname "$0")/../.." || exit 2
t=$(mktemp -d) || exit 2
trap 'rm -rf "$t"' EXIT
# check NAME CONDITION...: one test line
check() {
    n=$1; shift
    if "$@"; then echo "testing nt_sets/$n ... passed"; else echo "testing nt_sets/$n ... failed"; fi
}
has() { case $1 in *"$2"*) return 0 ;; *) echo "  no '$2' in: $1"; return 1 ;; esac; }

printf '1024 5.10 0.2 0\n4096 5.20 0.8 0\n' >"$t/a.rows"
printf '1024 4.90 0.2 0\n4096 5.00 0.8 2\n8192 6.00 1.3 0\n' >"$t/b.rows"
out=$(awk -f tests/gpu/nt_join.awk "$t/a.rows" "$t/b.rows"); rc=$?
want=$(printf '%12s %10s %10s %6d\n%12s %10s %10s %6d\n%12s %10s %10s %6d' \
    1024 5.10 4.90 0 4096 5.20 5.00 2 8192 - 6.00 0)
check join_columns test "$out" = "$want"
check join_wrong_exits_1 test "$rc" = 1
awk -f tests/gpu/nt_join.awk "$t/a.rows" "$t/a.rows" >/dev/null
check join_clean_exits_0 test $? = 0

mkdir -p "$t/base/nccl" "$t/empty" "$t/b/lib/nccl"
: >"$t/base/nccl/libnccl.so.2"
: >"$t/b/lib/nccl/libnccl.so.2"
# dry VAR=VALUE...: a dry run of one binary with these variables
dry() {
    env NT_DRY=1 BUILD="$t/b" GPU_LOG_DIR="$t/logs" NT_BINS=all_gather_perf NT_ARGS="-b 1K" "$@" \
        sh tests/gpu/nt_sets.sh 2>&1
}
out=$(dry NT_SETS="ours base=$t/base" NT_REPEAT=2); rc=$?
check dry_good_sets test "$rc" = 0
order=$(echo "$out" | sed -n 's/^run all_gather \([a-z]*\) \([0-9]\):.*/\1.\2/p' | tr '\n' ' ')
check dry_interleaved test "$order" = "ours.1 base.1 ours.2 base.2 "
out=$(dry NT_SETS="ours base=$t/empty"); rc=$?
check dry_no_library_refused test "$rc" = 2
check dry_no_library_says_where has "$out" "no libnccl.so.2 in '$t/empty/nccl'"
out=$(dry NT_SETS="ours ours"); rc=$?
check dry_twice_refused test "$rc" = 2
check dry_twice_says_which has "$out" "set name 'ours' twice"
out=$(dry NT_SETS="ours mine"); rc=$?
check dry_unknown_refused test "$rc" = 2
check dry_unknown_says_which has "$out" "'mine' is not nccl, ours or NAME=DIR"
out=$(dry NT_SETS=ours NT_REPEAT=x); rc=$?
check dry_bad_repeat_refused test "$rc" = 2

#!/bin/sh
# cpu_schedules.sh - timing-dependent plans fail visibly, at compile time and at run time:
#   - mscclc --check on MSCCL++'s compat plans: clean, except reduce_tbg.json, whose thread-block
#     groups read a peer's scratch slice that the peer's other block writes (a real race, which
#     the serial scheduler confirms below); and on tests/plans/racy/chain_broadcast.json (the
#     chain broadcast with one signal/wait pair removed): the race, located by op index;
#   - mscclrt-run --check runs those static checks first: the racy plan fails with the same
#     diagnostic and is not run;
#   - mscclrt-run --schedules (with --no-static-check, so the plan runs): that racy plan fails
#     under 16 serial schedules, names the seed, and the printed replay command fails again with
#     the same seed, every time;
#   - MSCCLRT_CPU_SCHEDULES=8 (each call run under 8 schedules, results compared) fails the racy
#     plan without any postcondition;
#   - every stdlib program (N = 4, hierarchical ones G = 2) and the other compat plans pass
#     --check under 20 serial schedules, and under MSCCLRT_CPU_SCHEDULES=8.
BUILD=${BUILD:-build}
RUN=$BUILD/bin/mscclrt-run
MSCCLC=$BUILD/bin/mscclc
racy=tests/plans/racy/chain_broadcast.json
cd "$(dirname "$0")/../.." || exit 2
[ -x "$RUN" ] && [ -x "$MSCCLC" ] || { echo "cpu_schedules: $RUN or $MSCCLC not built"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpu_schedules.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
result() { # name, ok?(0/1)
    if [ "$2" = 0 ]; then echo "testing cpu_schedules/$1 ... passed"
    else echo "testing cpu_schedules/$1 ... failed"; fail=1; fi
}

# ---- compile-time checks of JSON plans -------------------------------------------------------
for f in tests/plans/compat/*.json; do
    name=$(basename "$f" .json)
    "$MSCCLC" --check "$f" >"$tmp/out" 2>&1
    st=$?
    if [ "$name" = reduce_tbg ]; then
        [ "$st" = 1 ] && grep -q "error: data race: rank 0 tb 0 op 7 (get) reads rank 1's scratch chunk 1" "$tmp/out"
    else
        [ "$st" = 0 ] && [ ! -s "$tmp/out" ]
    fi || cat "$tmp/out"
    result "mscclc-check/$name" $?
done
"$MSCCLC" --check "$racy" >"$tmp/out" 2>&1
[ $? = 1 ] && grep -q "^$racy: error: data race: rank 1 tb 0 op 12 (put) reads rank 1's output chunk 1, which rank 0 tb 0 op 8 (put) writes" "$tmp/out" &&
    grep -q "^$racy: note: rank 0 tb 0 op 8 (put) writes it here" "$tmp/out" || cat "$tmp/out"
result mscclc-check/racy $?
printf '{"name": 1}' >"$tmp/bad.json"
"$MSCCLC" --check "$tmp/bad.json" >/dev/null 2>&1; [ $? = 1 ]; result mscclc-check/invalid-plan $?
"$MSCCLC" --check "$tmp/none.json" >/dev/null 2>&1; [ $? = 2 ]; result mscclc-check/missing-plan $?
"$MSCCLC" --check "$racy" "$racy" >/dev/null 2>&1; [ $? = 2 ]; result mscclc-check/usage $?

# ---- mscclrt-run --check: the static checks first -------------------------------------------
"$RUN" "$racy" --check --schedules 16 >"$tmp/out" 2>&1
[ $? = 1 ] && grep -q "^$racy: error: data race: rank 1 tb 0 op 12 (put) reads rank 1's output chunk 1" "$tmp/out" &&
    grep -q "^mscclrt-run: --check: the static checks (those of mscclc --check) found 1 error in $racy, so it was not run" "$tmp/out" &&
    ! grep -q "check passed\|schedule" "$tmp/out" || cat "$tmp/out"
result run-check-static $?
"$RUN" tests/plans/compat/reduce_tbg.json --check >"$tmp/out" 2>&1
[ $? = 1 ] && grep -q "error: data race: rank 0 tb 0 op 7 (get) reads rank 1's scratch chunk 1" "$tmp/out" &&
    grep -q "found 4 errors in tests/plans/compat/reduce_tbg.json, so it was not run; --no-static-check runs it anyway" "$tmp/out" || cat "$tmp/out"
result run-check-static/reduce_tbg $?

# ---- run time: the racy plan under serial schedules ------------------------------------------
"$RUN" "$racy" --check --no-static-check --schedules 16 >"$tmp/out" 2>&1
st=$?
seed=$(sed -n 's/^mscclrt-run: schedule [0-9]* of 16 (seed \([0-9]*\)) failed.*/\1/p' "$tmp/out")
replay=$(sed -n 's/^mscclrt-run: replay it with: //p' "$tmp/out")
[ "$st" = 1 ] && [ -n "$seed" ] && grep -q "check failed" "$tmp/out" &&
    [ "$replay" = "mscclrt-run $racy --check --no-static-check --schedules 1 --seed $seed" ] || cat "$tmp/out"
result racy-fails $?
# the replay fails the same way, every time
ok=0
for k in 1 2 3; do
    # shellcheck disable=SC2086
    set -- $replay
    shift                                     # "mscclrt-run": the one just built
    "$RUN" "$@" >"$tmp/replay" 2>&1
    [ $? = 1 ] && grep -q "schedule 1 of 1 (seed $seed) failed" "$tmp/replay" || { cat "$tmp/replay"; ok=1; }
    grep "check failed" "$tmp/out" >"$tmp/a"; grep "check failed" "$tmp/replay" >"$tmp/b"
    cmp -s "$tmp/a" "$tmp/b" || { echo "the replay failed differently:"; cat "$tmp/a" "$tmp/b"; ok=1; }
done
result racy-replays $ok
# the same 16 schedules, run again, fail at the same seed
"$RUN" "$racy" --check --no-static-check --schedules 16 >"$tmp/again" 2>&1
cmp -s "$tmp/out" "$tmp/again" || { diff "$tmp/out" "$tmp/again"; false; }
result racy-deterministic $?
# the serial scheduler through the environment and with several iterations
MSCCLRT_CPU_SEED=$seed "$RUN" "$racy" --check --no-static-check --seed "$seed" >"$tmp/out" 2>&1
[ $? = 1 ] && grep -q "check failed" "$tmp/out" || cat "$tmp/out"
result racy-env-seed $?
"$RUN" "$racy" --check --no-static-check --schedules 2 --seed 0 >"$tmp/out" 2>&1
[ $? = 2 ] || cat "$tmp/out"
result seed-zero-refused $?

MSCCLRT_CPU_SCHEDULES=8 "$RUN" "$racy" >"$tmp/out" 2>&1
[ $? = 1 ] && grep -q "the result depends on the order of its thread blocks: byte .* differs between seed 1 and seed" "$tmp/out" || cat "$tmp/out"
result racy-env-schedules $?

# ---- correct plans pass every schedule ---------------------------------------------------------
for f in tests/plans/compat/*.json; do
    name=$(basename "$f" .json)
    [ "$name" = reduce_tbg ] && continue
    "$RUN" "$f" --check --schedules 20 --iters 2 >"$tmp/out" 2>&1 || cat "$tmp/out"
    result "compat/$name" $?
    MSCCLRT_CPU_SCHEDULES=8 "$RUN" "$f" --check --iters 3 >"$tmp/out" 2>&1 || cat "$tmp/out"
    result "compat-env/$name" $?
done
for prog in stdlib/*/*.coll; do
    coll=$(basename "$(dirname "$prog")")
    name=$(basename "$prog" .coll)
    defs="-D N=4"
    if grep -q '^param G ' "$prog"; then defs="$defs -D G=2"; fi
    # shellcheck disable=SC2086
    if ! "$MSCCLC" "$prog" $defs -o "$tmp/p.json" >"$tmp/out" 2>&1; then
        cat "$tmp/out"; result "stdlib/$coll/$name" 1; continue
    fi
    "$RUN" "$tmp/p.json" --check --schedules 20 --iters 2 >"$tmp/out" 2>&1 || cat "$tmp/out"
    result "stdlib/$coll/$name" $?
    MSCCLRT_CPU_SCHEDULES=8 "$RUN" "$tmp/p.json" --check --iters 3 >"$tmp/out" 2>&1 || cat "$tmp/out"
    result "stdlib-env/$coll/$name" $?
done
exit $fail

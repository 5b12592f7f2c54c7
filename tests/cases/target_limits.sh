#!/bin/sh
# target_limits.sh - MSCCL++'s executor's 64 operations per thread block bind only plans for it:
# examples/ring_allreduce_1tb.coll (a ring allreduce in one thread block) compiles for
# libmscclrt at N = 16, says so in its "target", loads and runs checked on the CPU backend; under
# --target mscclpp it is refused once (not once per rank) with a hint, and nothing is written.
# Plans for MSCCL++ start at the size where every thread-block group's block has data.
# Where NVRTC loads, it also prints (never asserts) what a 64-rank one-block kernel costs.
BUILD=${BUILD:-build}
MSCCLC=$BUILD/bin/mscclc
RUN=$BUILD/bin/mscclrt-run
EX=examples/ring_allreduce_1tb.coll
cd "$(dirname "$0")/../.." || exit 2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/target_limits.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
status=0
result() { if [ "$2" = 0 ]; then echo "testing $1 ... passed"; else echo "testing $1 ... failed"; status=1; fi; }

"$MSCCLC" "$EX" -D N=16 -o "$tmp/r16.json" && grep -q '"target": "mscclrt"' "$tmp/r16.json"
result "target/mscclrt-compiles-long-block" $?
"$RUN" "$tmp/r16.json" --ranks 16 --backend cpu --check --size 64K >"$tmp/run" 2>&1
rc=$?; [ $rc = 0 ] || cat "$tmp/run"; result "target/ring-1tb-n16-cpu-check" $rc

"$MSCCLC" "$EX" -D N=16 --target mscclpp -o "$tmp/pp.json" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && [ ! -e "$tmp/pp.json" ] &&
    [ "$(grep -c 'error:' "$tmp/err")" = 1 ] &&
    grep -q "MSCCL++'s executor (--target mscclpp) supports 64 per thread block" "$tmp/err" &&
    grep -q "16 thread blocks on 16 ranks exceed the limit" "$tmp/err" &&
    grep -q "note: spread the operations over more thread blocks with '@ tb(...)'" "$tmp/err"
rc=$?; [ $rc = 0 ] || cat "$tmp/err"; result "target/mscclpp-refuses-once-with-hint" $rc

# fits at N = 4: the plan says it is for MSCCL++ and still loads and runs here
"$MSCCLC" "$EX" -D N=4 --target=mscclpp -o "$tmp/pp4.json" &&
    grep -q '"target": "mscclpp"' "$tmp/pp4.json" &&
    "$RUN" "$tmp/pp4.json" --ranks 4 --backend cpu --check >/dev/null
result "target/mscclpp-fits" $?
"$MSCCLC" "$EX" --target cuda >/dev/null 2>"$tmp/err"
[ $? = 2 ] && grep -q "unknown target 'cuda'" "$tmp/err"; result "target/unknown" $?

# a plan without "target" (MSCCL++'s own) with a long block loads: drop the field
sed '/"target":/d' "$tmp/r16.json" >"$tmp/none.json"
"$MSCCLC" --dump --summary "$tmp/none.json" >"$tmp/sum" && ! grep -q '^target' "$tmp/sum" &&
    grep -q "rank 0: 1 thread block" "$tmp/sum"
result "target/absent-loads" $?

# MSCCL++'s executor cuts a thread-block group's buffers in 16-byte units and mis-executes
# empty slices: a plan for it starts where every block of a group gets a unit (rs_ag_packet at
# N = 2: groups of 16 blocks over 1-chunk buffers, 2 input chunks -> 512 bytes); libmscclrt's
# plan keeps 0, and a range entirely below that is refused, naming the program
"$MSCCLC" stdlib/allreduce/rs_ag_packet.coll -D N=2 -o "$tmp/rr.json" &&
    grep -q '"min_message_size": 0,' "$tmp/rr.json" &&
    "$MSCCLC" stdlib/allreduce/rs_ag_packet.coll -D N=2 --target mscclpp -o "$tmp/rp.json" &&
    grep -q '"min_message_size": 512,' "$tmp/rp.json"
result "target/mscclpp-min-size-of-thread-block-groups" $?
sed 's/^\( *sizes *\)0 \.\. 4M/\10 .. 256/' stdlib/allreduce/rs_ag_packet.coll >"$tmp/small.coll"
"$MSCCLC" "$tmp/small.coll" -D N=2 --target mscclpp -o "$tmp/small.json" 2>"$tmp/err"
rc=$?
[ $rc = 1 ] && [ ! -e "$tmp/small.json" ] && grep -q "small.coll:[0-9]*:[0-9]*: error: no message size of the plan's range 0 .. 256 runs in MSCCL++'s executor: it needs at least 512 bytes" "$tmp/err"
rc=$?; [ $rc = 0 ] || cat "$tmp/err"; result "target/mscclpp-range-below-its-minimum" $rc

if [ -x "$BUILD/tests/test_codegen" ] && "$MSCCLC" "$EX" -D N=64 -o "$tmp/r64.json"; then
    "$BUILD/tests/test_codegen" --time "$tmp/r64.json" 2>&1 | sed "s|$tmp/||"
fi
exit $status

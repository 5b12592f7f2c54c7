#!/bin/sh
# cpu_compat.sh - every real MSCCL++ plan (reduce_nvls through the CPU backend's switch
# emulation; from MSCCLPP_PLANS_DIR, ../shared/compat/mscclpp-plans or the repository's copies
# in tests/plans/compat: tests/tools/mscclpp_plans.sh) computes its collective on the CPU
# backend: mscclrt-run --check for several sizes (smallest legal, odd multiples of it, 64K, 1M), every data type,
# every operator, LL16 and LL8, and repeated calls (double scratch halves alternate).
# reduce_tbg.json runs with --no-static-check: its thread-block groups race (mscclc --check and
# so mscclrt-run --check's static checks report it; cpu_schedules.sh tests that), yet what the
# backend computes for it is still checked here.
# Reference: mscclrt-run --check reduces the ranks' inputs in rank order 0..N-1 in float64
# (exact integer arithmetic, wrapping, for integer types) and accepts |got - ref| <=
# (N+1) * unit roundoff of the type * sum|x| (prod: * |ref|; min/max: exact), because the plan
# combines in its own order with one rounding per pairwise operation in the data type.
BUILD=${BUILD:-build}
RUN=$BUILD/bin/mscclrt-run
[ -x "$RUN" ] || { echo "cpu_compat: $RUN not built"; exit 1; }
. tests/tools/mscclpp_plans.sh
echo "cpu_compat: the plans of $plans ($plans_from)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail=0

# one("name", args...): every run must pass --check
one() {
    name=$1
    shift
    ok=1
    while [ $# -gt 0 ]; do
        args=$1
        shift
        # shellcheck disable=SC2086
        if ! $RUN $args --check $nostatic >"$log" 2>&1; then
            ok=0
            echo "FAILED: mscclrt-run $args --check $nostatic"
            cat "$log"
        fi
    done
    if [ $ok = 1 ]; then echo "testing cpu_compat/$name ... passed"; else echo "testing cpu_compat/$name ... failed"; fail=1; fi
}

min_bytes() { # smallest legal size: from the plan's chunk counts x alignment (1 byte suffices to ask)
    $RUN "$1" --check $nostatic --dtype uint8 2>/dev/null | sed -n 's/.* ranks, \([0-9]*\) bytes .*/\1/p'
}

for plan in "$plans"/*.json; do
    p=$(basename "$plan" .json)
    nostatic=
    [ "$p" = reduce_tbg ] && nostatic=--no-static-check
    m=$(min_bytes "$plan")
    if [ -z "$m" ]; then
        echo "cpu_compat: $p: cannot run at its smallest size:"
        $RUN "$plan" --check $nostatic --dtype uint8
        echo "testing cpu_compat/$p/min ... failed"
        fail=1
        continue
    fi
    sizes=""
    for s in $m $((3 * m)) $((5 * m)) 65536 1048576; do
        [ $((s % m)) = 0 ] && sizes="$sizes $s"
    done
    # sizes: float32 sum, two calls each
    set --
    for s in $sizes; do set -- "$@" "$plan --size $s --iters 2"; done
    one "$p/sizes" "$@"
    # every data type (sum) at 3x the smallest size and at 64K
    set --
    for t in float16 bfloat16 float32 float64 int8 uint8 int32 uint32 int64 uint64 fp8_e4m3 fp8_e5m2; do
        set -- "$@" "$plan --size $((3 * m)) --dtype $t" "$plan --size 65536 --dtype $t --seed 5"
    done
    one "$p/dtypes" "$@"
    # every operator, in a float, a narrow float and an integer type (allgather: no operator)
    set --
    for op in sum prod min max avg; do
        for t in float32 bfloat16 int32 fp8_e5m2; do
            set -- "$@" "$plan --size 65536 --dtype $t --op $op --seed 3"
        done
    done
    one "$p/ops" "$@"
    # LL8 packets and repeated calls (flags and scratch halves over 5 calls)
    one "$p/ll8_repeat" "$plan --size $((3 * m)) --packet ll8 --iters 5" \
        "$plan --size 1048576 --packet ll8 --dtype float16 --iters 3" \
        "$plan --size 65536 --packet ll16 --dtype float64 --iters 5"
done
exit $fail

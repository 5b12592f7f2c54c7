#!/bin/sh
# cpu_tsan.sh - a short CPU-backend workload for the ThreadSanitizer pass of `make
# test-sanitize` (ONLY=tsan runs only this script): every MSCCL++ plan (tests/tools/mscclpp_plans.sh
# says which directory) under --check with repeated calls, LL16 and LL8, plus the op-semantics
# unit test binary when it is built.
# Any data race or lock-order report makes the run exit non-zero under TSan. reduce_tbg.json,
# whose thread-block groups race in the plan itself (mscclc --check says so), runs with
# --no-static-check: what is tested here is the backend, which must not race on its own.
BUILD=${BUILD:-build}
RUN=$BUILD/bin/mscclrt-run
[ -x "$RUN" ] || { echo "cpu_tsan: $RUN not built"; exit 1; }
. tests/tools/mscclpp_plans.sh
echo "cpu_tsan: the plans of $plans ($plans_from)"
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}"
fail=0
for plan in "$plans"/*.json; do
    p=$(basename "$plan" .json)
    nostatic=
    [ "$p" = reduce_tbg ] && nostatic=--no-static-check
    # shellcheck disable=SC2086
    if "$RUN" "$plan" --size 65536 --iters 3 --check $nostatic >/dev/null 2>"$BUILD/cpu_tsan.$p.err" &&
       "$RUN" "$plan" --size 16384 --iters 2 --packet ll8 --dtype float16 --check $nostatic >/dev/null \
           2>>"$BUILD/cpu_tsan.$p.err"; then
        echo "testing cpu_tsan/$p ... passed"
    else
        cat "$BUILD/cpu_tsan.$p.err"
        echo "testing cpu_tsan/$p ... failed"
        fail=1
    fi
    rm -f "$BUILD/cpu_tsan.$p.err"
done
if [ -x "$BUILD/tests/test_cpu_ops" ]; then
    if "$BUILD/tests/test_cpu_ops" >"$BUILD/cpu_tsan.ops.log" 2>&1; then
        echo "testing cpu_tsan/test_cpu_ops ... passed"
    else
        cat "$BUILD/cpu_tsan.ops.log"
        echo "testing cpu_tsan/test_cpu_ops ... failed"
        fail=1
    fi
    rm -f "$BUILD/cpu_tsan.ops.log"
fi
exit $fail

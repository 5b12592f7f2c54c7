#!/bin/sh
# compat_coll.sh - compiles each tests/compat/NAME.coll and checks that the plan has the same
# per-rank, per-TB op sequences, channel and remote-buffer tables as MSCCL++'s own plan NAME.json
# (MSCCLPP_PLANS_DIR, ../shared/compat/mscclpp-plans, or the repository's copies in
# tests/plans/compat: tests/tools/mscclpp_plans.sh).
BUILD=${BUILD:-build}
. tests/tools/mscclpp_plans.sh
echo "compat_coll: MSCCL++'s plans from $plans ($plans_from)"
bin=$BUILD/tests/tools/compare_plans   # built by make test from tests/tools/compare_plans.c
[ -x "$bin" ] || { echo "no $bin (run make test)"; exit 1; }
fail=0
for src in tests/compat/*.coll; do
    name=$(basename "$src" .coll)
    want=$plans/$name.json
    if [ ! -f "$want" ]; then
        echo "testing compat/$name ... skipped (needs MSCCL++'s $name.json in $plans)"
        continue
    fi
    if "$bin" "$src" "$want"; then
        echo "testing compat/$name ... passed"
    else
        echo "testing compat/$name ... failed"
        fail=1
    fi
done
exit $fail

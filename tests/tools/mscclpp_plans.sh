# mscclpp_plans.sh - sourced (". tests/tools/mscclpp_plans.sh", from the repository root) by the
# test scripts that run MSCCL++'s own plans; sets $plans to their directory and $plans_from to
# where it came from. The optional input MSCCLPP_PLANS_DIR names a directory of MSCCL++ plans (a
# newer set, say); else the shared checkout beside this repository is used when it is there
# (../shared/compat/mscclpp-plans, as before); else the verbatim copies in tests/plans/compat
# (MIT, LICENSE.mscclpp), so that a clone with nothing beside it proves the same compatibility.
if [ -n "${MSCCLPP_PLANS_DIR:-}" ]; then
    plans=$MSCCLPP_PLANS_DIR
    plans_from=MSCCLPP_PLANS_DIR
    if ! ls "$plans"/*.json >/dev/null 2>&1; then
        echo "MSCCLPP_PLANS_DIR=$plans: no *.json plans there"
        exit 1
    fi
elif [ -d ../shared/compat/mscclpp-plans ]; then
    plans=../shared/compat/mscclpp-plans
    plans_from="the shared checkout"
else
    plans=tests/plans/compat
    plans_from="the repository's copies (no ../shared/compat/mscclpp-plans, no MSCCLPP_PLANS_DIR)"
fi

# shellcheck shell=sh
# stdlib_pick.sh - sourced by the GPU scripts that run stdlib programs (run.sh,
# mscclpp_executor.sh, net.sh): stdlib_picked SRC PATTERNS says whether SRC (stdlib/x/y.coll) matches
# one of PATTERNS (words such as "allreduce/* allgather/fullmesh", matched, not globbed), or
# PATTERNS is empty.
stdlib_picked() {
    [ -n "$2" ] || return 0
    pprog=${1#stdlib/} phit=no
    set -f
    for pg in $2; do
        # shellcheck disable=SC2254 # pg is a pattern on purpose
        case ${pprog%.coll} in $pg) phit=yes ;; esac
    done
    set +f
    [ "$phit" = yes ]
}

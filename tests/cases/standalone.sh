#!/bin/sh
# standalone.sh - the repository stands alone: the case scripts that can read optional inputs
# from outside it (MSCCL++'s plans, NVIDIA's nccl-tests, the NCCL ABI lists of ../shared) run in
# a copy of the repository with nothing beside it and none of the variables that name those
# inputs set, as in a fresh clone. Each script must pass there, or skip saying what it needs
# (those that have everything they need in the repository must not skip as a whole); none may
# fail. The copy holds the files git knows (tracked, and new ones not ignored: uncommitted work
# is tested too) and reuses $BUILD through symlinks, so nothing is rebuilt.
cd "$(dirname "$0")/../.." || exit 2
BUILD=${BUILD:-build}
top=$(pwd)
# must: whole skips fail; may: nccl-tests is not in the repository, so its build skips here
must="cpu_compat cpu_run cpu_tsan gpu_launch compat_coll nccl_exports"
may="nccl_tests_build"

if ! command -v git >/dev/null 2>&1 || ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "skipped (needs a git checkout: the copy is made of the files git knows)"
    exit 77
fi
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
repo=$tmp/repo
mkdir "$repo" || exit 2
# (a tracked file deleted in the working tree is simply not copied)
git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$repo" ||
    { echo "standalone: cannot copy the repository into $repo"; exit 1; }
[ ! -e "$tmp/shared" ] || { echo "standalone: $tmp/shared exists; the copy must have nothing beside it"; exit 1; }
# the build, entry by entry, except the logs: the copy's test run writes its own
case $BUILD in /*) b=$BUILD ;; *) b=$top/$BUILD ;; esac
mkdir "$repo/build" || exit 2
for e in "$b"/* "$b"/.[!.]*; do
    [ -e "$e" ] || continue
    [ "$(basename "$e")" = test-logs ] || ln -s "$e" "$repo/build/"
done
echo "standalone: a copy of the repository in $repo, the build of $b"

st=0
for name in $must $may; do
    (cd "$repo" && unset MSCCLPP_PLANS_DIR NCCL_TESTS_SRC NCCL_ABI_LISTS &&
     ONLY=$name BUILD=build sh tests/run.sh) >"$tmp/$name.out" 2>&1
    rc=$?
    sed 's/^/    /' "$tmp/$name.out"
    why=""
    [ $rc = 0 ] || why="it failed"
    grep -q '^testing .* \.\.\. skipped$' "$tmp/$name.out" && why="${why:+$why; }a skip names no reason"
    case " $must " in *" $name "*)
        grep -q "^testing $name \.\.\. skipped" "$tmp/$name.out" && why="${why:+$why; }it skipped as a whole" ;;
    esac
    if [ -z "$why" ]; then
        echo "testing standalone/$name ... passed"
    else
        echo "standalone/$name: in a copy with nothing beside it, $why"
        echo "testing standalone/$name ... failed"
        st=1
    fi
done
exit $st

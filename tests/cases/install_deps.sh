#!/bin/sh
# install_deps.sh - .ci/install-deps.sh against a fake apt-get on a PATH of our own (nothing is
# installed): it passes apt-get the dpkg lock timeout and says that it waits, it waits out a
# held package-lists lock, it runs apt-get update when the install fails for missing package
# lists and installs again, it fails with apt-get's words when it cannot install, and it runs no
# apt-get at all when nothing is missing.
cd "$(dirname "$0")/../.." || exit 2
script=$PWD/.ci/install-deps.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# the fake PATH: the tools the script needs, a root `id`, a `sleep` that does not sleep, and an
# apt-get that logs its arguments and acts as $FAKE_APT says
mkdir "$tmp/bin"
for tool in grep mktemp rm sed tail cat touch; do
    p=$(command -v "$tool") || { echo "install_deps: $tool not found"; echo "skipped (needs $tool)"; exit 77; }
    ln -s "$p" "$tmp/bin/$tool"
done
printf '#!/bin/sh\necho 0\n' >"$tmp/bin/id"
printf '#!/bin/sh\nexit 0\n' >"$tmp/bin/sleep"
cat >"$tmp/bin/apt-get" <<'EOF'
#!/bin/sh
echo "$*" >>"$FAKE_DIR/calls"
case "$*" in *" update"*) op=update ;; *" install "*) op=install ;; *) op=other ;; esac
case "$FAKE_APT:$op" in
ok:*) exit 0 ;;
nolists:install|listsbusy:install)   # no package lists until an update ran
    [ -f "$FAKE_DIR/updated" ] && exit 0
    echo "E: Unable to locate package flex"; exit 100 ;;
nolists:update) touch "$FAKE_DIR/updated"; exit 0 ;;
listsbusy:update)  # the lists lock is held for the first two tries
    n=$(cat "$FAKE_DIR/busy" 2>/dev/null || echo 0); echo $((n + 1)) >"$FAKE_DIR/busy"
    [ "$n" -ge 2 ] && touch "$FAKE_DIR/updated" && exit 0
    echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 7 (apt-get)"; exit 100 ;;
*) echo "E: Sub-process /usr/bin/dpkg returned an error code (1)"; exit 100 ;;
esac
EOF
chmod +x "$tmp/bin/id" "$tmp/bin/sleep" "$tmp/bin/apt-get"

# run NAME MODE WANT_STATUS: runs the script on the fake PATH (flex, bison, groff and pkg-config
# are missing there); run_ok says whether it exited with WANT_STATUS
run() {
    rm -f "$tmp/calls" "$tmp/updated" "$tmp/busy"
    PATH=$tmp/bin FAKE_DIR=$tmp FAKE_APT=$2 /bin/sh "$script" >"$tmp/out" 2>&1
    st=$?
    touch "$tmp/calls"
    run_ok=1
    [ "$st" = "$3" ] || { run_ok=0; echo "$1: status $st, want $3"; }
}

# check NAME COND...: reports NAME passed when the last run's status was right and COND... succeeds
check() {
    name=$1
    shift
    if [ "$run_ok" = 1 ] && "$@"; then echo "testing install_deps/$name ... passed"
    else
        echo "install_deps/$name: output:"; cat "$tmp/out"; echo "apt-get calls:"; cat "$tmp/calls"
        echo "testing install_deps/$name ... failed"; fail=1
    fi
}
has() { grep -q -- "$1" "$2"; }

run lock_timeout ok 0
check lock_timeout has "^-o DPkg::Lock::Timeout=120 .*install .*flex bison" "$tmp/calls"
check says_it_waits has "waiting for it (up to 120 s)" "$tmp/out"

run nolists nolists 0
check update_after_missing_lists sh -c "[ \$(grep -c install '$tmp/calls') = 2 ] &&
    grep -q '^-o DPkg::Lock::Timeout=120 .*update' '$tmp/calls' &&
    grep -q 'Unable to locate package flex); running apt-get update' '$tmp/out'"

run listsbusy listsbusy 0
check waits_for_lists_lock sh -c "[ \$(grep -c update '$tmp/calls') = 3 ] &&
    grep -q 'another apt/dpkg process holds the lock; waiting' '$tmp/out'"

run broken broken 1
check fails_with_reason sh -c "grep -q 'could not install: flex bison' '$tmp/out' &&
    grep -q 'dpkg returned an error code' '$tmp/out'"

# nothing missing: stand-ins for the commands; the headers are the real ones (skip without them)
if [ -f /usr/include/cjson/cJSON.h ] && [ -f /usr/include/infiniband/verbs.h ]; then
    for c in flex bison groff pkg-config c++ python3; do printf '#!/bin/sh\n' >"$tmp/bin/$c"; chmod +x "$tmp/bin/$c"; done
    run nothing_missing broken 0
    check nothing_missing sh -c "[ ! -s '$tmp/calls' ] && [ ! -s '$tmp/out' ]"
else
    echo "testing install_deps/nothing_missing ... skipped (needs the cJSON and ibverbs headers)"
fi
exit $fail

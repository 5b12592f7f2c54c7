#!/bin/sh
# install-deps.sh - called by `make` before the first compile: installs the Debian packages the
# build needs (flex, bison, cJSON, libibverbs headers, groff for man checks, g++ and pip for the
# NCCL ABI tests, venv for the Python package's tests) when any is missing.
# Does nothing when all are present; fails with the list (and apt-get's own words) when it cannot
# install them. Another apt/dpkg process (a fresh machine's unattended upgrades) holding the lock
# is waited for, up to MSCCL_APT_LOCK_WAIT seconds (default 120); a failed install is retried once
# after `apt-get update`, since a fresh machine may have no package lists yet.
missing=""
command -v flex  >/dev/null 2>&1 || missing="$missing flex"
command -v bison >/dev/null 2>&1 || missing="$missing bison"
[ -f /usr/include/cjson/cJSON.h ] || missing="$missing libcjson-dev"
[ -f /usr/include/infiniband/verbs.h ] || missing="$missing libibverbs-dev"
command -v groff >/dev/null 2>&1 || missing="$missing groff-base"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
# the NCCL ABI tests: NVIDIA's nccl_device.h is C++; pip fetches the nvidia-nccl-cu13 wheel
command -v c++ >/dev/null 2>&1 || missing="$missing g++"
python3 -m pip --version >/dev/null 2>&1 || missing="$missing python3-pip"
# python/: its tests run in a virtual environment of their own (build/python-venv)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing="$missing python3-venv"
[ -z "$missing" ] && exit 0
echo "install-deps: installing:$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
wait_s=${MSCCL_APT_LOCK_WAIT:-120}
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT

# apt_get ARGS...: apt-get ARGS, its output in $log. apt-get (1.9.11 and later) waits for the
# dpkg lock itself (DPkg::Lock::Timeout); a run that still failed on a lock (the package lists'
# lock that `apt-get update` takes, or an older apt) is retried every 5 s until wait_s have passed.
apt_get() {
    waited=0
    while :; do
        $SUDO apt-get -o DPkg::Lock::Timeout="$wait_s" -y -qq "$@" >"$log" 2>&1 && return 0
        grep -q 'Could not get lock\|Unable to lock\|Unable to acquire the dpkg frontend lock' \
            "$log" && [ "$waited" -lt "$wait_s" ] || return 1
        echo "install-deps: another apt/dpkg process holds the lock; waiting (up to ${wait_s} s)"
        sleep 5
        waited=$((waited + 5))
    done
}

echo "install-deps: if another apt/dpkg process holds the lock, waiting for it (up to ${wait_s} s)"
apt_get install $missing && exit 0
# most often the package lists are missing or stale ("Unable to locate package"): refresh them
# and try once more; the install is retried even if the update partly failed (one unreachable
# source must not stop packages the others provide)
echo "install-deps: apt-get install failed ($(tail -n 1 "$log")); running apt-get update"
apt_get update || echo "install-deps: apt-get update failed: $(tail -n 1 "$log")"
apt_get install $missing && exit 0
echo "install-deps: could not install:$missing (run: apt-get install$missing)" >&2
sed 's/^/install-deps:   /' "$log" | tail -n 5 >&2
exit 1

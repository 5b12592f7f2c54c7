#!/bin/sh
# install-deps.sh - called by `make` before the first compile: installs the Debian packages the
# build needs (flex, bison, cJSON, libibverbs headers, groff for man checks, g++ and pip for the
# NCCL ABI tests) when any is missing.
# Does nothing when all are present; fails with the list when it cannot install them.
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
[ -z "$missing" ] && exit 0
echo "install-deps: installing:$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if $SUDO apt-get install -y -qq $missing >/dev/null 2>&1 ||
   { $SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y -qq $missing >/dev/null 2>&1; }; then
    exit 0
fi
echo "install-deps: could not install:$missing (run: apt-get install$missing)" >&2
exit 1

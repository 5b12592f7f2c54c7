#!/bin/sh
# python_install.sh - `pip install ./python` into a clean virtual environment: the installed
# package finds the libraries bundled beside it (not the checkout's), compiles a bundled stdlib
# program, runs it on the CPU backend, and its mscclrt-tune command answers --help; then
# `pip install -e ./python` finds the checkout's build/lib; and with no library anywhere the
# import error names what is missing and where it looked. `pip wheel` makes a platform wheel
# (py3-none-linux_*: it carries the libraries' machine code), and check_cpu runs installed.
cd "$(dirname "$0")/../.." || exit 2
BUILD=${BUILD:-build}
[ -f "$BUILD/lib/libmscclrt.so.0" ] && [ -f "$BUILD/lib/libmscclc.so.0" ] \
    || { echo "python_install: build the libraries first (make)"; exit 1; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
st=0
pass() { echo "testing python_install/$1 ... passed"; }
fail() { echo "testing python_install/$1 ... failed"; st=1; }

python3 -m venv "$tmp/venv" || { echo "python_install: python3 -m venv failed"; exit 1; }
py=$tmp/venv/bin/python
# no network needed when the venv has setuptools and wheel; otherwise pip fetches them
iso=--no-build-isolation
"$py" -c 'import setuptools, wheel' 2>/dev/null || iso=
"$py" -m pip install -q --disable-pip-version-check $iso ./python >"$tmp/pip.log" 2>&1
if [ $? = 0 ]; then pass pip_install; else fail pip_install; tail -20 "$tmp/pip.log"; fi
rm -rf python/build python/mscclrt.egg-info
# the wheel bundles machine code: it is tagged for the platform, not py3-none-any
"$py" -m pip wheel -q --no-deps --disable-pip-version-check $iso -w "$tmp/wheel" ./python \
    >"$tmp/wheel.log" 2>&1
rm -rf python/build python/mscclrt.egg-info
case "$(ls "$tmp/wheel" 2>/dev/null)" in
    *-py3-none-linux_*.whl) pass platform_wheel ;;
    *) fail platform_wheel; ls "$tmp/wheel"; tail -5 "$tmp/wheel.log" ;;
esac

check='
import sys, struct, mscclrt, mscclrt._lib as L
from mscclrt import cpu
p = L.library_path(L.runtime())
assert "site-packages/mscclrt/_libs" in p, p
assert "site-packages/mscclrt/_libs" in L.library_path(L.compiler())
plan = mscclrt.compile(mscclrt.stdlib_program("allreduce/allpair_packet"), params={"N": 2})
ib, ob = plan.call_sizes(256)
s = [bytearray(struct.pack("<64f", *[1.0 + r] * 64)) for r in range(2)]
o = [bytearray(ob) for r in range(2)]
with cpu.CpuComm(2) as c:
    c.execute(plan, s, o, ib, ob, "float32", "sum")
assert struct.unpack("<64f", bytes(o[1])) == (3.0,) * 64
assert mscclrt.check_cpu(plan, size=256, dtype="bfloat16", op="max") >= 0
print("installed ok", p)
'
(cd "$tmp" && env -u MSCCLRT_LIB_DIR -u PYTHONPATH MSCCLRT_CACHE_DIR="$tmp/cache" "$py" -c "$check") \
    >"$tmp/run.log" 2>&1
if grep -q "installed ok" "$tmp/run.log"; then pass bundled_libraries; else fail bundled_libraries; cat "$tmp/run.log"; fi
if "$tmp/venv/bin/mscclrt-tune" --help 2>&1 | grep -q -- "--min-bytes"; then pass tune_command
else fail tune_command; "$tmp/venv/bin/mscclrt-tune" --help 2>&1 | tail -5; fi

# editable: the checkout's build/lib
"$py" -m pip uninstall -q -y mscclrt >/dev/null 2>&1
"$py" -m pip install -q --disable-pip-version-check $iso -e ./python >"$tmp/pip_e.log" 2>&1
rc=$?
rm -rf python/build python/mscclrt.egg-info
out=$(cd "$tmp" && env -u MSCCLRT_LIB_DIR -u PYTHONPATH "$py" -c \
      'import mscclrt._lib as L; print(L.library_path(L.runtime()))' 2>&1)
case "$rc:$out" in 0:*"$PWD/$BUILD/lib/"*|0:*"/build/lib/"*) pass editable ;;
    *) fail editable; echo "$out"; tail -5 "$tmp/pip_e.log" ;; esac

# nothing to load: the error names the library and the places searched
mkdir -p "$tmp/empty"
out=$(cd "$tmp" && env -u PYTHONPATH MSCCLRT_LIB_DIR="$tmp/empty" "$py" -c '
import mscclrt._lib as L
L.search_dirs = (lambda f: (lambda: f()[:1]))(L.search_dirs)
L.RUNTIME_SONAME = "libmscclrt.so.99"
try:
    L.runtime()
except L.LibraryNotFound as e:
    print(e)' 2>&1)
case "$out" in *"cannot find the runtime library (libmscclrt.so.99)"*"$tmp/empty"*) pass missing_library ;;
    *) fail missing_library; echo "$out" ;; esac
exit $st

#!/bin/sh
# fetch_nccl.sh DIR - puts NVIDIA's NCCL 2.28.9 into DIR/include (nccl.h, nccl_device.h and its
# nccl_device/ headers) and DIR/lib (libnccl.so.2), from the nvidia-nccl-cu13==2.28.9 wheel on
# PyPI (the NCCL PyTorch 2.11 pins), with pip. Once: DIR/.ok marks a finished fetch, so later runs
# cost nothing. The wheel (about 200 MB) is deleted after unpacking. Used by the ABI tests (our
# nccl.h against the real one), the nccl-tests build (its device headers) and GPU tests
# (MSCCLRT_NCCL_LIB_PATH=DIR/lib/libnccl.so.2). Exits 1, saying why, when it cannot fetch.
set -u
dest=${1:?usage: fetch_nccl.sh DIR}
pkg=nvidia-nccl-cu13
ver=2.28.9
[ -f "$dest/.ok" ] && exit 0

py=""
for p in python3 python; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -m pip --version >/dev/null 2>&1; then
        py=$p
        break
    fi
done
if [ -z "$py" ]; then
    echo "fetch_nccl: pip is not available (python3 -m pip); it downloads $pkg==$ver" >&2
    exit 1
fi

tmp="$dest.tmp.$$"
rm -rf "$tmp" "$dest"
mkdir -p "$tmp/wheel" || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
echo "fetch_nccl: downloading $pkg==$ver (about 200 MB) from PyPI into $dest (once)"
start=$(date +%s)
if ! "$py" -m pip download --no-deps --only-binary=:all: --disable-pip-version-check -q \
        "$pkg==$ver" -d "$tmp/wheel" >"$tmp/pip.log" 2>&1; then
    sed 's/^/    /' "$tmp/pip.log" | tail -15 >&2
    echo "fetch_nccl: pip could not download $pkg==$ver (no network or no PyPI?); CI needs it" >&2
    exit 1
fi
whl=$(ls "$tmp"/wheel/*.whl 2>/dev/null | head -1)
[ -n "$whl" ] || { echo "fetch_nccl: pip downloaded no wheel into $tmp/wheel" >&2; exit 1; }
echo "fetch_nccl: downloaded $(basename "$whl") in $(( $(date +%s) - start )) s;" \
     "unpacking the headers and libnccl.so.2"
# only the headers and the library: a few members of the zip, with Python's zipfile (no unzip)
"$py" - "$whl" "$tmp" <<'EOF' || { echo "fetch_nccl: cannot unpack $whl" >&2; exit 1; }
import os, sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
pre = "nvidia/nccl/"
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        if not name.startswith(pre) or name.endswith("/"):
            continue
        rel = name[len(pre):]
        if not (rel.startswith("include/") or rel == "lib/libnccl.so.2"):
            continue
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(name) as src, open(path, "wb") as dst:
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                dst.write(chunk)
EOF
rm -rf "$tmp/wheel" "$tmp/pip.log"
if ! grep -q '^#define NCCL_VERSION_CODE 22809' "$tmp/include/nccl.h" 2>/dev/null ||
   [ ! -f "$tmp/lib/libnccl.so.2" ] || [ ! -f "$tmp/include/nccl_device.h" ]; then
    echo "fetch_nccl: the wheel did not hold NCCL $ver's nccl.h, nccl_device.h and libnccl.so.2" >&2
    exit 1
fi
echo "$pkg $ver $(basename "$whl")" >"$tmp/.ok"
mv "$tmp" "$dest" || exit 1
trap - EXIT INT TERM
echo "fetch_nccl: NCCL $ver is in $dest (include/, lib/libnccl.so.2)"

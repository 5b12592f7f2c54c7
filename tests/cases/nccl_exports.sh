#!/bin/sh
# nccl_exports.sh - libmscclrt_nccl.so exports what programs built against NCCL 2.28.9 bind to:
# every function of nccl.h and its pnccl twin, every nccl* symbol libnccl.so.2 2.28.9 exports
# (both read from NVIDIA's own nccl.h and libnccl.so.2 in the nvidia-nccl-cu13==2.28.9 wheel,
# which tests/tools/fetch_nccl.sh fetches with pip, as for nccl_abi), every NCCL symbol PyTorch
# imports (from the libtorch_cuda.so of the PyTorch that python3 imports, when there is one); each
# twin has its function's address; besides nccl* / pnccl* exactly libmscclrt.so's public
# mscclrt_* API is exported (python/mscclrt uses the preloaded drop-in's registry through it);
# the drop-in's soname is libmscclrt_nccl.so.2 and a program linked with -lmscclrt_nccl records
# that name (issue 22 item 12: it recorded libnccl.so.2, and the loader gave it NVIDIA's NCCL),
# while the stand-in lib/nccl/libnccl.so.2, with the same exports, has soname libnccl.so.2.
# Skips while the entry points are missing.
# Optional second source: the lists of NCCL_ABI_LISTS or of the shared checkout beside this
# repository (../shared/nccl-abi: nccl-2.28.9-functions.txt, libnccl-2.28.9-exports.txt,
# torch-2.11-nccl-imports.txt). Where a list and the package it was read from are both here
# (PyTorch: when the installed one is 2.11), they must agree; the test names what differs.
cd "$(dirname "$0")/../.." || exit 2
BUILD=${BUILD:-build}
so=$BUILD/lib/libmscclrt_nccl.so
nccl=$BUILD/third_party/nccl-2.28.9
out=$BUILD/tests/nccl_exports
st=0
if [ -n "${NCCL_ABI_LISTS:-}" ]; then
    lists=$NCCL_ABI_LISTS
    [ -d "$lists" ] || { echo "nccl_exports: NCCL_ABI_LISTS=$lists is not a directory"; exit 1; }
else
    lists=../shared/nccl-abi
fi
lists_how="NCCL_ABI_LISTS or ../shared/nccl-abi"

if [ ! -f "$so" ]; then
    echo "libmscclrt_nccl.so not built: entry points missing (runtime/nccl/nccl_api*.c)"
    echo "skipped (needs runtime/nccl/nccl_api*.c)"
    exit 77
fi
mkdir -p "$out" || exit 2
rm -f "$out"/*.want
nm -D --defined-only "$so" >"$out/nm.txt" || { echo "nccl_exports: nm failed on $so"; exit 1; }
awk '{print $3}' "$out/nm.txt" | sort -u >"$out/exported.txt"

result() { # name status(0 passed, 1 failed)
    if [ "$2" = 0 ]; then echo "testing nccl_exports/$1 ... passed"
    else echo "testing nccl_exports/$1 ... failed"; st=1; fi
}

# the packages: NVIDIA's header and library (the wheel), the installed PyTorch's library
if sh tests/tools/fetch_nccl.sh "$nccl"; then
    # "ncclResult_t  ncclGetVersion(int *version);", "const char* pncclGetErrorString(...": every
    # declaration that starts a line; the pnccl twins are checked apart
    sed -n 's/^[A-Za-z_][^(#;/=]*[ *]\(nccl[A-Za-z0-9_]*\) *(.*/\1/p' "$nccl/include/nccl.h" |
        sort -u >"$out/functions.want"
    nm -D --defined-only "$nccl/lib/libnccl.so.2" | awk '$3 ~ /^nccl/ {print $3}' | sort -u \
        >"$out/libnccl.want"
    [ -s "$out/functions.want" ] && [ -s "$out/libnccl.want" ] ||
        { echo "nccl_exports: no functions read from $nccl/include/nccl.h or its libnccl.so.2"
          result read_wheel 1; }
else
    echo "nccl_exports: no NVIDIA NCCL 2.28.9 (the nvidia-nccl-cu13 wheel, through pip from PyPI)"
    result fetch 1
fi
torch_ver=""
torch_so=$(python3 -c 'import os, torch
print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so"))' 2>/dev/null)
if [ -n "$torch_so" ] && [ -f "$torch_so" ]; then
    torch_ver=$(python3 -c 'import torch; print(torch.__version__)')
    echo "nccl_exports: PyTorch $torch_ver's NCCL imports from $torch_so"
    nm -D --undefined-only "$torch_so" | awk '{sub(/@.*/, "", $NF)} $NF ~ /^p?nccl/ {print $NF}' |
        sort -u >"$out/torch.want"
fi

# agree NAME PACKAGE-LIST LIST-FILE WHAT: a list of the shared inputs against the same symbols read
# from the package, when both are here; the list alone stands in for a missing package
agree() {
    [ -f "$3" ] || return 0
    if [ ! -f "$2" ]; then
        sort -u "$3" >"$2"
        echo "nccl_exports: $1 from $3 alone ($4 is not here)"
        return 0
    fi
    only_list=$(sort -u "$3" | comm -23 - "$2")
    only_pkg=$(sort -u "$3" | comm -13 - "$2")
    if [ -z "$only_list$only_pkg" ]; then
        result "$1_list_agrees" 0
    else
        echo "nccl_exports: $3 and $4 differ"
        [ -z "$only_list" ] || echo "    only in the list:" $only_list
        [ -z "$only_pkg" ] || echo "    only in $4:" $only_pkg
        result "$1_list_agrees" 1
    fi
}
agree functions "$out/functions.want" "$lists/nccl-2.28.9-functions.txt" "$nccl/include/nccl.h"
agree libnccl "$out/libnccl.want" "$lists/libnccl-2.28.9-exports.txt" "$nccl/lib/libnccl.so.2"
case $torch_ver in
    2.11|2.11.*|"") agree torch "$out/torch.want" "$lists/torch-2.11-nccl-imports.txt" \
                          "PyTorch ${torch_ver:-2.11}'s libtorch_cuda.so" ;;
    *) [ -f "$lists/torch-2.11-nccl-imports.txt" ] &&
           sort -u "$lists/torch-2.11-nccl-imports.txt" >"$out/torch211.want" ;;
esac

check() { # name file-of-wanted-symbols how-to-get-it
    if [ ! -f "$2" ]; then
        echo "testing nccl_exports/$1 ... skipped (needs $3)"
        return
    fi
    missing=$(sort -u "$2" | comm -23 - "$out/exported.txt")
    if [ -z "$missing" ]; then
        echo "testing nccl_exports/$1 ... passed"
    else
        echo "nccl_exports/$1: not exported:" $missing
        echo "testing nccl_exports/$1 ... failed"
        st=1
    fi
}

wheel="NVIDIA's NCCL 2.28.9 (make nccl-wheel: pip, PyPI)"
check functions "$out/functions.want" "$wheel, or nccl-2.28.9-functions.txt in $lists_how"
[ -f "$out/functions.want" ] && sed 's/^/p/' "$out/functions.want" >"$out/twins.want"
check pnccl_twins "$out/twins.want" "$wheel, or nccl-2.28.9-functions.txt in $lists_how"
check libnccl_exports "$out/libnccl.want" "$wheel, or libnccl-2.28.9-exports.txt in $lists_how"
check torch_imports "$out/torch.want" \
    "PyTorch with CUDA (pip install torch), or torch-2.11-nccl-imports.txt in $lists_how"
[ -f "$out/torch211.want" ] && check torch_2.11_imports "$out/torch211.want" "$lists_how"

# pncclX is ncclX: the same address
bad=$(awk '{addr[$3] = $1} END {for (s in addr) if (s ~ /^pnccl/ && addr[substr(s, 2)] != addr[s])
      print s}' "$out/nm.txt")
if [ -z "$bad" ]; then echo "testing nccl_exports/twin_addresses ... passed"
else echo "nccl_exports: twins at another address than their function:" $bad
     echo "testing nccl_exports/twin_addresses ... failed"; st=1; fi

extra=$(grep -v -E '^(p?nccl|mscclrt_)' "$out/exported.txt")
if [ -z "$extra" ]; then echo "testing nccl_exports/only_nccl_and_api ... passed"
else echo "nccl_exports: exported besides nccl*/pnccl*/mscclrt_*:" $extra
     echo "testing nccl_exports/only_nccl_and_api ... failed"; st=1; fi

# the mscclrt_* exports are libmscclrt.so's public API, all of it and nothing more
rt=$BUILD/lib/libmscclrt.so
if [ -f "$rt" ]; then
    nm -D --defined-only "$rt" | awk '$3 ~ /^mscclrt_/ {print $3}' | sort -u >"$out/rt_api.txt"
    grep -E '^mscclrt_' "$out/exported.txt" >"$out/dropin_api.txt"
    if [ -s "$out/rt_api.txt" ] && cmp -s "$out/rt_api.txt" "$out/dropin_api.txt"; then
        echo "testing nccl_exports/mscclrt_api ... passed"
    else
        echo "nccl_exports: mscclrt_* exports differ from libmscclrt.so's:"
        diff "$out/rt_api.txt" "$out/dropin_api.txt" | head -20
        echo "testing nccl_exports/mscclrt_api ... failed"; st=1
    fi
fi

soname_of() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
soname=$(soname_of "$so")
if [ "$soname" = libmscclrt_nccl.so.2 ]; then echo "testing nccl_exports/soname ... passed"
else echo "nccl_exports: soname of $so is '$soname', not libmscclrt_nccl.so.2"
     echo "testing nccl_exports/soname ... failed"; st=1; fi
standin=$BUILD/lib/nccl/libnccl.so.2
soname=$(soname_of "$standin")
nm -D --defined-only "$standin" | awk '{print $3}' | sort -u >"$out/standin.txt"
if [ "$soname" = libnccl.so.2 ] && [ ! -L "$standin" ] && cmp -s "$out/exported.txt" "$out/standin.txt"; then
    echo "testing nccl_exports/standin ... passed"
else echo "nccl_exports: $standin: soname '$soname' (want libnccl.so.2), or a link, or other exports"
     echo "testing nccl_exports/standin ... failed"; st=1; fi

# a program linked with -lmscclrt_nccl asks for the drop-in by its own name, and the loader
# (RUNPATH) gives it the drop-in
printf '%s\n' '#include <nccl.h>' \
    'int main(void) { int v = 0; return ncclGetVersion(&v) != ncclSuccess; }' >"$out/link_app.c"
if ${CC:-cc} -std=c11 -I"$BUILD/include" "$out/link_app.c" -L"$BUILD/lib" \
        -Wl,-rpath,"$PWD/$BUILD/lib" -lmscclrt_nccl -o "$out/link_app" 2>"$out/link_app.log"; then
    needed=$(readelf -d "$out/link_app" | sed -n 's/.*(NEEDED).*\[\(.*nccl.*\)\]/\1/p')
    resolved=$(env -u LD_LIBRARY_PATH ldd "$out/link_app" | awk '$1 == "libmscclrt_nccl.so.2" {print $3}')
    if [ "$needed" = libmscclrt_nccl.so.2 ] &&
       [ "$(readlink -f "$resolved")" = "$(readlink -f "$BUILD/lib/libmscclrt_nccl.so.2")" ] &&
       "$out/link_app"; then
        echo "testing nccl_exports/link_dropin ... passed"
    else
        echo "nccl_exports: a program linked with -lmscclrt_nccl needs '$needed' (resolved to" \
             "'$resolved'), not libmscclrt_nccl.so.2 from $BUILD/lib"
        echo "testing nccl_exports/link_dropin ... failed"; st=1
    fi
else
    cat "$out/link_app.log"
    echo "testing nccl_exports/link_dropin ... failed"; st=1
fi
exit $st

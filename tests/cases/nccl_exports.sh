#!/bin/sh
# nccl_exports.sh - libmscclrt_nccl.so exports what programs built against NCCL 2.28.9 bind to
# (the lists in ../shared/nccl-abi, the shared checkout beside this repository): every
# function of nccl.h and its pnccl twin, every symbol PyTorch 2.11 imports, every nccl* symbol
# libnccl.so.2 2.28.9 exports; each twin has its function's address; besides nccl* / pnccl*
# exactly libmscclrt.so's public mscclrt_* API is exported (python/mscclrt uses the preloaded
# drop-in's registry through it); the drop-in's soname is libmscclrt_nccl.so.2 and a program linked
# with -lmscclrt_nccl records that name (issue 22 item 12: it recorded libnccl.so.2, and the
# loader gave it NVIDIA's NCCL), while the stand-in lib/nccl/libnccl.so.2, with the same exports,
# has soname libnccl.so.2. Skips while the entry points are missing.
cd "$(dirname "$0")/../.." || exit 2
BUILD=${BUILD:-build}
so=$BUILD/lib/libmscclrt_nccl.so
lists=${NCCL_ABI_LISTS:-../shared/nccl-abi}
out=$BUILD/tests/nccl_exports
st=0

if [ ! -f "$so" ]; then
    echo "libmscclrt_nccl.so not built: entry points missing (runtime/nccl/nccl_api*.c)"
    exit 77
fi
for f in nccl-2.28.9-functions.txt torch-2.11-nccl-imports.txt libnccl-2.28.9-exports.txt; do
    [ -f "$lists/$f" ] || { echo "nccl_exports: $lists/$f is missing"; exit 1; }
done
mkdir -p "$out" || exit 2
nm -D --defined-only "$so" >"$out/nm.txt" || { echo "nccl_exports: nm failed on $so"; exit 1; }
awk '{print $3}' "$out/nm.txt" | sort -u >"$out/exported.txt"

check() { # name file-of-wanted-symbols
    missing=$(sort -u "$2" | comm -23 - "$out/exported.txt")
    if [ -z "$missing" ]; then
        echo "testing nccl_exports/$1 ... passed"
    else
        echo "nccl_exports/$1: not exported:" $missing
        echo "testing nccl_exports/$1 ... failed"
        st=1
    fi
}

check functions "$lists/nccl-2.28.9-functions.txt"
sed 's/^/p/' "$lists/nccl-2.28.9-functions.txt" >"$out/twins.txt"
check pnccl_twins "$out/twins.txt"
check torch_imports "$lists/torch-2.11-nccl-imports.txt"
check libnccl_exports "$lists/libnccl-2.28.9-exports.txt"

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

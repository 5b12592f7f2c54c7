#!/bin/sh
# install.sh - `make install` into a temporary DESTDIR, then builds examples/run_plan.c against the
# installed headers and shared library through the installed pkg-config file and runs it on a
# plan compiled by the installed mscclc: the install tree is complete and usable.
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=/opt/mscclrt-test
st=0
r() { if [ "$2" = 0 ]; then echo "testing install/$1 ... passed"; else echo "testing install/$1 ... failed"; st=1; fi; }
make --no-print-directory BUILD="$BUILD" install PREFIX=$prefix DESTDIR="$tmp" >"$tmp/log" 2>&1
r make-install $?
root=$tmp$prefix
for f in bin/mscclc bin/mscclrt-run bin/mscclrt-perf lib/libmscclrt.so.0 lib/libmscclrt.so \
         lib/libmscclc.a include/mscclrt.h include/mscclc/mscclc.h include/mscclc/plan.h \
         include/mscclc/ops.def lib/pkgconfig/mscclrt.pc share/man/man1/mscclc.1 \
         share/man/man3/libmscclrt.3 share/man/man3/libmscclc.3 share/man/man5/coll.5 \
         share/mscclc/stdlib/allreduce/allpair_packet.coll; do
    [ -e "$root/$f" ] || { echo "missing $f"; st=1; }
done
r files $st
# the NCCL drop-in, once it is built (its entry points exist): files, and a program linked with
# -lnccl against the installed header and library
if [ -f "$BUILD/lib/libmscclrt_nccl.so" ]; then
    nst=0
    for f in lib/libmscclrt_nccl.so lib/libmscclrt_nccl.so.2 lib/nccl/libnccl.so.2 lib/nccl/libnccl.so \
             include/mscclrt_nccl/nccl.h include/mscclrt_nccl/nccl_funcs.def \
             share/man/man7/libmscclrt_nccl.7; do
        [ -e "$root/$f" ] || { echo "missing $f"; nst=1; }
    done
    printf '%s\n' '#include <nccl.h>' \
        'int main(void) { int v = 0; return ncclGetVersion(&v) != ncclSuccess; }' >"$tmp/nccl_app.c"
    ${CC:-cc} -std=c11 -Wall -Wextra -Werror -I"$root/include/mscclrt_nccl" "$tmp/nccl_app.c" \
        -L"$root/lib/nccl" -lnccl -o "$tmp/nccl_app" || nst=1
    r nccl-drop-in $nst
fi
command -v pkg-config >/dev/null 2>&1 || { echo "testing install/pkg-config ... skipped (needs pkg-config)"; exit $st; }
flags=$(PKG_CONFIG_SYSROOT_DIR="$tmp" PKG_CONFIG_LIBDIR="$root/lib/pkgconfig" pkg-config --cflags --libs mscclrt)
${CC:-cc} -std=c11 -Wall -Wextra -Werror examples/run_plan.c $flags -o "$tmp/run_plan"
r build-example $?
"$root/bin/mscclc" "$root/share/mscclc/stdlib/allreduce/allpair_packet.coll" -D N=4 -o "$tmp/ar4.json"
r installed-mscclc $?
LD_LIBRARY_PATH="$root/lib" "$tmp/run_plan" "$tmp/ar4.json"
r run-example $?
exit $st

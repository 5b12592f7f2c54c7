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
command -v pkg-config >/dev/null 2>&1 || { echo "testing install/pkg-config ... skipped"; exit $st; }
flags=$(PKG_CONFIG_SYSROOT_DIR="$tmp" PKG_CONFIG_LIBDIR="$root/lib/pkgconfig" pkg-config --cflags --libs mscclrt)
${CC:-cc} -std=c11 -Wall -Wextra -Werror examples/run_plan.c $flags -o "$tmp/run_plan"
r build-example $?
"$root/bin/mscclc" "$root/share/mscclc/stdlib/allreduce/allpair_packet.coll" -D N=4 -o "$tmp/ar4.json"
r installed-mscclc $?
LD_LIBRARY_PATH="$root/lib" "$tmp/run_plan" "$tmp/ar4.json"
r run-example $?
exit $st

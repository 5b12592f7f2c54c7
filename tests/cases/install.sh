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
for f in bin/mscclc bin/mscclrt-run bin/mscclrt-perf bin/mscclrt-tune lib/libmscclrt.so.0 lib/libmscclrt.so \
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
# mscclrt.pc carries an rpath: in an install without DESTDIR the example runs as built, with no
# LD_LIBRARY_PATH; and the installed mscclrt-tune finds its package and the libraries
p2=$tmp/p2
make --no-print-directory BUILD="$BUILD" install PREFIX="$p2" >"$tmp/log2" 2>&1 || cat "$tmp/log2"
flags=$(PKG_CONFIG_LIBDIR="$p2/lib/pkgconfig" pkg-config --cflags --libs mscclrt)
${CC:-cc} -std=c11 -Wall -Wextra -Werror examples/run_plan.c $flags -o "$tmp/run_plan2" &&
    env -u LD_LIBRARY_PATH "$tmp/run_plan2" "$tmp/ar4.json"
r run-example-rpath $?
env -u PYTHONPATH -u MSCCLRT_LIB_DIR "$p2/bin/mscclrt-tune" --help 2>&1 | grep -q -- "--min-bytes"
r installed-mscclrt-tune $?
(cd "$tmp" && env -u PYTHONPATH -u MSCCLRT_LIB_DIR MSCCLRT_CACHE_DIR="$tmp/cache" python3 -c "
import sys; sys.path.insert(0, '$p2/lib/mscclrt/python')
import os; os.environ['MSCCLRT_LIB_DIR'] = '$p2/lib'
import mscclrt
assert str(mscclrt.stdlib_dir()).startswith('$p2/share/mscclc/stdlib'), mscclrt.stdlib_dir()
mscclrt.check_cpu(mscclrt.compile(mscclrt.stdlib_program('allreduce/allpair_packet'), {'N': 2}), size=256)
")
r installed-python-package $?
exit $st

#!/bin/sh
# nccl_abi.sh - our NCCL ABI header (runtime/nccl/nccl_abi.h, installed as nccl.h) against NVIDIA's
# nccl.h and nccl_device.h 2.28.9, from the nvidia-nccl-cu13 wheel (tests/tools/fetch_nccl.sh,
# downloaded once into $BUILD/third_party): every enum value, constant, initializer and struct
# layout (tests/nccl_abi/facts.def), every prototype of nccl_funcs.def (protos.cc), and that our
# header compiles as C11 and as C++ beside cuda_runtime.h and NVIDIA's nccl_device.h; and that
# nccl_forward loads the real libnccl.so.2 and finds every function in it. Fails,
# saying why, when the wheel cannot be downloaded: CI must reach PyPI.
cd "$(dirname "$0")/../.." || exit 2
BUILD=${BUILD:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CC=${CC:-cc}
CXX=${CXX:-c++}
nccl=$BUILD/third_party/nccl-2.28.9
out=$BUILD/tests/nccl_abi
st=0

result() { # name status
    if [ "$2" = 0 ]; then echo "testing nccl_abi/$1 ... passed"; return; fi
    echo "testing nccl_abi/$1 ... failed"
    st=1
}

sh tests/tools/fetch_nccl.sh "$nccl" || { echo "testing nccl_abi/fetch ... failed"; exit 1; }
if [ ! -f "$CUDA_HOME/include/cuda_runtime.h" ]; then
    echo "nccl_abi: no $CUDA_HOME/include/cuda_runtime.h; NVIDIA's nccl.h needs it (CUDA_HOME)"
    echo "testing nccl_abi/cuda_headers ... failed"
    exit 1
fi
mkdir -p "$out/home/include" || exit 2
# an include directory as a program built against the drop-in sees it: our nccl.h, NVIDIA's
# device headers (nccl-tests includes nccl_device.h when NCCL_VERSION_CODE >= 2.28)
cp runtime/nccl/nccl_abi.h "$out/home/include/nccl.h"
cp runtime/nccl/nccl_funcs.def "$out/home/include/"
rm -rf "$out/home/include/nccl_device" "$out/home/include/nccl_device.h"
cp -r "$nccl/include/nccl_device" "$nccl/include/nccl_device.h" "$out/home/include/"

real_inc="-I$nccl/include -I$CUDA_HOME/include"
ours_inc="-Iruntime -Iruntime/nccl"

# layouts and values: ours.c (our header, C11) against real.cc (NVIDIA's, C++17)
if $CC -std=c11 -Wall -Wextra -Werror $ours_inc -Itests/nccl_abi -c tests/nccl_abi/ours.c \
        -o "$out/ours.o" 2>"$out/ours.log" &&
   $CXX -std=c++17 -Wall -Wno-deprecated-declarations -Werror $real_inc -Itests/nccl_abi \
        -c tests/nccl_abi/real.cc -o "$out/real.o" 2>"$out/real.log" &&
   $CC -std=c11 -Wall -Wextra -Werror -c tests/nccl_abi/main.c -o "$out/main.o" 2>"$out/main.log" &&
   $CXX -o "$out/abi_facts" "$out/main.o" "$out/ours.o" "$out/real.o" 2>"$out/link.log"; then
    "$out/abi_facts" || st=1
else
    cat "$out"/ours.log "$out"/real.log "$out"/main.log "$out"/link.log 2>/dev/null | head -40
    result facts 1
fi

# prototypes: each row of nccl_funcs.def initialises a pointer with NVIDIA's function
$CXX -std=c++17 -fsyntax-only -Wall -Wno-deprecated-declarations -Werror $real_inc -Iruntime/nccl \
    tests/nccl_abi/protos.cc 2>"$out/protos.log"
r=$?; [ $r = 0 ] || head -40 "$out/protos.log"; result prototypes $r

# our header alone: C11 (pedantic), and C++ with and without the device types
printf '%s\n' '#include <nccl.h>' \
    'int main(void) { ncclConfig_t c = NCCL_CONFIG_INITIALIZER; return c.blocking & 0; }' \
    >"$out/alone.c"
inc="-I$out/home/include"
$CC -std=c11 -Wall -Wextra -Wpedantic -Werror $inc -c "$out/alone.c" -o "$out/alone.o" \
    2>"$out/alone.log" &&
$CXX -std=c++11 -Wall -Wextra -Werror -x c++ $inc -c "$out/alone.c" -o "$out/alone.o" \
    2>>"$out/alone.log" &&
$CC -std=c11 -Wall -Wextra -Werror -DMSCCLRT_NCCL_DEVICE_TYPES $inc -c "$out/alone.c" \
    -o "$out/alone.o" 2>>"$out/alone.log"
r=$?; [ $r = 0 ] || head -40 "$out/alone.log"; result header_alone $r

# beside cuda_runtime.h (either order) and NVIDIA's nccl_device.h, as nccl-tests includes them
$CXX -std=c++17 -fsyntax-only -Wall -Werror -I"$out/home/include" -I"$CUDA_HOME/include" \
    tests/nccl_abi/headers.cc 2>"$out/headers.log" &&
$CXX -std=c++17 -fsyntax-only -Wall -Werror -DHEADERS_NCCL_FIRST -I"$out/home/include" \
    -I"$CUDA_HOME/include" tests/nccl_abi/headers.cc 2>>"$out/headers.log"
r=$?; [ $r = 0 ] || head -40 "$out/headers.log"; result header_with_cuda $r

# nccl_forward loads NVIDIA's library and finds every row of nccl_funcs.def in it
if [ -x "$out/load_real" ]; then
    "$out/load_real" "$nccl/lib/libnccl.so.2" >"$out/load_real.log" 2>&1
    r=$?; cat "$out/load_real.log"; result load_real_nccl $r
else
    echo "nccl_abi: $out/load_real is not built (make test builds it)"
    echo "testing nccl_abi/load_real_nccl ... skipped (needs $out/load_real: make test builds it)"
fi

exit $st

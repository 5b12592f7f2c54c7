#!/bin/sh
# fuzz_net.sh - fuzzes the socket transport's receiver checks (tests/fuzz/fuzz_net.c driving
# runtime/net/net_wire.c: every header a peer could send, against a table of registered regions
# backed by heap buffers, accepted ones applied) from the seed corpus tests/fuzz/corpus_net:
# with libFuzzer when clang has it, and always with the standalone mutation driver, both under
# ASan + UBSan (tests/fuzz/fuzz_lib.sh). Briefly in `make test` (FUZZ_SECONDS, default 5, and at
# most FUZZ_NET_RUNS mutants, default 2000000, for the standalone driver); `make test-sanitize`
# sets FUZZ_NET_SECONDS=60. Crashing inputs stay in $BUILD/fuzz/ for replay:
#   $BUILD/fuzz/fuzz_net_sa -t 0 $BUILD/fuzz/crash-fuzz_net-*
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
OUT=$BUILD/fuzz
mkdir -p "$OUT" || exit 2
SECS=${FUZZ_NET_SECONDS:-${FUZZ_SECONDS:-5}}
RUNS=${FUZZ_NET_RUNS:-2000000}
SRC="tests/fuzz/fuzz_net.c runtime/net/net_wire.c"
FLAGS="-g -O1 -std=c11 -D_GNU_SOURCE -Iruntime/include -Iruntime -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
LIBS=
. tests/fuzz/fuzz_lib.sh
fuzz_libfuzzer fuzz_net "$SECS" 2048 tests/fuzz/corpus_net
fuzz_standalone fuzz_net "$SECS" -r "$RUNS" tests/fuzz/corpus_net
exit $fuzz_status

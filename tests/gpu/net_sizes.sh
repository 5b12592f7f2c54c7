#!/bin/sh
# net_sizes.sh - a valid call across nodes never fails (issue 21): every nccl-tests collective
# through the drop-in on two host-id "nodes" (loopback TCP, tests/gpu/net_bench.sh with
# NB_OURS_ONLY=1), with 1 and with 2 ranks per node, at sizes that are multiples of nothing
# (uint8, 1 byte up by powers of 7 to 1.8 GiB) and at 4 GiB; the reducing collectives also in
# float. Every result is checked (-c 1) and nothing may be handed to the real NCCL ("fwd"): our
# selection must find an algorithm of ours for every size. Correctness only (net_bench.sh
# compares speed). Nodes go on GPU (node mod the GPU count).
#   BUILD=build sh tests/gpu/net_sizes.sh      (logs in $GPU_LOG_DIR/net_sizes)
# NS_G="1 2" ranks per node; NS_COLLS="all_reduce ..." (without _perf; default: all nine);
# NS_BIG=4G the single large size (empty: none); NS_ALLOW_FWD=1 accepts forwarded sizes.
# NS_PARTS="uint8 float big" the parts to run (default: all three; one GPU machine's 10-minute
# command does not hold all of them with 2 ranks a node, so a call can take the rest).
# Exits 77 without a GPU, mpirun, nccl-tests or the real NCCL (as net_bench.sh).
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
log=${GPU_LOG_DIR:-$BUILD/gpu-logs}/net_sizes
mkdir -p "$log"
colls=${NS_COLLS:-"all_reduce all_gather reduce_scatter alltoall broadcast reduce gather scatter sendrecv"}
big=${NS_BIG-4G}
status=0
skipped=0
# one LABEL G COLLS ARGS: a net_bench run of ours; fails on a failed run, a wrong value or a
# forwarded size
one() {
    olabel=$1 og=$2 ocolls=$3 oargs=$4
    odir=$log/$olabel
    mkdir -p "$odir"
    t0=$(date +%s)
    NB_OURS_ONLY=1 NB_G=$og NB_COLLS="$ocolls" NB_ARGS="$oargs" GPU_LOG_DIR="$odir" \
        sh tests/gpu/net_bench.sh >"$odir/out.txt" 2>&1
    orc=$?
    t=$(($(date +%s) - t0))
    if [ "$orc" = 77 ]; then
        skipped=1
        echo "testing net_sizes/$olabel ... skipped ($(sed -n 's/^skipped (\(.*\))$/\1/p' "$odir/out.txt" | tail -n 1))"
        return
    fi
    ofwd=$(grep -c ' fwd$' "$odir/out.txt")
    if [ "$orc" = 0 ] && { [ "$ofwd" = 0 ] || [ "${NS_ALLOW_FWD:-0}" = 1 ]; }; then
        echo "testing net_sizes/$olabel ... passed ($t s)"
    else
        echo "testing net_sizes/$olabel ... failed (rc $orc, $ofwd sizes forwarded to the real NCCL; $odir)"
        grep -E ' fwd$|rc [1-9]|failed' "$odir/out.txt" | head -8 | sed 's/^/    /'
        status=1
    fi
}
parts=" ${NS_PARTS:-uint8 float big} "
for p in $parts; do
    case $p in uint8 | float | big) ;; *) echo "net_sizes.sh: NS_PARTS: unknown part '$p' (uint8, float, big)" >&2; exit 2 ;; esac
done
for g in ${NS_G:-1 2}; do
    case $parts in *" uint8 "*) one "g$g.uint8" "$g" "$colls" "-b 1 -e 2G -f 7 -g 1 -d uint8 -c 1 -w 0 -n 1" ;; esac
    [ "$skipped" = 1 ] && exit 77
    red=$(for c in $colls; do case $c in all_reduce | reduce_scatter | reduce) echo "$c" ;; esac; done | tr '\n' ' ')
    case $parts in *" float "*) [ -n "$red" ] && one "g$g.float" "$g" "$red" "-b 4 -e 2G -f 7 -g 1 -d float -o sum -c 1 -w 0 -n 1" ;; esac
    [ "$skipped" = 1 ] && exit 77
    case $parts in *" big "*) [ -n "$big" ] && one "g$g.$big" "$g" "$colls" "-b $big -e $big -g 1 -d uint8 -c 1 -w 0 -n 1" ;; esac
done
[ "$skipped" = 1 ] && exit 77
exit $status

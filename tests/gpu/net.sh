#!/bin/sh
# net.sh - port channels across "nodes" on one GPU machine: one process per rank (--launch env
# with torchrun's variables), MSCCLRT_HOSTID splits the ranks into nodes and node k's ranks share
# the (k mod G)-th visible GPU (all share GPU 0 on a one-GPU machine), so every port channel
# between nodes runs through the socket transport
# (MSCCLRT_NET=socket over loopback) while the channels inside a node keep CUDA IPC. Every
# stdlib program tagged multi_node (stdlib/*/*.coll; hier.coll takes -D N= -D G=) runs at
# N=4 G=2 (2 nodes), N=4 G=1 (4 nodes) and N=8 G=2 (4 nodes) with --check; allreduce and
# allgather also with MSCCLRT_SOCKET_NSOCKS=1; then every data type (operators rotating) through
# one of the reducing programs each (rotating too), and 256 MB messages through the programs
# without a size cap. NET_FULL=1: every program with one socket, and every data type through
# every reducing program (about twice as long). Exits 77 without a GPU. Called by
# tests/gpu/run.sh (section net).
#   BUILD=build sh tests/gpu/net.sh      (logs in $GPU_LOG_DIR or $BUILD/gpu-logs/net)
# NET_PROGS="*/hier_scratch allreduce/*": only these programs (tests/gpu/stdlib_pick.sh patterns);
# NET_PARTS="shapes types big": the parts to run. NET_PORT: the first rendezvous port (default
# 31000 + pid mod 1000; each group takes the next).
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
log=${GPU_LOG_DIR:-$BUILD/gpu-logs}/net
mkdir -p "$log"
ngpu=$(sh tests/gpu/gpu_count.sh)
[ "$ngpu" -ge 1 ] || { echo "net.sh: no GPU"; exit 77; }
# the visible GPUs as CUDA_VISIBLE_DEVICES names them (a rank process sees only its node's)
if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then devs=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' ' ')
else devs=$(seq 0 $((ngpu - 1))); fi
node_gpu() { # NODE: the GPU of node NODE's ranks
    nk=$(($1 % ngpu))
    # shellcheck disable=SC2086 # devs is a list of words
    set -- $devs
    shift "$nk"
    echo "$1"
}
[ -x "$BUILD/bin/mscclc" ] && [ -x "$BUILD/bin/mscclrt-run" ] || { echo "net.sh: build first"; exit 2; }
export MSCCLRT_NET=socket MSCCLRT_SOCKET_IFNAME=lo MSCCLRT_NET_TIMEOUT_MS=60000
# NET_AUTO=1: leave the transport to the automatic choice (socket where no RDMA port is active)
[ -n "$NET_AUTO" ] && unset MSCCLRT_NET
export CUDA_DEVICE_MAX_CONNECTIONS=32   # many ranks on one GPU (see run.sh)
status=0
port=${NET_PORT:-$((31000 + $$ % 1000))}

# group NAME PLAN N G: N background ranks, node = rank / G on node_gpu's GPU; rank 0's log is
# the result
group() {
    gname=$1 gplan=$2 gn=$3 gg=$4
    port=$((port + 1))
    pids=""
    r=0
    while [ "$r" -lt "$gn" ]; do
        MSCCLRT_HOSTID="netnode$((r / gg))" RANK=$r WORLD_SIZE=$gn LOCAL_RANK=$((r % gg)) \
            MASTER_ADDR=127.0.0.1 MASTER_PORT=$port CUDA_VISIBLE_DEVICES="$(node_gpu $((r / gg)))" \
            timeout 240 "$BUILD/bin/mscclrt-run" "$gplan" --backend gpu --launch env --check \
            --iters 5 --size "${SIZE:-1M}" $RUN_ARGS >"$log/$gname.rank$r.log" 2>&1 &
        pids="$pids $!"
        r=$((r + 1))
    done
    gst=0
    for p in $pids; do wait "$p" || gst=1; done
    if [ "$gst" = 0 ]; then
        echo "testing gpu_net/$gname ... passed"
    else
        echo "testing gpu_net/$gname ... failed (logs $log/$gname.rank*.log)"
        for f in "$log/$gname".rank*.log; do tail -5 "$f" | sed "s|^|    $(basename "$f"): |"; done
        status=1
    fi
}

parts=${NET_PARTS:-shapes types big}   # a part list runs a subset (a device call has 10 minutes)
want_part() { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }
found=0
# shellcheck source=tests/gpu/stdlib_pick.sh
. tests/gpu/stdlib_pick.sh
for src in stdlib/*/*.coll; do
    grep -q '^[[:space:]]*tags.*multi_node' "$src" || continue
    stdlib_picked "$src" "$NET_PROGS" || continue
    found=1
    prog=$(basename "$(dirname "$src")")_$(basename "$src" .coll)
    # 1 MB, or the program's largest size where it stops below (sizes 0 .. 256K)
    pmax=$(sed -n 's/^ *sizes *[0-9KMG]* *\.\. *\([0-9]*[KMG]\?\).*/\1/p' "$src" | head -n 1)
    case $pmax in *K) psize=$pmax ;; *) psize=1M ;; esac
    for cfg in "4 2" "4 1" "8 2"; do
        set -- $cfg
        n=$1 g=$2
        plan=$log/$prog.N$n.G$g.json
        if ! "$BUILD/bin/mscclc" "$src" -D N="$n" -D G="$g" -o "$plan" >"$log/$prog.N$n.G$g.mscclc" 2>&1; then
            echo "testing gpu_net/$prog.N$n.G$g ... skipped (does not compile at N=$n G=$g)"
            continue
        fi
        want_part shapes && SIZE=$psize group "$prog.N$n.G$g" "$plan" "$n" "$g"
    done
    case $prog in allreduce_hier | allgather_hier) one_sock=1 ;; *) one_sock=${NET_FULL:-0} ;; esac
    [ "$one_sock" = 1 ] && [ -f "$log/$prog.N4.G2.json" ] && want_part shapes &&
        SIZE=$psize MSCCLRT_SOCKET_NSOCKS=1 group "$prog.N4.G2.nsocks1" "$log/$prog.N4.G2.json" 4 2
done
[ "$found" = 1 ] || { echo "net.sh: no stdlib program is tagged multi_node"; exit 1; }

# every data type and operator through the reducing programs (N=4 on 2 nodes), rotating the
# operator over the types; then 256 MB messages through the programs without a size cap
ops="sum prod max min avg"
i=0
for dt in ${NET_DTYPES:-float16 bfloat16 float32 float64 int8 uint8 int32 uint32 int64 uint64 fp8_e4m3 fp8_e5m2}; do
    want_part types || break
    set -- $ops
    shift $((i % 5))
    op=$1
    case $dt in int*|uint*) [ "$op" = avg ] && op=sum ;; esac
    i=$((i + 1))
    j=0
    for prog in allreduce_hier allreduce_hier_packet reducescatter_hier reduce_hier; do
        j=$((j + 1))
        # the programs take turns over the types unless NET_FULL=1
        [ "${NET_FULL:-0}" = 1 ] || [ $(((i + j) % 4)) = 0 ] || continue
        [ -f "$log/$prog.N4.G2.json" ] || continue
        sz=1M
        [ "$prog" = allreduce_hier_packet ] && sz=256K
        SIZE=$sz RUN_ARGS="--dtype $dt --op $op" group "$prog.N4.G2.$dt.$op" "$log/$prog.N4.G2.json" 4 2
    done
done
for prog in allreduce_hier allgather_hier reducescatter_hier alltoall_hier broadcast_hier; do
    want_part big || break
    [ -f "$log/$prog.N4.G2.json" ] || continue
    SIZE=256M group "$prog.N4.G2.256M" "$log/$prog.N4.G2.json" 4 2
done
exit $status

#!/bin/sh
# run_ib.sh - checks the ib (RDMA) transport of port channels on two hosts with InfiniBand or
# RoCE NICs and GPUs. Not part of `make test` (it needs the hardware); run it by hand.
#
# What it runs, on each of the two hosts:
#   1. `make -j all` when build/bin/mscclc or build/bin/mscclrt-run is missing;
#   2. for every stdlib program tagged multi_node (stdlib/*/*.coll), in name order:
#        build/bin/mscclc PROG.coll -D N=$((2*G)) -D G=G -o $LOG/PROG.json
#      then G background ranks of this host (G = GPUS, default: the GPUs nvidia-smi lists):
#        MSCCLRT_NET=ib MSCCLRT_DEBUG=INFO MSCCLRT_DEBUG_SUBSYS=INIT,XPORT
#        RANK=NODE*G+L WORLD_SIZE=2*G LOCAL_RANK=L MASTER_ADDR=... MASTER_PORT=PORT+index
#        build/bin/mscclrt-run $LOG/PROG.json --backend gpu --launch env --check --iters 5 \
#            --size ${SIZE:-16M}
#      (rank r uses GPU L; ranks 0..G-1 are host 0, G..2G-1 host 1; each program gets its own
#      port, the same on both hosts because both walk the same list);
#   3. a line "testing ib_net/PROG ... passed|failed" per program; logs in $LOG (default
#      build/ib-logs/HOSTNAME), one file per rank.
#
# Two manual commands (MASTER_ADDR: an address of host 0 that host 1 reaches):
#   host0$ NODE_RANK=0 MASTER_ADDR=host0 sh tests/net/run_ib.sh
#   host1$ NODE_RANK=1 MASTER_ADDR=host0 sh tests/net/run_ib.sh
# or one process per host through MPI (the node rank then comes from OMPI_COMM_WORLD_RANK,
# PMI_RANK or SLURM_NODEID):
#   mpirun -np 2 --hostfile hosts -x MASTER_ADDR=host0 sh tests/net/run_ib.sh
# Optional: GPUS (ranks per host), SIZE, PORT (default 29600), MSCCLRT_IB_HCA (e.g. mlx5_0:1),
# MSCCLRT_IB_GID_INDEX (RoCE), MSCCLRT_SOCKET_IFNAME (the bootstrap's interface), TIMEOUT
# (seconds per program, default 300).
#
# What passing looks like: every program prints "testing ib_net/PROG ... passed", the script
# exits 0, and each rank's log holds a line such as
#   ... rank 0: ib transport on mlx5_0 port 1 (InfiniBand, LID 12), 2 queue pair(s)
# (RoCE: "(RoCE, LID 0, GID index 3)"). Without it, the run did not use RDMA. A failure prints
# the last lines of each rank's log; errors of the transport name the peer rank and the
# operation (e.g. "put (RDMA WRITE) to rank 3 failed on mlx5_0 port 1: remote access error").
# Exit status: 0 all passed, 1 a program failed, 2 usage or build errors.
cd "$(dirname "$0")/../.." || exit 2
BUILD=${BUILD:-build}
node=${NODE_RANK:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_NODEID:-}}}}
case "$node" in
0|1) ;;
*) echo "run_ib.sh: set NODE_RANK=0 on one host and NODE_RANK=1 on the other (or run it" \
        "under mpirun -np 2)"; exit 2 ;;
esac
[ -n "${MASTER_ADDR:-}" ] || { echo "run_ib.sh: set MASTER_ADDR to an address of host 0"; exit 2; }
if [ ! -x "$BUILD/bin/mscclc" ] || [ ! -x "$BUILD/bin/mscclrt-run" ]; then
    make -j"$(nproc)" BUILD="$BUILD" all >/dev/null || { echo "run_ib.sh: build failed"; exit 2; }
fi
G=${GPUS:-$(nvidia-smi -L 2>/dev/null | wc -l)}
[ "$G" -ge 1 ] 2>/dev/null || { echo "run_ib.sh: no GPU found (set GPUS)"; exit 2; }
ls /sys/class/infiniband/ >/dev/null 2>&1 ||
    echo "run_ib.sh: warning: /sys/class/infiniband is empty: no RDMA device on $(hostname)"
N=$((2 * G))
log=${LOG:-$BUILD/ib-logs/$(hostname)}
mkdir -p "$log"
export MSCCLRT_NET=ib MSCCLRT_DEBUG=INFO MSCCLRT_DEBUG_SUBSYS=INIT,XPORT MASTER_ADDR
port=${PORT:-29600}
status=0
index=0
for src in stdlib/*/*.coll; do   # the glob is sorted: both hosts walk the same order
    grep -q '^[[:space:]]*tags.*multi_node' "$src" || continue
    index=$((index + 1))
    prog=$(basename "$(dirname "$src")")_$(basename "$src" .coll)
    plan=$log/$prog.json
    if ! "$BUILD/bin/mscclc" "$src" -D N="$N" -D G="$G" -o "$plan" >"$log/$prog.mscclc" 2>&1; then
        echo "testing ib_net/$prog ... skipped (does not compile at N=$N G=$G)"
        continue
    fi
    pids=""
    l=0
    while [ "$l" -lt "$G" ]; do
        r=$((node * G + l))
        RANK=$r WORLD_SIZE=$N LOCAL_RANK=$l MASTER_PORT=$((port + index)) \
            timeout "${TIMEOUT:-300}" "$BUILD/bin/mscclrt-run" "$plan" --backend gpu \
            --launch env --check --iters 5 --size "${SIZE:-16M}" >"$log/$prog.rank$r.log" 2>&1 &
        pids="$pids $!"
        l=$((l + 1))
    done
    st=0
    for p in $pids; do wait "$p" || st=1; done
    if [ "$st" = 0 ] && grep -q "ib transport on" "$log/$prog".rank*.log; then
        echo "testing ib_net/$prog ... passed"
    else
        [ "$st" = 0 ] && echo "run_ib.sh: $prog passed but no rank logged 'ib transport on'"
        echo "testing ib_net/$prog ... failed (logs $log/$prog.rank*.log)"
        for f in "$log/$prog".rank*.log; do tail -5 "$f" | sed "s|^|    $(basename "$f"): |"; done
        status=1
    fi
done
[ "$index" -gt 0 ] || { echo "run_ib.sh: no stdlib program tagged multi_node"; exit 2; }
exit $status

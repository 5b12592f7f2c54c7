#!/bin/sh
# mscclpp_executor.sh - the plans mscclc makes for MSCCL++ (`--target mscclpp`) run in MSCCL++'s
# own executor: every stdlib program compiled for 2 ranks, loaded by MSCCL++'s plan parser
# (mscclpp_exec --parse-only), then run at a couple of sizes with one process per GPU under
# `mpirun -np 2` and checked against the collective's expected result.
#   MSCCLPP_HOME=DIR BUILD=build sh tests/gpu/mscclpp_executor.sh
# MSCCLPP_HOME is a prebuilt MSCCL++ (a pinned release) with the driver: lib/libmscclpp.so.*
# and bin/mscclpp_exec, a small C++ harness built against it outside this repository (it runs
# one plan through mscclpp::Executor on N ranks, fills inputs with a known pattern, checks the
# output and prints `PLAN: passed|failed|skipped (why)`); its BUILD-INFO says how it was built.
# Without it (or without 2 GPUs) the script exits 77.
#   MSCCLPP_EXEC_SIZES="min 1M"   sizes (min: the plan's smallest; the first runs float32, the
#                                 others float16); sizes above a plan's maximum are skipped.
#                                 LL plans also run at 64K with LL8 packets (LL16 otherwise).
#   MSCCLPP_EXEC_PROGS="allreduce/* allgather/ring"   the stdlib programs (default: all)
#   MSCCLPP_EXEC_TIMEOUT=60       seconds for each run of 2 ranks (one takes a few)
# NVLink multicast stays off: NCCL_NVLS_ENABLE=0 and MSCCLPP_FORCE_DISABLE_NVLS=1 (MSCCL++ then
# neither creates multicast objects nor allocates for them), the NVLS guard preloaded in every
# rank, and the driver refuses plans with switch channels. Logs: $GPU_LOG_DIR/mscclpp.
home=${MSCCLPP_HOME:-}
case $home in "" | /*) ;; *) home=$PWD/$home ;; esac
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
if [ -z "$home" ] || [ ! -x "$home/bin/mscclpp_exec" ]; then
    echo "skipped (needs MSCCLPP_HOME: a prebuilt MSCCL++ with bin/mscclpp_exec)"
    exit 77
fi
[ -x "$BUILD/bin/mscclc" ] || { echo "skipped (needs $BUILD/bin/mscclc)"; exit 77; }
ngpu=$(sh tests/gpu/gpu_count.sh)
[ "$ngpu" -ge 2 ] || { echo "skipped (needs 2 GPUs, one per rank; $ngpu here)"; exit 77; }
log=${GPU_LOG_DIR:-$BUILD/gpu-logs}/mscclpp
plans=$log/plans
mkdir -p "$plans" || exit 2

export NCCL_NVLS_ENABLE=0 MSCCLPP_FORCE_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
    NVSHMEM_DISABLE_NVLS=1
unset MSCCLRT_ENABLE_NVLS
guard=$BUILD/lib/libnvls_guard.so
if [ ! -f "$guard" ]; then
    mkdir -p "$BUILD/lib"
    gcc -shared -fPIC tests/gpu/nvls_guard.c -o "$guard" || { echo "mscclpp_executor.sh: cannot build the NVLS guard" >&2; exit 1; }
fi
export LD_PRELOAD="$guard${LD_PRELOAD:+:$LD_PRELOAD}"
# the bundle carries libmscclpp, libcudart and libnuma; the driver's NVML comes with the driver
export LD_LIBRARY_PATH="$home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [ -e "$d/libnvidia-ml.so.1" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml.so.1 ' &&
        LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d" && break
done
exe=$home/bin/mscclpp_exec
if missing=$(ldd "$exe" 2>&1 | grep 'not found'); then
    echo "testing mscclpp_executor/driver ... failed (libraries not found: $(echo "$missing" | awk '{print $1}' | tr '\n' ' '))"
    exit 1
fi
[ -f "$home/BUILD-INFO" ] && sed -n '1,2p' "$home/BUILD-INFO"

if command -v mpirun >/dev/null 2>&1; then
    launcher=mpirun
else
    launcher="env"   # RANK/WORLD_SIZE/LOCAL_RANK for two background processes
    echo "mscclpp_executor.sh: no mpirun: the 2 ranks start as background processes"
fi
port=$((40000 + $$ % 10000))
tmo=${MSCCLPP_EXEC_TIMEOUT:-60}
# run2 LOGFILE ARGS...: mscclpp_exec ARGS on 2 ranks, one per GPU; rank 0's line in LOGFILE
run2() {
    rlog=$1
    shift
    port=$((port + 1))
    export MSCCLPP_EXEC_PORT=$port
    if [ "$launcher" = mpirun ]; then
        rx=""   # the variables the ranks need, those that are set (-x of an unset one warns)
        for rv in LD_PRELOAD LD_LIBRARY_PATH MSCCLPP_EXEC_PORT NCCL_NVLS_ENABLE \
            MSCCLPP_FORCE_DISABLE_NVLS MSCCLPP_DEBUG MSCCLPP_LOG_LEVEL; do
            eval "[ -n \"\${$rv+x}\" ]" && rx="$rx -x $rv"
        done
        # shellcheck disable=SC2086 # rx is a list of options
        timeout "$tmo" mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none $rx \
            "$exe" "$@" >"$rlog" 2>&1
        return $?
    fi
    rpids=""
    for rr in 0 1; do
        RANK=$rr WORLD_SIZE=2 LOCAL_RANK=$rr timeout "$tmo" "$exe" "$@" >"$rlog.rank$rr" 2>&1 &
        rpids="$rpids $!"
    done
    rst=0
    for rp in $rpids; do wait "$rp" || { rq=$?; [ $rst -eq 0 ] && rst=$rq; }; done
    cat "$rlog.rank0" "$rlog.rank1" >"$rlog"
    return $rst
}
# picked SRC: SRC (stdlib/x/y.coll) is in MSCCLPP_EXEC_PROGS, or that is unset
# shellcheck source=tests/gpu/stdlib_pick.sh
. tests/gpu/stdlib_pick.sh
picked() { stdlib_picked "$1" "$MSCCLPP_EXEC_PROGS"; }

npass=0 nfail=0 nskip=0
result() { # name size verdict-line
    echo "testing mscclpp_executor/$1 $2 ... $3"
    case $3 in passed*) npass=$((npass + 1)) ;; skipped*) nskip=$((nskip + 1)) ;; *) nfail=$((nfail + 1)) ;; esac
}
for src in stdlib/*/*.coll; do
    picked "$src" || continue
    name=$(echo "$src" | sed 's|stdlib/||; s|\.coll$||; s|/|_|')
    defs="-D N=2"
    case $name in *hier*) defs="$defs -D G=1" ;; esac   # two "nodes" of one GPU: port channels between them
    plan=$plans/$name.json
    # shellcheck disable=SC2086 # defs is several words
    if ! "$BUILD/bin/mscclc" "$src" $defs --target mscclpp -o "$plan" >"$log/mscclc_$name.log" 2>&1; then
        result "$name" - "skipped (does not compile for the MSCCL++ target: $(grep -m1 'error' "$log/mscclc_$name.log" | cut -c1-200))"
        continue
    fi
    if ! "$exe" --parse-only "$plan" min >"$log/parse_$name.log" 2>&1; then
        result "$name" load "failed (MSCCL++'s plan parser: $(tail -1 "$log/parse_$name.log" | sed "s|^$plan: ||" | cut -c1-300))"
        continue
    fi
    dt=float32
    runs=${MSCCLPP_EXEC_SIZES:-min 1M}
    grep -q '"protocol": *"LL"' "$plan" && runs="$runs 64K/LL8"
    for run in $runs; do
        size=${run%/*} pk=LL16
        case $run in */LL8) pk=LL8 ;; esac
        rlog=$log/${name}_$(echo "$run" | tr / _).log
        run2 "$rlog" "$plan" "$size" --dtype "$dt" --packet "$pk" --iters 3 --warmup 5
        rc=$?
        line=$(grep -m1 "^$plan: \(passed\|failed\|skipped\)" "$rlog" | sed "s|^$plan: ||")
        if [ -n "$line" ]; then
            result "$name" "$run" "$line"
            [ $rc -eq 0 ] || [ $rc -eq 77 ] || tail -5 "$rlog" | grep -v "^$plan: " | sed 's/^/    /'
        else
            case $rc in 124 | 137) why="timed out after $tmo s" ;; *) why="rc $rc" ;; esac
            result "$name" "$run" "failed ($why, no verdict; $rlog)"
            tail -8 "$rlog" | sed 's/^/    /'
        fi
        dt=float16
    done
done
echo "mscclpp_executor: $npass passed, $nfail failed, $nskip skipped (logs: $log)"
[ $nfail -eq 0 ]

#!/bin/sh
# net_bench.sh - issue 21's benchmark: two "nodes" on one GPU machine, TCP over loopback, NVIDIA's
# nccl-tests against the real NCCL's socket transport and against the drop-in in the same call.
# Each rank gets its own host id (NCCL_HOSTID / MSCCLRT_HOSTID = netbench<node>), so every
# byte between the nodes goes through the network transport: NCCL_NET=Socket
# NCCL_SOCKET_IFNAME=lo for NCCL, MSCCLRT_NET=socket MSCCLRT_SOCKET_IFNAME=lo for ours (the
# drop-in preloaded, the real NCCL behind it for what it forwards). all_reduce, all_gather and
# reduce_scatter, -b 1K -e 256M -f 4 -g 1 -d half -c 1 -w 3 -n 10; then a compact table per
# collective: size, NCCL's and our time in us (the better of out-of-place and in-place, as the
# issue's table), ours / NCCL, wrong values, and "fwd" where the drop-in handed the size to the
# real NCCL (MSCCLRT_DEBUG=INFO SHIM lines), so a forwarded size is not read as ours.
#   BUILD=build sh tests/gpu/net_bench.sh       (about 2-3 minutes on 2 GPUs)
# MSCCLRT_* variables of the caller reach our ranks. NB_G=2: 2 nodes of 2 ranks (4 ranks, node n
# on GPU n mod the GPU count): ours only, for correctness (NCCL refuses two ranks on one GPU).
# NB_OURS_ONLY=1: ours only at any NB_G, which also runs on one GPU (both nodes on it).
# NB_COLLS="all_reduce ..." the binaries (without _perf). NB_ARGS replaces the size/iteration
# flags. NB_REPEAT=N runs each collective N times, NCCL and ours alternately, and the table gives
# each row's median (runs across loopback TCP differ by up to 1.5x). NB_MPI_ARGS adds mpirun
# options (e.g. "--bind-to none": mpirun binds each of 2 ranks to one core by default).
# NB_DEBUG=TRACE adds our per-stage trace (MSCCLRT_DEBUG=TRACE, XPORT, PROXY and EXEC), written by
# each process to its own file ($name.ours.trace.PID, MSCCLRT_DEBUG_FILE: through mpirun's output
# forwarding the lines slowed 256 KiB calls 2-4 times), and tests/gpu/net_trace.awk's account of
# it (every piece and signal, the stages' medians) to $name.trace.txt, its medians to trace.txt
# and the output.
# nccl-tests comes from tests/gpu/nccl_tests.sh's build (NCCL_TESTS_SRC, MPI_HOME, CUDA_HOME);
# the real NCCL from MSCCLRT_NCCL_LIB_PATH, else $BUILD/third_party/nccl-2.28.9
# (tests/tools/fetch_nccl.sh), else PyTorch's nvidia-nccl wheel. Logs and tables:
# $GPU_LOG_DIR/net_bench.
# Exits 77 (skipped) without 2 GPUs (1 with NB_OURS_ONLY=1), mpirun, nccl-tests or the real NCCL.
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
log=${GPU_LOG_DIR:-$BUILD/gpu-logs}/net_bench
mkdir -p "$log"
G=${NB_G:-1}
# NCCL runs beside ours only with one rank per node (NCCL refuses two ranks on one GPU)
withnccl=1
[ "$G" = 1 ] && [ "${NB_OURS_ONLY:-0}" != 1 ] || withnccl=0
ngpu=$(sh tests/gpu/gpu_count.sh)
if [ "$ngpu" -lt 1 ] || { [ "$ngpu" -lt 2 ] && [ "$withnccl" = 1 ]; }; then
    echo "net_bench.sh: needs 2 GPUs (one per node; NB_OURS_ONLY=1 runs on one)"
    echo "skipped (needs 2 GPUs)"; exit 77
fi
command -v mpirun >/dev/null 2>&1 || { echo "skipped (needs mpirun)"; exit 77; }
real=${MSCCLRT_NCCL_LIB_PATH:-$PWD/$BUILD/third_party/nccl-2.28.9/lib/libnccl.so.2}
if [ ! -f "$real" ] && [ -z "$MSCCLRT_NCCL_LIB_PATH" ]; then   # else PyTorch's (nvidia-nccl wheel)
    # shellcheck source=tests/gpu/nccl_wheel.sh
    . tests/gpu/nccl_wheel.sh
    wheel=$(nccl_wheel_dir)
    [ -f "$wheel/libnccl.so.2" ] && real=$wheel/libnccl.so.2
fi
if [ ! -f "$real" ]; then
    echo "net_bench.sh: no real NCCL at $real (sh tests/tools/fetch_nccl.sh" \
         "$BUILD/third_party/nccl-2.28.9)"
    echo "skipped (needs the real NCCL 2.28.9)"; exit 77
fi
ours=$PWD/$BUILD/lib/nccl/libnccl.so.2
[ -f "$ours" ] || { echo "net_bench.sh: $ours missing: build first"; exit 2; }

# the binaries, built as nccl_tests.sh builds them (against our nccl.h; the ABI is NCCL's)
GPU_LOG_DIR=$log NT_BUILD_ONLY=1 sh tests/gpu/nccl_tests.sh || exit $?
bin=$PWD/$BUILD/nccl-tests-mpi

# the machine's layout beside the figures: which CPUs are local to which GPU decides where the
# progress threads run (MSCCLRT_PROGRESS_CPUS=numa) and how many of them share those CPUs
{ nvidia-smi topo -m; lscpu | grep -i -e '^CPU(s)' -e numa; } >"$log/topo.txt" 2>&1

export NCCL_NVLS_ENABLE=0
unset MSCCLRT_ENABLE_NVLS
guard=$PWD/$BUILD/lib/libnvls_guard.so
[ -f "$guard" ] || gcc -shared -fPIC tests/gpu/nvls_guard.c -o "$guard" || exit 1
export MSCCLRT_CACHE_DIR="${MSCCLRT_CACHE_DIR:-$PWD/$BUILD/kernel-cache}"
export NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo MSCCLRT_NET=socket MSCCLRT_SOCKET_IFNAME=lo
export MSCCLRT_NCCL_LIB_PATH="$real"
args=${NB_ARGS:-"-b 1K -e 256M -f 4 -g 1 -d half -c 1 -w 3 -n 10"}
# every other MSCCLRT_* variable of the caller reaches the ranks (e.g. MSCCLRT_SOCKET_NSOCKS=4)
xs=$(env | sed -n 's/^\(MSCCLRT_[A-Z_0-9]*\)=.*/-x \1/p' | grep -v -x -e '-x MSCCLRT_DEBUG' \
    -e '-x MSCCLRT_DEBUG_SUBSYS' -e '-x MSCCLRT_DEBUG_FILE' -e '-x MSCCLRT_CACHE_DIR' -e '-x MSCCLRT_NET' \
    -e '-x MSCCLRT_SOCKET_IFNAME' -e '-x MSCCLRT_NCCL_LIB_PATH' | tr '\n' ' ')
np=$((2 * G))

# run LIB NAME BINARY: one nccl-tests run, every rank on its node's GPU with its node's host id.
# LIB nccl: the real NCCL as libnccl.so.2; ours: the drop-in preloaded before it.
run() {
    lib=$1 name=$2 b=$3
    if [ "$lib" = nccl ]; then
        pre=$guard
        libpath=$(dirname "$real")
        dbg=WARN sub='' dfile=''
    else
        pre=$ours:$guard
        libpath=$PWD/$BUILD/lib/nccl
        dbg=${NB_DEBUG:-INFO} sub=SHIM
        dfile=
        [ "$dbg" = TRACE ] && sub=SHIM,XPORT,PROXY,EXEC dfile=$log/$name.$lib.trace.%p
    fi
    rm -f "$log/$name.$lib.trace."*
    t0=$(date +%s)
    # the rank's node and GPU come from its MPI rank: the host id splits the nodes
    # shellcheck disable=SC2016,SC2086 # $r/$n: the rank's shell; $args: split into flags
    LD_PRELOAD=$pre LD_LIBRARY_PATH="$libpath:$PWD/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    MSCCLRT_DEBUG=$dbg MSCCLRT_DEBUG_SUBSYS=$sub MSCCLRT_DEBUG_FILE=$dfile NB_G=$G NB_NGPU=$ngpu \
        timeout 150 mpirun --allow-run-as-root --oversubscribe -np "$np" $NB_MPI_ARGS \
        -x LD_PRELOAD -x LD_LIBRARY_PATH -x MSCCLRT_CACHE_DIR -x NCCL_NVLS_ENABLE -x NCCL_NET \
        -x NCCL_SOCKET_IFNAME -x MSCCLRT_NET -x MSCCLRT_SOCKET_IFNAME -x MSCCLRT_NCCL_LIB_PATH \
        -x MSCCLRT_DEBUG -x MSCCLRT_DEBUG_SUBSYS -x MSCCLRT_DEBUG_FILE -x NB_G -x NB_NGPU $xs \
        sh -c 'r=${OMPI_COMM_WORLD_RANK:-0}; n=$((r / NB_G));
               export NCCL_HOSTID=netbench$n MSCCLRT_HOSTID=netbench$n NCCL_TESTS_DEVICE=$((n % NB_NGPU));
               exec "$@"' sh "$bin/$b" $args >"$log/$name.$lib.log" 2>&1
    rc=$?
    echo "($(($(date +%s) - t0)) s, rc $rc)" >>"$log/$name.$lib.log"
    [ $rc -eq 0 ] || echo "net_bench.sh: $name with $lib: rc $rc ($log/$name.$lib.log)" >&2
    return $rc
}

# best_times LOG: "bytes best_us wrong" per size line of nccl-tests (tests/gpu/nt_rows.awk)
best_times() { awk -f tests/gpu/nt_rows.awk "$1" | awk '{ print $1, $2, $4 }'; }

# forwarded LOG...: the message sizes the drop-in handed to the real NCCL (its INFO line "...: no
# algorithm serves COLL of N bytes (...); forwarding to the real NCCL")
forwarded() {
    grep -h 'forwarding to the real NCCL' "$@" 2>/dev/null |
        grep -o 'serves [a-z]* of [0-9]* bytes' | awk '{ print $4 }' | sort -un
}

status=0
table=$log/table.txt
: >"$table"
reps=${NB_REPEAT:-1}
for c in ${NB_COLLS:-all_reduce all_gather reduce_scatter}; do
    [ -x "$bin/${c}_perf" ] || { echo "net_bench.sh: $bin/${c}_perf not built"; status=1; continue; }
    # NB_REPEAT runs, NCCL and ours alternately (logs $c.N.nccl.log ...), each row the median
    k=1 runs_ours='' runs_nccl=''
    while [ "$k" -le "$reps" ]; do
        name=$c$([ "$reps" -gt 1 ] && echo ".$k")
        if [ "$withnccl" = 1 ]; then
            run nccl "$name" "${c}_perf" || status=1
            best_times "$log/$name.nccl.log" >"$log/$name.nccl.t1"
            runs_nccl="$runs_nccl $log/$name.nccl.t1"
        fi
        run ours "$name" "${c}_perf" || status=1
        # with NB_DEBUG=TRACE: the transport's stages, piece by piece (tests/gpu/net_trace.awk)
        [ "${NB_DEBUG:-}" = TRACE ] &&
            awk -f tests/gpu/net_trace.awk "$log/$name.ours.log" "$log/$name.ours.trace."* >"$log/$name.trace.txt" &&
            tail -1 "$log/$name.trace.txt" | sed "s/^/$name: /" >>"$log/trace.txt"
        best_times "$log/$name.ours.log" >"$log/$name.ours.t1"
        runs_ours="$runs_ours $log/$name.ours.t1"
        forwarded "$log/$name.ours.log" "$log/$name.ours.trace."* >>"$log/$c.fwd.all"
        k=$((k + 1))
    done
    # shellcheck disable=SC2086 # the run files: split
    awk -f tests/gpu/median.awk $runs_ours >"$log/$c.ours.t"
    # shellcheck disable=SC2086
    if [ -n "$runs_nccl" ]; then awk -f tests/gpu/median.awk $runs_nccl >"$log/$c.nccl.t"; else : >"$log/$c.nccl.t"; fi
    sort -un "$log/$c.fwd.all" >"$log/$c.fwd"
    rm -f "$log/$c.fwd.all"
    {
        echo "## $c, $np ranks on 2 nodes (loopback TCP), us: best of out-of-place / in-place$([ "$reps" -gt 1 ] && echo ", median of $reps runs")"
        printf '%12s %10s %10s %7s %7s %s\n' bytes NCCL ours ours/NCCL '#wrong' note
        # nccl-tests' message size (column 1) is per rank for all_gather / reduce_scatter;
        # the forward lines name the whole message, so a size is marked when either matches
        awk -v np="$np" -v fwdf="$log/$c.fwd" -v nf="$log/$c.nccl.t" '
            BEGIN { while ((getline l < fwdf) > 0) fwd[l] = 1
                    while ((getline l < nf) > 0) { split(l, a, " "); nccl[a[1]] = a[2] } }
            { n = ($1 in nccl) ? nccl[$1] : "-"
              r = (n != "-" && n + 0 > 0) ? sprintf("%.2f", $2 / n) : "-"
              note = ($1 in fwd || ($1 * np) in fwd || ($1 / np) in fwd) ? "fwd" : ""
              printf "%12s %10s %10s %7s %7s %s\n", $1, n, $2, r, $3, note }' "$log/$c.ours.t"
        echo
    } >>"$table"
    awk '$3 != "0" && $3 != "-" { bad = 1 } END { exit bad }' "$log/$c.ours.t" || status=1
done
cat "$table"
[ -f "$log/trace.txt" ] && cat "$log/trace.txt"
grep -h 'NCCL version' "$log"/*.nccl.log 2>/dev/null | head -1
exit $status

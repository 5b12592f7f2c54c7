#!/bin/sh
# nt_sets.sh - NVIDIA's nccl-tests under MPI for several library sets side by side, interleaved:
# each binary runs NT_REPEAT times over every set in turn (so every set meets the machine in the
# same state, which drifts between calls and within one), and a table per binary gives, per size,
# each set's time of each repeat in microseconds (the better of out-of-place and in-place), then
# every #wrong. It measures; it asserts only that every run ended, was correct and ran the
# library it was meant to: before a set's first run, the binary's libnccl.so.2 is resolved under
# the set's library path (ldd) and must be the set's own file.
#   BUILD=build sh tests/gpu/nt_sets.sh
#   NT_SETS="nccl ours base=DIR ..."  a set is "nccl" (the real NCCL: the nvidia-nccl wheel's, or
#       NCCL_REAL_LIB_DIR), "ours" ($BUILD/lib), or NAME=DIR (an earlier build's lib/: DIR holds
#       nccl/libnccl.so.2 and libmscclrt.so.*); default "nccl ours"
#   NT_BINS="all_gather_perf ..."  NT_ARGS="-b 1K -e 1M -f 4 -d half -c 1 -w 5 -n 20 -G 1"
#   NT_NCCL_ARGS="-R 2"  more flags for the nccl set only (its symmetric windows, say)
#   NT_REPEAT (default 2)  NT_NPROCS (default the GPU count)  NT_TIMEOUT (seconds per run, 120)
#   NT_DRY=1: check the sets and print the runs without running them (no GPU needed)
# Multicast stays off (NCCL_NVLS_ENABLE=0, the NVLS guard preloaded); every MSCCLRT_* variable of
# the caller reaches the ranks of every set. Logs and tables: $GPU_LOG_DIR/nt_sets.
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
log=${GPU_LOG_DIR:-$BUILD/gpu-logs}/nt_sets
mkdir -p "$log" || exit 2
sets=${NT_SETS:-"nccl ours"}
reps=${NT_REPEAT:-2}
args=${NT_ARGS:-"-b 1K -e 1M -f 4 -d half -c 1 -w 5 -n 20 -G 1"}
bins=${NT_BINS:-"all_reduce_perf all_gather_perf reduce_scatter_perf alltoall_perf sendrecv_perf broadcast_perf reduce_perf"}
case $reps in '' | *[!0-9]*) echo "nt_sets.sh: NT_REPEAT='$reps' is not a count" >&2; exit 2 ;; esac
[ "$reps" -ge 1 ] || { echo "nt_sets.sh: NT_REPEAT must be at least 1" >&2; exit 2; }

# libdir SET: the directory whose libnccl.so.2 the set's runs load (printed), or a reason (status 1)
libdir() {
    case $1 in
        nccl)
            if [ -n "$NCCL_REAL_LIB_DIR" ]; then d=$NCCL_REAL_LIB_DIR
            else
                # shellcheck source=tests/gpu/nccl_wheel.sh
                . tests/gpu/nccl_wheel.sh
                d=$(nccl_wheel_dir)
            fi ;;
        ours) d=$BUILD/lib/nccl ;;
        *=*) d=${1#*=}/nccl ;;
        *) echo "'$1' is not nccl, ours or NAME=DIR"; return 1 ;;
    esac
    case $d in /*) ;; ?*) d=$PWD/$d ;; esac
    [ -f "$d/libnccl.so.2" ] || { echo "set '$1': no libnccl.so.2 in '$d'"; return 1; }
    echo "$d"
}
# the set's name in tables and logs
setname() { case $1 in *=*) echo "${1%%=*}" ;; *) echo "$1" ;; esac; }
names=""
for s in $sets; do
    why=$(libdir "$s") || { echo "nt_sets.sh: $why" >&2; exit 2; }
    n=$(setname "$s")
    case " $names " in *" $n "*) echo "nt_sets.sh: set name '$n' twice" >&2; exit 2 ;; esac
    case $n in '' | *[!A-Za-z0-9_.-]*) echo "nt_sets.sh: set name '$n': letters, digits, . _ - only" >&2; exit 2 ;; esac
    names="$names $n"
done

if [ "${NT_DRY:-0}" = 1 ]; then
    for b in $bins; do
        r=1
        while [ "$r" -le "$reps" ]; do
            for s in $sets; do
                extra=""; [ "$s" = nccl ] && extra=${NT_NCCL_ARGS:+ $NT_NCCL_ARGS}
                echo "run ${b%_perf} $(setname "$s") $r: $(libdir "$s") $args$extra"
            done
            r=$((r + 1))
        done
    done
    exit 0
fi

# src, mpi, cuda: read by nccl_tests_build.sh, which sets out (the binaries' directory)
# shellcheck disable=SC2034
src=${NCCL_TESTS_SRC:-../shared/third_party/nccl-tests}
# shellcheck disable=SC2034
mpi=${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}
# shellcheck disable=SC2034
cuda=${CUDA_HOME:-/usr/local/cuda}
command -v mpirun >/dev/null 2>&1 || { echo "skipped (needs mpirun)"; exit 77; }
# shellcheck source=tests/gpu/nccl_tests_build.sh
. tests/gpu/nccl_tests_build.sh
# shellcheck source=tests/gpu/nt_env.sh
. tests/gpu/nt_env.sh
status=0
for b in $bins; do
    # shellcheck disable=SC2154 # out: nccl_tests_build.sh's
    [ -x "$out/$b" ] || { echo "nt_sets: $b not built"; status=1; continue; }
    t=${b%_perf}
    r=1
    while [ "$r" -le "$reps" ]; do
        for s in $sets; do
            d=$(libdir "$s")
            n=$(setname "$s")
            # the set's own libnccl.so.2 and, for ours, its libmscclrt beside it
            lp="$d:${d%/nccl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
            got=$(LD_LIBRARY_PATH="$lp" ldd "$out/$b" | sed -n 's/.*libnccl\.so\.2 => \([^ ]*\).*/\1/p')
            if [ "$(readlink -f "$got")" != "$(readlink -f "$d/libnccl.so.2")" ]; then
                echo "nt_sets: $t $n: the binary loads '$got', not $d/libnccl.so.2"; status=1; continue
            fi
            extra=""; [ "$s" = nccl ] && extra=$NT_NCCL_ARGS
            # shellcheck disable=SC2086 # args, extra and xs are words on purpose
            LD_LIBRARY_PATH="$lp" timeout "${NT_TIMEOUT:-120}" mpirun --allow-run-as-root \
                --oversubscribe -np "$np" -x LD_PRELOAD -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE $xs \
                "$out/$b" -g 1 $args $extra >"$log/${t}_${n}_$r.log" 2>&1
            rc=$?
            [ "$rc" -eq 0 ] && ! grep -q 'Out of bounds values : 0 OK' "$log/${t}_${n}_$r.log" && rc=1
            [ "$rc" -eq 0 ] || { echo "nt_sets: $t $n run $r failed (rc $rc; $log/${t}_${n}_$r.log)"; status=1; }
            awk -f tests/gpu/nt_rows.awk "$log/${t}_${n}_$r.log" >"$log/${t}_${n}_$r.rows"
        done
        r=$((r + 1))
    done
    # one column per (set, repeat), in set order; then the #wrong of each
    files=""; cols=""
    for n in $names; do
        r=1
        while [ "$r" -le "$reps" ]; do
            files="$files $log/${t}_${n}_$r.rows"; cols="$cols $n.$r"; r=$((r + 1))
        done
    done
    echo "## $t (np $np, $args${NT_NCCL_ARGS:+; nccl: $NT_NCCL_ARGS}): size, us per set.repeat:$cols, #wrong"
    # shellcheck disable=SC2086 # files are words
    awk -f tests/gpu/nt_join.awk $files | tee "$log/$t.table" || status=1
done
exit $status

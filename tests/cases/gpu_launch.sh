#!/bin/sh
# gpu_launch.sh - mscclrt-run --backend gpu --launch single|procs|env where no GPU is needed: the
# option errors (exact messages), --launch env refusing a WORLD_SIZE that is not the plan's rank
# count, the default mode under a launcher's variables, and, on a host without a CUDA driver,
# --launch procs failing cleanly with the library's error: non-zero status, quickly, every
# forked rank reaped (checked as a child subreaper with python3, when it is there). The plan is
# tests/compat/reduce.coll (2 ranks, named 'reduce') compiled here by mscclc.
BUILD=${BUILD:-build}
RUN=$BUILD/bin/mscclrt-run
MSCCLC=$BUILD/bin/mscclc
[ -x "$RUN" ] || { echo "gpu_launch: $RUN not built"; exit 1; }
[ -x "$MSCCLC" ] || { echo "gpu_launch: $MSCCLC not built"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plan=$tmp/reduce.json
"$MSCCLC" tests/compat/reduce.coll -o "$plan" || { echo "gpu_launch: mscclc tests/compat/reduce.coll failed"; exit 1; }
unset RANK WORLD_SIZE LOCAL_RANK OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE SLURM_PROCID SLURM_NTASKS

# t NAME WANT_STATUS WANT_FIRST_LINE [VAR=VALUE...] args...: exit status and the exact first line
# of stderr of mscclrt-run args, run with the variables given
t() {
    name=$1 want=$2 text=$3
    shift 3
    vars=""
    while [ $# -gt 0 ]; do
        case $1 in *=*) vars="$vars $1"; shift ;; *) break ;; esac
    done
    # shellcheck disable=SC2086
    env $vars "$RUN" "$@" >"$tmp/out" 2>"$tmp/err"
    st=$?
    first=$(head -1 "$tmp/err")
    if [ "$st" = "$want" ] && [ "$first" = "$text" ]; then
        echo "testing gpu_launch/$name ... passed"
    else
        echo "gpu_launch/$name: want status $want and '$text', got status $st:"
        cat "$tmp/out" "$tmp/err"
        echo "testing gpu_launch/$name ... failed"
    fi
}

t bad_launch 2 "mscclrt-run: --launch 'mpi': expected single, procs or env" \
    "$plan" --backend gpu --launch mpi
t launch_needs_gpu 2 "mscclrt-run: --launch: only with --backend gpu" "$plan" --launch procs
t timeout_needs_gpu 2 "mscclrt-run: --timeout: only with --backend gpu" "$plan" --timeout 30
t bad_timeout 2 "mscclrt-run: --timeout '0': expected seconds in [1, 86400]" \
    "$plan" --backend gpu --timeout 0
t timeout_not_procs 2 "mscclrt-run: --timeout: only with --launch procs (this run is --launch single)" \
    "$plan" --backend gpu --launch single --timeout 30
t launch_no_value 2 "mscclrt-run: option --launch needs a value" "$plan" --backend gpu --launch
# env: the group's size must be the plan's, checked before anything joins or opens a GPU
t env_size_mismatch 1 "mscclrt-run: --launch env: WORLD_SIZE=3, but plan 'reduce' is for 2 ranks" \
    WORLD_SIZE=3 RANK=0 "$plan" --backend gpu --launch env
t env_size_garbage 1 "mscclrt-run: --launch env: WORLD_SIZE=2x, but plan 'reduce' is for 2 ranks" \
    WORLD_SIZE=2x RANK=0 "$plan" --backend gpu --launch env
# under torchrun's or Open MPI's variables env is the default (and --timeout belongs to procs)
t env_default_torchrun 1 "mscclrt-run: --launch env: WORLD_SIZE=4, but plan 'reduce' is for 2 ranks" \
    WORLD_SIZE=4 RANK=1 "$plan" --backend gpu
t env_default_ompi 1 \
    "mscclrt-run: --launch env: OMPI_COMM_WORLD_SIZE=8, but plan 'reduce' is for 2 ranks" \
    OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_RANK=0 "$plan" --backend gpu
t env_default_timeout 2 "mscclrt-run: --timeout: only with --launch procs (this run is --launch env)" \
    WORLD_SIZE=2 RANK=0 "$plan" --backend gpu --timeout 30

if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
    for n in env_no_driver procs_overrides_env rank_alone_is_procs procs_no_driver procs_reaped; do
        echo "testing gpu_launch/$n ... skipped (needs a host without a CUDA driver)"
    done
    exit 0
fi
nodrv="mscclrt-run: --backend gpu: cannot create one communicator per GPU: CUDA driver not available: dlopen(libcuda.so.1)"
# env: the driver is checked before the rendezvous, so a lone rank 0 of 2 does not wait
t env_no_driver 1 \
    "mscclrt-run: --backend gpu: rank 0: cannot join the group of the environment: CUDA driver not available: dlopen(libcuda.so.1): libcuda.so.1: cannot open shared object file: No such file or directory" \
    WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 "$plan" --backend gpu --check
nodrv_line="$nodrv: libcuda.so.1: cannot open shared object file: No such file or directory"
# an explicit --launch procs wins over the launcher's variables; RANK alone is no launcher
t procs_overrides_env 1 "$nodrv_line" WORLD_SIZE=4 RANK=1 "$plan" --backend gpu --launch procs
t rank_alone_is_procs 1 "$nodrv_line" RANK=1 "$plan" --backend gpu --timeout 30
# procs: every rank fails alike; one line without a rank list (all ranks), within seconds
start=$(date +%s)
timeout 60 "$RUN" "$plan" --backend gpu --launch procs --check --iters 3 >"$tmp/out" 2>"$tmp/err"
st=$?
took=$(($(date +%s) - start))
if [ $st = 1 ] && [ "$took" -lt 20 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF -- "$nodrv" "$tmp/err" &&
   [ ! -s "$tmp/out" ]; then
    echo "testing gpu_launch/procs_no_driver ... passed"
else
    echo "gpu_launch/procs_no_driver: status $st after $took s:"; cat "$tmp/out" "$tmp/err"
    echo "testing gpu_launch/procs_no_driver ... failed"
fi
# every forked rank is reaped by mscclrt-run itself: as a child subreaper, the test would
# inherit any rank left behind (running or zombie)
if command -v python3 >/dev/null 2>&1; then
    python3 - "$RUN" "$plan" <<'EOF' >"$tmp/reap" 2>&1
import ctypes, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0:    # PR_SET_CHILD_SUBREAPER
    print("skip: no subreaper"); sys.exit(77)
for extra in ([], ["--launch", "procs", "--iters", "5"]):
    p = subprocess.run([sys.argv[1], sys.argv[2], "--backend", "gpu", "--ranks", "2"] + extra,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    if p.returncode != 1:
        print("status", p.returncode); sys.exit(1)
try:
    pid, st = os.waitpid(-1, os.WNOHANG)
    print("left behind: pid", pid); sys.exit(1)
except ChildProcessError:
    sys.exit(0)
EOF
    case $? in
    0) echo "testing gpu_launch/procs_reaped ... passed" ;;
    77) echo "testing gpu_launch/procs_reaped ... skipped (needs prctl(PR_SET_CHILD_SUBREAPER))" ;;
    *) cat "$tmp/reap"; echo "testing gpu_launch/procs_reaped ... failed" ;;
    esac
else
    echo "testing gpu_launch/procs_reaped ... skipped (needs python3)"
fi

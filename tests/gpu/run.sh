#!/bin/sh
# run.sh - the GPU tests (`make test-gpu`, or directly: BUILD=build sh tests/gpu/run.sh with a
# prebuilt build dir, as on GPU machines that cannot build: tests/gpu/pack_build.sh makes one). Multicast stays off: NVLS is never
# enabled and the NVLS guard is preloaded into every GPU process. Runs the device library's
# kernels (test_gpu_devlib), the compat plans and the
# 2-rank stdlib plans (tests/golden/stdlib/*/*.N2.json) through test_gpu_exec, one process per
# rank on cuMemAlloc and cuMem buffers (test_gpu_mp, test_boot_ipc), a short mscclrt-perf
# check, every stdlib program at N = all GPUs through mscclrt-run --backend gpu --check, then
# one process per rank (--launch procs / env), then 4- and 8-rank plans on fewer GPUs (shared),
# then the NCCL drop-in (nccl): test_nccl_gpu_modes (process per GPU, thread per GPU, one thread
# with ncclCommInitAll; a killed rank, an abort with a waiting kernel), test_gpu_coll with 4
# ranks (and 8 unless quick), NVIDIA's nccl-tests under MPI (nccl_tests.sh) and PyTorch
# (torch_dropin.sh), every rank on GPU 0 and, where there are 2 GPUs or more, one process per GPU
# (GPU_PER_RANK=1); those two scripts skip (77) without mpirun or PyTorch.
# Logs go to $GPU_LOG_DIR when set. The GPU count is what CUDA_VISIBLE_DEVICES leaves visible
# (tests/gpu/gpu_count.sh): CUDA_VISIBLE_DEVICES=0 runs the one-GPU mode on a larger machine.
# A GPU machine lends at most 10 minutes a command, so the run can be split:
#   GPU_SECTIONS="basic sweep procs shared nccl net python mscclpp"   the sections to run (default: all)
# net (tests/gpu/net.sh): multi_node stdlib programs split into 2 and 4 nodes by MSCCLRT_HOSTID,
# a node's ranks sharing a GPU (nodes spread over the GPUs), port channels between nodes over the
# socket transport.
# python (tests/gpu/torch_backend.sh): the Python package and backend="mscclrt" under torchrun.
# mscclpp (tests/gpu/mscclpp_executor.sh): the stdlib's `--target mscclpp` plans in MSCCL++'s own
# executor, 2 ranks under mpirun; needs MSCCLPP_HOME (a prebuilt MSCCL++ and its driver), else skipped.
#   NET_PARTS="shapes types big sizes"   the parts of the net section (tests/gpu/net.sh's three,
#                               tests/gpu/net_sizes.sh's drop-in across nodes at every size)
#   GPU_SWEEP="allreduce/* allgather/fullmesh"   the stdlib programs of the sweep (default: all)
#   GPU_SHARED_RANKS="4 8"   the rank counts of the shared section
#   GPU_PARTS="api gpu0 per_gpu"   the parts of the nccl and python sections: api, the drop-in's
#                               and libmscclrt's API tests in one process (test_nccl_gpu_modes,
#                               test_gpu_coll); gpu0, nccl-tests and PyTorch with every rank on
#                               GPU 0; per_gpu, the same with one process per GPU (2+ GPUs)
#   GPU_TEST_TIMEOUT=900     seconds one test program may run before it is killed and failed
# MSCCLRT_TEST_QUICK=1 runs fewer combinations in basic and in test_gpu_coll, skips the sweep
# and runs test_gpu_coll with 4 ranks only.
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
export NCCL_NVLS_ENABLE=0
# ranks sharing a GPU in one process need a hardware queue per stream (exec_share.c)
export CUDA_DEVICE_MAX_CONNECTIONS=32
unset MSCCLRT_ENABLE_NVLS
guard=$BUILD/lib/libnvls_guard.so
if [ ! -f "$guard" ]; then
    gcc -shared -fPIC tests/gpu/nvls_guard.c -o "$guard" || { echo "run.sh: cannot build the NVLS guard" >&2; exit 1; }
fi
export LD_PRELOAD="$PWD/$guard${LD_PRELOAD:+:$LD_PRELOAD}"
export LD_LIBRARY_PATH="$PWD/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MSCCLRT_CACHE_DIR="${MSCCLRT_CACHE_DIR:-$PWD/$BUILD/kernel-cache}"
log=${GPU_LOG_DIR:-$BUILD/gpu-logs}
mkdir -p "$log" "$MSCCLRT_CACHE_DIR"
status=0
sections=${GPU_SECTIONS:-basic sweep procs shared nccl net python mscclpp}
want() { case " $sections " in *" $1 "*) return 0 ;; esac; return 1; }
parts=${GPU_PARTS:-api gpu0 per_gpu}
want_part() { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }
# run_only NAME COMMAND...: runs it into $log/NAME.log, its status in rc (variables start with
# r: callers' names survive); run_verdict NAME: the testing lines of that run
run_only() {
    rname=$1
    shift
    rt0=$(date +%s)
    # a program (not a shell function) runs under a time limit: a hang fails its test
    case $(command -v -- "$1") in
    /*) timeout "${GPU_TEST_TIMEOUT:-900}" "$@" >"$log/$rname.log" 2>&1 ;;
    *) "$@" >"$log/$rname.log" 2>&1 ;;
    esac
    rc=$?
    [ $rc -eq 124 ] && echo "run.sh: killed after ${GPU_TEST_TIMEOUT:-900} s (GPU_TEST_TIMEOUT)" >>"$log/$rname.log"
    echo "($(($(date +%s) - rt0)) s)" >>"$log/$rname.log"
}
run_verdict() {
    rname=$1
    grep '^testing ' "$log/$rname.log" || { [ $rc -eq 0 ] && echo "testing $rname ... passed"; }
    if [ $rc -eq 77 ]; then   # the reason: its "skipped (needs ...)" line, as tests/run.sh reads it
        rwhy=$(sed -n 's/^skipped (\(.*\))$/\1/p' "$log/$rname.log" | tail -n 1)
        echo "testing $rname ... skipped${rwhy:+ ($rwhy)}"
        return 0
    fi
    if [ $rc -ne 0 ]; then
        echo "testing $rname ... failed (rc $rc; log $log/$rname.log)"
        tail -20 "$log/$rname.log" | sed 's/^/    /'
        status=1
    fi
}
run() { # NAME COMMAND...
    run_only "$@"
    run_verdict "$1"
}
if want basic; then
# a reuse_resources plan (MSCCL++'s multi-node defaults set it): fixed 64 MiB scratch, in one
# process and one process per rank (it failed every call before: issue 13)
if [ -x "$BUILD/bin/mscclc" ] && "$BUILD/bin/mscclc" stdlib/allreduce/rs_ag_packet.coll -D N=2 \
        -o "$log/rsag2.json" 2>/dev/null; then
    sed 's/"reuse_resources": *false/"reuse_resources": true/' "$log/rsag2.json" >"$log/reuse2.json"
    for l in single procs; do
        run "gpu_reuse_resources_$l" "$BUILD/bin/mscclrt-run" "$log/reuse2.json" --backend gpu \
            --launch "$l" --gpus 1 --check --iters 20 --size 64K
    done
fi
# the device library's data movement on one GPU (packet reductions, fan-out copies)
run gpu_devlib "$BUILD/tests/test_gpu_devlib"
run gpu_compat "$BUILD/tests/test_gpu_exec"
run gpu_multiprocess "$BUILD/tests/test_gpu_mp"
# the IPC transport's GPU half: legacy handles and cuMem POSIX fds between two forked ranks
run gpu_ipc_transport "$BUILD/tests/test_boot_ipc"
# the 2-rank stdlib plans, the port-channel test plans (every port op through the proxy) and
# the fan-out plans (fused transfers of one source to two destinations)
stdlib="$(ls tests/golden/stdlib/*/*.N2.json 2>/dev/null) tests/golden/ok/port_ops.json tests/golden/ok/port_packets.json tests/golden/ok/fanout_put.json tests/golden/ok/fanout_packets.json"
if [ -n "$stdlib" ]; then
    # shellcheck disable=SC2086
    run gpu_stdlib "$BUILD/tests/test_gpu_exec" $stdlib
fi
if [ -x "$BUILD/bin/mscclrt-perf" ]; then
    run perf_check "$BUILD/bin/mscclrt-perf" -g 2 -b 1K -e 4M -f 4 -w 2 -n 10 -c 1 \
        --plan tests/plans/compat/allreduce_packet.json
fi
fi

# Helpers of the stdlib sections. picked SRC: SRC is in GPU_SWEEP (patterns such as allreduce/*,
# matched, not globbed), or GPU_SWEEP is unset.
# shellcheck source=tests/gpu/stdlib_pick.sh
. tests/gpu/stdlib_pick.sh
picked() { stdlib_picked "$1" "$GPU_SWEEP"; }
# prog_plan SRC N DIR: compiles SRC for N ranks into DIR/$name.json; sets name and max (the
# plan's largest size when it has one); fails (with a skip line) when it does not compile.
prog_plan() {
    name=$(echo "$1" | sed 's|stdlib/||; s|\.coll$||; s|/|_|')
    pdef="-D N=$2"
    case $name in *hier) pdef="$pdef -D G=$(($2 / 2))" ;; esac
    # shellcheck disable=SC2086
    if ! "$BUILD/bin/mscclc" "$1" $pdef -o "$3/$name.json" >"$log/mscclc_$name.N$2.log" 2>&1; then
        echo "testing gpu stdlib $name N=$2 ... skipped (does not compile for N=$2)"
        return 1
    fi
    max=$(sed -n 's/^ *sizes *[0-9KMG]* *\.\. *\([0-9]*[KMG]\?\).*/\1/p' "$1" | head -1)
}
# rotate: the next (dt, op) of a fixed cycle over data types and operators
i=0
rotate() {
    i=$((i + 1))
    set -- "float16 sum" "bfloat16 max" "float32 avg" "int32 prod" "fp8_e4m3 min" "uint8 sum"
    shift $((i % 6))
    dt=${1% *} op=${1#* }
}

# Every stdlib program at N = all GPUs here: the smallest legal size with 1000 back-to-back
# calls, then larger sizes up to the plan's maximum (1 GiB for unbounded plans), rotating
# dtypes and operators; each run ends with a CUDA-graph replay and a full check.
ngpu=$(sh tests/gpu/gpu_count.sh)
if want sweep && [ "$ngpu" -ge 2 ] && [ -x "$BUILD/bin/mscclrt-run" ] && [ -z "$MSCCLRT_TEST_QUICK" ]; then
    plans=$log/plans
    mkdir -p "$plans"
    for src in stdlib/*/*.coll; do
        picked "$src" || continue
        prog_plan "$src" "$ngpu" "$plans" || continue
        run "stdlib_${name}_min" "$BUILD/bin/mscclrt-run" "$plans/$name.json" --backend gpu \
            --launch single --check --iters 1000 --dtype float16 --op sum
        for size in 1M 64M 1G; do
            [ -n "$max" ] && [ "$size" != 1M ] && continue
            rotate
            # large sizes in one process per rank: every rank checks its own output at once
            [ "$size" = 1G ] && it=3 || it=20
            [ "$size" = 1M ] && launch=single || launch=procs
            run "stdlib_${name}_$size" "$BUILD/bin/mscclrt-run" "$plans/$name.json" --backend gpu \
                --launch "$launch" --check --iters "$it" --size "${max:-$size}" --dtype "$dt" --op "$op"
        done
    done
elif want sweep; then   # said, not silent: one GPU's programs run in the shared section
    echo "testing stdlib sweep ... skipped (needs 2 GPUs at least, one per rank, this machine has $ngpu; MSCCLRT_TEST_QUICK unset; $BUILD/bin/mscclrt-run; the shared section runs them with ranks sharing a GPU)"
fi

# Every stdlib program for 4 and 8 ranks where there are fewer GPUs: ranks share GPUs
# (mscclrt-run --gpus; rank r on GPU r mod ngpu), all in one process so the ranks of a GPU run
# at once. It checks the code of many peers (fused fan-out transfers, overlapped packet waits,
# peer groups, hier's nodes) for correctness; its timings mean nothing.
# shared_run NAME ARGS...: mscclrt-run ARGS with every rank in one process. Where the GPU cannot
# hold every rank's thread blocks at once (8 ranks of a 32-block plan on one 132-SM GPU), the
# library refuses that placement, since the spinning kernels would wait for each other forever
# (exec_share.c); that refusal passes when its numbers show it (ranks x blocks above what the
# device holds), and the same run then goes with one process per rank (contexts time-slice)
shared_run() {
    sname=$1
    shift
    run_only "$sname" "$BUILD/bin/mscclrt-run" "$@" --launch single
    sneed=$(sed -n 's/.*all \([0-9]*\) blocks must be resident at once, but the device holds \([0-9]*\) .*/\1 \2/p' \
        "$log/$sname.log" | head -n 1)
    if [ "$rc" -eq 1 ] && [ -n "$sneed" ] && [ "${sneed% *}" -gt "${sneed#* }" ]; then
        echo "testing $sname ... passed (refused in one process: ${sneed% *} blocks, the GPU holds ${sneed#* })"
        run "${sname}_procs" "$BUILD/bin/mscclrt-run" "$@" --launch procs
    else
        run_verdict "$sname"
    fi
}
if want shared && [ "$ngpu" -ge 1 ] && [ -x "$BUILD/bin/mscclrt-run" ]; then
    shared=$log/shared-plans
    mkdir -p "$shared"
    for n in ${GPU_SHARED_RANKS:-4 8}; do
        [ "$n" -gt "$ngpu" ] || continue
        mkdir -p "$shared/N$n"
        for src in stdlib/*/*.coll; do
            picked "$src" || continue
            prog_plan "$src" "$n" "$shared/N$n" || continue
            shared_run "shared_N${n}_${name}_min" "$shared/N$n/$name.json" \
                --backend gpu --gpus "$ngpu" --check --iters 100 --dtype float16 --op sum
            rotate
            case $max in *K) size=$max ;; *) size=1M ;; esac
            shared_run "shared_N${n}_${name}_$size" "$shared/N$n/$name.json" \
                --backend gpu --gpus "$ngpu" --check --iters 20 --size "$size" \
                --dtype "$dt" --op "$op"
        done
    done
    # 8 ranks of a port-channel plan (hier across two "nodes") in one process on one GPU: with
    # CUDA's default 8 hardware queues it is refused with a message (it hung before); with 32 it
    # runs, graph replay included (issue 13)
    if [ "$ngpu" -lt 8 ] && "$BUILD/bin/mscclc" stdlib/allreduce/hier.coll -D N=8 -D G=4 \
            -o "$shared/hier8.json" 2>/dev/null; then
        run shared_N8_hier_port_queues "$BUILD/bin/mscclrt-run" "$shared/hier8.json" --backend gpu \
            --launch single --gpus "$ngpu" --check --iters 5 --size 64K
        rq=$log/shared_N8_hier_8_queues.log
        CUDA_DEVICE_MAX_CONNECTIONS=8 timeout 120 "$BUILD/bin/mscclrt-run" "$shared/hier8.json" \
            --backend gpu --launch single --gpus 1 --check --iters 1 --size 64K >"$rq" 2>&1
        if grep -q 'CUDA_DEVICE_MAX_CONNECTIONS' "$rq"; then
            echo "testing shared_N8_hier_8_queues_refused ... passed"
        else
            echo "testing shared_N8_hier_8_queues_refused ... failed ($rq)"; status=1
        fi
    fi
fi

# One process per rank: the library's two-process test of mscclrt_gpu_check_rank and
# mscclrt_comm_init_env, then stdlib programs at N = all GPUs through mscclrt-run --backend gpu
# --launch procs (mscclrt-run forks the ranks), and one through --launch env with one background
# mscclrt-run per rank started here with torchrun's variables (no torchrun needed).
want procs && run gpu_check_rank "$BUILD/tests/test_gpu_check_rank"
# user buffers as applications place them: sub-ranges at per-rank offsets, freed and reused;
# scratch growing from 1 MiB to 1 GiB on one communicator
want procs && run gpu_buffers "$BUILD/tests/test_gpu_buffers"
# the direct path on users' own buffers (peer memory shared lazily): 2 processes, and 4 (sharing
# the GPUs where there are fewer)
want procs && run gpu_direct "$BUILD/tests/test_gpu_direct"
want procs && run gpu_direct_4 "$BUILD/tests/test_gpu_direct" 4
# send/recv on a communicator of two "nodes" (host ids) of 2 ranks: served within a node
want procs && run gpu_p2p_nodes "$BUILD/tests/test_gpu_p2p_nodes"
# envrun LOGNAME PLAN ARGS...: all ranks of --launch env; rank 0's output is the result
# shellcheck disable=SC2317 # called through run
envrun() {
    en=$1 eplan=$2
    shift 2
    eport=$((29000 + $$ % 1000))
    epids=""
    er=0
    while [ "$er" -lt "$ngpu" ]; do
        RANK=$er WORLD_SIZE=$ngpu LOCAL_RANK=$er MASTER_ADDR=127.0.0.1 MASTER_PORT=$eport \
            timeout 300 "$BUILD/bin/mscclrt-run" "$eplan" --backend gpu --launch env "$@" \
            >"$log/$en.rank$er.log" 2>&1 &
        epids="$epids $!"
        er=$((er + 1))
    done
    est=0
    for ep in $epids; do wait "$ep" || est=1; done
    cat "$log/$en.rank0.log"
    return "$est"
}
# refuses TEXT COMMAND...: the command must exit with 1 and say TEXT
# shellcheck disable=SC2317 # called through run
refuses() {
    rtext=$1
    shift
    "$@" >"$log/refuses.out" 2>&1
    rst=$?
    cat "$log/refuses.out"
    [ "$rst" -eq 1 ] && grep -qF -- "$rtext" "$log/refuses.out"
}
if want procs && [ "$ngpu" -ge 2 ] && [ -x "$BUILD/bin/mscclrt-run" ]; then
    mp=$log/mp-plans
    mkdir -p "$mp"
    for prog in allreduce/allpair_packet allreduce/rs_ag_read allgather/fullmesh allgather/copyengine; do
        pname=$(echo "$prog" | tr / _)
        if ! "$BUILD/bin/mscclc" "stdlib/$prog.coll" -D N="$ngpu" -o "$mp/$pname.json" \
            >"$log/mscclc_mp_$pname.log" 2>&1; then
            echo "testing procs_$pname N=$ngpu ... skipped (does not compile for N=$ngpu)"
            continue
        fi
        sizes="1M 64M"
        case $prog in *packet) sizes="64K 1M" ;; esac # packet plans stop at 1 MB
        for size in $sizes; do
            run "procs_${pname}_$size" "$BUILD/bin/mscclrt-run" "$mp/$pname.json" --backend gpu \
                --launch procs --check --iters 20 --size "$size" --dtype float16 --op sum
        done
    done
    # user buffers from cuMem (VMM) allocations, as PyTorch's expandable segments make them:
    # in one process (peers get access through cuMemSetAccess) and one process per rank (POSIX
    # fds); copyengine moves them with the copy engine through the proxy
    for pname in allreduce_rs_ag_read allgather_fullmesh allgather_copyengine; do
        [ -f "$mp/$pname.json" ] || continue
        for launch in single procs; do
            run "cumem_${launch}_$pname" "$BUILD/bin/mscclrt-run" "$mp/$pname.json" --backend gpu \
                --launch "$launch" --alloc cumem --check --iters 20 --size 1M --dtype bfloat16 --op sum
        done
    done
    # one rank more than there are GPUs: refused with the library's message, within seconds
    if "$BUILD/bin/mscclc" stdlib/allgather/fullmesh.coll -D N=$((ngpu + 1)) -o "$mp/over.json" \
        >"$log/mscclc_mp_over.log" 2>&1; then
        run procs_more_ranks_than_gpus refuses "device $ngpu out of range [0, $ngpu)" \
            timeout 120 "$BUILD/bin/mscclrt-run" "$mp/over.json" --backend gpu --launch procs --check
    fi
    if [ -f "$mp/allreduce_rs_ag_read.json" ]; then
        run env_allreduce_rs_ag_read_64M envrun env_rs_ag_read "$mp/allreduce_rs_ag_read.json" \
            --check --iters 20 --size 64M --dtype bfloat16 --op sum
    fi
fi

# The NCCL drop-in: its modes and faults through the NCCL API, libmscclrt's NCCL-shaped
# collectives with ranks sharing GPUs, then nccl-tests and PyTorch against libmscclrt_nccl.so
# (their own "testing" lines come through; their logs go to the same directory).
if want nccl; then
    if want_part api; then
        run nccl_gpu_modes "$BUILD/tests/test_nccl_gpu_modes"
        run gpu_coll_N4 "$BUILD/tests/test_gpu_coll" 4
        [ -z "$MSCCLRT_TEST_QUICK" ] && run gpu_coll_N8 "$BUILD/tests/test_gpu_coll" 8
    fi
    if [ "$ngpu" -ge 1 ] && want_part gpu0; then
        run nccl_tests env BUILD="$BUILD" GPU_LOG_DIR="$log" sh tests/gpu/nccl_tests.sh
        run torch_dropin env BUILD="$BUILD" GPU_LOG_DIR="$log" sh tests/gpu/torch_dropin.sh
    fi
    if [ "$ngpu" -ge 2 ] && want_part per_gpu; then   # and one process per GPU, as users run them
        mkdir -p "$log/per_gpu"
        run nccl_tests_per_gpu env BUILD="$BUILD" GPU_LOG_DIR="$log/per_gpu" GPU_PER_RANK=1 \
            sh tests/gpu/nccl_tests.sh
        run torch_dropin_per_gpu env BUILD="$BUILD" GPU_LOG_DIR="$log/per_gpu" GPU_PER_RANK=1 \
            sh tests/gpu/torch_dropin.sh
    fi
    if [ "$ngpu" -lt 1 ]; then
        echo "testing nccl_tests ... skipped (no GPU)"
        echo "testing torch_dropin ... skipped (no GPU)"
    fi
fi
if want net; then
    # NET_PARTS: net.sh's parts (shapes types big) and sizes (net_sizes.sh: every collective of
    # the drop-in across nodes from 1 byte to 4 GiB)
    nparts=${NET_PARTS:-shapes types big sizes}
    case " $nparts " in *" shapes "* | *" types "* | *" big "*)
        run gpu_net env NET_PARTS="$nparts" sh tests/gpu/net.sh ;;
    esac
    case " $nparts " in *" sizes "*)
        run gpu_net_sizes env BUILD="$BUILD" GPU_LOG_DIR="$log" sh tests/gpu/net_sizes.sh ;;
    esac
fi
# python/mscclrt: backend="mscclrt", the tuner with a hanging candidate, a Python selector under
# the drop-in (tests/gpu/torch_backend.sh; skips without PyTorch)
if want python; then
    want_part gpu0 && run torch_backend env BUILD="$BUILD" GPU_LOG_DIR="$log" sh tests/gpu/torch_backend.sh
    if [ "$ngpu" -ge 2 ] && want_part per_gpu; then
        mkdir -p "$log/per_gpu"
        run torch_backend_per_gpu env BUILD="$BUILD" GPU_LOG_DIR="$log/per_gpu" GPU_PER_RANK=1 \
            sh tests/gpu/torch_backend.sh
    fi
fi
# the plans mscclc makes for MSCCL++ (--target mscclpp), run and checked in MSCCL++'s executor
if want mscclpp; then
    run mscclpp_executor env BUILD="$BUILD" GPU_LOG_DIR="$log" sh tests/gpu/mscclpp_executor.sh
fi
exit $status

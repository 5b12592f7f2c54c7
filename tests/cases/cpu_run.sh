#!/bin/sh
# cpu_run.sh - the mscclrt-run command: option errors, --save files, the backend table, and
# that --check and the no-progress timeout really fail on broken plans (made by dropping one op).
# The plan is tests/compat/reduce.coll compiled here by mscclc: op for op MSCCL++'s reduce.json
# (compat_coll checks that), but made by the repository itself. Breaking it needs python3, else
# those cases are skipped.
BUILD=${BUILD:-build}
RUN=$BUILD/bin/mscclrt-run
MSCCLC=$BUILD/bin/mscclc
[ -x "$RUN" ] || { echo "cpu_run: $RUN not built"; exit 1; }
[ -x "$MSCCLC" ] || { echo "cpu_run: $MSCCLC not built"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plan=$tmp/reduce.json
"$MSCCLC" tests/compat/reduce.coll -o "$plan" || { echo "cpu_run: mscclc tests/compat/reduce.coll failed"; exit 1; }
fail=0

# t NAME WANT_STATUS WANT_TEXT args...: exit status and a substring of stdout+stderr
t() {
    name=$1 want=$2 text=$3
    shift 3
    "$RUN" "$@" >"$tmp/out" 2>&1
    st=$?
    if [ "$st" = "$want" ] && grep -qF -- "$text" "$tmp/out"; then
        echo "testing cpu_run/$name ... passed"
    else
        echo "cpu_run/$name: want status $want and '$text', got status $st:"
        cat "$tmp/out"
        echo "testing cpu_run/$name ... failed"
        fail=1
    fi
}

t ok 0 "check passed" "$plan" --ranks 2 --size 4096 --dtype bfloat16 --op max --check --iters 3
# the protocol the plan uses (Simple here), and no operator where the collective has none
t ok_simple 0 "bfloat16 max, in-place, Simple, backend cpu" "$plan" --size 4096 --dtype bfloat16 --op max
"$BUILD/bin/mscclc" stdlib/broadcast/direct.coll -D N=2 -o "$tmp/bc.json"
t broadcast_no_op 0 "float32, out-of-place, Simple, backend cpu" "$tmp/bc.json" --check
if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
    # a CUDA driver is here: the GPU tests cover it
    echo "testing cpu_run/gpu_unavailable ... skipped (needs a host without a CUDA driver)"
else
    t gpu_unavailable 1 "--backend gpu: cannot create one communicator per GPU: CUDA driver not available" \
        "$plan" --backend gpu --check
    t gpu_no_save 1 "--save is available with --backend cpu only" "$plan" --backend gpu --save "$tmp/s"
fi
# the hand-written GPU test plans compute their collective on the reference backend too
for g in port_ops port_packets fanout_put fanout_packets; do
    t "golden_$g" 0 "check passed" tests/golden/ok/$g.json --size 64K --dtype bfloat16 --op max \
        --check --iters 3
done
t alloc_cpu 2 "--alloc: only with --backend gpu" "$plan" --alloc cumem
t alloc_bad 2 "--alloc 'vmm': expected device or cumem" "$plan" --backend gpu --alloc vmm
t gpus_cpu 2 "--gpus: only with --backend gpu" "$plan" --gpus 2
t gpus_bad 2 "--gpus '0': expected a GPU count in [1, 1024]" "$plan" --backend gpu --gpus 0
t gpus_env 2 "--gpus is for --launch single and procs" "$plan" --backend gpu --launch env --gpus 2
t ranks_mismatch 1 "--ranks 3, but plan 'reduce' is for 2 ranks" "$plan" --ranks 3
t bad_size 1 "1000" "$plan" --size 1000
t bad_dtype 2 "--dtype 'half8'" "$plan" --dtype half8
t bad_packet 2 "--packet 'll32'" "$plan" --packet ll32
t no_plan 1 "cannot load plan" "$tmp/missing.json"

t save 0 "check passed" "$plan" --size 4096 --check --save "$tmp/save"
ok=1
for r in 0 1; do
    for k in in out; do
        f=$tmp/save/rank$r.$k.bin
        [ -f "$f" ] && [ "$(wc -c <"$f")" -eq 4096 ] || ok=0
    done
done
cmp -s "$tmp/save/rank0.out.bin" "$tmp/save/rank1.out.bin" || ok=0
cmp -s "$tmp/save/rank0.in.bin" "$tmp/save/rank1.in.bin" && ok=0
[ -z "$(ls -A "$tmp/save" | grep -v '^rank[01]\.\(in\|out\)\.bin$')" ] || ok=0   # no temporaries left
if [ $ok = 1 ]; then echo "testing cpu_run/save_files ... passed"; else echo "testing cpu_run/save_files ... failed"; fail=1; fi

# --save into a directory where symlinks to files outside it are planted, at the temporary name
# the old code used (rankN.in.bin.tmp.PID: `exec` keeps the shell's PID) and at a final name:
# nothing outside the directory is written, the final names become regular files
mkdir "$tmp/plant"
echo precious >"$tmp/victim1"
echo precious >"$tmp/victim2"
ln -s ../victim2 "$tmp/plant/rank0.out.bin"
sh -c 'ln -s ../victim1 "$1/rank0.in.bin.tmp.$$" && exec "$2" "$3" --size 4096 --save "$1"' sh \
    "$tmp/plant" "$RUN" "$plan" >"$tmp/out" 2>&1
st=$?
ok=1
[ "$st" = 0 ] || ok=0
[ "$(cat "$tmp/victim1")" = precious ] && [ "$(cat "$tmp/victim2")" = precious ] || ok=0
for f in rank0.in.bin rank0.out.bin rank1.in.bin rank1.out.bin; do
    [ -f "$tmp/plant/$f" ] && [ ! -L "$tmp/plant/$f" ] && [ "$(wc -c <"$tmp/plant/$f")" -eq 4096 ] || ok=0
done
if [ $ok = 1 ]; then echo "testing cpu_run/save_symlinks ... passed"
else
    echo "cpu_run/save_symlinks: status $st; victim1 and victim2 (files outside DIR; each held" \
         "9 bytes): $(wc -c <"$tmp/victim1") and $(wc -c <"$tmp/victim2") bytes"
    ls -lA "$tmp/plant"; cat "$tmp/out"
    echo "testing cpu_run/save_symlinks ... failed"; fail=1
fi

if command -v python3 >/dev/null 2>&1; then
    # drop rank 1's rre (op 6): its chunk 0 is never reduced
    python3 - "$plan" "$tmp/norre.json" 6 <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
del p["gpus"][1]["threadblocks"][0]["ops"][int(sys.argv[3])]
json.dump(p, open(sys.argv[2], "w"))
EOF
    t check_fails 1 "check failed (plan 'reduce'" "$tmp/norre.json" --size 4096 --check
    t check_names_element 1 "rank 0 element 512 (float32): got" "$tmp/norre.json" --size 4096 --check
    # the ops that write the wrong element's chunk (here through the in-place input)
    t check_names_writer 1 "input chunk 2 of rank 0 is written by rank 1 tb 0 op 9 (put)" \
        "$tmp/norre.json" --size 4096 --check
    # an output nobody writes keeps the fill pattern, and the message says so
    "$BUILD/bin/mscclc" examples/allreduce_quickstart.coll -D N=4 -o "$tmp/qs.json"
    python3 - "$tmp/qs.json" "$tmp/qs_bad.json" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["gpus"][1]["threadblocks"][0]["ops"].pop()
json.dump(p, open(sys.argv[2], "w"))
EOF
    t check_names_fill 1 "the value is the fill pattern written into every output before the call (0xa5 bytes: -2.87e-16 as float32), so nothing wrote this element; no op of the plan writes output chunk 0 of rank 1" \
        "$tmp/qs_bad.json" --check
    # drop rank 0's last signal (op 11): rank 1's last wait never returns
    python3 - "$plan" "$tmp/nosig.json" 11 <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
del p["gpus"][0]["threadblocks"][0]["ops"][int(sys.argv[3])]
json.dump(p, open(sys.argv[2], "w"))
EOF
    MSCCLRT_CPU_TIMEOUT_MS=1500 t timeout 1 \
        "rank 1 tb 0 op 14 (wait): waiting for a signal on memory channel 0 from rank 0 (received 1, need 2)" \
        "$tmp/nosig.json" --size 4096
else
    echo "testing cpu_run/check_fails ... skipped (needs python3)"
    echo "testing cpu_run/timeout ... skipped (needs python3)"
fi
exit $fail

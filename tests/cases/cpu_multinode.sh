#!/bin/sh
# cpu_multinode.sh - every multi-node stdlib program (tag multi_node), compiled by mscclc for
# 2, 3 and 4 nodes x 1, 2, 4 and 8 ranks per node (-D N=nodes*G -D G=G; every shape must
# compile), computes its collective on the CPU backend: mscclrt-run --check at the smallest
# legal size, an odd multiple of the size at which every data type fits, and (G = 2) one of
# about 64 KB, which takes the backend's multi-step loops. Data types and operators rotate over
# the runs of a program, so every data type and (when it reduces) every operator is checked;
# out-of-place plans alternate in-place runs (not alltoall), LL8 alternates with LL16, some
# runs repeat the call. Each plan's channels must follow the layout: memory channels between
# ranks of one node, port channels between nodes. One "testing" line per program and shape.
BUILD=${BUILD:-build}
MSCCLC=$BUILD/bin/mscclc
RUN=$BUILD/bin/mscclrt-run
[ -x "$RUN" ] || { echo "cpu_multinode: $RUN not built"; exit 1; }
[ -x "$MSCCLC" ] || { echo "cpu_multinode: $MSCCLC not built"; echo "skipped (needs mscclc)"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "cpu_multinode: python3 missing"; echo "skipped (needs python3)"; exit 77; }
progs=$(grep -l '^ *tags .*multi_node' stdlib/*/*.coll 2>/dev/null | sort)
[ -n "$progs" ] || { echo "cpu_multinode: no stdlib program tagged multi_node"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
DTYPES="float32 float16 bfloat16 int32 fp8_e4m3 float64 uint8 int64 fp8_e5m2 uint32 int8 uint64"
OPS="sum prod max min avg"

nth() { # nth K LIST...: the (K mod count)-th word
    k_=$1
    shift
    eval "echo \${$(( k_ % $# + 1 ))}"
}

# layout G PLAN: the plan's memory channels stay inside nodes of G ranks, its port channels
# cross nodes; prints what is wrong
layout() {
    python3 - "$1" "$2" <<'PY'
import json, sys
g, plan = int(sys.argv[1]), json.load(open(sys.argv[2]))
for gpu in plan["gpus"]:
    r = gpu["id"]
    for ch in gpu["channels"]:
        for p in ch.get("connected_to", []):
            same = r // g == p // g
            if ch["channel_type"] == "memory" and not same:
                print(f"rank {r}: memory channel to rank {p} on another node")
            if ch["channel_type"] == "port" and same:
                print(f"rank {r}: port channel to rank {p} on its own node")
PY
}

# run_one SIZE ITERS: one checked run of $plan; the data type, operator, packet format and (for
# out-of-place plans) the buffer mode rotate with $k
run_one() {
    size=$1 iters=$2
    t=$(nth $k $DTYPES)
    op=sum
    case $coll in allreduce|reducescatter|reduce) op=$(nth $k $OPS) ;; esac
    pk=ll16
    [ $((k % 2)) = 1 ] && pk=ll8
    mode=
    [ "$plan_mode" = out-of-place ] && [ "$coll" != alltoall ] && [ $((k % 2)) = 0 ] && mode=--inplace
    k=$((k + 1))
    # shellcheck disable=SC2086
    if ! "$RUN" "$plan" --backend cpu --size "$size" --dtype "$t" --op "$op" --packet $pk \
            --iters "$iters" --seed $k $mode --check >"$tmp/out" 2>&1; then
        echo "cpu_multinode: $name N=$n G=$g: mscclrt-run --size $size --dtype $t --op $op --packet $pk --iters $iters $mode --check:"
        cat "$tmp/out"
        return 1
    fi
}

for src in $progs; do
    name=${src#stdlib/}
    name=${name%.coll}
    k=0
    for nodes in 2 3 4; do
        for g in 1 2 4 8; do
            n=$((nodes * g))
            test=cpu_multinode/$name/M${nodes}G$g
            plan=$tmp/plan.json
            if ! "$MSCCLC" "$src" -D N=$n -D G=$g -o "$plan" >"$tmp/cc" 2>&1; then
                cat "$tmp/cc"
                echo "testing $test ... failed"
                fail=1
                continue
            fi
            layout $g "$plan" >"$tmp/layout" 2>&1
            if [ -s "$tmp/layout" ]; then
                echo "cpu_multinode: $name N=$n G=$g: the channels do not follow the layout:"
                head -5 "$tmp/layout"
                echo "testing $test ... failed"
                fail=1
                continue
            fi
            # smallest legal size, the collective and the buffer mode, from a default run
            if ! "$RUN" "$plan" --backend cpu --dtype uint8 --check >"$tmp/out" 2>&1; then
                echo "cpu_multinode: $name N=$n G=$g at its smallest size (uint8 sum):"
                cat "$tmp/out"
                echo "testing $test ... failed"
                fail=1
                continue
            fi
            m=$(sed -n 's/.* ranks, \([0-9]*\) bytes .*/\1/p' "$tmp/out")
            coll=$(sed -n 's/^[^:]*: \([a-z]*\), .*/\1/p' "$tmp/out")
            plan_mode=$(sed -n 's/.*, \(in-place\|out-of-place\), .*/\1/p' "$tmp/out")
            # base: a legal size whose per-rank buffers hold whole elements of every type
            a=$m b=$((8 * n))
            while [ $b != 0 ]; do r=$((a % b)); a=$b; b=$r; done
            base=$((m / a * 8 * n))
            ok=1
            run_one $((3 * base)) 1 || ok=0
            run_one $((5 * base)) 2 || ok=0
            if [ $g = 2 ]; then run_one $(( ((65536 / base) | 1) * base )) 1 || ok=0; fi
            if [ $ok = 1 ]; then
                echo "testing $test ... passed"
            else
                echo "testing $test ... failed"
                fail=1
            fi
        done
    done
done
exit $fail

#!/bin/sh
# cpu_stdlib.sh - every standard algorithm stdlib/**/*.coll, compiled by mscclc for N in
# {2,3,4,8} ranks (an N the program rejects with a located `require` error is skipped), computes
# its collective on the CPU backend: mscclrt-run --check from the smallest legal size through odd
# multiples of it to about 2 MB. Data types and operators rotate over the runs of a program so
# that each program sees every data type and (when it reduces) every operator at least once;
# LL8 alternates with LL16, and some runs repeat the call. One "testing" line per program and N.
BUILD=${BUILD:-build}
MSCCLC=$BUILD/bin/mscclc
RUN=$BUILD/bin/mscclrt-run
[ -x "$RUN" ] || { echo "cpu_stdlib: $RUN not built"; exit 1; }
[ -x "$MSCCLC" ] || { echo "cpu_stdlib: $MSCCLC not built"; echo "skipped (needs mscclc)"; exit 77; }
progs=$(find stdlib -name '*.coll' 2>/dev/null | sort)
[ -n "$progs" ] || { echo "cpu_stdlib: no stdlib/**/*.coll"; echo "skipped (needs stdlib/**/*.coll)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
DTYPES="float32 float16 bfloat16 int32 fp8_e4m3 float64 uint8 int64 fp8_e5m2 uint32 int8 uint64"
OPS="sum prod max min avg"

nth() { # nth K LIST...: the (K mod count)-th word
    k=$1
    shift
    eval "echo \${$(( k % $# + 1 ))}"
}

# run_one SIZE ITERS: one checked run of $plan; the data type and operator rotate with $k
# (runs of 1 MB and more use float32 and do not advance the rotation)
run_one() {
    size=$1 iters=$2
    t=$(nth $k $DTYPES)
    op=sum
    case $coll in allreduce|reducescatter|reduce) op=$(nth $k $OPS) ;; esac
    pk=ll16
    [ $((k % 2)) = 1 ] && pk=ll8
    if [ "$size" -ge 1048576 ]; then t=float32; else k=$((k + 1)); fi
    if ! "$RUN" "$plan" --size "$size" --dtype "$t" --op "$op" --packet $pk --iters "$iters" \
            --seed $k --check >"$tmp/out" 2>&1; then
        echo "cpu_stdlib: $name N=$n: mscclrt-run --size $size --dtype $t --op $op --packet $pk --iters $iters --check:"
        cat "$tmp/out"
        return 1
    fi
}

report() {
    if [ $ok = 1 ]; then
        echo "testing cpu_stdlib/$1 ... passed"
    else
        echo "testing cpu_stdlib/$1 ... failed"
        fail=1
    fi
}

for src in $progs; do
    name=${src#stdlib/}
    name=${name%.coll}
    k=0
    for n in 2 3 4 8; do
        plan=$tmp/plan.json
        if ! "$MSCCLC" "$src" -D N=$n -o "$plan" >"$tmp/cc" 2>&1; then
            if grep -q "^$src:[0-9]*:[0-9]*: error: requirement failed" "$tmp/cc"; then
                echo "testing cpu_stdlib/$name/N$n ... skipped (the program's require rejects this N)"
            else
                cat "$tmp/cc"
                echo "testing cpu_stdlib/$name/N$n ... failed"
                fail=1
            fi
            continue
        fi
        # smallest legal size and the collective, from a default run
        if ! "$RUN" "$plan" --dtype uint8 --check >"$tmp/out" 2>&1; then
            echo "cpu_stdlib: $name N=$n at its smallest size (uint8 sum):"
            cat "$tmp/out"
            echo "testing cpu_stdlib/$name/N$n ... failed"
            fail=1
            continue
        fi
        m=$(sed -n 's/.* ranks, \([0-9]*\) bytes .*/\1/p' "$tmp/out")
        coll=$(sed -n 's/^[^:]*: \([a-z]*\), .*/\1/p' "$tmp/out")
        # base: a legal size whose per-rank buffers hold whole elements of every type
        a=$m b=$((8 * n))
        while [ $b != 0 ]; do r=$((a % b)); a=$b; b=$r; done
        base=$((m / a * 8 * n))
        max=$(sed -n 's/.*"max_message_size": *\([0-9]*\).*/\1/p' "$plan" | head -1)
        [ ${#max} -ge 18 ] && max=1000000000000
        big=$(( (2097152 / base) | 1 ))
        mid=$(( (131072 / base) | 1 ))
        ok=1
        for spec in "$base 1" "$((3 * base)) 1" "$((mid * base)) 2" "$((5 * base)) 3" "$((big * base)) 1"; do
            set -- $spec
            if [ "$1" -gt "$max" ]; then  # above the plan's range: its largest odd multiple
                q=$(( (max / base - 1) | 1 ))
                [ $q -lt 1 ] && continue
                set -- $((q * base)) "$2"
            fi
            run_one "$1" "$2" || ok=0
        done
        cp "$plan" "$tmp/last.json"
        last_base=$base
        report "$name/N$n"
    done
    # top up: every data type and operator at least once per program
    if [ -f "$tmp/last.json" ]; then
        plan=$tmp/last.json
        ok=1
        while [ $k -lt 12 ]; do run_one $((3 * last_base)) 1 || ok=0; done
        report "$name/all_dtypes_ops"
        rm -f "$tmp/last.json"
    fi
done
exit $fail

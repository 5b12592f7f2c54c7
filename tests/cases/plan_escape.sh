#!/bin/sh
# plan_escape.sh - a plan's strings reach the terminal escaped (plan_escape.c): a plan whose name
# holds "\u001b[2J" (clear screen), BEL, a C1 CSI, a right-to-left override and a byte that is
# not UTF-8, and whose op name holds an OSC sequence, through `mscclc --dump`, mscclrt-run's
# summary line and error messages, and mscclrt-perf's load error: no control byte is printed.
BUILD=${BUILD:-build}
base=tests/golden/ok/port_ops.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# the hostile name (JSON escapes, plus a raw 0xff byte) and a hostile op name
sed "s/\"name\": \"port_ops\"/\"name\": \"evil\\\\u001b[2J\\\\u0007\\\\u009b\\\\u202e$(printf '\377')\"/" \
    "$base" >"$tmp/name.json"
sed "s/\"name\": \"pws\"/\"name\": \"\\\\u001b]0;pwned\\\\u0007\"/" "$base" >"$tmp/op.json"
shown='evil\x1b[2J\x07\u009b\u202e\xff'

# t NAME WANT_STATUS WANT_TEXT command args...: status, a substring, and no control byte but
# newline in stdout+stderr
t() {
    name=$1 want=$2 text=$3
    shift 3
    [ -x "$1" ] || { echo "plan_escape: $1 not built"; echo "testing plan_escape/$name ... failed"; fail=1; return; }
    "$@" >"$tmp/out" 2>&1
    st=$?
    if [ "$st" = "$want" ] && grep -qF -- "$text" "$tmp/out" &&
       ! LC_ALL=C grep -q "$(printf '[\001-\011\013-\037\177\233]')" "$tmp/out"; then
        echo "testing plan_escape/$name ... passed"
    else
        echo "plan_escape/$name: want status $want, '$text' and no control bytes, got status $st:"
        od -c "$tmp/out" | head -20
        echo "testing plan_escape/$name ... failed"
        fail=1
    fi
}

t dump 0 "plan        $shown" "$BUILD/bin/mscclc" --dump "$tmp/name.json"
t dump_dot 0 "digraph \"evil\\\\x1b[2J" "$BUILD/bin/mscclc" --dump "$tmp/name.json" --format=dot
t run_summary 0 "$shown: allgather, 2 ranks" "$BUILD/bin/mscclrt-run" "$tmp/name.json" \
    --size 64K --check
t run_ranks 1 "--ranks 3, but plan '$shown' is for 2 ranks" "$BUILD/bin/mscclrt-run" \
    "$tmp/name.json" --ranks 3
t run_size 1 "plan '$shown': " "$BUILD/bin/mscclrt-run" "$tmp/name.json" --size 100
t run_bad_op 1 "unknown op '\x1b]0;pwned\x07'" "$BUILD/bin/mscclrt-run" "$tmp/op.json"
t perf_bad_op 2 "unknown op '\x1b]0;pwned\x07'" "$BUILD/bin/mscclrt-perf" --plan "$tmp/op.json"
exit $fail

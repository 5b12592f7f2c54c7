#!/bin/sh
# plan_fifo.sh - a plan path that names a FIFO or a directory is refused at once by the plan
# loader (plan_load_file opens non-blocking, then refuses what is not a regular file), for every
# command that loads plans: mscclrt-run, mscclrt-perf --plan, mscclc --dump and test_plan_dump
# --dump. `timeout` turns a hang into a failure.
BUILD=${BUILD:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkfifo "$tmp/f.json" || { echo "plan_fifo: mkfifo failed"; echo "skipped (needs mkfifo)"; exit 77; }
mkdir "$tmp/d.json"
fail=0

# t NAME WANT_STATUS WANT_TEXT command args...
t() {
    name=$1 want=$2 text=$3
    shift 3
    [ -x "$1" ] || { echo "testing plan_fifo/$name ... skipped (needs $1)"; return; }
    timeout 20 "$@" >"$tmp/out" 2>&1 </dev/null
    st=$?
    if [ "$st" = "$want" ] && grep -qF -- "$text" "$tmp/out"; then
        echo "testing plan_fifo/$name ... passed"
    else
        echo "plan_fifo/$name: want status $want and '$text', got status $st (124: timed out):"
        cat "$tmp/out"
        echo "testing plan_fifo/$name ... failed"
        fail=1
    fi
}

t run 1 "$tmp/f.json: a FIFO, not a regular file" "$BUILD/bin/mscclrt-run" "$tmp/f.json"
t run_dir 1 "$tmp/d.json: a directory, not a regular file" "$BUILD/bin/mscclrt-run" "$tmp/d.json"
t perf 2 "$tmp/f.json: a FIFO, not a regular file" "$BUILD/bin/mscclrt-perf" --plan "$tmp/f.json"
t dump 1 "$tmp/f.json: a FIFO, not a regular file" "$BUILD/tests/test_plan_dump" --dump "$tmp/f.json"
t mscclc_dump 1 "$tmp/f.json: a FIFO, not a regular file" "$BUILD/bin/mscclc" --dump "$tmp/f.json"
t mscclc_dump_missing 2 "$tmp/none.json" "$BUILD/bin/mscclc" --dump "$tmp/none.json"
exit $fail

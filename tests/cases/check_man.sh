#!/bin/sh
# check_man.sh - every manual page in man/ renders without a groff warning (make check-man), and
# every command and library has one.
cd "$(dirname "$0")/../.." || exit 2
st=0
for m in man/*.[0-9]; do
    if out=$(groff -mandoc -Tutf8 -ww -z "$m" 2>&1) && [ -z "$out" ]; then
        echo "testing man/$(basename "$m") ... passed"
    else
        echo "$out"; echo "testing man/$(basename "$m") ... failed"; st=1
    fi
done
for p in mscclc.1 mscclrt-run.1 mscclrt-perf.1 mscclrt-tune.1 libmscclrt.3 libmscclc.3 coll.5 mscclrt-plan.5 \
         libmscclrt_nccl.7; do
    [ -f "man/$p" ] || { echo "man/$p is missing"; echo "testing man/present-$p ... failed"; st=1; }
done
exit $st

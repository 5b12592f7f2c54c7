#!/bin/sh
# check_man.sh - every manual page in man/ renders without a groff warning (make check-man), and
# every command and library has one; each command's --help and its page's OPTIONS name the same
# options (neither drifts from the other), and no page or the README cites a document that is
# not shipped (the plan-format spec, the design notes).
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

# ---- options: --help against OPTIONS --------------------------------------------------------
BUILD=${BUILD:-build}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_man.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
# the option names in text: -x, --long, -ferror-limit (a value after = or a space is dropped)
opts() { grep -oE '(^|[][ |(,])--?[A-Za-z][A-Za-z0-9-]*' | sed 's/^[][ |(,]//' | sort -u; }
for cmd in mscclc mscclrt-run mscclrt-perf; do
    bin=$BUILD/bin/$cmd
    if [ ! -x "$bin" ]; then echo "testing man/options-$cmd ... skipped"; continue; fi
    "$bin" --help 2>&1 | opts >"$tmp/help"
    # the page's OPTIONS section, rendered, without overstriking: the lines naming options
    groff -mandoc -Tascii -P-cbou "man/$cmd.1" 2>/dev/null |
        awk '/^OPTIONS/ {on = 1; next} /^[A-Z][A-Z ]+$/ {on = 0} on' |
        grep -E '^ {5,8}-' | opts >"$tmp/man"
    if cmp -s "$tmp/help" "$tmp/man"; then
        echo "testing man/options-$cmd ... passed"
    else
        echo "$cmd: options in --help (<) and in man/$cmd.1 OPTIONS (>) differ:"
        diff "$tmp/help" "$tmp/man" | grep '^[<>]'
        echo "testing man/options-$cmd ... failed"; st=1
    fi
done

# ---- no citation of documents that are not shipped -------------------------------------------
if grep -nE 'spec (\\\(sc|§) ?[0-9]|plan-format\.md|shared/(spec|design)|design/language\.md' \
        man/*.[0-9] README.md python/README.md >"$tmp/refs"; then
    cat "$tmp/refs"; echo "testing man/no-unshipped-references ... failed"; st=1
else
    echo "testing man/no-unshipped-references ... passed"
fi
exit $st

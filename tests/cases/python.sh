#!/bin/sh
# python.sh - the Python package's tests (python/tests, pytest) in build/python-venv against the
# libraries in $BUILD/lib: one "testing python/<file>::<test> ... passed|failed|skipped" line per
# test, so that their counts reach the closing line of `make test`. Tests that need torch or a
# GPU skip themselves here.
cd "$(dirname "$0")/../.." || exit 2
BUILD=${BUILD:-build}
py=$BUILD/python-venv/bin/python
if [ ! -x "$py" ]; then
    echo "python.sh: $py is missing: run 'make python-venv' (make test does)"
    exit 1
fi
out=$BUILD/tests/python
mkdir -p "$out" || exit 2
MSCCLRT_LIB_DIR=$PWD/$BUILD/lib MSCCLRT_CACHE_DIR=$PWD/$out/cache PYTHONPATH=$PWD/python \
    PYTHONDONTWRITEBYTECODE=1 timeout 900 "$py" -m pytest -v -p no:cacheprovider \
    --junit-xml="$out/junit.xml" python/tests >"$out/pytest.log" 2>&1
st=$?
# "python/tests/test_x.py::test_y[param] PASSED   [ 10%]" -> "testing python/test_x.py::... passed"
# (parameter ids may hold spaces: they become underscores); a skip keeps pytest's reason:
# "... SKIPPED (needs torch)   [ 50%]" -> "testing python/... ... skipped (needs torch)"
tab=$(printf '\t')
sed -n -E 's#^python/tests/(.*) (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)( \((.*)\))? +\[ *[0-9]+%\]$#\2\t\1\t\4#p' \
    "$out/pytest.log" | while IFS=$tab read -r res name why; do
    name=$(printf '%s' "$name" | tr ' ' '_')
    case $res in
        PASSED|XFAIL) echo "testing python/$name ... passed" ;;
        SKIPPED) echo "testing python/$name ... skipped${why:+ ($why)}" ;;
        *) echo "testing python/$name ... failed" ;;
    esac
done >"$out/results.txt"
cat "$out/results.txt"
# every test pytest counted must have had its line
want=$(grep -E '^=+ .* in [0-9.]+s' "$out/pytest.log" | tail -n 1 | grep -oE '[0-9]+ (passed|failed|skipped|error)' |
       awk '{n += $1} END {print n + 0}')
got=$(wc -l <"$out/results.txt")
if [ "$want" != "$got" ]; then
    echo "python.sh: pytest counted $want tests, $got result lines were read from its log"
    echo "testing python/result_lines ... failed"
fi
tail -n 60 "$out/pytest.log" | sed -n '/= FAILURES =\|short test summary\|Error\|error/,$p' | tail -n 40
grep -E '^=+ .* in [0-9.]+s' "$out/pytest.log" | tail -n 1
# pytest: 0 all passed, 1 some failed, 5 nothing collected; anything else is a harness failure
case $st in 0|1) exit $st ;; 5) echo "python.sh: no tests collected"; exit 1 ;;
    124) echo "python.sh: pytest ran past 900 s"; exit 1 ;;
    *) echo "python.sh: pytest exited $st"; tail -n 20 "$out/pytest.log"; exit 1 ;; esac

#!/bin/sh
# check_params.sh - the ENVIRONMENT section of man/libmscclrt.3 lists exactly the environment
# variables of runtime/core/params.def (one ".B NAME" line per variable), no more, no fewer, and
# the entry of every INT variable states its range as params.def has it ("Decimal, MIN to MAX").
def=runtime/core/params.def
man=man/libmscclrt.3
[ -f "$man" ] || { echo "check_params: $man missing"; exit 1; }
want=$(sed -n 's/^PARAM([A-Z_0-9]*, *"\(MSCCLRT_[A-Z_0-9]*\)".*/\1/p' "$def" | sort)
env=$(sed -n '/^\.SH ENVIRONMENT/,/^\.SH /p' "$man")
got=$(printf '%s\n' "$env" | sed -n 's/^\.B \(MSCCLRT_[A-Z_0-9]*\).*/\1/p' | sort)
[ -n "$want" ] || { echo "check_params: no PARAM rows found in $def"; exit 1; }
if [ "$want" = "$got" ]; then
    echo "testing check_params ... passed"
else
    echo "check_params: $man ENVIRONMENT differs from $def (< params.def only, > man page only):"
    printf '%s\n' "$want" >"${TMPDIR:-/tmp}/check_params.want.$$"
    printf '%s\n' "$got" >"${TMPDIR:-/tmp}/check_params.got.$$"
    diff "${TMPDIR:-/tmp}/check_params.want.$$" "${TMPDIR:-/tmp}/check_params.got.$$" | grep '^[<>]'
    rm -f "${TMPDIR:-/tmp}/check_params.want.$$" "${TMPDIR:-/tmp}/check_params.got.$$"
    echo "testing check_params ... failed"
fi
# PARAM(E, "NAME", INT, default, min, max, "help"): the entry of NAME (up to the next .TP or
# .SH) must say "Decimal, min to max"
bad=0
rows=$(sed -n 's/^PARAM([A-Z_0-9]*, *"\(MSCCLRT_[A-Z_0-9]*\)", *INT, *[^,]*, *\([-0-9]*\), *\([-0-9]*\),.*/\1 \2 \3/p' "$def")
[ -n "$rows" ] || { echo "check_params: no INT rows with a range in $def"; bad=1; }
while read -r name lo hi; do
    [ -n "$name" ] || continue
    entry=$(printf '%s\n' "$env" | awk -v n=".B $name" '$0 == n { on = 1; next }
        on && (/^\.TP/ || /^\.SH/) { exit } on { printf "%s ", $0 }')
    case "$entry" in
        *"Decimal, $lo to $hi "*|*"Decimal, $lo to $hi"[.\;\ ]*) ;;
        *) echo "check_params: $man: the entry of $name does not say \"Decimal, $lo to $hi\" (params.def's range)"
           bad=1 ;;
    esac
done <<ROWS
$rows
ROWS
if [ "$bad" = 0 ]; then
    echo "testing check_params/ranges ... passed"
else
    echo "testing check_params/ranges ... failed"
fi
[ "$want" = "$got" ] && [ "$bad" = 0 ]

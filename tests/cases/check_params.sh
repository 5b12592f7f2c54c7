#!/bin/sh
# check_params.sh - the ENVIRONMENT section of man/libmscclrt.3 lists exactly the environment
# variables of runtime/core/params.def (one ".B NAME" line per variable), no more, no fewer.
def=runtime/core/params.def
man=man/libmscclrt.3
[ -f "$man" ] || { echo "check_params: $man missing"; exit 1; }
want=$(sed -n 's/^PARAM([A-Z_0-9]*, *"\(MSCCLRT_[A-Z_0-9]*\)".*/\1/p' "$def" | sort)
got=$(sed -n '/^\.SH ENVIRONMENT/,/^\.SH /p' "$man" | sed -n 's/^\.B \(MSCCLRT_[A-Z_0-9]*\).*/\1/p' | sort)
[ -n "$want" ] || { echo "check_params: no PARAM rows found in $def"; exit 1; }
if [ "$want" = "$got" ]; then
    echo "testing check_params ... passed"
    exit 0
fi
echo "check_params: $man ENVIRONMENT differs from $def (< params.def only, > man page only):"
printf '%s\n' "$want" >"${TMPDIR:-/tmp}/check_params.want.$$"
printf '%s\n' "$got" >"${TMPDIR:-/tmp}/check_params.got.$$"
diff "${TMPDIR:-/tmp}/check_params.want.$$" "${TMPDIR:-/tmp}/check_params.got.$$" | grep '^[<>]'
rm -f "${TMPDIR:-/tmp}/check_params.want.$$" "${TMPDIR:-/tmp}/check_params.got.$$"
echo "testing check_params ... failed"
exit 1

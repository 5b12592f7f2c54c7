#!/bin/sh
# codegen_stdlib.sh - generates and NVRTC-compiles (sm_90, no GPU needed) the CUDA source of
# every stdlib plan at N = 2, 4, 8 (the golden plans under tests/golden/stdlib), every rank,
# through test_codegen. Skips (77) when NVRTC cannot be loaded or no stdlib plan exists.
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
plans=$(ls tests/golden/stdlib/*/*.N[248].json 2>/dev/null)
[ -n "$plans" ] || { echo "skipped (needs tests/golden/stdlib/*/*.N[248].json)"; exit 77; }
# shellcheck disable=SC2086
exec "$BUILD/tests/test_codegen" $plans

#!/bin/sh
# pack_build.sh - a copy of a build for a GPU machine that cannot build (no flex, bison or cJSON
# there): its programs, libraries, headers and test binaries, stripped (the copy travels, so it
# is kept small), with the libcjson.so.1 they load placed in its lib/. Build the tests first
# (make all plus the test binaries, as `make test-gpu` does), then:
#   sh tests/gpu/pack_build.sh [SRC [DST]]        (default: build build-gpu)
# and on the GPU machine:  BUILD=build-gpu sh tests/gpu/run.sh
src=${1:-build}
dst=${2:-build-gpu}
[ -d "$src/lib" ] && [ -d "$src/bin" ] || { echo "pack_build.sh: $src has no lib/ and bin/ (build it first)" >&2; exit 1; }
cjson=$(ldd "$src/lib/libmscclrt.so.0" 2>/dev/null | sed -n 's/.*libcjson\.so\.1 => \([^ ]*\).*/\1/p')
[ -f "$cjson" ] || { echo "pack_build.sh: libmscclrt.so.0 does not resolve libcjson.so.1" >&2; exit 1; }
rm -rf "$dst"
mkdir -p "$dst"
for d in bin lib include tests; do
    [ -d "$src/$d" ] && cp -a "$src/$d" "$dst/"
done
rm -f "$dst"/lib/*.a
find "$dst" -type f \( -perm -u+x -o -name '*.so*' \) -exec strip --strip-unneeded {} + 2>/dev/null
cp -L "$cjson" "$dst/lib/libcjson.so.1"
echo "pack_build.sh: $dst ($(du -sh "$dst" | cut -f1))"

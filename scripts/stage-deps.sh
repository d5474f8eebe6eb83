#!/usr/bin/env bash
# Copies what the GPU machine cannot install (it has no network) into .deps, which device
# calls carry: nlohmann-json and CLI11 headers into .deps/include, GoogleTest's sources into
# .deps/googletest. The CUTLASS headers are already in .deps/cutlass (scripts/setup.sh); they
# are also packed into .deps/cutlass-include.tar.xz (1 MB instead of 27), which gpu-check.sh
# unpacks where the folder is missing: a call that carries large peers (FA4) has room for it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" >/dev/null
mkdir -p "$root/.deps/include"
cp -r /usr/include/nlohmann /usr/include/CLI "$root/.deps/include/"
rm -rf "$root/.deps/googletest" && cp -r /usr/src/googletest "$root/.deps/googletest"
tar cJf "$root/.deps/cutlass-include.tar.xz" -C "$root/.deps/cutlass/cutlass_library/source" include
echo "stage-deps: carry .deps/include .deps/googletest and .deps/cutlass/cutlass_library/source/include" \
  "(or .deps/cutlass-include.tar.xz)"

#!/usr/bin/env bash
# Copies what the GPU machine cannot install (it has no network) into .deps, which device
# calls carry: nlohmann-json and CLI11 headers into .deps/include, GoogleTest's sources into
# .deps/googletest. The CUTLASS headers are already in .deps/cutlass (scripts/setup.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh" >/dev/null
mkdir -p "$root/.deps/include"
cp -r /usr/include/nlohmann /usr/include/CLI "$root/.deps/include/"
rm -rf "$root/.deps/googletest" && cp -r /usr/src/googletest "$root/.deps/googletest"
echo "stage-deps: carry .deps/include .deps/googletest .deps/cutlass/cutlass_library/source/include"

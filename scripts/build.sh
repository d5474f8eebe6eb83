#!/usr/bin/env bash
# Set-up and build in one step: scripts/setup.sh, then configure and build BUILD_DIR
# (default build/). The kernel set is the full one where a GPU is present, the smaller CI set
# elsewhere (FLOE_KERNELS overrides).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
if [ -z "${FLOE_KERNELS:-}" ]; then
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then FLOE_KERNELS=full; else FLOE_KERNELS=ci; fi
fi
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
# FLOE_CMAKE_ARGS: more cache entries, space-separated (.ci/run's engine archs).
extra=(); [ -n "${FLOE_CMAKE_ARGS:-}" ] && read -ra extra <<<"$FLOE_CMAKE_ARGS"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DFLOE_KERNELS="$FLOE_KERNELS" "${extra[@]}"
else
  cmake -S "$root" -B "$build" -DFLOE_KERNELS="$FLOE_KERNELS" "${extra[@]}" >/dev/null
fi
jobs=${FLOE_JOBS:-$(nproc)}
cmake --build "$build" -j "$jobs"

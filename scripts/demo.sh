#!/usr/bin/env bash
# floe's main job on a fresh machine: set up, build, and run `floe demo` (forward and backward
# of a representative problem on the best engine available: the GPU where there is one, the
# CPU reference engine otherwise).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The demo needs no PyTorch: setup skips its 5 GB unless FLOE_TORCH says otherwise.
FLOE_TORCH=${FLOE_TORCH:-0} "$root/scripts/build.sh"
exec "${BUILD_DIR:-$root/build}/tools/floe/floe" demo "$@"

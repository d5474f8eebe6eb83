#!/usr/bin/env bash
# Set up, build, and run every test. GPU tests (label gpu) skip themselves without a GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "${FLOE_JOBS:-$(nproc)}" "$@"

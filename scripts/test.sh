#!/usr/bin/env bash
# Set up, build, and run every test. GPU tests (label gpu) skip themselves without a GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "${FLOE_JOBS:-$(nproc)}" "$@"
# The Python package over this build's libfloe.a, and tests/python (CPU cases without a GPU).
# FLOE_PYTHON=0 skips it.
if [ "${FLOE_PYTHON:-1}" != 0 ]; then
  FLOE_PY_PATH="$root/.deps/pybuild:$root/.deps/python:$root/.deps/torch" \
    "$root/scripts/python-test.sh"
fi

#!/usr/bin/env bash
# Set up, build, and run every test, then the fuzzers for a bounded time. GPU tests (label
# gpu) skip themselves without a GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
cd "${BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "${FLOE_JOBS:-$(nproc)}" "$@"
# Then the fuzzers, bounded (scripts/fuzz.sh, 30 s a target), on a full run only (no ctest
# arguments) and unless FLOE_FUZZ=0; skipped with a message where no clang with libFuzzer
# can be had.
if [ $# -eq 0 ] && [ "${FLOE_FUZZ:-1}" != 0 ]; then
  rc=0
  FLOE_FUZZ_SECONDS=${FLOE_FUZZ_SECONDS:-30} "$root/scripts/fuzz.sh" || rc=$?
  if [ "$rc" = 77 ]; then
    echo "test: fuzzing SKIPPED (no clang with libFuzzer; see above)"
  elif [ "$rc" != 0 ]; then
    exit "$rc"
  fi
fi
# Last, the Python package over this build's libfloe.a and tests/python (CPU cases without a
# GPU), on a full run only and unless FLOE_PYTHON=0.
if [ $# -eq 0 ] && [ "${FLOE_PYTHON:-1}" != 0 ]; then
  FLOE_PY_PATH="$root/.deps/pybuild:$root/.deps/python:$root/.deps/torch" \
    "$root/scripts/python-test.sh"
fi

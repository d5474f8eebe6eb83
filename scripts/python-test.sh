#!/usr/bin/env bash
# Builds the Python package (python/) into a folder and runs tests/python with pytest.
#
#   scripts/python-test.sh [PYTEST ARGS...]
#
# The package links the libfloe.a of an existing build of the root project when there is one
# (BUILD_DIR, default build/; FLOE_PREBUILT names another), so that no kernel is compiled twice;
# otherwise CMake builds floe itself (FLOE_KERNELS, FLOE_CUDA_ARCHS). pip runs without build
# isolation and without network: scikit-build-core, nanobind and pytest must be importable
# (scripts/setup.sh puts them in .deps/python; the GPU machine has them installed).
#   FLOE_PY_TARGET  where the package is installed (default .deps/floe-py)
#   FLOE_PY_PATH    more PYTHONPATH entries (scripts/test.sh: .deps/python and .deps/torch)
#   PYTHON          the interpreter (default python3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
target=${FLOE_PY_TARGET:-$root/.deps/floe-py}
build=${BUILD_DIR:-$root/build}
if [ -z "${FLOE_PREBUILT:-}" ] && [ -f "$build/libfloe.a" ]; then
  export FLOE_PREBUILT="$build/libfloe.a"
fi
export PYTHONPATH="${FLOE_PY_PATH:+$FLOE_PY_PATH:}${PYTHONPATH:-}"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
            -C cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
rm -rf "$target"
mkdir -p "$target"
echo "python-test: building the package into $target (floe: ${FLOE_PREBUILT:-built here})"
"$py" -m pip install -q --no-build-isolation --no-deps --no-index --disable-pip-version-check \
  --root-user-action=ignore --target "$target" "${launcher[@]}" "$root/python"
export PYTHONPATH="$target:$PYTHONPATH"
cd "$root"
"$py" -m pytest -q -p no:cacheprovider tests/python "$@"

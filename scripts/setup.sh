#!/usr/bin/env bash
# Installs what floe builds against, idempotently:
#  - Debian packages: nlohmann-json, CLI11, GoogleTest (skipped where .deps/include carries
#    them, as on the GPU machine, which has no network);
#  - the CUTLASS 4.2 headers from the nvidia-cutlass wheel, pip --no-deps, into .deps/cutlass;
#  - numpy into .deps/python, for the checks made outside floe (tests/cpu/external_check.py);
#  - the Python package's build tools and pytest into .deps/pybuild (scikit-build-core,
#    nanobind), and torch from PyPI into .deps/torch for tests/python (FLOE_TORCH=0 skips it:
#    torch's Linux wheel brings its CUDA libraries, about 5 GB, 3 minutes on CI's network).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps="$root/.deps"
mkdir -p "$deps"

have_headers() { [ -f /usr/include/nlohmann/json.hpp ] && [ -f /usr/include/CLI/CLI.hpp ] &&
                 [ -d /usr/src/googletest ] || [ -f "$deps/include/nlohmann/json.hpp" ]; }
if ! have_headers; then
  if command -v apt-get >/dev/null; then
    sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
    # Another apt (a boot-time unattended upgrade, a second set-up) may hold its locks: apt-get
    # update fails at once on the lists lock (DPkg::Lock::Timeout covers only dpkg's), so both
    # calls are retried for up to five minutes.
    apt_retry() {
      local i
      for i in $(seq 1 30); do
        "$@" && return 0
        echo "setup: apt-get failed (attempt $i of 30; another apt holding its lock?), again in 10 s" >&2
        sleep 10
      done
      return 1
    }
    apt_retry $sudo_ apt-get update -qq
    apt_retry $sudo_ env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=60 install \
      -y -qq nlohmann-json3-dev libcli11-dev libgtest-dev googletest cmake ninja-build >/dev/null
  else
    echo "setup: no apt-get and no .deps/include: install nlohmann-json, CLI11 and GoogleTest" >&2
    exit 1
  fi
fi

if [ ! -f "$deps/cutlass/cutlass_library/source/include/cute/tensor.hpp" ]; then
  python3 -m pip install -q --root-user-action=ignore --no-deps --disable-pip-version-check --target "$deps/cutlass" \
    nvidia-cutlass==4.2.0.0
fi
# The include dir as the wheel itself reports it, checked against where CMake looks.
inc=$(PYTHONPATH="$deps/cutlass" python3 -c \
  'import cutlass_library, os; print(os.path.join(cutlass_library.source_path, "include"))' \
  2>/dev/null || echo "$deps/cutlass/cutlass_library/source/include")
[ -f "$inc/cute/tensor.hpp" ] || { echo "setup: CUTLASS headers missing at $inc" >&2; exit 1; }

if ! PYTHONPATH="$deps/python" python3 -c 'import numpy' 2>/dev/null; then
  python3 -m pip install -q --root-user-action=ignore --disable-pip-version-check --target "$deps/python" numpy ||
    echo "setup: numpy not installed; the checks made outside floe will be skipped" >&2
fi
pip_target() {  # DIR PACKAGE...
  local dir=$1
  shift
  python3 -m pip install -q --root-user-action=ignore --disable-pip-version-check --no-cache-dir \
    --target "$dir" "$@"
}
if ! PYTHONPATH="$deps/pybuild" python3 -c 'import scikit_build_core, nanobind, pytest' 2>/dev/null; then
  pip_target "$deps/pybuild" scikit-build-core nanobind pytest ||
    echo "setup: scikit-build-core, nanobind or pytest not installed; the Python tests will not run" >&2
fi
if [ "${FLOE_TORCH:-1}" != 0 ] && ! PYTHONPATH="$deps/torch" python3 -c 'import torch' 2>/dev/null; then
  rm -rf "$deps/torch"
  pip_target "$deps/torch" torch ||
    echo "setup: torch not installed; the PyTorch tests (tests/python) will be skipped" >&2
fi
echo "setup: ok (CUTLASS at $inc)"

#!/usr/bin/env bash
# Session 14's official run (H200), detached (scripts/detach.sh) across device calls, one build:
#   1. the full kernel set for sm_90a
#   2. d256's deterministic backward against the default (S 4k, 16k; causal and not)
#   3. the sm90-pinned backward battery at d192/128 (the staged dK/dV epilogue at Dv < Dqk, which
#      the held-back step of session 14's first job did not reach)
#   4. the GPU tests (ctest -L gpu, quick battery)
#   5. floe bench (every default group) and bench/peers.py with PyTorch's flash and cuDNN
#      backends and FlashAttention 4 once the second call has installed it into /tmp/fa4site
#      (the call touches /tmp/fa4site/.complete)
# Each step is capped so a slow one cannot starve the ones after it.
#   scripts/sessions/2026-12-02-s14b.sh RESULTS_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
R=${1:?usage: 2026-12-02-s14b.sh RESULTS_DIR}
B=/tmp/floe-b14b
mkdir -p "$R"
check() { timeout "$1" "$root/scripts/gpu-check.sh" "${@:2}" --build-dir "$B"; }
floe=$B/tools/floe/floe
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }

stamp build
check 600 "$R/build" --archs 90a --steps configure,build
cp "$B/.ninja_log" "$R/ninja_log.txt" 2>/dev/null

stamp det-d256
for args in "--s-q 4096" "--s-q 4096 --causal" "--b 1 --s-q 16384" "--b 1 --s-q 16384 --causal"; do
  for det in "" "--deterministic"; do
    # shellcheck disable=SC2086
    timeout 60 "$floe" bench --direction bwd --h-q 8 --d-qk 256 $args $det 2>&1 | grep -E '^\[1/1\]'
  done
done >"$R/det-d256.txt"

stamp battery-d192
FLOE_HEAD_DIMS=192/128 FLOE_ENGINE=sm90 FLOE_DIRECTIONS=bwd FLOE_LAYOUT=aligned FLOE_BATTERY=quick \
  FLOE_FAILURE_DIR="$R/failures-d192" timeout 180 "$B/tests/battery_test" >"$R/battery-d192.log" 2>&1
echo "battery-d192 rc $?"

stamp gpu-tests
check 600 "$R/gpu" --steps gpu

stamp bench
for _ in $(seq 1 60); do [ -f /tmp/fa4site/.complete ] && break; sleep 5; done
[ -f /tmp/fa4site/.complete ] && export FLOE_FA4_SITE=/tmp/fa4site
check 1000 "$R/bench" --steps bench

stamp end

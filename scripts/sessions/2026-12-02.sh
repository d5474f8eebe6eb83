#!/usr/bin/env bash
# Session 12's device job (H200), run detached (scripts/detach.sh) so that it spans device calls
# with one build:
#   1. the full kernel set for sm_90a (the GPU's architecture; 80;90a was 405 s at 6c8b7bd)
#   2. A/B of plan knobs on one build: the causal forward's schedule (a CTA per tile vs L2
#      sections longest first, persistent or not), the d128 backward on 64-row query tiles
#   3. what is held back behind opt-in knobs, opted in (gpu-check.sh's held-back step), and the
#      sm90-pinned forward battery (session 11 changed how every sm90 launch builds its TMA views)
#   4. floe bench (every group) and bench/peers.py with FlashAttention 4 when the second call has
#      installed it into /tmp/fa4site
#   5. the GPU tests (ctest -L gpu, quick battery)
# Each step is capped so a slow one cannot starve the ones after it.
#   scripts/sessions/2026-12-02.sh RESULTS_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
R=${1:?usage: 2026-12-02.sh RESULTS_DIR}
B=/tmp/floe-b12
mkdir -p "$R"
check() { timeout "$1" "$root/scripts/gpu-check.sh" "${@:2}" --build-dir "$B"; }
floe=$B/tools/floe/floe
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }

stamp build
check 900 "$R/build" --archs 90a --steps configure,build
cp "$B/.ninja_log" "$R/ninja_log.txt" 2>/dev/null

stamp ab-fwd-schedule
timeout 420 "$root/scripts/ab-env.sh" "$R/ab-fwd" "$floe" base \
  'l2grid:FLOE_SM90_FWD_SCHEDULE=lptl2:1000000' 'l2pers:FLOE_SM90_FWD_SCHEDULE=lptl2' \
  -- --group sweep --direction fwd --filter causal

stamp ab-bwd-tile
timeout 300 "$root/scripts/ab-env.sh" "$R/ab-bwd" "$floe" base 'm64:FLOE_SM90_BWD_TILE=d128m64' \
  -- --group sweep --direction bwd --filter d128

stamp held-back
check 600 "$R/held" --steps held-back

stamp battery-sm90-fwd
FLOE_ENGINE=sm90 FLOE_DIRECTIONS=fwd FLOE_LAYOUT=aligned FLOE_BATTERY=quick \
  FLOE_FAILURE_DIR="$R/failures-sm90-fwd" timeout 300 "$B/tests/battery_test" \
  >"$R/battery-sm90-fwd.log" 2>&1
echo "battery-sm90-fwd rc $?"

stamp ab-serving
timeout 240 "$root/scripts/ab-env.sh" "$R/ab-serving" "$floe" --rounds 1 base \
  'optin:FLOE_SM90_PAGED=1,FLOE_SM90_RAGGED_ONE_SIDE=1,FLOE_SM90_BWD_SOFTCAP=1' \
  -- --group serving :: --group features --filter softcap

stamp bench
for _ in $(seq 1 24); do [ -d /tmp/fa4site ] && break; sleep 5; done
[ -d /tmp/fa4site ] && export FLOE_FA4_SITE=/tmp/fa4site
check 900 "$R/bench" --steps bench

stamp gpu-tests
check 900 "$R/gpu" --steps gpu
stamp end

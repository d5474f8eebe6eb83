#!/usr/bin/env bash
# Session 13's second device job (H200), on one build of the full kernel set for sm_90a:
#   1. d92ce45's fix of the serving kernels' setmaxnreg hang: the serving and non-finite GPU tests
#      (b106b3d's softcap backward among them), each capped at 120 s
#   2. the d256 backward (bwd_wide_kernel.cuh, held back behind FLOE_SM90_BWD_D256=1) opted in:
#      the sm90-pinned backward battery at d256 (quick), then the d256 sweep against sm80 (the
#      default) on one build, and the paged chunked prefill and the softcap backward timed
#   3. the determinism, graph and stream tests, d256 opted in (capped)
# Every step is capped so a hang cannot starve the ones after it. Run detached (scripts/detach.sh).
#   scripts/sessions/2026-12-02-s13b.sh RESULTS_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
R=${1:?usage: 2026-12-02-s13b.sh RESULTS_DIR}
B=/tmp/floe-b13b
mkdir -p "$R"
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }

stamp build
timeout 600 "$root/scripts/gpu-check.sh" "$R/build" --archs 90a --steps configure,build \
  --build-dir "$B"
stamp tests-serving
timeout 300 ctest --test-dir "$B" -L gpu -R 'Serving|NonFinite' --timeout 120 \
  --output-on-failure >"$R/tests-serving.log" 2>&1
echo "rc $?" >>"$R/tests-serving.log"
stamp battery-d256
FLOE_SM90_BWD_D256=1 FLOE_HEAD_DIMS=256/256 FLOE_ENGINE=sm90 FLOE_DIRECTIONS=bwd \
  FLOE_LAYOUT=aligned FLOE_BATTERY=quick FLOE_FAILURE_DIR="$R/failures-d256" \
  timeout 180 "$B/tests/battery_test" >"$R/battery-d256.log" 2>&1
echo "rc $?" >>"$R/battery-d256.log"
stamp ab-d256
timeout 150 "$root/scripts/ab-env.sh" "$R/ab-d256" "$B/tools/floe/floe" --rounds 1 base \
  'wide:FLOE_SM90_BWD_D256=1' -- --group sweep --direction bwd --filter ' d256'
stamp bench-other
timeout 90 "$B/tools/floe/floe" bench --group serving --filter q1024 --json "$R/prefill.json" \
  >"$R/prefill.txt" 2>&1
timeout 90 "$B/tools/floe/floe" bench --group features --direction bwd --filter softcap \
  --filter plain --json "$R/softcap.json" >"$R/softcap.txt" 2>&1
stamp tests-rest
FLOE_SM90_BWD_D256=1 timeout 240 ctest --test-dir "$B" -L gpu -R 'Determinism|Graph|Streams' \
  --timeout 120 --output-on-failure >"$R/tests-rest.log" 2>&1
echo "rc $?" >>"$R/tests-rest.log"
stamp end

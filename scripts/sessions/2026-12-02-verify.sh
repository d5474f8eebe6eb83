#!/usr/bin/env bash
# Session 12's second device job: the defaults adopted from the first (the causal forward's L2
# list, d128's 64-row backward tile by mask and length; the held-back features served without
# knobs) checked where they change what runs: the determinism, non-finite, serving, graph and
# stream tests, the sm90-pinned quick batteries, then the sweep and the new paged chunked prefill
# timed. Writes at most seven files into RESULTS_DIR, each as soon as its step ends.
#   scripts/sessions/2026-12-02-verify.sh RESULTS_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
R=${1:?usage: 2026-12-02-verify.sh RESULTS_DIR}
B=/tmp/floe-b12v
W=/tmp/floe-b12v-results
mkdir -p "$R" "$W"
"$root/scripts/gpu-check.sh" "$W/build" --archs 90a --steps configure,build --build-dir "$B" \
  >"$R/build.txt" 2>&1
cat "$W/build/build-slowest.txt" >>"$R/build.txt" 2>/dev/null
ctest --test-dir "$B" -L gpu -R 'NonFinite|Serving|Determinism|Graph|Streams' --timeout 300 \
  --output-on-failure >"$R/tests.log" 2>&1
echo "ctest rc $?" >>"$R/tests.log"
{
  for dir in fwd bwd; do
    FLOE_ENGINE=sm90 FLOE_DIRECTIONS=$dir FLOE_LAYOUT=aligned FLOE_BATTERY=quick \
      FLOE_FAILURE_DIR="$W/failures-$dir" "$B/tests/battery_test"
    echo "battery $dir rc $?"
  done
} >"$R/battery.log" 2>&1
"$B/tools/floe/floe" bench --group serving --filter q1024 --filter s1024x8192 \
  --json "$R/prefill.json" >"$R/prefill.txt" 2>&1
"$B/tools/floe/floe" bench --group sweep --json "$R/sweep.json" >"$R/sweep.txt" 2>&1
echo "verify: done"

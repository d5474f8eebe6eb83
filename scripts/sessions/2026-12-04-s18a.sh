#!/usr/bin/env bash
# Session 18's job, written there but not run (no GPU was lent): for the next session, on an
# H200 in two device calls through scripts/detach.sh. The deterministic summed dBias of sm90's
# bias kernel (bwd_dbias_order.cuh: one turn a pair of the sum at each accumulator tile), on the
# full kernel set for sm_90a (the d64 and d192 / 128 bias kernels too, on the GPU last at
# 53f1f2f):
#   1. build; the scheduler and plan tests
#   2. the sm90-pinned backward battery on bias cases in deterministic mode at d128, d64 and
#      d192 / 128, and in the default mode at d64 and d192 / 128
#   3. Determinism (sm90 pinned, then auto), NonFinite pinned to sm90
#   4. floe bench: the bias [1, 16], [16 heads summed] and [1, 1] backward, default and
#      deterministic; the plain backward both ways; --group features with the peers
#   5. memcheck, racecheck and synccheck over a small deterministic bias battery
#   6. the GPU tests (ctest -L gpu)
#   scripts/sessions/2026-12-04-s18a.sh RESULTS_DIR
set -uo pipefail
R=${1:?usage: 2026-12-04-s18a.sh RESULTS_DIR}
B=/tmp/floe-b18a
source "$(dirname "$0")/lib.sh"
# The ordered sum is held back behind its knob (bwd_plan.cc): opted in for every step.
export FLOE_SM90_BWD_DBIAS_ORDERED=1

stamp build
check 420 "$R/build" --kernels full --archs 90a --steps configure,build
unit tile_scheduler_test sm90_bwd_plan_test
battery det-d128 120 FLOE_FEATURES=bias,deterministic FLOE_HEAD_DIMS=128/128 FLOE_BATTERY=quick \
  FLOE_BATTERY_CASES=500
battery det-d64 90 FLOE_FEATURES=bias,deterministic FLOE_HEAD_DIMS=64/64 FLOE_BATTERY=quick \
  FLOE_BATTERY_CASES=300
battery det-d192x128 90 FLOE_FEATURES=bias,deterministic FLOE_HEAD_DIMS=192/128 \
  FLOE_BATTERY=quick FLOE_BATTERY_CASES=300
battery d64 90 FLOE_FEATURES=bias,-deterministic FLOE_HEAD_DIMS=64/64 FLOE_BATTERY=quick \
  FLOE_BATTERY_CASES=300
battery d192x128 90 FLOE_FEATURES=bias,-deterministic FLOE_HEAD_DIMS=192/128 FLOE_BATTERY=quick \
  FLOE_BATTERY_CASES=300
stamp determinism
FLOE_ENGINE=sm90 timeout 120 "$B/tests/determinism_test" >"$R/determinism-sm90.log" 2>&1
echo "determinism sm90 rc $?"
grep -E '^\[determinism\]|FAILED|PASSED' "$R/determinism-sm90.log" | sort | uniq -c | head -40
timeout 120 "$B/tests/determinism_test" >"$R/determinism-auto.log" 2>&1
echo "determinism auto rc $?"
grep -E 'FAILED|PASSED' "$R/determinism-auto.log"
FLOE_ENGINE=sm90 FLOE_DIRECTIONS=bwd FLOE_FAILURE_DIR="$R/failures-nonfinite" \
  timeout 90 "$B/tests/nonfinite_test" >"$R/nonfinite-sm90.log" 2>&1
echo "nonfinite rc $?"
stamp bench
for mode in "" "--deterministic"; do
  for bh in "1 16" "4 1" "1 1"; do
    out="$R/bench-bias-${bh// /x}${mode:+-det}.txt"
    FLOE_COMMIT=${FLOE_COMMIT:-} timeout 40 "$floe" bench --direction bwd --bias $bh $mode \
      >"$out" 2>&1
    echo "bias $bh $mode rc $?"
    tail -n 2 "$out"
  done
  out="$R/bench-plain${mode:+-det}.txt"
  FLOE_COMMIT=${FLOE_COMMIT:-} timeout 40 "$floe" bench --direction bwd $mode >"$out" 2>&1
  echo "plain $mode rc $?"
  tail -n 2 "$out"
done
check 120 "$R/bench" --steps bench --bench-args '--group features'
grep -E '^\| (plain|bias|deterministic)' "$R/bench/perf.md" | head -8
for tool in memcheck racecheck synccheck; do
  sanitize "$tool" det-bias FLOE_FEATURES=bias,deterministic FLOE_BATTERY=smoke \
    FLOE_BATTERY_CASES=100
done
stamp gpu-tests
check 300 "$R/gpu" --steps gpu
stamp end

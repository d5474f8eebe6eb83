#!/usr/bin/env bash
# Session 19's short job (its GPU came late, if at all): the part of 2026-12-04-s18a.sh that
# decides whether the deterministic summed dBias (bwd_dbias_order.cuh) may lose its knob, in one
# device call of about ten minutes: the full sm_90a kernel set, the plan and scheduler tests,
# the deterministic bias batteries at d128, d64 and d192 / 128, Determinism with sm90 pinned,
# the bias [1, 16] backward timed default and deterministic, memcheck and racecheck over a small
# deterministic bias battery. The knob is exported so that the job means the same on a tree that
# still reads it and on one that no longer does.
#   scripts/sessions/2026-12-05-s19a.sh RESULTS_DIR
set -uo pipefail
R=${1:?usage: 2026-12-05-s19a.sh RESULTS_DIR}
B=/tmp/floe-b19a
source "$(dirname "$0")/lib.sh"
export FLOE_SM90_BWD_DBIAS_ORDERED=1

stamp build
check 300 "$R/build" --kernels full --archs 90a --steps configure,build
unit tile_scheduler_test sm90_bwd_plan_test sm90_dbias_turns_test
battery det-d128 75 FLOE_FEATURES=bias,deterministic FLOE_HEAD_DIMS=128/128 FLOE_BATTERY=quick \
  FLOE_BATTERY_CASES=300
battery det-d64 50 FLOE_FEATURES=bias,deterministic FLOE_HEAD_DIMS=64/64 FLOE_BATTERY=quick \
  FLOE_BATTERY_CASES=150
battery det-d192x128 50 FLOE_FEATURES=bias,deterministic FLOE_HEAD_DIMS=192/128 \
  FLOE_BATTERY=quick FLOE_BATTERY_CASES=150
stamp determinism
FLOE_ENGINE=sm90 timeout 90 "$B/tests/determinism_test" >"$R/determinism-sm90.log" 2>&1
echo "determinism sm90 rc $?"
grep -E '^\[determinism\] sm90-dbias|FAILED|PASSED' "$R/determinism-sm90.log" | head -20
stamp bench
for mode in "" "--deterministic"; do
  out="$R/bench-bias-1x16${mode:+-det}.txt"
  FLOE_COMMIT=${FLOE_COMMIT:-} timeout 40 "$floe" bench --direction bwd --bias 1 16 $mode \
    >"$out" 2>&1
  echo "bias 1 16 $mode rc $?"
  tail -n 2 "$out"
done
for tool in memcheck racecheck; do
  sanitize "$tool" det-bias FLOE_FEATURES=bias,deterministic FLOE_BATTERY=smoke \
    FLOE_BATTERY_CASES=60
done
stamp end

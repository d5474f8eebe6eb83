#!/usr/bin/env bash
# Session 20's job: the deterministic summed dBias with its turns kept by a producer warp
# (bwd_dbias_order.cuh's keep_dbias_turns) instead of the consumers. The full sm_90a kernel set,
# the plan and scheduler tests, the deterministic bias batteries at d128, d64 and d192 / 128,
# Determinism with sm90 pinned, the bias [1, 16] backward timed default and deterministic in one
# run, then memcheck, racecheck and synccheck over a small deterministic bias battery.
#   scripts/sessions/2026-12-05-s20a.sh RESULTS_DIR
set -uo pipefail
R=${1:?usage: 2026-12-05-s20a.sh RESULTS_DIR}
B=/tmp/floe-b20a
source "$(dirname "$0")/lib.sh"

stamp build
check 300 "$R/build" --kernels full --archs 90a --steps configure,build
unit tile_scheduler_test sm90_bwd_plan_test sm90_dbias_turns_test
stamp bench
bench_pair bias-1x16 --direction bwd --bias 1 16
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
bench_pair bias-4x1 --direction bwd --bias 4 1
for tool in memcheck racecheck synccheck; do
  sanitize "$tool" det-bias FLOE_FEATURES=bias,deterministic FLOE_BATTERY=smoke \
    FLOE_BATTERY_CASES=60
done
stamp end

#!/usr/bin/env bash
# Session 15, second job (H200; its one attempt stopped at a CPU test's compile error with the
# device time spent, so it is the next session's first job): the summed dBias of sm90's
# bias kernel (bwd_bias.cuh's reductions, bwd_dbias_convert.cuh), on the ci kernel set for sm_90a
# (d128 and d128m64: the bias kernel's d128 tile):
#   1. build
#   2. the sm90-pinned backward battery at d128 on bias cases, broadcasts (summed dBias) included
#   3. floe bench --group features (plain, bias with its gradient summed over the batch, bias
#      without one) and peers.py with PyTorch's flash and cuDNN backends
#   4. memcheck over a small such battery
#   scripts/sessions/2026-12-02-s15c.sh RESULTS_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
R=${1:?usage: 2026-12-02-s15c.sh RESULTS_DIR}
B=/tmp/floe-b15c
mkdir -p "$R"
check() { timeout "$1" "$root/scripts/gpu-check.sh" "${@:2}" --build-dir "$B"; }
battery=$B/tests/battery_test
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }
# The summed dBias is held back behind its knob (bwd_plan.cc): opted in for every step.
export FLOE_SM90_BWD_DBIAS_SUM=1
# FLOE_KEYS_MULTIPLE=8: keys in whole 16-byte bias rows, which the bias kernel needs (most cases
# would decline otherwise).
pinned() {
  env FLOE_ENGINE=sm90 FLOE_DIRECTIONS=bwd FLOE_LAYOUT=aligned FLOE_HEAD_DIMS=128/128 \
    FLOE_KEYS_MULTIPLE=8 "$@"
}

stamp build
check 190 "$R/build" --kernels ci --archs 90a --steps configure,build
stamp battery-bias
pinned FLOE_FEATURES=bias FLOE_BATTERY=quick FLOE_BATTERY_CASES=300 \
  FLOE_FAILURE_DIR="$R/failures-bias" timeout 25 "$battery" >"$R/battery-bias.log" 2>&1
echo "battery-bias rc $?"
grep -E '^\[battery\] backward' "$R/battery-bias.log"
stamp bench
check 45 "$R/bench" --steps bench --bench-args '--group features'
grep -E 'bias|plain' "$R/bench/bench.log" | head -8
stamp memcheck
pinned FLOE_FEATURES="bias,bias b-broadcast" FLOE_BATTERY=smoke FLOE_BATTERY_CASES=40 \
  FLOE_HARNESS_THREADS=4 FLOE_FAILURE_DIR="$R/failures-memcheck" timeout 25 \
  "$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)" --tool memcheck \
  --leak-check no --padding 64 --error-exitcode 86 --print-limit 20 "$battery" >"$R/memcheck-bias.log" 2>&1
echo "memcheck rc $?"
grep -E 'ERROR SUMMARY|^\[battery\] backward:' "$R/memcheck-bias.log"
stamp end

#!/usr/bin/env bash
# Session 16, first job (H200): the summed dBias served (no knob) with its grid in sibling order
# (KeyTileScheduler kSiblings), and session 15's mended bias kernel (941bea6), on the ci kernel
# set for sm_90a (d128, d128m64: the d64 and d192 batteries decline):
#   1. build
#   2. the sm90-pinned backward battery on bias cases (broadcasts, so summed dBias, included) at
#      d128, d64 and d192/128, keys a multiple of 8 (whole 16-byte bias rows)
#   3. NonFinite pinned to sm90, Determinism
#   4. floe bench --group features with peers; the bias [1, 16], [4, 1] and [1, 1] backward
#   5. memcheck and racecheck over a small such battery
#   6. the GPU tests (ctest -L gpu)
#   scripts/sessions/2026-12-02-s16a.sh RESULTS_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
R=${1:?usage: 2026-12-02-s16a.sh RESULTS_DIR}
B=/tmp/floe-b16a
mkdir -p "$R"
check() { timeout "$1" "$root/scripts/gpu-check.sh" "${@:2}" --build-dir "$B"; }
floe=$B/tools/floe/floe
battery=$B/tests/battery_test
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }
pinned() {
  env FLOE_ENGINE=sm90 FLOE_DIRECTIONS=bwd FLOE_LAYOUT=aligned FLOE_KEYS_MULTIPLE=8 "$@"
}

stamp build
check 300 "$R/build" --kernels ci --archs 90a --steps configure,build
for t in tile_scheduler_test sm90_bwd_plan_test; do timeout 60 "$B/tests/$t" >"$R/$t.log" 2>&1; echo "$t rc $?"; tail -n 3 "$R/$t.log"; done
for hd in 128/128:600 64/64:400 192/128:400; do
  n=${hd%:*}
  n=${n//\//x}
  stamp "battery-bias-$n"
  pinned FLOE_FEATURES=bias FLOE_HEAD_DIMS=${hd%:*} FLOE_BATTERY=quick FLOE_BATTERY_CASES=${hd#*:} \
    FLOE_FAILURE_DIR="$R/failures-bias-$n" timeout 90 "$battery" >"$R/battery-bias-$n.log" 2>&1
  echo "battery-bias-$n rc $?"
  grep -E '^\[battery\] backward' "$R/battery-bias-$n.log"
done
stamp nonfinite-determinism
FLOE_ENGINE=sm90 FLOE_DIRECTIONS=bwd FLOE_FAILURE_DIR="$R/failures-nonfinite" \
  timeout 90 "$B/tests/nonfinite_test" >"$R/nonfinite-sm90.log" 2>&1
echo "nonfinite rc $?"
timeout 90 "$B/tests/determinism_test" >"$R/determinism.log" 2>&1
echo "determinism rc $?"
stamp bench
check 90 "$R/bench" --steps bench --bench-args '--group features'
grep -E '^\| (plain|bias)' "$R/bench/perf.md" | head -8
for bh in "1 16" "4 1" "1 1"; do
  FLOE_COMMIT=${FLOE_COMMIT:-} timeout 30 "$floe" bench --direction bwd --bias $bh \
    >"$R/bench-bias-${bh// /x}.txt" 2>&1
  tail -n 3 "$R/bench-bias-${bh// /x}.txt"
done
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  stamp "$tool"
  extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check no --padding 64)
  pinned FLOE_FEATURES=bias FLOE_BATTERY=smoke FLOE_BATTERY_CASES=120 FLOE_HARNESS_THREADS=4 \
    FLOE_FAILURE_DIR="$R/failures-$tool" timeout 90 "$san" --tool "$tool" "${extra[@]}" \
    --error-exitcode 86 --print-limit 20 "$battery" >"$R/$tool-bias.log" 2>&1
  echo "$tool rc $?"
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[battery\] backward:' "$R/$tool-bias.log"
done
stamp gpu-tests
check 240 "$R/gpu" --steps gpu
stamp end

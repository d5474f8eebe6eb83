#!/usr/bin/env bash
# Session 15 (H200): the sm90 bias backward (bwd_bias.cuh), detached (scripts/detach.sh) across
# device calls, one build:
#   1. the full kernel set for sm_90a
#   2. the sm90-pinned backward battery on bias cases only (FLOE_FEATURES): a dBias of the
#      problem's batch and heads at each head dim the bias kernel has (d128, d64, d192/128), and
#      broadcast biases without dBias (FLOE_BIAS_GRAD=0)
#   3. NonFinite.Backward pinned to sm90 (its bias_causal_padded problem), Determinism
#   4. memcheck, racecheck and synccheck over a small sm90-pinned bias battery
#   5. floe bench --group features (bias with dBias: sm80; bias without: sm90) and peers.py with
#      PyTorch's flash and cuDNN backends on the same problems; the d128 backward sweep (the plain
#      kernel, against session 14's official run)
#   6. the GPU tests (ctest -L gpu, quick battery)
# Each step is capped so a slow one cannot starve the ones after it.
#   scripts/sessions/2026-12-02-s15a.sh RESULTS_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
R=${1:?usage: 2026-12-02-s15a.sh RESULTS_DIR}
B=/tmp/floe-b15a
mkdir -p "$R"
check() { timeout "$1" "$root/scripts/gpu-check.sh" "${@:2}" --build-dir "$B"; }
floe=$B/tools/floe/floe
battery=$B/tests/battery_test
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }
unsummed="bias,-bias b-broadcast,-bias h-broadcast"
pinned() { env FLOE_ENGINE=sm90 FLOE_DIRECTIONS=bwd FLOE_LAYOUT=aligned FLOE_BATTERY=quick "$@"; }

stamp build
check 600 "$R/build" --archs 90a --steps configure,build
cp "$B/.ninja_log" "$R/ninja_log.txt" 2>/dev/null

# Most random cases decline (bias rows TMA cannot address, s_kv not a multiple of 8), quickly:
# many cases give the kernel a few dozen each.
for hd in 128/128:900 64/64:600 192/128:600; do
  n=${hd%:*}
  n=${n//\//x}
  stamp "battery-bias-$n"
  pinned FLOE_FEATURES="$unsummed" FLOE_HEAD_DIMS=${hd%:*} FLOE_BATTERY_CASES=${hd#*:} \
    FLOE_FAILURE_DIR="$R/failures-bias-$n" timeout 150 "$battery" >"$R/battery-bias-$n.log" 2>&1
  echo "battery-bias-$n rc $?"
done
stamp battery-bias-nograd
pinned FLOE_FEATURES=bias FLOE_BIAS_GRAD=0 FLOE_BATTERY_CASES=600 \
  FLOE_FAILURE_DIR="$R/failures-bias-nograd" timeout 150 "$battery" >"$R/battery-bias-nograd.log" 2>&1
echo "battery-bias-nograd rc $?"

stamp nonfinite-determinism
FLOE_ENGINE=sm90 FLOE_DIRECTIONS=bwd FLOE_FAILURE_DIR="$R/failures-nonfinite" \
  timeout 120 "$B/tests/nonfinite_test" >"$R/nonfinite-sm90.log" 2>&1
echo "nonfinite rc $?"
timeout 120 "$B/tests/determinism_test" >"$R/determinism.log" 2>&1
echo "determinism rc $?"

san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do
  stamp "$tool"
  extra=()
  [ "$tool" = memcheck ] && extra=(--leak-check no --padding 64)
  pinned FLOE_FEATURES="$unsummed" FLOE_BATTERY=smoke FLOE_BATTERY_CASES=300 FLOE_HARNESS_THREADS=4 \
    FLOE_FAILURE_DIR="$R/failures-$tool" timeout 150 "$san" --tool "$tool" "${extra[@]}" \
    --error-exitcode 86 --print-limit 20 "$battery" >"$R/$tool-bias.log" 2>&1
  echo "$tool rc $?"
done

stamp bench-features
check 400 "$R/bench" --steps bench --bench-args '--group features'
stamp bench-d128-bwd
FLOE_COMMIT=${FLOE_COMMIT:-} timeout 120 "$floe" bench --group sweep --direction bwd --filter d128 \
  >"$R/sweep-d128-bwd.txt" 2>&1
echo "sweep rc $?"

stamp gpu-tests
check 600 "$R/gpu" --steps gpu

stamp end

#!/usr/bin/env bash
# One device call for sm80's serving kernels (issue 16), on prebuilt binaries carried in
# BIN (built here with FLOE_KERNELS=ci, FLOE_CUDA_ARCHS=90a): the serving GPU tests (generic and
# sm80 pinned), compute-sanitizer memcheck and racecheck over the sm80 serving cases (one per
# config), floe bench --group serving with sm80, and the dense problem of the ragged prefill's
# FLOPs (8 x 2660 causal, the same visible pairs as its 8 packed sequences). Logs into OUT.
#   scripts/serve80-device.sh BIN OUT
set -u
bin=$1
out=$2
mkdir -p "$out"
step() {  # step NAME SECONDS CMD...: its output in OUT/NAME.log, its time and status in steps.txt
  local name=$1 secs=$2
  shift 2
  local t0=$(date +%s%N)
  timeout "$secs" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((($(date +%s%N) - t0) / 1000000)) ms" | tee -a "$out/steps.txt"
}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version --format=csv >"$out/gpu.txt" 2>&1
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step serving_test 30 "$bin/serving_test"
step memcheck 25 env FLOE_SERVING_REPS=1 "$san" --tool memcheck --error-exitcode 1 \
  "$bin/serving_test" --gtest_filter=Serving.Sm80RaggedAndPagedMatchReference
step racecheck 25 env FLOE_SERVING_REPS=1 "$san" --tool racecheck --error-exitcode 1 \
  "$bin/serving_test" --gtest_filter=Serving.Sm80RaggedAndPagedMatchReference
step bench_serving 35 "$bin/floe" bench --group serving --engine sm80 --direction both \
  --warmups 2 --calls 5 --json "$out/bench_serving.json"
step bench_dense 10 "$bin/floe" bench --b 8 --h-q 32 --gqa 4 --s-q 2660 --d-qk 128 --causal \
  --engine sm80 --direction both --warmups 2 --calls 10 --json "$out/bench_dense.json"

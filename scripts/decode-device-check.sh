#!/usr/bin/env bash
# The decode helper's one device call (Session 7): runs binaries built elsewhere (a tree with
# FLOE_KERNELS=ci, archs 80;90a) from BIN: the decode and merge GPU tests, the serving bench
# group (paged decodes, forward) and the full forward battery with aligned layouts pinned to
# decode (the cases it declines are skipped); tars the logs into $OUT/decode-logs.tgz.
#
#   scripts/decode-device-check.sh BIN
set -u
bin=${1:?usage: decode-device-check.sh BIN}
logs=${OUT:-/tmp}/logs
mkdir -p "$logs"
summary=$logs/summary.txt
step() {
  local name=$1 limit=$2
  shift 2
  local t0 rc
  t0=$(date +%s)
  timeout "$limit" "$@" > "$logs/$name.txt" 2>&1
  rc=$?
  echo "$name rc=$rc seconds=$(($(date +%s) - t0))" >> "$summary"
}
nvidia-smi -L > "$logs/smi.txt" 2>&1
step decode_test 45 "$bin/decode_test"
step merge_device_test 8 "$bin/merge_device_test"
step bench_serving 30 "$bin/floe" bench --group serving --direction fwd --warmups 2 --calls 10 \
  --budget-ms 300 --json "$logs/serving.json"
# The full battery with aligned layouts, pinned to decode: the ~1.5% of cases it serves.
FLOE_ENGINE=decode FLOE_DIRECTIONS=fwd FLOE_BATTERY=full FLOE_LAYOUT=aligned \
  FLOE_FAILURE_DIR="$logs/battery_failures" \
  step battery_decode 20 "$bin/battery_test" --gtest_filter=Battery.Forward
cat "$summary"
tar czf "${OUT:-/tmp}/decode-logs.tgz" -C "${OUT:-/tmp}" logs && rm -rf "$logs"

# The steps every session job repeats, sourced by scripts/sessions/<date>-<job>.sh after it sets
# R (results folder) and B (its fresh build folder):
#   stamp TEXT                  a timestamped line in the job's log
#   check SECONDS ARGS...       scripts/gpu-check.sh ARGS on B, under a time limit
#   unit TEST...                each of B's tests/TEST (60 s each), its log under R, its verdict
#   pinned CMD...               CMD with sm90 pinned to the backward on TMA-addressable layouts,
#                               keys in whole 16-byte rows (a bias or dBias needs them)
#   battery NAME SECONDS ENV... the battery with ENV (pinned), its log and failures under R
#   sanitize TOOL NAME ENV...   compute-sanitizer TOOL over a small pinned battery with ENV
#   bench_pair NAME ARGS...     floe bench ARGS default and --deterministic, one after the other;
#                               the outputs under R, the timing lines ([1/1] ...) shown
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
: "${R:?lib.sh: set R}" "${B:?lib.sh: set B}"
mkdir -p "$R"
floe=$B/tools/floe/floe
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }
check() { timeout "$1" "$root/scripts/gpu-check.sh" "${@:2}" --build-dir "$B"; }
unit() {
  local t
  for t in "$@"; do
    timeout 60 "$B/tests/$t" >"$R/$t.log" 2>&1
    echo "$t rc $?"
    tail -n 1 "$R/$t.log"
  done
}
pinned() {
  env FLOE_ENGINE=sm90 FLOE_DIRECTIONS=bwd FLOE_LAYOUT=aligned FLOE_KEYS_MULTIPLE=8 "$@"
}
battery() {
  local name=$1 seconds=$2
  shift 2
  stamp "battery-$name"
  pinned "$@" FLOE_FAILURE_DIR="$R/failures-$name" timeout "$seconds" "$B/tests/battery_test" \
    >"$R/battery-$name.log" 2>&1
  echo "battery-$name rc $?"
  grep -E '^\[battery\] backward' "$R/battery-$name.log"
}
sanitize() {
  local tool=$1 name=$2
  shift 2
  local san extra=()
  san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [ "$tool" = memcheck ] && extra=(--leak-check no --padding 64)
  stamp "$tool-$name"
  pinned "$@" FLOE_HARNESS_THREADS=4 FLOE_FAILURE_DIR="$R/failures-$tool-$name" timeout 120 \
    "$san" --tool "$tool" "${extra[@]}" --error-exitcode 86 --print-limit 20 \
    "$B/tests/battery_test" >"$R/$tool-$name.log" 2>&1
  echo "$tool-$name rc $?"
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[battery\] backward:' "$R/$tool-$name.log"
}
bench_pair() {
  local name=$1 mode out
  shift
  stamp "bench-$name"
  for mode in "" "--deterministic"; do
    out="$R/bench-$name${mode:+-det}.txt"
    FLOE_COMMIT=${FLOE_COMMIT:-} timeout 40 "$floe" bench "$@" $mode >"$out" 2>&1
    echo "bench $name $mode rc $?"
    grep -E '^\[1/1\]' "$out"
  done
}

#!/usr/bin/env bash
# Session 14's last device job (H200), one call: why the deterministic backward at d128 S 4096 is
# 1.17x the default's time in session 14's official run (1.05x in session 12's), and where the
# d128 main loop waits at S 16k (issue 14's 640 TFLOP/s goal). The ci kernel set (sm90's d128
# tiles: the 80-row one), so the build is short:
#   1. d128 S 4096 backward, default and deterministic (run in session 14 without --b 4: the
#      default line then ran the sweep and printed nothing), on the 80-row tile (FLOE_SM90_BWD_TILE=d128;
#      the official run's point took the 64-row tile, not in this set), two rounds
#   2. ncu (full set, clocks left alone) of the sm90 bwd_kernel: deterministic S 4096, then the
#      default at S 16k (b1 h16), with per-instruction warp-state samples
#   scripts/sessions/2026-12-02-s14c.sh RESULTS_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
R=${1:?usage: 2026-12-02-s14c.sh RESULTS_DIR}
B=/tmp/floe-b14c
mkdir -p "$R"
floe=$B/tools/floe/floe
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)

stamp build
timeout 300 "$root/scripts/gpu-check.sh" "$R/build" --archs 90a --kernels ci \
  --steps configure,build --build-dir "$B" | tail -3

stamp det-d128
for round in 1 2; do
  for det in "" "--deterministic"; do
    # shellcheck disable=SC2086
    FLOE_SM90_BWD_TILE=d128 timeout 60 "$floe" bench --direction bwd --engine sm90 --b 4 $det 2>&1 |
      grep -E '^\[1/1\]' | sed "s/^/r$round /"
  done
done | tee "$R/det-d128.txt"

profile() {  # name, bench args...
  local name=$1
  shift
  FLOE_SM90_BWD_TILE=d128 timeout 150 "$ncu" --clock-control none --set full \
    --kernel-name-base function --launch-skip 2 --launch-count 1 -k regex:bwd_kernel \
    -f -o "$R/$name" "$floe" bench --engine sm90 --direction bwd --calls 3 --warmups 1 "$@" \
    >"$R/$name-ncu.log" 2>&1
  echo "profile $name rc $?"
  [ -f "$R/$name.ncu-rep" ] || return
  "$ncu" --import "$R/$name.ncu-rep" --page details --print-units base >"$R/$name.txt" 2>&1
  "$ncu" --import "$R/$name.ncu-rep" --page source --print-source sass --csv 2>&1 |
    gzip >"$R/$name-sass.csv.gz"
  rm -f "$R/$name.ncu-rep"
}
stamp profile-det
profile det4k --deterministic
stamp profile-16k
profile plain16k --b 1 --s-q 16384
stamp end

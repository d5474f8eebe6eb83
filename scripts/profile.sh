#!/usr/bin/env bash
# Nsight Compute, floe beside PyTorch's flash backend on one problem: the same problem through
# `floe bench` (one engine) and through bench/peers.py (flash), one profiled launch of each
# side's main kernel(s), --set full, clocks left alone. Writes under RESULTS_DIR the .ncu-rep
# files, the details page (text), the raw metrics (CSV) and the per-instruction SASS page with
# its stall samples (CSV, gzip).
#
#   scripts/profile.sh RESULTS_DIR BUILD_DIR [floe bench problem options...]
#   e.g. scripts/profile.sh $OUT/p build --direction bwd --b 4 --h-q 16 --s-q 4096 --d-qk 128
#
# Environment: FLOE_PROFILE_KERNELS  ncu regex on floe's function names (default: the main
#                                    kernels of both directions)
#              FLOE_PROFILE_PEERS    ncu regex on flash's (default: its main kernels)
#              FLOE_PROFILE_ENGINE   floe's engine (default sm80)
set -uo pipefail

[ $# -ge 2 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
results=$1
build=$2
shift 2
mkdir -p "$results"
ncu=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
floe_re=${FLOE_PROFILE_KERNELS:-'fwd_kernel|bwd_kernel|bwd_wide_kernel'}
peer_re=${FLOE_PROFILE_PEERS:-'flash_fwd_kernel|flash_bwd_dq_dk_dv'}
engine=${FLOE_PROFILE_ENGINE:-sm80}

common=(--clock-control none --set full --kernel-name-base function --launch-skip 2
        --launch-count 1)

# The problem through floe (writes floe.json, which peers.py then replays).
"$ncu" "${common[@]}" -k "regex:$floe_re" -f -o "$results/floe" \
  "$build/tools/floe/floe" bench --engine "$engine" --json "$results/floe.json" "$@" \
  >"$results/floe-ncu.log" 2>&1
echo "profile: floe rc=$?"
"$ncu" "${common[@]}" -k "regex:$peer_re" -f -o "$results/flash" \
  python3 "$root/bench/peers.py" --backends flash --floe "$results/floe.json" \
  --out "$results/peers.json" >"$results/flash-ncu.log" 2>&1
echo "profile: flash rc=$?"

for side in floe flash; do
  [ -f "$results/$side.ncu-rep" ] || continue
  "$ncu" --import "$results/$side.ncu-rep" --page details --print-units base \
    >"$results/$side.txt" 2>&1
  "$ncu" --import "$results/$side.ncu-rep" --page raw --csv >"$results/$side-raw.csv" 2>&1
  # Per SASS instruction: executions and the warp-state samples (where the stalls are).
  "$ncu" --import "$results/$side.ncu-rep" --page source --print-source sass --csv \
    2>&1 | gzip >"$results/$side-sass.csv.gz"
done

# The lines that usually decide it, side by side.
pick='Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput|Memory Throughput|'
pick+='Executed Instructions  |Issue Slots Busy|L1/TEX Hit|L2 Hit|DRAM Throughput|'
pick+='Shared Memory Configuration|Dynamic Shared|Block Limit|Local Memory'
for side in floe flash; do
  [ -f "$results/$side.txt" ] || continue
  echo "== $side"
  grep -E "^  [a-z_].*\(|$pick" "$results/$side.txt" | head -40
done

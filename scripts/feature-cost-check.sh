#!/usr/bin/env bash
# The cost of score mods on one engine, old against new, in one GPU session, from binaries built
# elsewhere (no build on the GPU machine): each version's `floe bench` times plain, bias (broadcast
# [1, Hq] and per-head [B, Hq]) and softcap, forward and backward, at D 128, S 4096, B 4, Hq 16,
# the versions taking turns round after round; then the new version's battery with the engine
# pinned (full level, aligned layouts) and memcheck / racecheck over a small pinned battery.
#
#   scripts/feature-cost-check.sh RESULTS_DIR OLD_FLOE NEW_FLOE NEW_BATTERY [--engine E] [--rounds N]
#
# RESULTS_DIR gets every log, the bench JSON and ab.txt (median ms per problem and version, and
# new / old); the exit status is non-zero when the battery or a sanitizer failed.
set -uo pipefail
[ $# -ge 4 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
results=$1 old=$2 new=$3 battery=$4
shift 4
engine=sm80
rounds=2
while [ $# -gt 0 ]; do
  case "$1" in
    --engine) engine=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$results"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$results/env.txt" 2>&1

problems=("" "--bias 1 16" "--bias 4 16" "--softcap 30")
for r in $(seq 1 "$rounds"); do
  for v in old new; do
    bin=$old
    [ $v = new ] && bin=$new
    for i in "${!problems[@]}"; do
      # shellcheck disable=SC2086  # the problem's options split on spaces on purpose
      FLOE_COMMIT=$v "$bin" bench --engine "$engine" --direction both --b 4 --h-q 16 --s-q 4096 \
        --d-qk 128 ${problems[$i]} --json "$results/$v-r$r-p$i.json" \
        >"$results/$v-r$r-p$i.txt" 2>&1 || echo "bench $v round $r problem $i failed"
    done
  done
done
python3 - "$results" <<'PY'
import glob, json, os, statistics, sys
res = sys.argv[1]
t = {}
for path in sorted(glob.glob(os.path.join(res, "*-r*-p*.json"))):
    v = os.path.basename(path).split("-")[0]
    for r in json.load(open(path))["records"]:
        if r.get("median_ms") is None: continue
        k = r["direction"] + " " + ("bias %sx%s" % tuple(r["bias"]) if r.get("bias") else
                                     "softcap" if r.get("softcap") else "plain")
        t.setdefault(k, {}).setdefault(v, []).append(r["median_ms"])
lines = ["%-20s %10s %10s %8s %10s %10s" % ("problem", "old ms", "new ms", "new/old", "old/plain", "new/plain")]
for k in sorted(t):
    o, n = (statistics.median(t[k][v]) if v in t[k] else float("nan") for v in ("old", "new"))
    base = t.get(k.split()[0] + " plain", {})
    bo = statistics.median(base["old"]) if "old" in base else float("nan")
    bn = statistics.median(base["new"]) if "new" in base else float("nan")
    lines.append("%-20s %10.3f %10.3f %8.3f %10.2f %10.2f" % (k, o, n, n / o, o / bo, n / bn))
open(os.path.join(res, "ab.txt"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY

fail=0
FLOE_ENGINE=$engine FLOE_LAYOUT=aligned FLOE_BATTERY=full FLOE_FAILURE_DIR="$results/failures" \
  "$battery" >"$results/battery.log" 2>&1 || fail=1
grep -E "^\[battery\]" "$results/battery.log" | head -20
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  extra=()
  [ $tool = memcheck ] && extra=(--leak-check no --padding 64)
  FLOE_ENGINE=$engine FLOE_LAYOUT=aligned FLOE_BATTERY=smoke FLOE_BATTERY_CASES=${FLOE_SANITIZE_CASES:-24} \
    FLOE_HARNESS_THREADS=4 FLOE_FAILURE_DIR="$results/failures-$tool" \
    "$san" --tool $tool "${extra[@]}" --error-exitcode 86 --print-limit 20 "$battery" \
    >"$results/$tool.log" 2>&1 || fail=1
  echo "$tool: $(grep -oE "ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: .*" "$results/$tool.log" | tail -1)"
  grep -E "^\[battery\] (forward|backward)" "$results/$tool.log" | head -2
done
echo "feature-cost-check: battery/sanitizers $([ $fail = 0 ] && echo ok || echo FAILED)"
exit $fail

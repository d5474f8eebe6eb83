#!/usr/bin/env bash
# Several versions of floe timed side by side in one GPU session: each source tree is built
# (its own scripts/gpu-check.sh, sm_90a only, full kernel set) and its `floe bench` run on the
# same problems, the versions taking turns round after round so that drift in the GPU's clocks
# falls on all of them. Prints one table: median ms per problem and version, and each version's
# time over the first one's.
#
#   scripts/ab.sh RESULTS_DIR [--rounds N] [--archs LIST] [--kernels full|ci] TREE...
#                 [-- floe bench options [:: ...]]
#   e.g. scripts/ab.sh $OUT/ab .ab/main .ab/try -- --group sweep --direction bwd
#        scripts/ab.sh $OUT/ab .ab/main .ab/try -- --direction bwd --d-qk 64 --s-q 4096 --b 4 \
#            --h-q 32 :: --direction fwd --d-qk 64 --s-q 512 --b 32 --h-q 32 --causal
# `::` separates several `floe bench` calls, each timed in every round.
#
# A tree is a folder with floe's sources, e.g. `scripts/ab-trees.sh REV...` (run here, before
# the device call) writes one per revision under .ab/; carry .ab with the call.
set -uo pipefail

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || usage
results=$1
shift
rounds=2
archs=90a
kernels=full
trees=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2:?--rounds needs a number}; shift ;;
    --archs) archs=${2:?--archs needs a list}; shift ;;
    --kernels) kernels=${2:?--kernels needs full or ci}; shift ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *) trees+=("$(cd "$1" && pwd)") || exit 2 ;;
  esac
  shift
done
bench_args=("$@")
[ ${#trees[@]} -ge 1 ] || usage
mkdir -p "$results" || exit 2
results=$(cd "$results" && pwd)

# The builds run side by side: each one's last, longest kernel files would leave cores idle.
names=()
pids=()
for t in "${trees[@]}"; do
  name=$(basename "$t")
  names+=("$name")
  # The trees share the .deps of this checkout (CUTLASS, GoogleTest, ...).
  [ -e "$t/.deps" ] || ln -sfn "$root/.deps" "$t/.deps"
  echo "ab: building $name ..."
  "$t/scripts/gpu-check.sh" "$results/$name-build" --archs "$archs" --kernels "$kernels" \
    --steps configure,build \
    --build-dir "/tmp/floe-ab-$name" >"$results/$name-build.txt" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" ||
    { echo "ab: ${names[$i]} failed to build (see $results/${names[$i]}-build.txt)"; exit 1; }
done

# shellcheck source=ab-groups.sh
source "$root/scripts/ab-groups.sh"
split_bench_groups "${bench_args[@]}"

for r in $(seq 1 "$rounds"); do
  for name in "${names[@]}"; do
    for g in "${!groups[@]}"; do
      echo "ab: round $r, $name, bench ${groups[$g]}"
      # shellcheck disable=SC2086  # the group's options split on spaces on purpose
      FLOE_COMMIT="$name" "/tmp/floe-ab-$name/tools/floe/floe" bench \
        --json "$results/$name-r$r-g$g.json" ${groups[$g]} >"$results/$name-r$r-g$g.txt" 2>&1 ||
        echo "ab: $name round $r: floe bench failed (see $results/$name-r$r-g$g.txt)"
    done
  done
done

python3 "$root/bench/ab_table.py" "$results" "$rounds" "${names[@]}"

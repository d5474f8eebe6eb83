#!/usr/bin/env bash
# One build of floe timed under several settings of its plan-time knobs (environment variables),
# the variants taking turns round after round so that drift in the GPU's clocks falls on all of
# them. Prints one table (bench/ab_table.py): median ms per problem and variant, and each
# variant's time over the first one's.
#
#   scripts/ab-env.sh RESULTS_DIR FLOE_BINARY [--rounds N] VARIANT... [-- floe bench options [:: ...]]
#   VARIANT: NAME (the defaults) or NAME:VAR=VALUE[,VAR=VALUE...]
#   e.g. scripts/ab-env.sh $OUT/sched build/tools/floe/floe base \
#            'l2:FLOE_SM90_FWD_SCHEDULE=lptl2:1000000' -- --group sweep --direction fwd --filter causal
# `::` separates several `floe bench` calls, each timed in every round.
set -uo pipefail

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 3 ] || usage
results=$1
floe=$2
shift 2
rounds=2
names=()
envs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=${2:?--rounds needs a number}; shift ;;
    --) shift; break ;;
    -h|--help) usage ;;
    *:*) names+=("${1%%:*}"); envs+=("${1#*:}") ;;
    *) names+=("$1"); envs+=("") ;;
  esac
  shift
done
bench_args=("$@")
[ ${#names[@]} -ge 1 ] && [ -x "$floe" ] || usage
mkdir -p "$results" || exit 2

# shellcheck source=ab-groups.sh
source "$root/scripts/ab-groups.sh"
split_bench_groups "${bench_args[@]}"

for r in $(seq 1 "$rounds"); do
  for i in "${!names[@]}"; do
    name=${names[$i]}
    # VAR=VALUE,VAR=VALUE as env's arguments (a value may hold ':' but not ',').
    IFS=',' read -r -a assign <<<"${envs[$i]}"
    for g in "${!groups[@]}"; do
      echo "ab-env: round $r, $name (${envs[$i]:-defaults}), bench ${groups[$g]}"
      # shellcheck disable=SC2086  # the group's options split on spaces on purpose
      env "${assign[@]}" "$floe" bench --json "$results/$name-r$r-g$g.json" ${groups[$g]} \
        >"$results/$name-r$r-g$g.txt" 2>&1 ||
        echo "ab-env: $name round $r: floe bench failed (see $results/$name-r$r-g$g.txt)"
    done
  done
done

python3 "$root/bench/ab_table.py" "$results" "$rounds" "${names[@]}"

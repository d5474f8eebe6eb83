#!/usr/bin/env bash
# One source tree per revision under .ab/ (git archive; the folder is named for the revision,
# slashes as dashes), for scripts/ab.sh on the GPU machine: carry .ab with the call.
# `WORKTREE` as a revision copies the uncommitted working tree instead.
#
#   scripts/ab-trees.sh REV...      e.g. scripts/ab-trees.sh main try-mask WORKTREE
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
mkdir -p "$root/.ab"
for rev in "$@"; do
  name=${rev//\//-}
  dir="$root/.ab/$name"
  rm -rf "$dir"
  mkdir -p "$dir"
  if [ "$rev" = WORKTREE ]; then
    git -C "$root" ls-files -co --exclude-standard -z | (cd "$root" && xargs -0 cp --parents -t "$dir")
  else
    git -C "$root" archive "$rev" | tar -x -C "$dir"
  fi
  echo "$dir ($(du -sh "$dir" | cut -f1))"
done

#!/usr/bin/env bash
# Written in session 13, run in session 14 (H200, cdd03a4; its results: BACKWARD.md, the sm90 README): what session 13 left held back
# or unmeasured, on one build of the full kernel set for sm_90a, every step capped, in order of
# what unlocks most:
#   1. the held-back step with every held-back knob set (FLOE_SM90_BWD_D256=1: d256's deterministic
#      mode, which Determinism's sm90-d256 problem reaches; the staged dK/dV epilogue; the reducer's
#      early exit; the batched page lookups): the GPU tests that reach them, the sm90-pinned
#      backward batteries, memcheck
#   2. every sanitizer over a pinned sm90 battery (d256's wide kernel has not been through one)
#   3. A/B on one build: the two epilogue knobs on the short backward sweep (S 512-2k, every head
#      dim), the batched page lookups on the paged chunked prefill
#   4. an ncu profile of the wide kernel at d256 S 16k (BACKWARD.md's "d256: the wide kernel")
# Run detached (scripts/detach.sh) across two calls: about 15 minutes in all.
#   scripts/sessions/2026-12-02-s14a.sh RESULTS_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
R=${1:?usage: 2026-12-02-s14a.sh RESULTS_DIR}
B=/tmp/floe-b14
mkdir -p "$R"
check() { timeout "$1" "$root/scripts/gpu-check.sh" "${@:2}" --build-dir "$B"; }
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }
knobs="FLOE_SM90_BWD_D256=1 FLOE_SM90_BWD_STAGED_OUT=1 FLOE_SM90_BWD_EARLY_EXIT=1"

stamp build
check 600 "$R/build" --archs 90a --steps configure,build
stamp held-back
FLOE_HELD_BACK="$knobs FLOE_SM90_PAGED_BATCH=1" check 420 "$R/held" --steps held-back
stamp sanitize-sm90
check 240 "$R/engines" --steps engines --pin sm90 --directions bwd
stamp ab-epilogue
timeout 240 "$root/scripts/ab-env.sh" "$R/ab-epilogue" "$B/tools/floe/floe" base \
  'staged:FLOE_SM90_BWD_STAGED_OUT=1' 'early:FLOE_SM90_BWD_EARLY_EXIT=1' \
  'both:FLOE_SM90_BWD_STAGED_OUT=1,FLOE_SM90_BWD_EARLY_EXIT=1' -- --group sweep --direction bwd \
  --filter ' s512 ' --filter ' s1024 ' --filter ' s2048 '
stamp ab-paged
timeout 120 "$root/scripts/ab-env.sh" "$R/ab-paged" "$B/tools/floe/floe" base \
  'batch:FLOE_SM90_PAGED_BATCH=1' -- --group serving --filter q1024
stamp profile-d256
FLOE_PROFILE_ENGINE=sm90 FLOE_PROFILE_KERNELS=bwd_wide_kernel timeout 240 \
  "$root/scripts/profile.sh" "$R/profile-d256" "$B" --direction bwd --b 1 --h-q 8 --s-q 16384 \
  --d-qk 256
stamp end

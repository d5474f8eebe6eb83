#!/usr/bin/env bash
# Session 13's first device job (H200): what session 12 committed without a GPU, checked and
# timed on one build of the full kernel set for sm_90a:
#   1. the softcap backward's one-select dead-row rewrite (b106b3d, on by default) and the
#      serving kernels' producer registers (12085c3): the GPU tests that reach them, the
#      sm90-pinned backward battery (softcap among its cases), with the batched page lookups
#      (FLOE_SM90_PAGED_BATCH=1, held back) opted in: gpu-check.sh's held-back step
#   2. A/B of the batched page lookups against the default on the paged chunked prefill, and the
#      softcap backward's time beside plain (features group)
# Run detached (scripts/detach.sh) so that it can span two device calls.
#   scripts/sessions/2026-12-02-s13a.sh RESULTS_DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
R=${1:?usage: 2026-12-02-s13a.sh RESULTS_DIR}
B=/tmp/floe-b13
mkdir -p "$R"
check() { timeout "$1" "$root/scripts/gpu-check.sh" "${@:2}" --build-dir "$B"; }
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }

stamp build
check 900 "$R/build" --archs 90a --steps configure,build
stamp ab
timeout 300 "$root/scripts/ab-env.sh" "$R/ab" "$B/tools/floe/floe" base \
  'batch:FLOE_SM90_PAGED_BATCH=1' -- --group serving --filter q1024 :: --group features \
  --filter softcap --filter plain
stamp held-back
FLOE_HELD_BACK="FLOE_SM90_PAGED_BATCH=1" check 700 "$R/held" --steps held-back
stamp end

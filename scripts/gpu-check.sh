#!/usr/bin/env bash
# One command on a GPU machine: a fresh build of everything (full kernel set), the CPU tests,
# the GPU tests (ctest -L gpu), and compute-sanitizer over a small battery. Every step runs
# even after one fails; logs and summary.json land in RESULTS_DIR; the exit status is
# non-zero when any step failed.
#
#   scripts/gpu-check.sh RESULTS_DIR [--full] [--engine NAME] [options]
#
#   --full             the full battery (3000 + 3000 cases) instead of quick (300 + 300)
#   --engine NAME      the engine under test (FLOE_ENGINE), default auto
#   --directions D     both (default), fwd or bwd (FLOE_DIRECTIONS): the other direction's
#                      GPU tests skip, for an engine that serves one direction only
#   --seed N           the battery's base seed (FLOE_SEED), default the harness's
#   --kernels SET      full (default) or ci
#   --archs LIST       CUDA architectures to build, e.g. 90a (default: the project's, 80;90a);
#                      one architecture halves the build for a quick check on one GPU
#   --tests REGEX      only the GPU tests whose names match (ctest -R), e.g. 'Backward'.
#   --build-dir DIR    default ROOT/build-gpu-check
#   --steps LIST       comma-separated subset of configure,build,cpu,gpu,python,sanitize,
#                      engines,held-back,bench (default: configure,build,cpu,gpu,python,sanitize);
#                      without configure the build folder is reused.
#                      build: also writes build-slowest.txt (ninja's 25 slowest outputs, the
#                      build's critical path candidates)
#                      held-back: kernels held back behind opt-in knobs, opted in (FLOE_HELD_BACK:
#                      VAR=VALUE words; none is held back since session 19; empty, the step
#                      repeats the default): the GPU tests that reach them (NonFinite, Serving,
#                      Determinism, Graph, Streams), the sm90-pinned backward battery at the
#                      chosen level, the same at d128 on the 80-row tile the plan takes only past
#                      4k keys without a right bound (FLOE_SM90_BWD_TILE=d128), then memcheck
#                      over the serving and nonfinite tests
#                      engines: the battery at the chosen level with each engine of --pin
#                      pinned (tensor-core engines on aligned layouts), then every sanitizer
#                      over a small pinned battery per engine (FLOE_SANITIZE_CASES, default 16;
#                      an engine that serves few cases gets more: sm90 300)
#                      python: the package built offline over the build's libfloe.a, then
#                      pytest tests/python (needs python3 with torch, nanobind,
#                      scikit-build-core and pytest)
#   --bench-args ARGS  extra arguments of floe bench in the bench step (one string)
#   --jobs N           build and CPU-test parallelism, default every core
#   --pin LIST         the engines of the engines step, default "decode sm90 sm80 generic"
#
# FLOE_FA4_SITE=DIR: the bench step times FlashAttention 4 from DIR as a third peer (see
# ../shared/peers/install-fa4.sh: the GPU machine has no network, FA4 is staged in two calls).
# Needs cmake, ninja, nvcc and (for the sanitize step) compute-sanitizer; no network: the
# repo's .deps folder carries CUTLASS, nlohmann-json, CLI11 and GoogleTest.
set -uo pipefail

usage() { sed -n '2,44p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac
results=$1
shift
level=quick
engine=auto
directions=both
seed=""
kernels=full
archs=""
tests=""
build="$root/build-gpu-check"
steps="configure,build,cpu,gpu,python,sanitize"
bench_args=""
pinned="decode sm90 sm80 generic"
jobs=$(nproc 2>/dev/null || echo 4)
while [ $# -gt 0 ]; do
  case "$1" in
    --full) level=full ;;
    --engine) engine=${2:?--engine needs a name}; shift ;;
    --directions) directions=${2:?--directions needs both, fwd or bwd}; shift ;;
    --seed) seed=${2:?--seed needs a value}; shift ;;
    --kernels) kernels=${2:?--kernels needs full or ci}; shift ;;
    --archs) archs=${2:?--archs needs a list}; shift ;;
    --tests) tests=${2:?--tests needs a regex}; shift ;;
    --build-dir) build=${2:?--build-dir needs a folder}; shift ;;
    --steps) steps=${2:?--steps needs a list}; shift ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift ;;
    --bench-args) bench_args=${2?--bench-args needs a string}; shift ;;
    --pin) pinned=${2:?--pin needs a list of engines}; shift ;;
    -h|--help) usage ;;
    *) echo "gpu-check: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
mkdir -p "$results" || exit 2
results=$(cd "$results" && pwd)
wants() { case ",$steps," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# --- Step bookkeeping: name, status (ok|failed|unavailable|skipped), rc, seconds, note.
names=() statuses=() rcs=() secs=() notes=()
record() { names+=("$1"); statuses+=("$2"); rcs+=("$3"); secs+=("$4"); notes+=("$5"); }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# run_step NAME LOG CMD...: runs CMD with its output in LOG; records rc and seconds.
run_step() {
  local name=$1 log=$2
  shift 2
  echo "gpu-check: $name ..."
  local t0 rc
  t0=$(now)
  { echo "\$ $*"; "$@"; } >"$log" 2>&1
  rc=$?
  last_seconds=$(elapsed "$t0")
  last_rc=$rc
  echo "gpu-check: $name: rc $rc in ${last_seconds}s (log: $log)"
}

# ctest's closing line "NN% tests passed, F tests failed out of T", plus skipped tests.
ctest_counts() {  # LOG -> "total passed failed skipped"
  # ctest 3.x closes with "NN% tests passed, F tests failed out of T"; ctest 4.x drops the
  # failed count when it is zero: "100% tests passed out of T".
  local line total failed skipped
  line=$(grep -E "tests passed(, [0-9]+ tests? failed)? out of [0-9]+" "$1" | tail -1)
  total=$(sed -nE 's/.*out of ([0-9]+).*/\1/p' <<<"$line")
  failed=$(sed -nE 's/.* ([0-9]+) tests? failed.*/\1/p' <<<"$line")
  skipped=$(grep -cE "\*\*\*Skipped|Skipped +[0-9.]+ sec" "$1")
  [ -n "$total" ] || total=0
  [ -n "$failed" ] || failed=0
  echo "$total $((total - failed - skipped)) $failed $skipped"
}

# Where CUPTI lives (the allocation and sync detectors dlopen it).
cupti_dir() {
  local nvcc_bin cuda d
  nvcc_bin=$(command -v nvcc || true)
  cuda=${CUDA_HOME:-${nvcc_bin:+$(dirname "$(dirname "$nvcc_bin")")}}
  cuda=${cuda:-/usr/local/cuda}
  for d in "$cuda/extras/CUPTI/lib64" "$cuda/lib64" "$cuda/targets/x86_64-linux/lib" \
           "$cuda/lib"; do
    [ -e "$d/libcupti.so" ] && { echo "$d"; return; }
  done
  python3 - <<'PY' 2>/dev/null
import glob, os, site, sys
for base in site.getsitepackages() + [site.getusersitepackages()]:
    for lib in glob.glob(os.path.join(base, "nvidia", "cu*", "lib", "libcupti.so*")):
        print(os.path.dirname(lib)); sys.exit(0)
PY
}

start_all=$(now)
cpu_counts="0 0 0 0"
gpu_counts="0 0 0 0"
build_seconds=null

# The commit under test. A copy made by git archive has no repository of its own (git would
# answer for an enclosing one): the caller names the commit in FLOE_COMMIT.
commit=${FLOE_COMMIT:-$(git -C "$root" rev-parse --verify -q HEAD 2>/dev/null || echo unknown)}

# --- The machine, for the record.
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  echo "level: $level  engine: $engine  kernels: $kernels  seed: ${seed:-default}"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
  nvcc --version 2>&1 | tail -1
  cmake --version 2>&1 | head -1
  compute-sanitizer --version 2>&1 | tail -1 || true
  echo "cores: $(nproc)"
} >"$results/env.txt" 2>&1

# --- Configure and build. The CUTLASS headers may come packed (scripts/stage-deps.sh).
cutlass_include=$root/.deps/cutlass/cutlass_library/source/include
if [ ! -d "$cutlass_include" ] && [ -f "$root/.deps/cutlass-include.tar.xz" ]; then
  mkdir -p "$(dirname "$cutlass_include")" &&
    tar xJf "$root/.deps/cutlass-include.tar.xz" -C "$(dirname "$cutlass_include")"
fi
if wants configure; then
  rm -rf "$build"
  run_step configure "$results/configure.log" \
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLOE_KERNELS="$kernels" \
      ${archs:+-DFLOE_CUDA_ARCHS="$archs"}
  record configure "$([ $last_rc = 0 ] && echo ok || echo failed)" "$last_rc" "$last_seconds" ""
fi
if wants build; then
  if [ -f "$build/CMakeCache.txt" ]; then
    run_step build "$results/build.log" cmake --build "$build" -j "$jobs"
    build_seconds=$last_seconds
    record build "$([ $last_rc = 0 ] && echo ok || echo failed)" "$last_rc" "$last_seconds" \
      "$(grep -c 'ptxas warning' "$results/build.log") ptxas warnings"
    # ninja's log: start and end (ms) of every output of this build; the slowest are what bounds
    # its wall time on many cores.
    if [ -f "$build/.ninja_log" ]; then
      awk -F '\t' 'NR > 1 { printf "%8.1f s  %s\n", ($2 - $1) / 1000, $4 }' "$build/.ninja_log" |
        sort -rn | head -25 >"$results/build-slowest.txt"
    fi
  else
    record build failed 1 0 "no configured build folder at $build"
  fi
fi

# --- Tests.
if wants cpu; then
  run_step cpu-tests "$results/cpu-tests.log" \
    ctest --test-dir "$build" -L cpu --output-on-failure --timeout 900 -j "$jobs" \
      --output-junit "$results/cpu-tests.xml"
  cpu_counts=$(ctest_counts "$results/cpu-tests.log")
  read -r t p f s <<<"$cpu_counts"
  status=ok; [ "$last_rc" = 0 ] && [ "$t" -gt 0 ] || status=failed
  record cpu-tests "$status" "$last_rc" "$last_seconds" "$t tests: $p passed, $f failed, $s skipped"
fi

cupti=$(cupti_dir)
export LD_LIBRARY_PATH="${cupti:+$cupti:}${LD_LIBRARY_PATH:-}"
export FLOE_ENGINE="$engine" FLOE_DIRECTIONS="$directions" FLOE_FAILURE_DIR="$results/failures"
[ -n "$seed" ] && export FLOE_SEED="$seed"

if wants gpu; then
  rm -f "$results/battery.txt"
  # One test at a time: they share the GPU, and the battery uses every core for the reference.
  run_step gpu-tests "$results/gpu-tests.log" \
    env FLOE_BATTERY="$level" FLOE_REPORT_FILE="$results/battery.txt" \
      ctest --test-dir "$build" -L gpu ${tests:+-R "$tests"} --output-on-failure --timeout 1800 \
        --output-junit "$results/gpu-tests.xml"
  gpu_counts=$(ctest_counts "$results/gpu-tests.log")
  read -r t p f s <<<"$gpu_counts"
  status=ok
  [ "$last_rc" = 0 ] && [ "$t" -gt 0 ] || status=failed
  note="$t tests: $p passed, $f failed, $s skipped; cupti: ${cupti:-not found}"
  # On a GPU machine a skipped GPU test means no device was seen: that is a failure.
  if [ "$s" -gt 0 ] && [ "$engine" = auto ] && [ "$directions" = both ]; then status=failed; note="$note (skips: no GPU?)"; fi
  record gpu-tests "$status" "$last_rc" "$last_seconds" "$note"
fi

# --- The Python package and its tests (tests/python), on this GPU.
if wants python; then
  run_step python "$results/python.log" \
    env FLOE_PREBUILT="$build/libfloe.a" FLOE_PY_TARGET="$build/python-package" \
      "$root/scripts/python-test.sh" -rs --junitxml "$results/python-tests.xml"
  summary=$(grep -E "^[0-9]+ (passed|failed)|^=+ .*(passed|failed|error).* =+$" "$results/python.log" | tail -1)
  status=ok
  [ "$last_rc" = 0 ] || status=failed
  # On a GPU machine a skipped CUDA case means no device was seen by torch: a failure.
  if grep -qE "SKIPPED.*no CUDA device" "$results/python.log"; then status=failed; summary="$summary (skips: no GPU?)"; fi
  record python "$status" "$last_rc" "$last_seconds" "${summary:-see log}"
  # Host microseconds per call through PyTorch, floe beside SDPA flash (issue 15's targets).
  if [ -d "$build/python-package/floe" ]; then
    run_step python-host "$results/python-host.log" \
      env PYTHONPATH="$build/python-package${PYTHONPATH:+:$PYTHONPATH}" \
        python3 "$root/bench/python_host.py"
    note=$(grep -E "^(floe|torch)" "$results/python-host.log" | tr '\n' ';')
    record python-host "$([ "$last_rc" = 0 ] && echo ok || echo failed)" "$last_rc" \
      "$last_seconds" "${note:-see log}"
  fi
fi

# --- compute-sanitizer over a smoke battery (16 + 16 small cases).
sanitizer_errors=()
if wants sanitize; then
  sanitizer=$(command -v compute-sanitizer || true)
  [ -n "$sanitizer" ] || for d in "${CUDA_HOME:-}" /usr/local/cuda; do
    [ -n "$d" ] && [ -x "$d/bin/compute-sanitizer" ] && { sanitizer="$d/bin/compute-sanitizer"; break; }
  done
  battery="$build/tests/battery_test"
  for tool in memcheck racecheck synccheck initcheck; do
    log="$results/$tool.log"
    if [ -z "$sanitizer" ] || [ ! -x "$battery" ]; then
      why="compute-sanitizer not found"
      [ -n "$sanitizer" ] && why="no $battery"
      record "$tool" unavailable 0 0 "$why"
      sanitizer_errors+=("null")
      continue
    fi
    extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check no --padding 64)
    run_step "$tool" "$log" \
      env FLOE_BATTERY=smoke FLOE_HARNESS_THREADS=4 FLOE_FAILURE_DIR="$results/failures-$tool" \
        "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 86 --print-limit 20 \
          "$battery"
    # memcheck, synccheck, initcheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK
    # SUMMARY: H hazards displayed (N errors, W warnings)".
    errors=$(grep -oE "ERROR SUMMARY: [0-9]+|\([0-9]+ errors?" "$log" | tail -1 | grep -oE "[0-9]+")
    # Some machines (gVisor sandboxes) refuse the sanitizer outright: that is no floe error.
    if grep -qE "Device not supported|Unable to (find|load) injection library" "$log"; then
      record "$tool" unavailable "$last_rc" "$last_seconds" "the sanitizer cannot run on this machine (see log)"
      sanitizer_errors+=("null")
      continue
    fi
    status=ok
    [ "$last_rc" = 0 ] && [ "${errors:-0}" = 0 ] || status=failed
    record "$tool" "$status" "$last_rc" "$last_seconds" "${errors:-?} errors"
    sanitizer_errors+=("${errors:-null}")
  done
fi

# --- Every engine pinned: its battery, then each sanitizer over a small pinned battery. The
# auto battery above routes most cases to the best engine; this is what proves each engine.
if wants engines; then
  battery="$build/tests/battery_test"
  sanitizer=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
  for e in $pinned; do
    layout=any
    [ "$e" = generic ] || [ "$e" = reference ] || layout=aligned
    # decode serves the forward only: its backward battery would decline every case.
    dirs=$directions
    [ "$e" = decode ] && dirs=fwd
    run_step "battery-$e" "$results/battery-$e.log" \
      env FLOE_ENGINE="$e" FLOE_DIRECTIONS="$dirs" FLOE_LAYOUT="$layout" FLOE_BATTERY="$level" \
        FLOE_FAILURE_DIR="$results/failures-$e" "$battery"
    note=$(grep -hoE "^\[battery\] (forward|backward): .*declined" "$results/battery-$e.log" |
      sed -E 's/^\[battery\] //; s/level [a-z]+, seed [^,]+, engine [^:]+: //' | tr '\n' ';')
    record "battery-$e" "$([ "$last_rc" = 0 ] && echo ok || echo failed)" "$last_rc" \
      "$last_seconds" "${note:-see log}"
    cases=${FLOE_SANITIZE_CASES:-16}
    [ "$e" = sm90 ] && cases=${FLOE_SANITIZE_CASES_SM90:-300}
    for tool in memcheck racecheck synccheck initcheck; do
      log="$results/$tool-$e.log"
      extra=()
      [ "$tool" = memcheck ] && extra=(--leak-check no --padding 64)
      run_step "$tool-$e" "$log" \
        env FLOE_ENGINE="$e" FLOE_DIRECTIONS="$dirs" FLOE_LAYOUT="$layout" FLOE_BATTERY=smoke \
          FLOE_BATTERY_CASES="$cases" \
          FLOE_HARNESS_THREADS=4 FLOE_FAILURE_DIR="$results/failures-$tool-$e" \
          "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 86 --print-limit 20 "$battery"
      errors=$(grep -oE "ERROR SUMMARY: [0-9]+|\([0-9]+ errors?" "$log" | tail -1 | grep -oE "[0-9]+")
      ran=$(grep -hoE "^\[battery\] (forward|backward): .*\(ran on: [^)]*\)" "$log" |
        sed -E 's/.*(forward|backward).*(\(ran on: [^)]*\)).*/\1 \2/' | tr '\n' ';')
      status=ok
      [ "$last_rc" = 0 ] && [ "${errors:-0}" = 0 ] || status=failed
      record "$tool-$e" "$status" "$last_rc" "$last_seconds" "${errors:-?} errors; $ran"
    done
  done
fi

# --- What is held back behind opt-in knobs (FLOE_HELD_BACK), opted in: the tests that reach it, the
# tests that prove graph, stream and determinism behaviour, the sm90 backward battery, and memcheck
# over the two tests that reach the serving and non-finite paths.
if wants held-back; then
  battery="$build/tests/battery_test"
  sanitizer=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
  read -r -a knobs <<<"${FLOE_HELD_BACK:-}"
  run_step held-back-tests "$results/held-back-tests.log" \
    env "${knobs[@]}" ctest --test-dir "$build" -L gpu -R 'NonFinite|Serving|Determinism|Graph|Streams' \
      --output-on-failure --timeout 600 --output-junit "$results/held-back-tests.xml"
  read -r t p f s <<<"$(ctest_counts "$results/held-back-tests.log")"
  status=ok
  [ "$last_rc" = 0 ] && [ "$t" -gt 0 ] || status=failed
  record held-back-tests "$status" "$last_rc" "$last_seconds" "$t tests: $p passed, $f failed, $s skipped"
  run_step held-back-battery "$results/held-back-battery.log" \
    env "${knobs[@]}" FLOE_ENGINE=sm90 FLOE_DIRECTIONS=bwd FLOE_LAYOUT=aligned FLOE_BATTERY="$level" \
      FLOE_FAILURE_DIR="$results/failures-held-back" "$battery"
  note=$(grep -hoE "^\[battery\] backward: .*declined" "$results/held-back-battery.log" |
    sed -E 's/^\[battery\] //; s/level [a-z]+, seed [^,]+, engine [^:]+: //' | tr '\n' ';')
  record held-back-battery "$([ "$last_rc" = 0 ] && echo ok || echo failed)" "$last_rc" \
    "$last_seconds" "${note:-see log}"
  run_step held-back-battery-d128m80 "$results/held-back-battery-d128m80.log" \
    env "${knobs[@]}" FLOE_SM90_BWD_TILE=d128 FLOE_HEAD_DIMS=128/128 FLOE_ENGINE=sm90 \
      FLOE_DIRECTIONS=bwd FLOE_LAYOUT=aligned FLOE_BATTERY="$level" \
      FLOE_FAILURE_DIR="$results/failures-held-back-d128m80" "$battery"
  note=$(grep -hoE "^\[battery\] backward: .*declined" "$results/held-back-battery-d128m80.log" |
    sed -E 's/^\[battery\] //; s/level [a-z]+, seed [^,]+, engine [^:]+: //' | tr '\n' ';')
  record held-back-battery-d128m80 "$([ "$last_rc" = 0 ] && echo ok || echo failed)" \
    "$last_rc" "$last_seconds" "${note:-see log}"
  for t in serving_test nonfinite_test; do
    log="$results/memcheck-held-back-$t.log"
    run_step "memcheck-held-back-$t" "$log" \
      env "${knobs[@]}" FLOE_SERVING_REPS=1 "$sanitizer" --tool memcheck --leak-check no \
        --padding 64 --error-exitcode 86 --print-limit 20 "$build/tests/$t"
    errors=$(grep -oE "ERROR SUMMARY: [0-9]+" "$log" | tail -1 | grep -oE "[0-9]+")
    status=ok
    [ "$last_rc" = 0 ] && [ "${errors:-0}" = 0 ] || status=failed
    record "memcheck-held-back-$t" "$status" "$last_rc" "$last_seconds" "${errors:-?} errors"
  done
fi

# --- floe bench, then PyTorch's flash and cuDNN on the same problems in the same session.
if wants bench; then
  # shellcheck disable=SC2086  # bench_args is a list of words on purpose
  run_step bench "$results/bench.log" \
    env FLOE_COMMIT="$commit" "$build/tools/floe/floe" bench --json "$results/floe.json" $bench_args
  record bench "$([ $last_rc = 0 ] && echo ok || echo failed)" "$last_rc" "$last_seconds" ""
  if [ -f "$results/floe.json" ]; then
    run_step peers "$results/peers.log" \
      python3 "$root/bench/peers.py" --floe "$results/floe.json" --out "$results/peers.json" \
        --md "$results/perf.md" --plot "$results/perf.png" \
        ${FLOE_FA4_SITE:+--fa4-site "$FLOE_FA4_SITE"}
    record peers "$([ $last_rc = 0 ] && echo ok || echo failed)" "$last_rc" "$last_seconds" ""
  fi
fi

# --- summary.json and the table.
total_seconds=$(elapsed "$start_all")
failed_steps=0
for st in "${statuses[@]}"; do [ "$st" = failed ] && failed_steps=$((failed_steps + 1)); done
json_str() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr '\n\t' '  ')"; }
counts_json() {
  read -r t p f s <<<"$1"
  printf '{"total": %s, "passed": %s, "failed": %s, "skipped": %s}' "$t" "$p" "$f" "$s"
}
{
  echo "{"
  echo "  \"ok\": $([ $failed_steps = 0 ] && echo true || echo false),"
  echo "  \"level\": $(json_str "$level"), \"engine\": $(json_str "$engine"), \"kernels\": $(json_str "$kernels"),"
  echo "  \"commit\": $(json_str "$commit"),"
  echo "  \"gpu\": $(json_str "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"),"
  echo "  \"build_seconds\": $build_seconds,"
  echo "  \"total_seconds\": $total_seconds,"
  echo "  \"tests\": {\"cpu\": $(counts_json "$cpu_counts"), \"gpu\": $(counts_json "$gpu_counts")},"
  printf '  "sanitizer_errors": {'
  i=0
  for tool in memcheck racecheck synccheck initcheck; do
    [ $i -lt ${#sanitizer_errors[@]} ] || break
    printf '%s"%s": %s' "$([ $i -gt 0 ] && echo ', ')" "$tool" "${sanitizer_errors[$i]}"
    i=$((i + 1))
  done
  echo "},"
  echo "  \"steps\": ["
  for i in "${!names[@]}"; do
    printf '    {"name": %s, "status": %s, "rc": %s, "seconds": %s, "note": %s}%s\n' \
      "$(json_str "${names[$i]}")" "$(json_str "${statuses[$i]}")" "${rcs[$i]}" "${secs[$i]}" \
      "$(json_str "${notes[$i]}")" "$([ "$i" -lt $((${#names[@]} - 1)) ] && echo ,)"
  done
  echo "  ]"
  echo "}"
} >"$results/summary.json"

echo
printf '%-12s %-12s %4s %9s  %s\n' step status rc seconds note
for i in "${!names[@]}"; do
  printf '%-12s %-12s %4s %9s  %s\n' "${names[$i]}" "${statuses[$i]}" "${rcs[$i]}" "${secs[$i]}" "${notes[$i]}"
done
[ -f "$results/battery.txt" ] && grep -h "^\[battery\] .*cases," "$results/battery.txt"
echo "gpu-check: $failed_steps failed step(s) in ${total_seconds}s; results in $results"
[ "$failed_steps" = 0 ]

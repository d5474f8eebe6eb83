#!/usr/bin/env bash
# Fuzzes the problem.json reader, the .npy reader and Plan::build over random problems
# (libFuzzer, with ASan and UBSan), each for a bounded time, from the seeds in
# tests/fuzz/corpus/. Any crash, sanitizer report or timeout fails (exit 1); the input that
# did it is kept in $BUILD_DIR/fuzz-artifacts/.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 30 s; targets: all three)
# Longer on demand: scripts/fuzz.sh 3600 fuzz_plan. FLOE_FUZZ_JOBS runs that many workers;
# FLOE_FUZZ_CXX picks the compiler (none installed then).
# Needs clang with libFuzzer (Debian: clang and libclang-rt-dev); installs them with apt-get
# where it can, else says so and exits 77 (scripts/test.sh then skips the step).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-${FLOE_FUZZ_SECONDS:-30}}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_problem_json fuzz_npy fuzz_plan)
build=${FLOE_FUZZ_BUILD_DIR:-$root/build-fuzz}

# A clang++ that links -fsanitize=fuzzer: tried on a one-line program.
fuzzer_clang() {
  local probe; probe=$(mktemp -d)
  echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
    > "$probe/p.cc"
  local candidates=("$@")
  [ ${#candidates[@]} -gt 0 ] ||
    candidates=(clang++ clang++-14 clang++-15 clang++-16 clang++-17 clang++-18 clang++-19)
  for cxx in "${candidates[@]}"; do
    if command -v "$cxx" >/dev/null &&
       "$cxx" -fsanitize=fuzzer "$probe/p.cc" -o "$probe/p" >/dev/null 2>&1; then
      rm -rf "$probe"; echo "$cxx"; return 0
    fi
  done
  rm -rf "$probe"; return 1
}

if [ -n "${FLOE_FUZZ_CXX:-}" ]; then
  # A compiler chosen by the caller: used if it links -fsanitize=fuzzer, never installed.
  cxx=$(fuzzer_clang "$FLOE_FUZZ_CXX" || true)
else
  cxx=$(fuzzer_clang || true)
fi
if [ -z "$cxx" ] && [ -z "${FLOE_FUZZ_CXX:-}" ] && command -v apt-get >/dev/null; then
  sudo_=""; [ "$(id -u)" = 0 ] || sudo_="sudo -n"
  echo "fuzz: no clang with libFuzzer; installing clang and libclang-rt-dev" >&2
  { $sudo_ apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq clang libclang-rt-dev; } \
    >/dev/null 2>&1 || true
  cxx=$(fuzzer_clang || true)
fi
if [ -z "$cxx" ]; then
  echo "fuzz: SKIPPED: no clang++ that links -fsanitize=fuzzer (install clang and" \
       "libclang-rt-dev, or clang-NN and libclang-rt-NN-dev)" >&2
  exit 77
fi
cc=${cxx/clang++/clang}

"$root/scripts/setup.sh" >/dev/null
launcher=(); command -v ccache >/dev/null &&
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
# The kernels of the regular build (BUILD_DIR, default build/) when every CUDA object its
# ninja file names for floe is there (the per-tile units are generated, so the list comes from
# that build, with its kernel set): the fuzzers never launch them, and compiling them again
# would double the build. Otherwise they are compiled here (Release, as scripts/build.sh).
main=${BUILD_DIR:-$root/build}
objects=""
kernels=${FLOE_KERNELS:-ci}
if [ -f "$main/build.ninja" ] && [ -f "$main/CMakeCache.txt" ]; then
  expected=$(grep -oE '^build CMakeFiles/floe\.dir/[^ :]+\.cu\.o' "$main/build.ninja" |
             sed 's/^build //' | sort -u)
  if [ -n "$expected" ] && (cd "$main" && ls $expected >/dev/null 2>&1); then
    objects=$(echo "$expected" | sed "s|^|$main/|" | paste -sd ';' -)
    kernels=$(sed -n 's/^FLOE_KERNELS:STRING=//p' "$main/CMakeCache.txt")
    echo "fuzz: linking the $(echo "$expected" | wc -l) CUDA objects of $main ($kernels kernel set)"
  fi
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${gen[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DFLOE_FUZZ=ON -DFLOE_BUILD_TESTS=OFF \
    -DFLOE_KERNELS="$kernels" -DFLOE_CUDA_OBJECTS="$objects" >/dev/null
else
  cmake -S "$root" -B "$build" -DFLOE_KERNELS="$kernels" -DFLOE_CUDA_OBJECTS="$objects" >/dev/null
fi
cmake --build "$build" -j "${FLOE_JOBS:-$(nproc)}" --target "${targets[@]}"

artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
failed=()
for t in "${targets[@]}"; do
  seeds="$root/tests/fuzz/corpus/$t"
  # New inputs go to a scratch corpus so the repository's seeds stay as committed.
  work="$build/fuzz-corpus/$t"
  mkdir -p "$work"
  echo "fuzz: $t for ${seconds}s"
  # -rss_limit_mb: a reader must not need more memory than its input justifies.
  if ! "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=4096 -print_final_stats=1 -artifact_prefix="$artifacts/$t-" \
      ${FLOE_FUZZ_JOBS:+-jobs=$FLOE_FUZZ_JOBS -workers=$FLOE_FUZZ_JOBS} \
      "$work" "$seeds" > "$build/fuzz-$t.log" 2>&1; then
    failed+=("$t")
    echo "fuzz: $t FAILED; the tail of $build/fuzz-$t.log:" >&2
    tail -n 40 "$build/fuzz-$t.log" >&2
  else
    grep -E "^stat::number_of_executed_units|^Done" "$build/fuzz-$t.log" | sed "s/^/fuzz: $t: /"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $artifacts)" >&2
  exit 1
fi
echo "fuzz: ok (${targets[*]}, ${seconds}s each)"

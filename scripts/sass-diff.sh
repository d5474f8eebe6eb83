#!/usr/bin/env bash
# Whether a change alters the machine code of kernels: compiles each kernel file at REV and in
# the working tree for one architecture (the project's flags, full kernel set) and compares the
# SASS of every function. "same" means byte-identical instructions: a refactor that keeps every
# kernel "same" needs no GPU time to be trusted; one that does not is a kernel change (build and
# test it on the GPU). "offsets" means identical but for the offsets into the constant banks
# (c[0x0][...]: kernel parameters moved within the params struct). No GPU needed; cuobjdump and
# nvdisasm come from PyPI into .deps (SASS_DIFF_TOOLS=DIR: a folder that holds them already as
# nvidia/cu13/bin, e.g. where .deps is read-only).
#
#   scripts/sass-diff.sh REV FILE.cu [OLD.cu=NEW.cu ...] [--arch 90a]
#   scripts/sass-diff.sh --objects OLD_BUILD NEW_BUILD [--arch 90a]
#
# OLD.cu=NEW.cu compares a file that moved or is now generated: OLD is a path at REV, NEW a path
# in the working tree or an absolute one (e.g. build/generated/engines/sm80/fwd_d128.cu, which a
# configure generates).
# OLD.cu=- only computes REV's side (to fill the cache ahead of time).
# SASS_DIFF_CACHE=DIR keeps the SASS of REV's side there and reuses it (REV as a commit hash),
# and leaves the working tree's side beside it (*.new.sass).
# e.g. scripts/sass-diff.sh HEAD src/engines/generic/generic_forward.cu \
#        src/engines/sm80/fwd_d128.cu=build/generated/engines/sm80/fwd_d128.cu
# (a tree whose per-tile files are generated: configure with FLOE_KERNELS=full first). sm90's
# kernels build for sm_90a only: --arch 90a, with build/generated/engines/sm90/<dir>_<tile>.cu.
# --objects: no compiles; every CUDA object (*.cu.o) of NEW_BUILD's floe library against the
# one at the same path in OLD_BUILD, SASS of --arch only: e.g. a build of REV and one of the
# working tree, configured alike (FLOE_CUDA_ARCHS, FLOE_KERNELS, build type), every kernel of
# the kernel set in one pass.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
rev=$1
shift
old_build=""
new_build=""
if [ "$rev" = "--objects" ]; then
  old_build=${1:?--objects needs OLD_BUILD NEW_BUILD}
  new_build=${2:?--objects needs OLD_BUILD NEW_BUILD}
  shift 2
fi
arch=90a
files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch=${2:?--arch needs a value}; shift ;;
    *) files+=("$1") ;;
  esac
  shift
done

tools="${SASS_DIFF_TOOLS:-$root/.deps/cudatools}"
if [ ! -x "$tools/nvidia/cu13/bin/cuobjdump" ] || [ ! -x "$tools/nvidia/cu13/bin/nvdisasm" ]; then
  python3 -m pip install --quiet --target "$tools" 'nvidia-cuda-cuobjdump~=13.0' \
    'nvidia-cuda-nvdisasm~=13.0' >&2
fi
export PATH="$tools/nvidia/cu13/bin:$PATH"
# compare OLD.sass NEW.sass LABEL: a line per function, "same" or how it differs; fails on any
# difference.
compare() {
  python3 - "$1" "$2" "$3" <<'PY'
import re, sys
def functions(path):
    out, name = {}, None
    for line in open(path):
        m = re.search(r"Function : (\S+)", line)
        if m:
            # An anonymous namespace's mangled name carries a per-compile hash: drop it.
            name = re.sub(r"_GLOBAL__N__[0-9a-f]+_", "_GLOBAL__N_", m.group(1))
            out[name] = []
        elif name and re.match(r"\s+/\*[0-9a-f]{4,}\*/", line):
            out[name].append(line.split(";")[0].split("*/", 1)[1].strip())
    return out
def offsets_only(a, b):
    bank = re.compile(r"c\[0x[0-9a-f]+\]\[0x[0-9a-f]+\]")
    return [bank.sub("c[.]", x) for x in a] == [bank.sub("c[.]", x) for x in b]
old, new = functions(sys.argv[1]), functions(sys.argv[2])
changed = 0
for k in sorted(set(old) | set(new)):
    a, b = old.get(k), new.get(k)
    if a == b:
        verdict = "same"
    elif a is None or b is None:
        verdict = "added" if a is None else "removed"
    else:
        verdict = "offsets" if offsets_only(a, b) else "CHANGED"
    changed += verdict != "same"
    print(f"{sys.argv[3]}: {verdict:8} {len(a or [])} -> {len(b or [])} instructions  {k}")
sys.exit(1 if changed else 0)
PY
}

if [ -n "$old_build" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  status=0
  objects=$(cd "$new_build" && find CMakeFiles/floe.dir -name '*.cu.o' | sort)
  [ -n "$objects" ] || { echo "no CUDA objects under $new_build/CMakeFiles/floe.dir" >&2; exit 2; }
  for rel in $objects; do
    if [ ! -f "$old_build/$rel" ]; then
      echo "$rel: only in $new_build"
      status=1
      continue
    fi
    cuobjdump -sass -arch "sm_$arch" "$old_build/$rel" >"$work/old.sass"
    cuobjdump -sass -arch "sm_$arch" "$new_build/$rel" >"$work/new.sass"
    compare "$work/old.sass" "$work/new.sass" "$rel" || status=1
  done
  exit $status
fi

cutlass="$root/.deps/cutlass/cutlass_library/source/include"
[ -d "$cutlass" ] || "$root/scripts/setup.sh" >&2

work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add --detach "$work/old" "$rev" >/dev/null 2>&1

compile() {  # TREE FILE OUT
  local src=$2
  [ "${src#/}" != "$src" ] || src="$1/$src"
  nvcc -DFLOE_KERNELS_FULL=1 -I"$1/include" -I"$1/src" -isystem "$cutlass" -O3 -DNDEBUG \
    -gencode="arch=compute_$arch,code=sm_$arch" --expt-relaxed-constexpr -std=c++17 \
    -x cu -c "$src" -o "$3"
}

status=0
for f in "${files[@]}"; do
  old_f=${f%%=*}
  new_f=${f#*=}
  name=$(basename "$old_f" .cu)
  cached=""
  if [ -n "${SASS_DIFF_CACHE:-}" ]; then
    cached="$SASS_DIFF_CACHE/$rev-sm_$arch/$(echo "$old_f" | tr / _).sass"
    mkdir -p "$(dirname "$cached")"
  fi
  if [ -n "$cached" ] && [ -s "$cached" ]; then
    cp "$cached" "$work/$name.old.sass"
  else
    compile "$work/old" "$old_f" "$work/$name.old.o" &
  fi
  [ "$new_f" = "-" ] || compile "$root" "$new_f" "$work/$name.new.o" &
  wait
  if [ ! -s "$work/$name.old.sass" ]; then
    cuobjdump -sass "$work/$name.old.o" >"$work/$name.old.sass"
    [ -z "$cached" ] || cp "$work/$name.old.sass" "$cached"
  fi
  [ "$new_f" != "-" ] || continue  # OLD=-: only fill the cache
  cuobjdump -sass "$work/$name.new.o" >"$work/$name.new.sass"
  # Beside the cache, the working tree's side of the last run, to read both at leisure.
  [ -z "$cached" ] || cp "$work/$name.new.sass" "${cached%.sass}.new.sass"
  compare "$work/$name.old.sass" "$work/$name.new.sass" "$f" || status=1
done
exit $status

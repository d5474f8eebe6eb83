#!/usr/bin/env bash
# Whether a change alters the machine code of kernels: compiles each kernel file at REV and in
# the working tree for one architecture (the project's flags, full kernel set) and compares the
# SASS of every function. "same" means byte-identical instructions: a refactor that keeps every
# kernel "same" needs no GPU time to be trusted; one that does not is a kernel change (build and
# test it on the GPU). No GPU needed; cuobjdump and nvdisasm come from PyPI into .deps.
#
#   scripts/sass-diff.sh REV FILE.cu [FILE.cu ...] [--arch 90a]
#
# e.g. scripts/sass-diff.sh HEAD src/engines/sm80/bwd_d128.cu src/engines/sm80/fwd_d128.cu
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
rev=$1
shift
arch=90a
files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch=${2:?--arch needs a value}; shift ;;
    *) files+=("$1") ;;
  esac
  shift
done

tools="$root/.deps/cudatools"
if [ ! -x "$tools/nvidia/cu13/bin/cuobjdump" ] || [ ! -x "$tools/nvidia/cu13/bin/nvdisasm" ]; then
  python3 -m pip install --quiet --target "$tools" 'nvidia-cuda-cuobjdump~=13.0' \
    'nvidia-cuda-nvdisasm~=13.0' >&2
fi
export PATH="$tools/nvidia/cu13/bin:$PATH"
cutlass="$root/.deps/cutlass/cutlass_library/source/include"
[ -d "$cutlass" ] || "$root/scripts/setup.sh" >&2

work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add --detach "$work/old" "$rev" >/dev/null 2>&1

compile() {  # TREE FILE OUT
  nvcc -DFLOE_KERNELS_FULL=1 -I"$1/include" -I"$1/src" -isystem "$cutlass" -O3 -DNDEBUG \
    -gencode="arch=compute_$arch,code=sm_$arch" --expt-relaxed-constexpr -std=c++17 \
    -x cu -c "$1/$2" -o "$3"
}

status=0
for f in "${files[@]}"; do
  name=$(basename "$f" .cu)
  compile "$work/old" "$f" "$work/$name.old.o" &
  compile "$root" "$f" "$work/$name.new.o" &
  wait
  cuobjdump -sass "$work/$name.old.o" >"$work/$name.old.sass"
  cuobjdump -sass "$work/$name.new.o" >"$work/$name.new.sass"
  python3 - "$work/$name.old.sass" "$work/$name.new.sass" "$f" <<'PY' || status=1
import re, sys
def functions(path):
    out, name = {}, None
    for line in open(path):
        m = re.search(r"Function : (\S+)", line)
        if m:
            name = m.group(1)
            out[name] = []
        elif name and re.match(r"\s+/\*[0-9a-f]{4}\*/", line):
            out[name].append(line.split(";")[0].split("*/", 1)[1].strip())
    return out
old, new = functions(sys.argv[1]), functions(sys.argv[2])
changed = 0
for k in sorted(set(old) | set(new)):
    a, b = old.get(k), new.get(k)
    verdict = "same" if a == b else ("added" if a is None else "removed" if b is None else "CHANGED")
    changed += verdict != "same"
    print(f"{sys.argv[3]}: {verdict:8} {len(a or [])} -> {len(b or [])} instructions  {k}")
sys.exit(1 if changed else 0)
PY
done
exit $status

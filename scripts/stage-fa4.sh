#!/usr/bin/env bash
# FlashAttention 4 (flash-attn-4 from PyPI, a CuTe-DSL package with a Hopper path) for the GPU
# machine, which has no network: bench/peers.py times it as a third peer. Run here (PyPI is
# reachable). Its DSL wheel is larger than one device call may carry, so it is split in two:
#   scripts/stage-fa4.sh            -> .deps/fa4/a and .deps/fa4/b
# GPU machine, call 1 (carry .deps/fa4/a):  scripts/install-fa4.sh part-a
#             call 2 (carry .deps/fa4/b):   scripts/install-fa4.sh part-b   (then FLOE_FA4_SITE=/tmp/fa4site)
# The two calls must run while the machine stays warm (/tmp survives only that long).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/.deps/fa4
rm -rf "$dir" && mkdir -p "$dir/dl" "$dir/a" "$dir/b"
# The versions PEERS.md measured with.
python3 -m pip download -q --no-deps -d "$dir/dl" --python-version 3.12 --only-binary=:all: \
  --platform manylinux_2_28_x86_64 flash-attn-4==4.0.0b36 nvidia-cutlass-dsl==4.8.1 \
  nvidia-cutlass-dsl-libs-base==4.8.1 nvidia-cutlass-dsl-libs-core==4.8.1 \
  nvidia-cutlass-dsl-libs-cu13==4.8.1 apache-tvm-ffi quack-kernels einops torch-c-dlpack-ext
big=$(ls "$dir"/dl/nvidia_cutlass_dsl_libs_cu13-*.whl)
split -b 46000000 "$big" "$dir/dl/big.part."
cp "$dir"/dl/big.part.aa "$dir/a/"
cp "$dir"/dl/big.part.ab "$dir/b/"
basename "$big" >"$dir/b/big-wheel-name"
for w in "$dir"/dl/*.whl; do [ "$w" = "$big" ] || cp "$w" "$dir/a/"; done
rm -rf "$dir/dl"
du -sh "$dir/a" "$dir/b"

#!/usr/bin/env bash
# The GPU machine's half of scripts/stage-fa4.sh: part-a keeps the first half (and the small
# wheels) in /tmp/fa4; part-b joins the split wheel and installs everything into /tmp/fa4site,
# which bench/peers.py --fa4-site (gpu-check: FLOE_FA4_SITE) adds as a site folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
  part-a)
    mkdir -p /tmp/fa4 && cp "$root"/.deps/fa4/a/* /tmp/fa4/
    echo "install-fa4: part a in /tmp/fa4" ;;
  part-b)
    [ -f /tmp/fa4/big.part.aa ] || { echo "install-fa4: no /tmp/fa4/big.part.aa (part-a ran on another machine?)" >&2; exit 1; }
    cat /tmp/fa4/big.part.aa "$root/.deps/fa4/b/big.part.ab" >"/tmp/fa4/$(cat "$root/.deps/fa4/b/big-wheel-name")"
    rm /tmp/fa4/big.part.aa
    python3 -m pip install -q --no-deps --target /tmp/fa4site /tmp/fa4/*.whl
    echo "install-fa4: installed into /tmp/fa4site" ;;
  *) echo "usage: install-fa4.sh part-a|part-b" >&2; exit 2 ;;
esac

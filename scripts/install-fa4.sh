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
    # The split halves are *.part.aa / *.part.ab (stage-fa4.sh names them big.part.*; an older
    # staging named them after the wheel's suffix, cu13.part.*).
    first=$(ls /tmp/fa4/*.part.aa 2>/dev/null | head -1)
    second=$(ls "$root"/.deps/fa4/b/*.part.ab 2>/dev/null | head -1)
    [ -n "$first" ] || { echo "install-fa4: no /tmp/fa4/*.part.aa (part-a ran on another machine?)" >&2; exit 1; }
    [ -n "$second" ] || { echo "install-fa4: no .deps/fa4/b/*.part.ab (carry .deps/fa4/b)" >&2; exit 1; }
    cat "$first" "$second" >"/tmp/fa4/$(cat "$root/.deps/fa4/b/big-wheel-name")"
    rm "$first"
    python3 -m pip install -q --no-deps --target /tmp/fa4site /tmp/fa4/*.whl
    touch /tmp/fa4site/.complete  # what a job waiting for the site looks for
    echo "install-fa4: installed into /tmp/fa4site" ;;
  *) echo "usage: install-fa4.sh part-a|part-b" >&2; exit 2 ;;
esac

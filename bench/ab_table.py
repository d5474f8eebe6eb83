#!/usr/bin/env python3
"""One table from the JSON of A/B rounds (scripts/ab.sh, scripts/ab-env.sh): median ms per
problem and variant over the rounds, and each variant's time over the first one's.

    ab_table.py RESULTS_DIR ROUNDS NAME...

reads RESULTS_DIR/NAME-rR-g*.json (floe bench --json) and writes RESULTS_DIR/ab.txt.
"""
import glob
import json
import os
import statistics
import sys


def key(r):
    parts = [r["direction"], f"b{r['b']} h{r['h_q']}/{r['h_kv']}", f"s{r['s_q']}", f"d{r['d_qk']}"]
    if r.get("d_v") != r.get("d_qk"):
        parts.append(f"dv{r['d_v']}")
    if r.get("causal"):
        parts.append("causal")
    if r.get("feature"):
        parts.append(r["feature"])
    if r.get("group") == "serving":
        parts = [r["direction"], r["name"]]
    return " ".join(parts)


def main():
    results, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    times = {}  # key -> name -> [median ms of each round]
    for name in names:
        for rd in range(1, rounds + 1):
            for path in sorted(glob.glob(os.path.join(results, f"{name}-r{rd}-g*.json"))):
                for r in json.load(open(path))["records"]:
                    if r.get("median_ms") is None:
                        continue
                    times.setdefault(key(r), {}).setdefault(name, []).append(r["median_ms"])
    rows = [f"{'problem':52s}" + "".join(f"{n[:14]:>16s}" for n in names)]
    for k, per in times.items():
        base = statistics.median(per[names[0]]) if names[0] in per else None
        cells = []
        for n in names:
            if n not in per:
                cells.append(f"{'-':>16s}")
                continue
            m = statistics.median(per[n])
            ratio = f" {m / base:5.3f}" if base and n != names[0] else " " * 6
            cells.append(f"{m:9.3f}{ratio} ")
        rows.append(f"{k[:52]:52s}" + "".join(cells))
    print("\n".join(rows))
    with open(os.path.join(results, "ab.txt"), "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()

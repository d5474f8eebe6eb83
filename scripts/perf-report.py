#!/usr/bin/env python3
"""Turns the JSON of bench/peers.py into docs/perf.md (DESIGN §6): floe beside PyTorch's flash
and cuDNN backends, timed in the same run on the same GPU.

    python3 scripts/perf-report.py PEERS.json [-o docs/perf.md]

Sections: the standard sweep (forward, backward), the other shapes of PEERS.md, the cost of
features (time relative to the plain case), host overhead, workspace bytes. Standard library
only: it runs wherever the results are fetched to. bench/peers.py imports render() from here so
that its --md output and docs/perf.md are one and the same.
"""
import argparse
import json
import sys

# The peers of the run (bench/peers.py's "backends"); render() sets it from the data.
PEERS = ("flash", "cudnn")


# --- Cells -------------------------------------------------------------------------------


def tflops_cell(x):
    if x is None:
        return "—"
    return f"{x:.1f}" if x < 10 else f"{x:.0f}"


def ratio_cell(x):
    return "—" if x is None else f"{x:.2f}"


def ms_cell(x):
    if x is None:
        return "—"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def bytes_cell(n):
    if n is None:
        return "—"
    if n < 1024:
        return f"{n} B"
    x, unit = float(n), "B"
    for unit in ("KiB", "MiB", "GiB"):
        x /= 1024
        if x < 1024:
            break
    return f"{n:,} ({x:.1f} {unit})"


def floe_cell(row):
    """floe's TFLOP/s, or why there is none."""
    if row.get("status") == "ok":
        return tflops_cell(row.get("tflops"))
    return row.get("status", "?")


def peer(row, name):
    return (row.get("peers") or {}).get(name) or {}


def peer_cell(row, name):
    p = peer(row, name)
    if p.get("status") == "ok":
        return tflops_cell(p.get("tflops"))
    return p.get("status") or "—"


def ratio(row, name):
    f, p = row.get("tflops"), peer(row, name).get("tflops")
    if row.get("status") != "ok" or peer(row, name).get("status") != "ok" or not f or not p:
        return None
    return f / p


def best_ratio(row):
    """floe against the fastest peer that ran the problem: the one to beat."""
    rs = [ratio(row, name) for name in PEERS]
    rs = [x for x in rs if x is not None]
    return min(rs) if rs else None


def engine_cell(row):
    req = row.get("engine_requested", "auto")
    if req == "auto":
        return row.get("engine") or "—"
    return f"{row.get('engine') or req} (pinned)"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def yes_no(b):
    return "yes" if b else "no"


def shape_label(r):
    if r["d_qk"] != r["d_v"]:
        return f"Dqk {r['d_qk']}, Dv {r['d_v']}, Hq {r['h_q']}"
    if r["h_kv"] != r["h_q"]:
        return f"GQA {r['h_q']}:{r['h_kv']}, D {r['d_qk']}"
    return f"D {r['d_qk']}, Hq {r['h_q']}"


def two(a, b):
    """'fwd / bwd' in one cell, as PEERS.md writes it."""
    return f"{a} / {b}"


# --- Sections ----------------------------------------------------------------------------


def section_sweep(rows, direction):
    sel = [r for r in rows if r.get("group") == "sweep" and r["direction"] == direction]
    sel.sort(key=lambda r: (r["d_qk"], r["s_q"], r["causal"], r.get("engine_requested", "")))
    body = [
        [r["d_qk"], r["s_q"], yes_no(r["causal"]), engine_cell(r), floe_cell(r)] +
        [peer_cell(r, name) for name in PEERS] +
        [ratio_cell(ratio(r, name)) for name in PEERS] + [ratio_cell(best_ratio(r))]
        for r in sel
    ]
    header = (["D", "S", "causal", "floe engine", "floe"] + list(PEERS) +
              [f"floe/{name}" for name in PEERS] + ["floe/best"])
    return table(header, body) if body else "(not measured)"


def pair_by_direction(rows):
    """{(group, name, engine_requested): {"fwd": row, "bwd": row}} in first-seen order."""
    out = {}
    for r in rows:
        key = (r.get("group"), r.get("name"), r.get("engine_requested", "auto"))
        out.setdefault(key, {})[r["direction"]] = r
    return out


def section_shapes(rows):
    # PEERS.md's D 256 rows are sweep points (hidden 2048 makes Hq 8): listed here too.
    def wanted(r):
        if r.get("group") == "shapes":
            return True
        return (r.get("group") == "sweep" and r["d_qk"] == 256 and r["d_v"] == 256 and
                (r["s_q"], r["causal"]) in ((4096, False), (16384, True)))

    body = []
    for (_, _, _), d in pair_by_direction([r for r in rows if wanted(r)]).items():
        f, b = d.get("fwd", {}), d.get("bwd", {})
        r = f or b
        body.append([
            shape_label(r), r["s_q"], yes_no(r["causal"]),
            two(engine_cell(f) if f else "—", engine_cell(b) if b else "—"),
            two(floe_cell(f) if f else "—", floe_cell(b) if b else "—")] +
            [two(peer_cell(f, name), peer_cell(b, name)) for name in PEERS] +
            [two(ratio_cell(ratio(f, name)), ratio_cell(ratio(b, name))) for name in PEERS] +
            [two(ratio_cell(best_ratio(f)), ratio_cell(best_ratio(b)))])
    header = (["shape", "S", "causal", "floe engine", "floe"] + list(PEERS) +
              [f"floe/{name}" for name in PEERS] + ["floe/best"])
    return (table(header, body) + "\n\nTFLOP/s as forward / backward.") if body else \
        "(not measured)"


def section_features(rows):
    feats = [r for r in rows if r.get("group") == "features"]
    plain = {(r["direction"], r.get("engine_requested", "auto")): r
             for r in feats if r.get("feature") == "plain"}

    def rel(x, base):
        return None if x is None or not base else x / base

    def peer_ms(r, name):
        p = peer(r, name)
        return p.get("median_ms") if p.get("status") == "ok" else None

    body = []
    for r in feats:
        base = plain.get((r["direction"], r.get("engine_requested", "auto")), {})
        ok = r.get("status") == "ok"
        fm = r.get("median_ms") if ok else None
        cells = [r.get("feature") or r["name"], r["direction"], engine_cell(r),
                 ms_cell(fm) if ok else r.get("status", "?"), floe_cell(r),
                 ratio_cell(rel(fm, base.get("median_ms") if base.get("status") == "ok" else None))]
        for name in PEERS:
            pm = peer_ms(r, name)
            cells += [ms_cell(pm) if pm is not None else (peer(r, name).get("status") or "—"),
                      ratio_cell(rel(pm, peer_ms(base, name) if base else None))]
        body.append(cells)
    header = ["feature", "dir", "floe engine", "floe ms", "floe TFLOP/s", "floe vs plain"]
    for name in PEERS:
        header += [f"{name} ms", f"{name} vs plain"]
    if not body:
        return "(not measured)"
    return table(header, body) + (
        "\n\n\"vs plain\" is the time relative to the plain problem in the same direction: "
        "1.10 means the feature costs 10%. TFLOP/s of the window count only its visible "
        "pairs. The peers have no band mask, sink or softcap kernel, and the stats layout is "
        "not theirs to choose (n/a); their bias backward computes no bias gradient.")


def section_host(data):
    host = data.get("host_overhead") or {}
    by_dir = {h["direction"]: h for h in host.get("floe", [])}

    def us(h, engine=False):
        if not h:
            return "—"
        if h.get("status") != "ok":
            return h.get("status", "?")
        return f"{h['median_us']:.1f}" + (f" ({h.get('engine')})" if engine else "")

    body = []
    if by_dir:
        body.append(["floe (engine)", us(by_dir.get("fwd"), True), us(by_dir.get("bwd"), True)])
    for name in PEERS:
        p = host.get(name) or {}
        if p:
            body.append([name, us(p.get("fwd")), us(p.get("bwd"))])
    if not body:
        return "(not measured)"
    calls = (by_dir.get("fwd") or by_dir.get("bwd") or {}).get("calls", 100)
    return table(["", "forward µs", "backward µs"], body) + (
        f"\n\nHost time of one call, no synchronisation, median of {calls} calls on a "
        "1×1×128×64 problem: floe's `Plan::execute()` on a built plan; PyTorch's "
        "`scaled_dot_product_attention` (dispatch and output allocation included, no autograd "
        "graph) and `torch.autograd.grad` on a retained graph for the backward. PEERS.md "
        "measured 14.9 µs (flash) and 17.1 µs (cudnn) for the forward.")


def section_serving(rows):
    """Ragged prefill and decodes (`floe bench --group serving`), with the peers bench/peers.py
    maps them to (varlen_attn for the prefill, SDPA on dense K/V for uniform decodes): their
    TFLOP/s for the prefill, TB/s for a decode, and floe's ratio to them."""
    serving = [r for r in rows if r.get("group") == "serving"]
    with_peers = [b for b in PEERS if any(peer(r, b).get("status") for r in serving)]
    body = []
    for r in serving:
        ok = r.get("status") == "ok"
        tbs = r.get("tb_per_s")
        cells = [
            r["direction"], r["name"], r.get("total_q", "—"), r.get("total_kv", "—"),
            r.get("page_size") or "—", engine_cell(r),
            ms_cell(r.get("median_ms")) if ok else r.get("status", "?"),
            tflops_cell(r.get("tflops")) if ok else "—",
            f"{tbs:.2f}" if ok and tbs is not None else "—",
        ]
        for b in with_peers:
            p = peer(r, b)
            if p.get("status") == "ok":
                cells.append(f"{p['tb_per_s']:.2f} TB/s" if p.get("tb_per_s") is not None
                             else tflops_cell(p.get("tflops")))
            else:
                cells.append(p.get("status") or "—")
            cells.append(ratio_cell(r.get(f"ratio_{b}")))
        body.append(cells)
    header = ["dir", "problem", "query tokens", "keys", "page", "engine", "median ms", "TFLOP/s",
              "K+V TB/s"]
    for b in with_peers:
        header += [b, f"vs {b}"]
    return table(header, body) if body else None


def section_workspace(rows):
    body = []
    for (_, name, req), d in pair_by_direction(rows).items():
        f, b = d.get("fwd"), d.get("bwd")
        body.append([
            name + ("" if req == "auto" else f" [{req}]"),
            engine_cell(f) if f else "—",
            bytes_cell(f.get("workspace_bytes")) if f else "—",
            engine_cell(b) if b else "—",
            bytes_cell(b.get("workspace_bytes")) if b else "—",
        ])
    header = ["problem", "forward engine", "forward workspace", "backward engine",
              "backward workspace"]
    return table(header, body) if body else "(not measured)"


def render(data, plot=None):
    global PEERS
    PEERS = tuple(data.get("backends") or ("flash", "cudnn"))
    fl = data.get("floe") or {}
    gpu = (fl.get("gpu") or {}).get("name") or data.get("gpu") or "?"
    rows = data.get("rows", [])
    declined = [r for r in rows if r.get("status") == "declined"]
    errors = [r for r in rows if r.get("status") == "error"]
    method = fl.get("method") or {}
    out = [
        "# floe performance",
        "",
        f"- date: {fl.get('date') or data.get('date') or '?'}",
        f"- GPU: {gpu} ({(fl.get('gpu') or {}).get('arch', '?')})",
        f"- floe commit: {fl.get('commit') or 'unknown'}",
        f"- peers: PyTorch {data.get('torch', '?')} (CUDA {data.get('cuda', '?')}), cuDNN "
        f"{data.get('cudnn', '?')}" +
        (f", FlashAttention 4 {(data.get('fa4') or {}).get('version') or '?'} (flash-attn-4, "
         "its own BSHD layout)" if "fa4" in PEERS else "") +
        ", timed in the same run on the same problems; floe/best is floe against the fastest "
        "peer of each problem",
        "",
        "TFLOP/s by the FlashAttention convention (DESIGN §6): forward 2·B·Hq·Sq·Skv·(Dqk+Dv), "
        "halved for causal, backward 2.5× forward; a sliding window counts its visible pairs "
        "only. Median of "
        f"{method.get('calls', 20)} calls after {method.get('warmups', 3)} warm-ups, CUDA events "
        "around each call; the forward writes stats (LSE), as in training; the backward is timed "
        "without its forward (PyTorch: `torch.autograd.grad` on a retained graph). Ratios above 1 "
        "mean floe is faster. \"declined\": the engine does not serve the problem; \"no kernel\": "
        "the peer has none for it.",
        "",
    ]
    if plot:
        out += [f"![TFLOP/s against sequence length, per engine]({plot})", ""]
    out += [
        "## Standard sweep: forward",
        "",
        "bf16, 16k tokens (B = 16384/S), hidden 2048 (Hq = 2048/D), TFLOP/s.",
        "",
        section_sweep(rows, "fwd"),
        "",
        "## Standard sweep: backward",
        "",
        section_sweep(rows, "bwd"),
        "",
        "## Other shapes",
        "",
        "16k tokens.",
        "",
        section_shapes(rows),
        "",
        "## Cost of features",
        "",
        "D 128, S 4096, B 4, Hq 16, non-causal; each problem differs from plain in one feature: "
        "GQA 8:1 (Hkv 2), a sliding window of 1024 keys to the left (none to the right), a bias "
        "[1, Hq] broadcast over the batch (with its gradient, summed over the batch; "
        "`bias_nograd`: the same bias without a gradient, what the peers' bias backward "
        "computes), a per-head sink, softcap 30, stats rows with a gap, "
        "q/k/v/o (and their gradients) in BSHD layout, the bitwise-deterministic mode (P7).",
        "",
        section_features(rows),
        "",
    ]
    serving = section_serving(rows)
    if serving:
        out += [
            "## Serving",
            "",
            "GQA 32:8, d128, causal aligned bottom-right. Ragged: 8 packed sequences of seeded "
            "lengths (THD). Paged decode: pages scattered by a seeded block table; dense: K/V "
            "[B, Hkv, S, D]; zipf: lengths by Zipf's law at a uniform shape's bytes. TFLOP/s "
            "count the visible pairs of the actual lengths; TB/s count the K+V bytes read "
            "(SERVING.md §0's convention). Peers (bench/peers.py): the prefill through "
            "varlen_attn (FlashAttention 2) on the flash column, the uniform decodes through "
            "SDPA on dense K/V (the §0 anchor reads the same bytes unpaged).",
            "",
            serving,
            "",
        ]
    out += [
        "## Host overhead",
        "",
        section_host(data),
        "",
        "## Workspace",
        "",
        "Bytes of the plan's workspace (`Plan::workspace_bytes()`, exact).",
        "",
        section_workspace(rows),
        "",
    ]
    if declined or errors:
        out += ["## Declined and failed", ""]
        for r in declined + errors:
            out.append(f"- {r['direction']} {r['name']} [{r.get('engine_requested', 'auto')}]: "
                       f"{r['status']}: {r.get('reason') or ''}")
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("peers_json", help="the --out JSON of bench/peers.py")
    ap.add_argument("-o", "--output", help="write here (default: stdout)")
    ap.add_argument("--plot", help="link this PNG (path relative to the output) under the header")
    args = ap.parse_args()
    with open(args.peers_json) as f:
        data = json.load(f)
    text = render(data, args.plot)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
        print(f"perf-report: wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Times PyTorch's flash and cuDNN SDPA backends on the problems of a `floe bench --json` run.

    floe bench --json $OUT/floe.json
    python3 bench/peers.py --floe $OUT/floe.json --out $OUT/peers.json \\
        --md $OUT/perf.md --plot $OUT/perf.png

Runs on the GPU machine (torch with CUDA, matplotlib for --plot; no network). Every record of
floe's JSON is timed again through torch.nn.functional.scaled_dot_product_attention under
sdpa_kernel([FLASH_ATTENTION]) and sdpa_kernel([CUDNN_ATTENTION]): same shapes, dtype, causal
mask, GQA (enable_gqa), bias (attn_mask) and layout (BSHD as a transposed view), the same
warm-ups, timed calls and input-set rotation, CUDA events around each call. The forward runs
with q, k, v requiring grad (a training forward, which writes the LSE as floe's does); the
backward is torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), its forward run
outside the timed region. A problem a backend cannot run is recorded as "no kernel" with
PyTorch's reason. With --fa4-site (where ../shared/peers/install-fa4.sh put flash-attn-4) the
backend "fa4" times FlashAttention 4's flash_attn_func on the same problems, its q, k, v in its
own BSHD layout. The table (markdown, the same as scripts/perf-report.py writes) goes to
stdout and --md, everything to --out, TFLOP/s against S to --plot.

Serving records (`floe bench --group serving`): the ragged prefill is timed on the flash
backend through torch.nn.attention.varlen.varlen_attn (FlashAttention 2; THD q, k, v, int32
cumulative offsets, the host maxima); the decodes with uniform lengths (paged or not) through
SDPA on dense K/V [B, Hkv, S, D] with enable_gqa and no autograd (SERVING.md §0's anchor: the
peer reads the same bytes from a dense cache), their TB/s counted as floe's. Skewed lengths and
Sq > 1 under a bottom-right causal mask have no SDPA call (n/a).
"""
import argparse
import importlib.util
import json
import pathlib
import statistics
import sys
import time
import warnings

PEERS = ("flash", "cudnn", "fa4")
# The fields that make two floe records the same problem for a peer.
PROBLEM_FIELDS = ("dtype", "b", "h_q", "h_kv", "s_q", "s_kv", "d_qk", "d_v", "causal",
                  "window", "bias", "sink", "softcap", "stats_gap", "layout", "deterministic",
                  "ragged", "page_size", "seq_q", "seq_kv")


def perf_report():
    """scripts/perf-report.py as a module: one markdown renderer for both."""
    path = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "perf-report.py"
    spec = importlib.util.spec_from_file_location("perf_report", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def problem_key(r):
    return json.dumps({k: r.get(k) for k in PROBLEM_FIELDS}, sort_keys=True) + r["direction"]


def is_serving(r):
    """A ragged prefill or a decode (floe writes kv_bytes for its decodes)."""
    return bool(r.get("ragged") or r.get("page_size") or r.get("kv_bytes") is not None)


def bottom_right_causal(r):
    w = r.get("window") or {}
    return w.get("left") is None and w.get("right") == 0 and w.get("align") == "bottom_right"


def serving_kind(r, backend):
    """("varlen" | "dense_decode", is_causal) for a serving record, or ("skip", (status,
    reason)) where no PyTorch call expresses it."""
    if r.get("bias") or r.get("sink") or r.get("softcap"):
        return "skip", ("n/a", "the serving peers are timed without bias, sink or softcap")
    if r.get("ragged"):
        if backend != "flash":
            return "skip", ("n/a", "varlen prefill is timed on the flash backend only "
                                   "(varlen_attn, FlashAttention 2)")
        same = r.get("seq_q") == r.get("seq_kv")
        if bottom_right_causal(r) or (r.get("causal") and same):
            return "varlen", True  # FlashAttention 2's varlen causal is aligned bottom-right
        if not r.get("window") and not r.get("causal"):
            return "varlen", False
        return "skip", ("n/a", "varlen_attn has no band mask but causal")
    lengths = r.get("seq_kv") or [r["s_kv"]] * r["b"]
    if any(n != r["s_kv"] for n in lengths):
        return "skip", ("n/a", "SDPA has no per-batch key lengths: skewed decodes have no dense "
                               "peer")
    if r.get("window") and not (bottom_right_causal(r) and r["s_q"] == 1):
        return "skip", ("n/a", "SDPA has no bottom-right causal mask for Sq > 1")
    return "dense_decode", False


def measure_serving(torch, F, backend, name, r, settings):
    """The ragged prefill through varlen_attn, a decode through SDPA on dense K/V; the same
    warm-ups, timed calls and input-set rotation as floe."""
    kind, arg = serving_kind(r, name)
    if kind == "skip":
        return {"status": arg[0], "reason": arg[1]}
    from torch.nn.attention import sdpa_kernel

    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[r["dtype"]]
    n_sets = max(1, int(r.get("input_sets") or 1))
    result = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sets = []
        try:
            if kind == "varlen":
                from torch.nn.attention.varlen import varlen_attn

                def offsets(lengths):
                    out = [0]
                    for n in lengths:
                        out.append(out[-1] + n)
                    return torch.tensor(out, dtype=torch.int32, device="cuda")

                cu_q, cu_k = offsets(r["seq_q"]), offsets(r["seq_kv"])
                max_q, max_k = max(r["seq_q"]), max(r["seq_kv"])
                t_q, t_k = sum(r["seq_q"]), sum(r["seq_kv"])
                for _ in range(n_sets):
                    q = torch.randn(t_q, r["h_q"], r["d_qk"], device="cuda", dtype=dt)
                    k = torch.randn(t_k, r["h_kv"], r["d_qk"], device="cuda", dtype=dt)
                    v = torch.randn(t_k, r["h_kv"], r["d_v"], device="cuda", dtype=dt)
                    sets.append([t.requires_grad_(True) for t in (q, k, v)])

                # The causal flag's spelling moved between torch releases: is_causal (early),
                # a window of (-1, 0) (later: FlashAttention's, aligned bottom-right); GQA needs
                # enable_gqa where the release has it.
                import inspect
                params = inspect.signature(varlen_attn).parameters
                kwargs = {}
                if "is_causal" in params:
                    kwargs["is_causal"] = arg
                elif arg:
                    kwargs["window_size"] = (-1, 0)
                if r["h_q"] != r["h_kv"]:
                    if "enable_gqa" not in params:
                        raise RuntimeError("this torch's varlen_attn has no enable_gqa")
                    kwargs["enable_gqa"] = True

                def call(s):
                    return varlen_attn(s[0], s[1], s[2], cu_q, cu_k, max_q, max_k, **kwargs)

                if r["direction"] == "fwd":
                    def fn(i):
                        return call(sets[i % n_sets])
                else:
                    for s in sets:
                        o = call(s)
                        s += [o, torch.randn_like(o)]

                    def fn(i):
                        q, k, v, o, do = sets[i % n_sets]
                        return torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
                result = timed(torch, fn, r, settings)
            else:
                for _ in range(n_sets):
                    sets.append((
                        torch.randn(r["b"], r["h_q"], r["s_q"], r["d_qk"], device="cuda", dtype=dt),
                        torch.randn(r["b"], r["h_kv"], r["s_kv"], r["d_qk"], device="cuda",
                                    dtype=dt),
                        torch.randn(r["b"], r["h_kv"], r["s_kv"], r["d_v"], device="cuda",
                                    dtype=dt)))
                gqa = r["h_kv"] != r["h_q"]
                with sdpa_kernel([backend]):
                    def fn(i):
                        q, k, v = sets[i % n_sets]
                        return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
                    result = timed(torch, fn, r, settings)
                result["peer_layout"] = "dense K/V, no autograd"
            if result.get("status") == "ok" and r.get("kv_bytes"):
                result["tb_per_s"] = r["kv_bytes"] / result["median_ms"] / 1e9
        except torch.cuda.OutOfMemoryError as e:
            result = {"status": "error", "reason": "out of memory: " + str(e).splitlines()[0]}
        except (RuntimeError, ImportError, TypeError) as e:
            status, reason = classify(e, caught)
            result = {"status": status, "reason": reason}
        finally:
            del sets
            release(torch)
    return result


def outside_sdpa(r):
    """(status, reason) for what torch SDPA has no way to express; None: try the backend."""
    if r.get("window"):
        return "no kernel", "torch SDPA has no band mask but causal (a materialised mask is " \
                            "another problem)"
    if r.get("sink"):
        return "no kernel", "torch SDPA has no attention sink"
    if r.get("softcap"):
        return "no kernel", "torch SDPA has no softcap"
    if r.get("stats_gap"):
        return "n/a", "torch SDPA does not expose the layout of its stats (LSE)"
    if r.get("deterministic"):
        return "n/a", "torch's deterministic mode is a process-wide switch, not timed here"
    return None


class Inputs:
    """One input set: q, k, v (leaves requiring grad), the bias, and for the backward the
    forward's output and a random upstream gradient."""

    def __init__(self, torch, r):
        dt = {"bf16": torch.bfloat16, "f16": torch.float16}[r["dtype"]]

        def tensor(h, s, d):
            if r.get("layout") == "bshd":  # stored [B, S, H, D], seen as [B, H, S, D]
                x = torch.randn(r["b"], s, h, d, device="cuda", dtype=dt).transpose(1, 2)
            else:
                x = torch.randn(r["b"], h, s, d, device="cuda", dtype=dt)
            return x.requires_grad_(True)

        self.q = tensor(r["h_q"], r["s_q"], r["d_qk"])
        self.k = tensor(r["h_kv"], r["s_kv"], r["d_qk"])
        self.v = tensor(r["h_kv"], r["s_kv"], r["d_v"])
        self.bias = None
        if r.get("bias"):
            bb, bh = r["bias"]
            self.bias = torch.randn(bb, bh, r["s_q"], r["s_kv"], device="cuda", dtype=dt)
        self.out = None
        self.dout = None


def sdpa(F, r, s):
    kw = {}
    if s.bias is not None:
        kw["attn_mask"] = s.bias
    if r["causal"]:
        kw["is_causal"] = True  # top-left, as floe's bench problems are
    if r["h_kv"] != r["h_q"]:
        kw["enable_gqa"] = True
    return F.scaled_dot_product_attention(s.q, s.k, s.v, **kw)


def time_calls(torch, fn, warmups, calls, budget_ms, min_calls=5):
    """floe bench's method: warm-ups timed one by one (a slow problem skips the rest and gets
    fewer timed calls, never fewer than min_calls), then CUDA events around each call."""
    est, done = 0.0, 0
    for w in range(warmups):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(w)
        b.record()
        torch.cuda.synchronize()
        est, done = a.elapsed_time(b), done + 1
        if w >= 1 and est * (warmups - w - 1 + calls) > budget_ms:
            break
    if est > 0 and est * calls > budget_ms:
        calls = min(calls, max(min_calls, int(budget_ms / est)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(calls)]
    for i, (a, b) in enumerate(events):
        a.record()
        fn(warmups + i)
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in events], done


def timed(torch, fn, r, settings):
    """The "ok" record of a peer: fn(i) timed by floe bench's method, TFLOP/s from r's flops."""
    ms, warmed = time_calls(torch, fn, settings["warmups"], settings["calls"],
                            settings["budget_ms"])
    med = statistics.median(ms)
    return {"status": "ok", "median_ms": med, "min_ms": min(ms),
            "tflops": r["flops"] / med / 1e9, "tflops_best": r["flops"] / min(ms) / 1e9,
            "warmups": warmed, "timed_calls": len(ms), "ms": ms}


def release(torch):
    """After a peer's problem, failed or not: its memory back before the next one."""
    try:
        torch.cuda.synchronize()
    except RuntimeError:
        pass
    torch.cuda.empty_cache()


def classify(exc, caught):
    """A backend's refusal is "no kernel"; anything else is an error. PyTorch says why in
    warnings before its RuntimeError."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    why = []
    for w in caught:
        text = " ".join(str(w.message).split())
        if text not in why:
            why.append(text)
    reason = "; ".join(why + [msg])
    if len(reason) > 400:
        reason = reason[:397] + "..."
    refused = ("No available kernel" in msg or "not supported" in msg.lower() or
               "CUDNN_STATUS_NOT_SUPPORTED" in msg or "cuDNN Frontend error" in msg)
    return ("no kernel" if refused else "error"), reason


def measure(torch, F, backend, name, r, settings):
    if is_serving(r):
        return measure_serving(torch, F, backend, name, r, settings)
    skip = outside_sdpa(r)
    if skip:
        return {"status": skip[0], "reason": skip[1]}
    from torch.nn.attention import sdpa_kernel

    n_sets = max(1, int(r.get("input_sets") or 1))
    result = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sets = []
        try:
            sets = [Inputs(torch, r) for _ in range(n_sets)]
            with sdpa_kernel([backend]):
                if r["direction"] == "fwd":
                    def fn(i):
                        return sdpa(F, r, sets[i % n_sets])
                else:
                    for s in sets:
                        s.out = sdpa(F, r, s)
                        s.dout = torch.randn_like(s.out)

                    def fn(i):
                        s = sets[i % n_sets]
                        return torch.autograd.grad(s.out, (s.q, s.k, s.v), s.dout,
                                                   retain_graph=True)
                result = timed(torch, fn, r, settings)
        except torch.cuda.OutOfMemoryError as e:
            result = {"status": "error", "reason": "out of memory: " + str(e).splitlines()[0]}
        except RuntimeError as e:
            status, reason = classify(e, caught)
            result = {"status": status, "reason": reason}
        finally:
            del sets
            release(torch)
    return result


def outside_fa4(r):
    """(status, reason) for what floe's bench asks and FA4's flash_attn_func is not mapped to."""
    if is_serving(r):
        return "n/a", "FA4's varlen and paged calls are not mapped to floe's serving problems here"
    if r.get("bias"):
        return "no kernel", "FA4's flash_attn_func takes no additive bias"
    if r.get("window"):
        return "n/a", "FA4's window convention is not mapped to floe's band here"
    if r.get("sink"):
        return "n/a", "FA4's learnable sink is not mapped to floe's sink here"
    if r.get("stats_gap"):
        return "n/a", "FA4 does not expose the layout of its stats (LSE)"
    if r.get("deterministic"):
        return "n/a", "FA4's deterministic backward is not timed here"
    return None


def measure_fa4(torch, fa4, r, settings):
    """FlashAttention 4 on floe's problem: q, k, v [B, S, H, D] (its layout), the same warm-ups,
    timed calls, input-set rotation and budget; the backward through its autograd function."""
    if fa4 is None:
        return {"status": "unavailable", "reason": "flash-attn-4 not importable (--fa4-site)"}
    skip = outside_fa4(r)
    if skip:
        return {"status": skip[0], "reason": skip[1]}
    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[r["dtype"]]
    n_sets = max(1, int(r.get("input_sets") or 1))
    kw = {"causal": bool(r["causal"])}
    if r.get("softcap"):
        kw["softcap"] = float(r["softcap"])
    sets = []
    try:
        for _ in range(n_sets):
            q = torch.randn(r["b"], r["s_q"], r["h_q"], r["d_qk"], device="cuda", dtype=dt)
            k = torch.randn(r["b"], r["s_kv"], r["h_kv"], r["d_qk"], device="cuda", dtype=dt)
            v = torch.randn(r["b"], r["s_kv"], r["h_kv"], r["d_v"], device="cuda", dtype=dt)
            sets.append([t.requires_grad_(True) for t in (q, k, v)])

        def first(out):
            return out[0] if isinstance(out, tuple) else out

        if r["direction"] == "fwd":
            def fn(i):
                return fa4(*sets[i % n_sets], **kw)
        else:
            for st in sets:
                o = first(fa4(*st, **kw))
                st += [o, torch.randn_like(o)]

            def fn(i):
                q, k, v, o, do = sets[i % n_sets]
                return torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
        return timed(torch, fn, r, settings)
    except torch.cuda.OutOfMemoryError as e:
        return {"status": "error", "reason": "out of memory: " + str(e).splitlines()[0]}
    except Exception as e:  # the DSL raises its own types for what it cannot compile
        msg = " ".join(str(e).split())[:300] or type(e).__name__
        return {"status": "no kernel", "reason": f"{type(e).__name__}: {msg}"}
    finally:
        del sets
        release(torch)


def load_fa4(site_dir):
    """flash_attn_func of flash-attn-4, or (None, why)."""
    import site
    if site_dir:
        site.addsitedir(site_dir)  # the DSL adds its packages through a .pth file
    try:
        from flash_attn.cute.interface import flash_attn_func
        return flash_attn_func, None
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"


def fa4_version():
    import importlib.metadata
    try:
        return importlib.metadata.version("flash-attn-4")
    except Exception:
        return None


def host_time(torch, F, backend, r, direction, calls):
    """Host time of one call, no sync: what PEERS.md lists beside floe's execute()."""
    from torch.nn.attention import sdpa_kernel

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            s = Inputs(torch, r)
            with sdpa_kernel([backend]):
                if direction == "fwd":
                    q, k, v = (t.detach() for t in (s.q, s.k, s.v))  # no autograd graph

                    def fn():
                        return F.scaled_dot_product_attention(q, k, v)
                else:
                    s.out = sdpa(F, r, s)
                    s.dout = torch.randn_like(s.out)

                    def fn():
                        return torch.autograd.grad(s.out, (s.q, s.k, s.v), s.dout,
                                                   retain_graph=True)
                for _ in range(10):
                    fn()
                torch.cuda.synchronize()
                us = []
                for _ in range(calls):
                    t0 = time.perf_counter_ns()
                    fn()
                    us.append((time.perf_counter_ns() - t0) / 1e3)
                torch.cuda.synchronize()
            return {"status": "ok", "calls": calls, "median_us": statistics.median(us),
                    "min_us": min(us)}
        except RuntimeError as e:
            status, reason = classify(e, caught)
            return {"status": status, "reason": reason}


def label(r):
    s = f"{r['direction']} {r['name']}"
    return s if r.get("engine_requested", "auto") == "auto" else s + f" [{r['engine_requested']}]"


def cell(p):
    if p.get("status") == "ok":
        return f"{p['median_ms']:.3f} ms {p['tflops']:.0f} TFLOP/s"
    return p.get("status", "?")


def plot(data, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    rows = [r for r in data["rows"] if r.get("group") == "sweep"]
    panels = [(d_, dim, c) for d_ in ("fwd", "bwd") for dim in (64, 128) for c in (False, True)]
    fig, axes = plt.subplots(2, 4, figsize=(20, 9), sharex=True)
    for ax, (direction, dim, causal) in zip(axes.flat, panels):
        series = {}  # label -> {S: TFLOP/s}
        for r in rows:
            if r["direction"] != direction or r["d_qk"] != dim or r["causal"] != causal:
                continue
            req = r.get("engine_requested", "auto")
            name = "floe" if req == "auto" else f"floe {req}"
            if r.get("status") == "ok":
                series.setdefault(name, {})[r["s_q"]] = r["tflops"]
            for peer in PEERS:
                p = (r.get("peers") or {}).get(peer) or {}
                if p.get("status") == "ok":
                    series.setdefault(peer, {})[r["s_q"]] = p["tflops"]
        for name, pts in series.items():
            xs = sorted(pts)
            ax.plot(xs, [pts[x] for x in xs], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xticks([512, 1024, 2048, 4096, 8192, 16384])
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_title(f"{direction} D {dim} {'causal' if causal else 'non-causal'}")
        ax.set_xlabel("sequence length S (16k tokens)")
        ax.set_ylabel("TFLOP/s")
        ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.3)
        if series:
            ax.legend()
    fl = data.get("floe") or {}
    fig.suptitle(f"floe vs PyTorch SDPA, bf16, hidden 2048 — {(fl.get('gpu') or {}).get('name')}"
                 f", {fl.get('date')}, floe {(fl.get('commit') or 'unknown')[:12]}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--floe", required=True, help="floe bench's --json output")
    ap.add_argument("--out", required=True, help="write floe and the peers here (JSON)")
    ap.add_argument("--md", help="write the markdown table here (docs/perf.md's content)")
    ap.add_argument("--plot", help="write a PNG of TFLOP/s against S here")
    ap.add_argument("--backends", default=None,
                    help="comma-separated of flash,cudnn,fa4 (default: flash,cudnn, and fa4 "
                         "with --fa4-site)")
    ap.add_argument("--fa4-site", help="a site folder holding flash-attn-4 (install-fa4.sh)")
    ap.add_argument("--warmups", type=int, help="default: floe's")
    ap.add_argument("--calls", type=int, help="default: floe's")
    ap.add_argument("--budget-ms", type=float, help="default: floe's")
    ap.add_argument("--host-calls", type=int, default=100)
    args = ap.parse_args()

    with open(args.floe) as f:
        floe = json.load(f)
    method = floe.get("method") or {}
    settings = {
        "warmups": args.warmups if args.warmups is not None else method.get("warmups", 3),
        "calls": args.calls if args.calls is not None else method.get("calls", 20),
        "budget_ms": args.budget_ms if args.budget_ms is not None else method.get("budget_ms",
                                                                                  1000),
    }
    report = perf_report()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend

    if not torch.cuda.is_available():
        print("peers.py: no CUDA device", file=sys.stderr)
        return 1
    gpu = torch.cuda.get_device_name()
    floe_gpu = (floe.get("gpu") or {}).get("name")
    if floe_gpu and floe_gpu != gpu:
        print(f"peers.py: warning: floe ran on {floe_gpu}, this is {gpu}", file=sys.stderr)
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    default = "flash,cudnn" + (",fa4" if args.fa4_site else "")
    wanted = [b for b in (args.backends or default).split(",") if b]
    fa4, fa4_why = (None, None)
    if "fa4" in wanted:
        fa4, fa4_why = load_fa4(args.fa4_site)
        if fa4 is None:
            print(f"peers.py: fa4 unavailable: {fa4_why}", file=sys.stderr)
    for b in wanted:
        if b not in backends and b != "fa4":
            print(f"peers.py: --backends {b}: not one of {', '.join(backends)}", file=sys.stderr)
            return 2
    torch.manual_seed(2024)

    t_start = time.time()
    records = floe.get("records", [])
    cache, rows = {}, []
    for i, r in enumerate(records, 1):
        key = problem_key(r)
        if key not in cache:
            cache[key] = {b: (measure_fa4(torch, fa4, r, settings) if b == "fa4" else
                              measure(torch, F, backends[b], b, r, settings)) for b in wanted}
        peers = cache[key]
        row = {k: v for k, v in r.items() if k != "ms"}
        row["peers"] = peers
        for b in wanted:
            p = peers[b]
            ok = row.get("status") == "ok" and p.get("status") == "ok"
            row[f"ratio_{b}"] = row["tflops"] / p["tflops"] if ok and p["tflops"] else None
        rows.append(row)
        floe_text = (f"{row['median_ms']:.3f} ms {row['tflops']:.0f} TFLOP/s"
                     if row.get("status") == "ok" else row.get("status"))
        print(f"[{i}/{len(records)}] {label(r)}: floe {floe_text}, " +
              ", ".join(f"{b} {cell(peers[b])}" for b in wanted), file=sys.stderr, flush=True)

    host = {"floe": floe.get("host_overhead", [])}
    for b in wanted:
        if b == "fa4":
            continue  # host time: PyTorch's two backends only
        host[b] = {}
        for h in floe.get("host_overhead", []):
            host[b][h["direction"]] = host_time(torch, F, backends[b], h, h["direction"],
                                                args.host_calls)

    out = {
        "tool": "bench/peers.py",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gpu": gpu,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "backends": wanted,
        "fa4": ({"site": args.fa4_site, "error": fa4_why, "version": fa4_version()}
                if "fa4" in wanted else None),
        "method": dict(settings, timer="CUDA events around each call; median",
                       forward="q, k, v require grad (training forward)",
                       backward="torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), "
                                "forward outside the timed region; no bias gradient"),
        "floe": {k: v for k, v in floe.items() if k not in ("records", "host_overhead")},
        "rows": rows,
        "host_overhead": host,
        "seconds": time.time() - t_start,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    md = report.render(out)
    sys.stdout.write(md)
    if args.md:
        with open(args.md, "w") as f:
            f.write(md)
    if args.plot:
        plot(out, args.plot)
    print(f"peers.py: {len(rows)} rows in {out['seconds']:.0f} s; wrote {args.out}"
          + (f", {args.md}" if args.md else "") + (f", {args.plot}" if args.plot else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

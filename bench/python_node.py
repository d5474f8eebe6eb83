#!/usr/bin/env python3
"""Host time per call of floe.attention's eager calls, with and without floe._floe_torch's C++
autograd node, in one process (issue 15: <= 8 us forward, <= 20 us backward).

    python3 bench/python_node.py [--device cuda|cpu] [--calls 300] [--rounds 2]
        [--json $OUT/python_node.json] [--stub]

For each shape (bf16; the first is bench/python_host.py's host-time problem, 1x2x128x128
causal, the one measured in docs/perf.md's Session 9) and each round, the node off then on
(floe._ops._set_autograd_node; FLOE_TORCH_NODE=0 only sets the state a process starts in),
times, each call alone (the GPU synchronized before it, outside the timed region; median) and
queued (a loop with no sync, best of three loops), in us per call:
  fwd_nograd   floe.attention under torch.no_grad() (does not depend on the node: a control)
  fwd_grad     floe.attention on tensors that require grad (records the node or the Function)
  bwd_autograd torch.autograd.grad(out, (q, k, v), d_o, retain_graph=True) on one recorded
               graph: the backward through PyTorch alone (autograd's engine included)
  bwd_node     the recorded node's backward called directly (no autograd engine): the
               Function's apply, or the C++ node's __call__
  bwd_plain    _ops._plain_backward on a cache hit, no autograd (Session 8/9's backward
               measure; does not depend on the node: a control)
  fwd_bwd      a forward with grad and its torch.autograd.grad
  fwd_nograd_py, fwd_grad_py  the same forwards through _ops.attention, the Python function:
               what floe.attention costs without floe._floe_torch's C++ front (_ops.front_state;
               FLOE_TORCH_FRONT=0 makes floe.attention that function)
It checks that both give bitwise the same o, lse, dq, dk, dv. --stub replaces the C++
layer's execute by nothing (cpu: host overhead without the reference engine's compute); it
only exists where the extension was built with it and is for local measurement.
"""

import argparse
import json
import os
import platform
import subprocess
import time

import torch

import floe
from floe import _ops

SHAPES = (
    # (B, Hq, Hkv, S, D, causal)
    (1, 2, 2, 128, 128, True),
    (1, 2, 2, 128, 64, True),
    (2, 16, 4, 128, 128, False),
    (1, 8, 8, 512, 128, True),
)


def alone_us(fn, calls, sync):
    for _ in range(10):
        fn()
    times = []
    for _ in range(calls):
        sync()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    sync()
    times.sort()
    return 1e6 * times[len(times) // 2]


def queued_us(fn, calls, sync, reps=3):
    for _ in range(10):
        fn()
    sync()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        sync()
        best = min(best, 1e6 * (t1 - t0) / calls)
    return best


def problem(shape, dev):
    b, hq, hkv, s, d, causal = shape
    torch.manual_seed(0)
    q = torch.randn(b, hq, s, d, device=dev, dtype=torch.bfloat16)
    k = torch.randn(b, hkv, s, d, device=dev, dtype=torch.bfloat16)
    v = torch.randn(b, hkv, s, d, device=dev, dtype=torch.bfloat16)
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    d_o = torch.randn(b, hq, s, d, device=dev, dtype=torch.bfloat16)
    return q, k, v, qg, kg, vg, d_o, causal


def results(qg, kg, vg, d_o, causal):
    o, lse = floe.attention(qg, kg, vg, causal=causal, return_lse=True)
    grads = torch.autograd.grad(o, (qg, kg, vg), d_o)
    return (o.detach(), lse) + tuple(grads)


def measure(shape, dev, calls, sync):
    q, k, v, qg, kg, vg, d_o, causal = problem(shape, dev)
    options = _ops._options(causal, None, "top_left", None, None, False, "auto")
    with torch.no_grad():
        o, lse, _ = _ops._plain_forward(q, k, v, options, True)

    def fwd_nograd():
        with torch.no_grad():
            floe.attention(q, k, v, causal=causal)

    def fwd_grad():
        floe.attention(qg, kg, vg, causal=causal)

    py_attention = _ops.attention  # the Python function, where floe.attention is the C++ front

    def fwd_nograd_py():
        with torch.no_grad():
            py_attention(q, k, v, causal=causal)

    def fwd_grad_py():
        py_attention(qg, kg, vg, causal=causal)

    def fwd_bwd():
        out = floe.attention(qg, kg, vg, causal=causal)
        torch.autograd.grad(out, (qg, kg, vg), d_o)

    def bwd_plain():
        _ops._plain_backward(None, d_o, q, k, v, o, lse, options)

    row = {}
    # Misses first (plans built, entries handed to C++), then every timed call is a hit.
    fwd_bwd()
    fwd_nograd()
    bwd_plain()
    graph = floe.attention(qg, kg, vg, causal=causal)
    node = graph.grad_fn.name()
    # The node's own backward, called directly (no engine): the Function's apply, the C++
    # node's __call__.
    call_node = getattr(graph.grad_fn, "apply", graph.grad_fn)
    for name, fn, n in (("fwd_nograd", fwd_nograd, calls), ("fwd_grad", fwd_grad, calls),
                        ("bwd_autograd", lambda: torch.autograd.grad(
                            graph, (qg, kg, vg), d_o, retain_graph=True), calls // 2),
                        ("bwd_node", lambda: call_node(d_o), calls),
                        ("bwd_plain", bwd_plain, calls), ("fwd_bwd", fwd_bwd, calls // 2),
                        ("fwd_nograd_py", fwd_nograd_py, calls),
                        ("fwd_grad_py", fwd_grad_py, calls)):
        row[name] = {"alone": round(alone_us(fn, n, sync), 2),
                     "queued": round(queued_us(fn, n, sync), 2)}
    row["grad_fn"] = node
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "python_node.json"))
    ap.add_argument("--stub", action="store_true")
    ap.add_argument("--shapes", type=int, default=len(SHAPES), help="the first N shapes")
    args = ap.parse_args()
    dev = args.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    if _ops._c is None:
        raise SystemExit(f"floe python_node: no C++ layer here ({_ops.torch_ext})")
    start = _ops._c.autograd_node_enabled()
    # Bitwise: the node and the Python Function (both on cache hits after a first call).
    same = {}
    for shape in SHAPES[:args.shapes]:
        q, k, v, qg, kg, vg, d_o, causal = problem(shape, dev)
        outs = []
        for on in (False, False, True):
            _ops._set_autograd_node(on)
            results(qg, kg, vg, d_o, causal)
            outs.append(results(qg, kg, vg, d_o, causal))
        # The control: the Function twice (a backward whose dQ is accumulated with atomics
        # may differ between any two runs, whatever records it).
        same[str(shape)] = {
            "node_vs_function": all(torch.equal(a, b) for a, b in zip(outs[0], outs[2])),
            "function_vs_function": all(torch.equal(a, b) for a, b in zip(outs[0], outs[1]))}
    if args.stub:  # after the bitwise check: stubbed outputs are garbage
        _ops._c.stub_execute(True)
    rows = {}
    for rnd in range(args.rounds):
        for shape in SHAPES[:args.shapes]:
            for on in (False, True):
                _ops._set_autograd_node(on)
                r = measure(shape, dev, args.calls, sync)
                rows.setdefault(str(shape), {}).setdefault("node_on" if on else "node_off",
                                                           []).append(r)
    _ops._set_autograd_node(start)
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        commit = None
    doc = {
        "commit": commit, "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
        "host": platform.node(), "torch": torch.__version__, "torch_ext": _ops.torch_ext,
        "front": _ops.front_state,
        "stub": args.stub, "calls": args.calls, "rounds": args.rounds,
        "shape_fields": "(B, Hq, Hkv, S, D, causal), bf16", "unit": "us per call",
        "bitwise_equal": same, "results": rows,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"floe python_node ({dev}, {_ops.torch_ext}, commit {commit}); us per call, "
          f"alone/queued, one cell per round; JSON: {args.json}")
    print(f"  bitwise equal (o, lse, dq, dk, dv): {same}")
    for shape, modes in rows.items():
        for mode, rs in modes.items():
            cells = "  ".join(
                f"{k} " + ",".join(f"{r[k]['alone']:.1f}/{r[k]['queued']:.1f}" for r in rs)
                for k in ("fwd_nograd", "fwd_grad", "bwd_autograd", "bwd_node", "bwd_plain",
                          "fwd_bwd",
                          "fwd_nograd_py", "fwd_grad_py"))
            print(f"  {shape} {mode} [{rs[0]['grad_fn']}]: {cells}")


if __name__ == "__main__":
    main()

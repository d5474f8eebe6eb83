#!/usr/bin/env python3
"""Host time per call of floe.attention through PyTorch, beside torch's SDPA (flash backend).

    python3 bench/python_host.py [--device cuda|cpu] [--calls N] [--stub]

Tiny problems, so that the GPU keeps up and the loop measures the host: N calls queued
without a sync, the time divided by N (forward with no grad; forward + backward with grads).
--stub replaces the launch by nothing (floe's Python path alone; works without a GPU).
"""

import argparse
import time

import torch
import torch.nn.functional as F

import floe
from floe import _ops


def per_call_us(fn, calls, sync):
    for _ in range(20):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    sync()
    return 1e6 * (t1 - t0) / calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--stub", action="store_true")
    args = ap.parse_args()
    dev = args.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    if args.stub:
        _ops._run = lambda plan, ptrs, device: None
    q, k, v = (torch.randn(1, 2, 128, 64, device=dev, dtype=torch.bfloat16) for _ in range(3))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    with torch.no_grad():
        fwd = per_call_us(lambda: floe.attention(q, k, v, causal=True), args.calls, sync)
    o = floe.attention(qg, kg, vg, causal=True)
    d_o = torch.ones_like(o)

    def fwd_bwd():
        out = floe.attention(qg, kg, vg, causal=True)
        torch.autograd.grad(out, (qg, kg, vg), d_o)

    both = per_call_us(fwd_bwd, args.calls // 2, sync)
    print(f"floe ({dev}{', launch stubbed' if args.stub else ''}): forward {fwd:.1f} us, "
          f"forward+backward {both:.1f} us (backward ~{both - fwd:.1f} us)")
    if dev == "cuda" and not args.stub:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            with torch.no_grad():
                tf = per_call_us(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                 args.calls, sync)

            def sdpa_both():
                out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
                torch.autograd.grad(out, (qg, kg, vg), d_o)

            tb = per_call_us(sdpa_both, args.calls // 2, sync)
        print(f"torch SDPA flash: forward {tf:.1f} us, forward+backward {tb:.1f} us "
              f"(backward ~{tb - tf:.1f} us)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Host time per call of floe.attention through PyTorch, beside torch's SDPA (flash backend).

    python3 bench/python_host.py [--device cuda|cpu] [--calls N] [--stub | --stub-execute]
        [--host-d 128] [--breakdown] [--profile] [--cpu-time]
    python3 bench/python_host.py --kernel [--b 2 --hq 16 --hkv 4 --s 4096 --d 128 --causal]

Tiny problems, timed two ways: each call alone, the GPU synchronized before it outside the
timed region (the median over N calls: the host cost of a call, with no queue behind it), and
N calls queued without a sync, the time divided by N, the best of three such loops (what a
loop achieves; where the kernels take longer than the host, this measures the GPU).
--stub replaces the launch by nothing (floe's Python path alone; works without a GPU): the
whole of _ops._run (workspace, stream, the C++ call) and the C++ calls Plan.run/Plan.execute.
--stub-execute replaces only the C++ calls, so that the workspace allocation and the stream
lookup are timed too. --cpu-time times with the thread's CPU time (a shared, loaded machine).
The autograd floor is a Python autograd.Function that allocates its output and launches
nothing, timed the same way: what any Python-registered op pays for autograd.grad (on a CUDA
tensor the engine hands the backward to its device thread and waits); floe's own backward is
roughly floe's forward+backward less the floor less floe's forward. --breakdown times the
pieces of a call one by one (allocations, Plan.run of each direction, key and lookup);
--profile lists the CUDA runtime calls and kernels of a forward+backward (torch.profiler).
--ext-ab times the C++ per-call path (floe._floe_torch) against the Python path in one process,
rounds interleaved (--thread-check adds a backward plan run on a thread other than its builder's).
--kernel times one problem's forward and backward on the GPU with CUDA events (median of
--reps; the calls queued back to back, each between its own events, as floe bench times them),
for comparison with `floe bench` on the same problem (the kernels must take the same time from
Python as from C++).
"""

import argparse
import time

import torch
import torch.nn.functional as F

import floe
from floe import _ops


_clock = time.perf_counter


def per_call_us(fn, calls, sync, reps=3):
    """The best of reps loops of calls (the host is shared and noisy: one loop of the same
    code varied by 20% and more between loops on the H200's host)."""
    for _ in range(20):
        fn()
    sync()
    best = float("inf")
    for _ in range(reps):
        t0 = _clock()
        for _ in range(calls):
            fn()
        t1 = _clock()
        sync()
        best = min(best, 1e6 * (t1 - t0) / calls)
    return best


def alone_us(fn, calls, sync):
    """The median host time of one call made with the GPU idle (synchronized before it, outside
    the timed region): what the call itself costs the host, with no queue behind it. A loop of
    queued calls (per_call_us) measures the GPU instead wherever the kernels take longer than
    the host (the host-time problem's forward kernel takes ~9 us on the H200)."""
    for _ in range(20):
        fn()
    times = []
    for _ in range(calls):
        sync()
        t0 = _clock()
        fn()
        times.append(_clock() - t0)
    sync()
    times.sort()
    return 1e6 * times[len(times) // 2]


def kernel_times(args):
    torch.manual_seed(0)
    dt = torch.bfloat16
    q = torch.randn(args.b, args.hq, args.s, args.d, device="cuda", dtype=dt)
    k = torch.randn(args.b, args.hkv, args.s, args.d, device="cuda", dtype=dt)
    v = torch.randn(args.b, args.hkv, args.s, args.d, device="cuda", dtype=dt)
    right = 0 if args.causal else None
    opts = (None, None, 0, None, right, False, "auto")

    def fwd():
        return _ops._forward(q, k, v, None, None, None, None, *opts)

    o, lse = fwd()
    d_o = torch.randn_like(o)

    def bwd():
        _ops._backward_impl(d_o, q, k, v, o, lse, None, None, None, None, *opts[:6], False,
                            "auto")

    for name, fn in (("forward", fwd), ("backward", bwd)):
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        # As floe bench times: the calls back to back, no sync between, each between its own
        # events, so that the GPU runs one call while the host prepares the next (an event
        # recorded on an idle GPU would count the call's host time as kernel time).
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(args.reps)]
        for a, b in events:
            a.record()
            fn()
            b.record()
        torch.cuda.synchronize()
        times = sorted(a.elapsed_time(b) for a, b in events)
        print(f"floe {name} B={args.b} Hq={args.hq} Hkv={args.hkv} S={args.s} D={args.d} "
              f"causal={args.causal}: {times[len(times) // 2]:.4f} ms (median of {args.reps})")


def breakdown(args, q, k, v, d_o, sync):
    """The pieces of a call, each timed alone in a loop (per call, us)."""
    options = _ops._options(True, None, "top_left", None, None, False, "auto")
    with torch.no_grad():
        o, lse, fkey = _ops._plain_forward(q, k, v, options, True)
        _ops._plain_backward(fkey, d_o, q, k, v, o, lse, options)
    fplan = _ops._cache.lookup(fkey)
    bkey = (fkey, d_o.stride(), False)
    bplan = _ops._cache.lookup(bkey)
    dev = q.device.type
    stream = torch.cuda.current_stream().cuda_stream if dev == "cuda" else 0

    def ws_for(plan):
        n = plan.workspace_bytes
        t = torch.empty(n + 256, dtype=torch.uint8, device=q.device) if n else None
        return (0 if t is None else (t.data_ptr() + 255) & ~255), n, t

    fws, f_n, _fkeep = ws_for(fplan)
    bws, b_n, _bkeep = ws_for(bplan)
    dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
    fptrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr())
    bptrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), 0, 0, 0, 0,
             d_o.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr())
    b, h, s, d = q.shape
    pieces = [
        ("options (_ops._options, remembered)",
         lambda: _ops._options(True, None, "top_left", None, None, False, "auto")),
        ("forward key (the tuple of _plain_forward)", lambda: (
            q.dtype, k.dtype, v.dtype, q.shape, k.shape, v.shape, q.stride(), k.stride(),
            v.stride(), None, q.device, k.device, v.device, None, options, True)),
        ("forward key + plan cache lookup (_cache.lookup)", lambda: _ops._cache.lookup(
            _ops._forward_key(q, k, v, None, None, None, None, options, None))),
        ("one output allocation (q.new_empty_strided)",
         lambda: q.new_empty_strided((b, h, s, d), (s * h * d, d, h * d, 1))),
        ("three gradient allocations (torch.empty_like)",
         lambda: (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v))),
        (f"backward workspace allocation ({b_n} bytes)",
         lambda: q.new_empty(b_n, dtype=torch.uint8) if b_n else None),
        (f"forward Plan.run ({fplan.engine}: the C++ call and its launches)",
         lambda: fplan.run(fws, f_n, stream, *fptrs)),
        (f"backward Plan.run ({bplan.engine})",
         lambda: bplan.run(bws, b_n, stream, *bptrs)),
        ("forward without autograd (_ops._plain_forward, no LSE)",
         lambda: _ops._plain_forward(q, k, v, options, False)),
        ("backward without autograd (_ops._plain_backward)",
         lambda: _ops._plain_backward(fkey, d_o, q, k, v, o, lse, options)),
    ]
    # Other ways to make the three gradients (Session 8: not faster on the H200's host, where
    # every tensor made from Python costs about 2 us, an allocation or a view alike).
    like = _ops._like(q.get_device() if q.is_cuda else -1, q.dtype)
    span = q.numel() + 128  # each slice 256-byte aligned (bf16)
    pieces[5:5] = [
        ("the same as one allocation and three as_strided views",
         lambda: (lambda buf: (buf.as_strided(q.shape, q.stride(), 0),
                               buf.as_strided(k.shape, k.stride(), span),
                               buf.as_strided(v.shape, v.stride(), 2 * span)))(
             like.new_empty(3 * span))),
        ("the same as one [3, ...] allocation and unbind(0)",
         lambda: like.new_empty_strided((3,) + tuple(q.shape),
                                        (span,) + tuple(q.stride())).unbind(0)),
    ]
    if dev == "cuda":
        pieces.append(("current stream (torch._C._cuda_getCurrentRawStream)",
                       lambda: torch._C._cuda_getCurrentRawStream(0)))
    for name, fn in pieces:
        print(f"  {name}: {alone_us(fn, args.calls, sync):.2f} us alone, "
              f"{per_call_us(fn, args.calls, sync):.2f} us queued")


def ext_ab(args, q, k, v, qg, kg, vg, d_o, sync):
    """The C++ per-call path (floe._floe_torch) against the Python path, in this one process,
    rounds interleaved (off, on, off, on, ...): forward with no gradient, the backward without
    autograd (_plain_backward on a cache hit), and forward+backward through autograd."""
    if _ops._c is None:
        print(f"floe ext A/B: no C++ path here ({_ops.torch_ext})")
        return
    saved = (_ops._c, _ops._c_fwd, _ops._c_bwd)
    options = _ops._options(True, None, "top_left", None, None, False, "auto")
    with torch.no_grad():
        o, lse, fkey = _ops._plain_forward(q, k, v, options, True)

    def fwd_nograd():
        with torch.no_grad():
            floe.attention(q, k, v, causal=True)

    def bwd_plain():
        _ops._plain_backward(fkey, d_o, q, k, v, o, lse, options)

    def fwd_bwd():
        out = floe.attention(qg, kg, vg, causal=True)
        torch.autograd.grad(out, (qg, kg, vg), d_o)

    rows = {}
    for rnd in range(args.ab_rounds):
        for on in (False, True):
            if on:
                _ops._c, _ops._c_fwd, _ops._c_bwd = saved
            else:
                _ops._c = _ops._c_fwd = _ops._c_bwd = None
            # fwd_bwd before bwd_plain: its backward plan is then built on autograd's device
            # thread (H200, main's f0e86ab library: the sm90 backward plan built on this thread
            # failed to encode its TMA descriptors when executed on autograd's).
            for name, fn, n in (("forward, no grad", fwd_nograd, args.calls),
                                ("forward+backward through autograd", fwd_bwd, args.calls // 2),
                                ("backward without autograd (_plain_backward)", bwd_plain,
                                 args.calls)):
                r = rows.setdefault((name, on), [])
                r.append((alone_us(fn, n, sync), per_call_us(fn, n, sync)))
    _ops._c, _ops._c_fwd, _ops._c_bwd = saved
    # The two paths' outputs and gradients, bitwise (both on cache hits here).
    results = []
    for on in (True, False):
        if not on:
            _ops._c = _ops._c_fwd = _ops._c_bwd = None
        with torch.no_grad():
            o1, lse1 = floe.attention(q, k, v, causal=True, return_lse=True)
        grads = torch.autograd.grad(floe.attention(qg, kg, vg, causal=True), (qg, kg, vg), d_o)
        results.append((o1, lse1) + tuple(grads))
    _ops._c, _ops._c_fwd, _ops._c_bwd = saved
    same = all(torch.equal(a, b) for a, b in zip(*results))
    print(f"floe ext A/B: C++ and Python paths give bitwise equal o, lse, dq, dk, dv: {same}")
    if args.thread_check and q.is_cuda:
        # A backward plan built on this thread, executed on a new one (no CUDA call made there
        # yet): what autograd's device thread does with a plan an earlier call built here.
        import threading

        q2, k2, v2 = (t[:, :, :64].clone() for t in (q, k, v))
        with torch.no_grad():
            o2, lse2, key2 = _ops._plain_forward(q2, k2, v2, options, True)
        d2 = torch.ones_like(o2)
        _ops._plain_backward(key2, d2, q2, k2, v2, o2, lse2, options)
        result = []

        def other():
            try:
                _ops._plain_backward(key2, d2, q2, k2, v2, o2, lse2, options)
                torch.cuda.synchronize()
                result.append("ok")
            except Exception as e:  # noqa: BLE001  (reported, not raised)
                result.append(f"{type(e).__name__}: {e}")

        th = threading.Thread(target=other)
        th.start()
        th.join()
        print(f"floe thread check (backward plan built here, run on a new thread): {result[0]}")
    print(f"floe ext A/B ({_ops.torch_ext}; us, alone / queued, one entry per round)")
    for (name, on), r in rows.items():
        cells = "  ".join(f"{a:.2f}/{b:.2f}" for a, b in r)
        print(f"  {name}, {'C++ path' if on else 'Python path'}: {cells}")


def profile_launches(args, qg, kg, vg, d_o, sync):
    """The CUDA runtime calls of a forward+backward and their host time (torch.profiler, which
    adds its own cost to each), and the kernels each direction launches."""
    from torch.profiler import ProfilerActivity, profile

    def step():
        out = floe.attention(qg, kg, vg, causal=True)
        torch.autograd.grad(out, (qg, kg, vg), d_o)

    for _ in range(20):
        step()
    sync()
    n = 100
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if qg.is_cuda else [])
    with profile(activities=acts) as prof:
        for _ in range(n):
            step()
        sync()
    rows = []
    for e in prof.key_averages():
        if e.key.startswith(("cuda", "cu")) or e.device_type.name == "CUDA" or e.key.startswith(
                ("floe", "_EagerAttention")):
            rows.append(e)
    print(f"floe profile ({n} forward+backward calls, per call): runtime calls and kernels")
    for e in sorted(rows, key=lambda e: -e.count):
        per = e.count / n
        cpu = e.cpu_time_total / max(e.count, 1)
        dev_t = getattr(e, "device_time_total", getattr(e, "cuda_time_total", 0)) / max(e.count, 1)
        print(f"  {e.key[:90]}: {per:.1f} per call, host {cpu:.2f} us each, device "
              f"{dev_t:.2f} us each")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--stub", action="store_true")
    ap.add_argument("--stub-execute", action="store_true")
    ap.add_argument("--kernel", action="store_true")
    ap.add_argument("--b", type=int, default=2)
    ap.add_argument("--hq", type=int, default=16)
    ap.add_argument("--hkv", type=int, default=4)
    ap.add_argument("--s", type=int, default=4096)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--reps", type=int, default=50)
    # d128: served by sm90 forward and backward in the ci kernel set too (d64 runs generic there).
    ap.add_argument("--host-d", type=int, default=128, help="head dim of the host-time problem")
    ap.add_argument("--breakdown", action="store_true")
    ap.add_argument("--no-sdpa", action="store_true", help="leave out torch's SDPA flash")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time with the thread's CPU time (a loaded machine), not the wall clock")
    ap.add_argument("--ext-ab", action="store_true",
                    help="only the C++ per-call path (floe._floe_torch) against the Python one")
    ap.add_argument("--ab-rounds", type=int, default=3)
    ap.add_argument("--thread-check", action="store_true",
                    help="with --ext-ab: a backward plan run on a thread other than its builder's")
    ap.add_argument("--profile", action="store_true",
                    help="the CUDA runtime calls and kernels of a call (torch.profiler)")
    args = ap.parse_args()
    if args.kernel:
        kernel_times(args)
        return
    dev = args.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    if args.cpu_time:
        global _clock
        _clock = time.thread_time
    if args.stub:
        _ops._run = lambda plan, ptrs, q: None
    if args.stub or args.stub_execute:
        floe._floe.Plan.execute = lambda plan, ptrs, workspace, workspace_size, stream: None
        floe._floe.Plan.run = lambda plan, workspace, workspace_size, stream, *ptrs: None
        args.stub = True
    q, k, v = (torch.randn(1, 2, 128, args.host_d, device=dev, dtype=torch.bfloat16)
               for _ in range(3))
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    o = floe.attention(qg, kg, vg, causal=True)
    d_o = torch.ones_like(o)

    def fwd_nograd():
        with torch.no_grad():
            floe.attention(q, k, v, causal=True)

    def fwd_bwd():
        out = floe.attention(qg, kg, vg, causal=True)
        torch.autograd.grad(out, (qg, kg, vg), d_o)

    class Floor(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            return q.new_empty(q.shape)

        @staticmethod
        def backward(ctx, g):
            return g, g, g

    class Floor1(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q):
            return q.new_empty(q.shape)

        @staticmethod
        def backward(ctx, g):
            return g

    if args.ext_ab:
        ext_ab(args, q, k, v, qg, kg, vg, d_o, sync)
        return
    n = args.calls
    rows = {}
    for mode, timer in (("alone", alone_us), ("queued", per_call_us)):
        r = rows[mode] = {}
        r["fwd"] = timer(fwd_nograd, n, sync)
        r["fwd_grad"] = timer(lambda: floe.attention(qg, kg, vg, causal=True), n, sync)
        r["both"] = timer(fwd_bwd, n // 2, sync)
        r["floor"] = timer(lambda: torch.autograd.grad(Floor.apply(qg, kg, vg), (qg, kg, vg),
                                                       d_o), n // 2, sync)
        # One input, a Python Function against a C++ node (clone: one copy launched forward,
        # the gradient passed through backward): what a C++ autograd node would save.
        r["floor_py"] = timer(lambda: torch.autograd.grad(Floor1.apply(qg), (qg,), d_o),
                              n // 2, sync)
        r["floor_cc"] = timer(lambda: torch.autograd.grad(qg.clone(), (qg,), d_o), n // 2, sync)
        if dev == "cuda" and not args.stub:
            # floe's Python and autograd path with its C++ calls (execute: checks, TMA
            # descriptors, launches) replaced by nothing.
            run, execute = floe._floe.Plan.run, floe._floe.Plan.execute
            floe._floe.Plan.run = lambda plan, workspace, workspace_size, stream, *ptrs: None
            floe._floe.Plan.execute = lambda plan, ptrs, workspace, size, stream: None
            try:
                r["fwd_nolaunch"] = timer(fwd_nograd, n, sync)
                r["both_nolaunch"] = timer(fwd_bwd, n // 2, sync)
            finally:
                floe._floe.Plan.run, floe._floe.Plan.execute = run, execute
        if dev == "cuda" and not args.stub and not args.no_sdpa:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            def sdpa_fwd():
                with torch.no_grad():
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)

            def sdpa_both():
                out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
                torch.autograd.grad(out, (qg, kg, vg), d_o)

            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                r["sdpa_fwd"] = timer(sdpa_fwd, n, sync)
                r["sdpa_both"] = timer(sdpa_both, n // 2, sync)
    stub = (", launch stubbed (Plan.execute)" if args.stub_execute
            else ", launch stubbed" if args.stub else "")
    # "floe ..." and "torch ..." first: scripts/gpu-check.sh keeps those lines.
    for mode, r in rows.items():
        how = ("each call alone, the GPU idle before it (median)" if mode == "alone" else
               "calls queued without a sync (best loop)")
        print(f"floe ({dev}{stub}; {how}): forward {r['fwd']:.1f} us, forward with grad "
              f"{r['fwd_grad']:.1f} us, forward+backward {r['both']:.1f} us (backward "
              f"~{r['both'] - r['fwd_grad']:.1f} us); own backward ~"
              f"{r['both'] - r['fwd'] - r['floor']:.1f} us beyond autograd's floor")
        print(f"floe floors ({mode}): a Python Function with one allocation and no launch, 3 "
              f"inputs, forward+backward {r['floor']:.1f} us; one input: Python Function "
              f"{r['floor_py']:.1f} us, C++ node (clone) {r['floor_cc']:.1f} us")
        if "fwd_nolaunch" in r:
            print(f"floe without its C++ calls ({mode}): forward {r['fwd_nolaunch']:.1f} us, "
                  f"forward+backward {r['both_nolaunch']:.1f} us")
        if "sdpa_fwd" in r:
            print(f"torch SDPA flash ({mode}): forward {r['sdpa_fwd']:.1f} us, forward+backward "
                  f"{r['sdpa_both']:.1f} us (backward ~{r['sdpa_both'] - r['sdpa_fwd']:.1f} us)")
    if args.breakdown:
        breakdown(args, q, k, v, d_o, sync)
    if args.profile:
        profile_launches(args, qg, kg, vg, d_o, sync)


if __name__ == "__main__":
    main()

"""floe.attention against fp64 references: torch's math SDPA where it has the feature, and
reference.py (itself checked against math SDPA below) for sink, softcap, windows, padding and
bottom-right alignment. Every case runs on the CPU (reference engine) and, where there is one,
on the GPU (engine "auto"). Outputs come from fresh random data each case, so a wrong result
cannot pass by leftover memory."""

import math

import pytest

torch = pytest.importorskip("torch")
floe = pytest.importorskip("floe")
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import reference  # noqa: E402
from floe import _ops  # noqa: E402  (registers torch.ops.floe.*)

CUDA = torch.cuda.is_available()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])
needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA device")

# Errors of a low-precision result against fp64, as a fraction of the reference's largest
# magnitude: one output rounding is 2^-8 (bf16) or 2^-11 (f16); GPU engines add fp32
# accumulation and the rounding of P before the PV product (FlashAttention's scheme).
TOL = {torch.bfloat16: 2e-2, torch.float16: 3e-3}
GRAD_TOL = {torch.bfloat16: 4e-2, torch.float16: 6e-3}


def rand(*shape, dtype=torch.bfloat16, device="cpu", requires_grad=True, scale=1.0):
    t = (torch.randn(*shape, dtype=torch.float32) * scale).to(dtype).to(device)
    return t.requires_grad_(requires_grad)


def close(got, ref, tol, what):
    got = got.detach().double().cpu()
    ref = ref.detach().double().cpu()
    assert got.shape == ref.shape, what
    assert torch.isfinite(got).all(), f"{what}: non-finite values"
    err = (got - ref).abs().max().item()
    mag = max(ref.abs().max().item(), 1.0)
    assert err <= tol * mag, f"{what}: max error {err:.3g} > {tol * mag:.3g}"


def check(device, dtype, q, k, v, floe_kw, ref_kw, grads=True, bias=None, sink=None):
    """Forward (O and LSE) and, with grads, every gradient, against reference.attention."""
    o, lse = floe.attention(q, k, v, bias=bias, sink=sink, return_lse=True, **floe_kw)
    ref_o, ref_lse = reference.attention(q, k, v, bias=bias, sink=sink, **ref_kw)
    close(o, ref_o, TOL[dtype], "o")
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse.cpu()), finite.cpu()), "lse: -inf rows differ"
    close(lse.cpu()[finite.cpu()], ref_lse.cpu()[finite.cpu()], 1e-3, "lse")
    if not grads:
        return
    d_o = torch.randn_like(o, dtype=torch.float32).to(dtype)
    inputs = [t for t in (q, k, v, bias, sink) if t is not None and t.requires_grad]
    got = torch.autograd.grad(o, inputs, d_o)
    want = torch.autograd.grad(ref_o, inputs, d_o.double())
    for name, g, w in zip("qkvbs", got, want):
        close(g, w, GRAD_TOL[dtype], f"d{name}")


# ---------------------------------------------------------------------------------------------
# The reference itself, against torch's math SDPA in fp64


@pytest.mark.parametrize("causal", [False, True])
def test_reference_matches_math_sdpa(causal):
    q, k, v = (torch.randn(2, 4, 9, 16, dtype=torch.float64) for _ in range(3))
    k, v = k[:, :2], v[:, :2]
    bias = torch.randn(1, 4, 9, 9, dtype=torch.float64)
    with sdpa_kernel(SDPBackend.MATH):
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=None if causal else bias,
                                              is_causal=causal, enable_gqa=True)
    got, _ = reference.attention(q, k, v, right=0 if causal else None,
                                 bias=None if causal else bias)
    assert (got - want).abs().max() < 1e-12


# ---------------------------------------------------------------------------------------------
# Forward and backward


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_math_sdpa(device, dtype, causal):
    torch.manual_seed(1)
    q = rand(2, 4, 70, 64, dtype=dtype, device=device)
    k = rand(2, 4, 70, 64, dtype=dtype, device=device)
    v = rand(2, 4, 70, 64, dtype=dtype, device=device)
    o = floe.attention(q, k, v, causal=causal)
    with sdpa_kernel(SDPBackend.MATH):
        qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
        ref = F.scaled_dot_product_attention(qd, kd, vd, is_causal=causal)
    close(o, ref, TOL[dtype], "o")
    d_o = torch.randn_like(o)
    got = torch.autograd.grad(o, (q, k, v), d_o)
    want = torch.autograd.grad(ref, (qd, kd, vd), d_o.double())
    for name, g, w in zip("qkv", got, want):
        close(g, w, GRAD_TOL[dtype], "d" + name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("h_q,h_kv", [(8, 2), (6, 1)])
def test_gqa_mqa(device, h_q, h_kv):
    torch.manual_seed(2)
    q = rand(2, h_q, 33, 64, device=device)
    k = rand(2, h_kv, 47, 64, device=device)
    v = rand(2, h_kv, 47, 64, device=device)
    check(device, torch.bfloat16, q, k, v, {}, {})


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("align", ["top_left", "bottom_right"])
@pytest.mark.parametrize("s_q,s_kv", [(40, 72), (72, 40)])
def test_causal_alignments(device, align, s_q, s_kv):
    torch.manual_seed(3)
    q = rand(1, 4, s_q, 64, device=device)
    k = rand(1, 4, s_kv, 64, device=device)
    v = rand(1, 4, s_kv, 64, device=device)
    check(device, torch.bfloat16, q, k, v, {"causal": align}, {"align": align, "right": 0})


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("window,causal,want", [((8, 4), False, (8, 4)),
                                                ((16, None), True, (16, 0)),
                                                ((-1, 3), False, (None, 3))])
@pytest.mark.parametrize("align", ["top_left", "bottom_right"])
def test_windows(device, window, causal, want, align):
    torch.manual_seed(4)
    q = rand(2, 2, 50, 64, device=device)
    k = rand(2, 2, 61, 64, device=device)
    v = rand(2, 2, 61, 64, device=device)
    check(device, torch.bfloat16, q, k, v, {"window": window, "causal": causal, "align": align},
          {"left": want[0], "right": want[1], "align": align})


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bias_shape", [(2, 4, 33, 40), (1, 4, 33, 40), (2, 1, 33, 40),
                                        (1, 1, 33, 40), (33, 40), (2, 1, 1, 40)])
def test_bias_broadcast(device, bias_shape):
    torch.manual_seed(5)
    q = rand(2, 4, 33, 64, device=device)
    k = rand(2, 2, 40, 64, device=device)
    v = rand(2, 2, 40, 64, device=device)
    bias = rand(*bias_shape, device=device)
    check(device, torch.bfloat16, q, k, v, {"causal": True}, {"right": 0}, bias=bias)


@pytest.mark.parametrize("device", DEVICES)
def test_sink_and_softcap(device):
    torch.manual_seed(6)
    q = rand(2, 4, 30, 64, device=device, scale=3.0)
    k = rand(2, 2, 45, 64, device=device)
    v = rand(2, 2, 45, 64, device=device)
    sink = (torch.randn(4) * 2).to(device).requires_grad_()
    check(device, torch.bfloat16, q, k, v, {"softcap": 5.0, "causal": "bottom_right"},
          {"softcap": 5.0, "align": "bottom_right", "right": 0}, sink=sink)


@pytest.mark.parametrize("device", DEVICES)
def test_scale(device):
    torch.manual_seed(7)
    q, k, v = (rand(1, 2, 20, 64, device=device) for _ in range(3))
    check(device, torch.bfloat16, q, k, v, {"scale": 0.3}, {"scale": 0.3})


@pytest.mark.parametrize("device", DEVICES)
def test_padding_lengths(device):
    torch.manual_seed(8)
    q = rand(3, 4, 40, 64, device=device)
    k = rand(3, 2, 50, 64, device=device)
    v = rand(3, 2, 50, 64, device=device)
    sql = torch.tensor([40, 17, 0], dtype=torch.int32, device=device)
    skv = torch.tensor([50, 9, 30], dtype=torch.int32, device=device)
    kw = {"seq_len_q": sql, "seq_len_kv": skv}
    check(device, torch.bfloat16, q, k, v, dict(kw, causal="bottom_right"),
          dict(kw, align="bottom_right", right=0))


@pytest.mark.parametrize("device", DEVICES)
def test_row_without_keys(device):
    # Window (0, -) top-left with more keys than queries leaves nothing out; a window right of
    # every key (left=None, right=-?) is not expressible, so rows lose their keys by length.
    torch.manual_seed(9)
    q, k, v = (rand(2, 2, 16, 64, device=device) for _ in range(3))
    skv = torch.tensor([0, 5], dtype=torch.int32, device=device)
    o, lse = floe.attention(q, k, v, seq_len_kv=skv, return_lse=True)
    assert torch.all(o[0] == 0) and torch.all(torch.isneginf(lse[0]))
    ref_o, _ = reference.attention(q, k, v, seq_len_kv=skv)
    close(o, ref_o, TOL[torch.bfloat16], "o")


# ---------------------------------------------------------------------------------------------
# Layouts: the tensors' own strides, never a copy


class _OpLog(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


COPY_OPS = ("copy", "clone", "contiguous", "_to_copy", "cat", "expand_copy", "repeat",
            "index", "gather")


@pytest.mark.parametrize("device", DEVICES)
def test_strided_views_no_copy(device):
    torch.manual_seed(10)
    b, s, h_q, h_kv, d = 2, 37, 4, 2, 64
    # One packed qkv projection in [B, S, (Hq + 2 Hkv), D] and a query with padded heads.
    qkv = rand(b, s, h_q + 2 * h_kv, d, device=device, requires_grad=False)
    q = qkv[:, :, :h_q].transpose(1, 2)
    k = qkv[:, :, h_q:h_q + h_kv].transpose(1, 2)
    v = qkv[:, :, h_q + h_kv:].transpose(1, 2)
    padded = rand(b, h_q, s, 2 * d, device=device, requires_grad=False)[..., :d]
    assert not q.is_contiguous() and not padded.is_contiguous()
    for qq in (q, padded):
        qq, kk, vv = (t.detach().requires_grad_() for t in (qq, k, v))
        # Twice: under a dispatch mode (the custom ops' path, as torch.compile sees it) and
        # plain (the eager path). The profiler sees every aten op, inside the ops too.
        for op_path in (True, False):
            log = _OpLog()
            # autograd.grad, not backward(): accumulating into .grad may clone (autograd's
            # layout contract), which is no copy of floe's.
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                if op_path:
                    with log:
                        o = floe.attention(qq, kk, vv, causal=True)
                        got = torch.autograd.grad(o, (qq, kk, vv), torch.ones_like(o))
                else:
                    o = floe.attention(qq, kk, vv, causal=True)
                    got = torch.autograd.grad(o, (qq, kk, vv), torch.ones_like(o))
            events = [e.name for e in prof.events()]
            copies = [e for e in events if any(c in e for c in COPY_OPS)]
            assert not copies, f"copies made (op path: {op_path}): {copies}"
            if op_path:
                assert "floe.fwd.default" in log.ops and "floe.bwd.default" in log.ops, log.ops
            ref_o, _ = reference.attention(qq, kk, vv, right=0)
            close(o, ref_o, TOL[torch.bfloat16], "o")
            want = torch.autograd.grad(ref_o, (qq, kk, vv), torch.ones_like(ref_o))
            for name, g, w in zip("qkv", got, want):
                close(g, w, GRAD_TOL[torch.bfloat16], "d" + name)


@pytest.mark.parametrize("device", DEVICES)
def test_broadcast_kv_heads_zero_stride(device):
    torch.manual_seed(11)
    q = rand(1, 4, 20, 64, device=device)
    k1 = rand(1, 1, 24, 64, device=device)
    v1 = rand(1, 1, 24, 64, device=device)
    k, v = k1.expand(1, 4, 24, 64), v1.expand(1, 4, 24, 64)  # stride 0 over heads
    o = floe.attention(q, k, v)
    ref_o, _ = reference.attention(q, k1, v1)
    close(o, ref_o, TOL[torch.bfloat16], "o")
    got = torch.autograd.grad(o, (k1, v1), torch.ones_like(o))
    want = torch.autograd.grad(ref_o, (k1, v1), torch.ones_like(ref_o))
    for name, g, w in zip("kv", got, want):
        close(g, w, GRAD_TOL[torch.bfloat16], "d" + name)


# ---------------------------------------------------------------------------------------------
# Determinism, compile, graphs, opcheck


@pytest.mark.parametrize("device", DEVICES)
def test_deterministic_backward_is_bitwise(device):
    torch.manual_seed(12)
    q = rand(2, 8, 128, 64, device=device)
    k = rand(2, 2, 128, 64, device=device)
    v = rand(2, 2, 128, 64, device=device)
    bias = rand(1, 8, 128, 128, device=device)
    d_o = torch.randn(2, 8, 128, 64, device=device).bfloat16()
    runs = []
    for _ in range(3):
        o = floe.attention(q, k, v, bias=bias, deterministic=True)
        runs.append(torch.autograd.grad(o, (q, k, v, bias), d_o))
    for r in runs[1:]:
        for a, b in zip(runs[0], r):
            assert torch.equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph(device):
    torch.manual_seed(13)
    torch._dynamo.reset()
    q, k, v = (rand(2, 4, 32, 64, device=device) for _ in range(3))
    bias = rand(1, 4, 32, 32, device=device)

    def layer(q, k, v, bias):
        o = floe.attention(q * 2, k, v, causal=True, bias=bias)
        return (o.float() ** 2).sum()

    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.compile(layer, fullgraph=True, backend=backend)
    loss = compiled(q, k, v, bias)
    got = torch.autograd.grad(loss, (q, k, v, bias))
    loss_e = layer(q, k, v, bias)
    want = torch.autograd.grad(loss_e, (q, k, v, bias))
    assert torch.allclose(loss.float(), loss_e.float(), rtol=1e-3)
    for g, w in zip(got, want):
        assert torch.allclose(g.float(), w.float(), rtol=2e-2, atol=2e-2)


@needs_cuda
def test_cuda_graph_replay_is_bitwise_equal():
    torch.manual_seed(14)
    q = rand(2, 8, 256, 128, device="cuda")
    k = rand(2, 2, 256, 128, device="cuda")
    v = rand(2, 2, 256, 128, device="cuda")
    sql = torch.tensor([256, 100], dtype=torch.int32, device="cuda")
    d_o = torch.randn(2, 8, 256, 128, device="cuda").bfloat16()

    def step():
        o = floe.attention(q, k, v, causal=True, seq_len_q=sql, deterministic=True)
        # o detached: the step's autograd graph (with the leaves' AccumulateGrad nodes, bound to
        # the stream they were made on) dies here instead of reaching into the capture.
        return (o.detach(),) + torch.autograd.grad(o, (q, k, v), d_o)

    direct = step()  # also builds the plans outside capture
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        captured = step()
    for t in captured:
        t.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    for a, b in zip(direct, captured):
        assert torch.equal(a, b)
    # The lengths are read on the device at replay (P6).
    sql.copy_(torch.tensor([50, 256], dtype=torch.int32))
    g.replay()
    again = step()
    torch.cuda.synchronize()
    for a, b in zip(again, captured):
        assert torch.equal(a, b)


# (head dim, deterministic): d128 is in FLOE_KERNELS=ci's tiles, so a tensor-core engine runs it
# on a ci build too (d64 runs the generic engine there).
@pytest.mark.parametrize("d,deterministic", [(64, False), (128, False), (128, True)])
@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device, d, deterministic):
    torch.manual_seed(15)
    q = rand(1, 4, 16, d, device=device)
    k = rand(1, 2, 24, d, device=device)
    v = rand(1, 2, 24, d, device=device)
    bias = rand(1, 4, 16, 24, device=device)
    sink = torch.randn(4, device=device).requires_grad_()
    # opcheck compares eager gradients (of o.sum(): d_o broadcast, every stride 0) with
    # AOTAutograd's (a dense tangent): see test_broadcast_output_gradient_is_made_dense.
    args = (q, k, v, bias, sink, None, None, None, 10.0, 1, 8, 0, deterministic, "auto")
    torch.library.opcheck(torch.ops.floe.fwd.default, args)
    o, lse = torch.ops.floe.fwd(*[a.detach() if isinstance(a, torch.Tensor) else a
                                   for a in args])
    d_o = torch.randn_like(o)
    bwd_args = (d_o, q.detach(), k.detach(), v.detach(), o, lse, bias.detach(), sink.detach(),
                None, None, None, 10.0, 1, 8, 0, deterministic, True, "auto")
    torch.library.opcheck(torch.ops.floe.bwd.default, bwd_args)


@pytest.mark.parametrize("device", DEVICES)
def test_broadcast_output_gradient_is_made_dense(device, monkeypatch):
    # o.sum().backward() hands the backward an expanded d_o (every stride 0); AOTAutograd
    # (torch.compile, opcheck) hands the same gradient dense. The tensor-core engines need a
    # unit innermost stride, so eager ran the generic engine and compiled code sm80, whose
    # roundings differ: opcheck failed on the H200 at 3460c6a (d64, full kernel set: dQ 193 of
    # 4096 elements a bf16 ulp apart), and again at a2efb7d (d128, ci set: generic against
    # sm80, dQ 0.0078 apart, deterministic or not; each path bitwise repeatable).
    # Every backward plan, on every path, must see a d_o of unit innermost stride.
    seen = []
    build = _ops._floe.build

    def spy(backward, dtype, shape, tensors, *rest, **kw):
        if backward:
            seen.append(tensors[9][1])  # TensorId do: (dtype code, strides)
        return build(backward, dtype, shape, tensors, *rest, **kw)

    monkeypatch.setattr(_ops._floe, "build", spy)
    floe.clear_plan_cache()
    q, k, v = (rand(1, 2, 16, 64, device=device) for _ in range(3))
    o = floe.attention(q, k, v, causal=True)  # the eager Function
    eager = torch.autograd.grad(o.sum(), (q, k, v))
    o = torch.ops.floe.fwd(q, k, v, None, None, None, None, None, None, 0, None, 0, False,
                           "auto")[0]  # the custom op's autograd
    op = torch.autograd.grad(o.sum(), (q, k, v), retain_graph=True)
    dense = torch.autograd.grad(o, (q, k, v), torch.ones_like(o))  # o's own layout
    assert len(seen) == 3 and all(s[3] == 1 for s in seen), seen
    for a, b, c in zip(eager, op, dense):
        assert torch.equal(a, b) and torch.equal(a, c)


# ---------------------------------------------------------------------------------------------
# Plans, explain, errors


def test_plan_cache_hits_and_bound():
    floe.clear_plan_cache(maxsize=3)
    try:
        q, k, v = (rand(1, 2, 8, 64, requires_grad=False) for _ in range(3))
        floe.attention(q, k, v)
        floe.attention(q, k, v)
        info = floe.plan_cache_info()
        assert (info.hits, info.misses, info.size) == (1, 1, 1)
        for s in (9, 10, 11, 12):
            qs = rand(1, 2, s, 64, requires_grad=False)
            floe.attention(qs, k, v)
        assert floe.plan_cache_info().size == 3
        floe.attention(q, k, v)  # evicted: built again
        assert floe.plan_cache_info().misses == 6
    finally:
        floe.clear_plan_cache(maxsize=512)


@pytest.mark.parametrize("device", DEVICES)
def test_explain(device):
    q, k, v = (rand(1, 2, 8, 64, device=device, requires_grad=False) for _ in range(3))
    ex = floe.explain(q, k, v, causal=True)
    names = [name for name, _, _ in ex.verdicts]
    assert set(names) == set(floe.engine_names())
    want = "reference" if device == "cpu" else None
    if want:
        assert ex.engine == want
    assert all(reason == "" for _, ok, reason in ex.verdicts if ok)
    assert all(reason for _, ok, reason in ex.verdicts if not ok)
    assert ex.engine in str(ex)
    exb = floe.explain(q, k, v, backward=True, causal=True)
    assert exb.engine is not None


def test_errors_carry_floes_message():
    q = rand(1, 6, 8, 64, requires_grad=False)
    k = rand(1, 4, 8, 64, requires_grad=False)
    with pytest.raises(floe.FloeError, match="tensor 'k'") as e:
        floe.attention(q, k, k)
    assert isinstance(e.value, RuntimeError)
    q32 = torch.randn(1, 2, 8, 64)
    with pytest.raises(floe.FloeError, match="tensor 'q' dtype: is f32, must be f16 or bf16"):
        floe.attention(q32, q32, q32)
    q = rand(1, 4, 8, 64, requires_grad=False)
    with pytest.raises(floe.FloeError, match="enable_gqa"):
        floe.attention(q, q[:, :2], q[:, :2], enable_gqa=False)
    with pytest.raises(floe.FloeError, match="tensor 'v' dims"):
        floe.attention(q, q, q[:, :, :4])
    with pytest.raises(floe.FloeError, match="tensor 'bias' dims"):
        floe.attention(q, q, q, bias=rand(3, 4, 8, 8, requires_grad=False))
    with pytest.raises(floe.FloeError, match="tensor 'sink'"):
        floe.attention(q, q, q, sink=torch.randn(4, dtype=torch.float64))
    with pytest.raises(floe.FloeError, match="engine: 'nope' is not an engine"):
        floe.attention(q, q, q, engine="nope")
    with pytest.raises(floe.FloeError, match="tensor 'q' rank"):
        floe.attention(q[0], q[0], q[0])
    with pytest.raises(ValueError, match="window"):
        floe.attention(q, q, q, window=3)


def test_pinned_engine_that_declines_says_why():
    q = rand(1, 2, 8, 64, requires_grad=False)
    with pytest.raises(floe.FloeError, match="sm80: declined: runs on CUDA devices only"):
        floe.attention(q, q, q, engine="sm80")
    ex = floe.explain(q, q, q, engine="sm80")
    assert ex.engine is None
    assert ("sm80", False, "runs on CUDA devices only") in ex.verdicts


# ---------------------------------------------------------------------------------------------
# Drop-in: F.scaled_dot_product_attention on floe


def test_drop_in_availability_is_reported():
    import floe.torch as ft

    if ft.available():
        return
    with pytest.raises(RuntimeError, match="no flash-attention registry"):
        ft.activate()


@needs_cuda
def test_drop_in_sdpa_runs_floe():
    import floe.torch as ft

    if not ft.available():
        pytest.skip(f"torch {torch.__version__} has no flash-attention registry")
    torch.manual_seed(16)
    q = rand(2, 8, 200, 128, device="cuda")
    k = rand(2, 8, 200, 128, device="cuda")
    v = rand(2, 8, 200, 128, device="cuda")
    d_o = torch.randn(2, 8, 200, 128, device="cuda").bfloat16()
    want = floe.attention(q, k, v, causal=True)
    want_grads = torch.autograd.grad(want, (q, k, v), d_o)
    ft.activate()
    try:
        before = floe.plan_cache_info()
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            got = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            got_grads = torch.autograd.grad(got, (q, k, v), d_o)
            # Dropout is PyTorch's: it falls back to its own kernel, no error.
            F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
        after = floe.plan_cache_info()
        assert after.hits + after.misses >= before.hits + before.misses + 2
        assert torch.equal(got, want)
        for a, b in zip(got_grads, want_grads):  # equal but for the order of dQ's additions
            close(a, b, 1e-2, "grad")
    finally:
        ft.deactivate()
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        before = floe.plan_cache_info()
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert floe.plan_cache_info() == before


@pytest.mark.parametrize("causal", [False, True])
def test_drop_in_kernels_match_floe_attention(causal):
    # The kernels floe.torch registers for aten's flash ops, called directly (CPU tensors: the
    # registration itself is for CUDA and is tested above on a GPU).
    import floe.torch as ft

    torch.manual_seed(17)
    q = rand(2, 4, 40, 64, requires_grad=False)
    k = rand(2, 2, 40, 64, requires_grad=False)
    v = rand(2, 2, 40, 64, requires_grad=False)
    out = ft._sdpa_forward(None, None, q, k, v, 0.0, causal, False, scale=0.2)
    o, lse = floe.attention(q, k, v, causal=causal, scale=0.2, return_lse=True)
    assert torch.equal(out[0], o) and torch.equal(out[1], lse)
    assert out[4:6] == (40, 40)
    d_o = torch.randn_like(o)
    dq, dk, dv = ft._sdpa_backward(None, None, d_o, q, k, v, out[0], out[1], None, None, 40, 40,
                                   0.0, causal, out[6], out[7], scale=0.2)
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
    og = floe.attention(qg, kg, vg, causal=causal, scale=0.2)
    want = torch.autograd.grad(og, (qg, kg, vg), d_o)
    for a, b in zip((dq, dk, dv), want):
        assert torch.equal(a, b)


def test_drop_in_falls_back_to_pytorch():
    import floe.torch as ft

    class Original:
        def call_boxed(self, keyset, *args, **kwargs):
            self.called = (keyset, args, kwargs)
            return "pytorch"

    q = rand(1, 2, 16, 64, requires_grad=False)
    original = Original()
    assert ft._sdpa_forward(original, "keys", q, q, q, 0.1) == "pytorch"  # dropout
    assert original.called[0] == "keys" and original.called[1][3] == 0.1
    assert ft._sdpa_forward(original, "keys", q, q, q, 0.0, False, True) == "pytorch"  # debug
    f = q.float()  # floe declines float32: PyTorch's kernel serves it
    assert ft._sdpa_forward(original, "keys", f, f, f) == "pytorch"
    lse = torch.zeros(1, 2, 16)
    assert ft._sdpa_backward(original, "keys", f, f, f, f, f, lse, None, None, 16, 16, 0.0,
                             False, None, None) == "pytorch"


def test_explain_for_an_architecture_without_a_gpu():
    # Meta tensors: only shapes, strides and dtypes matter.
    q = torch.empty(2, 16, 1024, 128, dtype=torch.bfloat16, device="meta")
    k = torch.empty(2, 4, 1024, 128, dtype=torch.bfloat16, device="meta")
    ex = floe.explain(q, k, k, causal=True, arch=90)
    assert ex.engine == "sm90", str(ex)
    names = {name for name, _, _ in ex.verdicts}
    assert names == set(floe.engine_names())
    reference_reason = dict((n, r) for n, _, r in ex.verdicts)["reference"]
    assert reference_reason  # the CPU engine declines a GPU target, and says why
    exb = floe.explain(q, k, k, causal=True, arch=80, backward=True)
    assert exb.engine == "sm80", str(exb)


def test_meta_tensors_give_meta_outputs():
    q = torch.empty(2, 4, 64, 64, dtype=torch.bfloat16, device="meta")
    o, lse = floe.attention(q, q, q, return_lse=True)
    assert o.device.type == "meta" and o.shape == q.shape and lse.shape == (2, 4, 64)


def test_plan_cache_evicts_the_least_recently_used():
    # A hit makes its plan the most recent: with room for two, A B A C evicts B, not A.
    floe.clear_plan_cache(maxsize=2)
    try:
        k, v = (rand(1, 2, 8, 64, requires_grad=False) for _ in range(2))
        a, b, c = (rand(1, 2, s, 64, requires_grad=False) for s in (5, 6, 7))
        for q in (a, b, a, c):
            floe.attention(q, k, v)
        assert floe.plan_cache_info()[:3] == (1, 3, 2)
        floe.attention(a, k, v)  # kept
        assert floe.plan_cache_info().misses == 3
        floe.attention(b, k, v)  # evicted
        assert floe.plan_cache_info().misses == 4
    finally:
        floe.clear_plan_cache(maxsize=512)


def test_plan_cache_evicts_oldest_first_when_shrunk():
    # Several over the bound at once (maxsize lowered on a full cache): the oldest ticks go.
    c = _ops._PlanCache(maxsize=4)
    for key in "abcd":
        c.add(key, lambda k=key: k.upper())
    assert c.lookup("a") == "A" and c.lookup("c") == "C"  # b and d are now the oldest
    c.maxsize = 2
    c.add("e", lambda: "E")
    assert sorted(c._plans) == ["c", "e"]
    with pytest.raises(floe.FloeError, match="no"):
        c.add("f", lambda: (_ for _ in ()).throw(floe.FloeError("no")))
    with pytest.raises(floe.FloeError, match="no"):  # the refusal is kept and raised again
        c.lookup("f")
    assert sorted(c._plans) == ["e", "f"]


FAST_CASES = [
    dict(causal=True),
    dict(causal="bottom_right", window=(7, None), scale=0.3),
    dict(softcap=20.0, deterministic=True),
    dict(window=(5, 3), align="bottom_right"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", range(len(FAST_CASES)))
def test_fast_path_matches_dispatcher(device, case, monkeypatch):
    # Eager floe.attention skips the dispatcher (no bias, sink or lengths: _plain_forward and
    # _plain_backward; with a sink: the eager Function's general path); torch.compile and the
    # modes go through torch.ops.floe.fwd/bwd. Both must give the same outputs and gradients,
    # bitwise, on GQA and strided views, with and without the LSE.
    torch.manual_seed(70 + case)
    kw = FAST_CASES[case]
    calls = []
    for name in ("_plain_forward", "_plain_backward"):
        real = getattr(_ops, name)
        monkeypatch.setattr(_ops, name, lambda *a, _r=real, _n=name: calls.append(_n) or _r(*a))
    qkv = rand(2, 24, 3, 4, 64, device=device)  # [B, S, 3, H, D]: strided views, no copy
    q = qkv[:, :, 0].transpose(1, 2)
    k, v = (rand(2, 2, 24, 64, device=device) for _ in range(2))  # GQA 4:2
    options = _ops._options(kw.get("causal", False), kw.get("window"),
                            kw.get("align", "top_left"), kw.get("scale"), kw.get("softcap"),
                            kw.get("deterministic", False), "auto")
    for extra in ({}, {"sink": torch.randn(4, device=device, requires_grad=True)}):
        calls.clear()
        o, lse = floe.attention(q, k, v, return_lse=True, **kw, **extra)
        o_op, lse_op = torch.ops.floe.fwd(q, k, v, None, extra.get("sink"), None, None, *options)
        assert torch.equal(o, o_op) and torch.equal(lse, lse_op)
        with torch.no_grad():
            assert torch.equal(floe.attention(q, k, v, **kw, **extra), o)
        d_o = torch.randn_like(o)
        inputs = (qkv, k, v) + tuple(extra.values())
        eager = torch.autograd.grad(o, inputs, d_o)
        op = torch.autograd.grad(o_op, inputs, d_o)
        for g, h in zip(eager, op):
            assert torch.equal(g, h)
        assert calls == ([] if extra else ["_plain_forward", "_plain_forward", "_plain_backward"])


def test_cache_hit_does_not_validate_again(monkeypatch):
    from floe import _ops

    floe.clear_plan_cache()
    q = rand(1, 2, 8, 64)
    o = floe.attention(q, q, q)
    torch.autograd.grad(o, q, torch.ones_like(o))

    def no_build(*args, **kwargs):
        raise AssertionError("a plan was built (or validated) again on a cache hit")

    monkeypatch.setattr(_ops, "_build_forward", no_build)
    monkeypatch.setattr(_ops, "_build_backward", no_build)
    monkeypatch.setattr(_ops._floe, "build", no_build)
    for _ in range(3):
        o = floe.attention(q, q, q)
        torch.autograd.grad(o, q, torch.ones_like(o))
    assert floe.plan_cache_info().misses == 2


@pytest.mark.parametrize("device", DEVICES)
def test_backward_without_gradients_of_outputs(device):
    # With return_lse the eager Function has autograd pass absent output gradients as None (no
    # zero tensors made per call): an absent d_o must still give zero gradients, not fail or
    # reuse memory. Without it the Function has o alone as output, the LSE saved beside it.
    q, k, v = (rand(1, 2, 16, 64, device=device) for _ in range(3))
    for return_lse in (True, False):
        out = floe.attention(q, k, v, causal=True, return_lse=return_lse)
        o = out[0] if return_lse else out
        assert not return_lse or not out[1].requires_grad
        # One absent gradient per output. The Python Function's node has apply; floe's C++
        # node (floe._floe_torch) is called.
        grads = getattr(o.grad_fn, "apply", o.grad_fn)(*(None,) * (2 if return_lse else 1))
        for g in grads[:3]:
            assert g is not None and torch.equal(g, torch.zeros_like(g))
        assert all(g is None for g in grads[3:])


@pytest.mark.parametrize("device", DEVICES)
def test_forward_without_lse(device):
    # A forward with no gradient and no return_lse plans no LSE (one allocation fewer per
    # call): the same o, bitwise, as the plan that writes the LSE, and a plan of its own.
    torch.manual_seed(16)
    q, k, v = (rand(2, 4, 40, 64, device=device, requires_grad=False) for _ in range(3))
    floe.clear_plan_cache()
    with torch.no_grad():
        o = floe.attention(q, k, v, causal=True)
        o2, lse = floe.attention(q, k, v, causal=True, return_lse=True)
    assert floe.plan_cache_info().misses == 2
    assert torch.equal(o, o2)
    ref_o, _ = reference.attention(q, k, v, right=0)
    close(o, ref_o, TOL[torch.bfloat16], "o")


def test_plans_and_allocations_keep_to_their_device():
    # A refusal for a device floe does not serve (meta here: get_device() is -1 for it as for
    # the CPU) is cached under that device, not the CPU's; and the per-call allocations come
    # from one-element tensors kept per (CUDA ordinal or -1 for the CPU, dtype) that such a
    # call must not leave on its device.
    floe.clear_plan_cache()
    q = torch.empty(1, 2, 8, 64, dtype=torch.bfloat16, device="meta")
    with pytest.raises(floe.FloeError, match="tensor 'q' device"):
        _ops._forward(q, q, q, None, None, None, None, None, None, 0, None, None, False, "auto")
    floe.attention(*(rand(1, 2, 8, 64, requires_grad=False) for _ in range(3)), return_lse=True)
    assert _ops._templates
    for (index, dtype), t in _ops._templates.items():
        want = torch.device("cpu") if index < 0 else torch.device("cuda", index)
        assert t.device == want and t.dtype == dtype


@pytest.mark.parametrize("device", DEVICES)
def test_cpp_path_matches_python_path(device, monkeypatch):
    # floe._floe_torch serves the eager calls' cache hits in C++ (no bias, sink or lengths):
    # the same plans as the Python path, so bitwise the same outputs, LSE and gradients, on GQA
    # and strided views; and the one LRU: its hits counted, Python's evictions honoured.
    if _ops._c is None:
        pytest.skip(f"no C++ path: {_ops.torch_ext}")
    torch.manual_seed(91)
    qkv = rand(2, 24, 3, 4, 64, device=device)  # [B, S, 3, H, D]: strided views
    q = qkv[:, :, 0].transpose(1, 2)
    k, v = (rand(2, 2, 24, 64, device=device) for _ in range(2))
    d_o = torch.randn(2, 4, 24, 64, device=device).bfloat16()

    def run():
        with torch.no_grad():
            o = floe.attention(q, k, v, causal=True, window=(5, None))
            o2, lse = floe.attention(q, k, v, causal=True, window=(5, None), return_lse=True)
        out = floe.attention(q, k, v, causal=True, window=(5, None))
        return (o, o2, lse, out) + torch.autograd.grad(out, (qkv, k, v), d_o)

    floe.clear_plan_cache()
    first = run()  # misses: Python builds and hands each entry to C++
    # Plans: forward, forward with LSE (then hit by the gradient's forward), backward.
    assert _ops._c.hits() == 1 and _ops._c.size() == 3
    served = run()  # every call a C++ hit
    assert _ops._c.hits() == 5 and floe.plan_cache_info().misses == 3
    monkeypatch.setattr(_ops, "_c_fwd", None)
    monkeypatch.setattr(_ops, "_c_bwd", None)
    python = run()  # the Python path on the same plans
    for a, b, c in zip(first, served, python):
        assert torch.equal(a, b) and torch.equal(a, c)
    monkeypatch.undo()
    assert torch.equal(first[0], first[1]) and torch.equal(first[0], first[3])
    # Declined, to the Python path: gradients recorded (the eager Function, whose forward and
    # backward are C++ hits), a dispatch mode, a wrong shape (Python raises floe's error).
    before = _ops._c.hits()
    from torch.utils._python_dispatch import TorchDispatchMode

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Mode(), torch.no_grad():
        floe.attention(q, k, v, causal=True, window=(5, None))
    assert _ops._c.hits() == before
    with pytest.raises(floe.FloeError, match="tensor 'v' dims"):
        with torch.no_grad():
            floe.attention(q, k, v[:, :, :5], causal=True, window=(5, None))
    # An entry Python evicts is no longer served (a new miss builds it again).
    floe.clear_plan_cache(maxsize=1)
    try:
        with torch.no_grad():
            floe.attention(q, k, v)
            floe.attention(q, k, v, causal=True)  # evicts the first
            floe.attention(q, k, v)
        assert floe.plan_cache_info().misses == 3 and _ops._c.hits() == 0
    finally:
        floe.clear_plan_cache(maxsize=512)


def _node_on():
    return _ops._c is not None and _ops._c.autograd_node_enabled()


@pytest.mark.parametrize("device", DEVICES)
def test_cpp_autograd_node_matches_function(device, monkeypatch):
    # floe._floe_torch's C++ autograd node records the plain eager calls with gradients on a
    # forward hit: bitwise the same o, lse and gradients as the Python _EagerAttention on the
    # same plans (GQA, strided views, return_lse or not, an absent d_o), its backward a C++
    # hit; a backward miss goes to _ops._plain_backward, which builds the plan and hands it on.
    if _ops._c is None:
        pytest.skip(f"no C++ path: {_ops.torch_ext}")
    torch.manual_seed(92)
    qkv = rand(2, 24, 3, 4, 64, device=device)  # [B, S, 3, H, D]: strided views
    q = qkv[:, :, 0].transpose(1, 2)
    k, v = (rand(2, 2, 24, 64, device=device) for _ in range(2))
    d_o = torch.randn(2, 4, 24, 64, device=device).bfloat16()

    def run(return_lse):
        out = floe.attention(q, k, v, causal=True, window=(7, None), return_lse=return_lse)
        o = out[0] if return_lse else out
        node = o.grad_fn.name()
        grads = torch.autograd.grad(o, (qkv, k, v), d_o)
        return node, (o.detach(),) + ((out[1],) if return_lse else ()) + grads

    start = _ops._c.autograd_node_enabled()  # FLOE_TORCH_NODE's; restored below
    try:
        for return_lse in (False, True):
            floe.clear_plan_cache()
            _ops._set_autograd_node(False)
            run(return_lse)  # misses: the plans built (forward with LSE, backward)
            node_f, function = run(return_lse)
            assert node_f == "_EagerAttentionBackward"
            _ops._set_autograd_node(True)
            hits = _ops._c.hits()
            node_c, cpp = run(return_lse)
            assert "AttentionNode" in node_c, node_c
            assert _ops._c.hits() == hits + 2  # the forward and the backward, both C++ hits
            assert floe.plan_cache_info().misses == 2
            for a, b in zip(function, cpp):
                assert torch.equal(a, b)
            # A backward miss: the backward plan evicted, _plain_backward builds it again.
            out = floe.attention(q, k, v, causal=True, window=(7, None), return_lse=return_lse)
            o = out[0] if return_lse else out
            floe.clear_plan_cache()
            grads = torch.autograd.grad(o, (qkv, k, v), d_o)
            assert floe.plan_cache_info().misses == 1
            for a, b in zip(function[-3:], grads):
                assert torch.equal(a, b)
    finally:
        _ops._set_autograd_node(start)
    if not start:
        return
    # A backward with no output gradient (return_lse: none is materialized): zero gradients.
    floe.attention(q, k, v, causal=True, window=(7, None))  # the forward plan (cleared above)
    o, lse = floe.attention(q, k, v, causal=True, window=(7, None), return_lse=True)
    assert "AttentionNode" in o.grad_fn.name() and not lse.requires_grad
    grads = o.grad_fn(None, None)
    assert len(grads) == 3
    for g in grads:
        assert g is not None and torch.equal(g, torch.zeros_like(g))
    # The graph kept (retain_graph): the same gradients again.
    o = floe.attention(q, k, v, causal=True, window=(7, None))
    g1 = torch.autograd.grad(o, (qkv, k, v), d_o, retain_graph=True)
    g2 = torch.autograd.grad(o, (qkv, k, v), d_o)
    for a, b in zip(g1, g2):
        assert torch.equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_cpp_autograd_node_declines(device):
    # The node is recorded only for what its forward serves: no bias, sink or lengths, plain
    # tensors, a forward hit. A miss, a bias, a dispatch mode, a non-dense d_o (made dense by
    # Python), an inference-mode call and a no-grad call keep their paths; all give the same
    # numbers. A refusal raises floe's error before any node is recorded.
    if not _node_on():
        pytest.skip(f"no C++ autograd node: {_ops.torch_ext}")
    torch.manual_seed(93)
    q, k, v = (rand(1, 2, 16, 64, device=device) for _ in range(3))
    floe.clear_plan_cache()
    o = floe.attention(q, k, v, causal=True)
    assert o.grad_fn.name() == "_EagerAttentionBackward"  # a miss
    o = floe.attention(q, k, v, causal=True)
    assert "AttentionNode" in o.grad_fn.name()
    # Dense ones, as Python makes o.sum()'s d_o below: the same backward plan.
    ref = torch.autograd.grad(o, (q, k, v), torch.ones(o.shape, dtype=o.dtype, device=device))
    # o.sum(): a d_o expanded with stride 0 (not unit innermost): Python makes it dense.
    o = floe.attention(q, k, v, causal=True)
    got = torch.autograd.grad(o.sum(), (q, k, v))
    for a, b in zip(ref, got):
        assert torch.equal(a, b)
    bias = rand(1, 1, 16, 16, device=device)
    o = floe.attention(q, k, v, causal=True, bias=bias)
    assert o.grad_fn.name() == "_EagerAttentionBackward"
    with torch.no_grad():
        assert floe.attention(q, k, v, causal=True).grad_fn is None
    with pytest.raises(floe.FloeError, match="tensor 'v' dims"):
        floe.attention(q, k, v[:, :, :5], causal=True)
    from torch.utils._python_dispatch import TorchDispatchMode

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Mode():
        o = floe.attention(q, k, v, causal=True)
    assert "AttentionNode" not in o.grad_fn.name()
    # An error in the backward (here its miss's Python call) reaches the caller as raised.
    def failing(*args):
        raise floe.FloeError("invalid problem: from the test's backward")

    o = floe.attention(q, k, v, causal=True)
    assert "AttentionNode" in o.grad_fn.name()
    floe.clear_plan_cache()  # the backward misses
    _ops._c.autograd_node(True, failing)
    try:
        with pytest.raises(floe.FloeError, match="from the test's backward"):
            torch.autograd.grad(o, (q, k, v), torch.ones_like(o))
    finally:
        _ops._set_autograd_node(True)


def test_cpp_autograd_node_keeps_options_alive():
    # Each node holds the options tuple (its backward's key), and drops it when freed (with
    # its graph, or after a backward that does not retain it).
    if not _node_on():
        pytest.skip(f"no C++ autograd node: {_ops.torch_ext}")
    import sys

    q, k, v = (rand(1, 2, 16, 64) for _ in range(3))
    d_o = torch.ones(1, 2, 16, 64).bfloat16()
    for _ in range(2):  # the plans built (the cache's keys hold the options too)
        torch.autograd.grad(floe.attention(q, k, v, causal=True), (q, k, v), d_o)
    options = _ops._SIMPLE_OPTIONS[(True, "top_left", False, "auto")]
    o = floe.attention(q, k, v, causal=True)
    assert "AttentionNode" in o.grad_fn.name()
    del o
    before = sys.getrefcount(options)
    outs = [floe.attention(q, k, v, causal=True) for _ in range(4)]
    assert sys.getrefcount(options) == before + 4
    torch.autograd.grad(outs.pop(), (q, k, v), d_o)
    assert sys.getrefcount(options) == before + 3
    del outs
    assert sys.getrefcount(options) == before


def test_cpp_front():
    # floe.attention is floe._floe_torch's C++ front of _ops.attention where the C++ layer is
    # loaded: the calls it serves (q, k, v positional, causal True/False, return_lse,
    # enable_gqa, the other options at their defaults) are C++ hits with no Python frame; every
    # other call reaches _ops.attention as it came. Same results either way, the same errors,
    # the Python signature; _ops._c_fwd = None (tests, benches) turns it off.
    if _ops.front_state != "on":
        assert floe.attention is _ops.attention
        pytest.skip(f"no C++ front: {_ops.front_state}")
    import inspect

    assert floe.attention is not _ops.attention
    assert list(inspect.signature(floe.attention).parameters) == list(
        inspect.signature(_ops.attention).parameters)
    torch.manual_seed(94)
    q, k, v = (rand(1, 4, 24, 64, requires_grad=False) for _ in range(3))
    k2, v2 = k[:, :2], v[:, :2]
    engine = "".join(["au", "to"])  # equal to 'auto', not the interned string: Python's
    calls = [
        ((q, k, v), {}), ((q, k, v), {"causal": True}), ((q, k, v), {"causal": False}),
        ((q, k2, v2), {"causal": True, "return_lse": True}),
        ((q, k, v), {"causal": True, "window": None, "bias": None, "scale": None,
                     "deterministic": False, "engine": "auto", "align": "top_left"}),
        ((q, k, v), {"return_lse": 1}),  # any truth value, as Python's
        ((q, k, v), {"causal": "bottom_right"}), ((q, k, v), {"window": (3, 2)}),
        ((q, k, v), {"scale": 0.2}), ((q, k, v), {"engine": engine}),
        ((q, k, v), {"causal": 1}),
    ]
    import sys

    frames = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is _ops.attention.__code__:
            frames.append(1)

    with torch.no_grad():
        for i, (args, kw) in enumerate(calls):
            want = _ops.attention(*args, **kw)
            hits = _ops._c.hits()
            frames.clear()
            sys.setprofile(profile)
            try:
                for _ in range(2):
                    got = floe.attention(*args, **kw)
            finally:
                sys.setprofile(None)
            # The first six are the front's; the others reach the Python function.
            assert len(frames) == (0 if i < 6 else 2), kw
            assert _ops._c.hits() == hits + 2, kw  # misses built by the Python calls above
            for a, b in zip(got if isinstance(got, tuple) else (got,),
                            want if isinstance(want, tuple) else (want,)):
                assert torch.equal(a, b), kw
    with pytest.raises(floe.FloeError, match="tensor 'v' dims"):
        floe.attention(q, k, v[:, :, :5])
    with pytest.raises(ValueError, match="align"):
        floe.attention(q, k, v, causal="diagonal")
    with pytest.raises(TypeError):
        floe.attention(q, k, v, True)
    with pytest.raises(TypeError):
        floe.attention(q, k, v, causal=True, nonsense=1)
    with pytest.raises(floe.FloeError, match="enable_gqa"):
        floe.attention(q, k2, v2, enable_gqa=False)
    monkeypatch_free = _ops._c_fwd
    _ops._c_fwd = None  # as tests/benches switch the C++ path off: the front takes Python's
    try:
        frames.clear()
        sys.setprofile(profile)
        with torch.no_grad():
            floe.attention(q, k, v, causal=True)
        sys.setprofile(None)
        assert len(frames) == 1
    finally:
        sys.setprofile(None)
        _ops._c_fwd = monkeypatch_free

"""floe.attention_varlen (ragged, DESIGN §2.1) and floe.attention_paged (paged KV, §2.2) against
independent fp64 computations: each sequence of a ragged batch through reference.attention
(torch ops in fp64, itself checked against math SDPA in test_attention.py), and a paged
problem as the dense one on the keys gathered through the block table in Python. CPU tensors
run on the reference engine; every case draws fresh random data."""

import math

import pytest

torch = pytest.importorskip("torch")
floe = pytest.importorskip("floe")

import reference  # noqa: E402
from floe import _serving  # noqa: E402, F401  (registers torch.ops.floe.varlen_*, paged_fwd)

TOL = 2e-2  # bf16: one output rounding against fp64, as a fraction of the largest magnitude
GRAD_TOL = 4e-2


def rand(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, dtype=torch.float32).to(dtype)


def close(got, ref, tol, what):
    got = got.detach().double()
    ref = ref.detach().double()
    assert got.shape == ref.shape, f"{what}: {list(got.shape)} vs {list(ref.shape)}"
    assert torch.isfinite(got).all(), f"{what}: non-finite values"
    err = (got - ref).abs().max().item() if got.numel() else 0.0
    mag = max(ref.abs().max().item() if ref.numel() else 0.0, 1.0)
    assert err <= tol * mag, f"{what}: max error {err:.3g} > {tol * mag:.3g}"


def close_lse(got, ref, what):
    finite = torch.isfinite(ref)
    assert torch.equal(torch.isfinite(got), finite), f"{what}: -inf rows differ"
    close(got[finite], ref[finite], 1e-3, what)


def offsets(slots, dtype=torch.int32):
    return torch.tensor([0] + list(torch.tensor(slots).cumsum(0)), dtype=dtype)


def bhsd(x):
    """[S, H, D] -> [1, H, S, D] (a view)."""
    return x.permute(1, 0, 2).unsqueeze(0)


def ref_varlen(q, k, v, off_q, off_kv, len_q, len_kv, **kw):
    """Per sequence in fp64: lists of (o [sq, Hq, Dv], lse [sq, Hq]) on the valid rows."""
    out = []
    for b in range(len(len_q)):
        qb = q[off_q[b]:off_q[b] + len_q[b]]
        kb, vb = (t[off_kv[b]:off_kv[b] + len_kv[b]] for t in (k, v))
        o, lse = reference.attention(bhsd(qb), bhsd(kb), bhsd(vb), **kw)
        out.append((o[0].permute(1, 0, 2), lse[0].t()))
    return out


# ---------------------------------------------------------------------------------------------
# Ragged (varlen)


@pytest.mark.parametrize("offsets_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("causal", [False, True, "bottom_right"])
@pytest.mark.parametrize("h_q,h_kv", [(4, 4), (4, 2)])
def test_varlen_equals_per_sequence_dense(offsets_dtype, causal, h_q, h_kv):
    len_q = [5, 0, 17, 9, 4]
    len_kv = [7, 3, 17, 12, 0]  # an empty query side and a query side with no keys
    d = 16
    q, k, v = rand(sum(len_q), h_q, d), rand(sum(len_kv), h_kv, d), rand(sum(len_kv), h_kv, d)
    off_q, off_kv = offsets(len_q, offsets_dtype), offsets(len_kv, offsets_dtype)
    o, lse = floe.attention_varlen(q, k, v, off_q, off_kv, max_seqlen_q=max(len_q),
                                   max_seqlen_kv=max(len_kv), causal=causal, return_lse=True)
    assert o.shape == (sum(len_q), h_q, d) and lse.shape == (sum(len_q), h_q)
    align = causal if isinstance(causal, str) else "top_left"
    right = 0 if causal else None
    refs = ref_varlen(q, k, v, off_q.tolist(), off_kv.tolist(), len_q, len_kv, align=align,
                      right=right)
    for b, (ref_o, ref_lse) in enumerate(refs):
        rows = slice(off_q[b], off_q[b + 1])
        close(o[rows], ref_o, TOL, f"o of batch {b}")
        close_lse(lse[rows], ref_lse, f"lse of batch {b}")
        if len_q[b] == 0 or len_kv[b] == 0:  # the dense op takes no empty sides
            continue
        # The same sequence through the dense op on the same engine: the same numbers.
        kvs = slice(off_kv[b], off_kv[b + 1])
        dense, dense_lse = floe.attention(bhsd(q[rows]), bhsd(k[kvs]), bhsd(v[kvs]),
                                          causal=causal, return_lse=True)
        assert torch.equal(o[rows], dense[0].permute(1, 0, 2)), f"o of batch {b} vs dense"
        assert torch.equal(lse[rows], dense_lse[0].t()), f"lse of batch {b} vs dense"


def test_varlen_options_window_softcap_sink_scale():
    len_q, len_kv = [6, 11, 3], [9, 11, 20]
    h, d = 4, 32
    q, k, v = rand(sum(len_q), h, d), rand(sum(len_kv), 2, d), rand(sum(len_kv), 2, 24)
    sink = torch.randn(h)
    off_q, off_kv = offsets(len_q), offsets(len_kv)
    kw = dict(softcap=5.0, scale=0.3)
    o, lse = floe.attention_varlen(q, k, v, off_q, off_kv, max_seqlen_q=11, max_seqlen_kv=20,
                                   window=(4, 1), align="bottom_right", sink=sink,
                                   return_lse=True, **kw)
    refs = ref_varlen(q, k, v, off_q.tolist(), off_kv.tolist(), len_q, len_kv,
                      align="bottom_right", left=4, right=1, sink=sink, **kw)
    for b, (ref_o, ref_lse) in enumerate(refs):
        rows = slice(off_q[b], off_q[b + 1])
        close(o[rows], ref_o, TOL, f"o of batch {b}")
        close_lse(lse[rows], ref_lse, f"lse of batch {b}")


def padded_problem(requires_grad=False):
    """Slots wider than the valid lengths (seq_len_q, seq_len_kv inside them), and tokens past
    the last slot on both sides."""
    slots_q, len_q = [8, 6, 10], [5, 0, 10]
    slots_kv, len_kv = [7, 9, 12], [7, 2, 4]
    tail_q, tail_kv = 3, 2
    h, d = 2, 16
    q = rand(sum(slots_q) + tail_q, h, d)
    k, v = rand(sum(slots_kv) + tail_kv, h, d), rand(sum(slots_kv) + tail_kv, h, d)
    for t in (q, k, v):
        t.requires_grad_(requires_grad)
    return (q, k, v, offsets(slots_q), offsets(slots_kv), torch.tensor(len_q, dtype=torch.int32),
            torch.tensor(len_kv, dtype=torch.int32), len_q, len_kv)


def test_varlen_padded_slots_and_tail():
    q, k, v, off_q, off_kv, sl_q, sl_kv, len_q, len_kv = padded_problem()
    o, lse = floe.attention_varlen(q, k, v, off_q, off_kv, max_seqlen_q=10, max_seqlen_kv=12,
                                   causal="bottom_right", seq_len_q=sl_q, seq_len_kv=sl_kv,
                                   return_lse=True)
    refs = ref_varlen(q, k, v, off_q.tolist(), off_kv.tolist(), len_q, len_kv,
                      align="bottom_right", right=0)
    for b, (ref_o, ref_lse) in enumerate(refs):
        start, end = off_q[b].item(), off_q[b + 1].item()
        close(o[start:start + len_q[b]], ref_o, TOL, f"o of batch {b}")
        close_lse(lse[start:start + len_q[b]], ref_lse, f"lse of batch {b}")
        # Padding rows of a slot (DESIGN 2.1): O = 0, stats = -inf.
        assert (o[start + len_q[b]:end] == 0).all(), f"padding of batch {b}"
        assert (lse[start + len_q[b]:end] == -math.inf).all(), f"padding lse of batch {b}"


def test_varlen_envelope_clamps_longer_sequences():
    # max_seqlen_* are the plan's envelope: a sequence longer than it is clamped to it, read on
    # the device only (no error, no read-back): its rows past the envelope are padding.
    len_q, len_kv = [3, 9], [4, 9]
    q, k, v = rand(12, 2, 16), rand(13, 2, 16), rand(13, 2, 16)
    off_q, off_kv = offsets(len_q), offsets(len_kv)
    o = floe.attention_varlen(q, k, v, off_q, off_kv, max_seqlen_q=6, max_seqlen_kv=5)
    refs = ref_varlen(q, k, v, off_q.tolist(), off_kv.tolist(), [3, 6], [4, 5])
    close(o[0:3], refs[0][0], TOL, "o of batch 0")
    close(o[3:9], refs[1][0], TOL, "o of batch 1")
    assert (o[9:12] == 0).all()


def test_varlen_backward_matches_autograd_of_fp64():
    q, k, v, off_q, off_kv, sl_q, sl_kv, len_q, len_kv = padded_problem(requires_grad=True)
    sink = torch.randn(q.shape[1], requires_grad=True)
    o = floe.attention_varlen(q, k, v, off_q, off_kv, max_seqlen_q=10, max_seqlen_kv=12,
                              causal="bottom_right", window=(3, None), sink=sink,
                              seq_len_q=sl_q, seq_len_kv=sl_kv, softcap=4.0)
    d_o = rand(*o.shape)
    got = torch.autograd.grad(o, (q, k, v, sink), d_o)
    refs = ref_varlen(q, k, v, off_q.tolist(), off_kv.tolist(), len_q, len_kv,
                      align="bottom_right", left=3, right=0, sink=sink, softcap=4.0)
    outs, grads_o = [], []
    for b, (ref_o, _) in enumerate(refs):
        start = off_q[b].item()
        outs.append(ref_o)
        grads_o.append(d_o[start:start + len_q[b]].double())
    want = torch.autograd.grad(outs, (q, k, v, sink), grads_o, allow_unused=True)
    for name, g, w in zip(("dq", "dk", "dv", "dsink"), got, want):
        # Rows outside every valid length (padding, the tails) have no gradient: 0.
        close(g, torch.zeros_like(g, dtype=torch.float64) if w is None else w, GRAD_TOL, name)
    # The padding rows and tails are exactly zero, not merely small.
    assert (got[0][off_q[-1]:] == 0).all() and (got[1][off_kv[-1]:] == 0).all()
    assert (got[0][off_q[0] + len_q[0]:off_q[1]] == 0).all()
    assert (got[1][off_kv[1] + len_kv[1]:off_kv[2]] == 0).all()


def test_varlen_strided_views_no_copy(monkeypatch):
    # A fused QKV projection [T, 3, H, D]: q, k, v are views with gaps; the plan takes their
    # strides. Tensor.contiguous and clone would be a copy: they must not run.
    len_q = [4, 7, 1]
    qkv = rand(sum(len_q), 3, 2, 16)
    q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
    off = offsets(len_q)
    want = floe.attention_varlen(q.contiguous(), k.contiguous(), v.contiguous(), off, off,
                                 max_seqlen_q=7, max_seqlen_kv=7, causal=True)
    calls = []
    for name in ("contiguous", "clone"):
        orig = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name,
                            lambda self, *a, _o=orig, _n=name, **kw: calls.append(_n)
                            or _o(self, *a, **kw))
    got = floe.attention_varlen(q, k, v, off, off, max_seqlen_q=7, max_seqlen_kv=7, causal=True)
    monkeypatch.undo()
    assert calls == []
    assert torch.equal(got, want)


def test_varlen_plan_serves_every_length_vector():
    # One plan per signature: new offsets and lengths inside the envelope hit the cache.
    floe.clear_plan_cache()
    q, k, v = rand(20, 2, 16), rand(24, 2, 16), rand(24, 2, 16)
    for len_q, len_kv in (([5, 15], [12, 12]), ([19, 1], [4, 20]), ([0, 20], [24, 0])):
        off_q, off_kv = offsets(len_q), offsets(len_kv)
        o = floe.attention_varlen(q, k, v, off_q, off_kv, max_seqlen_q=20, max_seqlen_kv=24)
        refs = ref_varlen(q, k, v, off_q.tolist(), off_kv.tolist(), len_q, len_kv)
        for b, (ref_o, _) in enumerate(refs):
            close(o[off_q[b]:off_q[b + 1]], ref_o, TOL, f"o of batch {b}")
    info = floe.plan_cache_info()
    assert (info.misses, info.hits) == (1, 2)


def test_varlen_compile_fullgraph_and_opcheck():
    len_q = [3, 6]
    q, k, v = rand(9, 2, 16), rand(9, 2, 16), rand(9, 2, 16)
    off = offsets(len_q)

    def f(q, k, v, off):
        return floe.attention_varlen(q, k, v, off, off, max_seqlen_q=6, max_seqlen_kv=6,
                                     causal=True) * 2

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(q, k, v, off), f(q, k, v, off))
    args = (q.requires_grad_(), k.requires_grad_(), v.requires_grad_(), off, off, None, None,
            None, 6, 6, None, None, 0, None, 0, "reference")
    torch.library.opcheck(torch.ops.floe.varlen_fwd.default, args)


# ---------------------------------------------------------------------------------------------
# Paged KV cache


def paged_cache(len_kv, page, h_kv, d, n_spare=3, strided=False):
    """A shuffled cache holding each batch's keys in its own pages, the table padded with -1.
    Returns (k_cache, v_cache, block_table, dense K and V per batch [skv_b, Hkv, D])."""
    need = [math.ceil(n / page) for n in len_kv]
    n_pages = sum(need) + n_spare
    max_pages = max(need) + 1
    if strided:  # vLLM-like: K and V side by side in one allocation, heads inner
        kv = rand(n_pages, page, 2, h_kv, d)
        k_cache, v_cache = kv[:, :, 0], kv[:, :, 1]
    else:
        k_cache, v_cache = rand(n_pages, page, h_kv, d), rand(n_pages, page, h_kv, d)
    perm = torch.randperm(n_pages).tolist()
    # A table of any strides: the transpose of a [max_pages, B] array.
    table_t = torch.full((max_pages, len(len_kv)), -1, dtype=torch.int32)
    dense = []
    for b, n in enumerate(len_kv):
        pages = [perm.pop() for _ in range(need[b])]
        table_t[:need[b], b] = torch.tensor(pages, dtype=torch.int32)
        rows = [(pages[j // page], j % page) for j in range(n)]
        dense.append(tuple(torch.stack([c[p, r] for p, r in rows]) if rows
                           else c.new_empty((0, h_kv, d)) for c in (k_cache, v_cache)))
    return k_cache, v_cache, table_t.t(), dense


@pytest.mark.parametrize("page", [1, 4, 16])
@pytest.mark.parametrize("strided", [False, True])
def test_paged_equals_dense_on_gathered_keys(page, strided):
    len_kv = [1, 37, 16, 0, 21]
    b, s_q, h_q, h_kv, d = len(len_kv), 3, 4, 2, 16
    k_cache, v_cache, table, dense = paged_cache(len_kv, page, h_kv, d, strided=strided)
    q = rand(b, s_q, h_q, d)
    sl_kv = torch.tensor(len_kv, dtype=torch.int32)
    max_kv = max(len_kv)
    o, lse = floe.attention_paged(q, k_cache, v_cache, table, sl_kv, max_seqlen_kv=max_kv,
                                  causal="bottom_right", return_lse=True)
    assert o.shape == (b, s_q, h_q, d) and lse.shape == (b, h_q, s_q)
    for i, (kb, vb) in enumerate(dense):
        ref_o, ref_lse = reference.attention(q[i:i + 1].transpose(1, 2), bhsd(kb), bhsd(vb),
                                             align="bottom_right", right=0)
        close(o[i], ref_o[0].transpose(0, 1), TOL, f"o of batch {i}")
        close_lse(lse[i], ref_lse[0], f"lse of batch {i}")
    # The dense op on the gathered keys, padded to the envelope, on the same engine.
    k_dense = torch.zeros(b, h_kv, max_kv, d, dtype=q.dtype)
    v_dense = torch.zeros_like(k_dense)
    for i, (kb, vb) in enumerate(dense):
        k_dense[i, :, :len(kb)] = kb.transpose(0, 1)
        v_dense[i, :, :len(vb)] = vb.transpose(0, 1)
    want, want_lse = floe.attention(q.transpose(1, 2), k_dense, v_dense, causal="bottom_right",
                                    seq_len_kv=sl_kv, return_lse=True)
    assert torch.equal(o, want.transpose(1, 2)) and torch.equal(lse, want_lse)


def test_paged_with_ragged_queries():
    # Chunked prefill over a cache: packed queries, each batch's queries the last of its keys.
    len_q, len_kv = [4, 1, 6], [9, 30, 6]
    page, h_q, h_kv, d = 8, 4, 1, 32
    k_cache, v_cache, table, dense = paged_cache(len_kv, page, h_kv, d)
    off_q = offsets(len_q, torch.int64)
    q = rand(sum(len_q), h_q, d)
    sink = torch.randn(h_q)
    o, lse = floe.attention_paged(q, k_cache, v_cache, table, torch.tensor(len_kv).int(),
                                  max_seqlen_kv=32, offsets_q=off_q, max_seqlen_q=6,
                                  causal="bottom_right", sink=sink, return_lse=True)
    assert o.shape == q.shape and lse.shape == q.shape[:2]
    for i, (kb, vb) in enumerate(dense):
        rows = slice(off_q[i], off_q[i + 1])
        ref_o, ref_lse = reference.attention(bhsd(q[rows]), bhsd(kb), bhsd(vb),
                                             align="bottom_right", right=0, sink=sink)
        close(o[rows], ref_o[0].permute(1, 0, 2), TOL, f"o of batch {i}")
        close_lse(lse[rows], ref_lse[0].t(), f"lse of batch {i}")


def test_paged_backward_is_refused_not_silent():
    k_cache, v_cache, table, _ = paged_cache([5, 11], 4, 2, 16)
    q = rand(2, 1, 2, 16).requires_grad_()
    o = floe.attention_paged(q, k_cache, v_cache, table, torch.tensor([5, 11]).int(),
                             max_seqlen_kv=12)
    assert o.requires_grad
    with pytest.raises(RuntimeError, match="(?i)autograd"):
        o.sum().backward()


def test_paged_compile_fullgraph_and_opcheck():
    k_cache, v_cache, table, _ = paged_cache([5, 11], 4, 2, 16)
    q = rand(2, 1, 2, 16)
    sl = torch.tensor([5, 11], dtype=torch.int32)

    def f(q, k_cache, v_cache, table, sl):
        return floe.attention_paged(q, k_cache, v_cache, table, sl, max_seqlen_kv=12,
                                    causal="bottom_right") + 1

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(q, k_cache, v_cache, table, sl), f(q, k_cache, v_cache, table, sl))
    args = (q, k_cache, v_cache, table, sl, None, None, None, None, 12, None, None, 1, None, 0,
            "reference")
    torch.library.opcheck(torch.ops.floe.paged_fwd.default, args)


# ---------------------------------------------------------------------------------------------
# Refusals: floe's message (tensor, field, rule) as FloeError, before anything runs


def test_refusals_name_the_tensor_field_and_rule():
    q, k, v = rand(9, 2, 16), rand(9, 2, 16), rand(9, 2, 16)
    off = offsets([3, 6])
    env = dict(max_seqlen_q=6, max_seqlen_kv=6)
    with pytest.raises(floe.FloeError, match="tensor 'offsets_q' dtype: is torch.float32, must be "
                       "int32 or int64"):
        floe.attention_varlen(q, k, v, off.float(), off, **env)
    with pytest.raises(floe.FloeError, match=r"tensor 'offsets_kv' dims: is \[4\], must be \[3\]"):
        floe.attention_varlen(q, k, v, off, offsets([3, 3, 3]), **env)
    with pytest.raises(floe.FloeError, match="tensor 'q' rank: is 4, must be 3"):
        floe.attention_varlen(q[None], k, v, off, off, **env)
    with pytest.raises(floe.FloeError, match="tensor 'v' dims"):
        floe.attention_varlen(q, k, v[:8], off, off, **env)
    with pytest.raises(floe.FloeError, match="tensor 'seq_len_q' dims"):
        floe.attention_varlen(q, k, v, off, off, seq_len_q=torch.ones(3, dtype=torch.int32),
                              **env)
    # The envelope is a host value: a device tensor there would be read back on every call.
    with pytest.raises(TypeError, match="max_seqlen_q must be a host int"):
        floe.attention_varlen(q, k, v, off, off, max_seqlen_q=torch.tensor(6), max_seqlen_kv=6)
    with pytest.raises(TypeError, match="max_seqlen_kv must be a host int"):
        floe.attention_varlen(q, k, v, off, off, max_seqlen_q=6, max_seqlen_kv=6.0)
    # floe's own validation, through the extension.
    with pytest.raises(floe.FloeError, match="s_q"):
        floe.attention_varlen(q, k, v, off, off, max_seqlen_q=0, max_seqlen_kv=6)
    with pytest.raises(floe.FloeError, match="tensor 'q' dtype: is f32, must be f16 or bf16"):
        floe.attention_varlen(q.float(), k.float(), v.float(), off, off, **env)
    with pytest.raises(floe.FloeError, match="sm80: declined"):
        floe.attention_varlen(q, k, v, off, off, engine="sm80", **env)

    k_cache, v_cache, table, _ = paged_cache([5, 11], 4, 2, 16)
    pq = rand(2, 1, 2, 16)
    sl = torch.tensor([5, 11], dtype=torch.int32)
    with pytest.raises(floe.FloeError, match=r"tensor 'block_table' dims\[1\] \(max_pages\) = 4: "
                       r"max_pages x page_size \(4\) must cover s_kv \(17\)"):
        floe.attention_paged(pq, k_cache, v_cache, table, sl, max_seqlen_kv=17)
    with pytest.raises(floe.FloeError, match="tensor 'block_table' dtype"):
        floe.attention_paged(pq, k_cache, v_cache, table.long(), sl, max_seqlen_kv=12)
    with pytest.raises(floe.FloeError, match="tensor 'seq_len_kv' dtype"):
        floe.attention_paged(pq, k_cache, v_cache, table, sl.long(), max_seqlen_kv=12)
    with pytest.raises(floe.FloeError, match="tensor 'q' dims"):
        floe.attention_paged(rand(3, 1, 2, 16), k_cache, v_cache, table, sl, max_seqlen_kv=12)
    with pytest.raises(floe.FloeError, match="tensor 'v' dims"):
        floe.attention_paged(pq, k_cache, v_cache[:, :2], table, sl, max_seqlen_kv=12)
    with pytest.raises(floe.FloeError, match="sm90: declined"):
        floe.attention_paged(pq, k_cache, v_cache, table, sl, max_seqlen_kv=12, engine="sm90")


def test_varlen_backward_opcheck():
    q, k, v, off_q, off_kv, sl_q, sl_kv, len_q, len_kv = padded_problem()
    sink = torch.randn(q.shape[1])
    o, lse = torch.ops.floe.varlen_fwd(q, k, v, off_q, off_kv, sink, sl_q, sl_kv, 10, 12, None,
                                       None, 1, None, 0, "reference")
    args = (rand(*o.shape), q, k, v, o, lse, off_q, off_kv, sink, sl_q, sl_kv, 10, 12, None,
            None, 1, None, 0, "reference")
    torch.library.opcheck(torch.ops.floe.varlen_bwd.default, args)


# ---------------------------------------------------------------------------------------------
# On a GPU (engine "auto": sm80's serving kernels where the kernel set holds the tile, else
# generic; sm90 declines these: a sink with a ragged side, and their head dims), against the reference engine on the CPU. Skipped without
# CUDA; the GPU check runs them.

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@needs_cuda
def test_varlen_on_the_gpu_matches_the_reference_engine():
    q, k, v, off_q, off_kv, sl_q, sl_kv, _, _ = padded_problem()
    sink = torch.randn(q.shape[1])
    kw = dict(max_seqlen_q=10, max_seqlen_kv=12, causal="bottom_right")

    def run(device):
        ts = [t.detach().to(device).requires_grad_(t.is_floating_point())
              for t in (q, k, v, off_q, off_kv, sl_q, sl_kv, sink)]
        o, lse = floe.attention_varlen(*ts[:5], seq_len_q=ts[5], seq_len_kv=ts[6], sink=ts[7],
                                       return_lse=True, **kw)
        d_o = torch.ones_like(o)
        grads = torch.autograd.grad(o, (ts[0], ts[1], ts[2], ts[7]), d_o)
        end = off_q[-1]  # rows past the last slot are not written (DESIGN 2.1)
        return [t.detach().cpu() for t in (o[:end], lse[:end]) + grads]

    want = run("cpu")
    got = run("cuda")
    for name, g, w in zip(("o", "lse", "dq", "dk", "dv", "dsink"), got, want):
        if name == "lse":
            close_lse(g, w.double(), name)
        else:
            close(g, w, GRAD_TOL if name[0] == "d" else TOL, name)


@needs_cuda
def test_paged_on_the_gpu_matches_the_reference_engine():
    len_kv = [1, 37, 16, 0, 21]
    k_cache, v_cache, table, _ = paged_cache(len_kv, 16, 2, 64, strided=True)
    q = rand(len(len_kv), 2, 8, 64)
    sl = torch.tensor(len_kv, dtype=torch.int32)
    args = (q, k_cache, v_cache, table, sl)
    kw = dict(max_seqlen_kv=40, causal="bottom_right", return_lse=True)
    want_o, want_lse = floe.attention_paged(*args, **kw)
    got_o, got_lse = floe.attention_paged(*(t.cuda() for t in args), **kw)
    close(got_o.cpu(), want_o, TOL, "o")
    close_lse(got_lse.cpu(), want_lse.double(), "lse")


@needs_cuda
def test_paged_decode_graph_replay_over_length_vectors_is_bitwise():
    # One plan, one captured graph, many length vectors (DESIGN 2.1/2.2: nothing read back).
    k_cache, v_cache, table, _ = paged_cache([50, 50, 50], 16, 2, 64)  # pages for 50 keys each
    k_cache, v_cache, table = k_cache.cuda(), v_cache.cuda(), table.cuda()
    q = rand(3, 1, 4, 64).cuda()
    sl = torch.tensor([30, 7, 50], dtype=torch.int32, device="cuda")
    kw = dict(max_seqlen_kv=64, causal="bottom_right")
    floe.attention_paged(q, k_cache, v_cache, table, sl, **kw)  # plan built outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = floe.attention_paged(q, k_cache, v_cache, table, sl, **kw)
    for lens in ([30, 7, 50], [1, 48, 2], [0, 16, 17]):
        sl.copy_(torch.tensor(lens, dtype=torch.int32))
        graph.replay()
        direct = floe.attention_paged(q, k_cache, v_cache, table, sl, **kw)
        torch.cuda.synchronize()
        assert torch.equal(o, direct), f"lengths {lens}"

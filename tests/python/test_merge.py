"""floe.merge (DESIGN §2.4) against independent computations: attention over all keys equals
the merge of attention over two disjoint key sets (floe.attention's outputs and LSE), the merge
formula in fp64, -inf rows, in-place merging, strided views, and refusals that name the tensor.
CPU tensors run on the fp64 reference; CUDA cases run where a GPU is present. Fresh random data
in every case, outputs poisoned before the call."""

import math

import pytest

torch = pytest.importorskip("torch")
floe = pytest.importorskip("floe")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _merge64(o_a, lse_a, o_b, lse_b):
    o_a, lse_a, o_b, lse_b = (t.double() for t in (o_a, lse_a, o_b, lse_b))
    m = torch.maximum(lse_a, lse_b)
    m = torch.where(torch.isinf(m) & (m < 0), torch.zeros_like(m), m)
    wa, wb = torch.exp(lse_a - m), torch.exp(lse_b - m)
    total = wa + wb
    o = (wa[..., None] * o_a + wb[..., None] * o_b) / torch.where(total > 0, total, 1.0)[..., None]
    lse = torch.where(total > 0, m + torch.log(total), torch.full_like(m, -math.inf))
    return o, lse


def _parts(device, dtype, b=2, h=3, s=17, d=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    o_a = torch.randn(b, h, s, d, generator=g).to(device, dtype)
    o_b = torch.randn(b, h, s, d, generator=g).to(device, dtype)
    lse_a = (torch.randn(b, h, s, generator=g) * 3).to(device)
    lse_b = (torch.randn(b, h, s, generator=g) * 3).to(device)
    return o_a, lse_a, o_b, lse_b


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_merge_matches_the_formula_with_empty_rows(device, dtype):
    o_a, lse_a, o_b, lse_b = _parts(device, dtype, seed=1)
    lse_a[0, 0, 3] = -math.inf  # part a saw no key of this row
    lse_b[1, 2, 5] = -math.inf
    lse_a[1, 1, 7] = lse_b[1, 1, 7] = -math.inf  # neither part did
    out = torch.full_like(o_a, float("nan"))
    lse_out = torch.full_like(lse_a, float("nan"))
    got_o, got_lse = floe.merge(o_a, lse_a, o_b, lse_b, out=out, lse_out=lse_out)
    assert got_o is out and got_lse is lse_out
    want_o, want_lse = _merge64(o_a, lse_a, o_b, lse_b)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got_o.double().cpu(), want_o.cpu(), atol=tol, rtol=tol)
    torch.testing.assert_close(got_lse.double().cpu(), want_lse.cpu(), atol=1e-5, rtol=1e-5)
    assert torch.all(got_o[1, 1, 7] == 0) and got_lse[1, 1, 7] == -math.inf


@pytest.mark.parametrize("device", DEVICES)
def test_merging_two_key_halves_is_attention_over_all_keys(device):
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(2, 4, 33, 64, generator=g).to(device, torch.bfloat16) for _ in range(3))
    o_all, lse_all = floe.attention(q, k, v, return_lse=True)
    o_a, lse_a = floe.attention(q, k[:, :, :20], v[:, :, :20], return_lse=True)
    o_b, lse_b = floe.attention(q, k[:, :, 20:], v[:, :, 20:], return_lse=True)
    # In place into part a, f32 partials as a context-parallel ring would keep them.
    o_a32 = o_a.float()
    o, lse = floe.merge(o_a32, lse_a, o_b, lse_b, out=o_a32, lse_out=lse_a)
    assert o is o_a32 and lse is lse_a
    torch.testing.assert_close(o, o_all.float(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, lse_all, atol=1e-2, rtol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_strided_views(device):
    o_a, lse_a, o_b, lse_b = _parts(device, torch.float32, b=2, h=3, s=9, d=32, seed=3)
    # O as a BSHD storage seen as [B, H, S, D]; lse heads-last.
    o_a = o_a.transpose(1, 2).contiguous().transpose(1, 2)
    lse_b = lse_b.permute(0, 2, 1).contiguous().permute(0, 2, 1)
    out = torch.full((2, 9, 3, 32), float("nan"), device=device).transpose(1, 2)
    got_o, got_lse = floe.merge(o_a, lse_a, o_b, lse_b, out=out)
    want_o, want_lse = _merge64(o_a, lse_a, o_b, lse_b)
    torch.testing.assert_close(got_o.double().cpu(), want_o.cpu(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_lse.double().cpu(), want_lse.cpu(), atol=1e-5, rtol=1e-5)


def test_refusals_name_the_tensor():
    o_a, lse_a, o_b, lse_b = _parts("cpu", torch.float32)
    with pytest.raises(floe.FloeError, match="tensor 'o_b' shape"):
        floe.merge(o_a, lse_a, o_b[:, :, :5], lse_b)
    with pytest.raises(floe.FloeError, match="tensor 'lse_a' dtype"):
        floe.merge(o_a, lse_a.double(), o_b, lse_b)
    # An output overlapping an input it does not exactly replace.
    big = torch.randn(2, 3, 18, 64)
    with pytest.raises(floe.FloeError, match="argument 'o': its memory overlaps"):
        floe.merge(big[:, :, :17], lse_a, o_b, lse_b, out=big[:, :, 1:])

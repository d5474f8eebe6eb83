"""floe._floe without torch: a CPU plan executed on numpy arrays, against numpy in fp64."""

import math

import pytest

np = pytest.importorskip("numpy")
_floe = pytest.importorskip("floe._floe")

F16 = 0  # floe::DType::f16
N_TENSORS = 18  # TensorId count (include/floe/tensor.h), offsets and block table included


def reference(q, k, v, causal):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    if causal:
        s_q, s_kv = s.shape[-2:]
        s = np.where(np.arange(s_kv)[None, :] <= np.arange(s_q)[:, None], s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    lse = (np.log(p.sum(-1, keepdims=True)) + m)[..., 0]
    return (p / p.sum(-1, keepdims=True)) @ v, lse


def strides(a):
    return tuple(s // a.itemsize for s in a.strides)


@pytest.mark.parametrize("causal", [False, True])
def test_cpu_plan_matches_numpy(causal):
    rng = np.random.default_rng(0)
    b, h_q, h_kv, s_q, s_kv, d = 2, 4, 2, 17, 23, 32
    q = rng.standard_normal((b, h_q, s_q, d)).astype(np.float16)
    # k as a [B, S, H, D] buffer seen as [B, H, S, D]: the plan takes its strides.
    k = rng.standard_normal((b, s_kv, h_kv, d)).astype(np.float16).transpose(0, 2, 1, 3)
    v = rng.standard_normal((b, h_kv, s_kv, d)).astype(np.float16)
    o = np.full((b, h_q, s_q, d), np.nan, dtype=np.float16)
    lse = np.full((b, h_q, s_q), np.nan, dtype=np.float32)
    tensors = [None] * N_TENSORS
    for i, a in enumerate((q, k, v, o)):
        tensors[i] = (F16, strides(a))
    tensors[4] = (2, strides(lse))
    plan = _floe.build(False, F16, (b, h_q, h_kv, s_q, s_kv, d, d), tensors, None, False, False,
                       False, False, True, None, None, 0, None, 0 if causal else None, False,
                       -1, "auto")
    assert plan.engine == "reference"
    ptrs = [0] * N_TENSORS
    for i, a in enumerate((q, k, v, o, lse)):
        ptrs[i] = a.ctypes.data
    n = plan.workspace_bytes
    workspace = np.zeros(n + 256, dtype=np.uint8)
    base = workspace.ctypes.data
    plan.execute(ptrs, (base + 255) // 256 * 256 if n else 0, n, 0)
    ref_o, ref_lse = reference(q, k, v, causal)
    assert np.abs(o.astype(np.float64) - ref_o).max() < 2e-3
    assert np.abs(lse - ref_lse).max() < 1e-4


def test_refusal_names_tensor_field_rule():
    tensors = [None] * N_TENSORS
    with pytest.raises(_floe.FloeError, match=r"tensor 'k'.*h_kv|Hq.*Hkv|divis"):
        _floe.build(False, F16, (1, 6, 4, 8, 8, 32, 32), tensors, None, False, False, False,
                    False, False, None, None, 0, None, None, False, -1, "auto")


def test_execute_without_pointers_is_refused():
    tensors = [None] * N_TENSORS
    plan = _floe.build(False, F16, (1, 2, 2, 8, 8, 32, 32), tensors, None, False, False, False,
                       False, False, None, None, 0, None, None, False, -1, "auto")
    with pytest.raises(_floe.FloeError, match="invalid argument"):
        plan.execute([0] * N_TENSORS, 0, 0, 0)


def test_engine_names():
    names = _floe.engine_names()
    assert "reference" in names and "generic" in names
    assert _floe.TENSOR_NAMES[:4] == ["q", "k", "v", "o"]

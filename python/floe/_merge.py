"""floe.merge: two partial attention results merged by their log-sum-exps (DESIGN §2.4).

(O_a, lse_a) ⊕ (O_b, lse_b) is what attention over the keys of both parts gives, each part
computed over its own keys (context parallelism, split-KV, a prefix cache beside new tokens).
The merge runs on floe's MergePlan: the CPU's fp64 reference or a CUDA kernel on the current
stream, graph-safe and deterministic; plans are cached per signature.
"""

from collections import OrderedDict
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _floe
from ._floe import FloeError
from ._ops import _DTYPE_CODE, _current_stream

_NAMES = ("o_a", "lse_a", "o_b", "lse_b", "out", "lse_out")
_O_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_PLANS: "OrderedDict[tuple, object]" = OrderedDict()
_MAX_PLANS = 64


def _check(t: Tensor, name: str, shape, o_side: bool, device) -> None:
    if t.device != device:
        raise FloeError(f"invalid argument: tensor '{name}' device: is {t.device}, must be "
                        f"o_a's ({device})")
    if tuple(t.shape) != tuple(shape):
        what = "[B, H, S, D] of o_a" if o_side else "[B, H, S] of o_a"
        raise FloeError(f"invalid argument: tensor '{name}' shape: is {tuple(t.shape)}, must be "
                        f"{what} {tuple(shape)}")
    if o_side and t.dtype not in _O_DTYPES:
        raise FloeError(f"invalid argument: tensor '{name}' dtype: is {t.dtype}, must be "
                        "float32, float16 or bfloat16")
    if not o_side and t.dtype != torch.float32:
        raise FloeError(f"invalid argument: tensor '{name}' dtype: is {t.dtype}, must be float32")


def merge(o_a: Tensor, lse_a: Tensor, o_b: Tensor, lse_b: Tensor, *,
          out: Optional[Tensor] = None, lse_out: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """Merge two partial attention results by their log-sum-exps.

    o_a, o_b: [B, H, S, D] (float32, float16 or bfloat16, any strides); lse_a, lse_b: [B, H, S]
    float32 natural-log log-sum-exps (``floe.attention(..., return_lse=True)``'s). A row whose
    lse is -inf contributes nothing; both -inf gives O = 0 and lse = -inf. ``out`` (default: a
    new tensor of o_a's dtype) and ``lse_out`` may be o_a/lse_a (or o_b/lse_b): merged in place;
    any other overlap is refused. Returns (out, lse_out). No autograd.
    """
    device = o_a.device
    if device.type not in ("cpu", "cuda"):
        raise FloeError(f"invalid argument: tensor 'o_a' device: is {device}, must be cuda or cpu")
    if o_a.dim() != 4:
        raise FloeError(f"invalid argument: tensor 'o_a' shape: has {o_a.dim()} dims, must be "
                        "[B, H, S, D]")
    shape = tuple(o_a.shape)
    if out is None:
        out = torch.empty(shape, dtype=o_a.dtype, device=device)
    if lse_out is None:
        lse_out = torch.empty(shape[:3], dtype=torch.float32, device=device)
    ts = (o_a, lse_a, o_b, lse_b, out, lse_out)
    for i, t in enumerate(ts):
        _check(t, _NAMES[i], shape if i % 2 == 0 else shape[:3], i % 2 == 0, device)
    index = -1 if device.type == "cpu" else device.index
    key = (shape, o_a.dtype, o_b.dtype, out.dtype, tuple(t.stride() for t in ts), index)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _floe.build_merge(*shape, [_DTYPE_CODE[o_a.dtype], _DTYPE_CODE[o_b.dtype],
                                          _DTYPE_CODE[out.dtype]],
                                 [list(t.stride()) for t in ts], index)
        _PLANS[key] = plan
        if len(_PLANS) > _MAX_PLANS:
            _PLANS.popitem(last=False)
    else:
        _PLANS.move_to_end(key)
    plan.run([t.data_ptr() for t in ts], 0 if index < 0 else _current_stream(index))
    return out, lse_out

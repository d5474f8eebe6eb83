"""floe's PyTorch ops: ``floe::fwd`` and ``floe::bwd`` as torch custom ops over floe's plans.

The ops take any strides (the plan is built on the tensors' own strides: nothing is copied),
run on the current CUDA stream with the workspace from torch's caching allocator (so that graph
capture works), and on the CPU through floe's reference engine. Plans are kept in a bounded LRU
keyed by everything that decides them (shapes, strides, dtypes, device, options): a hit goes
straight to execute, with no validation again.
"""


import itertools
import os
from typing import List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from . import _floe
from ._floe import FloeError

# floe::DType codes and TensorId order (include/floe/tensor.h).
_DTYPE_CODE = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2, torch.int32: 3}
_N_TENSORS = 18
(_Q, _K, _V, _O, _STATS, _BIAS, _SINK, _SQL, _SKVL, _DO, _DQ, _DK, _DV, _DBIAS, _DSINK, _OFFQ,
 _OFFKV, _BLOCK_TABLE) = range(_N_TENSORS)
_ALIGN = {"top_left": 0, "bottom_right": 1}

# ---------------------------------------------------------------------------------------------
# Plan cache


class _Refusal:
    """A problem floe refused, kept so that the refusal costs one lookup the next time."""

    __slots__ = ("message",)

    def __init__(self, error):
        self.message = str(error)


class _PlanCache:
    """A bounded LRU of built plans. The key holds every input of the plan, so a hit is safe.

    Each entry is [plan, tick]: a hit finds it with one dict lookup (one hash of the key) and
    stamps it with the next tick; an insertion past maxsize evicts the entries with the oldest
    ticks (the least recently used), a scan that only a miss pays, next to a plan's build. (An
    OrderedDict's move_to_end hashes and compares the key a second time per hit: ~0.5 us.)"""

    def __init__(self, maxsize: int = 512):
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._plans: dict = {}
        self._tick = itertools.count()

    def lookup(self, key):
        """The plan for key, None on a miss; a refusal raises again."""
        entry = self._plans.get(key)
        if entry is None:
            return None
        self.hits += 1
        entry[1] = next(self._tick)
        plan = entry[0]
        if plan.__class__ is _Refusal:
            raise FloeError(plan.message)
        return plan

    def add(self, key, build, *args):
        """Builds the plan for key with build(*args) (after a lookup missed) and keeps it."""
        self.misses += 1
        try:
            plan = build(*args)
        except FloeError as e:
            plan = _Refusal(e)
        self._plans[key] = [plan, next(self._tick)]
        excess = len(self._plans) - self.maxsize
        if excess > 0:
            # list(): a snapshot, atomic under the GIL, that another thread's insertion cannot
            # change while it is scanned. One over (the usual case): one pass, no sort.
            entries = list(self._plans.items())
            if excess == 1:
                oldest = [min(entries, key=lambda kv: kv[1][1])]
            else:
                oldest = sorted(entries, key=lambda kv: kv[1][1])[:excess]
            for old, _ in oldest:
                gone = self._plans.pop(old, None)
                if gone is not None:
                    gone[0] = None  # for floe._floe_torch, whose entries point at Python's
        if plan.__class__ is _Refusal:
            raise FloeError(plan.message)
        return plan

    def clear(self):
        for entry in self._plans.values():
            entry[0] = None
        self._plans.clear()
        self.hits = self.misses = 0


_cache = _PlanCache()
# The per-call paths (_plain_forward, _plain_backward) do a hit's bookkeeping themselves, on
# the LRU's own dict and clock (clear() empties the dict in place).
_plans_get = _cache._plans.get
_tick = _cache._tick


class PlanCacheInfo(NamedTuple):
    hits: int
    misses: int
    size: int
    maxsize: int


def plan_cache_info() -> PlanCacheInfo:
    """The LRU's counts; hits include those of floe._floe_torch, which serves hits from the
    same entries."""
    hits = _cache.hits + (_c.hits() if _c is not None else 0)
    return PlanCacheInfo(hits, _cache.misses, len(_cache._plans), _cache.maxsize)


def clear_plan_cache(maxsize: Optional[int] = None) -> None:
    _cache.clear()
    if maxsize is not None:
        _cache.maxsize = maxsize
    if _c is not None:
        _c.clear(_cache.maxsize)


def _load_torch_ext():
    """(floe._floe_torch or None, why): the C++ per-call path where it was built against this
    torch (its C++ ABI is that version's); FLOE_TORCH_EXT=0 turns it off."""
    if os.environ.get("FLOE_TORCH_EXT", "1").lower() in ("0", "off", "no", "false"):
        return None, "off (FLOE_TORCH_EXT=0)"
    try:
        from . import _floe_torch
    except ImportError as e:
        return None, f"not loaded ({e}); the Python path runs"
    if _floe_torch.TORCH_VERSION != torch.__version__:
        return None, (f"built for torch {_floe_torch.TORCH_VERSION}, this is {torch.__version__}: "
                      "the Python path runs (reinstall floe to rebuild it)")
    _floe_torch.configure(_floe._C_API, _tick, _cache.maxsize)
    return _floe_torch, f"on (torch {torch.__version__})"


# floe._floe_torch: the plan-cache hits of the eager calls with no bias, sink or lengths, in
# C++ (host time per call); None: the Python path alone. torch_ext says which and why.
_c, torch_ext = _load_torch_ext()
_c_fwd = None if _c is None else _c.fwd
_c_bwd = None if _c is None else _c.bwd


# ---------------------------------------------------------------------------------------------
# Describing tensors to floe (only on a cache miss)


def _code(t: Tensor, name: str) -> int:
    code = _DTYPE_CODE.get(t.dtype)
    if code is None:
        raise FloeError(
            f"invalid problem: tensor '{name}' dtype: is {t.dtype}, floe takes float16, "
            "bfloat16 (q, k, v, bias), float32 (sink) and int32 (seq_len_q, seq_len_kv)"
        )
    return code


def _spec(t: Optional[Tensor], name: str):
    if t is None:
        return None
    return (_code(t, name), tuple(t.stride()))


def _check_dims(t: Optional[Tensor], name: str, want: Tuple[int, ...], rule: str):
    if t is not None and tuple(t.shape) != want:
        raise FloeError(
            f"invalid problem: tensor '{name}' dims: is {list(t.shape)}, "
            f"must be {list(want)} {rule}"
        )


def _shape7(q: Tensor, k: Tensor, v: Tensor):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise FloeError(
                f"invalid problem: tensor '{name}' rank: is {t.dim()}, must be 4 ([B, H, S, D])"
            )
    b, h_q, s_q, d_qk = q.shape
    h_kv, s_kv = k.shape[1], k.shape[2]
    d_v = v.shape[3]
    _check_dims(k, "k", (b, h_kv, s_kv, d_qk), "([B, Hkv, Skv, Dqk], B and Dqk from q)")
    _check_dims(v, "v", (b, h_kv, s_kv, d_v), "([B, Hkv, Skv, Dv], B, Hkv and Skv from k)")
    return (b, h_q, h_kv, s_q, s_kv, d_qk, d_v)


def _check_operands(shape, bias, sink, seq_len_q, seq_len_kv):
    b, h_q, _, s_q, s_kv, _, _ = shape
    if bias is not None:
        if bias.dim() != 4 or bias.shape[0] not in (1, b) or bias.shape[1] not in (1, h_q) or tuple(
            bias.shape[2:]
        ) != (s_q, s_kv):
            raise FloeError(
                f"invalid problem: tensor 'bias' dims: is {list(bias.shape)}, must be "
                f"[1 or {b}, 1 or {h_q}, {s_q}, {s_kv}] ([1 or B, 1 or Hq, Sq, Skv])"
            )
    _check_dims(sink, "sink", (h_q,), "([Hq])")
    _check_dims(seq_len_q, "seq_len_q", (b,), "([B])")
    _check_dims(seq_len_kv, "seq_len_kv", (b,), "([B])")


def _device_code(arch: int, q: Tensor, *others: Optional[Tensor]) -> int:
    for name, t in zip(("k", "v", "bias", "sink", "seq_len_q", "seq_len_kv"), others):
        if t is not None and t.device != q.device:
            raise FloeError(
                f"invalid argument: tensor '{name}' device: is {t.device}, must be q's ({q.device})"
            )
    if q.device.type == "cuda":
        return q.device.index
    if q.device.type == "cpu" or (arch > 0 and q.device.type == "meta"):
        return -1
    raise FloeError(f"invalid argument: tensor 'q' device: is {q.device}, must be cuda or cpu")


def _build_forward(q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv, scale, softcap, align,
                   left, right, deterministic, engine, arch=0):
    shape = _shape7(q, k, v)
    _check_operands(shape, bias, sink, seq_len_q, seq_len_kv)
    device = _device_code(arch, q, k, v, bias, sink, seq_len_q, seq_len_kv)
    tensors = [None] * _N_TENSORS
    tensors[_Q], tensors[_K], tensors[_V] = _spec(q, "q"), _spec(k, "k"), _spec(v, "v")
    tensors[_O], tensors[_STATS] = _spec(o, "o"), _spec(lse, "stats")
    tensors[_BIAS], tensors[_SINK] = _spec(bias, "bias"), _spec(sink, "sink")
    tensors[_SQL], tensors[_SKVL] = _spec(seq_len_q, "seq_len_q"), _spec(seq_len_kv, "seq_len_kv")
    return _floe.build(
        False, tensors[_Q][0], shape, tensors,
        None if bias is None else (bias.shape[0], bias.shape[1]), False, sink is not None,
        seq_len_q is not None, seq_len_kv is not None, lse is not None, scale, softcap, align,
        left, right, deterministic, device, engine, arch)


def _build_backward(q, k, v, o, d_o, lse, bias, sink, seq_len_q, seq_len_kv, dq, dk, dv, dbias,
                    dsink, scale, softcap, align, left, right, deterministic, engine, arch=0):
    shape = _shape7(q, k, v)
    _check_operands(shape, bias, sink, seq_len_q, seq_len_kv)
    b, h_q, _, s_q, _, _, d_v = shape
    _check_dims(o, "o", (b, h_q, s_q, d_v), "([B, Hq, Sq, Dv])")
    _check_dims(d_o, "do", (b, h_q, s_q, d_v), "([B, Hq, Sq, Dv])")
    _check_dims(lse, "stats", (b, h_q, s_q), "([B, Hq, Sq])")
    device = _device_code(arch, q, k, v, bias, sink, seq_len_q, seq_len_kv)
    tensors = [None] * _N_TENSORS
    for i, (t, n) in enumerate(((q, "q"), (k, "k"), (v, "v"), (o, "o"), (lse, "stats"),
                                (bias, "bias"), (sink, "sink"), (seq_len_q, "seq_len_q"),
                                (seq_len_kv, "seq_len_kv"), (d_o, "do"), (dq, "dq"), (dk, "dk"),
                                (dv, "dv"), (dbias, "dbias"), (dsink, "dsink"))):
        tensors[i] = _spec(t, n)
    return _floe.build(
        True, tensors[_Q][0], shape, tensors,
        None if bias is None else (bias.shape[0], bias.shape[1]), dbias is not None,
        sink is not None, seq_len_q is not None, seq_len_kv is not None, True, scale, softcap,
        align, left, right, deterministic, device, engine, arch)


# ---------------------------------------------------------------------------------------------
# Execution


def _run(plan, ptrs, q: Tensor):
    """Executes plan with the workspace from torch's allocator, on the current stream of q's
    device. ptrs: the addresses in TensorId order, as many as the problem's kind has (the ones
    left out are 0)."""
    n = plan.workspace_bytes
    if q.is_cuda:
        index = q.get_device()
        ws = _like(index, torch.uint8).new_empty(n) if n else None
        if index != _current_device():
            with torch.cuda.device(index):
                stream = torch.cuda.current_stream(index).cuda_stream
                plan.run(0 if ws is None else ws.data_ptr(), n, stream, *ptrs)
            return
        plan.run(0 if ws is None else ws.data_ptr(), n, _current_stream(index), *ptrs)
    else:
        # The CPU allocator aligns to 64 bytes; floe wants 256.
        ws = _like(-1, torch.uint8).new_empty(n + 256) if n else None
        plan.run(0 if ws is None else (ws.data_ptr() + 255) & ~255, n, 0, *ptrs)


def _current_stream(index: int) -> int:
    return torch.cuda.current_stream(index).cuda_stream


# A CUDA tensor exists when these run, so CUDA is initialised: the raw calls are safe.
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


if hasattr(torch._C, "_cuda_getCurrentRawStream"):

    def _current_stream(index: int) -> int:  # noqa: F811  (the cheaper call where torch has it)
        return torch._C._cuda_getCurrentRawStream(index)


def _new_o(q: Tensor, v: Tensor) -> Tensor:
    # [B, Hq, Sq, Dv] laid out as [B, Sq, Hq, Dv], as FlashAttention returns it: the usual
    # o.transpose(1, 2).reshape(B, S, H * D) after attention is then a view. (Tensor.new_*
    # take q's dtype and device without parsing them again: host time per call.)
    b, h_q, s_q, _ = q.shape
    d_v = v.shape[3]
    return q.new_empty_strided((b, h_q, s_q, d_v), (s_q * h_q * d_v, d_v, h_q * d_v, 1))


# One tiny tensor per (device, dtype) that the per-call allocations are made from with
# Tensor.new_empty*, which then parses no dtype argument (a workspace: 2.2 -> 1.8 us on the
# H200's host, 2.4 -> 0.8 us on the CPU here). Real tensors only: a fake or meta q must not be
# kept. index: the CUDA ordinal, -1 the CPU (made here, not from q: a tensor of another device
# type must not become the template of a CUDA ordinal or of the CPU).
_templates = {}


def _like(index: int, dtype) -> Tensor:
    t = _templates.get((index, dtype))
    if t is None:
        device = torch.device("cpu") if index < 0 else torch.device("cuda", index)
        t = _templates[(index, dtype)] = torch.empty((1,), dtype=dtype, device=device)
    return t


def _new_lse(q: Tensor) -> Tensor:
    b, h_q, s_q, _ = q.shape
    return q.new_empty_strided((b, h_q, s_q), (h_q * s_q, s_q, 1), dtype=torch.float32)


def _meta(t: Optional[Tensor]):
    return None if t is None else (t.dtype, t.shape, t.stride(), t.device)


def _extras(bias, sink, seq_len_q, seq_len_kv):
    if bias is None and sink is None and seq_len_q is None and seq_len_kv is None:
        return None
    return (_meta(bias), _meta(sink), _meta(seq_len_q), _meta(seq_len_kv))


def _forward_key(q, k, v, bias, sink, seq_len_q, seq_len_kv, options, o, stats=True):
    # o's strides only where the caller gives o: floe's own o and lse follow from q and v.
    # Devices as torch.device (type and index; get_device() is -1 for the CPU and for meta, and
    # the same ordinal for CUDA and other device types): a plan of one never serves another.
    # options: (scale, softcap, align, left, right, deterministic, engine), one tuple (the
    # eager path passes its own on, and _plain_forward builds this same key).
    return (q.dtype, k.dtype, v.dtype, q.shape, k.shape, v.shape, q.stride(), k.stride(),
            v.stride(), None if o is None else o.stride(), q.device, k.device, v.device,
            _extras(bias, sink, seq_len_q, seq_len_kv), options, stats)


def _forward_run(key, q, k, v, bias, sink, seq_len_q, seq_len_kv, options, o, stats=True):
    """(o, lse); with stats=False the plan writes no LSE and lse is None (one allocation
    fewer per call for a forward with no gradient that does not return the LSE: 15.6 -> 12.6 us
    on the H200's host)."""
    plan = _cache.lookup(key)
    if o is None:
        o = _new_o(q, v)
    if stats:
        b, h_q, s_q, _ = q.shape
        lse = _like(q.get_device() if q.is_cuda else -1, torch.float32).new_empty_strided(
            (b, h_q, s_q), (h_q * s_q, s_q, 1))
    else:
        lse = None
    if plan is None:
        plan = _cache.add(key, _build_forward, q, k, v, o, lse, bias, sink, seq_len_q,
                          seq_len_kv, *options)
    _run(plan, (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                0 if lse is None else lse.data_ptr(),
                0 if bias is None else bias.data_ptr(), 0 if sink is None else sink.data_ptr(),
                0 if seq_len_q is None else seq_len_q.data_ptr(),
                0 if seq_len_kv is None else seq_len_kv.data_ptr()), q)
    return o, lse


def _forward(q, k, v, bias, sink, seq_len_q, seq_len_kv, scale, softcap, align, left, right,
             deterministic, engine, o=None, stats=True):
    """The forward on real tensors: (o, lse), lse None with stats=False. o may be given (any
    layout)."""
    options = (scale, softcap, align, left, right, deterministic, engine)
    key = _forward_key(q, k, v, bias, sink, seq_len_q, seq_len_kv, options, o, stats)
    return _forward_run(key, q, k, v, bias, sink, seq_len_q, seq_len_kv, options, o, stats)


def _plain_forward(q, k, v, options, stats):
    """_forward for the eager calls with no bias, sink or lengths, in one function: (o, lse or
    None, the plan's key). The key is _forward_key's; a hit does the LRU's bookkeeping here;
    the launch passes five addresses. (Host time per call: every Python call, tuple and
    attribute read counts; see bench/python_host.py.)"""
    qs, vs = q.shape, v.shape
    key = (q.dtype, k.dtype, v.dtype, qs, k.shape, vs, q.stride(), k.stride(), v.stride(), None,
           q.device, k.device, v.device, None, options, stats)
    entry = _plans_get(key)
    if entry is not None and entry[0].__class__ is not _Refusal:
        _cache.hits += 1
        entry[1] = next(_tick)
        plan = entry[0]
    else:
        plan = _cache.lookup(key)  # a refusal raises here
    b, h_q, s_q, _ = qs
    d_v = vs[3]
    # o laid out as [B, Sq, Hq, Dv] (_new_o).
    o = q.new_empty_strided((b, h_q, s_q, d_v), (s_q * h_q * d_v, d_v, h_q * d_v, 1))
    cuda = q.is_cuda
    index = q.get_device() if cuda else -1
    if stats:
        lse = _like(index, torch.float32).new_empty_strided((b, h_q, s_q), (h_q * s_q, s_q, 1))
        lse_ptr = lse.data_ptr()
    else:
        lse, lse_ptr = None, 0
    if plan is None:
        plan = _cache.add(key, _build_forward, q, k, v, o, lse, None, None, None, None, *options)
    if _c is not None:  # the next call's hit is served in C++
        _c.remember_fwd(q, k, v, options, stats, _plans_get(key))
    n = plan.workspace_bytes
    if cuda and not n and index == _current_device():
        plan.run(0, 0, _current_stream(index), q.data_ptr(), k.data_ptr(), v.data_ptr(),
                 o.data_ptr(), lse_ptr)
    else:
        _run(plan, (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse_ptr), q)
    return o, lse, key


@torch.library.custom_op("floe::fwd", mutates_args=())
def _fwd(q: Tensor, k: Tensor, v: Tensor, bias: Optional[Tensor], sink: Optional[Tensor],
         seq_len_q: Optional[Tensor], seq_len_kv: Optional[Tensor], scale: Optional[float],
         softcap: Optional[float], align: int, left: Optional[int], right: Optional[int],
         deterministic: bool, engine: str) -> Tuple[Tensor, Tensor]:
    return _forward(q, k, v, bias, sink, seq_len_q, seq_len_kv, scale, softcap, align, left,
                    right, deterministic, engine)


@_fwd.register_fake
def _fwd_fake(q, k, v, bias, sink, seq_len_q, seq_len_kv, scale, softcap, align, left, right,
              deterministic, engine):
    return _new_o(q, v), _new_lse(q)


def _grads(q, k, v, bias, sink, has_dbias):
    # Gradients take their operand's layout where it is dense (empty_like), packed otherwise;
    # dbias and dsink are None where the plan has none.
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    dbias = bias.new_empty(bias.shape) if has_dbias else None
    dsink = None if sink is None else q.new_empty((q.shape[1],), dtype=torch.float32)
    return dq, dk, dv, dbias, dsink


def _dense_d_o(d_o):
    """d_o, made dense where its innermost stride is not 1: a broadcast output gradient
    (o.sum() gives every stride 0). The tensor-core engines need a unit innermost stride and
    decline it, so the generic engine ran it: slower, and rounding otherwise than the engine
    AOTAutograd's dense tangent gets under torch.compile (opcheck, H200: dQ a bf16 ulp apart
    between eager and compiled). Made dense, as AOTAutograd and PyTorch's flash backward do."""
    return d_o if d_o.dim() == 0 or d_o.stride(-1) == 1 else d_o.contiguous()


def _backward_run(key, d_o, q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv, has_dbias,
                  options, engine):
    """Runs the backward plan for key (built on a miss): (dq, dk, dv, dbias or None, dsink or
    None)."""
    plan = _cache.lookup(key)
    dq, dk, dv, dbias, dsink = _grads(q, k, v, bias, sink, has_dbias)
    if plan is None:
        plan = _cache.add(key, _build_backward, q, k, v, o, d_o, lse, bias, sink, seq_len_q,
                          seq_len_kv, dq, dk, dv, dbias, dsink, *options, engine)
    _run(plan, (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(),
                0 if bias is None else bias.data_ptr(), 0 if sink is None else sink.data_ptr(),
                0 if seq_len_q is None else seq_len_q.data_ptr(),
                0 if seq_len_kv is None else seq_len_kv.data_ptr(), d_o.data_ptr(),
                dq.data_ptr(), dk.data_ptr(), dv.data_ptr(),
                0 if dbias is None else dbias.data_ptr(), 0 if dsink is None else dsink.data_ptr()),
         q)
    return dq, dk, dv, dbias, dsink


def _backward_impl(d_o, q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv, scale, softcap,
                   align, left, right, deterministic, bias_grad, engine, absent_empty=True):
    """The backward on real tensors: (dq, dk, dv, dbias, dsink), the last two empty if absent
    (None with absent_empty=False: callers that are not the custom op save the allocations)."""
    has_dbias = bias is not None and bias_grad
    d_o = _dense_d_o(d_o)
    key = (q.dtype, k.dtype, v.dtype, q.shape, k.shape, v.shape, q.stride(), k.stride(),
           v.stride(), _meta(o), _meta(d_o), _meta(lse), q.device, k.device,
           v.device, _extras(bias, sink, seq_len_q, seq_len_kv), scale, softcap, align,
           left, right, deterministic, has_dbias, engine)
    dq, dk, dv, dbias, dsink = _backward_run(
        key, d_o, q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv, has_dbias,
        (scale, softcap, align, left, right, deterministic), engine)
    if absent_empty:
        if dbias is None:
            dbias = q.new_empty((0,))
        if dsink is None:
            dsink = q.new_empty((0,), dtype=torch.float32)
    return dq, dk, dv, dbias, dsink


@torch.library.custom_op("floe::bwd", mutates_args=())
def _bwd(d_o: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
         bias: Optional[Tensor], sink: Optional[Tensor], seq_len_q: Optional[Tensor],
         seq_len_kv: Optional[Tensor], scale: Optional[float], softcap: Optional[float],
         align: int, left: Optional[int], right: Optional[int], deterministic: bool,
         bias_grad: bool, engine: str) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    return _backward_impl(d_o, q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv, scale,
                          softcap, align, left, right, deterministic, bias_grad, engine)


def _bwd_outputs(q, k, v, bias, sink, bias_grad, device=None):
    # Gradients take their operand's layout where it is dense (empty_like), packed otherwise.
    device = q.device if device is None else device
    dq = torch.empty_like(q, device=device)
    dk, dv = torch.empty_like(k, device=device), torch.empty_like(v, device=device)
    if bias is not None and bias_grad:
        dbias = torch.empty(bias.shape, dtype=bias.dtype, device=device)
    else:
        dbias = torch.empty((0,), dtype=q.dtype, device=device)
    if sink is not None:
        dsink = torch.empty((q.shape[1],), dtype=torch.float32, device=device)
    else:
        dsink = torch.empty((0,), dtype=torch.float32, device=device)
    return dq, dk, dv, dbias, dsink


@_bwd.register_fake
def _bwd_fake(d_o, q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv, scale, softcap, align,
              left, right, deterministic, bias_grad, engine):
    return _bwd_outputs(q, k, v, bias, sink, bias_grad)


def _setup_context(ctx, inputs, output):
    (q, k, v, bias, sink, seq_len_q, seq_len_kv, scale, softcap, align, left, right,
     deterministic, engine) = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv)
    ctx.options = (scale, softcap, align, left, right, deterministic)
    ctx.engine = engine
    ctx.mark_non_differentiable(lse)


def _backward(ctx, d_o, d_lse):
    q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv = ctx.saved_tensors
    bias_grad = bias is not None and ctx.needs_input_grad[3]
    dq, dk, dv, dbias, dsink = torch.ops.floe.bwd(
        d_o, q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv, *ctx.options, bias_grad,
        ctx.engine)
    return (dq, dk, dv, dbias if bias_grad else None,
            dsink if sink is not None and ctx.needs_input_grad[4] else None,
            None, None, None, None, None, None, None, None, None)


torch.library.register_autograd("floe::fwd", _backward, setup_context=_setup_context)

# ---------------------------------------------------------------------------------------------
# The public functions


def _mask(causal, window, align):
    """(align code, left, right) from the user's causal/window/align."""
    if isinstance(causal, str):
        align, causal = causal, True
    a = _ALIGN.get(align)
    if a is None:
        raise ValueError(f"floe: align must be 'top_left' or 'bottom_right', not {align!r}")
    left = right = None
    if window is not None:
        try:
            left, right = window
        except (TypeError, ValueError):
            raise ValueError(
                "floe: window must be (left, right), each an int or None (-1: unbounded)"
            ) from None
        left = None if left is None or left < 0 else int(left)
        right = None if right is None or right < 0 else int(right)
    if causal:
        right = 0 if right is None else min(right, 0)
    return a, left, right


def _options(causal, window, align, scale, softcap, deterministic, engine):
    """The plan's options from the user's: (scale, softcap, align code, left, right,
    deterministic, engine). The common calls (no window, scale or softcap) are remembered."""
    simple = window is None and scale is None and softcap is None
    if simple:
        options = _SIMPLE_OPTIONS.get((causal, align, deterministic, engine))
        if options is not None:
            return options
    a, left, right = _mask(causal, window, align)
    options = (None if scale is None else float(scale), None if softcap is None else float(softcap),
               a, left, right, bool(deterministic), engine)
    if simple and type(engine) is str:
        if len(_SIMPLE_OPTIONS) > 64:  # bounded: engine names are few, but any str is taken
            _SIMPLE_OPTIONS.clear()
        _SIMPLE_OPTIONS[(causal, align, deterministic, engine)] = options
    return options


_SIMPLE_OPTIONS = {}


def _prepare(q, k, v, bias, enable_gqa):
    """Checks the ranks and GQA; returns bias broadcast to rank 4 as SDPA's attn_mask."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        _shape7(q, k, v)  # raises, naming the tensor
    if not enable_gqa and q.shape[1] != k.shape[1]:
        raise FloeError(
            f"invalid problem: tensor 'k' dims[1]: is {k.shape[1]}, must be q's ({q.shape[1]}) "
            "with enable_gqa=False"
        )
    if bias is not None:
        # Lower-rank biases broadcast like SDPA's attn_mask; size-1 query or key dims are
        # expanded (a view with stride 0; autograd sums their gradient).
        if bias.dim() < 4:
            bias = bias[(None,) * (4 - bias.dim())]
        if bias.dim() == 4 and (bias.shape[2] != q.shape[2] or bias.shape[3] != k.shape[2]):
            bias = bias.expand(bias.shape[0], bias.shape[1], q.shape[2], k.shape[2])
    return bias


def _eager_backward(fwd_key, d_o, q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv, options,
                    bias_grad):
    """_backward_impl for the eager path, where o and lse are the forward's own: the plan is
    keyed by the forward's key and d_o's strides, and absent gradients are None, not empty
    tensors. (autograd hands a backward the gradient of its output in that output's shape,
    dtype and device: it casts or refuses any other. Strides are all that the key lacks.)"""
    d_o = _dense_d_o(d_o)
    key = (fwd_key, d_o.stride(), bias_grad)
    return _backward_run(key, d_o, q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv,
                         bias_grad, options[:6], options[6])


def _plain_key(q, k, v, options, stats):
    """_plain_forward's key (the same tuple, which that function builds inline)."""
    return (q.dtype, k.dtype, v.dtype, q.shape, k.shape, v.shape, q.stride(), k.stride(),
            v.stride(), None, q.device, k.device, v.device, None, options, stats)


def _plain_backward(fwd_key, d_o, q, k, v, o, lse, options):
    """_eager_backward with no bias, sink or lengths, in one function: (dq, dk, dv). fwd_key:
    the forward's key, None where the forward ran in C++ (floe._floe_torch), which serves the
    backward's hits too."""
    if _c_bwd is not None:
        grads = _c_bwd(d_o, q, k, v, o, lse, options)
        if grads is not None:
            return grads
    if d_o.stride(-1) != 1:
        d_o = d_o.contiguous()  # _dense_d_o
    if fwd_key is None:
        fwd_key = _plain_key(q, k, v, options, True)
    key = (fwd_key, d_o.stride(), False)
    entry = _plans_get(key)
    if entry is not None and entry[0].__class__ is not _Refusal:
        _cache.hits += 1
        entry[1] = next(_tick)
        plan = entry[0]
    else:
        plan = _cache.lookup(key)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if plan is None:
        plan = _cache.add(key, _build_backward, q, k, v, o, d_o, lse, None, None, None, None,
                          dq, dk, dv, None, None, *options)
    if _c is not None:
        _c.remember_bwd(d_o, q, k, v, o, lse, options, _plans_get(key))
    _run(plan, (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), 0, 0, 0,
                0, d_o.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr()), q)
    return dq, dk, dv


def _set_autograd_node(enabled: bool) -> bool:
    """Turns floe._floe_torch's C++ autograd node on or off (FLOE_TORCH_NODE=0 starts with it
    off): on, a plain eager call with gradients whose forward plan is a hit records a C++ node
    (forward and backward with no Python frame on a hit); off, _EagerAttention records it.
    Returns whether the node is on (False where the C++ layer is absent)."""
    if _c is None:
        return False
    _c.autograd_node(bool(enabled), _plain_backward)
    return _c.autograd_node_enabled()


if _c is not None:
    _node_on = os.environ.get("FLOE_TORCH_NODE", "1").lower() not in ("0", "off", "no", "false")
    _set_autograd_node(_node_on)
    torch_ext += ", C++ autograd node " + ("on" if _node_on else "off (FLOE_TORCH_NODE=0)")


class _EagerAttention(torch.autograd.Function):
    """The eager path with gradients: the same forward and backward as the custom ops, without
    the dispatcher's round trips through Python (host time per call). The options travel as one
    tuple (fewer arguments for autograd to sort), only the tensors present are saved, and the
    LSE is an output only where the caller asked for it (saved as an intermediate otherwise: one
    output fewer for autograd to wrap, and no d_lse)."""

    @staticmethod
    def forward(ctx, q, k, v, bias, sink, seq_len_q, seq_len_kv, options, return_lse):
        # options: (scale, softcap, align, left, right, deterministic, engine)
        if bias is None and sink is None and seq_len_q is None and seq_len_kv is None:
            # autograd has turned gradients off here: the C++ path serves a hit.
            out = None if _c_fwd is None else _c_fwd(q, k, v, options, True, True)
            if out is None:
                o, lse, key = _plain_forward(q, k, v, options, True)
            else:
                (o, lse), key = out, None
            ctx.save_for_backward(q, k, v, o, lse)
        else:
            key = _forward_key(q, k, v, bias, sink, seq_len_q, seq_len_kv, options, None)
            o, lse = _forward_run(key, q, k, v, bias, sink, seq_len_q, seq_len_kv, options, None)
            ctx.save_for_backward(q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv)
        ctx.key = key
        ctx.options = options
        if not return_lse:
            return o
        ctx.mark_non_differentiable(lse)
        # The backward never reads d_lse: autograd need not make (and, on a GPU, fill) a zero
        # tensor for it on every call.
        ctx.set_materialize_grads(False)
        return o, lse

    @staticmethod
    def backward(ctx, d_o, d_lse=None):
        saved = ctx.saved_tensors
        if d_o is None:  # not materialized with return_lse (see forward): o's gradient is zero
            d_o = torch.zeros_like(saved[3])
        if len(saved) == 5:
            q, k, v, o, lse = saved
            dq, dk, dv = _plain_backward(ctx.key, d_o, q, k, v, o, lse, ctx.options)
            return dq, dk, dv, None, None, None, None, None, None
        q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv = saved
        needs = ctx.needs_input_grad
        bias_grad = bias is not None and needs[3]
        dq, dk, dv, dbias, dsink = _eager_backward(
            ctx.key, d_o, q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv, ctx.options,
            bias_grad)
        return (dq, dk, dv, dbias, dsink if needs[4] else None, None, None, None, None)


def _eager(q: Tensor) -> bool:
    """True where the custom op's dispatch can be skipped: plain tensors, no tracing, no mode
    (torch.compile, export, fake and meta tensors and dispatch modes all see floe::fwd).
    torch.compiler.is_compiling first: under dynamo nothing after it is traced."""
    return (not _is_compiling() and type(q) is Tensor and not q.is_meta
            and _dispatch_stack_len() == 0)


_dispatch_stack_len = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 1)
_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled


def attention(q: Tensor, k: Tensor, v: Tensor, *, causal=False, window=None,
              bias: Optional[Tensor] = None, sink: Optional[Tensor] = None,
              softcap: Optional[float] = None, scale: Optional[float] = None,
              seq_len_q: Optional[Tensor] = None, seq_len_kv: Optional[Tensor] = None,
              enable_gqa: bool = True, return_lse: bool = False, deterministic: bool = False,
              engine: str = "auto", align: str = "top_left"):
    """Scaled-dot-product attention on [B, H, S, D] tensors of any strides (as torch's SDPA).

    causal: True (top-left aligned, as SDPA's is_causal), or 'top_left' / 'bottom_right'.
    window: (left, right) keys visible left and right of the diagonal (None or -1: unbounded);
        with causal, right is at most 0. align: the diagonal's alignment for window.
    bias: additive, broadcast to [1 or B, 1 or Hq, Sq, Skv] (any rank up to 4).
    sink: per-head logit (float32 [Hq]) joining the softmax denominator.
    softcap: s = softcap * tanh(s / softcap). scale: default 1/sqrt(Dqk).
    seq_len_q, seq_len_kv: int32 [B] actual lengths (padding), read on the device.
    return_lse: also return the float32 [B, Hq, Sq] log-sum-exp (natural log; not
        differentiable). deterministic: bitwise reproducible backward.
    engine: 'auto' or one of floe.engine_names(). CPU tensors run on the reference engine.

    Gradients flow to q, k, v, bias and sink. floe's refusals raise floe.FloeError.
    """
    # _options, its remembered common case inline (one Python call fewer per call).
    options = None
    if window is None and scale is None and softcap is None:
        options = _SIMPLE_OPTIONS.get((causal, align, deterministic, engine))
    if options is None:
        options = _options(causal, window, align, scale, softcap, deterministic, engine)
    return_lse = bool(return_lse)
    # The common eager call (no bias, sink or lengths; plain tensors, no tracing, no mode) in
    # as few Python steps as possible: the same plans and launches as the custom op's
    # (tests/python: test_fast_path_matches_dispatcher).
    if (bias is None and sink is None and seq_len_q is None and seq_len_kv is None
            and not _is_compiling()):
        # A plan-cache hit in C++ where floe._floe_torch is loaded, with gradients too where
        # its autograd node is on (it declines, None, what the lines below must take: modes,
        # subclasses, a miss, gradients with the node off).
        if _c_fwd is not None:
            out = _c_fwd(q, k, v, options, return_lse, enable_gqa)
            if out is not None:
                return out
    if (bias is None and sink is None and seq_len_q is None and seq_len_kv is None
            and not _is_compiling() and type(q) is Tensor and not q.is_meta
            and _dispatch_stack_len() == 0 and q.dim() == 4 and k.dim() == 4 and v.dim() == 4
            and (enable_gqa or q.shape[1] == k.shape[1])):
        if _grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
            return _EagerAttention.apply(q, k, v, None, None, None, None, options, return_lse)
        o, lse, _ = _plain_forward(q, k, v, options, return_lse)
        return (o, lse) if return_lse else o
    bias = _prepare(q, k, v, bias, enable_gqa)
    if _eager(q):
        if _grad_enabled() and (
                q.requires_grad or k.requires_grad or v.requires_grad
                or (bias is not None and bias.requires_grad)
                or (sink is not None and sink.requires_grad)):
            return _EagerAttention.apply(q, k, v, bias, sink, seq_len_q, seq_len_kv, options,
                                         return_lse)
        o, lse = _forward(q, k, v, bias, sink, seq_len_q, seq_len_kv, *options, None, return_lse)
    else:
        o, lse = torch.ops.floe.fwd(q, k, v, bias, sink, seq_len_q, seq_len_kv, *options)
    return (o, lse) if return_lse else o


def _make_front():
    """(floe.attention, why): floe._floe_torch's C++ front of attention (the eager plan-cache
    hits with no Python frame; every other call goes to attention as it came) where the C++
    layer is loaded and torch.compile can be told to trace attention in its place
    (torch._dynamo.substitute_in_graph, torch >= 2.5); attention itself otherwise.
    FLOE_TORCH_FRONT=0 keeps the Python function."""
    if _c is None:
        return attention, "off (no C++ layer)"
    if os.environ.get("FLOE_TORCH_FRONT", "1").lower() in ("0", "off", "no", "false"):
        return attention, "off (FLOE_TORCH_FRONT=0)"
    if not hasattr(torch.compiler, "_is_compiling_flag"):
        return attention, "off (torch.compiler has no _is_compiling_flag)"
    try:
        from torch._dynamo import substitute_in_graph
    except Exception as e:  # noqa: BLE001  (absent, or dynamo unsupported on this Python)
        return attention, f"off (no torch._dynamo.substitute_in_graph: {type(e).__name__})"
    import sys

    front = _c.make_front(attention, torch.compiler, sys.modules[__name__],
                          _options(False, None, "top_left", None, None, False, "auto"),
                          _options(True, None, "top_left", None, None, False, "auto"))
    substitute_in_graph(front, skip_signature_check=True)(attention)
    return front, "on"


# floe.attention (floe/__init__.py reads it from here).
_front, front_state = _make_front()
if _c is not None:
    torch_ext += f", C++ front {front_state}"


class Explanation(NamedTuple):
    """The engine a plan would run (None: none serves it) and every engine's verdict."""

    engine: Optional[str]
    verdicts: List[Tuple[str, bool, str]]  # (engine, accepted, reason it declined)
    text: str

    def __str__(self):
        return self.text


def explain(q: Tensor, k: Tensor, v: Tensor, *, backward: bool = False, causal=False,
            window=None, bias=None, sink=None, softcap=None, scale=None, seq_len_q=None,
            seq_len_kv=None, enable_gqa=True, deterministic=False, engine="auto",
            align="top_left", arch: int = 0) -> Explanation:
    """What floe would do with this call of attention() (or its backward): the chosen engine
    and each engine's verdict. Invalid problems raise FloeError (tensor, field, rule).
    arch (80, 86, 89, 90): plan for that GPU architecture instead of the tensors' device, with
    no GPU needed (tensors may be on the CPU or the meta device)."""
    scale, softcap, a, left, right, _, _ = _options(causal, window, align, scale, softcap,
                                                    deterministic, engine)
    bias = _prepare(q, k, v, bias, enable_gqa)
    # Only the strides of the outputs matter here: they are made on the meta device.
    o = _new_o(q.to("meta"), v.to("meta"))
    lse = _new_lse(q.to("meta"))
    if backward:
        dq, dk, dv, dbias, dsink = _bwd_outputs(q, k, v, bias, sink, bias is not None, "meta")
    try:
        if backward:
            plan = _build_backward(
                q, k, v, o, o, lse, bias, sink, seq_len_q, seq_len_kv, dq, dk, dv,
                None if bias is None else dbias, None if sink is None else dsink, scale,
                softcap, a, left, right, bool(deterministic), engine, arch)
        else:
            plan = _build_forward(q, k, v, o, lse, bias, sink, seq_len_q, seq_len_kv, scale,
                                  softcap, a, left, right, bool(deterministic), engine, arch)
    except FloeError as e:
        text = str(e)
        if not text.startswith("not supported: no engine serves"):
            raise
        verdicts = []
        for line in text.splitlines()[1:]:
            name, _, rest = line.strip().partition(": ")
            if name:
                verdicts.append((name, rest == "accepted", rest.partition("declined: ")[2]))
        return Explanation(None, verdicts, text)
    return Explanation(plan.engine, plan.verdicts(), plan.explain())

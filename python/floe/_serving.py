"""Ragged (THD) and paged-KV attention for serving: ``floe::varlen_fwd``, ``floe::varlen_bwd``
and ``floe::paged_fwd`` as torch custom ops over floe's plans (DESIGN §2.1, §2.2).

The contract of floe.attention carries over: any strides (nothing is copied), plans cached per
signature in the same LRU, the workspace from torch's allocator on the current stream, floe's
refusals raised as FloeError. The envelope (batch count, max_seqlen_q, max_seqlen_kv, the packed
totals, the table width) comes from host values and tensor shapes only: offsets and lengths stay
on the device and are never read back, so one plan (and one captured graph) serves every length
vector inside the envelope.
"""

import operator
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _floe
from ._floe import FloeError
from ._ops import (_BLOCK_TABLE, _DK, _DO, _DQ, _DSINK, _DV, _K, _N_TENSORS, _O, _OFFKV, _OFFQ,
                   _Q, _SINK, _SKVL, _SQL, _STATS, _V, _cache, _code, _dense_d_o, _eager, _mask,
                   _meta, _run)

# floe::DType codes of the offsets (include/floe/tensor.h: i32 3, i64 4).
_OFFSETS_CODE = {torch.int32: 3, torch.int64: 4}
_NAMES = _floe.TENSOR_NAMES


def _envelope(value, name: str) -> int:
    # A device tensor here would mean a device-to-host read per call and a plan per length
    # vector: exactly what the envelope exists to avoid.
    if not isinstance(value, (Tensor, bool)):
        try:
            return operator.index(value)  # Python and numpy integers
        except TypeError:
            pass
    raise TypeError(f"floe: {name} must be a host int (the plan's envelope), not "
                    f"{type(value).__name__}")


def _rank(t: Tensor, name: str, rank: int, layout: str):
    if t.dim() != rank:
        raise FloeError(
            f"invalid problem: tensor '{name}' rank: is {t.dim()}, must be {rank} ({layout})")


def _dims(t: Optional[Tensor], name: str, want, rule: str):
    if t is not None and tuple(t.shape) != tuple(want):
        raise FloeError(f"invalid problem: tensor '{name}' dims: is {list(t.shape)}, "
                        f"must be {list(want)} {rule}")


def _offsets(t: Tensor, name: str) -> int:
    """The batch count B of offsets [B + 1], after checking rank and dtype."""
    _rank(t, name, 1, "[B + 1]")
    if t.dtype not in _OFFSETS_CODE:
        raise FloeError(
            f"invalid problem: tensor '{name}' dtype: is {t.dtype}, must be int32 or int64")
    if t.shape[0] < 2:
        raise FloeError(f"invalid problem: tensor '{name}' dims: is {list(t.shape)}, must be "
                        "[B + 1] with B >= 1")
    return t.shape[0] - 1


def _device(ts) -> int:
    """floe's device code for the tensors (all on q's device), ts a list indexed by TensorId."""
    q = ts[_Q]
    for i, t in enumerate(ts):
        if t is not None and t.device != q.device:
            raise FloeError(f"invalid argument: tensor '{_NAMES[i]}' device: is {t.device}, "
                            f"must be q's ({q.device})")
    if q.device.type == "cuda":
        return q.device.index
    if q.device.type == "cpu":
        return -1
    raise FloeError(f"invalid argument: tensor 'q' device: is {q.device}, must be cuda or cpu")


def _build(backward, shape, ts, strides, options, engine, ragged_q, ragged_kv, paged_kv):
    """Builds the plan; ts: tensors by TensorId, strides: {id: strides in floe's logical order}
    where a tensor's own order is not floe's."""
    device = _device(ts)
    specs = [None] * _N_TENSORS
    for i, t in enumerate(ts):
        if t is None:
            continue
        if i in (_OFFQ, _OFFKV):
            code = _OFFSETS_CODE[t.dtype]
        else:
            code = _code(t, _NAMES[i])
        specs[i] = (code, strides.get(i, tuple(t.stride())))
    scale, softcap, align, left, right = options
    return _floe.build(
        backward, specs[_Q][0], shape, specs, None, False, ts[_SINK] is not None,
        ts[_SQL] is not None, ts[_SKVL] is not None, True, scale, softcap, align, left, right,
        False, device, engine, 0, ragged_q=ragged_q, ragged_kv=ragged_kv, paged_kv=paged_kv)


def _execute(key, ts, q, build_args):
    plan = _cache.lookup(key)
    if plan is None:
        plan = _cache.add(key, _build, *build_args)
    _run(plan, tuple(0 if t is None else t.data_ptr() for t in ts), q)


# ---------------------------------------------------------------------------------------------
# Ragged query and key sides (varlen)


def _varlen_shape(q, k, v, offsets_q, offsets_kv, sink, seq_len_q, seq_len_kv, max_q, max_kv):
    _rank(q, "q", 3, "[Tq, Hq, Dqk]")
    _rank(k, "k", 3, "[Tkv, Hkv, Dqk]")
    _rank(v, "v", 3, "[Tkv, Hkv, Dv]")
    b = _offsets(offsets_q, "offsets_q")
    _offsets(offsets_kv, "offsets_kv")
    _dims(offsets_kv, "offsets_kv", (b + 1,), "([B + 1], B from offsets_q)")
    t_q, h_q, d_qk = q.shape
    t_kv, h_kv = k.shape[0], k.shape[1]
    _dims(k, "k", (t_kv, h_kv, d_qk), "([Tkv, Hkv, Dqk], Dqk from q)")
    _dims(v, "v", (t_kv, h_kv, v.shape[2]), "([Tkv, Hkv, Dv], Tkv and Hkv from k)")
    _dims(sink, "sink", (h_q,), "([Hq])")
    _dims(seq_len_q, "seq_len_q", (b,), "([B])")
    _dims(seq_len_kv, "seq_len_kv", (b,), "([B])")
    return (b, h_q, h_kv, max_q, max_kv, d_qk, v.shape[2])


def _varlen_key(ts, max_q, max_kv, options, engine):
    return ("varlen",) + tuple(_meta(t) for t in ts) + (max_q, max_kv, options, engine)


def _varlen_forward(q, k, v, offsets_q, offsets_kv, sink, seq_len_q, seq_len_kv, max_q, max_kv,
                    options, engine):
    shape = _varlen_shape(q, k, v, offsets_q, offsets_kv, sink, seq_len_q, seq_len_kv, max_q,
                          max_kv)
    o = q.new_empty((q.shape[0], q.shape[1], v.shape[2]))
    lse = q.new_empty((q.shape[0], q.shape[1]), dtype=torch.float32)
    ts = [None] * _N_TENSORS
    ts[_Q], ts[_K], ts[_V], ts[_O], ts[_STATS] = q, k, v, o, lse
    ts[_OFFQ], ts[_OFFKV], ts[_SINK], ts[_SQL], ts[_SKVL] = (offsets_q, offsets_kv, sink,
                                                               seq_len_q, seq_len_kv)
    key = _varlen_key(ts[:_STATS] + [None] + ts[_STATS + 1:], max_q, max_kv, options, engine)
    _execute(key, ts, q, (False, shape, ts, {}, options, engine,
                          (q.shape[0], _OFFSETS_CODE[offsets_q.dtype]),
                          (k.shape[0], _OFFSETS_CODE[offsets_kv.dtype]), None))
    return o, lse


@torch.library.custom_op("floe::varlen_fwd", mutates_args=())
def _varlen_fwd(q: Tensor, k: Tensor, v: Tensor, offsets_q: Tensor, offsets_kv: Tensor,
                sink: Optional[Tensor], seq_len_q: Optional[Tensor],
                seq_len_kv: Optional[Tensor], max_seqlen_q: int, max_seqlen_kv: int,
                scale: Optional[float], softcap: Optional[float], align: int,
                left: Optional[int], right: Optional[int],
                engine: str) -> Tuple[Tensor, Tensor]:
    return _varlen_forward(q, k, v, offsets_q, offsets_kv, sink, seq_len_q, seq_len_kv,
                           max_seqlen_q, max_seqlen_kv, (scale, softcap, align, left, right),
                           engine)


@_varlen_fwd.register_fake
def _varlen_fwd_fake(q, k, v, offsets_q, offsets_kv, sink, seq_len_q, seq_len_kv, max_seqlen_q,
                     max_seqlen_kv, scale, softcap, align, left, right, engine):
    return (q.new_empty((q.shape[0], q.shape[1], v.shape[2])),
            q.new_empty((q.shape[0], q.shape[1]), dtype=torch.float32))


def _varlen_grads(q, k, v, sink):
    # Zeroed: rows past offsets[B] are never written (DESIGN 2.1), and a gradient must not
    # carry whatever the allocator left there into the caller's parameters.
    dq = torch.zeros(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.zeros(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.zeros(v.shape, dtype=v.dtype, device=v.device)
    dsink = q.new_empty((0 if sink is None else q.shape[1],), dtype=torch.float32)
    return dq, dk, dv, dsink


@torch.library.custom_op("floe::varlen_bwd", mutates_args=())
def _varlen_bwd(d_o: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                offsets_q: Tensor, offsets_kv: Tensor, sink: Optional[Tensor],
                seq_len_q: Optional[Tensor], seq_len_kv: Optional[Tensor], max_seqlen_q: int,
                max_seqlen_kv: int, scale: Optional[float], softcap: Optional[float],
                align: int, left: Optional[int], right: Optional[int],
                engine: str) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """(dq, dk, dv, dsink), dsink empty without a sink."""
    options = (scale, softcap, align, left, right)
    shape = _varlen_shape(q, k, v, offsets_q, offsets_kv, sink, seq_len_q, seq_len_kv,
                          max_seqlen_q, max_seqlen_kv)
    d_o = _dense_d_o(d_o)
    dq, dk, dv, dsink = _varlen_grads(q, k, v, sink)
    ts = [None] * _N_TENSORS
    ts[_Q], ts[_K], ts[_V], ts[_O], ts[_STATS], ts[_DO] = q, k, v, o, lse, d_o
    ts[_OFFQ], ts[_OFFKV], ts[_SINK], ts[_SQL], ts[_SKVL] = (offsets_q, offsets_kv, sink,
                                                               seq_len_q, seq_len_kv)
    key_ts = list(ts)
    ts[_DQ], ts[_DK], ts[_DV] = dq, dk, dv
    ts[_DSINK] = None if sink is None else dsink
    key = ("bwd",) + _varlen_key(key_ts, max_seqlen_q, max_seqlen_kv, options, engine)
    _execute(key, ts, q, (True, shape, ts, {}, options, engine,
                          (q.shape[0], _OFFSETS_CODE[offsets_q.dtype]),
                          (k.shape[0], _OFFSETS_CODE[offsets_kv.dtype]), None))
    return dq, dk, dv, dsink


@_varlen_bwd.register_fake
def _varlen_bwd_fake(d_o, q, k, v, o, lse, offsets_q, offsets_kv, sink, seq_len_q, seq_len_kv,
                     max_seqlen_q, max_seqlen_kv, scale, softcap, align, left, right, engine):
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape),
            q.new_empty((0 if sink is None else q.shape[1],), dtype=torch.float32))


def _varlen_setup_context(ctx, inputs, output):
    (q, k, v, offsets_q, offsets_kv, sink, seq_len_q, seq_len_kv, max_q, max_kv, scale, softcap,
     align, left, right, engine) = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, offsets_q, offsets_kv, sink, seq_len_q, seq_len_kv)
    ctx.options = (max_q, max_kv, scale, softcap, align, left, right, engine)
    ctx.mark_non_differentiable(lse)


def _varlen_backward(ctx, d_o, d_lse):
    q, k, v, o, lse, offsets_q, offsets_kv, sink, seq_len_q, seq_len_kv = ctx.saved_tensors
    dq, dk, dv, dsink = torch.ops.floe.varlen_bwd(d_o, q, k, v, o, lse, offsets_q, offsets_kv,
                                                  sink, seq_len_q, seq_len_kv, *ctx.options)
    return (dq, dk, dv, None, None,
            dsink if sink is not None and ctx.needs_input_grad[5] else None,
            None, None, None, None, None, None, None, None, None, None)


torch.library.register_autograd("floe::varlen_fwd", _varlen_backward,
                                setup_context=_varlen_setup_context)


def attention_varlen(q: Tensor, k: Tensor, v: Tensor, offsets_q: Tensor, offsets_kv: Tensor, *,
                     max_seqlen_q: int, max_seqlen_kv: int, causal=False, window=None,
                     scale: Optional[float] = None, softcap: Optional[float] = None,
                     sink: Optional[Tensor] = None, seq_len_q: Optional[Tensor] = None,
                     seq_len_kv: Optional[Tensor] = None, return_lse: bool = False,
                     engine: str = "auto", align: str = "top_left"):
    """Attention over packed (THD) sequences of different lengths (DESIGN §2.1).

    q [Tq, Hq, Dqk], k [Tkv, Hkv, Dqk], v [Tkv, Hkv, Dv], any strides. offsets_q and
    offsets_kv: device int32 or int64 [B + 1], non-decreasing token offsets; batch b's queries
    are tokens offsets_q[b] ... offsets_q[b + 1] - 1 (keys alike). seq_len_q, seq_len_kv
    (int32 [B], optional): valid lengths inside padded slots.
    max_seqlen_q, max_seqlen_kv: host ints, the plan's envelope (the longest sequence it
        serves; longer ones are clamped to it). They size the plan and are never read back
        from the device: one plan serves every length vector within them.
    causal, window, align, scale, softcap, sink: as floe.attention, on positions within each
        sequence (causal=True is top-left aligned; FlashAttention's varlen causal is
        causal='bottom_right').
    Returns o [Tq, Hq, Dv] (and with return_lse the float32 LSE [Tq, Hq], not differentiable).
    Rows of a slot past its valid length are 0 (LSE -inf); tokens past offsets_q[B] are not
    written. Gradients flow to q, k, v and sink (reference and generic engines).
    """
    max_q = _envelope(max_seqlen_q, "max_seqlen_q")
    max_kv = _envelope(max_seqlen_kv, "max_seqlen_kv")
    a, left, right = _mask(causal, window, align)
    options = (None if scale is None else float(scale),
               None if softcap is None else float(softcap), a, left, right)
    if _eager(q) and not (torch.is_grad_enabled() and (
            q.requires_grad or k.requires_grad or v.requires_grad
            or (sink is not None and sink.requires_grad))):
        # No gradient and no tracing: the dispatcher's round trip is host time for nothing.
        o, lse = _varlen_forward(q, k, v, offsets_q, offsets_kv, sink, seq_len_q, seq_len_kv,
                                 max_q, max_kv, options, engine)
    else:
        o, lse = torch.ops.floe.varlen_fwd(q, k, v, offsets_q, offsets_kv, sink, seq_len_q,
                                           seq_len_kv, max_q, max_kv, *options, engine)
    return (o, lse) if return_lse else o


# ---------------------------------------------------------------------------------------------
# Paged KV cache (forward)


def _paged_forward(q, k_cache, v_cache, block_table, seq_len_kv, offsets_q, sink, seq_len_q,
                   max_q, max_kv, options, engine):
    _rank(k_cache, "k", 4, "[Npages, P, Hkv, Dqk]")
    _rank(v_cache, "v", 4, "[Npages, P, Hkv, Dv]")
    _rank(block_table, "block_table", 2, "[B, max_pages]")
    b, max_pages = block_table.shape
    n_pages, page, h_kv, d_qk = k_cache.shape
    d_v = v_cache.shape[3]
    _dims(v_cache, "v", (n_pages, page, h_kv, d_v),
          "([Npages, P, Hkv, Dv], Npages, P and Hkv from k)")
    strides = {}
    if offsets_q is None:
        _rank(q, "q", 4, "[B, Sq, Hq, Dqk]")
        _dims(q, "q", (b, q.shape[1], q.shape[2], d_qk),
              "([B, Sq, Hq, Dqk], B from block_table, Dqk from k)")
        s_q, h_q = q.shape[1], q.shape[2]
        if max_q is not None and max_q != s_q:
            raise FloeError(f"invalid problem: max_seqlen_q: is {max_q}, must be q's Sq ({s_q}) "
                            "or None with a dense q")
        max_q = s_q
        # floe's dense layout is [B, Hq, Sq, D]: q and o are given as their transposes' strides.
        qs = q.stride()
        strides[_Q] = (qs[0], qs[2], qs[1], qs[3])
        o = q.new_empty((b, s_q, h_q, d_v))
        strides[_O] = (s_q * h_q * d_v, d_v, h_q * d_v, 1)
        lse = q.new_empty((b, h_q, s_q), dtype=torch.float32)
        ragged_q = None
    else:
        _rank(q, "q", 3, "[Tq, Hq, Dqk]")
        _dims(offsets_q, "offsets_q", (b + 1,), "([B + 1], B from block_table)")
        _offsets(offsets_q, "offsets_q")
        _dims(q, "q", (q.shape[0], q.shape[1], d_qk), "([Tq, Hq, Dqk], Dqk from k)")
        if max_q is None:
            raise TypeError("floe: max_seqlen_q is needed with offsets_q (the plan's envelope)")
        h_q = q.shape[1]
        o = q.new_empty((q.shape[0], h_q, d_v))
        lse = q.new_empty((q.shape[0], h_q), dtype=torch.float32)
        ragged_q = (q.shape[0], _OFFSETS_CODE[offsets_q.dtype])
    _dims(sink, "sink", (h_q,), "([Hq])")
    _dims(seq_len_q, "seq_len_q", (b,), "([B], B from block_table)")
    _dims(seq_len_kv, "seq_len_kv", (b,), "([B], B from block_table)")
    shape = (b, h_q, h_kv, max_q, max_kv, d_qk, d_v)
    ts = [None] * _N_TENSORS
    ts[_Q], ts[_K], ts[_V], ts[_BLOCK_TABLE], ts[_SKVL] = (q, k_cache, v_cache, block_table,
                                                           seq_len_kv)
    ts[_OFFQ], ts[_SINK], ts[_SQL] = offsets_q, sink, seq_len_q
    key = ("paged",) + tuple(_meta(t) for t in ts) + (max_q, max_kv, options, engine)
    ts[_O], ts[_STATS] = o, lse
    _execute(key, ts, q, (False, shape, ts, strides, options, engine, ragged_q, None,
                          (page, n_pages, max_pages)))
    return o, lse


@torch.library.custom_op("floe::paged_fwd", mutates_args=())
def _paged_fwd(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor,
               seq_len_kv: Tensor, offsets_q: Optional[Tensor], sink: Optional[Tensor],
               seq_len_q: Optional[Tensor], max_seqlen_q: Optional[int], max_seqlen_kv: int,
               scale: Optional[float], softcap: Optional[float], align: int,
               left: Optional[int], right: Optional[int], engine: str) -> Tuple[Tensor, Tensor]:
    return _paged_forward(q, k_cache, v_cache, block_table, seq_len_kv, offsets_q, sink,
                          seq_len_q, max_seqlen_q, max_seqlen_kv,
                          (scale, softcap, align, left, right), engine)


@_paged_fwd.register_fake
def _paged_fwd_fake(q, k_cache, v_cache, block_table, seq_len_kv, offsets_q, sink, seq_len_q,
                    max_seqlen_q, max_seqlen_kv, scale, softcap, align, left, right, engine):
    d_v = v_cache.shape[3]
    if offsets_q is None:
        b, s_q, h_q, _ = q.shape
        return (q.new_empty((b, s_q, h_q, d_v)),
                q.new_empty((b, h_q, s_q), dtype=torch.float32))
    return (q.new_empty((q.shape[0], q.shape[1], d_v)),
            q.new_empty((q.shape[0], q.shape[1]), dtype=torch.float32))


def attention_paged(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor,
                    seq_len_kv: Tensor, *, max_seqlen_kv: int, offsets_q: Optional[Tensor] = None,
                    max_seqlen_q: Optional[int] = None, causal=False, window=None,
                    scale: Optional[float] = None, softcap: Optional[float] = None,
                    sink: Optional[Tensor] = None, seq_len_q: Optional[Tensor] = None,
                    return_lse: bool = False, engine: str = "auto", align: str = "top_left"):
    """Attention over a paged KV cache, forward only (DESIGN §2.2).

    q: [B, Sq, Hq, Dqk] (dense, any strides), or packed [Tq, Hq, Dqk] with offsets_q
        (int32/int64 [B + 1]) and max_seqlen_q (a host int, the envelope).
    k_cache, v_cache: [Npages, P, Hkv, Dqk] and [Npages, P, Hkv, Dv], any strides.
    block_table: int32 [B, max_pages], any strides: key j of batch b is row j % P of page
        block_table[b, j // P]; entries past the pages a batch needs are never read.
    seq_len_kv: int32 [B], each batch's key count (read on the device, clamped to
        max_seqlen_kv). max_seqlen_kv: host int, the envelope; max_pages * P must cover it.
    causal, window, align, scale, softcap, sink, seq_len_q: as floe.attention. Decoding
        against a cache wants causal='bottom_right' (the last query sees every key).
    Returns o in q's layout ([B, Sq, Hq, Dv] or [Tq, Hq, Dv]) and with return_lse the float32
    LSE ([B, Hq, Sq] or [Tq, Hq]). No gradients (floe defines no paged backward).
    """
    max_kv = _envelope(max_seqlen_kv, "max_seqlen_kv")
    max_q = None if max_seqlen_q is None else _envelope(max_seqlen_q, "max_seqlen_q")
    a, left, right = _mask(causal, window, align)
    options = (None if scale is None else float(scale),
               None if softcap is None else float(softcap), a, left, right)
    # A decode step: no dispatcher round trip (host time per call). With inputs that need a
    # gradient the op runs, so that a backward says it is not defined instead of giving none.
    if _eager(q) and not (torch.is_grad_enabled() and (
            q.requires_grad or k_cache.requires_grad or v_cache.requires_grad
            or (sink is not None and sink.requires_grad))):
        o, lse = _paged_forward(q, k_cache, v_cache, block_table, seq_len_kv, offsets_q, sink,
                                seq_len_q, max_q, max_kv, options, engine)
    else:
        o, lse = torch.ops.floe.paged_fwd(q, k_cache, v_cache, block_table, seq_len_kv,
                                          offsets_q, sink, seq_len_q, max_q, max_kv, *options,
                                          engine)
    return (o, lse) if return_lse else o

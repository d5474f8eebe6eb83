"""floe as PyTorch's flash-attention implementation: ``floe.torch.activate()``.

Where the installed torch has the flash-attention registry (``torch.nn.attention.
register_flash_attention_impl``, with ``torch.library.get_kernel``), ``activate()`` registers
floe under the name "floe" and activates it: aten's ``_scaled_dot_product_flash_attention`` and
its backward then run on floe for CUDA tensors, so ``F.scaled_dot_product_attention`` on the
flash backend (and whatever routes through those ops) runs floe. What floe declines (dropout,
the debug mask, a problem no engine of floe serves) goes to PyTorch's own kernel, which is
looked up before floe replaces it. ``deactivate()`` restores PyTorch's kernels.
"""



import functools

import torch

from . import _ops
from ._floe import FloeError

NAME = "floe"
_FWD = "_scaled_dot_product_flash_attention"
_BWD = "_scaled_dot_product_flash_attention_backward"


def available() -> bool:
    """True when this torch has the flash-attention registry floe plugs into."""
    attention = torch.nn.attention
    return hasattr(attention, "register_flash_attention_impl") and hasattr(
        torch.library, "get_kernel")


class _Handle:
    def __init__(self, library):
        self.library = library

    def remove(self):
        if self.library is not None:
            self.library._destroy()
            self.library = None


def _sdpa_forward(original, keyset, query, key, value, dropout_p=0.0, is_causal=False,
                  return_debug_mask=False, *, scale=None):
    """aten::_scaled_dot_product_flash_attention on floe; PyTorch's kernel for the rest."""
    if dropout_p == 0.0 and not return_debug_mask:
        try:
            o, lse = _ops._forward(query, key, value, None, None, None, None, scale, None, 0,
                                   None, 0 if is_causal else None, False, "auto")
        except FloeError:
            pass
        else:
            dev = query.device
            rng = torch.zeros((2,), dtype=torch.uint64, device=dev)
            offset = torch.zeros((), dtype=torch.uint64, device=dev)
            debug = torch.empty(0, dtype=query.dtype, device=dev)
            return (o, lse, None, None, query.shape[2], key.shape[2], rng, offset, debug)
    return original.call_boxed(keyset, query, key, value, dropout_p, is_causal,
                               return_debug_mask, scale=scale)


def _sdpa_backward(original, keyset, grad_out, query, key, value, out, logsumexp, cum_seq_q,
                   cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset,
                   *, scale=None):
    """aten::_scaled_dot_product_flash_attention_backward on floe (its LSE is floe's: natural
    log, [B, H, Sq], so a forward of PyTorch's is served too); PyTorch's kernel for the rest."""
    if dropout_p == 0.0 and cum_seq_q is None and cum_seq_k is None:
        try:
            dq, dk, dv, _, _ = _ops._backward_impl(
                grad_out, query, key, value, out, logsumexp, None, None, None, None, scale, None,
                0, None, 0 if is_causal else None, torch.are_deterministic_algorithms_enabled(),
                False, "auto", absent_empty=False)
            return dq, dk, dv
        except FloeError:
            pass
    return original.call_boxed(keyset, grad_out, query, key, value, out, logsumexp, cum_seq_q,
                               cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed,
                               philox_offset, scale=scale)


def _register():
    # PyTorch's kernels, looked up before floe's replace them: the fallback.
    fwd = functools.partial(_sdpa_forward, torch.library.get_kernel(f"aten::{_FWD}", "CUDA"))
    bwd = functools.partial(_sdpa_backward, torch.library.get_kernel(f"aten::{_BWD}", "CUDA"))
    lib = torch.library.Library("aten", "IMPL", "CUDA")
    lib.impl(_FWD, fwd, "CUDA", with_keyset=True)
    lib.impl(_BWD, bwd, "CUDA", with_keyset=True)
    return _Handle(lib)


def activate() -> None:
    """Makes floe PyTorch's flash-attention implementation (CUDA). Raises RuntimeError where
    this torch has no flash-attention registry (see available())."""
    if not available():
        raise RuntimeError(
            f"floe.torch.activate: torch {torch.__version__} has no flash-attention registry "
            "(torch.nn.attention.register_flash_attention_impl and torch.library.get_kernel); "
            "call floe.attention directly instead")
    attention = torch.nn.attention
    if NAME not in attention.list_flash_attention_impls():
        attention.register_flash_attention_impl(NAME, register_fn=_register)
    attention.activate_flash_attention_impl(NAME)


def deactivate() -> None:
    """Restores PyTorch's own flash-attention kernels."""
    attention = torch.nn.attention
    if available() and attention.current_flash_attention_impl() == NAME:
        restore = getattr(attention, "restore_flash_attention_impl", None)
        if restore is None:
            raise RuntimeError(f"floe.torch.deactivate: torch {torch.__version__} cannot "
                               "restore its own flash-attention kernels")
        restore()

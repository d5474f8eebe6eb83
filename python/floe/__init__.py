"""floe: fused scaled-dot-product attention, forward and backward.

``floe._floe`` is floe's C++ API (problems, plans, execute on raw pointers) and needs nothing
else. The PyTorch layer (``floe.attention``, ``floe.explain``, ``floe.torch``) loads torch on
first use, so that ``import floe`` works where torch is not installed.
"""

from ._floe import FloeError, cuda_available, engine_names

__version__ = "0.1.0"
__all__ = ["FloeError", "attention", "attention_paged", "attention_varlen", "cuda_available",
           "engine_names", "explain", "merge"]

_TORCH_NAMES = ("attention", "explain", "Explanation", "clear_plan_cache", "plan_cache_info")
_SERVING_NAMES = ("attention_varlen", "attention_paged")


def __getattr__(name):
    # The value is kept in the module's globals, so this runs once per name: floe.attention
    # is then a plain attribute lookup (host time per call).
    if name in _TORCH_NAMES:
        from . import _ops

        # attention: the C++ front of _ops.attention where there is one (_ops._front).
        value = _ops._front if name == "attention" else getattr(_ops, name)
    elif name in _SERVING_NAMES:
        from . import _serving

        value = getattr(_serving, name)
    elif name == "merge":
        from . import _merge

        value = _merge.merge
    elif name == "torch":
        import importlib

        value = importlib.import_module(".torch", __name__)
    else:
        raise AttributeError(f"module 'floe' has no attribute {name!r}")
    globals()[name] = value
    return value

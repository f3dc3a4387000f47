"""The OpenNeuron compiler behind torch.compile(backend="neuron").

    metrics()        counts of graphs (loaded ones too), kernels, kernel launches,
                     kernel-cache hits and misses,
                     compile time, extern and fallback ops
    reset_metrics()
    neuron_backend   the Dynamo backend (registered as "neuron")

Settings (environment): OPENNEURON_COMPILE_CACHE_DIR, OPENNEURON_COMPILE_CACHE,
OPENNEURON_COMPILE_CACHE_MAX_MB, OPENNEURON_COMPILE_STRICT,
OPENNEURON_COMPILE_DEBUG (a folder for per-graph dumps), OPENNEURON_CXX,
OPENNEURON_COMPILE_GRAPH_CACHE (graphs saved in AOTAutograd's cache, on by
default), OPENNEURON_COMPILE_PRECOMPILE (warm starts skip tracing: precompile.py).
"""

from . import metrics as _metrics
from .backend import CompileFallbackWarning, StrictCompileError, neuron_backend

_registered = False


def register():
    """Registers the "neuron" Dynamo backend and Dynamo's device interface."""
    global _registered
    if _registered:
        return
    _registered = True
    from importlib.metadata import EntryPoint

    from torch._dynamo.backends.registry import _BACKENDS, _COMPILER_FNS, register_backend

    from .device_interface import register_device_interface

    register_device_interface()
    # When Dynamo loads us through the entry point it registers the backend
    # itself right after; registering here too would be a duplicate.
    if "neuron" not in _COMPILER_FNS and not isinstance(_BACKENDS.get("neuron"), EntryPoint):
        register_backend(neuron_backend, name="neuron")
    from .config import settings

    if settings().precompile:
        # Dynamo looks for a saved frame when torch.compile wraps it, before
        # our backend first runs: the cache must be on from the start.
        from . import precompile

        precompile.enable()


def metrics():
    return _metrics.snapshot()


def reset_metrics():
    _metrics.reset()


register()

__all__ = ["neuron_backend", "metrics", "reset_metrics", "register", "CompileFallbackWarning",
           "StrictCompileError"]

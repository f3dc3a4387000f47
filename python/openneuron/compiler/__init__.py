"""The OpenNeuron compiler behind torch.compile(backend="neuron").

    metrics()        counts of graphs, kernels, kernel-cache hits and misses,
                     compile time, extern and fallback ops
    reset_metrics()
    neuron_backend   the Dynamo backend (registered as "neuron")

Settings (environment): OPENNEURON_COMPILE_CACHE_DIR, OPENNEURON_COMPILE_CACHE,
OPENNEURON_COMPILE_CACHE_MAX_MB, OPENNEURON_COMPILE_STRICT,
OPENNEURON_COMPILE_DEBUG (a folder for per-graph dumps), OPENNEURON_CXX.
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
    from torch._dynamo.backends.registry import _BACKENDS, register_backend

    from .device_interface import register_device_interface

    register_device_interface()
    if "neuron" not in _BACKENDS or _BACKENDS["neuron"] is not neuron_backend:
        _BACKENDS.pop("neuron", None)
        register_backend(neuron_backend, name="neuron")


def metrics():
    return _metrics.snapshot()


def reset_metrics():
    _metrics.reset()


register()

__all__ = ["neuron_backend", "metrics", "reset_metrics", "register", "CompileFallbackWarning",
           "StrictCompileError"]

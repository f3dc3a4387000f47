"""OpenNeuron: the `neuron` device for PyTorch.

`import torch` loads this package through the `torch.backends` entry point,
after which `device="neuron"` works everywhere a device is accepted. With
TORCH_DEVICE_BACKEND_AUTOLOAD=0, `import openneuron` loads it.
"""
_initializing = True  # read by the autoload entry point (see _openneuron_autoload)

import atexit
import sys  # noqa: E402

import torch  # noqa: E402

from . import _build_info  # noqa: E402
from ._safetensors_io import load_safetensors  # noqa: E402

__all__ = ["is_loaded", "load_safetensors"]

_loaded = False


def _check_torch_version():
    built, running = _build_info.TORCH_VERSION, torch.__version__
    if built.split("+")[0] != running.split("+")[0]:
        raise ImportError(
            f"OpenNeuron was built against torch {built} but torch {running} is "
            f"installed. Reinstall OpenNeuron against torch {running}, or install "
            f"torch=={built.split('+')[0]}."
        )


def _load():
    """Registers the `neuron` device with PyTorch (idempotent)."""
    global _loaded
    if _loaded:
        return
    _check_torch_version()
    from . import _C  # noqa: F401  (registers kernels, hooks, allocators)
    from . import distributed, neuron

    # Eager calls held for fusion run before the interpreter exits (a
    # process sharing a tensor would otherwise never see its last writes);
    # then fused kernels' background builds stop (atexit runs last first).
    atexit.register(_C._stop_eager_fusion_builds)
    atexit.register(_C._flush_held_calls)

    torch.utils.rename_privateuse1_backend("neuron")
    torch._register_device_module("neuron", neuron)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )
    from ._torch_patches import autograd_engine, device_policies, multiprocessing_sharing, shared_parameters

    shared_parameters.install()
    device_policies.install()
    autograd_engine.install()
    multiprocessing_sharing.install()
    distributed.register()
    # torch.compile(backend="neuron"): when Dynamo is already imported,
    # register now; otherwise Dynamo finds it through the entry point.
    if "torch._dynamo" in sys.modules:
        from . import compiler  # noqa: F401
    _loaded = True


def is_loaded() -> bool:
    return _loaded


try:
    _load()
finally:
    _initializing = False

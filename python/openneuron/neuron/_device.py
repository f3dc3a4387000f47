"""Devices: count, selection, properties, synchronisation."""
import dataclasses

import torch

from .. import _C
from ._utils import _get_device_index


def is_available() -> bool:
    return _C._device_count() > 0


def unavailable_reason():
    """Why ``is_available()`` is False (the driver's error, e.g. no Vulkan
    loader or no usable device), or None when devices are available."""
    return _C._unavailable_reason() or None


def device_count() -> int:
    return _C._device_count()


def is_initialized() -> bool:
    return _C._is_initialized()


def _lazy_init() -> None:
    _C._lazy_init()


def _is_in_bad_fork() -> bool:
    return _C._is_in_bad_fork()


def init() -> None:
    _lazy_init()


def current_device() -> int:
    return _C._current_device()


def set_device(device) -> None:
    index = _get_device_index(device, optional=True)
    if index >= 0:
        _C._set_device(index)


class device:
    """Context manager that changes the current neuron device."""

    def __init__(self, device):
        self.idx = _get_device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _C._current_device()
        if self.idx != self.prev_idx:
            _C._set_device(self.idx)

    def __exit__(self, *exc):
        if self.prev_idx != self.idx:
            _C._set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of `obj` (a tensor) current."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "neuron" else -1)

    def __enter__(self):
        if self.idx >= 0:
            super().__enter__()

    def __exit__(self, *exc):
        if self.idx >= 0:
            super().__exit__(*exc)
        return False


def synchronize(device=None) -> None:
    """Waits for all work queued on every stream of the device."""
    _C._synchronize(_get_device_index(device, optional=True))


def set_sync_debug_mode(debug_mode) -> None:
    """As torch.cuda.set_sync_debug_mode: "default" (0) does nothing, "warn"
    (1) warns and "error" (2) raises at every operation that makes the host
    wait for the device (.item(), blocking copies to or from the host,
    nonzero and other ops whose result size depends on device values, ops on
    the CPU fallback of a device the host cannot address), naming the op.
    synchronize() and Stream/Event synchronize never do."""
    if isinstance(debug_mode, str):
        modes = {"default": 0, "warn": 1, "error": 2}
        if debug_mode not in modes:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = modes[debug_mode]
    _C._set_sync_debug_mode(int(debug_mode))


def get_sync_debug_mode() -> int:
    """The sync debug mode: 0 default, 1 warn, 2 error."""
    return _C._get_sync_debug_mode()


@dataclasses.dataclass(frozen=True)
class NeuronDeviceProperties:
    name: str
    driver: str
    total_memory: int
    multi_processor_count: int
    host_addressable: bool
    runs_on_host_threads: bool
    # What the device supports (HAL DeviceProperties); CUDA's names where
    # CUDA has one (warp_size, shared_memory_per_block).
    max_allocation: int = 0
    unified_memory: bool = False
    kernel_target: str = ""
    native_fp64: bool = False
    native_int64: bool = False
    native_fp16: bool = False
    native_bf16: bool = False
    warp_size: int = 1
    shared_memory_per_block: int = 0
    # The library's shared-memory tiled kernels run here (a GPU).
    tiled_kernels: bool = False
    # What float16 products run on: "cooperative" (the GPU's matrix units,
    # VK_KHR_cooperative_matrix), "emulated" (OPENNEURON_VULKAN_MATRIX_UNITS=
    # emulate: that kernel in plain arithmetic) or "none".
    matrix_units: str = "none"
    major: int = 1
    minor: int = 0


def get_device_properties(device=None) -> NeuronDeviceProperties:
    p = _C._device_properties(_get_device_index(device, optional=True))
    return NeuronDeviceProperties(
        name=p["name"],
        driver=p["driver"],
        total_memory=p["total_memory"],
        multi_processor_count=p["compute_units"],
        host_addressable=p["host_addressable"],
        runs_on_host_threads=p["runs_on_host_threads"],
        max_allocation=p["max_allocation"],
        unified_memory=p["unified_memory"],
        kernel_target=p["kernel_target"],
        native_fp64=p["native_fp64"],
        native_int64=p["native_int64"],
        native_fp16=p["native_fp16"],
        native_bf16=p["native_bf16"],
        warp_size=p["subgroup_size"],
        shared_memory_per_block=p["shared_memory_bytes"],
        tiled_kernels=p["tiled_kernels"],
        matrix_units=p["matrix_units"],
    )


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def get_device_capability(device=None) -> tuple[int, int]:
    p = get_device_properties(device)
    return (p.major, p.minor)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]

"""Dynamo's device interface for the `neuron` device.

`torch._dynamo.device_interface` keeps one `DeviceInterface` class per device
type; Dynamo and Inductor use it to query devices, switch the current device
(`device`, `exchange_device`), create streams and events, and synchronise
without knowing the device's own module. `NeuronInterface` answers through
`torch.neuron` (the torch.cuda-like API of OpenNeuron), and `torch.accelerator`
where `torch.neuron` has no counterpart.

`register_device_interface()` registers it under "neuron"; the package calls it
when the compiler is set up.
"""
from typing import Any

import torch
from torch._dynamo.device_interface import (
    DeviceInterface,
    caching_worker_current_devices,
    caching_worker_device_properties,
    register_interface_for_device,
)

# The module torch.neuron names, imported directly so that this file works
# whether or not openneuron has registered it as torch.neuron yet.
import openneuron.neuron as _neuron

__all__ = ["NeuronInterface", "register_device_interface"]

_DEVICE_TYPE = "neuron"


def _index(device: torch.types.Device) -> int:
    """The neuron device index of `device` (None or no index: the current one)."""
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != _DEVICE_TYPE:
            raise AssertionError(f"Expected device type '{_DEVICE_TYPE}', got '{device.type}'")
        device = device.index
    if device is None:
        return _neuron.current_device()
    return int(device)


class NeuronInterface(DeviceInterface):
    """`DeviceInterface` of the neuron device, backed by `torch.neuron`."""

    device = _neuron.device  # type: ignore[assignment]

    # torch.neuron.Event builds a plain torch.Event (PyTorch's event methods
    # reject torch.Event subclasses); torch.neuron.Stream subclasses torch.Stream.
    Event = _neuron.Event  # type: ignore[assignment]
    Stream = _neuron.Stream  # type: ignore[assignment]

    class Worker:  # type: ignore[override]
        """Answers from properties recorded in the main process, so that
        compile workers (forked or spawned) need not touch the device."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices[_DEVICE_TYPE] = device

        @staticmethod
        def current_device() -> int:
            if _DEVICE_TYPE in caching_worker_current_devices:
                return caching_worker_current_devices[_DEVICE_TYPE]
            return _neuron.current_device()

        @staticmethod
        def get_device_properties(device: torch.types.Device = None) -> Any:
            if device is None:
                index = NeuronInterface.Worker.current_device()
            else:
                index = _index(device)
            if _DEVICE_TYPE not in caching_worker_device_properties:
                caching_worker_device_properties[_DEVICE_TYPE] = [
                    _neuron.get_device_properties(i) for i in range(_neuron.device_count())
                ]
            return caching_worker_device_properties[_DEVICE_TYPE][index]

    current_device = staticmethod(_neuron.current_device)
    set_device = staticmethod(_neuron.set_device)
    device_count = staticmethod(_neuron.device_count)
    stream = staticmethod(_neuron.stream)  # type: ignore[assignment]
    current_stream = staticmethod(_neuron.current_stream)
    set_stream = staticmethod(_neuron.set_stream)  # type: ignore[assignment]
    synchronize = staticmethod(_neuron.synchronize)
    memory_allocated = staticmethod(_neuron.memory_allocated)

    # Can be mock-patched, as the other interfaces' is_available.
    @staticmethod
    def is_available() -> bool:
        return _neuron.is_available()

    @staticmethod
    def exchange_device(device: int) -> int:
        """Makes `device` current; returns the previous current device
        (-1 and no change for a negative index), as torch.cuda._exchange_device."""
        if device < 0:
            return -1
        previous = _neuron.current_device()
        if previous != device:
            _neuron.set_device(device)
        return previous

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        # Neuron devices need no lazy context creation, so this is exchange_device.
        return NeuronInterface.exchange_device(device)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        torch.accelerator.set_stream(
            torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)
        )

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        """The id of the current stream of device `device_idx` (what a kernel
        launch would be queued on)."""
        return _neuron.current_stream(device_idx).stream_id

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> str:
        """The vector ISA of the host CPU ("avx2", "avx512", ...): the neuron
        device's kernels run on the host, so that is what compiled code may
        assume (it keys Inductor's and AOTInductor's caches)."""
        return torch.backends.cpu.get_cpu_capability().lower()

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return _neuron.is_bf16_supported(including_emulation)

    @staticmethod
    def is_triton_capable(device: torch.types.Device = None) -> bool:
        return False  # the neuron compiler generates no Triton code

    @staticmethod
    def raise_if_triton_unavailable(device: torch.types.Device = None) -> None:
        """No-op: the neuron device needs no Triton, so its absence is no error."""
        return None


def register_device_interface() -> None:
    """Registers `NeuronInterface` as Dynamo's interface for "neuron"."""
    register_interface_for_device(_DEVICE_TYPE, NeuronInterface)

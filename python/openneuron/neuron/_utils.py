"""Device-argument normalisation, as torch.cuda._utils does it."""
import torch

from .. import _C


def _get_device_index(device, optional=False, allow_cpu=False) -> int:
    """Returns the neuron device index of `device` (int, str, torch.device or
    None). None, or a device without index, means the current device."""
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if allow_cpu and device.type == "cpu":
            return -1
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, but got: {device}")
        device = device.index
    if device is None:
        if not optional:
            raise ValueError("Expected a neuron device with a specified index or an integer, but got: None")
        return _C._current_device()
    if not isinstance(device, int):
        raise TypeError(f"Invalid device {device!r}: expected an int, str or torch.device")
    return device

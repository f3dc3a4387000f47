"""Keeps shared parameters shared through `module.to("neuron")`.

PyTorch converts a module's parameters in place (`param.data = new`) only for
its built-in device types. For a PrivateUse1 device such as neuron,
`Module._apply` makes a new Parameter for every module slot, so a parameter
that two modules share (a language model's tied input and output embedding)
silently becomes two independent ones and training diverges from CUDA/CPU.

The wrapper below runs PyTorch's own `_apply` unchanged, then puts the
original Parameter objects back, with the converted contents swapped in
(torch.utils.swap_tensors), as CUDA's in-place conversion would leave them:
ties hold and an optimizer made before `.to()` still sees the parameters.
Where a swap is refused (e.g. an autograd graph still references the old
tensor), every slot that shared a Parameter gets the first slot's new one, so
ties hold all the same. When PyTorch converted in place nothing changes.
(The process-wide alternative, torch.__future__'s swap-on-conversion switch,
breaks plain CPU code whose parameters are referenced by an autograd graph.)
"""
from . import require_torch

require_torch(__name__)

import threading

import torch

_original_apply = torch.nn.Module._apply
_depth = threading.local()


def _parameter_slots(module):
    """{id(param): (param, [(module, key), ...])} over the whole tree."""
    slots = {}
    for _, child in module.named_modules(remove_duplicate=False):
        for key, param in child._parameters.items():
            if param is not None:
                slots.setdefault(id(param), (param, []))[1].append((child, key))
    return slots


def _restore(old, places, swap):
    first, first_key = places[0]
    new = first._parameters[first_key]
    if new is old:
        return  # converted in place
    keep = new
    if swap:
        try:
            torch.utils.swap_tensors(old, new)
            keep = old
        except RuntimeError:
            pass
    for module, key in places:
        module._parameters[key] = keep


def _apply_keeping_parameters(self, fn, recurse=True):
    depth = getattr(_depth, "value", 0)
    slots = _parameter_slots(self) if depth == 0 and recurse else {}
    _depth.value = depth + 1
    try:
        result = _original_apply(self, fn, recurse)
    finally:
        _depth.value = depth
    # A user who asked for new Parameters on conversion gets them (tied).
    swap = not torch.__future__.get_overwrite_module_params_on_conversion()
    for old, places in slots.values():
        _restore(old, places, swap)
    return result


def install():
    torch.nn.Module._apply = _apply_keeping_parameters

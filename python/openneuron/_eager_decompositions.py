"""Eager ops with no device kernel, run as PyTorch's own decompositions.

On a driver whose memory the host cannot address, an op the compiler and
the kernel library cannot run would take the CPU fallback (two copies, the
op on the CPU). Before that, the router (csrc/torch/aten/eager/
decomposition_fallback.cc) asks this module for the op's decomposition in
``torch._decomp.decomposition_table`` (the tables Inductor and export use)
and runs it on the neuron tensors: its ops dispatch to the device again,
below autograd. Random ops are not decomposed (their decompositions draw
from another generator than the CPU fallback), nor are ops whose
decomposition is the op itself."""
from __future__ import annotations

import torch

_table = None


def _decomposition(overload):
    global _table
    if _table is None:
        from torch._decomp import decomposition_table

        _table = decomposition_table
    return _table.get(overload)


def _overload(name: str):
    namespace, _, rest = name.partition("::")
    base, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, namespace), base)
    return getattr(packet, overload or "default")


# Decompositions whose results differ from the CPU kernel's beyond the op's
# tolerance (batch norm's saved statistics are empty where the CPU kernel
# returns them; scatter_reduce picks another of equal extremes).
_DIFFERENT = {"native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
              "_batch_norm_with_update", "native_batch_norm_backward", "batch_norm_backward", "scatter_reduce"}


def has_decomposition(name: str) -> bool:
    try:
        op = _overload(name)
    except AttributeError:
        return False
    if torch.Tag.nondeterministic_seeded in op.tags or name.partition("::")[2].partition(".")[0] in _DIFFERENT:
        return False
    return _decomposition(op) is not None


# Decompositions that compute in their input's dtype where the CPU kernel
# computes 16-bit inputs in float and rounds uint8 its own way: for such
# inputs the op takes the CPU fallback (the decomposition was off by up to
# several 16-bit ulps and by 1 in uint8 results).
_FLOAT_INPUTS_ONLY = ("upsample_", "_upsample_")


def _other_than_float(args) -> bool:
    return any(isinstance(a, torch.Tensor) and a.dtype not in (torch.float32, torch.float64) for a in args)


def decompose(name: str, args: tuple):
    """Runs the decomposition of op `name` (``aten::x.overload``) on
    `args` (every argument, in schema order); NotImplemented where it does
    not apply to these arguments."""
    if name.partition("::")[2].startswith(_FLOAT_INPUTS_ONLY) and _other_than_float(args):
        return NotImplemented
    op = _overload(name)
    fn = _decomposition(op)
    positional, keywords = [], {}
    for value, argument in zip(args, op._schema.arguments):
        if argument.kwarg_only:
            keywords[argument.name] = value
        else:
            positional.append(value)
    return fn(*positional, **keywords)

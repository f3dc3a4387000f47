"""Neuron tensors sent to another process (torch.multiprocessing, spawn or fork).

Why: PyTorch 2.13's tensor reducer shares CUDA tensors through CUDA IPC and
everything else as CPU storage (`_share_fd_cpu_`), which fails for a neuron
tensor ("_share_fd_: only available on CPU"). What: torch.multiprocessing's
pickler gets a reducer for tensors that handles neuron tensors and hands any
other tensor to PyTorch's own. On the host driver the storage's bytes move
into a shared memory file, as CPU's share_memory_() does, and the other
process maps the same file: both see each other's writes, as CUDA IPC gives.
A driver whose memory the host cannot map raises, saying what to do.
"""

import multiprocessing.reduction

import torch
import torch.multiprocessing.reductions as reductions

from .. import _C
from . import require_torch

require_torch(__name__)


def rebuild_neuron_tensor(cls, fd, nbytes, device, dtype, size, stride, offset, requires_grad):
    fd = fd.detach()  # multiprocessing's DupFd: this process's descriptor
    try:
        tensor = _C._tensor_from_shared_fd(fd, nbytes, device, dtype, list(size), list(stride), offset)
    finally:
        import os

        os.close(fd)
    if cls is torch.nn.parameter.Parameter:
        return torch.nn.parameter.Parameter(tensor, requires_grad=requires_grad)
    return tensor.requires_grad_(requires_grad)


def _reduce_tensor(pytorch_reduce):
    def reduce_tensor(tensor):
        if tensor.device.type != "neuron" or tensor.layout != torch.strided:
            return pytorch_reduce(tensor)
        if tensor.requires_grad and not tensor.is_leaf:
            # PyTorch's own rule and message, for every device
            return pytorch_reduce(tensor)
        fd, nbytes = _C._share_tensor_storage(tensor)
        return (rebuild_neuron_tensor,
                (type(tensor), multiprocessing.reduction.DupFd(fd), nbytes, tensor.device.index, tensor.dtype,
                 tuple(tensor.size()), tuple(tensor.stride()), tensor.storage_offset(), tensor.requires_grad))

    return reduce_tensor


def install():
    """Registers the reducer for tensors and parameters (as PyTorch's
    init_reductions does for its own)."""
    pytorch_reduce = reductions.reduce_tensor
    reducer = _reduce_tensor(pytorch_reduce)
    for cls in (torch.Tensor, torch.nn.parameter.Parameter):
        multiprocessing.reduction.ForkingPickler.register(cls, reducer)

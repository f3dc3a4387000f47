"""Backward runs on the calling thread when neuron kernels run on the host's cores.

PyTorch's autograd engine gives every non-CPU device its own worker thread and
runs that device's backward there: right for a GPU, where the thread only
queues work. The host driver runs kernels on the launching thread with ATen's
intra-op (OpenMP) threads, so the worker thread gets an OpenMP team of its own
next to the main thread's. Two teams on the same cores make libgomp shorten
its spin-wait (it counts more threads than cores), and every parallel region
then pays a sleep and a wake-up. Measured on 2 cores (demo GPT training step,
median of 5 processes each): 551 ms with the device thread, 476 ms on the
calling thread, 460 ms for the same step on "cpu".

So when every neuron device runs on host threads, backward runs on the
calling thread, as it does for "cpu": PyTorch's own switch for that
(`torch.autograd.set_multithreading_enabled(False)`) is turned on for the
duration of each backward call only. A user who turned it off keeps that;
OPENNEURON_AUTOGRAD_DEVICE_THREADS=1 keeps PyTorch's device threads.
"""
from . import require_torch

require_torch(__name__)

import os

import torch
from torch.autograd.variable import Variable

_SWITCH = "OPENNEURON_AUTOGRAD_DEVICE_THREADS"
_on_host_threads = None  # decided once the device is initialised


def _devices_run_on_host_threads() -> bool:
    global _on_host_threads
    if _on_host_threads is None:
        from .. import _C

        # No tensor can be on the device before it is initialised, and
        # initialising it here would break fork safety for CPU-only users.
        if not _C._is_initialized():
            return False
        count = _C._device_count()
        _on_host_threads = count > 0 and all(
            _C._device_properties(i)["runs_on_host_threads"] for i in range(count)
        )
    return _on_host_threads


def _use_calling_thread() -> bool:
    return (
        torch._C._is_multithreading_enabled()
        and os.environ.get(_SWITCH, "0") != "1"
        and _devices_run_on_host_threads()
    )


class HostThreadEngine(torch._C._ImperativeEngine):
    """PyTorch's engine; backward on the calling thread for host-thread devices."""

    def run_backward(self, *args, **kwargs):
        if not _use_calling_thread():
            return super().run_backward(*args, **kwargs)
        torch._C._set_multithreading_enabled(False)
        try:
            return super().run_backward(*args, **kwargs)
        finally:
            torch._C._set_multithreading_enabled(True)


def install() -> None:
    if type(Variable._execution_engine) is torch._C._ImperativeEngine:
        Variable._execution_engine = HostThreadEngine()

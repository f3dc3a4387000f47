"""Registers the `neuron` c10d backend: `init_process_group(backend="neuron")`,
`init_process_group(device_id=torch.device("neuron", i))` and
`backend="cpu:gloo,neuron:neuron"`. Collectives run on Gloo over TCP (any
rendezvous torchrun supports), on CPU aliases of the neuron tensors' memory."""
import datetime

import torch

from . import _C


def _create_transport(store, rank, world_size, timeout_ms):
    """The Gloo group under a neuron group (also called from C++ for the
    subgroups of split_group)."""
    from torch.distributed import ProcessGroupGloo

    return ProcessGroupGloo(store, rank, world_size, datetime.timedelta(milliseconds=timeout_ms))


def _create_backend(store, rank, world_size, timeout):
    timeout_ms = int(timeout.total_seconds() * 1000)
    transport = _create_transport(store, rank, world_size, timeout_ms)
    return _C._create_distributed_backend(transport, store, rank, world_size, timeout_ms)


def register():
    if not torch.distributed.is_available():
        return
    _C._register_distributed_types(_C)
    torch.distributed.Backend.register_backend(
        "neuron", _create_backend, extended_api=False, devices=["neuron", "cpu"]
    )

"""Registers the `neuron` c10d backend: `init_process_group(backend="neuron")`,
`init_process_group(device_id=torch.device("neuron", i))` and
`backend="cpu:gloo,neuron:neuron"`. Collectives run on Gloo over TCP (any
rendezvous torchrun supports), on CPU aliases of the neuron tensors' memory."""
import torch

from . import _C


def _create_backend(store, rank, world_size, timeout):
    from torch.distributed import ProcessGroupGloo

    transport = ProcessGroupGloo(store, rank, world_size, timeout)
    return _C._create_distributed_backend(transport, store, rank, world_size)


def register():
    if not torch.distributed.is_available():
        return
    torch.distributed.Backend.register_backend(
        "neuron", _create_backend, extended_api=False, devices=["neuron", "cpu"]
    )

"""Random numbers on the neuron device: one default generator per device,
seeded by torch.manual_seed, with CUDA's API."""
import torch

from .. import _C
from ._device import device_count
from ._utils import _get_device_index


class _DefaultGenerators:
    """torch.neuron.default_generators[i], created on first access."""

    def __getitem__(self, index):
        if index < 0:
            index += len(self)
        return _C._default_generator(index)

    def __len__(self):
        return device_count()

    def __iter__(self):
        return (self[i] for i in range(len(self)))


default_generators = _DefaultGenerators()


def _generator(device=None) -> torch.Generator:
    return _C._default_generator(_get_device_index(device, optional=True))


def manual_seed(seed: int) -> None:
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for generator in default_generators:
        generator.manual_seed(int(seed))


def seed() -> None:
    _generator().seed()


def seed_all() -> None:
    random_seed = _generator().seed()
    for generator in default_generators:
        generator.manual_seed(random_seed)


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device="neuron") -> torch.Tensor:
    return _generator(device).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    return [g.get_state() for g in default_generators]


def set_rng_state(new_state: torch.Tensor, device="neuron") -> None:
    _generator(device).set_state(new_state.clone(memory_format=torch.contiguous_format).cpu())


def set_rng_state_all(new_states) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)

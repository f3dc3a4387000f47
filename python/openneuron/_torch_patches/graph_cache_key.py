"""AOTAutograd's cache key without Inductor's code generators.

PyTorch 2.13 computes the key of every AOTAutograd cache entry (ours too)
with Inductor's FxGraphHashDetails, which first registers Inductor's code
generator for every device (`init_backend_registration`): importing them
all costs ~0.7 s, most of a warm start's time outside Dynamo, and none of
it is used by the neuron compiler. What the registration adds to the key is
the Inductor post-grad passes registered per device, which only Inductor
runs; the key of a neuron graph leaves them out, so it is the same whether
or not this process has used Inductor (a key that depended on that would
miss for no visible reason)."""
from . import require_torch

require_torch(__name__)


import contextlib

from torch._inductor import codecache


def _no_registration():
    pass


@contextlib.contextmanager
def without_inductor_backends():
    """While a neuron graph is compiled (or loaded): the cache key ignores,
    and does not trigger, Inductor's per-device backend registration."""
    saved = (codecache.init_backend_registration, codecache.custom_backend_passes,
             codecache.custom_backend_codegen_configs)
    codecache.init_backend_registration = _no_registration
    codecache.custom_backend_passes = {}
    codecache.custom_backend_codegen_configs = {}
    try:
        yield
    finally:
        (codecache.init_backend_registration, codecache.custom_backend_passes,
         codecache.custom_backend_codegen_configs) = saved

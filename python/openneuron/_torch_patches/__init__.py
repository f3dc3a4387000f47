"""Every place OpenNeuron replaces a PyTorch internal, in one package.

Each module here says why it patches, what, and for which PyTorch version,
and keeps the patch to the narrowest scope that does the job:

- precompile_scope.py: Dynamo's experimental `caching_precompile` switch is
  turned on only around torch.compile(backend="neuron")'s own work (wrapping
  a function, compiling its frames), never for other backends; a failure
  while saving a frame compiles it again without saving.
- precompile_package.py: Dynamo's frame packages (how frames are filed,
  named, and loaded), for frames of our own compiles.
- precompile_entries.py: when saved frames are written, used or passed over.
- precompile_guards.py: identity guards kept and saved with our frames.
- multiprocessing_sharing.py: neuron tensors sent to other processes
  (torch.multiprocessing) share their memory, as CUDA tensors do.
- shared_parameters.py: `Module._apply` keeps tied parameters tied through
  `module.to("neuron")` (PyTorch converts in place only for its own device
  types); wraps PyTorch's method, which runs unchanged.
- device_policies.py: per-device-type choices PyTorch makes for "cpu" and
  "cuda" only (linear_cross_entropy's accumulation), made for "neuron" as
  for the CPU; other device types untouched.
- graph_cache_key.py: AOTAutograd's cache key computed without Inductor's
  per-device code generators, only while a neuron graph is compiled or
  loaded (a context manager).
- torch_source_key.py: PyTorch's torch_key() digest remembered across
  processes under a fingerprint of torch's files, handed to PyTorch through
  the setter its cached function provides.
- autograd_engine.py: backward on the calling thread while every neuron
  device runs kernels on host threads (PyTorch's own switch, set only for
  the duration of each backward call).

The patches are written against the PyTorch release below: another release
fails at import (`require_torch`), where a silent mismatch would break
compiles in ways far from their cause.
"""

import contextlib
import gc

import torch

WRITTEN_FOR = "2.13"


def require_torch(module_name):
    """Asserts that the running PyTorch is the release the patches were written for."""
    running = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if running != WRITTEN_FOR:
        raise ImportError(
            f"{module_name} patches PyTorch {WRITTEN_FOR} internals, but PyTorch {torch.__version__} "
            "is installed; these patches must be checked against that release first.")


def replace(owner, name, make_replacement):
    """Sets owner.name to make_replacement(original), once (idempotent):
    the replacement is marked so a second call leaves it alone."""
    original = getattr(owner, name)
    if getattr(original, "_openneuron_patch", False):
        return
    replacement = make_replacement(original)
    target = replacement.__func__ if isinstance(replacement, (classmethod, staticmethod)) else replacement
    target._openneuron_patch = True
    target.__wrapped__ = original
    setattr(owner, name, replacement)


@contextlib.contextmanager
def gc_paused():
    """The cyclic garbage collector off for a block that makes tens of
    thousands of small objects and frees none (pickling or unpickling a saved
    frame's guards): each allocation burst would otherwise set off a full
    collection that walks the whole heap, about half of the time of pickling
    the guards of a 32-layer encoder (0.50 s -> 0.22 s) and 0.25 s of GPT-2's
    0.6 s warm start."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()

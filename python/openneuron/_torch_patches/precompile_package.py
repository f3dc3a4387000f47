"""How Dynamo's frame packages file, name and load the frames of our compiles.

Each patch mends one PyTorch 2.13 defect of `caching_precompile` and acts only
while torch.compile(backend="neuron") is active (precompile_scope.active());
install() puts every precompile patch in place.
"""

import itertools
import random
import sys
import types

import torch

from . import precompile_entries, precompile_guards, precompile_scope, replace, require_torch
from .precompile_scope import active

require_torch(__name__)


def _decorated_functions_by_their_globals(original):
    """PyTorch 2.13 files the compiled function under its ``__module__``, which
    ``functools.wraps`` copies from the function a decorator wraps: the frame
    of a decorated forward (every transformers model) is then saved with, and
    its guards and compiled graphs installed into, the wrong module, and a
    warm process never uses it. Use the module whose globals the code runs in."""

    def add_function(self, python_code, python_module, *args, **kwargs):
        fn = self._innermost_fn
        if active() and fn is not None and python_code is getattr(fn, "__code__", None):
            python_module = fn.__globals__.get("__name__", python_module)
        return original(self, python_code, python_module, *args, **kwargs)

    return add_function


def _module_globals_as_import_sources(original):
    """PyTorch 2.13's compiled code and guards reach some modules through a
    global Dynamo installs under a name made from the object's id
    (``___module_collections_<id>_c<n>``, to build the OrderedDict every
    transformers ModelOutput is; ``_<id>_c<n>`` for ``torch``), but it does not
    save those globals with the frame. Record each such module as one of the
    frame's import sources, which are saved and imported again, by the
    module's full name, before the frame is installed."""

    def install_global_by_id(self, prefix, value):
        name = original(self, prefix, value)
        if active() and isinstance(value, types.ModuleType) and sys.modules.get(value.__name__) is value:
            self.import_sources[name] = value.__name__
            package = getattr(self.root_tx, "package", None)
            if package is not None:
                package.add_import_source(name, value.__name__)
        return name

    return install_global_by_id


def _missing_grads_as_none(original):
    """PyTorch 2.13 saves a guarded tensor's .grad as a placeholder when the
    grad itself is not guarded (a parameter after backward), then fails to
    load it ("assigned grad expected to be a Tensor"); load such a grad as
    None, which is what an unguarded grad means. (Only saved states reach
    this loader.)"""
    original = original.__func__

    def unpickle_tensor(cls, meta_tensor, device, pytype, dispatch_keys_raw, grad):
        if grad is not None and not isinstance(grad, torch.Tensor):
            grad = None
        return original(cls, meta_tensor, device, pytype, dispatch_keys_raw, grad)

    # Saved states name the loader by attribute: keep its name.
    unpickle_tensor.__name__ = original.__name__
    unpickle_tensor.__qualname__ = original.__qualname__
    return classmethod(unpickle_tensor)


def _each_inlined_source_once(original):
    """PyTorch 2.13 records the source of every function a compile inlined,
    once per call: the forward of each of 32 identical layers is read,
    checked against its module's file and hashed 32 times (0.3 s of a
    32-layer encoder's compile, growing with depth). A code object already
    recorded in this package gives the same record: skip it.

    It also fails the whole compile when a source cannot be read (a script
    read from stdin, as in a heredoc: OSError "could not get source code")
    or does not match its module's (AssertionError "Source mismatch"). Such
    a frame could not be checked when a later process loads it: it is
    compiled without saving it, as PyTorch does with frames it bypasses."""

    def add_inlined_source(self, sources):
        if not active():
            return original(self, sources)
        info, recorded = self.__dict__.get("_openneuron_inlined", (None, None))
        if info is not self._source_info:  # a package initialized again starts a new record
            recorded = set()
            self._openneuron_inlined = (self._source_info, recorded)
        fresh = [code for code in dict.fromkeys(sources) if code not in recorded]
        try:
            original(self, fresh)
        except (OSError, TypeError, AssertionError):
            self.bypass_current_entry()
            return
        if not (self._current_entry and self._current_entry.bypassed):
            recorded.update(fresh)

    return add_inlined_source


def _unique_name_counters():
    """PyTorch 2.13 names the globals a compiled frame installs with counters
    that start at 0 in every process (`__builtins_dict___0`, and
    `___module_collections_<id>_c0` with the object's id(), the same in
    processes forked from one parent), so the first compile after a warm
    load collides with the loaded frame's ("Name ... already exists in
    scope"); start both elsewhere. (Only the names change, for every
    backend; what a compile does does not.) The start comes from the OS,
    not from `random`: a program (PyTorch's test utilities) that seeds
    `random` before its first compile got the same start in every run,
    and collided with the frames its earlier runs had saved."""
    import torch._dynamo.bytecode_transformation as bytecode
    import torch._dynamo.output_graph as output_graph

    start = random.SystemRandom()
    bytecode._unique_id_counter = itertools.count(start.randrange(1 << 40))
    output_graph._compile_id_counter = itertools.count(start.randrange(1 << 40))


_installed = False


def install():
    """Every precompile patch (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    from torch._dynamo import guards
    from torch._dynamo.output_graph import OutputGraph
    from torch._dynamo.package import CompilePackage

    precompile_scope.install()
    _unique_name_counters()
    replace(guards.GuardsStatePickler, "_unpickle_tensor", _missing_grads_as_none)
    precompile_guards.install()
    replace(CompilePackage, "_add_function", _decorated_functions_by_their_globals)
    replace(CompilePackage, "add_inlined_source", _each_inlined_source_once)
    replace(OutputGraph, "install_global_by_id", _module_globals_as_import_sources)
    precompile_entries.install()

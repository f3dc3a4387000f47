"""Dynamo's saved frames (`caching_precompile`) for our compiles only.

Why: PyTorch 2.13 reads the process-wide `torch._dynamo.config.caching_precompile`
when torch.compile wraps a function (it then makes a CompilePackage and looks
for a saved frame), when a frame is compiled (it records the frame for saving,
and drops identity guards) and when AOTAutograd picks its cache. Left on for
the process, every later torch.compile, Inductor and `backend="eager"`
included, would save and load frames too, and fail where saving fails.

What: torch.compile(backend="neuron") gets a CompilePackage of its own, marked
as ours; the switch is on only while such a context wraps a function and
while a frame of it compiles (Dynamo compiles one frame at a time, under its
compile lock), and restored after. Other backends see the switch as the user
left it.

Saving never fails a compile: a frame whose compile fails in the package code
(PyTorch raises PackageError for code it cannot name, such as a property
getter compiled as a frame of its own: transformers' `loss_function` when a
model is called with `labels=`) is compiled again without the package,
unsaved; logged at INFO on logger `openneuron.compiler`.
"""

import contextlib
import logging
import os

import torch

from . import replace, require_torch

require_torch(__name__)
log = logging.getLogger("openneuron.compiler")

# Where an error raised (its innermost frame) means "saving the frame failed".
_PACKAGE_SOURCE = os.path.join("torch", "_dynamo", "package.py")


def is_ours(package):
    return package is not None and getattr(package, "_openneuron", False)


_active = 0  # our contexts wrapping a function or compiling a frame (one at a time)


def _switched_on():
    return torch._dynamo.config.patch(caching_precompile=True)


@contextlib.contextmanager
def _ours_active():
    """The switch on, and the patches of the other modules here active."""
    global _active
    _active += 1
    try:
        with _switched_on():
            yield
    finally:
        _active -= 1


def active():
    """True while torch.compile(backend="neuron") wraps a function or
    compiles a frame with saved frames on: the other patches in this
    package act only then, and leave every other compile as PyTorch does it."""
    return _active > 0


def _is_our_backend(backend):
    from openneuron.compiler.backend import neuron_backend

    backend = getattr(backend, "compiler_fn", backend)  # torch.compile's _TorchCompileWrapper
    return backend == "neuron" or backend is neuron_backend


def _causes(error):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _raised_by_saving(error):
    """True when the error comes from the package (saving or loading
    frames), not from compiling the frame itself: a PackageError, or any
    error raised inside torch/_dynamo/package.py."""
    from torch._dynamo.package import PackageError

    for cause in _causes(error):
        if isinstance(cause, PackageError):
            return True
        tb = cause.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None and tb.tb_frame.f_code.co_filename.endswith(_PACKAGE_SOURCE):
            return True
    return False


def _our_package_for_neuron(original):
    from torch._dynamo.package import CompilePackage

    def _optimize(rebuild_ctx, *args, **kwargs):
        backend = args[0] if args else kwargs.get("backend", "inductor")
        from openneuron.compiler.config import settings

        if (kwargs.get("package") is None and not kwargs.get("disable", False)
                and _is_our_backend(backend) and settings().precompile):
            package = CompilePackage(fn=None, dynamo=None, ignore_inlined_sources=False)
            package._openneuron = True
            kwargs["package"] = package
        return original(rebuild_ctx, *args, **kwargs)

    return _optimize


def _switched_on_while_wrapping(original):
    def __call__(self, fn):
        if not is_ours(getattr(self, "_package", None)):
            return original(self, fn)
        with _ours_active():
            return original(self, fn)

    return __call__


def _switched_on_while_compiling(original):
    def __call__(self, frame, cache_entry, hooks, frame_state, *, skip=0):
        package = self._package
        if not is_ours(package):
            return original(self, frame, cache_entry, hooks, frame_state, skip=skip + 1)
        try:
            with _ours_active():
                return original(self, frame, cache_entry, hooks, frame_state, skip=skip + 1)
        except Exception as e:  # noqa: BLE001 -- re-raised unless saving failed
            if not _raised_by_saving(e):
                raise
            log.info("openneuron: %s is compiled without saving it (%s: %s)",
                     frame.f_code.co_qualname, type(e).__name__, e)
        self._package = None
        try:  # as any other compile: unsaved
            return original(self, frame, cache_entry, hooks, frame_state, skip=skip + 1)
        finally:
            self._package = package

    return __call__


def install():
    from torch._dynamo import convert_frame, eval_frame

    replace(eval_frame, "_optimize", _our_package_for_neuron)
    replace(eval_frame._TorchDynamoContext, "__call__", _switched_on_while_wrapping)
    replace(convert_frame.ConvertFrameAssert, "__call__", _switched_on_while_compiling)

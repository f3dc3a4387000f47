"""When Dynamo's saved frames (precompile.py) are written, used or passed over.

- Written after each compile, not only at exit: a process that ends by
  os._exit, a signal or a crash (a killed torchrun rank, a forked worker)
  keeps what it compiled. Writes are atomic (PyTorch's write_atomic).
- Used only for the function they were saved from. PyTorch 2.13 names an
  entry by qualified name and first line alone, so `Net.forward` at line 12 of
  two files shares one; an entry whose code or module is another function's is
  passed over.
- Passed over quietly when expected (its sources changed; logged at INFO on
  logger ``openneuron.compiler``), with one warning line when loading fails
  otherwise; the frame is then compiled as usual. PyTorch alone prints a
  traceback, and fails for good on some errors.
"""

import builtins
import dis
import logging
import sys
import types

from .config import settings

log = logging.getLogger("openneuron.compiler")


def _entry_of_another_function(fn, dynamo):
    """Why the saved entry `dynamo` is not `fn`'s ("" when it is)."""
    from torch._dynamo.eval_frame import innermost_fn

    code = innermost_fn(fn).__code__
    saved = dynamo.codes[0]
    module = innermost_fn(fn).__globals__.get("__name__")
    saved_code = saved.python_code
    if saved.python_module != module:
        return f"it was saved from module {saved.python_module}, not {module}"
    if (saved_code.co_filename, saved_code.co_code) != (code.co_filename, code.co_code):
        return f"it was saved from other code ({saved_code.co_filename})"
    return ""


def _missing_globals(package):
    """Globals the package's installed bytecode loads that its module does not
    define (a frame run with them would raise NameError mid-call)."""
    from torch._dynamo.package import SerializedCode

    for entry in package._codes.values():
        scope = sys.modules[entry.python_module].__dict__
        for guarded in entry.guarded_codes:
            pending = [SerializedCode.to_code_object(guarded.dynamo_code)]
            while pending:
                code = pending.pop()
                pending += [c for c in code.co_consts if isinstance(c, types.CodeType)]
                for ins in dis.get_instructions(code):
                    if ins.opname == "LOAD_GLOBAL":
                        name = ins.argval
                        if name not in scope and not hasattr(builtins, name):
                            yield name


def _start_fresh(package, fn, initialize):
    package._initialized = False
    initialize(package, fn, None, ignore_inlined_sources=False)
    # Dynamo calls install() next; with nothing loaded it must do nothing (an
    # entry without compiled code would mark the frame as never compiled).
    package._openneuron_nothing_to_install = True


def _load_or_pass_over():
    from torch._dynamo.package import CompilePackage

    initialize = CompilePackage.initialize
    install = CompilePackage.install
    if getattr(install, "_openneuron", False):
        return

    def initialize_from_saved(self, fn, dynamo=None, ignore_inlined_sources=False):
        if dynamo is None:
            return initialize(self, fn, dynamo, ignore_inlined_sources)
        # Dynamo's switch stays on for the process once on; ours is read now.
        reason = "" if settings().precompile else "saved frames are off in this process's settings"
        reason = reason or _entry_of_another_function(fn, dynamo)
        if not reason:
            try:
                return initialize(self, fn, dynamo, ignore_inlined_sources)
            except Exception as e:  # noqa: BLE001 -- sources changed, other versions: compile
                reason = f"{type(e).__name__}: {e}"
        log.info("openneuron: the saved frame of %s is not used (%s); compiling it",
                 getattr(fn, "__qualname__", fn), reason)
        _start_fresh(self, fn, initialize)

    def install_saved(self, backends):
        if self.__dict__.pop("_openneuron_nothing_to_install", False):
            return
        try:
            install(self, backends)
            missing = sorted(_missing_globals(self))
            # PyTorch 2.13 does not save every global its code reads: the
            # frame would raise NameError mid-call.
            if missing:
                raise NameError(f"saved code reads globals this process lacks: {', '.join(missing)}")
        except Exception as e:  # noqa: BLE001 -- any failure: compile instead of load
            try:
                self.uninstall()
            except Exception:  # noqa: BLE001 -- partly installed; nothing more to undo
                pass
            log.warning("openneuron: a saved frame could not be loaded (%s: %s); compiling it afresh",
                        type(e).__name__, e)
            _start_fresh(self, self._innermost_fn, initialize)
            self.__dict__.pop("_openneuron_nothing_to_install", None)

    initialize_from_saved.__wrapped__ = initialize
    install_saved.__wrapped__ = install
    install_saved._openneuron = True
    CompilePackage.initialize = initialize_from_saved
    CompilePackage.install = install_saved


def _save_after_each_compile():
    from torch._dynamo.package import DynamoCache

    record = DynamoCache.record_package
    if getattr(record, "_openneuron", False):
        return

    def record_and_save(package):
        record(package)
        if not settings().precompile:
            return
        try:
            DynamoCache.save_cache_entry(package.cache_entry(), package.source_id)
        except Exception as e:  # noqa: BLE001 -- only the next warm start is lost
            log.info("openneuron: a compiled frame was not saved (%s: %s)", type(e).__name__, e)

    record_and_save._openneuron = True
    DynamoCache.record_package = record_and_save


def _bypass_quietly():
    """A frame that cannot be saved is compiled and runs as usual; PyTorch
    logs a warning for each (every compile of a frame with parameters baked
    in, or with a guard on an object without a name). Log it at INFO."""
    import torch
    from torch._dynamo.output_graph import OutputGraph

    original = OutputGraph.bypass_package
    if getattr(original, "_openneuron", False):
        return

    def bypass_package(self, reason="", **kwargs):
        if not self.package or torch._dynamo.config.strict_precompile:
            return original(self, reason, **kwargs)
        log.info("openneuron: a compiled frame is not saved: %s", reason)
        self.package.bypass_current_entry()
        self.package = None

    bypass_package._openneuron = True
    OutputGraph.bypass_package = bypass_package


def install():
    """Patches Dynamo's precompile cache (idempotent)."""
    _load_or_pass_over()
    _save_after_each_compile()
    _bypass_quietly()

"""What a compiled graph does with the ops it could not compile: the warning
(or, strict, the error) naming them, and the call that appends lifted
constants. Shared by the backend and by graphs loaded from saved frames
(precompile.py), which must not import the backend (it imports them)."""
import warnings

from .config import settings


class CompileFallbackWarning(UserWarning):
    """Part of a compiled graph runs through eager kernels."""


class StrictCompileError(RuntimeError):
    """OPENNEURON_COMPILE_STRICT=1 and part of a graph could not be compiled."""


def report_fallbacks(name, fallbacks):
    """One warning per graph naming the ops it runs through eager kernels
    and why; in strict mode, an error."""
    if not fallbacks:
        return
    ops = "; ".join(f"{f['op']} ({f['reason']})" for f in fallbacks)
    if settings().strict:
        raise StrictCompileError(f"graph {name}: ops not compiled: {ops}")
    warnings.warn(f"openneuron: graph {name}: ops run through eager kernels: {ops}", CompileFallbackWarning)


def with_constants(fn, constants):
    """Boxed `fn` called with `constants` appended to its arguments."""
    def run(args):
        args.extend(constants)
        return fn(args)

    run._boxed_call = True
    return run

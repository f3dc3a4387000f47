"""The compiler's C ABI (libopenneuron_compiler.so), loaded with ctypes: the
compiler library has no PyTorch or Python dependency."""

import ctypes
import json
import os

_lib = None


class CompilerUnsupported(RuntimeError):
    """The graph cannot be compiled; it runs through eager kernels instead."""


class CompilerError(RuntimeError):
    """The compiler failed (bad input, or the system C++ compiler failed)."""


def library_path() -> str:
    from .. import _C  # the compiler library is installed beside it

    return os.path.join(os.path.dirname(_C.__file__), "libopenneuron_compiler.so")


def _library():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(library_path())
        lib.openneuron_compile.restype = ctypes.c_void_p
        lib.openneuron_compile.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        lib.openneuron_free.argtypes = [ctypes.c_void_p]
        _lib = lib
    return _lib


def compile_graph(graph_text: str, options: dict) -> dict:
    """`graph_text`: our JSON graph (serialize.graph_json), as text."""
    lib = _library()
    raw = lib.openneuron_compile(graph_text.encode(), json.dumps(options).encode())
    try:
        text = ctypes.string_at(raw).decode()
    finally:
        lib.openneuron_free(raw)
    plan = json.loads(text)
    if "error" in plan:
        kind = CompilerUnsupported if plan["error"] == "unsupported" else CompilerError
        raise kind(plan["message"])
    return plan

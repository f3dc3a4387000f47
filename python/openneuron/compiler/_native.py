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
        lib.openneuron_find_kernel_library.restype = ctypes.c_void_p
        lib.openneuron_find_kernel_library.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        lib.openneuron_free.argtypes = [ctypes.c_void_p]
        _lib = lib
    return _lib


def _call(function, *texts: str) -> dict:
    """The JSON answer of one of the library's functions (text in, text out)."""
    lib = _library()
    raw = getattr(lib, function)(*(t.encode() for t in texts))
    try:
        answer = json.loads(ctypes.string_at(raw).decode())
    finally:
        lib.openneuron_free(raw)
    if "error" in answer:
        kind = CompilerUnsupported if answer["error"] == "unsupported" else CompilerError
        raise kind(answer["message"])
    return answer


def compile_graph(graph_text: str, options: dict) -> dict:
    """`graph_text`: our JSON graph (serialize.graph_json), as text."""
    return _call("openneuron_compile", graph_text, json.dumps(options))


def find_kernel_library(source_digest: str, options: dict) -> dict:
    """The kernel library compile_graph built from a source with this digest
    (one of its plan["libraries"]), from the kernel cache under this
    machine's toolchain, verified, without lowering: {"hit": True,
    "library": path, ...} or {"hit": False, "miss_reason": why, ...}."""
    return _call("openneuron_find_kernel_library", source_digest, json.dumps(options))

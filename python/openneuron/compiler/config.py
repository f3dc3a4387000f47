"""Settings of the neuron compiler, read from the environment once per call
site so tests can change them (see the README's environment table)."""

import os
from dataclasses import dataclass


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


@dataclass(frozen=True)
class CompileSettings:
    cache_dir: str
    cache_enabled: bool
    cache_max_bytes: int
    strict: bool
    debug_dir: str
    precompile: bool
    graph_cache: bool

    @property
    def saves_graphs(self) -> bool:
        """Whether compiled graphs are built savable: for AOTAutograd's cache
        (a new process skips AOTAutograd's tracing and our compiler), off when
        caching is off or graphs are dumped (a loaded graph dumps nothing),
        and for the precompile cache (which needs the same)."""
        return self.graph_cache and self.cache_enabled and not self.debug_dir


def settings() -> CompileSettings:
    default_dir = os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "openneuron", "kernels"
    )
    cache_enabled = _flag("OPENNEURON_COMPILE_CACHE", True)
    graph_cache = _flag("OPENNEURON_COMPILE_GRAPH_CACHE", True)
    debug_dir = os.environ.get("OPENNEURON_COMPILE_DEBUG", "")
    return CompileSettings(
        cache_dir=os.environ.get("OPENNEURON_COMPILE_CACHE_DIR") or default_dir,
        cache_enabled=cache_enabled,
        cache_max_bytes=int(float(os.environ.get("OPENNEURON_COMPILE_CACHE_MAX_MB", "1024")) * (1 << 20)),
        strict=_flag("OPENNEURON_COMPILE_STRICT", False),
        debug_dir=debug_dir,
        # Saved frames hold compiled graphs: off with the caches, and when
        # graphs are dumped (a loaded frame is not traced, so dumps nothing).
        precompile=_flag("OPENNEURON_COMPILE_PRECOMPILE", True) and cache_enabled and graph_cache and not debug_dir,
        graph_cache=graph_cache,
    )

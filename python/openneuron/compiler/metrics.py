"""Counters of the neuron compiler: graphs (and those loaded from
AOTAutograd's cache), kernels, kernel launches per run
of the graphs (small kernels in a row share one), kernel-cache hits and
misses, compile time, recompiles with the guard that failed. Read with
openneuron.compiler.metrics()."""

import collections
import threading

_lock = threading.Lock()
_counts = collections.Counter()
_times = collections.Counter()
_extern_ops = collections.Counter()
_fallback_ops = collections.Counter()
_recompiles = collections.deque(maxlen=100)  # (compile id, failed guard), newest last


def record_graph(plan, seconds, loaded=False):
    """A compiled graph; `loaded`: its wrapper came from AOTAutograd's cache
    (traced and compiled by an earlier process)."""
    stats = plan.get("stats", {})
    with _lock:
        _counts["graphs"] += 1
        _counts["graphs_loaded"] += loaded
        _counts["kernels"] += stats.get("kernels", 0)
        _counts["kernel_launches"] += stats.get("kernel_launches", 0)
        _counts["buffers_reused"] += stats.get("buffers_reused", 0)
        _counts["fusion_retries"] += stats.get("fusion_retries", 0)
        cache = plan.get("cache")
        if cache is not None:
            _counts["cache_hits" if cache["hit"] else "cache_misses"] += 1
        _times["compile_seconds"] += seconds
        _times["build_seconds"] += stats.get("build_seconds", 0.0)
        _extern_ops.update(plan.get("externs", []))
        _fallback_ops.update(f["op"] for f in plan.get("fallbacks", []))


def record_recompile(compile_id, reason):
    with _lock:
        _counts["recompiles"] += 1
        _recompiles.append({"compile_id": compile_id, "reason": reason})


def record_graph_fallback():
    with _lock:
        _counts["graphs_fallback"] += 1


def snapshot():
    with _lock:
        out = {k: _counts.get(k, 0) for k in ("graphs", "graphs_fallback", "graphs_loaded", "kernels", "kernel_launches", "cache_hits",
                                               "cache_misses", "buffers_reused", "recompiles",
                                               "fusion_retries")}
        out["compile_seconds"] = _times.get("compile_seconds", 0.0)
        out["build_seconds"] = _times.get("build_seconds", 0.0)
        out["extern_ops"] = dict(_extern_ops)
        out["fallback_ops"] = dict(_fallback_ops)
        out["recompile_reasons"] = list(_recompiles)
        return out


def reset():
    with _lock:
        _counts.clear()
        _times.clear()
        _extern_ops.clear()
        _fallback_ops.clear()
        _recompiles.clear()

"""Counters of the neuron compiler: graphs (and those loaded from
AOTAutograd's cache), kernels, kernel launches per run
of the graphs (small kernels in a row share one), kernel-cache hits and
misses, compile time and where it goes, recompiles with the guard that
failed. Read with openneuron.compiler.metrics()."""

import collections
import threading

_lock = threading.Lock()
_counts = collections.Counter()
_times = collections.Counter()
_extern_ops = collections.Counter()
_fallback_ops = collections.Counter()
_recompiles = collections.deque(maxlen=100)  # (compile id, failed guard), newest last
_pending_frames = []  # (index in Dynamo's frame times, backend seconds)


# Parts of cold compile time (compile_time in the snapshot), in seconds:
# PyTorch's (Dynamo's frame tracing and guards, AOTAutograd's tracing and
# partitioning) and ours (Python-side graph preparation and wrapper, IR
# lowering and passes, code generation, kernel builds, kernel loading).
_PHASES = ("dynamo", "aot_autograd", "python", "lower", "codegen", "build", "load")


def record_graph(plan, seconds, loaded=False, python_seconds=0.0, load_seconds=0.0):
    """A compiled graph; `loaded`: its wrapper came from AOTAutograd's cache
    (traced and compiled by an earlier process). `python_seconds` and
    `load_seconds`: the parts of `seconds` spent in our Python and loading kernels."""
    stats = plan.get("stats", {})
    with _lock:
        for phase in ("lower", "codegen", "build"):
            _times["phase_" + phase] += stats.get(phase + "_seconds", 0.0)
        _times["phase_python"] += python_seconds
        _times["phase_load"] += load_seconds
        _counts["kernels_distinct"] += stats.get("kernels_distinct", 0)
        _counts["kernels_built"] += stats.get("kernels_built", 0)
        _counts["kernels_found"] += stats.get("kernels_found", 0)
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


def record_frame(backend_seconds, ours_seconds):
    """A frame Dynamo compiles with our backend, which took `backend_seconds`
    (AOTAutograd and our graphs' `ours_seconds`). The frame's own time is
    PyTorch's record (compilation_time_metrics), written once Dynamo finishes
    the frame: its index there is taken now and read by snapshot()."""
    with _lock:
        _times["phase_aot_autograd"] += max(0.0, backend_seconds - ours_seconds)
        frames = _dynamo_frame_times()
        if frames is not None:
            _pending_frames.append((len(frames), backend_seconds))


def _dynamo_frame_times():
    try:
        from torch._dynamo.utils import compilation_time_metrics
    except ImportError:
        return None
    return compilation_time_metrics.get("_compile.compile_inner", [])


def _dynamo_seconds():
    """Dynamo's part of our frames' compile: each frame's time less its backend's."""
    frames = _dynamo_frame_times() or []
    return sum(max(0.0, frames[i] - backend) for i, backend in _pending_frames if i < len(frames))


def compile_seconds():
    with _lock:
        return _times.get("compile_seconds", 0.0)


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
                                               "fusion_retries", "kernels_distinct", "kernels_built",
                                               "kernels_found")}
        out["compile_seconds"] = _times.get("compile_seconds", 0.0)
        out["build_seconds"] = _times.get("build_seconds", 0.0)
        out["compile_time"] = {phase: _times.get("phase_" + phase, 0.0) for phase in _PHASES}
        out["compile_time"]["dynamo"] = _dynamo_seconds()
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
        _pending_frames.clear()

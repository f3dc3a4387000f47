"""Memory of the neuron device: the HAL caching allocator's statistics, with
the keys and meaning of torch.cuda.memory_stats()."""
import collections
import pickle
import sys
import warnings

from .. import _C
from ._utils import _get_device_index


def _index(device) -> int:
    return _get_device_index(device, optional=True)


def memory_stats(device=None) -> dict:
    """Flat, sorted dict: "allocated_bytes.all.current", "num_ooms", ..."""
    result = []

    def flatten(prefix, obj):
        if isinstance(obj, dict):
            for key, value in obj.items():
                flatten(f"{prefix}.{key}" if prefix else key, value)
        else:
            result.append((prefix, obj))

    flatten("", _C._memory_stats(_index(device)))
    return collections.OrderedDict(sorted(result))


def memory_allocated(device=None) -> int:
    return _C._memory_stats(_index(device))["allocated_bytes"]["all"]["current"]


def max_memory_allocated(device=None) -> int:
    return _C._memory_stats(_index(device))["allocated_bytes"]["all"]["peak"]


def memory_reserved(device=None) -> int:
    return _C._memory_stats(_index(device))["reserved_bytes"]["all"]["current"]


def max_memory_reserved(device=None) -> int:
    return _C._memory_stats(_index(device))["reserved_bytes"]["all"]["peak"]


def reset_peak_memory_stats(device=None) -> None:
    _C._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device=None) -> None:
    _C._reset_accumulated_memory_stats(_index(device))


def reset_max_memory_allocated(device=None) -> None:
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """Returns every unused cached block to the device."""
    _C._empty_cache()


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of the device, as torch.cuda.mem_get_info."""
    return tuple(_C._mem_get_info(_index(device)))


def set_per_process_memory_fraction(fraction, device=None) -> None:
    """Bounds this process's memory on the device to `fraction` (0..1) of its
    total memory, as torch.cuda.set_per_process_memory_fraction: an
    allocation past it raises torch.OutOfMemoryError naming the fraction."""
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(fraction, _index(device))


def get_per_process_memory_fraction(device=None) -> float:
    """The fraction set by set_per_process_memory_fraction (1.0 by default)."""
    return _C._get_memory_fraction(_index(device))


def memory_snapshot(device=None) -> list:
    """Segments and blocks of the caching allocator of `device` (the
    "segments" of _snapshot())."""
    index = _index(device)
    return [s for s in _C._memory_snapshot_with_history()["segments"] if s["device"] == index]


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                           device=None, clear_history=False, compile_context=False,
                           global_record_annotations=False, skip_actions=None) -> None:
    """As torch.cuda.memory._record_memory_history: records the stack of each
    allocation (context="alloc"/"state"; frees too with "all"; C++ frames
    too with stacks="all") and, with enabled="all", a trace of the last
    max_entries allocator events per device; enabled=None stops recording.
    Every neuron device records (device is accepted for compatibility)."""
    if isinstance(enabled, bool):  # the legacy form: enabled=True/False
        enabled = "all" if enabled else None
    _C._record_memory_history(enabled, context, stacks, int(max_entries), bool(clear_history))


def _snapshot(device=None) -> dict:
    """As torch.cuda.memory._snapshot: {"segments", "device_traces",
    "allocator_settings"} for every neuron device, readable by
    torch.cuda._memory_viz and pytorch.org/memory_viz."""
    return _C._memory_snapshot_with_history()


def _dump_snapshot(filename="dump_snapshot.pickle") -> None:
    """Pickles _snapshot() to `filename` (open it at pytorch.org/memory_viz)."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def host_memory_stats() -> dict:
    """Statistics of the pinned host allocator."""
    return _C._pinned_memory_stats()


def host_memory_stats_as_nested_dict() -> dict:
    return host_memory_stats()


def memory_stats_as_nested_dict(device=None) -> dict:
    """memory_stats() before flattening, as torch.cuda's."""
    return _C._memory_stats(_index(device))


def memory_cached(device=None) -> int:
    """Deprecated; see memory_reserved() (as torch.cuda.memory_cached)."""
    warnings.warn("torch.neuron.memory_cached has been renamed to torch.neuron.memory_reserved",
                  FutureWarning, stacklevel=2)
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """Deprecated; see max_memory_reserved()."""
    warnings.warn("torch.neuron.max_memory_cached has been renamed to torch.neuron.max_memory_reserved",
                  FutureWarning, stacklevel=2)
    return max_memory_reserved(device)


def reset_max_memory_cached(device=None) -> None:
    """Deprecated; see reset_peak_memory_stats()."""
    warnings.warn("torch.neuron.reset_max_memory_cached now calls torch.neuron.reset_peak_memory_stats",
                  FutureWarning, stacklevel=2)
    reset_peak_memory_stats(device)


def caching_allocator_alloc(size, device=None, stream=None) -> int:
    """A raw block of `size` bytes from the caching allocator, for `stream`
    (the current one by default), as an address; free it with
    caching_allocator_delete."""
    from .streams import stream as use_stream
    index = _index(device)
    if stream is None:
        return _C._caching_allocator_alloc(int(size), index)
    with use_stream(stream):
        return _C._caching_allocator_alloc(int(size), index)


def caching_allocator_delete(mem_ptr: int) -> None:
    """Frees a block from caching_allocator_alloc."""
    _C._caching_allocator_delete(int(mem_ptr))


def get_allocator_backend() -> str:
    """"native": the HAL's caching allocator (the only one)."""
    return "native"


def list_gpu_processes(device=None) -> str:
    """As torch.cuda.list_gpu_processes, which reads NVML: the neuron
    drivers do not list other processes, so the answer says so."""
    index = _index(device)
    return f"neuron:{index}\nnot applicable: the neuron driver does not list the processes using a device"


def _not_supported(name: str, why: str):
    def refuse(*args, **kwargs):
        raise RuntimeError(f"torch.neuron.memory.{name} is not supported: {why}")
    refuse.__name__ = name
    refuse.__doc__ = f"Not supported on neuron: {why}"
    return refuse


_ONE_ALLOCATOR = "the HAL's caching allocator serves every neuron tensor and cannot be swapped or bypassed"
caching_allocator_enable = _not_supported("caching_allocator_enable", _ONE_ALLOCATOR)
caching_allocator_disabled = _not_supported("caching_allocator_disabled", _ONE_ALLOCATOR)
change_current_allocator = _not_supported("change_current_allocator", _ONE_ALLOCATOR)
NeuronPluggableAllocator = _not_supported("NeuronPluggableAllocator", _ONE_ALLOCATOR)
MemPool = _not_supported("MemPool", "private memory pools are not implemented yet")
use_mem_pool = _not_supported("use_mem_pool", "private memory pools are not implemented yet")
reset_peak_host_memory_stats = _not_supported(
    "reset_peak_host_memory_stats", "the pinned host allocator keeps no peaks; see host_memory_stats()")
reset_accumulated_host_memory_stats = _not_supported(
    "reset_accumulated_host_memory_stats", "the pinned host allocator keeps no accumulated counts")


def _format_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A human-readable table of memory_stats(), like torch.cuda's."""
    index = _index(device)
    stats = _C._memory_stats(index)
    rows = [
        ("Allocated memory", "allocated_bytes", True),
        ("Active memory", "active_bytes", True),
        ("Requested memory", "requested_bytes", True),
        ("Reserved memory", "reserved_bytes", True),
        ("Non-releasable memory", "inactive_split_bytes", True),
        ("Allocations", "allocation", False),
        ("Active allocs", "active", False),
        ("Reserved segments", "segment", False),
        ("Non-releasable allocs", "inactive_split", False),
    ]
    pools = [("all", "")] if abbreviated else [
        ("all", ""), ("large_pool", "  from large pool"), ("small_pool", "  from small pool")]
    width = 24
    lines = [
        "=" * 91,
        f" OpenNeuron memory summary, device ID {index}".ljust(91),
        "-" * 91,
        f"  num_alloc_retries: {stats['num_alloc_retries']:<8}  num_ooms: {stats['num_ooms']:<8}",
        "=" * 91,
        f"{'Metric':<{width}} | {'Cur Usage':>14} | {'Peak Usage':>14} | {'Tot Alloc':>14} | {'Tot Freed':>14}",
        "-" * 91,
    ]
    for title, key, is_bytes in rows:
        fmt = _format_bytes if is_bytes else str
        for pool, suffix in pools:
            s = stats[key][pool]
            name = title if not suffix else suffix
            lines.append(
                f"{name:<{width}} | {fmt(s['current']):>14} | {fmt(s['peak']):>14} | "
                f"{fmt(s['allocated']):>14} | {fmt(s['freed']):>14}")
        lines.append("-" * 91)
    return "\n".join(lines) + "\n"

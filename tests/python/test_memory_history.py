"""torch.neuron.memory._record_memory_history / _snapshot / _dump_snapshot
in torch.cuda.memory's format, read by PyTorch's own torch.cuda._memory_viz:
live blocks carry the stack that allocated them, and each device has a trace
of alloc / free / segment / oom events. On the host and protected drivers,
each in a fresh interpreter."""
import pytest

from conftest import run_python

DRIVERS = {
    "host": {},
    "protected": {"OPENNEURON_DRIVER": "protected", "OPENNEURON_CPU_FALLBACK": "silent"},
}


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_snapshot_has_stacks_and_a_trace_memory_viz_reads(driver, tmp_path):
    run_python(f"""
import pickle, torch
from torch.cuda import _memory_viz
N = torch.neuron
N.memory._record_memory_history(max_entries=100000, stacks="python")

def make_weights():
    return torch.empty(1000, 1000, device="neuron")   # 4 MB: a large-pool segment

w = make_weights()
small = [torch.empty(100, device="neuron") for _ in range(3)]
addr = small[1].data_ptr()
del small
snap = N.memory._snapshot()

# The live block of `w` names the function and line that allocated it.
blocks = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
(big,) = [b for b in blocks if b["address"] == w.data_ptr()]
assert big["size"] >= 4_000_000 and big["requested_size"] == 4_000_000, big
names = [f["name"] for f in big["frames"]]
assert "make_weights" in names, names
assert any(f["line"] == 8 and f["name"] == "make_weights" for f in big["frames"]), big["frames"]
for s in snap["segments"]:
    assert {{"device", "address", "total_size", "allocated_size", "active_size", "requested_size",
             "stream", "segment_type", "blocks", "frames"}} <= set(s), s.keys()
    assert sum(b["size"] for b in s["blocks"]) == s["total_size"]

# The trace: segments before their blocks; a freed block's request and completion.
trace = snap["device_traces"][0]
actions = [e["action"] for e in trace]
assert actions[0] == "segment_alloc" and "alloc" in actions, actions
mine = [e["action"] for e in trace if e["addr"] == addr]
assert mine[:3] == ["alloc", "free_requested", "free_completed"], mine
assert all(e["time_us"] > 0 and "frames" in e for e in trace)
assert len(snap["device_traces"]) == N.device_count()

# PyTorch's own tools read it.
assert "total_reserved" in _memory_viz.segsum(snap)
assert "<html" in _memory_viz.trace_plot(snap).lower()
assert "<html" in _memory_viz.segment_plot(snap).lower()
path = r"{tmp_path}/snap.pickle"
N.memory._dump_snapshot(path)
with open(path, "rb") as f:
    assert pickle.load(f)["device_traces"][0][0]["action"] == "segment_alloc"

# An OOM is in the trace with what the device had left; the process goes on.
N.set_per_process_memory_fraction(0.05)
try:
    torch.empty(1 << 40, dtype=torch.uint8, device="neuron")
except torch.OutOfMemoryError:
    pass
else:
    raise AssertionError("no OOM")
N.set_per_process_memory_fraction(1.0)
oom = [e for e in N.memory._snapshot()["device_traces"][0] if e["action"] == "oom"]
assert oom and oom[-1]["size"] == 1 << 40 and "device_free" in oom[-1], oom

# max_entries keeps the newest; enabled=None stops; clear_history empties.
N.memory._record_memory_history(max_entries=4, clear_history=True)
x = [torch.empty(10, device="neuron") for _ in range(5)]
assert len(N.memory._snapshot()["device_traces"][0]) == 4
N.memory._record_memory_history(enabled=None)
n = len(N.memory._snapshot()["device_traces"][0])
y = torch.empty(10, device="neuron")
assert len(N.memory._snapshot()["device_traces"][0]) == n
try:
    N.memory._record_memory_history(enabled="some")
except RuntimeError as e:
    assert "enabled" in str(e)
else:
    raise AssertionError("bad 'enabled' accepted")
""", env=DRIVERS[driver], timeout=120)


def test_rest_of_torch_cuda_memory_names():
    """torch.cuda.memory's public names exist on torch.neuron.memory: working
    where they make sense, else raising a clear 'not supported'."""
    run_python("""
import torch, warnings
M = torch.neuron.memory
missing = [n for n in torch.cuda.memory.__all__
           if not hasattr(M, n) and not hasattr(M, n.replace("CUDA", "Neuron"))]
assert not missing, missing
before = M.memory_allocated()
p = M.caching_allocator_alloc(1000, stream=torch.neuron.Stream())
assert p and M.memory_allocated() == before + 1024
M.caching_allocator_delete(p)
assert M.memory_allocated() == before
try:
    M.caching_allocator_delete(p)
except RuntimeError as e:
    assert "not a live block" in str(e)
else:
    raise AssertionError("double delete accepted")
assert M.memory_stats_as_nested_dict()["allocated_bytes"]["all"]["current"] == before
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    assert M.memory_cached() == M.memory_reserved()
assert any(issubclass(x.category, FutureWarning) for x in w)
assert "not applicable" in M.list_gpu_processes()
assert M.get_allocator_backend() == "native"
for refused in (M.MemPool, M.use_mem_pool, M.change_current_allocator, M.caching_allocator_disabled):
    try:
        refused()
    except RuntimeError as e:
        assert "not supported" in str(e)
    else:
        raise AssertionError(refused)
""", timeout=120)

"""torch.profiler with ProfilerActivity.PrivateUse1 on neuron: every kernel
and copy the integration queues is timed on the device (the HAL's timing
events) and reaches Kineto linked to the op that launched it, so
key_averages() has device-time columns and export_chrome_trace a device
track, flow arrows from each launch and the device properties. Each case in
a fresh interpreter, on the protected and vulkan drivers (eager ops as device
kernels; timestamp queries on vulkan) and on the host driver (compiled kernels)."""
import pytest

from conftest import run_python

DRIVERS = {
    "host": {},
    "protected": {"OPENNEURON_DRIVER": "protected", "OPENNEURON_CPU_FALLBACK": "silent"},
    "vulkan": {"OPENNEURON_DRIVER": "vulkan", "OPENNEURON_CPU_FALLBACK": "silent", "OPENNEURON_VULKAN_VALIDATION": "1"},
}


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_device_time_per_op_and_a_device_track(driver, tmp_path):
    run_python(f"""
import json, time, torch
from torch.profiler import profile, ProfilerActivity
x = torch.randn(512, 512).to("neuron")
f = torch.compile(lambda a: (a.sin() * 2).sum(1), backend="neuron")
f(x); x.cos()  # built before profiling
pinned = torch.empty(512, 512).pin_memory()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
    start = time.perf_counter()
    for _ in range(3):
        y = f(x)
        z = x.cos()
    pinned.copy_(z, non_blocking=True)
    torch.neuron.synchronize()
    wall_us = (time.perf_counter() - start) * 1e6

averages = {{e.key: e for e in p.key_averages()}}
kernels = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
assert kernels, [e.name for e in p.events()]
compiled = [k for k in averages if "[reduction: sum]" in k]
assert compiled and averages[compiled[0]].self_device_time_total > 0, compiled
if "{driver}" != "host":  # eager ops run as device kernels there, named after their ops
    assert any("aten::cos" in k and e.self_device_time_total > 0 for k, e in averages.items()), list(averages)
device_total = sum(k.time_range.elapsed_us() for k in kernels)
assert 0 < device_total <= wall_us, (device_total, wall_us)
table = p.key_averages().table(sort_by="self_device_time_total", row_limit=5)
assert "Self NEURON" in table, table

path = r"{tmp_path}/trace.json"
p.export_chrome_trace(path)
trace = json.load(open(path))
events = trace["traceEvents"]
device = [e for e in events if e.get("cat") == "kernel"]
copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
launches = {{e["name"] for e in events if e.get("cat") == "privateuse1_runtime"}}
assert len(device) >= 3 and copies and "neuronLaunchKernel" in launches, (len(device), copies, launches)
assert any(c["args"].get("bytes") == 512 * 512 * 4 for c in copies), copies
assert all(isinstance(k["args"]["device"], int) for k in device)
starts = {{e["id"]: e for e in events if e.get("ph") == "s"}}
ends = [e for e in events if e.get("ph") == "f"]
late = [(starts.get(e["id"]), e) for e in ends if e["id"] not in starts or starts[e["id"]]["ts"] > e["ts"] + 1]
assert ends and not late, late
assert trace["deviceProperties"] and trace["deviceProperties"][0]["name"].startswith("OpenNeuron")
""", env=DRIVERS[driver], timeout=300)

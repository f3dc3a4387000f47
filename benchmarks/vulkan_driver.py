"""The vulkan driver beside host and cpu, side by side in one run per driver:
dispatch latency of a tiny eager op, copy bandwidth (host to device, device
to host, device to device), and a memory-bound eager op. On lavapipe (a CPU
implementation of Vulkan) the numbers say what the driver's own overhead is,
not what a GPU would do.

    .venv/bin/python benchmarks/vulkan_driver.py            # vulkan and host, then compare
"""
import json
import os
import subprocess
import sys
import time

CHILD = r"""
import json, time, torch
dev = "neuron"
def timed(fn, reps):
    fn(); torch.neuron.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps): fn()
    torch.neuron.synchronize()
    return (time.perf_counter() - t0) / reps
x1 = torch.ones(1, device=dev)
r = {"device": torch.neuron.get_device_name(0)}
r["tiny_add_us"] = min(timed(lambda: x1.add_(1), 2000) for _ in range(3)) * 1e6
big = torch.ones(1 << 24)            # 64 MiB
pinned = big.pin_memory()
d = torch.empty(1 << 24, device=dev)
d2 = torch.empty(1 << 24, device=dev)
gb = big.numel() * 4 / 1e9
r["h2d_GBps"] = gb / min(timed(lambda: d.copy_(big), 5) for _ in range(3))
r["h2d_pinned_GBps"] = gb / min(timed(lambda: d.copy_(pinned, non_blocking=True), 5) for _ in range(3))
r["d2h_GBps"] = gb / min(timed(lambda: big.copy_(d), 5) for _ in range(3))
r["d2d_GBps"] = 2 * gb / min(timed(lambda: d2.copy_(d), 5) for _ in range(3))
m = torch.ones(1 << 20, device=dev)
r["add_1M_us"] = min(timed(lambda: m.add_(1), 50) for _ in range(3)) * 1e6
print("RESULT " + json.dumps(r))
"""


def run(driver):
    env = dict(os.environ, OPENNEURON_DRIVER=driver, OPENNEURON_CPU_FALLBACK="silent")
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{driver}: {out.stderr[-2000:]}")


def main():
    results = {d: run(d) for d in ("vulkan", "host")}
    keys = ["tiny_add_us", "add_1M_us", "h2d_GBps", "h2d_pinned_GBps", "d2h_GBps", "d2d_GBps"]
    print(f"{'':18s}" + "".join(f"{d:>12s}" for d in results))
    for k in keys:
        print(f"{k:18s}" + "".join(f"{results[d][k]:12.2f}" for d in results))
    print("vulkan device:", results["vulkan"]["device"])
    print(json.dumps(results))


if __name__ == "__main__":
    main()

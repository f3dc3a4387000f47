"""The neuron device's eager-mode costs against the same work on CPU,
measured side by side in one run (issue: the `neuron` device).

    .venv/bin/python benchmarks/eager_overhead.py [--repeats 7]

1. dispatch: 10,000 tiny ops (`add` on 1-element tensors), neuron / cpu time;
2. training: one step of the demo GPT, neuron / cpu throughput;
3. memory: peak resident memory of the demo (own process each), neuron / cpu.
Each figure is the median of interleaved repeats; only ratios are compared.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from demo.train_gpt import GPT, GPTConfig, make_optimizer, train_step  # noqa: E402


def tiny_ops(device, n=10_000):
    t = torch.ones(1, device=device)
    start = time.perf_counter()
    for _ in range(n):
        t = t + 1
    t.cpu()  # wait for the device
    return time.perf_counter() - start


def make_training(device, batch=32, block=128):
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=block)).to(device)
    opt = make_optimizer(model, 3e-3)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 65, (batch, block), generator=g).to(device)
    y = torch.randint(0, 65, (batch, block), generator=g).to(device)
    train_step(model, opt, x, y).item()  # warm-up

    def step():
        start = time.perf_counter()
        train_step(model, opt, x, y).item()
        return batch * block / (time.perf_counter() - start)

    return step


def demo_peak_rss(device, steps):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(
            [sys.executable, os.path.join(ROOT, "demo", "train_gpt.py"), "--device", device,
             "--steps", str(steps), "--json-out", out.name],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return json.load(open(out.name))["peak_rss_mib"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--demo-steps", type=int, default=30)
    args = p.parse_args()

    tiny = {"cpu": [], "neuron": []}
    steps = {d: make_training(d) for d in ("cpu", "neuron")}
    tput = {"cpu": [], "neuron": []}
    for _ in range(args.repeats):
        for device in ("cpu", "neuron"):  # interleaved
            tiny[device].append(tiny_ops(device))
            tput[device].append(steps[device]())
    rss = {d: demo_peak_rss(d, args.demo_steps) for d in ("cpu", "neuron")}

    med = {k: {d: statistics.median(v) for d, v in m.items()} for k, m in (("tiny", tiny), ("tput", tput))}
    rows = [
        ("10,000 tiny adds (s)", med["tiny"]["neuron"], med["tiny"]["cpu"], med["tiny"]["neuron"] / med["tiny"]["cpu"], "<= 1.25"),
        ("demo train step (tokens/s)", med["tput"]["neuron"], med["tput"]["cpu"], med["tput"]["neuron"] / med["tput"]["cpu"], ">= 0.95"),
        ("demo peak RSS (MiB)", rss["neuron"], rss["cpu"], rss["neuron"] / rss["cpu"], "<= 1.15"),
    ]
    print(f"torch {torch.__version__}, {os.cpu_count()} cores, {torch.get_num_threads()} threads, repeats={args.repeats}")
    print(f"{'metric':<28} {'neuron':>12} {'cpu':>12} {'ratio':>8}  target")
    for name, n, c, r, target in rows:
        print(f"{name:<28} {n:>12.4g} {c:>12.4g} {r:>8.3f}  {target}")


if __name__ == "__main__":
    main()

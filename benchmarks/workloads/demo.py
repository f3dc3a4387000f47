"""The demo's training step (demo/train_gpt.py: GPT, AdamW from
make_optimizer, train_step with gradient clipping) on fixed random batches;
compiled configurations compile the model as `train_gpt.py --compile` does."""
import functools
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.harness import MODEL_TIMED_STEPS, Instance, Workload  # noqa: E402
from demo.train_gpt import GPT, GPTConfig, make_optimizer, train_step  # noqa: E402


def _build(p, device, compile):
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=p["block"], n_layer=p["layers"])).to(device)
    opt = make_optimizer(model, 3e-3)
    step_model = compile(model)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 65, (p["batch"], p["block"]), generator=g).to(device)
    y = torch.randint(0, 65, (p["batch"], p["block"]), generator=g).to(device)
    return Instance(lambda: train_step(step_model, opt, x, y), work=p["batch"] * p["block"])


def workloads(quick):
    p = dict(batch=2, block=64, layers=2) if quick else dict(batch=16, block=128, layers=GPTConfig.n_layer)
    return [Workload(name="demo_train_step", group="demo", min_timed_steps=MODEL_TIMED_STEPS,
                     title=f"demo GPT train step, {p['layers']} layers, batch {p['batch']}x{p['block']}",
                     unit="tokens/s", build=functools.partial(_build, p), params=p,
                     tol_compiled=(1e-3, 1e-4))]

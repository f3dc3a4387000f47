"""Compile cost grows with distinct kernels, not model depth: identical
layers share their kernels (one build), a deeper model finds the kernels a
shallower one built (across graphs and processes), and metrics() breaks a
cold compile down into PyTorch's part and ours."""
import json
import os
import subprocess
import sys

import pytest
import torch

import openneuron.compiler as compiler

DEV = "neuron"


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def stack(layers, d=32):
    torch.manual_seed(0)
    return torch.nn.Sequential(*[Block(d) for _ in range(layers)])


def first_call(model, x):
    """Compiled forward and backward of `model`, checked against eager."""
    compiled = torch.compile(model.to(DEV), backend="neuron")
    out = compiled(x)
    out.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ref = model(x)
    ref.sum().backward()
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad, atol=1e-4, rtol=1e-4)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENNEURON_COMPILE_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setenv("OPENNEURON_COMPILE_PRECOMPILE", "0")
    torch._dynamo.reset()
    compiler.reset_metrics()
    return tmp_path / "kernels"


def test_identical_layers_build_their_kernels_once(fresh_cache):
    x = torch.randn(4, 8, 32, device=DEV)
    first_call(stack(1), x)
    one = compiler.metrics()
    torch._dynamo.reset()
    compiler.reset_metrics()
    first_call(stack(6), x.clone())
    six = compiler.metrics()
    assert six["kernels"] > 4 * one["kernels_distinct"], six
    # A block's kernels, found again: the deeper model builds at most the
    # few kernels where its first or last layer differs from the shallow one.
    assert six["kernels_distinct"] <= one["kernels_distinct"] + 4, (one, six)
    assert six["kernels_built"] <= 4, six
    assert six["kernels_found"] >= six["kernels_distinct"] - six["kernels_built"] > 0, six


def test_cold_compile_time_is_broken_down(fresh_cache):
    x = torch.randn(4, 8, 32, device=DEV)
    first_call(stack(2), x)
    m = compiler.metrics()
    t = m["compile_time"]
    assert set(t) == {"dynamo", "aot_autograd", "python", "lower", "codegen", "build", "load"}, t
    assert all(v >= 0 for v in t.values()), t
    # Cold: every part of the pipeline took time, the build most of ours.
    assert t["dynamo"] > 0 and t["aot_autograd"] > 0 and t["build"] > 0, t
    ours = t["python"] + t["lower"] + t["codegen"] + t["build"] + t["load"]
    assert abs(ours - m["compile_seconds"]) < 0.05 * m["compile_seconds"] + 1e-3, (ours, m)
    assert m["kernels_built"] == m["kernels_distinct"], m


def test_a_new_process_builds_nothing(fresh_cache):
    code = (
        "import json, torch, openneuron.compiler as c\n"
        "import test_compile_at_scale as t\n"
        "t.first_call(t.stack(3), torch.randn(4, 8, 32, device='neuron'))\n"
        "print(json.dumps(c.metrics()))\n"
    )
    env = dict(os.environ, OPENNEURON_COMPILE_CACHE_DIR=str(fresh_cache), OPENNEURON_COMPILE_PRECOMPILE="0",
               PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["kernels_built"] > 0, cold
    assert warm["kernels_built"] == 0 and warm["cache_misses"] == 0, warm
    assert warm["cache_hits"] == cold["cache_misses"] == cold["graphs"], (cold, warm)

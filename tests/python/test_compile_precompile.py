"""Warm starts without tracing (on by default): a second
process that compiles the same model loads Dynamo's saved frame and our
saved graphs instead of tracing again, gets the same results (forward and
backward), still recompiles for a new shape, and rebuilds a kernel library
that is gone from the kernel cache."""
import json
import shutil

import pytest

from conftest import run_python

pytestmark = pytest.mark.timeout(300)

MODEL = """
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = torch.nn.functional.gelu(layer(x)) + x
        return x.softmax(dim=-1)
"""

SCRIPT = """
import json, os, sys, time
import torch
from torch._dynamo.utils import counters
from model import Net

if os.environ.get("BREAK_LOAD"):  # a saved graph that fails to load
    from openneuron.compiler import precompile

    def broken(self):
        raise OSError("simulated: saved graph unreadable")

    precompile.NeuronOutputCode._load = broken

torch.manual_seed(0)
net = Net().to("neuron")
x = torch.randn(4, 32, device="neuron")
eager = net(x)
eager.sum().backward()
eager_grads = [p.grad.clone() for p in net.parameters()]
net.zero_grad(set_to_none=True)

start = time.perf_counter()
compiled = torch.compile(net, backend="neuron")
y = compiled(x)
y.sum().backward()
first_call = time.perf_counter() - start
ok = torch.allclose(y, eager, atol=1e-6) and all(
    torch.allclose(p.grad, g, atol=1e-6) for p, g in zip(net.parameters(), eager_grads))
x2 = torch.randn(7, 32, device="neuron")  # a new shape: recompiles
ok_new_shape = torch.allclose(compiled(x2), net(x2), atol=1e-6)
print(json.dumps({"ok": ok, "ok_new_shape": ok_new_shape, "first_call": first_call,
                  "cache": dict(counters["dynamo_cache"]),
                  "traced_graphs": counters["stats"].get("unique_graphs", 0)}))
"""


def run(tmp_path, env):
    proc = run_python(SCRIPT, env=env, script_dir=tmp_path, timeout=240)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_second_process_loads_instead_of_tracing(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    env = {
        "OPENNEURON_COMPILE_PRECOMPILE": "1",
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch_cache"),
        "OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path / "kernels"),
    }
    cold = run(tmp_path, env)
    assert cold["ok"] and cold["ok_new_shape"], cold
    assert cold["cache"].get("dynamo_cache_miss") == 1, cold
    assert cold["traced_graphs"] >= 1

    warm = run(tmp_path, env)
    assert warm["ok"] and warm["ok_new_shape"], warm
    assert warm["cache"].get("dynamo_cache_hit") == 1, warm
    # Only the new shape is traced; the first call was loaded.
    assert warm["traced_graphs"] <= cold["traced_graphs"] - 1, (cold, warm)

    # A saved entry that cannot be loaded: compiled afresh, same results.
    broken = run(tmp_path, {**env, "BREAK_LOAD": "1"})
    assert broken["ok"] and broken["ok_new_shape"], broken
    assert broken["traced_graphs"] >= 1, broken

    # Kernel libraries evicted from our cache: rebuilt from the saved graph.
    shutil.rmtree(tmp_path / "kernels")
    rebuilt = run(tmp_path, env)
    assert rebuilt["ok"] and rebuilt["ok_new_shape"], rebuilt
    assert rebuilt["cache"].get("dynamo_cache_hit") == 1, rebuilt


def test_on_by_default_and_off_by_switch(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch_cache"),
           "OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path / "kernels")}
    for _ in range(2):
        result = run(tmp_path, {**env, "OPENNEURON_COMPILE_PRECOMPILE": "0"})
        assert result["ok"] and result["cache"] == {}, result
    assert run(tmp_path, env)["cache"].get("dynamo_cache_miss") == 1
    assert run(tmp_path, env)["cache"].get("dynamo_cache_hit") == 1


DICT_MODEL = """
from collections import OrderedDict  # `collections` itself is no global here
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return OrderedDict(y=self.lin(x).relu())
"""

DICT_SCRIPT = """
import json, os
import torch
from torch._dynamo.utils import counters
from dict_model import Net

if os.environ.get("UNSAVED_MODULE_GLOBALS"):  # as PyTorch 2.13 alone
    from torch._dynamo.output_graph import OutputGraph
    from openneuron.compiler import precompile

    precompile.enable()
    OutputGraph.install_global_by_id = OutputGraph.install_global_by_id.__wrapped__

torch.manual_seed(0)
net = Net().to("neuron")
x = torch.randn(4, 8, device="neuron")
out = torch.compile(net, backend="neuron")(x)
print(json.dumps({"ok": bool(torch.allclose(out["y"], net(x)["y"])), "cache": dict(counters["dynamo_cache"]),
                  "traced_graphs": counters["stats"].get("unique_graphs", 0)}))
"""


def cold_then_warm(tmp_path, script):
    """Runs `script` in two processes sharing the caches, precompile on; both
    must succeed and the second must not fail to load a saved frame."""
    env = {"OPENNEURON_COMPILE_PRECOMPILE": "1", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch_cache"),
           "OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path / "kernels")}
    results = {}
    for attempt in ("cold", "warm"):
        proc = run_python(script, env=env, script_dir=tmp_path, timeout=240)
        results[attempt] = json.loads(proc.stdout.strip().splitlines()[-1])
        assert results[attempt]["ok"], (attempt, proc.stderr[-2000:])
    assert "could not be loaded" not in proc.stderr, proc.stderr[-2000:]
    return results


def test_saved_frame_reading_a_module_global_loads(tmp_path):
    """Dynamo's code for returning an OrderedDict reads `collections` through
    a global it installs and PyTorch 2.13 does not save; we save it as an
    import source, so the second process loads the frame instead of tracing
    it (before: NameError mid-call, then a fallback to compiling afresh)."""
    (tmp_path / "dict_model.py").write_text(DICT_MODEL)
    results = cold_then_warm(tmp_path, DICT_SCRIPT)
    assert results["cold"]["cache"].get("dynamo_cache_miss") == 1, results
    assert results["warm"]["cache"].get("dynamo_cache_hit") == 1, results
    assert results["warm"]["traced_graphs"] == 0, results


def test_saved_frame_missing_a_global_is_compiled_afresh(tmp_path):
    """A saved frame whose code reads a global this process lacks (here: the
    module-global record is switched off, as in PyTorch 2.13 itself) is not
    loaded to fail mid-call; it is compiled afresh, with a warning."""
    (tmp_path / "dict_model.py").write_text(DICT_MODEL)
    env = {"OPENNEURON_COMPILE_PRECOMPILE": "1", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch_cache"),
           "OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path / "kernels"), "UNSAVED_MODULE_GLOBALS": "1"}
    for attempt in ("cold", "warm"):
        proc = run_python(DICT_SCRIPT, env=env, script_dir=tmp_path, timeout=240)
        assert json.loads(proc.stdout.strip().splitlines()[-1])["ok"], (attempt, proc.stderr[-2000:])
    assert "reads globals this process lacks: ___module_collections" in proc.stderr


DECORATORS = """
import functools


def returns_output(func):  # as transformers' decorators of every forward
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        return func(self, *args, **kwargs)
    return wrapper


def scaled(factor, enabled=True):
    def decorate(func):
        @functools.wraps(func)
        def inner(self, x):
            return func(self, x * factor) if enabled else func(self, x)
        return inner
    return decorate
"""

DECORATED_MODEL = """
import torch
from decorators import returns_output, scaled


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    @returns_output
    @scaled(2.0)
    def forward(self, x):
        return self.lin(x).relu()
"""

DECORATED_SCRIPT = """
import json, os
import torch
from torch._dynamo.utils import counters
from decorated_model import Net

torch.manual_seed(0)
net = Net().to("neuron")
x = torch.randn(4, 8, device="neuron")
out = torch.compile(net, backend="neuron")(x)
print(json.dumps({"ok": bool(torch.allclose(out, net(x))), "cache": dict(counters["dynamo_cache"]),
                  "traced_graphs": counters["stats"].get("unique_graphs", 0)}))
"""


def test_decorated_forward_loads(tmp_path):
    """A forward under functools.wraps decorators (the compiled frame is the
    decorator's, in another module; its guards reach the wrapped function
    through a closure): PyTorch 2.13 alone files the frame under the wrapped
    function's module and saves that function as a placeholder, so a warm
    process traces again. Here it loads with nothing traced."""
    (tmp_path / "decorators.py").write_text(DECORATORS)
    (tmp_path / "decorated_model.py").write_text(DECORATED_MODEL)
    results = cold_then_warm(tmp_path, DECORATED_SCRIPT)
    assert results["warm"]["cache"].get("dynamo_cache_hit") == 1, results
    assert results["warm"]["traced_graphs"] == 0, results


HELPER_MODEL = """
import torch
import torch.nn.functional as F


def activation(x):
    return F.gelu(x)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return activation(self.lin(x)) + F.silu(x)
"""

HELPER_SCRIPT = """
import json, os
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters
import helper_model
from helper_model import Net

def doubled(x):
    return 2 * x

if os.environ.get("PATCH") == "global":  # the model's global function, before compiling
    helper_model.activation = doubled
if os.environ.get("PATCH") == "library":  # a library function it calls
    F.silu = doubled

torch.manual_seed(0)
net = Net().to("neuron")
x = torch.randn(4, 8, device="neuron")
compiled = torch.compile(net, backend="neuron")
ok = bool(torch.allclose(compiled(x), net(x)))
traced = counters["stats"].get("unique_graphs", 0)
helper_model.activation = torch.tanh  # in this process, after compiling: a recompile
ok_after_swap = bool(torch.allclose(compiled(x), net(x)))
print(json.dumps({"ok": ok, "ok_after_swap": ok_after_swap, "cache": dict(counters["dynamo_cache"]),
                  "traced_graphs": traced,
                  "traced_after_swap": counters["stats"].get("unique_graphs", 0) - traced}))
"""


def test_swapped_functions_are_never_run_from_a_saved_frame(tmp_path):
    """PyTorch 2.13's caching_precompile drops identity guards from every
    compile; ours keeps them live and saves them: a function swapped in this
    process recompiles, and a warm process where the model's global or a
    library function it calls is another function traces again instead of
    running the saved graph (which would silently give the old results)."""
    (tmp_path / "helper_model.py").write_text(HELPER_MODEL)
    env = {"OPENNEURON_COMPILE_PRECOMPILE": "1", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch_cache"),
           "OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path / "kernels")}

    def run_with(patch=""):
        proc = run_python(HELPER_SCRIPT, env={**env, "PATCH": patch}, script_dir=tmp_path, timeout=240)
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result["ok"] and result["ok_after_swap"], (patch, result, proc.stderr[-2000:])
        assert result["traced_after_swap"] >= 1, (patch, result)
        assert "is dropped with caching_precompile" not in proc.stderr
        return result

    cold = run_with()
    assert cold["traced_graphs"] >= 1, cold
    warm = run_with()
    assert warm["traced_graphs"] == 0 and warm["cache"].get("dynamo_cache_hit") == 1, warm
    for patch in ("global", "library"):
        assert run_with(patch)["traced_graphs"] >= 1, patch


SAME_NAME_MODEL = """
import torch


class Net(torch.nn.Module):
    def forward(self, x):
        return x {op} 1
"""

SAME_NAME_SCRIPT = """
import json, os, sys
import torch
from torch._dynamo.utils import counters
Net = __import__(os.environ["MODEL"]).Net

x = torch.randn(4, device="neuron")
out = torch.compile(Net(), backend="neuron")(x)
print(json.dumps({"ok": bool(torch.allclose(out, Net()(x))), "cache": dict(counters["dynamo_cache"]),
                  "traced_graphs": counters["stats"].get("unique_graphs", 0)}))
if os.environ.get("EXIT_AT_ONCE"):  # as a forked worker or a killed rank: no exit handlers
    sys.stdout.flush()
    os._exit(0)
"""


def test_saved_frames_are_used_only_by_their_function(tmp_path):
    """PyTorch 2.13 names a saved frame by qualified name and first line only:
    `Net.forward` at the same line of two files shares one entry. Ours is used
    only by the function it was saved from; the other compiles its own (and
    gets its own results). Entries are written after each compile, so a
    process that ends without exit handlers keeps them."""
    (tmp_path / "plus_model.py").write_text(SAME_NAME_MODEL.format(op="+"))
    (tmp_path / "minus_model.py").write_text(SAME_NAME_MODEL.format(op="-"))
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch_cache"),
           "OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path / "kernels"), "EXIT_AT_ONCE": "1"}

    def run_model(model):
        proc = run_python(SAME_NAME_SCRIPT, env={**env, "MODEL": model}, script_dir=tmp_path, timeout=240)
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result["ok"], (model, result, proc.stderr[-2000:])
        assert "could not be loaded" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        return result

    assert run_model("plus_model")["traced_graphs"] == 1
    assert run_model("plus_model")["traced_graphs"] == 0  # saved although the process skipped exit handlers
    assert run_model("minus_model")["traced_graphs"] == 1  # the same key: not plus_model's entry
    assert run_model("minus_model")["traced_graphs"] == 0

"""openneuron doctor (python -m openneuron.doctor): runs a program unchanged
and reports each planted problem with its source line: a host sync in a
loop, an op on the CPU fallback, a graph break, a recompile; on the demo and
a Hugging Face model it runs to the end with a report. Each run in a fresh
interpreter."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PLANTED = '''
import torch

x = torch.randn(64, 64, device="neuron")
total = 0.0
for step in range(5):
    y = x @ x
    total += y.sum().item()
s = torch.sort(x, dim=1).values


def f(a):
    b = a.sin()
    torch._dynamo.graph_break()
    return b.cos()


g = torch.compile(f, backend="neuron")
g(x)
g(torch.randn(8, 3, device="neuron"))
print("finished", total != 0)
'''


def _doctor(tmp_path, script, *args, env=None):
    """Runs the doctor on `script`; `args` before the script are the
    doctor's own options (--html, --trace), the rest the script's."""
    out = tmp_path / "findings.json"
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("OPENNEURON_")}
    full_env.update(env or {})
    own = [a for i, a in enumerate(args) if a.startswith("--html") or a.startswith("--trace")
           or (i and args[i - 1] in ("--html", "--trace"))]
    rest = [a for a in args if a not in own]
    proc = subprocess.run([sys.executable, "-m", "openneuron.doctor", "--json", str(out), *own, str(script), *rest],
                          cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(out) as f:
        return proc, json.load(f)


def test_planted_problems_are_found_with_their_lines(tmp_path):
    script = tmp_path / "planted.py"
    script.write_text(PLANTED)
    proc, r = _doctor(tmp_path, script, env={"OPENNEURON_FORCE_CPU_FALLBACK": "sort",
                                             "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert "finished True" in proc.stdout  # the program ran unchanged
    report = proc.stderr
    syncs = {(s["line"], s["op"].split(" ")[0]): s["calls"] for s in r["syncs"]}
    assert syncs.get((f"{script}:8", "aten::_local_scalar_dense")) == 5, r["syncs"]
    assert (f"{script}:9", "aten::sort") in syncs, r["syncs"]
    assert f"{script}:8: aten::_local_scalar_dense" in report
    assert [f["op"] for f in r["fallbacks"]] == ["aten::sort"], r["fallbacks"]
    assert r["transfers"]["device_to_host"]["cpu_fallback"]["count"] >= 1
    assert any("graph_break()" in b["reason"] for b in r["graph_breaks"]), r["graph_breaks"]
    assert len(r["recompiles"]) >= 1, r["recompiles"]
    assert r["compiled_graphs"]["graphs"] >= 2
    assert r["memory"][0]["peak_allocated"] > 0
    assert r["top_ops"] and all(t["self_ms"] > 0 for t in r["top_ops"]), r["top_ops"]
    for title in ("CPU fallback: 1 op(s)", "Host synchronizations", "graph breaks: ", "recompiles: ", "Peak memory"):
        assert title in report, report


def test_device_time_trace_and_html_on_protected_memory(tmp_path):
    script = tmp_path / "planted.py"
    script.write_text(PLANTED)
    env = {"OPENNEURON_DRIVER": "protected", "OPENNEURON_CPU_FALLBACK": "silent",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    page, trace = tmp_path / "doctor.html", tmp_path / "trace.json"
    proc, r = _doctor(tmp_path, script, "--html", str(page), "--trace", str(trace), env=env)
    kernels = {k["kernel"]: k for k in r["top_kernels"]}
    assert any("gemm_f32" in k for k in kernels) and all(k["device_ms"] > 0 for k in kernels.values()), kernels
    assert "Most device time" in proc.stderr
    assert "data:image/png;base64," in page.read_text() and "openneuron doctor" in page.read_text()
    assert any(e.get("cat") == "kernel" for e in json.loads(trace.read_text())["traceEvents"])


def test_demo_and_a_hugging_face_model_run_under_the_doctor(tmp_path):
    proc, r = _doctor(tmp_path, os.path.join(ROOT, "demo", "train_gpt.py"), "--steps", "3")
    assert "final loss" in proc.stdout and r["fallbacks"] == [], r["fallbacks"]
    assert "Host synchronizations" in proc.stderr
    hf = tmp_path / "hf.py"
    hf.write_text('''
import torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=32)).to("neuron")
ids = torch.randint(0, 100, (2, 16), device="neuron")
loss = model(ids, labels=ids).loss
loss.backward()
print("loss", float(loss))
''')
    proc, r = _doctor(tmp_path, hf)
    assert "loss" in proc.stdout
    assert any(s["line"].endswith("hf.py:9") for s in r["syncs"]), r["syncs"]  # float(loss)

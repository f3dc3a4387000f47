"""The benchmark suite runs (benchmarks/run.py --quick): it exits 0 and writes
valid JSON, Markdown and PNG with every workload x configuration present,
each measured or reported unavailable/skipped with a reason. Timings are
not checked, only that the suite works (and that no configuration it
measured disagrees with cpu eager)."""
import json
import os
import struct
import subprocess
import sys

import pytest

from conftest import _OPENNEURON_ENV

pytestmark = pytest.mark.timeout(330)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = {"cpu-eager", "neuron-eager", "cpu-inductor", "neuron-compile"}
WORKLOADS = ("tiny_ops", "gelu_unfused", "layernorm", "softmax", "adamw_small_tensors", "matmul_",
             "conv3x3_", "bert_fwd_bwd", "gpt2_generate", "llama_train", "resnet_train", "demo_train_step")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("benchmarks")
    env = {k: v for k, v in os.environ.items() if k not in _OPENNEURON_ENV}
    env["HF_HUB_OFFLINE"] = "1"
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    # One intra-op thread: CI machines may be shared, and OpenMP regions with
    # more threads than free cores stall; the suite's timings are not checked.
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "run.py"), "--quick", "--out", str(out),
         "--no-readme", "--threads", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"--- stdout ---\n{proc.stdout[-5000:]}\n--- stderr ---\n{proc.stderr[-5000:]}"
    with open(os.path.join(ROOT, "README.md")) as f:
        assert f.read() == readme, "--no-readme must leave README.md alone"
    return out, proc


def test_json_has_every_workload_and_configuration(quick_run):
    out, _ = quick_run
    with open(out / "benchmarks.json") as f:
        data = json.load(f)
    assert data["mode"] == "quick"
    m = data["machine"]
    for key in ("cpu_model", "logical_cpus", "torch", "torch_num_threads", "env"):
        assert m.get(key) is not None, key
    assert {c["key"] for c in data["configs"]} == CONFIGS
    for c in data["configs"]:
        assert c["available"] or c["reason"], c
    names = [wl["name"] for wl in data["workloads"]]
    for prefix in WORKLOADS:
        assert any(n.startswith(prefix) for n in names), f"workload {prefix} missing from {names}"

    compiled_measured = 0
    for wl in data["workloads"]:
        assert set(wl["results"]) == CONFIGS, wl["name"]
        for key, r in wl["results"].items():
            where = f"{wl['name']} / {key}"
            assert r["status"] in ("measured", "unavailable", "skipped"), f"{where}: {r}"
            if r["status"] != "measured":
                assert r.get("reason"), f"{where}: {r['status']} without a reason"
                continue
            assert r["throughput"] > 0 and r["ratio"] > 0, where
            assert r["peak_rss_mib"] > 0 and r["peak_rss_ratio"] > 0, where
            if key == "cpu-eager":
                assert r["check"]["status"] == "reference"
            else:
                assert r["check"]["status"] in ("exact", "ok"), f"{where}: {r['check']}"
            if key.startswith("neuron"):
                assert r["device_peak_mib"] >= 0, where
            if key in ("cpu-inductor", "neuron-compile"):
                compiled_measured += 1
                assert r["cold_compile_s"] > 0 and r["warm_start_s"] > 0, where
        for key in ("cpu-eager", "neuron-eager"):
            assert wl["results"][key]["status"] == "measured", f"{wl['name']} / {key}"
    cpu_inductor = next(c for c in data["configs"] if c["key"] == "cpu-inductor")
    if cpu_inductor["available"]:
        assert compiled_measured >= 1, "--quick compiles its smallest workload"


def test_markdown_and_chart(quick_run):
    out, proc = quick_run
    md = (out / "benchmarks.md").read_text()
    assert "| workload | unit | cpu eager | neuron eager |" in md
    assert "peak RSS" in md and "cold compile" in md
    for prefix in WORKLOADS:
        assert prefix in md
    assert "| workload | unit |" in proc.stdout  # the table is printed too
    png = (out / "ratios.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width > 400 and height > 300

"""The CI subset of the conformance harness (conformance/run.py --subset ci):
every OpInfo op once in its most common dtype and every ModuleInfo module in
float32, a few samples each, compared against the CPU, on the host path, on
the forced CPU-fallback path, on the protected driver and on the vulkan
driver (lavapipe where there is no GPU). Fails on any unexpected failure and on any
unexpected pass (conformance/expected_failures.txt). The full run is
`.venv/bin/python conformance/run.py` (see the README, "Conformance")."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(ROOT, "conformance", "run.py")

pytestmark = pytest.mark.timeout(1200)


def _run(tmp_path, *args, env=None, timeout=900):
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith("OPENNEURON_") and k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, RUN, "--quiet", "--out", str(tmp_path), *args],
                          cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout)


def _check(proc, report_path):
    assert proc.returncode == 0, (
        f"conformance CI subset: exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-20000:]}"
        f"\n--- stderr ---\n{proc.stderr[-5000:]}")
    with open(report_path) as f:
        report = json.load(f)
    assert not report["unexpected"]["failures"] and not report["unexpected"]["passes"]
    return report


@pytest.mark.parametrize("path", ["host", "fallback", "protected", "vulkan"])
def test_ci_subset(tmp_path, path):
    args = ["--subset", "ci"] + ([f"--{path}"] if path != "host" else [])
    proc = _run(tmp_path, *args)
    name = "conformance-ci" + (f"-{path}" if path != "host" else "")
    report = _check(proc, tmp_path / f"{name}.json")
    ops = report["summary"]["ops"]
    # every op of op_db is in the subset (a handful are OpInfo-skipped on this device)
    assert ops["total"] >= 690, ops
    assert report["summary"]["modules"]["total"] >= 110
    assert (tmp_path / f"{name}.md").exists()


def test_cuda_dtypes(tmp_path):
    """Every (op, dtype) pair CUDA supports beyond the CPU (OpInfo's
    dtypesIfCUDA): forward and backward against the CPU computing in
    float64/complex128 and rounded; each pair that does not pass is listed
    with its reason."""
    proc = _run(tmp_path, "--cuda-dtypes", "--max-samples", "8")  # 8: reaches the excluded samples
    report = _check(proc, tmp_path / "conformance-cuda-dtypes.json")
    statuses = report["summary"]["ops"]
    assert statuses["total"] >= 60, statuses
    passing = sum(1 for r in report["results"] if r["status"] in ("pass", "xpass"))
    assert passing >= 98, passing  # 98 of 99 pairs pass (2026-12-05): 1 excluded (pow complex32 overflow)
    assert not [r for r in report["results"] if r["status"] in ("xfail", "fail", "error")]


def test_crash_recovery_and_report_diff(tmp_path):
    """The worker dies (simulated SIGSEGV) in one sample and check: that
    sample and check are an error, every other sample still runs; a second
    run diffs against the first and lists the new pass."""
    proc = _run(tmp_path, "--only", "add", "--dtype", "float32", "--name", "t",
                env={"CONFORMANCE_SIMULATE_CRASH": "add float32:1:out"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    with open(tmp_path / "t.json") as f:
        report = json.load(f)
    (row,) = report["results"]
    out = row["checks"]["out"]
    assert out["status"] == "error" and out["errors"] == 1 and out["passed"] >= 5, out
    assert "SIGSEGV" in out["detail"]
    assert row["checks"]["forward"]["status"] == "pass"
    assert report["meta"]["worker_restarts"] == 1

    proc = _run(tmp_path, "--only", "add", "--dtype", "float32", "--name", "t")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(tmp_path / "t.json") as f:
        report = json.load(f)
    assert report["diff"]["new_passes"] == ["add float32 out: error -> pass"], report["diff"]
    assert report["diff"]["regressions"] == []
    assert os.path.exists(tmp_path / "t.prev.json")

"""Shared fixtures and helpers of the OpenNeuron Python suite.

`import torch` alone loads OpenNeuron (torch.backends entry point), so the
tests use the device exactly as a user would. Tests that need another
environment (autoload off, a small device, fewer devices, a forced CPU
fallback, fork) run a short script in a fresh interpreter with `run_python`.
"""
import os
import subprocess
import sys
import textwrap

import tempfile

# Each run of the suite starts with empty compile caches, as on a fresh
# machine: saved compiled frames would otherwise skip tracing in tests that
# count compiles, recompiles or warnings. (A caller's own setting wins.)
_SESSION_CACHE = tempfile.mkdtemp(prefix="openneuron-test-caches-")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(_SESSION_CACHE, "torch"))
os.environ.setdefault("OPENNEURON_COMPILE_CACHE_DIR", os.path.join(_SESSION_CACHE, "openneuron"))

# CPU references come from PyTorch's own CPU kernels. Its bundled oneMKL picks
# each VML function's kernel on first use, racily across threads: after any
# fork (our kernel builds, DataLoader workers) the first sizable tanh/exp/sin
# can run a low-accuracy kernel on one chunk (~5e-5 error; pytorch/pytorch
# #188792). Pinning MKL's code path makes the references reproducible (set
# before torch loads; subprocesses inherit it; conformance/run.py does the same).
os.environ.setdefault("MKL_CBWR", "AVX2")

import pytest  # noqa: E402
import torch  # noqa: E402

import openneuron  # noqa: F401  (already loaded by import torch, unless the
#                    caller's environment has TORCH_DEVICE_BACKEND_AUTOLOAD=0)

# Tests of the host driver's in-place path (ATen's CPU kernels on device
# memory, no copies): a driver whose memory the host cannot address copies
# by design, so there they do not apply.
HOST_ADDRESSABLE = torch.neuron.get_device_properties(0).host_addressable
host_path_only = pytest.mark.skipif(
    not HOST_ADDRESSABLE,
    reason="checks the host driver's in-place path; this driver's memory is not host-addressable")

# Variables of OpenNeuron (and PyTorch's autoload switch) that a developer's
# shell may have set; subprocesses start from a clean slate unless a test sets
# them on purpose.
# OPENNEURON_DRIVER is kept: the suite runs on one driver, its
# subprocesses included (CI runs parts of it on the protected driver).
_OPENNEURON_ENV = (
    "OPENNEURON_HOST_DEVICES",
    "OPENNEURON_HOST_DEVICE_MEMORY",
    "OPENNEURON_CPU_FALLBACK",
    "OPENNEURON_FORCE_CPU_FALLBACK",
    "OPENNEURON_LAUNCH_BLOCKING",
    "OPENNEURON_AUTOGRAD_DEVICE_THREADS",
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
)


def run_python(code, env=None, timeout=90, check=True, script_dir=None, stdin=False):
    """Runs `code` in a fresh interpreter (sys.executable -c) and returns the
    CompletedProcess (text mode). `env` entries are added to a clean copy of
    the environment; check=True fails the test, with both output streams, on
    a non-zero exit status. With `script_dir`, the code runs from a file
    there (needed by multiprocessing's 'spawn', which re-imports __main__);
    with `stdin`, it is read from standard input (`python -`)."""
    full_env = {k: v for k, v in os.environ.items() if k not in _OPENNEURON_ENV}
    full_env.update(env or {})
    code = textwrap.dedent(code)
    if script_dir is not None:
        path = os.path.join(str(script_dir), "script.py")
        with open(path, "w") as f:
            f.write(code)
        argv = [sys.executable, path]
    elif stdin:
        argv = [sys.executable, "-"]
    else:
        argv = [sys.executable, "-c", code]
    proc = subprocess.run(
        argv,
        input=code if stdin else None,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        pytest.fail(
            f"subprocess exited with {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
        )
    return proc


@pytest.fixture
def transfers():
    """Resets the transfer counter; yields a function returning its stats."""
    torch.neuron.synchronize()
    torch.neuron.reset_transfer_stats()
    yield torch.neuron.transfer_stats
    torch.neuron.reset_transfer_stats()


@pytest.fixture(autouse=True)
def _restore_device_state():
    """Every test starts and ends on neuron:0 with the default stream."""
    torch.neuron.set_device(0)
    yield
    for index in range(torch.neuron.device_count()):
        torch.neuron.set_stream(torch.neuron.default_stream(index))
    torch.neuron.set_device(0)
    torch.neuron.synchronize()


def count(stats, direction, cause="copy"):
    return stats[direction][cause]["count"]


def nbytes(stats, direction, cause="copy"):
    return stats[direction][cause]["bytes"]

"""The `neuron` c10d backend under torchrun (2 and 4 ranks on one machine):
every collective against Gloo on CPU tensors, DDP against single-device
training, and a rank that dies: the others fail fast with a clear error."""
import os
import socket
import subprocess
import sys
import time

import pytest

WORKER = os.path.join(os.path.dirname(__file__), "distributed", "worker.py")
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(nproc, scenario, timeout=240, env=None):
    cmd = [TORCHRUN, f"--nproc-per-node={nproc}", f"--master-port={free_port()}", WORKER, scenario]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def run_scenario(nproc, scenario, **kwargs):
    """Runs a worker scenario under torchrun; every rank must report OK."""
    out = torchrun(nproc, scenario, **kwargs)
    assert out.count(f"{scenario} OK") == nproc, out
    return out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nproc,shm", [(2, "1"), (4, "1"), (2, "0")], ids=["2-shm", "4-shm", "2-gloo-only"])
def test_collectives_match_gloo_on_cpu(nproc, shm):
    # OPENNEURON_DIST_SHM=0: no shared-memory channel, every collective on Gloo.
    run_scenario(nproc, "collectives", env={"OPENNEURON_DIST_SHM": shm})


@pytest.mark.timeout(300)
def test_ddp_matches_single_device_training():
    run_scenario(2, "ddp")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mixed", [False, True], ids=["fp32", "bf16-mixed"])
def test_fsdp2_matches_single_device_training(mixed):
    run_scenario(2, "fsdp2", env={"NEURON_TEST_MIXED": "1" if mixed else "0"})


@pytest.mark.timeout(300)
def test_tensor_parallel_mlp_and_attention_match_single_device():
    run_scenario(2, "tensor_parallel")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["cpu:gloo,neuron:neuron", "neuron"])
def test_split_group_subgroups_run_collectives_on_their_ranks_only(backend):
    run_scenario(4, "split", timeout=120, env={"NEURON_TEST_BACKEND": backend})


@pytest.mark.timeout(300)
def test_functional_collectives_and_tensor_parallel_under_compile_match_eager():
    run_scenario(2, "compiled")


@pytest.mark.timeout(120)
def test_abort_fails_the_collective_in_flight_at_once():
    out = torchrun(2, "abort", timeout=90)
    assert "rank 0: abort OK" in out, out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shm", ["1", "0"], ids=["shm", "gloo-only"])
def test_dead_rank_fails_the_others_fast_with_a_clear_error(shm):
    # Launched by hand: torchrun would kill the survivors itself.
    timeout_s = 10
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "WORLD_SIZE": "2", "OMP_NUM_THREADS": "1", "NEURON_TEST_TIMEOUT": str(timeout_s),
           "OPENNEURON_DIST_SHM": shm}
    start = time.time()
    procs = [subprocess.Popen([sys.executable, WORKER, "dead_rank"], env={**env, "RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(2)]
    outputs = [p.communicate(timeout=timeout_s + 60)[0] for p in procs]
    elapsed = time.time() - start
    assert procs[1].returncode == -9  # SIGKILL
    assert procs[0].returncode == 3, outputs[0]
    assert "allreduce (sequence number" in outputs[0], outputs[0]
    assert "ranks that did not arrive: [1]" in outputs[0], outputs[0]
    assert elapsed < timeout_s + 30, elapsed

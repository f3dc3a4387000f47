"""Per-process measurements: peak resident memory, device peak memory, first-call
(cold compile / warm start) time, host<->device transfers and CPU fallbacks.

Peak resident memory cannot be told apart per configuration inside one
process, so each (workload, configuration) runs in a process of its own.
Starting a fresh interpreter for each costs seconds (importing torch, and
transformers for the models), so a *probe server* per workload module, a
fresh interpreter that has only imported that module and torch._dynamo (no
tensor work, no device use, no compilation), forks one child per probe. The child resets its
peak-RSS counter (`/proc/self/clear_refs` 5, so VmHWM restarts from the
current RSS instead of inheriting the server's), builds the workload, times
its first call (with the torch.compile calls, where a warm start loads saved
frames), runs a few more steps, and reports VmHWM from
/proc/self/status (not ru_maxrss, which survives exec and counts children).
Its compile caches start empty, as in a fresh process; compiled
configurations get TORCHINDUCTOR_CACHE_DIR and OPENNEURON_COMPILE_CACHE_DIR:
an empty directory for the cold compile, the same directory again for the
warm start. Memory of Inductor's
compile-worker subprocesses is not included.

    python benchmarks/probe.py --serve MODULE   (started by ProbeServers)
"""
from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


# ----------------------------------------------------------------------------- child side

def _status_kib(field: str) -> int | None:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _transfers(stats: dict) -> dict:
    """Non-zero {"direction/cause": {"count", "bytes"}}."""
    return {f"{d}/{c}": v for d, by_cause in stats.items() for c, v in by_cause.items() if v["count"]}


def probe(req: dict) -> dict:
    """Runs in the forked child: one workload in one configuration."""
    if req.get("cache_dir"):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = req["cache_dir"]
        os.environ["OPENNEURON_COMPILE_CACHE_DIR"] = os.path.join(req["cache_dir"], "openneuron")
    reset_ok = _reset_peak_rss()
    rss_start = _status_kib("VmRSS") / 1024

    import torch

    from benchmarks import harness, workloads

    wl = workloads.get(req["module"], req["workload"], req["quick"])
    cfg = harness.CONFIG_BY_KEY[req["config"]]
    device = torch.device(cfg.device)
    neuron = device.type == "neuron"
    if neuron:
        torch.neuron.reset_peak_memory_stats()
        torch.neuron.reset_fallback_report()
    torch.manual_seed(0)
    compile_fn, compile_call_s = harness.compiler(cfg), [0.0]

    def timed_compile(fn, **kwargs):
        # torch.compile itself: where a saved frame is loaded (warm start).
        t = time.perf_counter()
        compiled = compile_fn(fn, **kwargs)
        compile_call_s[0] += time.perf_counter() - t
        return compiled

    inst = wl.build(device, timed_compile)
    t0 = time.perf_counter()
    inst.step()
    harness.sync(device)
    first = compile_call_s[0] + time.perf_counter() - t0
    inst.step()  # a second call may still compile (e.g. new shapes), as may the first steps
    harness.sync(device)
    if neuron:
        torch.neuron.reset_transfer_stats()
    steps = req["steps"]
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    for _ in range(steps):
        inst.step()
    harness.sync(device)
    steady = (time.perf_counter() - t0) / steps
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / steps
    out = {
        "first_call_s": first,  # torch.compile calls + the first step
        "compile_call_s": compile_call_s[0],
        "step_s": steady,
        "peak_rss_mib": _status_kib("VmHWM") / 1024,
        "rss_start_mib": rss_start,
        "peak_rss_reset": reset_ok,
        "steps": steps,
        "minor_faults_per_step": faults,
        "threads": torch.get_num_threads(),
    }
    if neuron:
        out["device_peak_mib"] = torch.neuron.max_memory_allocated() / 2**20
        t = _transfers(torch.neuron.transfer_stats())
        out["transfers_per_step"] = {k: {"count": v["count"] / steps, "bytes": v["bytes"] / steps}
                                     for k, v in t.items()}
        out["fallback_ops"] = torch.neuron.fallback_report()
        if cfg.compiled:
            import openneuron.compiler

            m = openneuron.compiler.metrics()  # where the first call's compile time went
            out["compile_time"] = {**m["compile_time"], "kernels": m["kernels"],
                                   "kernels_distinct": m["kernels_distinct"], "kernels_built": m["kernels_built"]}
    return out


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def run_forked(req: dict) -> dict:
    """Forks a child that runs `probe(req)`; returns its result or an error."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        try:
            fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            signal.alarm(int(req["timeout"]))  # default action: terminate
            result = {"ok": True, **probe(req)}
        except BaseException as e:  # noqa: BLE001
            traceback.print_exc()
            result = {"ok": False, "error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}
        try:
            _write_all(w, json.dumps(result).encode())
            os.close(w)
            if "torch._inductor.async_compile" in sys.modules:  # stop compile workers
                sys.modules["torch._inductor.async_compile"].shutdown_compile_workers()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 1 << 16):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if chunks:
        try:
            return json.loads(b"".join(chunks))
        except json.JSONDecodeError:
            pass
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        why = "timed out" if sig == signal.SIGALRM else f"killed by signal {signal.Signals(sig).name}"
    else:
        why = f"exited with status {os.WEXITSTATUS(status)}"
    return {"ok": False, "error": f"probe process {why}"}


def serve(module: str) -> None:
    """Probe server: imports one workload module, then forks one child per
    request (JSON lines on stdin, answers on the original stdout)."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints must not corrupt the protocol
    import importlib

    importlib.import_module(f"benchmarks.workloads.{module}")
    # torch.compile imports Dynamo on first use (about 1 s), a library import
    # like transformers (which imports it itself): the same cold and warm and
    # for every backend, so no workload counts it in its first call.
    import torch._dynamo  # noqa: F401
    proto.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        proto.write(json.dumps(run_forked(json.loads(line))) + "\n")


# ----------------------------------------------------------------------------- main-process side

class ProbeServers:
    """One probe server per workload module, started on first use."""

    def __init__(self, log_dir: str, quick: bool, steps: int):
        self.log_dir, self.quick, self.steps = log_dir, quick, steps
        self.servers: dict[str, tuple[subprocess.Popen, object]] = {}
        os.makedirs(log_dir, exist_ok=True)

    def _server(self, module: str, timeout: float = 300):
        if module in self.servers:
            return self.servers[module][0]
        log = open(os.path.join(self.log_dir, f"server-{module}.log"), "w")
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", module],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                env=env, text=True, bufsize=1, cwd=ROOT)
        self.servers[module] = (proc, log)
        ready = self._readline(proc, timeout)
        if not ready or not json.loads(ready).get("ready"):
            self.close(module)
            raise RuntimeError(f"probe server for {module} did not start (see {log.name})")
        return proc

    @staticmethod
    def _readline(proc: subprocess.Popen, timeout: float) -> str | None:
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        return proc.stdout.readline() if ready else None

    def run(self, wl, cfg, cache_dir: str | None = None, tag: str = "", timeout: float = 600) -> dict:
        """Probe `wl` under `cfg` in a process of its own; returns the child's
        result: {"ok": True, ...} or {"ok": False, "error": ..., "log": ...}."""
        log = os.path.join(self.log_dir, f"{wl.name}.{cfg.key}{'.' + tag if tag else ''}.log")
        try:
            proc = self._server(wl.module)
        except Exception as e:  # noqa: BLE001
            return {"ok": False, "error": str(e), "log": log}
        req = {"module": wl.module, "workload": wl.name, "quick": self.quick, "config": cfg.key,
               "cache_dir": cache_dir, "steps": self.steps, "log": log, "timeout": timeout}
        proc.stdin.write(json.dumps(req) + "\n")
        proc.stdin.flush()
        line = self._readline(proc, timeout + 60)
        if not line:
            self.close(wl.module)
            return {"ok": False, "error": "probe server did not answer", "log": log}
        res = json.loads(line)
        if not res.get("ok"):
            res["log"] = log
            try:
                with open(log) as f:
                    res["log_tail"] = f.read()[-2000:]
            except OSError:
                pass
        return res

    def close(self, module: str | None = None) -> None:
        for name in [module] if module else list(self.servers):
            if name not in self.servers:
                continue
            proc, log = self.servers.pop(name)
            try:
                proc.stdin.close()
                proc.wait(timeout=30)
            except Exception:  # noqa: BLE001
                proc.kill()
                proc.wait()
            log.close()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        sys.exit(__doc__)

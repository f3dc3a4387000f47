"""Shared machinery of the benchmark suite.

- `Config`: a device and, for compiled configurations, a `torch.compile`
  backend. `availability()` says why one cannot run here (never a silent skip).
- `Workload` / `Instance`: a workload builds an instance for a device and a
  compile function; `Instance.step()` does one unit of work and returns its
  output (for the correctness check), `Instance.work` is that unit in the
  workload's `unit` (GFLOP, tokens, images, ...), so throughput = work / time.
- `measure()`: builds every configuration of one workload in this process,
  records its first two outputs, warms it up, then times it in repeats that
  interleave the configurations (each repeat runs every configuration once, in
  a rotating order), and takes the median.
- `compare()`: outputs against cpu eager's (allclose), so a configuration that
  is fast but wrong is flagged.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import statistics
import time
import traceback
from typing import Any, Callable

import torch

BASELINE = "cpu-eager"


# ----------------------------------------------------------------------------- configurations

@dataclasses.dataclass(frozen=True)
class Config:
    key: str
    label: str
    device: str
    backend: str | None = None  # torch.compile backend; None: eager

    @property
    def compiled(self) -> bool:
        return self.backend is not None


CONFIGS = (
    Config("cpu-eager", "cpu eager", "cpu"),
    Config("neuron-eager", "neuron eager", "neuron"),
    Config("cpu-inductor", "cpu compile (inductor)", "cpu", "inductor"),
    Config("neuron-compile", 'neuron compile (backend "neuron")', "neuron", "neuron"),
)
CONFIG_BY_KEY = {c.key: c for c in CONFIGS}


def compile_backends() -> list[str]:
    """Every registered torch.compile backend, tagged ones included."""
    from torch import _dynamo

    return _dynamo.list_backends(exclude_tags=())


def availability(cfg: Config) -> str | None:
    """None when `cfg` can run in this process, else the reason it cannot."""
    if cfg.device != "cpu":
        mod = getattr(torch, cfg.device, None)
        if mod is None or not mod.is_available():
            return f'the "{cfg.device}" device is not available (OpenNeuron not loaded?)'
    if cfg.backend is None:
        return None
    if cfg.backend not in compile_backends():
        from torch import _dynamo

        return (f'no torch.compile backend "{cfg.backend}" is registered '
                f'(torch._dynamo.list_backends(): {", ".join(_dynamo.list_backends())})')
    if cfg.backend == "inductor" and cfg.device == "cpu":
        try:
            from torch._inductor.cpp_builder import get_cpp_compiler

            get_cpp_compiler()
        except Exception as e:  # noqa: BLE001
            return f"Inductor on cpu needs a C++ compiler: {e}"
    return None


def compiler(cfg: Config) -> Callable:
    """The function a workload applies to what it would compile: identity in eager."""
    if cfg.backend is None:
        return lambda fn, **kwargs: fn
    return lambda fn, **kwargs: torch.compile(fn, backend=cfg.backend, **kwargs)


def sync(device: torch.device) -> None:
    if device.type != "cpu":
        getattr(torch, device.type).synchronize()


# ----------------------------------------------------------------------------- workloads

@dataclasses.dataclass
class Instance:
    step: Callable[[], Any]  # one unit of work; returns its output (tensors)
    work: float  # amount of work per step, in the workload's unit (throughput = work / s)


@dataclasses.dataclass
class Workload:
    name: str
    group: str
    title: str
    unit: str  # of throughput, e.g. "GFLOP/s"
    build: Callable[[torch.device, Callable], Instance]
    params: dict = dataclasses.field(default_factory=dict)
    # (rtol, atol) of the check against cpu eager, for eager and compiled configurations
    tol_eager: tuple[float, float] = (1e-4, 1e-5)
    tol_compiled: tuple[float, float] = (1e-3, 1e-4)
    compile_in_quick: bool = False  # the one small workload compiled in --quick
    module: str = ""  # set by benchmarks.workloads
    # A native (non-PyTorch) implementation of the same work, timed interleaved
    # with the configurations, as the machine's ceiling (e.g. STREAM's triad).
    reference: Callable[[], Instance] | None = None
    reference_label: str = ""
    # Steps per timed repeat at least: a slow step (a model's) is one noisy
    # sample on a shared machine; several make the median meaningful.
    min_timed_steps: int = 1


MODEL_TIMED_STEPS = 8  # min_timed_steps of the model and demo workloads


REFERENCE = Config("reference", "native reference", "cpu")


# ----------------------------------------------------------------------------- outputs and checks

def to_cpu(obj: Any) -> Any:
    """A CPU snapshot of a step's output (tensors copied, containers kept)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, (list, tuple)):
        return [to_cpu(v) for v in obj]
    if isinstance(obj, (int, float, bool)):
        return torch.tensor(obj)
    return None


def _tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for k in sorted(obj) for t in _tensors(obj[k])]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _tensors(v)]
    return []


def compare(out: Any, ref: Any, rtol: float, atol: float) -> dict:
    """allclose of every tensor in `out` against `ref`; returns
    {"status": "ok"|"exact"|"mismatch", "max_abs_diff", "rtol", "atol", "detail"}."""
    a, b = _tensors(out), _tensors(ref)
    res = {"rtol": rtol, "atol": atol, "max_abs_diff": 0.0, "tensors": len(b)}
    if len(a) != len(b):
        return {**res, "status": "mismatch", "detail": f"{len(a)} output tensors, cpu eager has {len(b)}"}
    exact, ok = True, True
    for i, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            return {**res, "status": "mismatch", "detail": f"output {i}: shape {tuple(x.shape)} vs {tuple(y.shape)}"}
        if x.is_floating_point() or x.is_complex() or y.is_floating_point():
            x64, y64 = x.double(), y.double()
            finite = torch.isfinite(y64)
            if not torch.equal(torch.isfinite(x64), finite):
                ok = exact = False
                res["detail"] = f"output {i}: non-finite values differ"
                continue
            if x64.numel():
                diff = (x64 - y64).abs()[finite]
                if diff.numel():
                    res["max_abs_diff"] = max(res["max_abs_diff"], diff.max().item())
            exact &= torch.equal(x, y)
            if not torch.allclose(x64, y64, rtol=rtol, atol=atol, equal_nan=True):
                ok = False
                res.setdefault("detail", f"output {i} (shape {tuple(x.shape)}) outside tolerance")
        else:
            same = torch.equal(x, y)
            exact &= same
            if not same:
                ok = False
                n = (x != y).sum().item()
                res["max_abs_diff"] = max(res["max_abs_diff"], (x.double() - y.double()).abs().max().item())
                res.setdefault("detail", f"output {i}: {n} of {x.numel()} integer values differ")
    res["status"] = "exact" if exact else ("ok" if ok else "mismatch")
    return res


# ----------------------------------------------------------------------------- timing

@dataclasses.dataclass
class Options:
    repeats: int = 7
    warmup: int = 3
    target_s: float = 0.4  # wall time of one timed batch of steps
    max_inner: int = 10_000


def _short(e: BaseException) -> str:
    msg = f"{type(e).__name__}: {e}".strip()
    first = msg.splitlines()[0] if msg else type(e).__name__
    return first[:300]


def measure(wl: Workload, configs: list[Config], opts: Options,
            cache_dir: Callable[[Config], Any] = lambda cfg: None,
            progress: Callable[[str], None] = lambda s: None) -> dict[str, dict]:
    """Times `wl` under each of `configs` in this process, interleaved.

    Returns {config key: result}; a result has "status" ("measured" or
    "error" with "reason"), "throughput" (median), "samples", "inner_steps",
    "first_call_s" and, in "_outputs", the CPU snapshots of the first two
    steps' outputs (for `compare`); the workload's native reference, if any,
    under key "reference". `cache_dir(cfg)`: for a compiled
    configuration, an Inductor cache directory to compile in (the probes'
    warm one, so compiling here costs a warm start)."""
    results: dict[str, dict] = {}
    live: dict[str, tuple[Config, Instance, torch.device, int]] = {}
    for cfg in configs:
        progress(f"{cfg.key}: build + warm-up")
        res = results[cfg.key] = {"status": "measured"}
        device = torch.device(cfg.device)
        try:
            directory = cache_dir(cfg) if cfg.compiled else None
            ctx = contextlib.nullcontext()
            if directory:
                from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir

                ctx = temporary_cache_dir(directory)
            with ctx:
                torch.manual_seed(0)
                inst = wl.build(device, compiler(cfg))
                t0 = time.perf_counter()
                out1 = inst.step()
                sync(device)
                res["first_call_s"] = time.perf_counter() - t0
                out1 = to_cpu(out1)
                out2 = to_cpu(inst.step())
                sync(device)
                for _ in range(opts.warmup):
                    inst.step()
                sync(device)
                t0 = time.perf_counter()
                inst.step()
                sync(device)
                one = time.perf_counter() - t0
            res["_outputs"] = [out1, out2]
            inner = max(wl.min_timed_steps, min(opts.max_inner, round(opts.target_s / max(one, 1e-7))))
            res["inner_steps"] = inner
            live[cfg.key] = (cfg, inst, device, inner)
        except Exception as e:  # noqa: BLE001
            res.update(status="error", reason=_short(e), traceback=traceback.format_exc()[-4000:])

    if wl.reference is not None:
        res = results[REFERENCE.key] = {"status": "measured", "label": wl.reference_label}
        try:
            inst = wl.reference()
            for _ in range(opts.warmup + 2):
                inst.step()
            t0 = time.perf_counter()
            inst.step()
            one = time.perf_counter() - t0
            inner = max(1, min(opts.max_inner, round(opts.target_s / max(one, 1e-7))))
            res["inner_steps"] = inner
            live[REFERENCE.key] = (REFERENCE, inst, torch.device("cpu"), inner)
        except Exception as e:  # noqa: BLE001
            res.update(status="error", reason=_short(e), traceback=traceback.format_exc()[-4000:])

    samples: dict[str, list[float]] = {k: [] for k in live}
    for rep in range(opts.repeats):
        keys = list(live)
        if not keys:
            break
        progress(f"repeat {rep + 1}/{opts.repeats}")
        shift = rep % len(keys)
        gc.collect()
        for key in keys[shift:] + keys[:shift]:
            cfg, inst, device, inner = live[key]
            try:
                t0 = time.perf_counter()
                for _ in range(inner):
                    out = inst.step()
                    # Each step's result is computed before it is dropped:
                    # eager fusion never runs a chain whose results nobody
                    # holds, so a dropped result would be work not done.
                    sync(device)
                    del out
                dt = time.perf_counter() - t0
                samples[key].append(inner * inst.work / dt)
            except Exception as e:  # noqa: BLE001
                results[key].update(status="error", reason=_short(e), traceback=traceback.format_exc()[-4000:])
                del live[key]

    for key, vals in samples.items():
        if results[key]["status"] != "measured" or not vals:
            continue
        med = statistics.median(vals)
        results[key].update(
            throughput=med,
            samples=vals,
            spread=(max(vals) - min(vals)) / med if med else math.nan,
            step_s=live[key][1].work / med if med else math.nan,  # seconds per step
        )
    live.clear()
    gc.collect()
    return results

"""OpenNeuron's benchmark suite: every workload under every configuration,
measured in the same process run, interleaved.

    .venv/bin/python benchmarks/run.py [--quick] [--out reports/benchmarks]

Configurations: cpu eager, neuron eager, cpu with torch.compile (Inductor),
neuron with torch.compile(backend="neuron") when torch._dynamo has that
backend; one that cannot run is reported as unavailable, with the reason.
Workloads (benchmarks/workloads/): a loop of tiny ops; GELU as separate ops,
LayerNorm, softmax, an AdamW step over many small tensors; matmul and
convolution at a few sizes (GFLOP/s); BERT, GPT-2 (generation), Llama and
ResNet built from transformers configs; the demo's training step.

For each workload: every configuration is built and warmed up in this
process, then timed in repeats that interleave the configurations; the
median is reported with its ratio to cpu eager. Peak resident memory, device
peak memory and (compiled) cold-compile and warm-start times come from one
process per workload and configuration (benchmarks/probe.py). Each
configuration's first two outputs are checked against cpu eager's.

Writes OUT/benchmarks.json, OUT/benchmarks.md and OUT/ratios.png; a full run
(every workload and configuration) also regenerates the README's "Benchmarks
(latest run)" section (between <!-- benchmarks:begin/end --> markers) and
copies its outputs to benchmarks/results/ (--no-readme / --readme to choose). --quick (< 5 min on
2 cores; what CI runs) uses small sizes and few repeats, and compiles only
the smallest workload, reporting the others as skipped with the reason.
"""
from __future__ import annotations

import argparse
import datetime
import os
import shlex
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

QUICK_COMPILE_SKIP = ("skipped in --quick: compile too slow for CI on 2 cores "
                      "(only the smallest workload is compiled)")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats, one compiled workload (CI)")
    p.add_argument("--out", default=os.path.join(ROOT, "reports", "benchmarks"), help="output directory")
    readme = p.add_mutually_exclusive_group()
    readme.add_argument("--no-readme", dest="readme", action="store_false", default=None,
                        help="do not touch README.md or benchmarks/results/ (default for --quick)")
    readme.add_argument("--readme", dest="readme", action="store_true",
                        help="regenerate the README section (default for full runs)")
    p.add_argument("--repeats", type=int, help="timed repeats per configuration (default 7, quick 3)")
    p.add_argument("--warmup", type=int, help="warm-up steps after the first two (default 3, quick 1)")
    p.add_argument("--target-s", type=float, help="seconds of steps per timed repeat (default 0.4, quick 0.03)")
    p.add_argument("--probe-steps", type=int, help="steady steps in each memory probe (default 3, quick 1)")
    p.add_argument("--warm-starts", type=int, default=3,
                   help="warm-start processes per compiled configuration; the median is reported (default 3)")
    p.add_argument("--only", help="comma-separated workload names (or prefixes) to run")
    p.add_argument("--configs", default="cpu-eager,neuron-eager,cpu-inductor,neuron-compile",
                   help="comma-separated configuration keys (cpu-eager is the baseline of every ratio)")
    p.add_argument("--driver", choices=("host", "protected"),
                   help="the neuron configurations' driver (sets OPENNEURON_DRIVER; default: the environment's)")
    p.add_argument("--threads", type=int, help="intra-op threads (sets OMP_NUM_THREADS/MKL_NUM_THREADS too)")
    p.add_argument("--note", action="append", default=[], help="a note to print in the reports")
    return p.parse_args(argv)


class Progress:
    """A tqdm bar on stderr when it is a terminal (and tqdm is installed), else
    one line per step with the elapsed time (logs, CI)."""

    def __init__(self, total: int):
        self.bar = None
        if sys.stderr.isatty():
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, file=sys.stderr, unit="step", mininterval=0.5, dynamic_ncols=True,
                                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]")
            except ImportError:
                pass
        self.total, self.n, self.t0 = total, 0, time.monotonic()

    def step(self, desc: str) -> None:
        self.n += 1
        if self.bar is not None:
            self.bar.set_description_str(desc[:70], refresh=False)
            self.bar.update(1)
        else:
            sys.stderr.write(f"[{self.n}/{self.total} {time.monotonic() - self.t0:6.0f}s] {desc}\n")
            sys.stderr.flush()

    def write(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            sys.stderr.write(line + "\n")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.driver:  # before torch loads OpenNeuron; probe servers inherit it
        os.environ["OPENNEURON_DRIVER"] = args.driver
    started = datetime.datetime.now().astimezone()
    t_start = time.monotonic()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from benchmarks import harness, probe, report, workloads

    monitor = report.CpuMonitor()
    quick = args.quick
    opts = harness.Options(
        repeats=args.repeats or (3 if quick else 7),
        warmup=args.warmup if args.warmup is not None else (1 if quick else 3),
        target_s=args.target_s or (0.03 if quick else 0.4),
    )
    probe_steps = args.probe_steps or (1 if quick else 3)
    warm_starts = max(1, args.warm_starts)
    wls = workloads.all_workloads(quick)
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        wls = [wl for wl in wls if any(wl.name.startswith(w) for w in wanted)]
        if not wls:
            sys.exit(f"--only {args.only!r} matches no workload")
    selected = {k.strip() for k in args.configs.split(",")}
    unknown = selected - set(harness.CONFIG_BY_KEY)
    if unknown:
        sys.exit(f"unknown configuration(s) {sorted(unknown)}; known: {list(harness.CONFIG_BY_KEY)}")
    unavailable = {c.key: harness.availability(c) for c in harness.CONFIGS}

    def plan(wl):
        """{config key: None (run) or (status, reason)}"""
        out = {}
        for c in harness.CONFIGS:
            if c.key not in selected:
                out[c.key] = ("skipped", "not selected (--configs)")
            elif unavailable[c.key]:
                out[c.key] = ("unavailable", unavailable[c.key])
            elif c.compiled and quick and not wl.compile_in_quick:
                out[c.key] = ("skipped", QUICK_COMPILE_SKIP)
            else:
                out[c.key] = None
        return out

    plans = {wl.name: plan(wl) for wl in wls}
    total = sum(sum((2 + warm_starts if harness.CONFIG_BY_KEY[k].compiled else 2) for k, v in plans[wl.name].items() if v is None)
                + opts.repeats for wl in wls)
    os.makedirs(args.out, exist_ok=True)
    log_dir = os.path.join(args.out, "logs")
    shutil.rmtree(log_dir, ignore_errors=True)
    servers = probe.ProbeServers(log_dir, quick, probe_steps)
    cache_root = tempfile.mkdtemp(prefix="openneuron-bench-inductor-")
    progress = Progress(total)
    progress.write(f"benchmarks: {len(wls)} workloads x {len(harness.CONFIGS)} configurations "
                   f"({'quick' if quick else 'full'} run); logs in {log_dir}")
    for c in harness.CONFIGS:
        if unavailable[c.key]:
            progress.write(f"  {c.label}: unavailable: {unavailable[c.key]}")
    busy = monitor.other_cores_now()
    if busy is not None and busy > 0.3 and torch.get_num_threads() > 1:
        progress.write(f"  warning: other processes are using {busy:.1f} cores; with {torch.get_num_threads()} "
                       "threads OpenMP regions will stall and timings will be noisy (consider --threads 1)")

    results = []
    try:
        for i, wl in enumerate(wls):
            monitor.sample()
            t_wl = time.monotonic()
            runnable = [harness.CONFIG_BY_KEY[k] for k, v in plans[wl.name].items() if v is None]
            res = {k: {"status": v[0], "reason": v[1]} for k, v in plans[wl.name].items() if v is not None}
            probes, cache_dirs = {}, {}
            for cfg in runnable:
                if cfg.compiled:
                    d = cache_dirs[cfg.key] = tempfile.mkdtemp(dir=cache_root, prefix=f"{wl.name}.{cfg.key}.")
                    progress.step(f"{wl.name} · {cfg.key} · cold compile")
                    cold = servers.run(wl, cfg, cache_dir=d, tag="cold", timeout=1200)
                    warms = []
                    for n in range(warm_starts):
                        progress.step(f"{wl.name} · {cfg.key} · warm start {n + 1}")
                        warms.append(servers.run(wl, cfg, cache_dir=d, tag=f"warm{n}", timeout=900))
                    probes[cfg.key] = (cold, _median_probe(warms))
                else:
                    progress.step(f"{wl.name} · {cfg.key} · memory probe")
                    probes[cfg.key] = (None, servers.run(wl, cfg, timeout=600))
            measured = harness.measure(wl, runnable, opts, cache_dir=lambda c: cache_dirs.get(c.key),
                                       progress=lambda s: progress.step(f"{wl.name} · {s}"))
            for cfg in runnable:
                r = measured[cfg.key]
                _merge_probes(r, *probes[cfg.key])
                res[cfg.key] = r
            entry = {
                "name": wl.name, "group": wl.group, "title": wl.title, "unit": wl.unit, "params": wl.params,
                "tol_eager": list(wl.tol_eager), "tol_compiled": list(wl.tol_compiled),
                "results": {c.key: res[c.key] for c in harness.CONFIGS},
                "elapsed_s": time.monotonic() - t_wl,
            }
            if "reference" in measured:
                entry["reference"] = measured["reference"]
            report.finalize_workload(entry)  # ratios and the check against cpu eager
            results.append(entry)
            report.print_summary_line(entry, progress.write)
            torch._dynamo.reset()
            if i + 1 == len(wls) or wls[i + 1].module != wl.module:
                servers.close(wl.module)
    finally:
        progress.close()
        servers.close()
        shutil.rmtree(cache_root, ignore_errors=True)

    load = monitor.stop()
    data = {
        "schema": 1,
        "mode": "quick" if quick else "full",
        "command": _command_line(),
        "started": started.isoformat(timespec="seconds"),
        "elapsed_s": time.monotonic() - t_start,
        "machine": report.machine_info(),
        "load": load,
        "settings": {**vars(opts), "probe_steps": probe_steps, "warm_starts": warm_starts,
                     "configs": sorted(selected)},
        "configs": [{"key": c.key, "label": c.label, "device": c.device, "backend": c.backend,
                     "available": unavailable[c.key] is None, "reason": unavailable[c.key]}
                    for c in harness.CONFIGS],
        "workloads": results,
        "notes": _notes(torch),
        "user_notes": args.note,
    }
    for wl in data["workloads"]:  # the check flags a fast-but-wrong configuration
        for key, r in wl["results"].items():
            if r.get("check", {}).get("status") == "mismatch":
                sys.stderr.write(f"WARNING: {wl['name']} / {key} output differs from cpu eager: "
                                 f"{r['check'].get('detail')}\n")
    partial = bool(args.only) or selected != set(harness.CONFIG_BY_KEY)
    # A quick or partial run (--only, --configs) is not the full picture the README shows.
    do_readme = args.readme if args.readme is not None else not (quick or partial)
    paths = report.render(data, args.out, readme=do_readme)
    with open(paths["benchmarks.md"]) as f:
        markdown = f.read()
    print(markdown)
    sys.stderr.write(f"wrote {', '.join(paths.values())}{' and the README section' if do_readme else ''} "
                     f"in {data['elapsed_s'] / 60:.1f} min\n")
    return 0


def _median_probe(probes: list[dict]) -> dict:
    """Of several warm-start processes, the one with the median first call
    (a failed one, if any), with every first call in `first_call_runs_s`:
    one new process is as noisy as a single timed step."""
    failed = [p for p in probes if not p.get("ok")]
    if failed:
        return failed[0]
    ordered = sorted(probes, key=lambda p: p["first_call_s"])
    return {**ordered[(len(ordered) - 1) // 2], "first_call_runs_s": [p["first_call_s"] for p in probes]}


def _merge_probes(r: dict, cold: dict | None, probe: dict) -> None:
    """Adds the probe processes' figures to an in-process result."""
    if probe.get("ok"):
        for k in ("peak_rss_mib", "rss_start_mib", "device_peak_mib", "transfers_per_step", "fallback_ops",
                  "minor_faults_per_step"):
            if k in probe:
                r[k] = probe[k]
        r["probe_first_call_s"] = probe["first_call_s"]
        if not probe.get("peak_rss_reset", True):
            r["peak_rss_note"] = "peak counter could not be reset at fork: includes the probe server's peak"
    else:
        r["memory_error"] = probe.get("error")
        r["probe_log"] = probe.get("log")
    if cold is not None:
        if probe.get("ok"):
            r["warm_start_s"] = probe["first_call_s"]
            r["warm_start_runs_s"] = probe.get("first_call_runs_s", [probe["first_call_s"]])
        else:
            r["warm_start_error"] = probe.get("error")
        if cold.get("ok"):
            r["cold_compile_s"] = cold["first_call_s"]
            r["cold_peak_rss_mib"] = cold["peak_rss_mib"]
            if "compile_time" in cold:
                r["cold_compile_breakdown"] = cold["compile_time"]
        else:
            r["cold_compile_error"] = cold.get("error")
            r["cold_compile_log"] = cold.get("log")


def _notes(torch) -> list[str]:
    notes = []
    try:
        from torch.optim.optimizer import _default_to_fused_or_foreach

        defaults = {}
        for dev in ("cpu", "neuron"):
            p = [torch.zeros(1, device=dev, requires_grad=True)]
            defaults[dev] = "foreach" if _default_to_fused_or_foreach(p, False, False)[1] else "per-tensor loop"
        notes.append(f"AdamW's default implementation: cpu {defaults['cpu']}, neuron {defaults['neuron']} "
                     "(llama_train and demo_train_step use the default; adamw_small_tensors pins foreach).")
    except Exception:  # noqa: BLE001
        pass
    notes.append("transformers treats device type \"neuron\" as AWS Neuron: generate() with a static cache "
                 "compiles the forward itself with backend \"neuron\" (gpt2_generate disables that and compiles "
                 "explicitly per configuration).")
    return notes


def _command_line() -> str:
    argv = [os.path.relpath(sys.argv[0], ROOT) if os.path.isabs(sys.argv[0]) else sys.argv[0], *sys.argv[1:]]
    exe = os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(ROOT) else "python"
    return " ".join(shlex.quote(a) for a in [exe, *argv])


if __name__ == "__main__":
    sys.exit(main())

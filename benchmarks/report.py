"""The suite's outputs: machine description, ratios to cpu eager, JSON,
Markdown tables, the PNG chart of the ratios and the README section."""
from __future__ import annotations

import json
import math
import os
import platform
import re
import subprocess
import sys
import time

if __name__ == "__main__":  # python benchmarks/report.py RUN.json
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.harness import BASELINE, CONFIGS, CONFIG_BY_KEY, MODEL_TIMED_STEPS  # noqa: E402

README_BEGIN = "<!-- benchmarks:begin -->"
README_END = "<!-- benchmarks:end -->"


# ----------------------------------------------------------------------------- machine

def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return None


def _git(*args) -> str | None:
    try:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                              timeout=10).stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def machine_info() -> dict:
    import torch

    from benchmarks.harness import compile_backends

    info = {
        "cpu_model": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": _mem_total_gib(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENNEURON_DRIVER",
                                               "OPENNEURON_HOST_DEVICES", "TORCHINDUCTOR_COMPILE_THREADS")},
        "compile_backends": compile_backends(),
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
    }
    try:
        info["parallel_info"] = torch.__config__.parallel_info()
    except Exception:  # noqa: BLE001
        pass
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        pass
    if hasattr(torch, "neuron") and torch.neuron.is_available():
        info["neuron_device"] = torch.neuron.get_device_name(0)
        info["neuron_device_count"] = torch.neuron.device_count()
    return info


class CpuMonitor:
    """How much CPU other processes used while the suite ran: the machine's
    busy time (/proc/stat) minus this process tree's (os.times, children
    included once waited for), over wall time."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.busy0 = self._busy()
        self.own0 = self._own()
        self.loads = [os.getloadavg()[0]]

    @staticmethod
    def _busy() -> float | None:
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
            return (v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def other_cores_now(self, seconds: float = 0.5) -> float | None:
        """Cores other processes use right now (a short sample)."""
        b0, o0 = self._busy(), self._own()
        time.sleep(seconds)
        b1, o1 = self._busy(), self._own()
        return None if b0 is None or b1 is None else max(0.0, (b1 - b0) - (o1 - o0)) / seconds

    def sample(self) -> None:
        self.loads.append(os.getloadavg()[0])

    def stop(self) -> dict:
        self.sample()
        wall = time.monotonic() - self.t0
        busy = self._busy()
        res = {"wall_s": wall, "loadavg_1min": {"min": min(self.loads), "max": max(self.loads)}}
        if busy is not None and self.busy0 is not None and wall > 0:
            other = max(0.0, (busy - self.busy0) - (self._own() - self.own0)) / wall
            res["other_processes_cores"] = other
            res["shared"] = other > 0.1
        return res


# ----------------------------------------------------------------------------- numbers

def finalize_workload(wl: dict) -> None:
    """Adds every ratio to cpu eager (same run) and the correctness checks,
    then drops the outputs kept for the checks."""
    from benchmarks.harness import compare

    res = wl["results"]
    base = res.get(BASELINE, {})
    base_ok = base.get("status") == "measured"
    for key, r in res.items():
        if r.get("status") != "measured":
            continue
        if base_ok:
            r["ratio"] = _div(r.get("throughput"), base.get("throughput"))
            r["peak_rss_ratio"] = _div(r.get("peak_rss_mib"), base.get("peak_rss_mib"))
            growth = _sub(base.get("peak_rss_mib"), base.get("rss_start_mib"))
            r["device_peak_ratio"] = _div(r.get("device_peak_mib"), growth)
            r["cold_compile_ratio"] = _div(r.get("cold_compile_s"), base.get("step_s"))
            r["warm_start_ratio"] = _div(r.get("warm_start_s"), base.get("step_s"))
        r["warm_over_cold"] = _div(r.get("warm_start_s"), r.get("cold_compile_s"))
        if key == BASELINE:
            r["check"] = {"status": "reference"}
        elif base_ok and "_outputs" in base and "_outputs" in r:
            tol = wl["tol_compiled"] if CONFIG_BY_KEY[key].compiled else wl["tol_eager"]
            r["check"] = compare(r["_outputs"], base["_outputs"], *tol)
        else:
            r["check"] = {"status": "not checked", "detail": "no cpu eager output"}
    for r in res.values():
        r.pop("_outputs", None)


def _div(a, b):
    return a / b if a is not None and b else None


def _sub(a, b):
    return a - b if a is not None and b is not None else None


def fmt(x, digits=3) -> str:
    """3 significant digits, thousands separators, no exponent for the usual range."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    if mag >= digits - 1:
        return f"{round(x, -(mag - digits + 1)):,.0f}"
    return f"{x:,.{decimals}f}"


def fmt_ratio(r) -> str:
    return "–" if r is None else f"{r:.2f}×"


# ----------------------------------------------------------------------------- JSON

def write_json(data: dict, path: str) -> None:
    def clean(o):
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items() if not k.startswith("_")}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        return o

    with open(path, "w") as f:
        json.dump(clean(data), f, indent=1)
        f.write("\n")


# ----------------------------------------------------------------------------- Markdown

def _check_flag(r: dict) -> str:
    c = r.get("check", {})
    if c.get("status") == "mismatch":
        return " **MISMATCH**"
    return ""


class _Footnotes:
    def __init__(self):
        self.items: list[str] = []

    def ref(self, text: str) -> str:
        if text not in self.items:
            self.items.append(text)
        return f"[{self.items.index(text) + 1}]"

    def lines(self) -> list[str]:
        return [f"[{i}] {t}  " for i, t in enumerate(self.items, 1)]


def _status_cell(r: dict, notes: _Footnotes) -> str:
    return f"{r['status']} {notes.ref(r.get('reason', ''))}"


def summary_table(data: dict, notes: _Footnotes) -> list[str]:
    cfgs = [c for c in CONFIGS if any(c.key in wl["results"] for wl in data["workloads"])]
    lines = ["| workload | unit | " + " | ".join(c.label for c in cfgs) + " |",
             "|---|---|" + "---:|" * len(cfgs)]
    for wl in data["workloads"]:
        cells = []
        for c in cfgs:
            r = wl["results"].get(c.key, {"status": "skipped", "reason": "not run"})
            if r["status"] != "measured":
                cells.append(_status_cell(r, notes))
            elif c.key == BASELINE:
                cells.append(fmt(r["throughput"]))
            else:
                cells.append(f"{fmt(r['throughput'])} ({fmt_ratio(r.get('ratio'))}){_check_flag(r)}")
        lines.append(f"| {wl['title']} | {wl['unit']} | " + " | ".join(cells) + " |")
    return lines


def detail_table(data: dict, notes: _Footnotes) -> list[str]:
    lines = ["| workload | configuration | throughput | × cpu eager | spread | peak RSS MiB (×) "
             "| device peak MiB (× cpu RSS growth) | cold compile s (× cpu step) "
             "| warm start s (× cpu step, % of cold) | check vs cpu eager |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for wl in data["workloads"]:
        for key, r in wl["results"].items():
            cfg = CONFIG_BY_KEY[key]
            if r["status"] != "measured":
                lines.append(f"| {wl['name']} | {cfg.label} | {_status_cell(r, notes)} | | | | | | | |")
                continue
            rss = fmt(r.get("peak_rss_mib"))
            if r.get("peak_rss_ratio") is not None:
                rss += f" ({fmt(r['peak_rss_ratio'])}×)"
            elif r.get("memory_error"):
                rss = f"error {notes.ref(r['memory_error'])}"
            dev = "n/a" if cfg.device == "cpu" else fmt(r.get("device_peak_mib"))
            if r.get("device_peak_ratio") is not None:
                dev += f" ({fmt(r['device_peak_ratio'])}×)"
            cold = warm = "n/a"
            if cfg.compiled:
                cold = _timed_cell(r, "cold_compile", notes)
                warm = _timed_cell(r, "warm_start", notes)
                if r.get("warm_over_cold") is not None:
                    warm += f", {100 * r['warm_over_cold']:.1f}% of cold"
            c = r.get("check", {})
            check = c.get("status", "–")
            if check in ("ok", "mismatch"):
                check += f" (max abs diff {c.get('max_abs_diff', 0):.1e})"
            if check.startswith("mismatch"):
                check = f"**{check}** {notes.ref(c.get('detail', ''))}"
            spread = f"±{100 * r['spread'] / 2:.0f}%" if r.get("spread") is not None else "–"
            lines.append(f"| {wl['name']} | {cfg.label} | {fmt(r.get('throughput'))} {wl['unit']} "
                         f"| {fmt_ratio(r.get('ratio'))} | {spread} | {rss} | {dev} | {cold} | {warm} | {check} |")
    return lines


def _timed_cell(r: dict, name: str, notes: _Footnotes) -> str:
    if r.get(f"{name}_s") is None:
        err = r.get(f"{name}_error")
        return f"error {notes.ref(err)}" if err else "–"
    ratio = r.get(f"{name}_ratio")
    return fmt(r[f"{name}_s"]) + (f" ({fmt(ratio)}×)" if ratio is not None else "")


def machine_line(data: dict) -> str:
    m = data["machine"]
    env = ", ".join(f"{k}={v}" for k, v in m["env"].items() if v) or "no thread variables set"
    return (f"{m['cpu_model']}, {m['logical_cpus']} logical CPUs ({m['usable_cpus']} usable), "
            f"{fmt(m.get('memory_gib'))} GiB; torch {m['torch']}, transformers {m.get('transformers', '–')}; "
            f"{m['torch_num_threads']} intra-op / {m['torch_num_interop_threads']} inter-op threads ({env}); "
            f"commit {m.get('git_commit')}{' + local changes' if m.get('git_dirty') else ''}")


def shared_line(data: dict) -> str:
    load = data["load"]
    other = load.get("other_processes_cores")
    if other is None:
        return "Machine sharing: unknown (no /proc/stat)."
    la = load["loadavg_1min"]
    text = (f"other processes used {other:.2f} of {data['machine']['usable_cpus']} cores on average "
            f"during the run (1-min load average {la['min']:.1f}–{la['max']:.1f})")
    if load.get("shared"):
        line = (f"**Shared machine**: {text}. Absolute figures are depressed and noisy; the ratios, "
                f"from interleaved repeats in one process, are the figures to compare.")
        threads = data["machine"]["torch_num_threads"]
        if threads > 1:
            line += (f" With {threads} OpenMP threads while other processes hold cores, parallel regions wait "
                     f"for descheduled threads (small ops can stall for milliseconds); `--threads 1` avoids that.")
        return line
    return f"Machine not shared: {text}."


def write_markdown(data: dict, path: str) -> str:
    notes = _Footnotes()
    s = data["settings"]
    lines = [
        f"# OpenNeuron benchmarks ({data['mode']} run)",
        "",
        f"Command: `{data['command']}`  ",
        f"Run: {data['started']}, {data['elapsed_s'] / 60:.1f} min.  ",
        f"Machine: {machine_line(data)}.  ",
        shared_line(data),
        *([f"Note: {n}" for n in data.get("user_notes", [])]),
        "",
        "## Throughput",
        "",
        f"Median of {s['repeats']} repeats that interleave the configurations in one process (each repeat runs "
        f"every configuration once, rotating the order; about {s['target_s']} s of steps each, "
        f"at least {MODEL_TIMED_STEPS} steps of a model or the demo, after "
        f"{s['warmup']} warm-up steps). In parentheses: ratio to cpu eager in the same run (higher is faster).",
        "",
        *summary_table(data, notes),
        "",
        "## Memory, compile time and correctness",
        "",
        "- spread: half the range of the repeats, relative to the median.",
        "- peak RSS: VmHWM of a process that ran only this workload in this configuration "
        "(forked from a server that had only imported the libraries, peak counter reset at fork); "
        "ratio to cpu eager's. On the host driver device memory is host RAM, so it is in the RSS too.",
        "- device peak: torch.neuron.max_memory_allocated(); ratio to the RSS growth of the cpu-eager process "
        "(its peak RSS minus its RSS at start).",
        "- cold compile: the torch.compile calls and first call in a new process with an empty "
        "TORCHINDUCTOR_CACHE_DIR (and OPENNEURON_COMPILE_CACHE_DIR); warm start: the same in a new process with "
        f"those caches populated (median of {s.get('warm_starts', 1)} such processes; a saved frame is loaded by torch.compile, so that call is counted). Both include "
        "tracing, when any, and one step, not the import of torch._dynamo (done by the probe server, like the other libraries); ratio: in cpu-eager steps of this workload. Peak RSS of a compiled configuration is the warm-start process's.",
        "- check: the first two steps' outputs against cpu eager's (allclose; `exact` when bit-identical).",
        "",
        *detail_table(data, notes),
        "",
        *compile_breakdown_table(data),
    ]
    extra = _reference_notes(data) + _neuron_notes(data)
    if extra:
        lines += ["## Observations", "", *extra, ""]
    if data.get("notes"):
        lines += ["## Notes", "", *[f"- {n}" for n in data["notes"]], ""]
    if notes.items:
        lines += ["## Reasons", "", *notes.lines(), ""]
    text = "\n".join(lines)
    with open(path, "w") as f:
        f.write(text)
    return text


def _reference_notes(data: dict) -> list[str]:
    """Each configuration's throughput as a share of the workload's native
    reference (e.g. STREAM's triad: the machine's memory bandwidth)."""
    out = []
    for wl in data["workloads"]:
        ref = wl.get("reference")
        if not ref:
            continue
        if ref.get("status") != "measured":
            out.append(f"- `{wl['name']}`: {ref.get('label')}: not measured ({ref.get('reason')})")
            continue
        shares = ", ".join(f"{CONFIG_BY_KEY[k].label} {100 * r['throughput'] / ref['throughput']:.0f}%"
                           for k, r in wl["results"].items() if r.get("status") == "measured")
        out.append(f"- `{wl['name']}`: {ref['label']}: {fmt(ref['throughput'])} {wl['unit']} "
                   f"(median, interleaved); share of it: {shares}.")
    return out


def compile_breakdown_table(data: dict) -> list[str]:
    """Where each neuron-compiled workload's cold compile went
    (openneuron.compiler.metrics()["compile_time"] of the cold process)."""
    phases = ("dynamo", "aot_autograd", "python", "lower", "codegen", "build", "load")
    rows = []
    for wl in data["workloads"]:
        for key, r in wl["results"].items():
            b = r.get("cold_compile_breakdown")
            if b:
                rows.append(f"| {wl['name']} | {fmt(r.get('cold_compile_s'))} | "
                            + " | ".join(fmt(b.get(p, 0.0)) for p in phases)
                            + f" | {b.get('kernels', 0)} / {b.get('kernels_distinct', 0)} / {b.get('kernels_built', 0)} |")
    if not rows:
        return []
    return ["Cold compile of the neuron-compiled configurations, seconds by part (PyTorch's: Dynamo, "
            "AOTAutograd; ours: Python-side preparation and wrapper, lowering and passes, code generation, "
            "kernel builds, loading), and kernels launched / distinct / built:",
            "",
            "| workload | cold first call s | " + " | ".join(phases) + " | kernels |",
            "|---|---:|" + "---:|" * len(phases) + "---:|",
            *rows, ""]


def _neuron_notes(data: dict) -> list[str]:
    out = []
    for wl in data["workloads"]:
        for key, r in wl["results"].items():
            if CONFIG_BY_KEY[key].device != "neuron" or r.get("status") != "measured":
                continue
            label = f"`{wl['name']}` / {CONFIG_BY_KEY[key].label}"
            if r.get("fallback_ops"):
                ops = ", ".join(f"{f['op']} ({f['calls']} calls)" for f in r["fallback_ops"])
                out.append(f"- {label}: ops fell back to the CPU with copies: {ops}")
            t = r.get("transfers_per_step") or {}
            odd = {k: v for k, v in t.items() if not k.endswith("/copy")}
            if odd:
                out.append(f"- {label}: transfers other than explicit copies per step: "
                           + ", ".join(f"{k} {v['count']:g} ({fmt(v['bytes'])} B)" for k, v in odd.items()))
            copies = {k: v for k, v in t.items() if k.endswith("/copy")}
            if copies:
                out.append(f"- {label}: explicit host/device copies per step (syncs in the workload's code): "
                           + ", ".join(f"{k.split('/')[0]} {v['count']:g} ({fmt(v['bytes'])} B)"
                                       for k, v in copies.items()))
            if r.get("check", {}).get("status") == "mismatch":
                out.append(f"- {label}: output differs from cpu eager: {r['check'].get('detail')}")
    if not any(r.get("fallback_ops") for wl in data["workloads"] for r in wl["results"].values()):
        out.append("- No op fell back to the CPU with copies in any neuron configuration (memory probes).")
    faults = []
    for wl in data["workloads"]:
        f = {k: r.get("minor_faults_per_step") for k, r in wl["results"].items()}
        if max((v for v in f.values() if v is not None), default=0) >= 1000:
            faults.append(f"| {wl['name']} | " + " | ".join(fmt(f[c.key]) for c in CONFIGS) + " |")
    if faults:
        out += ["- Minor page faults per step (memory probes, steady state). Many faults per step mean the "
                "step's temporaries get fresh pages from the OS each time (glibc hands large freed blocks "
                "back), which costs time on memory-bound work; the neuron caching allocator keeps its blocks.",
                "",
                "  | workload | " + " | ".join(c.label for c in CONFIGS) + " |",
                "  |---|" + "---:|" * len(CONFIGS),
                *[f"  {row}" for row in faults]]
    return out


# ----------------------------------------------------------------------------- chart

def write_chart(data: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    wls = data["workloads"]
    colors = {"neuron-eager": "#1f77b4", "cpu-inductor": "#ff7f0e", "neuron-compile": "#2ca02c"}
    others = [c for c in CONFIGS if c.key != BASELINE]
    shown = [c for c in others if any(wl["results"].get(c.key, {}).get("ratio") for wl in wls)]
    handles = [Patch(color=colors.get(c.key, "gray"), label=c.label) for c in shown]
    for c in others:
        if c not in shown:
            statuses = sorted({wl["results"].get(c.key, {}).get("status", "not run") for wl in wls})
            handles.append(Patch(facecolor="white", edgecolor="gray", label=f"{c.label}: {'/'.join(statuses)}"))
    ratios = [wl["results"][c.key]["ratio"] for wl in wls for c in shown if wl["results"].get(c.key, {}).get("ratio")]
    lo, hi = min([0.5] + ratios) / 1.8, max([2.0] + ratios) * 1.8
    bar_h = 0.8 / max(1, len(shown))
    fig, ax = plt.subplots(figsize=(10, 1.6 + (0.25 + 0.2 * len(shown)) * len(wls)))
    for i, cfg in enumerate(shown):
        for j, wl in enumerate(wls):
            y = j + (i - (len(shown) - 1) / 2) * bar_h
            r = wl["results"].get(cfg.key, {})
            if r.get("ratio"):
                bad = r.get("check", {}).get("status") == "mismatch"
                ax.barh(y, r["ratio"], height=bar_h * 0.9, color=colors.get(cfg.key, "gray"),
                        hatch="xx" if bad else None, edgecolor="red" if bad else None)
                ax.text(r["ratio"] * 1.03, y, f"{r['ratio']:.2f}x" + (" MISMATCH" if bad else ""),
                        va="center", fontsize=7, color="red" if bad else "black")
            else:
                ax.text(lo * 1.05, y, r.get("status", "not run"), va="center", fontsize=7,
                        color="gray", style="italic")
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ticks = [t for t in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100) if lo <= t <= hi]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}x"))
    ax.set_yticks(range(len(wls)))
    ax.set_yticklabels([f"{wl['name']} ({wl['unit']})" for wl in wls], fontsize=8)
    ax.set_ylim(len(wls) - 0.5, -0.5)
    ax.set_xlabel("throughput / cpu-eager throughput, same run (log scale; right of 1 is faster)")
    shared = ", shared machine" if data["load"].get("shared") else ""
    ax.set_title(f"OpenNeuron benchmarks: {data['mode']} run {data['started'][:10]}{shared}, "
                 f"{data['machine']['torch_num_threads']} thread(s)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    axes_h_in = ax.get_position().height * fig.get_figheight()
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.6 / axes_h_in),
              ncol=2, fontsize=8, frameon=False)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


# ----------------------------------------------------------------------------- README

def readme_section(data: dict, results_rel: str) -> str:
    notes = _Footnotes()
    lines = [
        README_BEGIN,
        "## Benchmarks (latest run)",
        "",
        "<!-- generated by benchmarks/run.py from its latest full run; edits here are overwritten -->",
        "Every workload under every configuration (cpu eager, neuron eager, cpu with `torch.compile` "
        "(Inductor), neuron with `torch.compile(backend=\"neuron\")` once that backend is registered), "
        "interleaved in one process, medians of repeats, ratios to cpu eager of the same run; peak memory and "
        "compile times from one process per workload and configuration:",
        "",
        "    .venv/bin/python benchmarks/run.py            # full run, updates this section",
        "    .venv/bin/python benchmarks/run.py --quick    # under 5 minutes; CI runs it "
        "(tests/python/test_benchmarks_quick.py)",
        "",
        f"Outputs go to `reports/benchmarks/` (`--out`): benchmarks.json, benchmarks.md, ratios.png; "
        f"the run that wrote this section is copied to [`{results_rel}/`]({results_rel}/benchmarks.md).",
        "",
        f"Latest: `{data['command']}` on {data['started'][:10]} ({data['elapsed_s'] / 60:.0f} min). "
        f"{machine_line(data)}. {shared_line(data)}",
        *([""] + [f"Note: {n}" for n in data.get("user_notes", [])] if data.get("user_notes") else []),
        "",
        *summary_table(data, notes),
        "",
        *notes.lines(),
        "",
        f"![throughput ratios to cpu eager]({results_rel}/ratios.png)",
        "",
        f"Memory, compile times, correctness checks and observations: [{results_rel}/benchmarks.md]"
        f"({results_rel}/benchmarks.md).",
        README_END,
    ]
    return "\n".join(lines)


def update_readme(readme_path: str, section: str) -> None:
    with open(readme_path) as f:
        text = f.read()
    pattern = re.compile(re.escape(README_BEGIN) + r".*?" + re.escape(README_END), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda m: section, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    with open(readme_path, "w") as f:
        f.write(text)


def print_summary_line(wl: dict, write=print) -> None:
    parts = []
    for key, r in wl["results"].items():
        if r.get("status") != "measured":
            parts.append(f"{key} {r.get('status')}")
            continue
        part = f"{key} {fmt(r.get('throughput'))}"
        if key != BASELINE:
            part += f" ({fmt_ratio(r.get('ratio'))}{', MISMATCH' if r.get('check', {}).get('status') == 'mismatch' else ''})"
        parts.append(part)
    write(f"{wl['name']:<22} [{wl['unit']}] " + " | ".join(parts))


def render(data: dict, out_dir: str, readme: bool = False) -> dict:
    """Writes benchmarks.json/.md and ratios.png to out_dir from a finished
    run's data; with readme, also the README section and benchmarks/results/."""
    import shutil

    os.makedirs(out_dir, exist_ok=True)
    paths = {name: os.path.join(out_dir, name) for name in ("benchmarks.json", "benchmarks.md", "ratios.png")}
    write_json(data, paths["benchmarks.json"])
    write_markdown(data, paths["benchmarks.md"])
    write_chart(data, paths["ratios.png"])
    if readme:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        results_dir = os.path.join(root, "benchmarks", "results")
        os.makedirs(results_dir, exist_ok=True)
        for path in paths.values():
            if os.path.abspath(os.path.dirname(path)) != os.path.abspath(results_dir):
                shutil.copy(path, results_dir)
        update_readme(os.path.join(root, "README.md"), readme_section(data, "benchmarks/results"))
    return paths


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(description="Re-render the outputs of a finished run from its JSON "
                                            "(after a change to the report format; no measurement).")
    p.add_argument("json", help="benchmarks.json of a run")
    p.add_argument("--out", help="output directory (default: the JSON's)")
    p.add_argument("--readme", action="store_true", help="also regenerate the README section and benchmarks/results/")
    a = p.parse_args()
    with open(a.json) as f:
        run = json.load(f)
    print("\n".join(render(run, a.out or os.path.dirname(os.path.abspath(a.json)), a.readme).values()))

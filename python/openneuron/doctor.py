"""openneuron doctor: runs a program unchanged and says, in one report, how
well it runs on the neuron device and what to change.

    python -m openneuron.doctor your_script.py args...     # report on stderr
    python -m openneuron.doctor --json out.json --html out.html --trace trace.json your_script.py args...

    with openneuron.doctor.Doctor() as d:                  # in a notebook
        train_step()
    print(d.report())

It reports ops that ran on the CPU fallback (calls, time, why), host<->device
transfers by direction and cause, host synchronizations by op and source
line (torch.neuron.set_sync_debug_mode's findings, each with the line of
the program that caused it), torch.compile graph breaks and recompiles
with their reasons, kernels built against kernels loaded from the cache,
peak memory per device against its budget, the ops and kernels that took
the most device and host time (torch.profiler with the neuron device
activities); each finding with what to change. --trace writes the run's
Chrome trace, --html a page with the report and a picture of the device
timeline."""
from __future__ import annotations

import argparse
import collections
import json
import os
import runpy
import sys
import time
import traceback
import warnings

import torch

# Frames in these are not the user's program: torch, openneuron, the stdlib's warnings.
_LIBRARY_DIRS = tuple(os.path.dirname(os.path.abspath(f)) + os.sep for f in (torch.__file__, __file__, warnings.__file__))


_TIMED_PREFIXES = ("aten::", "Torch-Compiled Region", "CompiledFunction", "compiled kernel", "library kernel",
                   "neuron")


def _user_frame(stack):
    """The innermost frame of the user's program (not torch, not ours)."""
    for frame in reversed(stack):
        path = os.path.abspath(frame.filename)
        if not path.startswith(_LIBRARY_DIRS) and not frame.filename.startswith("<frozen"):
            return f"{frame.filename}:{frame.lineno}"
    return "(inside a library)"


class Doctor:
    """Collects the findings of the code run inside it (a context manager)."""

    def __init__(self, profile_ops: bool = True):
        self.profile_ops = profile_ops
        self.syncs = collections.Counter()  # (op and why, source line) -> calls
        self._result = None

    # -- collection -----------------------------------------------------
    def __enter__(self):
        N = torch.neuron
        N.reset_fallback_report()
        N.reset_transfer_stats()
        for d in range(N.device_count()):
            N.reset_peak_memory_stats(d)
        import openneuron.compiler as compiler
        compiler.reset_metrics()
        from torch._dynamo.utils import counters
        counters.clear()
        self._eager_before = {r["op"]: dict(r) for r in N.eager_kernel_report()}
        # A saved frame loads without tracing, so its graph breaks would go
        # unseen: frames are traced in a doctor run (graphs still load from
        # the cache).
        self._precompile = os.environ.get("OPENNEURON_COMPILE_PRECOMPILE")
        os.environ["OPENNEURON_COMPILE_PRECOMPILE"] = "0"
        self._sync_mode = N.get_sync_debug_mode()
        N.set_sync_debug_mode("warn")
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("always")
        self._showwarning = warnings.showwarning
        warnings.showwarning = self._on_warning
        self._profiler = None
        if self.profile_ops:
            activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1]
            self._profiler = torch.profiler.profile(activities=activities)
            self._profiler.__enter__()
        self._start = time.perf_counter()
        return self

    def _on_warning(self, message, category, filename, lineno, file=None, line=None):
        text = str(message)
        if "synchronizing operation:" in text:
            what = text.split("synchronizing operation: ", 1)[1].split("; the host waits", 1)[0]
            self.syncs[(what, _user_frame(traceback.extract_stack()[:-1]))] += 1
            return
        if "CPU fallback" in text:
            return  # counted by the fallback report
        self._showwarning(message, category, filename, lineno, file, line)

    def __exit__(self, *exc):
        seconds = time.perf_counter() - self._start
        top_ops, top_kernels, self.device_events = [], [], []
        if self._profiler is not None:
            torch.neuron.synchronize()
            self._profiler.__exit__(None, None, None)
            averages = self._profiler.key_averages()
            # ATen ops, compiled regions and our kernels; not the compiler's own phases.
            rows = sorted((e for e in averages if e.key.startswith(_TIMED_PREFIXES)),
                          key=lambda e: e.self_cpu_time_total, reverse=True)
            top_ops = [{"op": e.key, "calls": e.count, "self_ms": e.self_cpu_time_total / 1000}
                       for e in rows[:10] if e.self_cpu_time_total > 0]
            device = torch.autograd.DeviceType.PrivateUse1
            self.device_events = [e for e in self._profiler.events() if e.device_type == device]
            by_name = collections.defaultdict(lambda: [0, 0.0])
            for e in self.device_events:
                by_name[e.name][0] += 1
                by_name[e.name][1] += e.time_range.elapsed_us() / 1000
            top_kernels = [{"kernel": k, "calls": n, "device_ms": ms}
                           for k, (n, ms) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:10]]
        warnings.showwarning = self._showwarning
        self._warnings.__exit__(None, None, None)
        N = torch.neuron
        N.set_sync_debug_mode(self._sync_mode)
        if self._precompile is None:
            os.environ.pop("OPENNEURON_COMPILE_PRECOMPILE", None)
        else:
            os.environ["OPENNEURON_COMPILE_PRECOMPILE"] = self._precompile
        self._result = self._collect(seconds, top_ops)
        self._result["top_kernels"] = top_kernels
        return False

    def _collect(self, seconds, top_ops):
        N = torch.neuron
        import openneuron.compiler as compiler
        from torch._dynamo.utils import counters
        driver = N.get_device_properties(0).driver if N.device_count() else "none"
        eager = []
        for r in N.eager_kernel_report():
            before = self._eager_before.get(r["op"], {})
            launches = r["launches"] - before.get("launches", 0)
            if launches:
                eager.append({"op": r["op"], "launches": launches, "builds": r["builds"] - before.get("builds", 0)})
        memory = []
        for d in range(N.device_count()):
            if d and not N.max_memory_reserved(d):
                continue  # an unused device
            free, total = N.mem_get_info(d)
            memory.append({"device": d, "peak_allocated": N.max_memory_allocated(d),
                           "peak_reserved": N.max_memory_reserved(d), "budget": total})
        metrics = compiler.metrics()
        return {
            "driver": driver,
            "seconds": seconds,
            "fallbacks": sorted(N.fallback_report(), key=lambda r: r["seconds"], reverse=True),
            "transfers": N.transfer_stats(),
            "syncs": [{"op": op, "line": line, "calls": n} for (op, line), n in self.syncs.most_common()],
            "graph_breaks": [{"reason": str(k).strip().splitlines()[0], "count": v}
                             for k, v in counters["graph_break"].items()],
            "recompiles": metrics["recompile_reasons"],
            "compiled_graphs": {"graphs": metrics["graphs"], "loaded_from_cache": metrics["graphs_loaded"],
                                "kernel_builds": metrics["cache_misses"], "kernel_cache_hits": metrics["cache_hits"],
                                "compile_seconds": metrics["compile_seconds"]},
            "eager_kernels": {"ops": len(eager), "launches": sum(e["launches"] for e in eager),
                              "built": sum(e["builds"] for e in eager)},
            "memory": memory,
            "top_ops": top_ops,
        }

    # -- the report -----------------------------------------------------
    def result(self) -> dict:
        """The findings as plain data (what --json writes)."""
        if self._result is None:
            raise RuntimeError("openneuron doctor: the report exists once the `with` block has ended")
        return self._result

    def report(self) -> str:
        r = self.result()
        out = [f"openneuron doctor: {r['seconds']:.1f} s on the '{r['driver']}' driver"]

        def section(title, rows, advice):
            out.append("")
            out.append(f"== {title}")
            out.extend(f"   {row}" for row in rows)
            if advice:
                out.append(f"   -> {advice}")

        fb = r["fallbacks"]
        section(f"CPU fallback: {len(fb)} op(s)",
                [f"{f['op']}: {f['calls']} call(s), {f['seconds'] * 1000:.1f} ms" for f in fb[:15]] or ["none"],
                "each runs on the CPU with copies to and from the device, waiting for it: move it off the "
                "hot path, or use torch.compile, which lowers many of these; the full list is "
                "torch.neuron.fallback_report()" if fb else "")
        moved = [(direction, cause, c) for direction, by in r["transfers"].items() for cause, c in by.items()
                 if c["count"]]
        section("Host<->device transfers",
                [f"{d} ({cause}): {c['count']} transfer(s), {c['bytes'] / 2**20:.2f} MiB" for d, cause, c in moved]
                or ["none"],
                "transfers caused by the CPU fallback disappear with the fallbacks above" if any(
                    cause == "cpu_fallback" for _, cause, _ in moved) else "")
        syncs = r["syncs"]
        section(f"Host synchronizations: {sum(s['calls'] for s in syncs)}",
                [f"{s['line']}: {s['op']} x{s['calls']}" for s in syncs[:15]] or ["none"],
                "each stops the host until the device catches up: keep .item(), .cpu(), printing and "
                "data-dependent shapes (nonzero, boolean indexing) out of the step loop, or move them to "
                "the end of the step; non_blocking copies to pinned memory do not wait" if syncs else "")
        breaks = r["graph_breaks"]
        section(f"torch.compile graph breaks: {sum(b['count'] for b in breaks)}",
                [f"{b['count']}x {b['reason'][:160]}" for b in breaks[:10]] or ["none"],
                "each break splits the graph and runs the code between in eager mode: see the reason, or "
                "TORCH_LOGS=graph_breaks" if breaks else "")
        rec = r["recompiles"]
        section(f"torch.compile recompiles: {len(rec)}",
                [f"{x['compile_id']}: {x['reason'][:160]}" for x in rec[:10]] or ["none"],
                "a guard failed, usually a new shape or dtype: mark dims dynamic "
                "(torch._dynamo.mark_dynamic) or compile with dynamic=True" if rec else "")
        cg, ek = r["compiled_graphs"], r["eager_kernels"]
        section("Kernels",
                [f"compiled graphs: {cg['graphs']} ({cg['loaded_from_cache']} loaded from the cache), "
                 f"{cg['kernel_builds']} kernel library build(s), {cg['kernel_cache_hits']} cache hit(s), "
                 f"{cg['compile_seconds']:.1f} s compiling",
                 f"eager device kernels: {ek['ops']} op(s), {ek['launches']} launch(es), {ek['built']} built now"],
                "builds are cached on disk: a second run loads them" if cg["kernel_builds"] + ek["built"] else "")
        section("Peak memory",
                [f"neuron:{m['device']}: {m['peak_allocated'] / 2**20:.1f} MiB allocated, "
                 f"{m['peak_reserved'] / 2**20:.1f} MiB reserved of {m['budget'] / 2**30:.2f} GiB"
                 for m in r["memory"]],
                "")
        section("Most device time (kernels and copies on the device's queues)",
                [f"{t['kernel']}: {t['device_ms']:.2f} ms, {t['calls']} call(s)" for t in r.get("top_kernels", [])]
                or ["none queued (the host driver runs eager ops as host calls)"], "")
        section("Most host time (self CPU time of each op)",
                [f"{t['op']}: {t['self_ms']:.1f} ms, {t['calls']} call(s)" for t in r["top_ops"]] or ["not profiled"],
                "")
        return "\n".join(out)

    def export_chrome_trace(self, path: str) -> None:
        """The run's Chrome trace (chrome://tracing, Perfetto, TensorBoard)."""
        if self._profiler is None:
            raise RuntimeError("openneuron doctor: the run was not profiled (profile_ops=False)")
        self._profiler.export_chrome_trace(path)

    def write_html(self, path: str) -> None:
        """A page with the report and a picture of the device timeline (one
        row per device queue, each kernel or copy a bar)."""
        import base64
        import html
        import io

        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        picture = ""
        if self.device_events:
            rows = sorted({(e.device_index, getattr(e, "device_resource_id", 0)) for e in self.device_events})
            origin = min(e.time_range.start for e in self.device_events)
            fig, ax = plt.subplots(figsize=(12, 1 + 0.5 * len(rows)))
            for e in self.device_events:
                y = rows.index((e.device_index, getattr(e, "device_resource_id", 0)))
                ax.broken_barh([((e.time_range.start - origin) / 1000, max(e.time_range.elapsed_us(), 1) / 1000)],
                               (y - 0.4, 0.8), color="tab:orange" if "Memcpy" in e.name else "tab:blue")
            ax.set_yticks(range(len(rows)),
                          [f"neuron:{d} " + (f"queue {q}" if q else "synchronous copies") for d, q in rows])
            ax.set_xlabel("ms (blue: kernels, orange: copies)")
            buffer = io.BytesIO()
            fig.tight_layout()
            fig.savefig(buffer, format="png")
            plt.close(fig)
            picture = f'<img src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}">'
        with open(path, "w") as f:
            f.write("<!DOCTYPE html><html><head><meta charset='utf-8'><title>openneuron doctor</title></head><body>"
                    f"<h1>openneuron doctor</h1>{picture or '<p>No device work was queued.</p>'}"
                    f"<pre>{html.escape(self.report())}</pre></body></html>")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m openneuron.doctor",
                                     description="Run a program on neuron and report what slows it down.")
    parser.add_argument("--json", metavar="PATH", help="also write the findings as JSON")
    parser.add_argument("--html", metavar="PATH", help="also write a page with the report and the device timeline")
    parser.add_argument("--trace", metavar="PATH", help="also write the run's Chrome trace")
    parser.add_argument("--no-profile", action="store_true", help="skip the time tables (no profiler)")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    sys.argv = [options.script] + options.args
    sys.path.insert(0, os.path.dirname(os.path.abspath(options.script)))
    status = 0
    doctor = Doctor(profile_ops=not options.no_profile)
    with doctor:
        try:
            runpy.run_path(options.script, run_name="__main__")
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            status = 1
    print(doctor.report(), file=sys.stderr)
    if options.json:
        with open(options.json, "w") as f:
            json.dump(doctor.result(), f, indent=1, default=str)
    if options.trace:
        doctor.export_chrome_trace(options.trace)
    if options.html:
        doctor.write_html(options.html)
    return status


if __name__ == "__main__":
    sys.exit(main())

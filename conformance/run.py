#!/usr/bin/env python
"""Runs the OpenNeuron conformance harness and writes its report.

    .venv/bin/python conformance/run.py                 # full run, host path
    .venv/bin/python conformance/run.py --fallback      # full run, forced CPU fallback
    .venv/bin/python conformance/run.py --subset ci     # the bounded CI subset
    .venv/bin/python conformance/run.py --cuda-dtypes   # dtypes CUDA supports beyond the CPU

Writes <out>/conformance[-ci][-fallback].json and .md (default out: reports/),
prints the summary and the diff against the previous report (the previous
file is kept as *.prev.json, or give one with --previous), and exits 1 on an
unexpected failure or an unexpected pass (see expected_failures.txt).

Tests run in a worker process (conformance/harness.py --worker), one at a
time; a worker that crashes or hangs is restarted after the sample and check
it was running, which are recorded as errors.
"""
import argparse
import datetime
import fnmatch
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import expectations  # noqa: E402

# Reproducible CPU references (workers inherit it): oneMKL's first call of a
# VML function can race into a low-accuracy kernel after a fork
# (pytorch/pytorch#188792); a pinned code path does not.
os.environ.setdefault("MKL_CBWR", "AVX2")

# What the worker's environment adds for each path.
MODE_ENV = {
    "fallback": {"OPENNEURON_FORCE_CPU_FALLBACK": "all", "OPENNEURON_CPU_FALLBACK": "silent"},
    "compile": {"OPENNEURON_CONFORMANCE_COMPILE": "1"},
    "cuda-dtypes": {"OPENNEURON_CONFORMANCE_CUDA_DTYPES": "1"},
    # Memory the host cannot address: every op through the driver's copies.
    "protected": {"OPENNEURON_DRIVER": "protected", "OPENNEURON_CPU_FALLBACK": "silent"},
    # A Vulkan device (lavapipe on a machine without a GPU): GLSL kernels.
    "vulkan": {"OPENNEURON_DRIVER": "vulkan", "OPENNEURON_CPU_FALLBACK": "silent"},
}
CHECK_ORDER = ("forward", "inplace", "out", "backward", "forward_ad")
# Worst first: the status of an item is the worst status of its checks.
STATUS_ORDER = ("harness-error", "error", "fail", "xpass", "xfail", "pass", "excluded", "skipped", "n/a")
BAD = ("harness-error", "error", "fail")
CI_SAMPLES = 5  # samples per item in the CI subset
PASSING = ("pass", "xpass")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--subset", choices=("full", "ci"), default="full",
                   help="full: every op x dtype and module x dtype x mode, all samples (default); "
                        "ci: every op once in its most common dtype and every module in float32, "
                        "a few samples each (all samples where the expected-failure list names the item)")
    p.add_argument("--compile", action="store_true",
                   help="run every op under torch.compile(backend=\"neuron\", fullgraph=True), compiled "
                        "for each sample; forward and backward against the CPU; ops only (no modules)")
    p.add_argument("--cuda-dtypes", action="store_true",
                   help="the (op, dtype) pairs CUDA supports and the CPU does not (OpInfo's dtypesIfCUDA), "
                        "forward and backward against the CPU computing in float64/complex128, rounded")
    p.add_argument("--fallback", action="store_true",
                   help="force every op onto the CPU-fallback path "
                        "(OPENNEURON_FORCE_CPU_FALLBACK=all, OPENNEURON_CPU_FALLBACK=silent)")
    p.add_argument("--protected", action="store_true",
                   help="run on the protected driver (OPENNEURON_DRIVER=protected): device memory the host "
                        "cannot address, every op on CPU copies through the driver")
    p.add_argument("--vulkan", action="store_true",
                   help="run on the vulkan driver (OPENNEURON_DRIVER=vulkan; lavapipe without a GPU)")
    p.add_argument("--out", default=os.path.join(ROOT, "reports"), help="report folder (default: reports/)")
    p.add_argument("--previous", help="previous report (JSON) to diff against "
                                      "(default: the report this run replaces, kept as *.prev.json)")
    p.add_argument("--only", action="append", default=[],
                   help="run only items whose name matches this fnmatch pattern (repeatable), "
                        "e.g. --only 'linalg.*' --only 'module:nn.Conv*'")
    p.add_argument("--dtype", action="append", default=[], help="run only these dtypes (repeatable)")
    p.add_argument("--max-samples", type=int, help=f"samples per item (default: all; ci: {CI_SAMPLES})")
    p.add_argument("--budget", type=float, help="soft time budget per item in seconds, later samples "
                                                "are skipped and recorded (default 120; ci 20)")
    p.add_argument("--sample-timeout", type=float, default=60.0,
                   help="one sample running longer is interrupted and recorded (default 60 s)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads in the worker (default 1)")
    p.add_argument("--expected", default=expectations.DEFAULT_PATH, help="expected-failure list")
    p.add_argument("--name", help="report base name (default: conformance[-ci][-fallback])")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p.parse_args(argv)


# --------------------------------------------------------------------------
# Plan
# --------------------------------------------------------------------------

def load_plan(mode):
    """The harness's items, computed in a subprocess (the parent stays light)."""
    code = ("import sys, json; sys.path.insert(0, %r); import harness; "
            "import openneuron._C as C; "
            "json.dump({'plan': harness.plan(), 'order': harness.COMMON_DTYPE_ORDER, "
            "'torch': harness.torch.__version__, 'so': C.__file__}, sys.stdout)" % HERE)
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1", **MODE_ENV.get(mode, {}))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode != 0:
        sys.exit(f"could not list the harness's tests:\n{out.stderr[-4000:]}")
    data = json.loads(out.stdout)
    return data["plan"], data["order"], data["torch"], data["so"]


def select(items, order, args, entries, mode):
    if args.only:
        items = [it for it in items if any(fnmatch.fnmatchcase(it["name"], p) for p in args.only)]
    if args.dtype:
        items = [it for it in items if it["dtype"] in args.dtype]
    if args.subset == "ci" and mode != "cuda-dtypes":  # that one is small: every pair
        by_name = {}
        for it in items:
            by_name.setdefault(it["name"], []).append(it)
        chosen = []
        for name, group in by_name.items():
            dtypes = [it["dtype"] for it in group]
            pick = next((d for d in order if d in dtypes), sorted(dtypes)[0])
            chosen += [it for it in group if it["dtype"] == pick]
        items = chosen
    return items


# --------------------------------------------------------------------------
# Running the worker
# --------------------------------------------------------------------------

class Runner:
    def __init__(self, items, args, workdir, mode, unbounded, so_path, entries):
        self.entries = entries
        self.items, self.args, self.workdir, self.mode = items, args, workdir, mode
        self.unbounded = unbounded
        self.so_path = so_path          # OpenNeuron's extension: rebuilt under us?
        self.rebuilds = 0
        self.results = {}
        self.crashes = {}          # index -> {check: {sample: message}}
        self.restarts = 0
        self.max_samples = args.max_samples if args.max_samples is not None else (CI_SAMPLES if args.subset == "ci" else None)
        self.budget = args.budget if args.budget is not None else (20.0 if args.subset == "ci" else 120.0)
        self.hard_timeout = self.budget + args.sample_timeout + 120.0
        self.start_time = time.monotonic()
        self.last_print = 0.0
        self.counts = {"samples_run": 0, "samples_passed": 0}
        self.tty = sys.stdout.isatty()

    def env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("OPENNEURON_") and k != "TORCH_DEVICE_BACKEND_AUTOLOAD"
               and not k.startswith("PYTORCH_OPINFO") and k != "PYTORCH_TEST_WITH_SLOW"}
        env["PYTHONUNBUFFERED"] = "1"
        env["OMP_NUM_THREADS"] = str(self.args.threads)
        if self.args.subset == "full":
            env["PYTORCH_TEST_WITH_SLOW"] = "1"   # OpInfo's @slowTest samples too (the budget bounds them)
        env.update(MODE_ENV.get(self.mode, {}))
        return env

    def run(self):
        plan_path = os.path.join(self.workdir, "plan.json")
        with open(plan_path, "w") as f:
            json.dump(self.items, f)
        results_path = os.path.join(self.workdir, "results.jsonl")
        progress_path = os.path.join(self.workdir, "progress")
        open(results_path, "w").close()
        offset = 0
        index = 0
        failed_starts = 0
        while index < len(self.items):
            with open(progress_path, "wb") as f:
                f.write(b" " * 512)
            config = {
                "max_samples": self.max_samples, "test_budget_s": self.budget,
                "sample_timeout_s": self.args.sample_timeout, "unbounded": sorted(self.unbounded),
                "crashes": {str(k): v for k, v in self.crashes.items()}, "threads": self.args.threads,
                "undefined": [[e.name, e.dtype, e.check, e.reason] for e in self.entries
                              if e.kind == "undefined" and e.mode in (None, self.mode)],
                "progress": progress_path,
            }
            cfg_path = os.path.join(self.workdir, "config.json")
            with open(cfg_path, "w") as f:
                json.dump(config, f)
            so_mtime = _mtime(self.so_path)
            log = open(os.path.join(self.workdir, "worker.log"), "a")
            proc = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "harness.py"), "--worker", plan_path, results_path,
                 str(index), cfg_path],
                cwd=ROOT, env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            current, started_at, killed = None, None, None
            try:
                while True:
                    rc = proc.poll()
                    offset, events = self._read(results_path, offset)
                    for ev in events:
                        if ev["event"] == "start":
                            current, started_at = ev["index"], time.monotonic()
                        else:
                            self._finished(ev)
                            current = None
                    if rc is not None:
                        break
                    if current is not None and time.monotonic() - started_at > self.hard_timeout:
                        killed = f"timed out: killed after {self.hard_timeout:.0f} s"
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                        continue
                    self._progress(current)
                    time.sleep(0.2)
            finally:
                # The worker runs in a session of its own, which its
                # crashes and timeouts kill: when this process is stopped
                # (Ctrl-C, SIGTERM from a timeout), the worker goes too.
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            log.close()
            offset, events = self._read(results_path, offset)
            for ev in events:
                if ev["event"] == "start":
                    current = ev["index"]
                else:
                    self._finished(ev)
                    current = None
            if current is None:
                if rc != 0 and not killed:
                    # crashed between items (or at start-up)
                    done = max(self.results) + 1 if self.results else index
                    if done == index:
                        self.restarts += 1
                        failed_starts += 1
                        if failed_starts > 10:
                            sys.exit(f"the worker keeps failing to start (exit {rc}); see {self.workdir}/worker.log")
                        time.sleep(3 * failed_starts)   # e.g. OpenNeuron is being rebuilt
                    else:
                        failed_starts = 0
                    index = done
                    continue
                break
            # the worker died in the middle of item `current`
            self.restarts += 1
            why = killed or _signal_text(rc)
            if not killed and _mtime(self.so_path) != so_mtime and self.rebuilds < 10:
                # OpenNeuron's extension was replaced while the worker had it
                # mapped (someone rebuilt it): not the item's fault, run it again.
                self.rebuilds += 1
                if not self.args.quiet:
                    it = self.items[current]
                    print(f"\n  worker {why} in {it['name']} {it['dtype']} while OpenNeuron's extension "
                          f"was being rebuilt; running the item again", flush=True)
                index = current
                continue
            with open(progress_path, "rb") as f:
                mark = f.read().decode(errors="replace").strip().split(" ", 3)
            if len(mark) >= 3 and mark[0].isdigit() and int(mark[0]) == current:
                sample, check = mark[1], mark[2]
                desc = mark[3] if len(mark) > 3 else ""
                seen = self.crashes.setdefault(current, {}).setdefault(check, {})
                if sample in seen:   # the same place again: give up on the item
                    self._fatal(current, f"{why} at sample {sample} ({check}), again after a restart")
                    index = current + 1
                else:
                    seen[sample] = f"{why} in {check}: {desc}" if desc else f"{why} in {check}"
                    index = current     # run the item again, past that point
            else:
                self._fatal(current, why)
                index = current + 1
            if not self.args.quiet:
                it = self.items[current]
                print(f"\n  worker {why} in {it['name']} {it['dtype']}"
                      + (f" sample {mark[1]} ({mark[2]})" if len(mark) >= 3 else "") + "; restarting",
                      flush=True)
        self._progress(None, final=True)
        return self.results

    def _read(self, path, offset):
        events = []
        with open(path) as f:
            f.seek(offset)
            while True:
                pos = f.tell()
                line = f.readline()
                if not line or not line.endswith("\n"):
                    return pos, events
                events.append(json.loads(line))

    def _finished(self, ev):
        idx = ev["index"]
        self.results[idx] = ev
        if idx in self.crashes:
            ev.setdefault("notes", []).append(
                "worker crashed in this item: " + "; ".join(
                    f"{c} sample {s}: {m}" for c, d in self.crashes[idx].items() for s, m in d.items()))
        for codes in [ev.get("checks", {})]:
            n = ev.get("samples", 0)
            for j in range(n):
                col = [c[j] for c in codes.values() if j < len(c)]
                if any(x in "fe" for x in col):
                    self.counts["samples_run"] += 1
                elif any(x in "pm" for x in col):
                    self.counts["samples_run"] += 1
                    self.counts["samples_passed"] += 1
        if not self.args.quiet and _bad_quick(ev):
            it = self.items[idx]
            msg = _first_message(ev) or ev.get("detail") or ""
            self._clear()
            print(f"  {_bad_quick(ev):5} {it['name']} {it['dtype']}: {msg[:160]}", flush=True)

    def _fatal(self, idx, why):
        self.results[idx] = {"index": idx, "event": "end", "outcome": "pass", "fatal": f"worker {why}",
                             "checks": {}, "messages": {}, "exclusions": {}, "notes": [], "samples": 0,
                             "truncated": None, "time_s": None}

    def _clear(self):
        if self.tty:
            print("\r" + " " * 150 + "\r", end="")

    def _progress(self, current, final=False):
        if self.args.quiet:
            return
        now = time.monotonic()
        if not final and now - self.last_print < (0.5 if self.tty else 30.0):
            return
        self.last_print = now
        done = len(self.results)
        total = len(self.items)
        el = now - self.start_time
        eta = el / done * (total - done) if done else 0
        run, ok = self.counts["samples_run"], self.counts["samples_passed"]
        pct = f"{100.0 * ok / run:.2f}%" if run else "-"
        cur = ""
        if current is not None:
            it = self.items[current]
            cur = f" | {it['name']} {it['dtype']}"
        line = (f"[{done}/{total}] {_hms(el)} elapsed, ~{_hms(eta)} left | samples passed "
                f"{ok}/{run} ({pct}){cur}")
        if self.tty and not final:
            print("\r" + line[:149].ljust(149), end="", flush=True)
        else:
            self._clear()
            print(line, flush=True)


def _bad_quick(ev):
    if ev.get("outcome") == "harness-error":
        return "HARN"
    if ev.get("fatal"):
        return "ERROR"
    codes = "".join(ev.get("checks", {}).values())
    if "e" in codes:
        return "ERROR"
    if "f" in codes:
        return "FAIL"
    return None


def _first_message(ev):
    if ev.get("fatal"):
        return ev["fatal"]
    for c in CHECK_ORDER:
        m = ev.get("messages", {}).get(c, {})
        for code in ("e", "f"):
            if code in m:
                return f"{c}: {m[code]}"
    return None


def _mtime(path):
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _signal_text(rc):
    if rc is not None and rc < 0:
        try:
            return f"crashed ({signal.Signals(-rc).name})"
        except ValueError:
            return f"crashed (signal {-rc})"
    return f"exited with status {rc}"


def _hms(s):
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


# --------------------------------------------------------------------------
# Evaluation: statuses, expected failures, figures
# --------------------------------------------------------------------------

def evaluate(items, results, entries, mode, truncated_ok):
    """One row per item: status per check with counts and the first
    failure, the item's status, and per-sample outcomes for the figures."""
    rows = []
    for idx, it in enumerate(items):
        ev = results.get(idx)
        row = {"kind": it["kind"], "name": it["name"], "dtype": it["dtype"], "checks": {},
               "status": None, "detail": None, "samples": {}, "time_s": None, "notes": [],
               "exclusions": {}, "truncated": None}
        for e in entries:
            if e.kind == "undefined" and not e.used and e.matches(mode, it["name"], it["dtype"], None):
                e.used = True
        skip = expectations.find(entries, "skip", mode, it["name"], it["dtype"])
        if skip is not None:
            skip.used = True
            row["status"], row["detail"] = "skipped", f"expected_failures.txt: {skip.reason}"
            rows.append(row)
            continue
        if ev is None:
            row["status"], row["detail"] = "skipped", "not run (interrupted)"
            rows.append(row)
            continue
        row["time_s"] = ev.get("time_s")
        row["fatal"] = ev.get("fatal")
        row["notes"] = ev.get("notes", [])
        row["exclusions"] = ev.get("exclusions", {})
        row["fallbacks"] = ev.get("fallbacks", [])
        row["truncated"] = ev.get("truncated")
        if ev.get("outcome") == "harness-error":
            row["status"], row["detail"] = "harness-error", ev.get("detail")
            rows.append(row)
            continue
        if ev.get("outcome") == "skipped" and not ev.get("checks"):
            row["status"], row["detail"] = "skipped", f"OpInfo/ModuleInfo: {ev.get('detail')}"
            rows.append(row)
            continue
        n = ev.get("samples", 0)
        codes = {c: list(v.ljust(n, "-")) for c, v in ev.get("checks", {}).items()}
        for check, col in codes.items():
            msgs = ev.get("messages", {}).get(check, {})
            failing = any(x in "fe" for x in col)
            exc = expectations.find(entries, "exclude", mode, it["name"], it["dtype"], check)
            xf = (expectations.find(entries, "xfail", mode, it["name"], it["dtype"], check)
                  or expectations.find(entries, "rounding", mode, it["name"], it["dtype"], check))
            info = {"passed": col.count("p") + col.count("m"), "metadata_only": col.count("m"),
                    "failed": col.count("f"), "errors": col.count("e"), "excluded": col.count("x"),
                    "skipped": col.count("s"), "n/a": col.count("-"), "detail": None, "expected": None}
            if exc is not None:
                exc.used = True
                info["expected"] = f"exclude: {exc.reason}"
                if failing:
                    info["excluded"] += info["failed"] + info["errors"]
                    info["failed"] = info["errors"] = 0
                    col[:] = ["x" if x in "fe" else x for x in col]
                    info["status"] = "excluded"
                    info["detail"] = f"CPU reference: {exc.reason} (first: {msgs.get('f') or msgs.get('e')})"
                else:
                    info["status"] = "xpass" if info["passed"] else "n/a"
            elif xf is not None:
                xf.used = True
                info["expected"] = f"{xf.kind}: {xf.reason}"
                if failing:
                    info["status"] = "xfail"
                    info["detail"] = f"{xf.reason} (first: {msgs.get('e') or msgs.get('f')})"
                elif xf.kind == "rounding":  # within tolerance on this machine: fine too
                    info["status"] = "pass" if info["passed"] else "n/a"
                else:
                    info["status"] = "xpass" if info["passed"] else "n/a"
                    if info["status"] == "xpass" and ev.get("truncated") and not truncated_ok:
                        info["status"] = "pass"
                        info["detail"] = "xfail entry not confirmed: not every sample ran"
            elif "e" in col:
                info["status"], info["detail"] = "error", msgs.get("e")
            elif "f" in col:
                info["status"], info["detail"] = "fail", msgs.get("f")
            elif info["passed"]:
                info["status"] = "pass"
                if info["metadata_only"]:
                    info["detail"] = msgs.get("m")
            elif info["excluded"]:
                info["status"], info["detail"] = "excluded", msgs.get("x")
            elif info["skipped"]:
                info["status"], info["detail"] = "skipped", msgs.get("s") or ev.get("truncated")
            else:
                info["status"] = "n/a"
            row["checks"][check] = info
        # per-sample outcomes (after exclusions)
        s = {"total": n, "passed": 0, "failed": 0, "errors": 0, "excluded": 0, "skipped": 0, "n/a": 0}
        for j in range(n):
            col = [codes[c][j] for c in codes]
            if "e" in col:
                s["errors"] += 1
            elif "f" in col:
                s["failed"] += 1
            elif any(x in "pm" for x in col):
                s["passed"] += 1
            elif "x" in col:
                s["excluded"] += 1
            elif "s" in col:
                s["skipped"] += 1
            else:
                s["n/a"] += 1
        s["run"] = s["passed"] + s["failed"] + s["errors"]
        row["samples"] = s
        statuses = [c["status"] for c in row["checks"].values()]
        if ev.get("fatal"):
            fatal_x = expectations.find(entries, "xfail", mode, it["name"], it["dtype"], "generate")
            if fatal_x is not None:
                fatal_x.used = True
                statuses.append("xfail")
                row["detail"] = f"{fatal_x.reason} (first: {ev['fatal']})"
            else:
                statuses.append("error")
                row["detail"] = ev["fatal"]
        row["status"] = min(statuses, key=STATUS_ORDER.index) if statuses else "n/a"
        if row["detail"] is None:
            for c in CHECK_ORDER:
                info = row["checks"].get(c)
                if info and info["status"] == row["status"] and info["detail"]:
                    row["detail"] = f"{c}: {info['detail']}"
                    break
        if row["status"] == "n/a" and ev.get("outcome") == "skipped":
            row["status"], row["detail"] = "skipped", ev.get("detail")
        rows.append(row)
    return rows


def summarize(rows):
    op_rows = [r for r in rows if r["kind"] == "op"]
    mod_rows = [r for r in rows if r["kind"] == "module"]

    def sample_totals(rs):
        t = {"run": 0, "passed": 0, "failed": 0, "errors": 0, "excluded": 0, "skipped": 0, "n/a": 0}
        for r in rs:
            for k in t:
                t[k] += r["samples"].get(k, 0)
        t["pass_rate"] = round(100.0 * t["passed"] / t["run"], 3) if t["run"] else None
        return t

    def check_totals(rs, checks):
        out = {}
        for c in checks:
            t = {"passed": 0, "failed": 0, "errors": 0, "excluded": 0, "skipped": 0, "metadata_only": 0}
            for r in rs:
                info = r["checks"].get(c)
                if info:
                    for k in t:
                        t[k] += info[k]
            run = t["passed"] + t["failed"] + t["errors"]
            t["run"] = run
            t["pass_rate"] = round(100.0 * t["passed"] / run, 3) if run else None
            out[c] = t
        return out

    def status_counts(rs):
        c = {}
        for r in rs:
            c[r["status"]] = c.get(r["status"], 0) + 1
        return c

    ops = {}
    for r in op_rows:
        ops.setdefault(r["name"], []).append(r["status"])
    fully = sum(1 for st in ops.values() if any(s in PASSING for s in st)
                and all(s in PASSING or s in ("excluded", "skipped", "n/a") for s in st))
    all_skipped = sum(1 for st in ops.values() if all(s in ("skipped", "n/a", "excluded") for s in st))

    modules = {}
    for r in mod_rows:
        base = r["name"].split(":")[1]
        m = modules.setdefault(base, {"forward": [], "backward": []})
        for c in ("forward", "backward"):
            info = r["checks"].get(c)
            m[c].append(info["status"] if info else r["status"])
    def mod_pass(statuses):
        return all(s in PASSING or s in ("excluded", "n/a") for s in statuses) and any(s in PASSING for s in statuses)

    # Ops whose forward ran without any CPU fallback (drivers whose memory
    # the host cannot address: natively on the device), over every dtype run.
    ran = {}
    for r in op_rows:
        if r["samples"].get("run", 0):
            ran.setdefault(r["name"], []).append(bool(r.get("fallbacks")))
    native = sorted(name for name, fell in ran.items() if not any(fell))
    return {
        "native_ops": {"count": len(native), "run": len(ran), "names": native},
        "samples": sample_totals(op_rows),
        "checks": check_totals(op_rows, CHECK_ORDER),
        "op_dtypes": {"total": len(op_rows), **status_counts(op_rows)},
        "ops": {"total": len(ops), "fully_passing": fully, "entirely_skipped": all_skipped},
        "modules": {
            "total": len(modules),
            "forward_passing": sum(1 for m in modules.values() if mod_pass(m["forward"])),
            "backward_passing": sum(1 for m in modules.values() if mod_pass(m["backward"])),
            "module_dtype_modes": {"total": len(mod_rows), **status_counts(mod_rows)},
            "samples": sample_totals(mod_rows),
            "checks": check_totals(mod_rows, ("forward", "backward")),
        },
    }


def unexpected(rows):
    fails, passes = [], []
    for r in rows:
        if r["status"] == "harness-error":
            fails.append(f"{r['name']} {r['dtype']}: harness error: {r['detail']}")
            continue
        if r["status"] == "error" and not r["checks"]:
            fails.append(f"{r['name']} {r['dtype']}: {r['detail']}")
            continue
        for c, info in r["checks"].items():
            if info["status"] in ("fail", "error"):
                fails.append(f"{r['name']} {r['dtype']} {c}: {info['status']}: {info['detail']}")
            elif info["status"] == "xpass":
                passes.append(f"{r['name']} {r['dtype']} {c}: passes but is listed ({info['expected']})")
        if r.get("fatal") and r["status"] == "error":
            fails.append(f"{r['name']} {r['dtype']}: {r['fatal']}")
    return fails, passes


# --------------------------------------------------------------------------
# Diff against the previous report
# --------------------------------------------------------------------------

def _statuses(report):
    out = {}
    for r in report.get("results", []):
        key = (r["name"], r["dtype"])
        out[key + ("*",)] = r["status"]
        for c, info in r.get("checks", {}).items():
            out[key + (c,)] = info["status"]
    return out


def diff(prev, rows):
    if prev is None:
        return None
    old = _statuses(prev)
    new = _statuses({"results": rows})
    regressions, new_passes, changed = [], [], []
    for key, st in new.items():
        if key not in old or key[2] == "*":
            continue
        was = old[key]
        label = f"{key[0]} {key[1]} {key[2]}: {was} -> {st}"
        if was in PASSING and st in BAD + ("xfail",):
            regressions.append(label)
        elif was in BAD + ("xfail",) and st in PASSING:
            new_passes.append(label)
        elif was != st:
            changed.append(label)
    old_items = {k[:2] for k in old}
    new_items = {k[:2] for k in new}
    return {
        "previous": prev.get("meta", {}).get("started"),
        "previous_summary": {k: prev.get("summary", {}).get(k) for k in ("samples", "ops", "modules")},
        "regressions": sorted(regressions),
        "new_passes": sorted(new_passes),
        "other_changes": sorted(changed),
        "items_added": len(new_items - old_items),
        "items_removed": len(old_items - new_items),
        "items_compared": len(new_items & old_items),
    }


# --------------------------------------------------------------------------
# Writing the report
# --------------------------------------------------------------------------

def _md(text, limit=300):
    if text is None:
        return ""
    text = str(text).replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _cell(info):
    if info is None:
        return ""
    st = info["status"]
    run = info["passed"] + info["failed"] + info["errors"]
    if st == "pass":
        return f"pass {info['passed']}/{run}" + (f" ({info['metadata_only']} meta)" if info["metadata_only"] else "")
    if st in ("fail", "error", "xfail"):
        return f"**{st.upper()}** {info['passed']}/{run}"
    if st == "xpass":
        return f"**XPASS** {info['passed']}/{run}"
    if st == "excluded":
        return f"excluded ({info['excluded']})"
    return st


def summary_lines(report):
    s = report["summary"]
    m = report["meta"]
    sm, ops, mods = s["samples"], s["ops"], s["modules"]
    lines = [
        f"OpenNeuron conformance ({m['path']} path, {m['subset']} run{', ' + m['filter'] if m.get('filter') else ''}): "
        f"{m['wall_time']} wall time",
        f"OpInfo samples passed / run: {sm['passed']} / {sm['run']} = "
        f"{sm['pass_rate'] if sm['pass_rate'] is not None else '-'}%  "
        f"(failed {sm['failed']}, errors {sm['errors']}; excluded {sm['excluded']}, skipped {sm['skipped']})",
        f"ops fully passing / total: {ops['fully_passing']} / {ops['total']}  "
        f"(op x dtype: {s['op_dtypes']['total']}: " + ", ".join(
            f"{k} {v}" for k, v in sorted(s["op_dtypes"].items(), key=lambda kv: _order(kv[0])) if k != "total") + ")",
        "per check (samples passed / run): " + ", ".join(
            f"{c} {t['passed']}/{t['run']}" for c, t in s["checks"].items() if t["run"]),
        f"modules passing forward / backward / total: {mods['forward_passing']} / {mods['backward_passing']} / "
        f"{mods['total']}  (module samples passed / run: {mods['samples']['passed']} / {mods['samples']['run']})",
        f"ops whose forward ran with no CPU fallback: {s['native_ops']['count']} / {s['native_ops']['run']}"
        if "native_ops" in s else "ops whose forward ran with no CPU fallback: -",
        f"unexpected failures: {len(report['unexpected']['failures'])}, "
        f"unexpected passes: {len(report['unexpected']['passes'])}",
    ]
    return lines


def _order(status):
    return STATUS_ORDER.index(status) if status in STATUS_ORDER else 99


def write_markdown(path, report):
    m = report["meta"]
    out = [f"# OpenNeuron conformance report ({m['path']} path, {m['subset']} run)", ""]
    out.append(f"Started {m['started']}, wall time {m['wall_time']}; torch {m['torch']}, "
               f"OpenNeuron git {m['git']}; command: `{m['command']}`.")
    out.append("")
    out += [f"- {line}" for line in summary_lines(report)[1:]]
    out.append("")
    native = report["summary"].get("native_ops")
    if native and m["path"] in ("protected", "vulkan"):
        out.append(f"## Ops whose forward ran with no CPU fallback ({native['count']} / {native['run']})")
        out.append("")
        out.append(", ".join(f"`{n}`" for n in native["names"]))
        out.append("")
    d = report.get("diff")
    out.append("## Diff against the previous report")
    out.append("")
    if d is None:
        out.append("No previous report.")
    else:
        ps = (d.get("previous_summary") or {}).get("samples") or {}
        out.append(f"Previous report: {d['previous']} (samples passed {ps.get('passed')} / {ps.get('run')}); "
                   f"{d['items_compared']} items compared, {d['items_added']} added, {d['items_removed']} removed.")
        out.append("")
        out.append(f"**Regressions ({len(d['regressions'])})**" + (":" if d["regressions"] else ": none"))
        out += [f"- {_md(x)}" for x in d["regressions"]]
        out.append("")
        out.append(f"**New passes ({len(d['new_passes'])})**" + (":" if d["new_passes"] else ": none"))
        out += [f"- {_md(x)}" for x in d["new_passes"]]
        if d["other_changes"]:
            out.append("")
            out.append(f"Other status changes ({len(d['other_changes'])}):")
            out += [f"- {_md(x)}" for x in d["other_changes"][:200]]
    out.append("")
    u = report["unexpected"]
    out.append("## Unexpected results")
    out.append("")
    if not u["failures"] and not u["passes"]:
        out.append("None.")
    out += [f"- failure: {_md(x, 500)}" for x in u["failures"]]
    out += [f"- unexpected pass: {_md(x, 500)}" for x in u["passes"]]
    out.append("")
    if report["exclusions"]:
        out.append("## CPU-reference exclusions")
        out.append("")
        out.append("| item | reason | samples |")
        out.append("|---|---|---|")
        for e in report["exclusions"]:
            out.append(f"| {_md(e['item'])} | {_md(e['reason'], 400)} | {e['samples']} |")
        out.append("")
    for kind, title, checks in (("op", "OpInfo: op x dtype", CHECK_ORDER),
                                ("module", "ModuleInfo: module x dtype (x train/eval mode)", ("forward", "backward"))):
        out.append(f"## {title}")
        out.append("")
        out.append("Cells: samples passed / run per check (`meta`: compared on shape, dtype and device only); "
                   "status pass, FAIL (first mismatch), ERROR (message), XFAIL / excluded (listed), "
                   "skipped (reason).")
        out.append("")
        out.append("| name | dtype | status | " + " | ".join(checks) + " | samples passed/run | time s | detail |")
        out.append("|---|---|---|" + "---|" * len(checks) + "---|---|---|")
        for r in report["results"]:
            if r["kind"] != kind:
                continue
            st = r["status"]
            st_cell = f"**{st.upper()}**" if st in BAD + ("xpass",) else st
            s = r.get("samples") or {}
            samples = f"{s.get('passed', 0)}/{s.get('run', 0)}" if s else ""
            cells = [_cell(r["checks"].get(c)) for c in checks]
            detail = r["detail"] or ""
            if r.get("truncated"):
                detail = (detail + "; " if detail else "") + f"truncated: {r['truncated']}"
            t = f"{r['time_s']:.1f}" if r.get("time_s") is not None else ""
            out.append(f"| {_md(r['name'])} | {r['dtype']} | {st_cell} | " + " | ".join(cells)
                       + f" | {samples} | {t} | {_md(detail)} |")
        out.append("")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def git_rev():
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except Exception:  # noqa: BLE001
        return "unknown"


def main(argv=None):
    # SIGTERM (a timeout) unwinds like Ctrl-C, so the running worker is stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    args = parse_args(argv)
    if args.compile + args.fallback + args.cuda_dtypes + args.protected + args.vulkan > 1:
        sys.exit("--compile, --fallback, --cuda-dtypes, --protected and --vulkan are separate runs")
    mode = ("fallback" if args.fallback else "compile" if args.compile
            else "cuda-dtypes" if args.cuda_dtypes else "protected" if args.protected
            else "vulkan" if args.vulkan else "host")
    entries = expectations.load(args.expected)
    name = args.name or ("conformance" + ("-ci" if args.subset == "ci" else "") +
                         ("-fallback" if args.fallback else "") + ("-compile" if args.compile else "") +
                         ("-cuda-dtypes" if args.cuda_dtypes else "") +
                         ("-protected" if args.protected else "") + ("-vulkan" if args.vulkan else ""))
    os.makedirs(args.out, exist_ok=True)
    workdir = os.path.join(args.out, f".work-{name}")
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)

    t0 = time.monotonic()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    items, order, torch_version, so_path = load_plan(mode)
    items = select(items, order, args, entries, mode)
    if args.compile:
        items = [it for it in items if it["kind"] == "op"]
    unbounded = set()
    if args.subset == "ci":
        unbounded = {it["name"] for it in items if expectations.mentions(entries, mode, it["name"], it["dtype"])}
    if not args.quiet:
        print(f"[conformance] {len(items)} items ({sum(it['kind'] == 'op' for it in items)} op x dtype, "
              f"{sum(it['kind'] == 'module' for it in items)} module x dtype x mode), {mode} path, "
              f"{args.subset} run; work folder {workdir}", flush=True)
    # skip entries never reach the worker
    to_run = [it for it in items if expectations.find(entries, "skip", mode, it["name"], it["dtype"]) is None]
    runner = Runner(to_run, args, workdir, mode, unbounded, so_path, entries)
    results = runner.run()
    by_key = {(to_run[i]["name"], to_run[i]["dtype"]): ev for i, ev in results.items()}
    results_all = {i: by_key[(it["name"], it["dtype"])] for i, it in enumerate(items)
                   if (it["name"], it["dtype"]) in by_key}
    wall = time.monotonic() - t0

    truncated_ok = runner.max_samples is None
    rows = evaluate(items, results_all, entries, mode, truncated_ok)
    fails, passes = unexpected(rows)
    exclusions = []
    for r in rows:
        for reason, count in (r.get("exclusions") or {}).items():
            exclusions.append({"item": f"{r['name']} {r['dtype']}", "reason": reason, "samples": count})
        for c, info in r["checks"].items():
            if info["status"] == "excluded" and info["expected"]:
                exclusions.append({"item": f"{r['name']} {r['dtype']} {c}", "reason": info["expected"],
                                   "samples": info["excluded"]})
    report = {
        "meta": {
            "started": started, "wall_time_s": round(wall, 1), "wall_time": _hms(wall),
            "path": mode, "subset": args.subset, "filter": " ".join(args.only + args.dtype) or None,
            "max_samples": runner.max_samples, "budget_s": runner.budget,
            "sample_timeout_s": args.sample_timeout, "threads": args.threads,
            "worker_restarts": runner.restarts, "extension_rebuilt_during_run": runner.rebuilds,
            "torch": torch_version, "git": git_rev(), "python": platform.python_version(),
            "command": " ".join([os.path.relpath(sys.executable, ROOT), "conformance/run.py"] + (argv or sys.argv[1:])),
            "env": MODE_ENV.get(mode, {}),
        },
        "summary": summarize(rows),
        "unexpected": {"failures": fails, "passes": passes},
        "stale_entries": [e.text() for e in entries if not e.used and e.applies_to(mode)] if (
            args.subset == "full" and not args.only and not args.dtype) else [],
        "exclusions": exclusions,
        "results": rows,
    }
    json_path = os.path.join(args.out, name + ".json")
    prev_path = args.previous
    if prev_path is None and os.path.exists(json_path):
        prev_path = os.path.join(args.out, name + ".prev.json")
        shutil.copyfile(json_path, prev_path)
    prev = None
    if prev_path and os.path.exists(prev_path):
        with open(prev_path) as f:
            prev = json.load(f)
    report["diff"] = diff(prev, rows)
    with open(json_path, "w") as f:
        json.dump(report, f, indent=1)
    md_path = os.path.join(args.out, name + ".md")
    write_markdown(md_path, report)

    print()
    for line in summary_lines(report):
        print(line)
    d = report["diff"]
    if d is not None:
        print(f"diff vs previous report ({d['previous']}): {len(d['regressions'])} regressions, "
              f"{len(d['new_passes'])} new passes")
        for x in d["regressions"][:50]:
            print(f"  regression: {x}")
        for x in d["new_passes"][:50]:
            print(f"  new pass:   {x}")
    for x in fails[:100]:
        print(f"  UNEXPECTED FAILURE: {x[:300]}")
    for x in passes[:100]:
        print(f"  UNEXPECTED PASS: {x[:300]}")
    if report["stale_entries"]:
        print(f"{len(report['stale_entries'])} entries of {os.path.relpath(args.expected, ROOT)} matched nothing:")
        for x in report["stale_entries"]:
            print(f"  {x}")
    print(f"report: {os.path.relpath(json_path)} and {os.path.relpath(md_path)}")
    shutil.rmtree(workdir, ignore_errors=True)
    return 1 if (fails or passes) else 0


if __name__ == "__main__":
    sys.exit(main())

"""The workloads, one module per concern, in report order.

Each module defines `workloads(quick: bool) -> list[Workload]`; sizes depend
on `quick`. Importing a module does no tensor work (the probe server forks
measurement processes from an interpreter that has only imported it)."""
import importlib

MODULES = ("micro", "memory_bound", "compute", "models", "demo")


def load(module: str, quick: bool):
    mod = importlib.import_module(f"{__name__}.{module}")
    wls = mod.workloads(quick)
    for wl in wls:
        wl.module = module
    return wls


def all_workloads(quick: bool):
    return [wl for module in MODULES for wl in load(module, quick)]


def get(module: str, name: str, quick: bool):
    for wl in load(module, quick):
        if wl.name == name:
            return wl
    raise KeyError(f"no workload {name!r} in benchmarks.workloads.{module}")

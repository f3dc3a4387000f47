"""Dispatch overhead: a loop of tiny ops on a 1-element tensor.

One step is `iters` calls of a 10-op body (5 x add then mul with Python
scalars); compiled configurations compile the body, so each call is one
compiled-graph call instead of 10 dispatches. Throughput counts the 10 eager
ops per call (Mop/s)."""
import functools

import torch

from benchmarks.harness import Instance, Workload

OPS_PER_CALL = 10


def _body(t):
    for _ in range(OPS_PER_CALL // 2):
        t = (t + 1.0) * 0.5
    return t


def _build(iters, device, compile):
    body = compile(_body)
    start = torch.ones(1, device=device)

    def step():
        t = start
        for _ in range(iters):
            t = body(t)
        return t

    return Instance(step, work=iters * OPS_PER_CALL / 1e6)


def workloads(quick):
    iters = 100 if quick else 1000
    return [Workload(
        name="tiny_ops", group="dispatch",
        title=f"{iters * OPS_PER_CALL:,} tiny ops (1-element add/mul)",
        unit="Mop/s", build=functools.partial(_build, iters),
        params={"iters": iters, "ops_per_call": OPS_PER_CALL, "numel": 1},
        compile_in_quick=True,
    )]

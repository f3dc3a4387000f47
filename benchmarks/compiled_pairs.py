"""Compiled models, neuron against Inductor, measured in step pairs.

    .venv/bin/python benchmarks/compiled_pairs.py [--models bert,llama,resnet,vit] [--pairs 40] [--steps 1]

Builds each model of the suite (benchmarks/workloads/models.py, full sizes)
twice, under torch.compile(backend="neuron") on the neuron device and under
Inductor on the CPU, warms both up, then times pairs: `--steps` steps of
one configuration and then of the other, the order alternating. The figure
is the median of the per-pair ratios (Inductor's time / ours: above 1 is
faster), with its quartiles. On a shared machine whose speed drifts within
a run, a ratio of neighbouring steps is steadier than a ratio of medians
taken minutes apart."""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from benchmarks.workloads import models  # noqa: E402

BUILDS = {
    "bert": models._build_bert,
    "llama": models._build_llama,
    "resnet": models._build_resnet,
    "vit": models._build_vit,
}


def sizes():
    by_name = {"bert_fwd_bwd": "bert", "llama_train": "llama", "resnet_train": "resnet", "vit_fwd_bwd": "vit"}
    return {by_name[w.name]: w.params for w in models.workloads(quick=False) if w.name in by_name}


def wait(result):
    first = result[0] if isinstance(result, tuple) else result
    first.flatten()[0].item()


def measure(name, params, pairs, steps):
    build = BUILDS[name]
    instances = {
        "inductor": build(params, "cpu", lambda m: torch.compile(m)),
        "neuron": build(params, "neuron", lambda m: torch.compile(m, backend="neuron")),
    }
    for inst in instances.values():
        for _ in range(3):
            inst.step()
        wait(inst.step())
    times = {k: [] for k in instances}
    order = list(instances)
    for p in range(pairs):
        for k in order if p % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            for _ in range(steps):
                out = instances[k].step()
            wait(out)
            times[k].append((time.perf_counter() - start) / steps)
    ratios = [a / b for a, b in zip(times["inductor"], times["neuron"])]
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return {
        "inductor_ms": statistics.median(times["inductor"]) * 1e3,
        "neuron_ms": statistics.median(times["neuron"]) * 1e3,
        "ratio": statistics.median(ratios), "q1": q1, "q3": q3,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(BUILDS))
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--steps", type=int, default=1, help="steps per configuration in each pair")
    args = ap.parse_args()
    params = sizes()
    print(f"{'model':8s} {'inductor ms':>12s} {'neuron ms':>10s}  neuron/inductor speed (median of pairs, quartiles)")
    for name in args.models.split(","):
        r = measure(name, params[name], args.pairs, args.steps)
        print(f"{name:8s} {r['inductor_ms']:12.1f} {r['neuron_ms']:10.1f}  "
              f"{r['ratio']:.3f} ({r['q1']:.3f}-{r['q3']:.3f}, {args.pairs} pairs of {args.steps} step(s))")


if __name__ == "__main__":
    main()

"""Bus bandwidth of allreduce and allgather on neuron tensors (neuron
backend) against Gloo on CPU tensors, side by side in one run.

    .venv/bin/torchrun --nproc-per-node 2 benchmarks/collectives_bandwidth.py [--max-mib 256]

Sizes from 4 KiB to --max-mib MiB (x4 steps); each figure is the median of
interleaved repeats; bus bandwidth as in nccl-tests (allreduce moves
2(n-1)/n of the buffer per rank, allgather (n-1)/n)."""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist


def timed(fn, repeats):
    """Median time of a blocking collective (it returns once data is in place)."""
    times = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--max-mib", type=int, default=256)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("neuron", rank % torch.neuron.device_count())
    torch.neuron.set_device(device)
    dist.init_process_group("cpu:gloo,neuron:neuron")
    gloo = dist.new_group(backend="gloo")
    sizes, size = [], 4 * 1024
    while size <= args.max_mib * 1024 * 1024:
        sizes.append(size)
        size *= 4
    rows = []
    for nbytes in sizes:
        n = nbytes // 4
        row = [nbytes]
        for name, factor in (("allreduce", 2 * (world - 1) / world), ("allgather", (world - 1) / world)):
            results = {}
            # interleaved: neuron, gloo, neuron, gloo ... per size
            for label, dev, group in (("neuron", device, None), ("gloo", torch.device("cpu"), gloo)):
                x = torch.ones(n, device=dev)
                if name == "allreduce":
                    fn = lambda x=x, g=group: dist.all_reduce(x, group=g)
                else:
                    shard = torch.ones(n // world, device=dev)
                    x = torch.empty((n // world) * world, device=dev)
                    fn = lambda x=x, s=shard, g=group: dist.all_gather_into_tensor(x, s, group=g)
                fn()  # warm-up
                results[label] = timed(fn, args.repeats)
            bw = {k: nbytes * factor / t / 1e9 for k, t in results.items()}
            row += [bw["neuron"], bw["gloo"], bw["neuron"] / bw["gloo"]]
        rows.append(row)
    if rank == 0:
        print(f"{world} ranks, torch {torch.__version__}; bus bandwidth GB/s (median of {args.repeats})")
        print(f"{'size':>10} | {'allreduce neuron':>16} {'gloo cpu':>9} {'ratio':>6} | {'allgather neuron':>16} {'gloo cpu':>9} {'ratio':>6}")
        for r in rows:
            size = f"{r[0] // 1024} KiB" if r[0] < 1 << 20 else f"{r[0] >> 20} MiB"
            print(f"{size:>10} | {r[1]:>16.3f} {r[2]:>9.3f} {r[3]:>6.2f} | {r[4]:>16.3f} {r[5]:>9.3f} {r[6]:>6.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

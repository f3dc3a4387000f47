"""The CUDA side of the GPU benchmark (issue 29): the same measurements as
gpu_bench (benchmarks/gpu/gpu_bench.cc), through the PyTorch CUDA of the
machine it runs on, and the ratios of the two.

    python3 cuda_reference.py --json cuda.json [--ours ours.json] [--quick]

Needs only PyTorch with CUDA (any recent version: the GPU machine has 2.11,
not this project's torch); without a CUDA device it prints gpu_bench's
figures alone. Each figure is the best of --repeats timed rounds after a
warm-up, timed like gpu_bench's: wall clock from the first launch to the
stream's completion. fp32 products run with TF32 off (full fp32, as ours).
"""
import argparse
import json
import time


def best_seconds(torch, fn, repeats):
    def once():
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return time.perf_counter() - start
    once()
    return min(once() for _ in range(repeats))


def measure(quick, repeats):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    results = []

    def add(name, unit, value, kernel=""):
        print(f"  {name}: {value:.4g} {unit}", flush=True)
        results.append({"name": name, "unit": unit, "value": value, "kernel": kernel})

    nbytes = (32 << 20) if quick else (1 << 30)
    a = torch.ones(nbytes // 4, device="cuda")
    b = torch.empty_like(a)
    reps = 4 if quick else 20
    s = best_seconds(torch, lambda: [b.copy_(a) for _ in range(reps)], repeats)
    add(f"device copy {nbytes >> 20} MiB (read + write)", "GB/s", 2.0 * nbytes * reps / s / 1e9)
    del a, b

    x = torch.zeros(1, device="cuda")
    reps = 200 if quick else 2000
    s = best_seconds(torch, lambda: [x.add_(1) for _ in range(reps)], repeats)
    add("dispatch, 1-element kernel (back to back)", "us", s / reps * 1e6, "eager add_")

    def matmul(m, n, k, b_transposed, label, dtype=torch.float32):
        a = torch.full((m, k), 0.01, device="cuda", dtype=dtype)
        w = torch.full((n, k) if b_transposed else (k, n), 0.01, device="cuda", dtype=dtype)
        bm = w.t() if b_transposed else w
        flops = 2.0 * m * n * k
        reps = max(1, int(min(50, (2e9 if quick else 2e12) / flops)))
        s = best_seconds(torch, lambda: [a @ bm for _ in range(reps)], repeats)
        kind = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype]
        add(f"matmul {kind} {label}", "TFLOP/s", flops * reps / s / 1e12, "cuBLAS")

    for size in ((256, 512) if quick else (1024, 2048, 4096)):
        matmul(size, size, size, False, f"{size}^3")
    tokens = 256 if quick else 4096
    matmul(tokens, 2304, 768, True, f"{tokens}x768 @ W[2304,768]^T (qkv)")
    matmul(tokens, 3072, 768, True, f"{tokens}x768 @ W[3072,768]^T (mlp up)")
    matmul(tokens, 768, 3072, True, f"{tokens}x3072 @ W[768,3072]^T (mlp down)")
    matmul(1, 2304, 768, True, "1x768 @ W[2304,768]^T (decode qkv)")
    matmul(1, 768, 3072, True, "1x3072 @ W[768,3072]^T (decode mlp down)")
    big = 256 if quick else 8192
    matmul(big, big, big, False, f"{big}^3", torch.float16)
    matmul(tokens, 3072, 768, True, f"{tokens}x768 @ W[3072,768]^T (mlp up)", torch.float16)
    batch, seq = (2, 128) if quick else (8, 512)
    q = torch.full((batch, 12, seq, 64), 0.01, device="cuda")
    flops = 4.0 * batch * 12 * seq * seq * 64 / 2
    reps = max(1, int(min(20, (1e8 if quick else 2e11) / flops)))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    s = best_seconds(torch, lambda: [sdpa(q, q, q, is_causal=True) for _ in range(reps)], repeats)
    add(f"attention fwd fp32 causal {batch}x12x{seq}x64", "TFLOP/s", flops * reps / s / 1e12, "PyTorch SDPA")
    if not quick:
        matmul(8192, 8192, 8192, False, "8192^3", torch.bfloat16)
    return {"device": {"name": torch.cuda.get_device_name(), "torch": torch.__version__}, "results": results}


def compare(ours, cuda):
    """Ratios of ours to CUDA's, >= 1 where ours is better (time units
    inverted)."""
    theirs = {r["name"]: r for r in (cuda or {}).get("results", [])}
    print(f"\nours: {ours['device']['name']}")
    if cuda:
        print(f"CUDA: {cuda['device']['name']}, torch {cuda['device']['torch']}")
    print(f"{'benchmark':58s} {'ours':>10s} {'CUDA':>10s} {'unit':8s} {'ours/CUDA':>9s}")
    names = [r["name"] for r in ours["results"]] + [n for n in theirs if n not in
                                                     {r["name"] for r in ours["results"]}]
    mine = {r["name"]: r for r in ours["results"]}
    for name in names:
        o, c = mine.get(name), theirs.get(name)
        unit = (o or c)["unit"]
        ratio = ""
        if o and c and o["value"] > 0 and c["value"] > 0:
            r = c["value"] / o["value"] if unit == "us" else o["value"] / c["value"]
            ratio = f"{r:.3f}"
        fmt = lambda r: f"{r['value']:10.4g}" if r else f"{'-':>10s}"
        print(f"{name:58s} {fmt(o)} {fmt(c)} {unit:8s} {ratio:>9s}")
    print("(ours/CUDA: speed ratio, time figures inverted; '-': not measured on that side)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write CUDA's figures here")
    parser.add_argument("--ours", help="gpu_bench's JSON, to compare with")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cuda = None
    try:
        import torch
        available = torch.cuda.is_available()
    except ImportError:
        available = False
    if available:
        cuda = measure(args.quick, args.repeats)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(cuda, f, indent=1)
    else:
        print("no CUDA device here: gpu_bench's figures alone")
    if args.ours:
        with open(args.ours) as f:
            compare(json.load(f), cuda)


if __name__ == "__main__":
    main()

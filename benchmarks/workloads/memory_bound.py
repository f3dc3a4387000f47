"""Memory-bound chains: GELU written out as separate ops, LayerNorm, softmax,
an RMSNorm with a SiLU gate, and an AdamW step over many small tensors. In
neuron eager, the ops written out are fused by Adaptive Eager Execution
(OPENNEURON_EAGER_FUSION=0 measures them one by one).

The triad's native C version is timed beside it as the machine's memory
bandwidth. GELU/LayerNorm/softmax (fused ATen kernels, and written out as separate ops)
report effective bandwidth: bytes of one read of the
input and one write of the output per step, over time (GB/s), i.e. what a
single fused pass would move; the unfused eager GELU moves far more. The
optimizer reports steps/s; it pins foreach=True on every device (AdamW's
default is foreach on neuron, a per-tensor loop on cpu), so all run the same
algorithm."""
import ctypes
import functools

import torch
import torch.nn.functional as F

from benchmarks.harness import Instance, Workload


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def gelu_unfused(x):
    """tanh-approximated GELU as 8 separate elementwise ops."""
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def _build_gelu(n, device, compile):
    f = compile(gelu_unfused)
    x = _randn(n).to(device)
    return Instance(lambda: f(x), work=2 * n * 4 / 1e9)


def layernorm_fused(x, w, b):
    """ATen's one LayerNorm kernel."""
    return F.layer_norm(x, (x.shape[-1],), w, b)


def layernorm_unfused(x, w, b, eps=1e-5):
    """LayerNorm written out as model code often does (mean, variance,
    normalise, scale, shift: 8 separate ops in eager)."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps) * w + b


def softmax_fused(x):
    return torch.softmax(x, dim=-1)


def softmax_unfused(x):
    """softmax written out: max, subtract, exp, sum, divide (5 ops in eager)."""
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def rmsnorm_silu_gate_unfused(x, gate, w, eps=1e-6):
    """An RMSNorm and a SiLU gate as Llama-style model code writes them
    (9 separate ops in eager)."""
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
    return y * (gate * torch.sigmoid(gate))


def _build_rmsnorm_gate(rows, cols, device, compile):
    f = compile(rmsnorm_silu_gate_unfused)
    x, gate = _randn(rows, cols).to(device), _randn(rows, cols, seed=3).to(device)
    w = (1 + 0.1 * _randn(cols, seed=1)).to(device)
    return Instance(lambda: f(x, gate, w), work=3 * rows * cols * 4 / 1e9)


def _build_layernorm(fn, rows, cols, device, compile):
    w, b = (1 + 0.1 * _randn(cols, seed=1)).to(device), (0.1 * _randn(cols, seed=2)).to(device)
    f = compile(fn)
    x = _randn(rows, cols).to(device)
    return Instance(lambda: f(x, w, b), work=2 * rows * cols * 4 / 1e9)


def _build_softmax(fn, rows, cols, device, compile):
    f = compile(fn)
    x = _randn(rows, cols).to(device)
    return Instance(lambda: f(x), work=2 * rows * cols * 4 / 1e9)


TRIAD_SCALAR = 3.0


def _triad(b, c):
    return b + TRIAD_SCALAR * c


def _build_triad(n, device, compile):
    f = compile(_triad)
    b, c = _randn(n, seed=1).to(device), _randn(n, seed=2).to(device)
    return Instance(lambda: f(b, c), work=3 * n * 4 / 1e9)


def _native_triad(n):
    """STREAM's triad in C (benchmarks/native/stream_triad.c) on the same
    number of threads: the machine's memory bandwidth for this access pattern."""
    from benchmarks import native

    fn = native.load("stream_triad").stream_triad
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_float, ctypes.c_int64, ctypes.c_int]
    a, b, c = torch.empty(n), _randn(n, seed=1), _randn(n, seed=2)

    def step():
        fn(a.data_ptr(), b.data_ptr(), c.data_ptr(), TRIAD_SCALAR, n, torch.get_num_threads())
        return a

    return Instance(step, work=3 * n * 4 / 1e9)


def _build_adamw(n_tensors, dim, device, compile):
    g = torch.Generator().manual_seed(0)
    shapes = [(dim, dim) if i % 2 == 0 else (dim,) for i in range(n_tensors)]
    params = [torch.nn.Parameter(torch.randn(s, generator=g).to(device)) for s in shapes]
    for p in params:
        p.grad = (0.01 * torch.randn(p.shape, generator=g)).to(device)
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=True)
    opt_step = compile(opt.step)

    def step():
        opt_step()
        return params

    return Instance(step, work=1.0)


def workloads(quick):
    n = 1 << 18 if quick else 1 << 22
    ln = (512, 256) if quick else (8192, 768)
    sm = (512, 256) if quick else (4096, 1024)
    adam = (20, 64) if quick else (100, 64)
    triad = 1 << 22 if quick else 1 << 24
    return [
        Workload(name="stream_triad", group="memory-bound",
                 title=f"STREAM triad b + 3c, {triad:,} fp32 (bytes of 3 arrays)", unit="GB/s",
                 build=functools.partial(_build_triad, triad), params={"numel": triad},
                 reference=functools.partial(_native_triad, triad),
                 reference_label="STREAM triad in C (OpenMP, -O3 -march=native)"),
        Workload(name="gelu_unfused", group="memory-bound",
                 title=f"GELU as 8 separate ops, {n:,} fp32", unit="GB/s",
                 build=functools.partial(_build_gelu, n), params={"numel": n}),
        Workload(name="layernorm", group="memory-bound",
                 title=f"LayerNorm {ln[0]}x{ln[1]} fp32", unit="GB/s",
                 build=functools.partial(_build_layernorm, layernorm_fused, *ln), params={"shape": ln}),
        Workload(name="softmax", group="memory-bound",
                 title=f"softmax {sm[0]}x{sm[1]} fp32 (last dim)", unit="GB/s",
                 build=functools.partial(_build_softmax, softmax_fused, *sm), params={"shape": sm}),
        Workload(name="layernorm_unfused", group="memory-bound",
                 title=f"LayerNorm as 8 separate ops {ln[0]}x{ln[1]} fp32", unit="GB/s",
                 build=functools.partial(_build_layernorm, layernorm_unfused, *ln), params={"shape": ln}),
        Workload(name="softmax_unfused", group="memory-bound",
                 title=f"softmax as 5 separate ops {sm[0]}x{sm[1]} fp32", unit="GB/s",
                 build=functools.partial(_build_softmax, softmax_unfused, *sm), params={"shape": sm}),
        Workload(name="rmsnorm_silu_gate_unfused", group="memory-bound",
                 title=f"RMSNorm + SiLU gate as 9 separate ops {sm[0]}x{sm[1]} fp32", unit="GB/s",
                 build=functools.partial(_build_rmsnorm_gate, *sm), params={"shape": sm}),
        Workload(name="adamw_small_tensors", group="memory-bound",
                 title=f"AdamW step (foreach) over {adam[0]} tensors ({adam[1]}x{adam[1]} and {adam[1]})",
                 unit="steps/s", build=functools.partial(_build_adamw, *adam),
                 params={"tensors": adam[0], "dim": adam[1]}),
    ]

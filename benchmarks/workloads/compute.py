"""Compute-bound kernels at a few sizes: square fp32 matmul and 3x3 fp32
convolution (NCHW, stride 1, padding 1), with achieved GFLOP/s
(matmul 2n^3; convolution 2 N K C 9 H W)."""
import functools

import torch
import torch.nn.functional as F

from benchmarks.harness import Instance, Workload


def _randn(*shape, seed=0, scale=1.0):
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _build_matmul(n, device, compile):
    a, b = _randn(n, n, seed=1).to(device), _randn(n, n, seed=2).to(device)
    f = compile(torch.matmul)
    return Instance(lambda: f(a, b), work=2 * n**3 / 1e9)


def _build_conv(N, C, H, device, compile):
    x = _randn(N, C, H, H, seed=1).to(device)
    w = _randn(C, C, 3, 3, seed=2, scale=(C * 9) ** -0.5).to(device)
    f = compile(lambda x: F.conv2d(x, w, padding=1))
    return Instance(lambda: f(x), work=2 * N * C * C * 9 * H * H / 1e9)


def workloads(quick):
    mm_sizes = [256] if quick else [256, 512, 1024]
    conv_sizes = [(4, 32, 32)] if quick else [(8, 64, 56), (8, 128, 28), (8, 256, 14)]
    tol = (1e-4, 1e-3)  # sums of n products: absolute error grows with n
    wls = [Workload(name=f"matmul_{n}", group="compute", title=f"matmul {n}x{n} @ {n}x{n} fp32",
                    unit="GFLOP/s", build=functools.partial(_build_matmul, n), params={"n": n},
                    tol_eager=tol, tol_compiled=tol)
           for n in mm_sizes]
    wls += [Workload(name=f"conv3x3_{C}c_{H}px", group="compute",
                     title=f"conv 3x3 batch {N}, {C}->{C} channels, {H}x{H} fp32",
                     unit="GFLOP/s", build=functools.partial(_build_conv, N, C, H),
                     params={"batch": N, "channels": C, "size": H}, tol_eager=tol, tol_compiled=tol)
            for N, C, H in conv_sizes]
    return wls

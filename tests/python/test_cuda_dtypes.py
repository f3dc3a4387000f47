"""Dtypes CUDA supports where ATen's CPU kernels do not: on neuron they work
as on CUDA (csrc/torch/aten/cuda_dtypes.cc), computed in a wider dtype and
rounded, or by an emulation of CUDA's kernel. References here are computed
independently: in float64 and rounded, or from CUDA's definition."""
import warnings

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.timeout(300)

warnings.filterwarnings("ignore", message="ComplexHalf support is experimental")
DEV = "neuron"


def close(actual, expected, dtype):
    tol = {torch.float16: (1e-3, 2e-3), torch.complex32: (1e-3, 2e-3), torch.bfloat16: (1e-2, 1.6e-2)}
    atol, rtol = tol.get(dtype, (0, 0))
    assert actual.device.type == "neuron"
    torch.testing.assert_close(actual.cpu(), expected, atol=atol, rtol=rtol)


def histc_like_cuda(x, bins, lo, hi):
    """CUDA's definition for integer input, in plain Python."""
    lo, hi = int(lo), int(hi)
    values = [int(v) for v in x.flatten().tolist()]
    if lo == hi and values:
        lo, hi = min(values), max(values)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    counts = [0] * bins
    for v in values:
        if lo <= v <= hi:
            counts[min((v - lo) * bins // (hi - lo), bins - 1)] += 1
    return torch.tensor(counts, dtype=x.dtype)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8])
def test_histc_of_integers_as_cuda(dtype):
    """Mixture-of-experts routing (Mixtral, Qwen2-MoE) calls histc on integer
    expert indices: CUDA supports it, ATen's CPU kernel does not."""
    x = torch.tensor([0, 1, 1, 3, 7, 7, 7, 2, 5, 9], dtype=dtype)
    for bins, lo, hi in ((8, 0, 7), (4, 0, 0), (3, 1.9, 7.2), (5, 2, 2)):
        out = torch.histc(x.to(DEV), bins=bins, min=lo, max=hi)
        assert out.dtype == dtype
        assert torch.equal(out.cpu(), histc_like_cuda(x, bins, lo, hi)), (bins, lo, hi)
    out = torch.empty(0, dtype=dtype, device=DEV)
    torch.histc(x.to(DEV), bins=8, min=0, max=7, out=out)
    assert torch.equal(out.cpu(), histc_like_cuda(x, 8, 0, 7))
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(x.to(DEV), bins=0)


@pytest.mark.parametrize("name", ["exp", "sin", "tanh", "sqrt", "rsqrt", "log", "sigmoid"])
def test_complex32_math(name):
    x = torch.randn(5, 7, dtype=torch.complex64) + 0.5
    h = x.to(torch.complex32)
    expected = getattr(torch, name)(h.to(torch.complex128)).to(torch.complex32)
    out = getattr(torch, name)(h.to(DEV))
    assert out.dtype == torch.complex32
    close(out, expected, torch.complex32)


def test_complex32_reductions_division_and_real_results():
    h = (torch.randn(4, 6, dtype=torch.complex64) / 4).to(torch.complex32)
    w = (torch.randn(4, 6, dtype=torch.complex64) + 3).to(torch.complex32)
    n, m, ref = h.to(DEV), w.to(DEV), h.to(torch.complex128)
    close(n.sum(), ref.sum().to(torch.complex32), torch.complex32)
    close(n.sum(dim=1), ref.sum(dim=1).to(torch.complex32), torch.complex32)
    close(n / m, (ref / w.to(torch.complex128)).to(torch.complex32), torch.complex32)
    angle = n.angle()  # a real result: Half, as CUDA gives
    assert angle.dtype == torch.float16
    close(angle, ref.angle().to(torch.float16), torch.float16)


def test_written_arguments_get_the_rounded_values():
    """In-place and out= ops widen a copy and write the rounded result back."""
    h = (torch.randn(3, 4, dtype=torch.complex64) / 2).to(torch.complex32)
    expected = h.to(torch.complex128).exp().to(torch.complex32)
    n = h.to(DEV)
    alias = n[0]
    assert n.exp_() is n
    close(n, expected, torch.complex32)
    close(alias, expected[0], torch.complex32)  # a view of the input sees the write
    out = torch.empty(0, dtype=torch.complex32, device=DEV)
    result = torch.exp(h.to(DEV), out=out)
    assert result is out
    close(out, expected, torch.complex32)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_pooling_and_losses_forward_and_backward(dtype):
    x = torch.randn(2, 3, 4, 6, 6).to(dtype)
    xn = x.to(DEV).requires_grad_()
    x64 = x.double().requires_grad_()
    out = F.avg_pool3d(xn, 2)
    ref = F.avg_pool3d(x64, 2)
    assert out.dtype == dtype
    close(out, ref.to(dtype), dtype)
    g = torch.randn(ref.shape).to(dtype)
    out.backward(g.to(DEV))
    ref.backward(g.double())
    assert xn.grad.dtype == dtype
    close(xn.grad, x64.grad.to(dtype), dtype)

    logits = torch.randn(5, 4).to(dtype)
    target = torch.tensor([0, 3, 1, 2, 3])
    loss = F.multi_margin_loss(logits.to(DEV), target.to(DEV))
    close(loss, F.multi_margin_loss(logits.double(), target).to(dtype), dtype)


def test_bool_abs_and_trace():
    b = torch.tensor([[True, False], [False, True]])
    out = b.to(DEV).abs()
    assert out.dtype == torch.bool and torch.equal(out.cpu(), b)
    t = torch.trace(b.to(DEV))
    assert t.dtype == torch.int64 and t.item() == 2


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_nansum_of_complex_as_cuda(dtype):
    x = torch.randn(3, 4, dtype=dtype)
    x[0, 1] = complex(float("nan"), 1.0)
    x[2, 2] = complex(0.5, float("nan"))
    masked = torch.where(torch.isnan(x), torch.zeros_like(x), x)
    close(torch.nansum(x.to(DEV)), masked.sum(), dtype)
    close(torch.nansum(x.to(DEV), dim=1, keepdim=True), masked.sum(dim=1, keepdim=True), dtype)
    count = (~torch.isnan(x)).sum(dim=0)
    close(torch.nanmean(x.to(DEV), dim=0), masked.sum(dim=0) / count, dtype)


def test_half_rrelu_uses_the_neuron_generator():
    """A random op widened and run again keeps the caller's generator."""
    x = torch.randn(64).half()
    g1 = torch.Generator(device=DEV).manual_seed(3)
    g2 = torch.Generator(device=DEV).manual_seed(3)
    a = torch.ops.aten.rrelu_with_noise(x.to(DEV), torch.zeros(64).half().to(DEV), 0.1, 0.3, True, g1)
    b = torch.ops.aten.rrelu_with_noise(x.to(DEV), torch.zeros(64).half().to(DEV), 0.1, 0.3, True, g2)
    assert a.dtype == torch.float16 and torch.equal(a.cpu(), b.cpu())


def test_errors_still_name_the_op_and_dtype():
    """Where neither CUDA's dtypes nor a wider dtype help, the error names the
    op and says the dtype is what is missing."""
    x = torch.ones(4, dtype=torch.bool, device=DEV)  # no Bool histc on CUDA either
    with pytest.raises(NotImplementedError, match=r"aten::histc is not implemented for the neuron device "
                                                  r"for this dtype(.|\n)*'Bool'"):
        torch.histc(x, bins=2)
    assert torch.histc(x.float(), bins=2).sum().item() == 4.0  # and the process goes on


@pytest.mark.timeout(600)
def test_opinfo_cuda_only_dtypes():
    """Every (op, dtype) pair of PyTorch's OpInfo database that CUDA supports
    and the CPU does not, forward: the first samples run on neuron and match
    the op computed in float64 (complex128) and rounded, within 16-bit
    tolerances. Pairs PyTorch itself cannot serve off CUDA are listed."""
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.utils import _pytree as pytree

    # PyTorch's composite fft_* functions accept float16 only for CUDA tensors
    # (their dtype check runs before any device kernel); the attention ops
    # are CUDA's own SDPA backends, which have no CPU kernel at all.
    unreachable = {"fft.", "torch.ops.aten._efficient_attention_forward",
                   "torch.ops.aten._flash_attention_forward"}
    wider = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.complex32: torch.complex128}
    checked, failures = 0, []
    for op in op_db:
        if op.name.startswith("_refs") or op.name in ("sparse.sampled_addmm", "sparse.mm.reduce", "to_sparse"):
            continue
        extra = set(op.supported_dtypes("cuda")) - set(op.supported_dtypes("cpu"))
        for dtype in sorted(extra, key=str):
            if dtype not in wider or any(op.name.startswith(u) or op.name == u for u in unreachable):
                continue
            for i, s in enumerate(op.sample_inputs("cpu", dtype)):
                if i == 2:
                    break
                up = s.transform(lambda t: t.to(wider[t.dtype]) if isinstance(t, torch.Tensor)
                                 and t.dtype in wider else t)
                try:
                    ref = op(up.input, *up.args, **up.kwargs)
                except Exception:  # noqa: BLE001 -- no reference for this sample
                    continue
                n = s.transform(lambda t: t.to(DEV) if isinstance(t, torch.Tensor) else t)
                try:
                    out = op(n.input, *n.args, **n.kwargs)
                    for o, r in zip(pytree.tree_leaves(out), pytree.tree_leaves(ref)):
                        if isinstance(o, torch.Tensor) and (o.is_floating_point() or o.is_complex()):
                            expected = r.to(o.dtype) if r.dtype in (torch.float64, torch.complex128) else r
                            actual = o.cpu()
                            if actual.is_complex():  # part by part: inf parts compare equal
                                actual, expected = (torch.view_as_real(t.to(torch.complex64)) for t in (actual, expected))
                            # 16-bit rounding, and sums of many 16-bit products (complex32
                            # convolutions run CPU kernels that accumulate in 16 bits)
                            finite = expected[torch.isfinite(expected)].abs()
                            scale = max(1.0, float(finite.max())) if finite.numel() else 1.0
                            torch.testing.assert_close(actual, expected, atol=2e-2 * scale, rtol=2e-2, equal_nan=True)
                    checked += 1
                except Exception as e:  # noqa: BLE001
                    failures.append(f"{op.name} {dtype} sample {i}: {type(e).__name__}: {str(e)[:160]}")
    assert checked >= 80, checked  # 89 sample checks over 60 pairs (2026-12-04)
    assert not failures, "\n".join(failures)

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

    # CUDA's own attention kernels have no CPU kernel to be the reference:
    # test_efficient_attention_as_cuda and test_flash_attention_... check them.
    wider = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.complex32: torch.complex128}
    checked, failures = 0, []
    for op in op_db:
        if op.name.startswith("_refs") or op.name in ("sparse.sampled_addmm", "sparse.mm.reduce", "to_sparse"):
            continue
        extra = set(op.supported_dtypes("cuda")) - set(op.supported_dtypes("cpu"))
        for dtype in sorted(extra, key=str):
            if dtype not in wider:
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


def same_bits(a, b):
    """Equal bit for bit (the CPU has no equal for complex32)."""
    return a.dtype == b.dtype and torch.equal(a.cpu().contiguous().view(torch.uint8), b.cpu().contiguous().view(torch.uint8))


_FFTS = [f"{kind}{suffix}" for kind in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft") for suffix in ("", "2", "n")]


@pytest.mark.parametrize("name", _FFTS)
def test_half_fft_as_cuda(name):
    """torch.fft of float16 (CUDA only in PyTorch: its composite checks the
    device before any kernel): complex32 or float16 results, as CUDA returns,
    forward, backward, out= and under inference mode, against float64."""
    fn = getattr(torch.fft, name)
    x = torch.randn(4, 8, dtype=torch.float64)
    expected = fn(x)
    narrow = torch.complex32 if expected.is_complex() else torch.float16
    h = x.to(torch.float16)

    out = fn(h.to(DEV))
    assert out.dtype == narrow and out.device.type == "neuron"
    expected = fn(h.to(torch.float64))  # the same rounded input
    torch.testing.assert_close(torch.view_as_real(out.cpu().to(torch.complex64)) if out.is_complex() else out.cpu().float(),
                               torch.view_as_real(expected.to(torch.complex64)) if expected.is_complex() else expected.float(),
                               atol=2e-2, rtol=2e-2)

    leaf = h.to(DEV).requires_grad_()
    result = fn(leaf)
    (result.to(torch.complex64).abs() if result.is_complex() else result.float()).square().sum().backward()
    ref_leaf = h.to(torch.float64).requires_grad_()
    ref = fn(ref_leaf)
    (ref.abs() if ref.is_complex() else ref).square().sum().backward()
    assert leaf.grad.dtype == torch.float16
    torch.testing.assert_close(leaf.grad.cpu().float(), ref_leaf.grad.float(), atol=0.1, rtol=2e-2)

    written = torch.empty(0, dtype=narrow, device=DEV)
    assert fn(h.to(DEV), out=written) is written
    assert same_bits(written, out)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype"):
        fn(h.to(DEV), out=torch.empty(0, dtype=torch.float64, device=DEV))
    with torch.inference_mode():
        assert same_bits(fn(h.to(DEV)), out)
    assert fn(x.to(DEV)).dtype == fn(x).dtype  # other dtypes: PyTorch's composite unchanged
    with pytest.raises(RuntimeError, match="Unsupported dtype BFloat16"):  # not on CUDA either
        fn(x.to(torch.bfloat16).to(DEV))


def _attention_reference(q, k, v, bias=None, causal=None, scale=None):
    """Attention in float64 on the CPU, (batch, seq, heads, dim) layout:
    output and logsumexp. causal: 'upper_left' or 'lower_right'."""
    q, k, v = (t.detach().cpu().double().transpose(1, 2).requires_grad_() for t in (q, k, v))
    scale = scale if scale is not None else q.shape[-1] ** -0.5
    scores = q @ k.transpose(-2, -1) * scale
    if bias is not None:
        scores = scores + bias  # a float64 CPU tensor (a leaf when its gradient is checked)
    if causal:
        mq, mk = scores.shape[-2:]
        shift = mk - mq if causal == "lower_right" else 0
        hidden = torch.arange(mk)[None, :] > torch.arange(mq)[:, None] + shift
        scores = scores.masked_fill(hidden, float("-inf"))
    lse = scores.logsumexp(-1)
    out = (scores.softmax(-1) @ v).transpose(1, 2)
    return out, lse, (q, k, v)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("mask_type", [0, 1, 2])
def test_efficient_attention_as_cuda(dtype, mask_type):
    """CUDA's memory-efficient attention kernel (no CPU kernel exists): its
    outputs (logsumexp padded to 32 rows with +inf), and gradients, against
    attention in float64 on the CPU."""
    tol = dict(atol=2e-2, rtol=2e-2) if dtype != torch.float32 else dict(atol=1e-4, rtol=1e-4)
    q, k, v = (torch.randn(2, m, 3, 8, dtype=dtype) for m in (11, 32, 32))
    bias = torch.randn(2, 3, 11, 32, dtype=dtype) if mask_type == 0 else None
    leaves = [t.to(DEV).requires_grad_() for t in (q, k, v)]
    nb = bias.to(DEV).requires_grad_() if bias is not None else None
    out, lse, seed, offset, mq, mk = torch.ops.aten._efficient_attention_forward(
        *leaves, nb, None, None, None, None, 0.0, mask_type, compute_log_sumexp=True)
    assert (out.dtype, out.shape, lse.shape, mq, mk) == (dtype, q.shape, (2, 3, 32), 11, 32)
    causal = {0: None, 1: "upper_left", 2: "lower_right"}[mask_type]
    ref_bias = bias.double().requires_grad_() if bias is not None else None
    ref_out, ref_lse, ref_leaves = _attention_reference(q, k, v, ref_bias, causal)
    torch.testing.assert_close(out.cpu().double(), ref_out.detach(), **tol)
    torch.testing.assert_close(lse[..., :11].cpu().double(), ref_lse.detach(), **tol)
    assert torch.isinf(lse[..., 11:]).all() and (lse[..., 11:] > 0).all()

    grad = torch.randn_like(q)
    out.backward(grad.to(DEV))
    ref_out.backward(grad.double())
    for got, ref in zip(leaves, ref_leaves):
        assert got.grad.dtype == dtype
        torch.testing.assert_close(got.grad.cpu().double(), ref.grad.transpose(1, 2), **tol)
    if bias is not None:
        torch.testing.assert_close(nb.grad.cpu().double(), ref_bias.grad, **tol)


def test_flash_attention_and_variable_length_as_cuda():
    """CUDA's FlashAttention kernel (is_causal aligned lower-right, as
    FlashAttention-2) and the memory-efficient kernel's variable-length
    batches (cu_seqlens), against float64 attention per sequence."""
    q, k, v = (torch.randn(2, m, 3, 8, dtype=torch.float16) for m in (11, 32, 32))
    leaves = [t.to(DEV).requires_grad_() for t in (q, k, v)]
    out, lse, *_ = torch.ops.aten._flash_attention_forward(*leaves, None, None, 11, 32, 0.0, True, False)
    ref_out, ref_lse, ref_leaves = _attention_reference(q, k, v, causal="lower_right")
    torch.testing.assert_close(out.cpu().double(), ref_out.detach(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse.cpu().double(), ref_lse.detach(), atol=2e-2, rtol=2e-2)
    grad = torch.randn_like(q)
    out.backward(grad.to(DEV))
    ref_out.backward(grad.double())
    for got, ref in zip(leaves, ref_leaves):
        torch.testing.assert_close(got.grad.cpu().double(), ref.grad.transpose(1, 2), atol=2e-2, rtol=2e-2)

    # Three sequences of 2, 5, 1 queries and 3, 4, 6 keys packed in one batch.
    cu_q, cu_k = torch.tensor([0, 2, 7, 8], dtype=torch.int32), torch.tensor([0, 3, 7, 13], dtype=torch.int32)
    q, k, v = (torch.randn(1, n, 2, 8) for n in (8, 13, 13))
    out, lse, _, _, mq, mk = torch.ops.aten._efficient_attention_forward(
        q.to(DEV), k.to(DEV), v.to(DEV), None, cu_q.to(DEV), cu_k.to(DEV), 5, 6, 0.0, 0, compute_log_sumexp=True)
    assert lse.shape == (3, 2, 32) and (mq, mk) == (5, 6)
    for s in range(3):
        qs, ks = slice(cu_q[s], cu_q[s + 1]), slice(cu_k[s], cu_k[s + 1])
        r_out, r_lse, _ = _attention_reference(q[:, qs], k[:, ks], v[:, ks])
        torch.testing.assert_close(out[:, qs].cpu().double(), r_out.detach(), atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(lse[s, :, :qs.stop - qs.start].cpu().double(), r_lse[0].detach(), atol=1e-4, rtol=1e-4)


def test_attention_dropout_is_replayed_by_the_backward():
    """With dropout the kernels return the seed they drew (as CUDA returns
    its Philox seed and offset); the backward regenerates the same mask: the
    output is linear in v, so <out, dO> must equal <v, dv>. A seed replays."""
    q, k, v = (torch.randn(2, m, 2, 8) for m in (5, 7, 7))
    torch.manual_seed(7)
    v_leaf = v.to(DEV).requires_grad_()
    out, _, seed, offset, _, _ = torch.ops.aten._efficient_attention_forward(
        q.to(DEV), k.to(DEV), v_leaf, None, None, None, None, None, 0.5, 0, compute_log_sumexp=True)
    no_dropout = torch.ops.aten._efficient_attention_forward(
        q.to(DEV), k.to(DEV), v.to(DEV), None, None, None, None, None, 0.0, 0)[0]
    assert not torch.allclose(out.cpu(), no_dropout.cpu())
    grad = torch.randn_like(out)
    out.backward(grad)
    torch.testing.assert_close((out * grad).sum().cpu(), (v_leaf * v_leaf.grad).sum().detach().cpu(),
                               atol=1e-4, rtol=1e-4)
    torch.manual_seed(7)
    again = torch.ops.aten._efficient_attention_forward(
        q.to(DEV), k.to(DEV), v.to(DEV), None, None, None, None, None, 0.5, 0)[0]
    assert torch.equal(again.cpu(), out.detach().cpu())
    assert seed.device.type == "cpu" and seed.dtype == torch.int64 and offset.dtype == torch.int64

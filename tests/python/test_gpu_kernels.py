"""The GPU kernels of the vulkan driver's library (issue 29) on lavapipe:
the kernels a GPU runs (shared-memory tiles, workgroup barriers) and the
direct ones they replace (OPENNEURON_VULKAN_TILED_KERNELS=0). Every result is checked against the CPU computing in float64, over
odd sizes, transposed and strided operands, batches and epilogues; the
profiler shows which kernels ran, so a test cannot pass on the fallback
kernel alone. The validation layer is on."""
import pytest

from conftest import run_python

VULKAN = {"OPENNEURON_DRIVER": "vulkan", "OPENNEURON_CPU_FALLBACK": "error", "OPENNEURON_VULKAN_VALIDATION": "1"}
TILED = dict(VULKAN, OPENNEURON_VULKAN_TILED_KERNELS="1")


@pytest.mark.parametrize("tiled,kernels", [("1", "gemm_t128_f32 gemm_t64_f32 gemm_rows_f32"), ("0", "gemm_f32")])
def test_matmuls_match_cpu_in_float64(tiled, kernels):
    code = """
    import torch
    from torch.profiler import profile
    torch.manual_seed(0)
    d = "neuron"
    assert torch.neuron.get_device_properties(0).tiled_kernels == TILED
    def check(name, f, *args):
        want = f(*[a.double() for a in args])
        got = f(*[a.to(d) for a in args]).cpu()
        torch.testing.assert_close(got, want.float(), rtol=2e-5, atol=2e-5, msg=name)
    with profile() as prof:
        # Edges of both tile sizes, depths that are not a multiple of 16;
        # few rows (or columns): 1 to 8, with depths below and past a lane.
        for m, k, n in [(32, 1, 32), (33, 17, 65), (130, 70, 129), (64, 64, 64), (257, 31, 300), (40, 300, 50),
                        (12, 20, 9), (1, 768, 100), (5, 3, 70), (8, 129, 8), (90, 77, 3), (2, 1, 1)]:
            a, b = torch.randn(m, k), torch.randn(k, n)
            check(f"mm {m}x{k}x{n}", torch.mm, a, b)
            check(f"A transposed {m}x{k}x{n}", lambda x, y: x.t() @ y, a.t().contiguous(), b)
            check(f"B transposed {m}x{k}x{n}", lambda x, y: x @ y.t(), a, b.t().contiguous())
            check(f"both transposed {m}x{k}x{n}", lambda x, y: x.t() @ y.t(), a.t().contiguous(),
                  b.t().contiguous())
            check(f"addmm {m}x{k}x{n}", lambda c, x, y: torch.addmm(c, x, y, beta=0.5, alpha=2.0),
                  torch.randn(n), a, b)
            check(f"addmm 2-d bias {m}x{k}x{n}", lambda c, x, y: torch.addmm(c, x, y, beta=-1.0),
                  torch.randn(m, n), a, b)
        check("bmm", torch.bmm, torch.randn(3, 45, 33), torch.randn(3, 33, 70))
        check("baddbmm", lambda c, x, y: torch.baddbmm(c, x, y, beta=2.0, alpha=0.5),
              torch.randn(3, 1, 70), torch.randn(3, 45, 33), torch.randn(3, 33, 70))
        check("broadcast batch", torch.matmul, torch.randn(4, 40, 36), torch.randn(36, 50))
        check("linear", torch.nn.functional.linear, torch.randn(2, 50, 40), torch.randn(90, 40), torch.randn(90))
        check("linear, one token", torch.nn.functional.linear, torch.randn(1, 1, 96), torch.randn(70, 96),
              torch.randn(70))
        check("mv", torch.mv, torch.randn(66, 40), torch.randn(40))
        check("addmv", lambda c, x, v: torch.addmv(c, x, v, beta=0.5, alpha=-2.0), torch.randn(66),
              torch.randn(66, 40), torch.randn(40))
        check("vector @ matrix", torch.matmul, torch.randn(40), torch.randn(40, 66))
        check("batched decode", torch.bmm, torch.randn(3, 2, 50), torch.randn(3, 50, 40))
        check("strided operands", lambda x, y: x[:, ::2] @ y[::2, 1:], torch.randn(70, 80), torch.randn(80, 67))
        check("row slice offsets", lambda x, y: x[5:, 3:] @ y[3:], torch.randn(75, 83), torch.randn(83, 64))
    ran = {e.name.split(": ")[1] for e in prof.events() if "library kernel: gemm" in e.name}
    assert set("KERNELS".split()) <= ran, ran

    # Written through the output's strides; beta == 0 ignores NaNs in the
    # added term, as BLAS does; an empty depth gives beta * X.
    a, b = torch.randn(96, 48), torch.randn(48, 80)
    out = torch.empty(80, 96, device=d).t()
    torch.mm(a.to(d), b.to(d), out=out)
    torch.testing.assert_close(out.cpu(), (a.double() @ b.double()).float(), rtol=2e-5, atol=2e-5)
    c = torch.full((96, 80), float("nan"))
    got = torch.addmm(c.to(d), a.to(d), b.to(d), beta=0.0).cpu()
    assert not got.isnan().any()
    x = torch.randn(40, 50)
    got = torch.addmm(x.to(d), torch.randn(40, 0).to(d), torch.randn(0, 50).to(d), beta=3.0).cpu()
    torch.testing.assert_close(got, 3.0 * x)
    """.replace("TILED", str(tiled == "1")).replace("KERNELS", kernels)
    run_python(code, env=dict(VULKAN, OPENNEURON_VULKAN_TILED_KERNELS=tiled), timeout=600)


def test_sixteen_bit_matmuls_match_cpu():
    # float16 and bfloat16 products run on the device (tiled or direct),
    # accumulating in float and rounding once, as the CPU's do: within one
    # rounding of the float64 product, never through the CPU fallback.
    run_python("""
    import torch
    import torch.nn.functional as F
    from torch.profiler import profile
    torch.manual_seed(0)
    d = "neuron"
    def check(name, f, *args):
        want = f(*[a.double() for a in args])
        got = f(*[a.to(d) for a in args])
        assert got.dtype == args[0].dtype, name
        tol = 8e-3 if got.dtype == torch.float16 else 6e-2  # about one rounding of the result
        torch.testing.assert_close(got.cpu().double(), want, rtol=tol, atol=tol * want.abs().max().item(), msg=name)
    with profile() as prof:
        for dt in (torch.float16, torch.bfloat16):
            for m, k, n in [(64, 32, 48), (130, 70, 129), (300, 257, 200), (3, 50, 7), (1, 768, 100)]:
                a, b = torch.randn(m, k).to(dt), torch.randn(k, n).to(dt)
                check(f"mm {dt} {m}x{k}x{n}", torch.mm, a, b)
                check(f"addmm {dt} {m}x{k}x{n}", lambda c, x, y: torch.addmm(c, x, y, beta=0.5, alpha=2.0),
                      torch.randn(n).to(dt), a, b)
            check(f"linear {dt}", F.linear, torch.randn(2, 50, 40).to(dt), torch.randn(90, 40).to(dt),
                  torch.randn(90).to(dt))
            check(f"bmm {dt}", torch.bmm, torch.randn(3, 45, 33).to(dt), torch.randn(3, 33, 70).to(dt))
    ran = {e.name.split(": ")[1] for e in prof.events() if "library kernel: gemm" in e.name}
    assert {"gemm_t128_f16", "gemm_f16", "gemm_t128_bf16", "gemm_bf16"} <= ran, ran
    assert torch.neuron.fallback_report() == []
    """, env=TILED, timeout=600)


def test_matrix_units_kernel_matches_cpu_emulated():
    # The float16 product on matrix units (gemm_coop_f16) is the kernel of a
    # GPU with cooperative matrices; lavapipe has none, so its emulation runs:
    # the same tiles, slices, loads along each operand's contiguous dim,
    # edges and epilogue, the matrix operations in plain arithmetic. Within
    # one float16 rounding of the float64 product, over the 128-tile and
    # 32-deep-slice edges, transposed and strided operands, batches, alpha,
    # beta and C's strides.
    run_python("""
    import torch
    import torch.nn.functional as F
    from torch.profiler import profile
    torch.manual_seed(0)
    d = "neuron"
    assert torch.neuron.get_device_properties(0).matrix_units == "emulated"
    def check(name, f, *args):
        want = f(*[a.double() for a in args])
        got = f(*[a.to(d) for a in args])
        assert got.dtype == torch.float16, name
        torch.testing.assert_close(got.cpu().double(), want, rtol=8e-3, atol=8e-3 * want.abs().max().item(),
                                   msg=name)
    h = lambda *shape: torch.randn(*shape).half()
    with profile() as prof:
        for m, k, n in [(9, 1, 9), (128, 32, 128), (129, 33, 127), (200, 100, 300), (40, 257, 140), (256, 64, 16)]:
            a, b = h(m, k), h(k, n)
            check(f"mm {m}x{k}x{n}", torch.mm, a, b)
            check(f"A transposed {m}x{k}x{n}", lambda x, y: x.t() @ y, a.t().contiguous(), b)
            check(f"B transposed {m}x{k}x{n}", lambda x, y: x @ y.t(), a, b.t().contiguous())
            check(f"both transposed {m}x{k}x{n}", lambda x, y: x.t() @ y.t(), a.t().contiguous(), b.t().contiguous())
            check(f"addmm {m}x{k}x{n}", lambda c, x, y: torch.addmm(c, x, y, beta=0.5, alpha=2.0), h(n), a, b)
        check("linear", F.linear, h(2, 50, 40), h(90, 40), h(90))
        check("bmm", torch.bmm, h(3, 45, 33), h(3, 33, 70))
        check("baddbmm", lambda c, x, y: torch.baddbmm(c, x, y, beta=-1.0), h(3, 45, 70), h(3, 45, 33), h(3, 33, 70))
        check("strided operands", lambda x, y: x[:, ::2] @ y[::2, 1:], h(70, 80), h(80, 67))
        out = torch.empty(80, 96, device=d, dtype=torch.float16).t()
        a, b = h(96, 48), h(48, 80)
        torch.mm(a.to(d), b.to(d), out=out)  # written through C's strides
        torch.testing.assert_close(out.cpu().double(), a.double() @ b.double(), rtol=8e-3, atol=8e-3 * 10)
    ran = {e.name.split(": ")[1] for e in prof.events() if "library kernel: gemm" in e.name}
    assert "gemm_coop_emulated_f16" in ran and "gemm_t128_f16" not in ran, ran
    assert torch.neuron.fallback_report() == []
    """, env=dict(TILED, OPENNEURON_VULKAN_MATRIX_UNITS="emulate"), timeout=600)


def test_tiled_training_step_matches_cpu():
    # Forward and backward of a small MLP: the backward's products read
    # transposed operands (x.t() @ grad, grad @ w) in place.
    run_python("""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(72, 160), torch.nn.GELU(), torch.nn.Linear(160, 40))
    x, y = torch.randn(96, 72), torch.randn(96, 40)
    device_model = __import__("copy").deepcopy(model).to("neuron")
    for m, inp, tgt in ((model, x, y), (device_model, x.to("neuron"), y.to("neuron"))):
        torch.nn.functional.mse_loss(m(inp), tgt).backward()
    for (name, p), q in zip(model.named_parameters(), device_model.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-5, msg=name)
    """, env=TILED, timeout=600)


def test_implicit_gemm_convolutions_match_cpu():
    # float32 conv2d and conv1d forwards run one conv2d_t* kernel that reads
    # the input's columns in place, their input gradients one
    # conv2d_dgrad_t* kernel and their weight gradients one conv2d_wgrad_t*
    # (when the per-image shares are smaller than the columns): strides (one
    # that skips input pixels too),
    # padding, dilation, rectangular kernels, 1x1, a bias or none,
    # channels-last input; groups and float64 take the im2col route. No
    # columns buffer (or its gradient): the peak is the result.
    run_python("""
    import torch
    import torch.nn.functional as F
    from torch.profiler import profile
    torch.manual_seed(0)
    d = "neuron"
    def check(name, f, x, w, b, **kw):
        # The forward, and the input's gradient for a random output gradient.
        xw, ww = x.double().clone().requires_grad_(), w.double().clone().requires_grad_()
        want = f(xw, ww, None if b is None else b.double(), **kw)
        xd, wd = x.to(d).requires_grad_(), w.to(d).requires_grad_()
        got = f(xd, wd, None if b is None else b.to(d), **kw)
        assert got.shape == want.shape, name
        torch.testing.assert_close(got.cpu(), want.to(got.dtype), rtol=3e-5, atol=3e-5, msg=name)
        g = torch.randn(want.shape)
        want.backward(g.double())
        got.backward(g.to(d))
        assert xd.grad.stride() == x.stride(), name
        torch.testing.assert_close(xd.grad.cpu(), xw.grad.to(x.dtype), rtol=1e-4, atol=1e-4, msg=name + " (grad)")
        scale = ww.grad.abs().max().item()  # a sum over every image's pixels
        torch.testing.assert_close(wd.grad.cpu(), ww.grad.to(w.dtype), rtol=1e-4, atol=1e-5 * scale,
                                   msg=name + " (weight grad)")
    with profile() as prof:
        for xs, ws, kw in [((2, 3, 17, 19), (8, 3, 3, 3), dict(stride=1, padding=1)),
                           ((2, 16, 32, 32), (70, 16, 3, 3), dict(stride=2, padding=1)),
                           ((1, 8, 20, 20), (16, 8, 5, 3), dict(stride=(2, 1), padding=(2, 0), dilation=(1, 2))),
                           ((4, 64, 14, 14), (130, 64, 1, 1), dict()),
                           ((2, 3, 40, 40), (64, 3, 7, 7), dict(stride=2, padding=3)),
                           ((1, 5, 9, 9), (17, 5, 9, 9), dict()),
                           ((2, 5, 11, 13), (40, 5, 3, 3), dict(stride=3))]:
            x, w = torch.randn(xs), torch.randn(ws)
            check(f"conv2d {xs} {ws} {kw}", F.conv2d, x, w, torch.randn(ws[0]), **kw)
            check(f"conv2d {xs} {ws} {kw}, no bias", F.conv2d, x, w, None, **kw)
        check("conv1d", F.conv1d, torch.randn(3, 4, 50), torch.randn(12, 4, 7), torch.randn(12), stride=2, padding=3)
        x = torch.randn(2, 8, 15, 15).to(memory_format=torch.channels_last)
        check("channels-last input", F.conv2d, x, torch.randn(16, 8, 3, 3), torch.randn(16), padding=1)
    ran = {e.name.split(": ")[1].rsplit("_t", 1)[0] for e in prof.events() if "library kernel: conv2d" in e.name}
    assert ran == {"conv2d", "conv2d_dgrad", "conv2d_wgrad"}, ran
    with profile() as prof:
        check("groups", F.conv2d, torch.randn(2, 8, 12, 12), torch.randn(16, 4, 3, 3), torch.randn(16), groups=2)
        check("float64", F.conv2d, torch.randn(2, 3, 12, 12).double(), torch.randn(8, 3, 3, 3).double(), None)
    assert not any("library kernel: conv2d" in e.name for e in prof.events())

    x, w = torch.randn(8, 32, 40, 40, device=d), torch.randn(32, 32, 3, 3, device=d)
    torch.neuron.synchronize()
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    y = F.conv2d(x, w, padding=1)
    torch.neuron.synchronize()
    assert torch.neuron.max_memory_allocated() - base <= y.nbytes + (1 << 20), "a columns buffer was written"
    x.requires_grad_()
    y = F.conv2d(x, w, padding=1)
    torch.neuron.synchronize()
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    gx, = torch.autograd.grad(y, x, torch.ones_like(y))
    torch.neuron.synchronize()
    assert torch.neuron.max_memory_allocated() - base <= 2 * gx.nbytes + (1 << 20), "a columns gradient was written"
    x.requires_grad_(False)
    w.requires_grad_()
    y = F.conv2d(x, w, padding=1)
    gy = torch.ones_like(y)
    torch.neuron.synchronize()
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    gw, = torch.autograd.grad(y, w, gy)
    torch.neuron.synchronize()
    peak = torch.neuron.max_memory_allocated() - base  # the 8 images' shares and their sum
    assert peak <= 9 * gw.nbytes + (1 << 20), f"the columns were written: {peak} bytes"
    """, env=TILED, timeout=600)


def test_fused_attention_forward_and_backward_match_cpu():
    # scaled_dot_product_attention takes the fused kernel (PyTorch's
    # "overrideable" backend) on the vulkan driver: odd lengths, every head
    # dim bucket, causal, float and bool masks (a row that sees no key gets
    # zeros, as PyTorch's safe softmax gives), 3-d inputs, strided layouts,
    # value dims unlike the query's; gradients of q, k, v and the mask.
    run_python("""
    import torch, torch.nn.functional as F
    from torch.profiler import profile
    torch.manual_seed(0)
    d = "neuron"
    def run(dev, dtype, q, k, v, mask=None, **kw):
        ts = [t.to(dev, dtype).requires_grad_() for t in (q, k, v)]
        m = None
        if mask is not None:
            m = mask.to(dev) if mask.dtype == torch.bool else mask.to(dev, dtype).requires_grad_()
        out = F.scaled_dot_product_attention(*ts, attn_mask=m, **kw)
        out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(dev, dtype))
        grads = [t.grad for t in ts] + ([m.grad] if m is not None and m.requires_grad else [])
        return [x.detach().cpu().float() for x in [out] + grads]
    def check(name, *args, **kw):
        for got, want in zip(run(d, torch.float32, *args, **kw), run("cpu", torch.float64, *args, **kw)):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=name)
    with profile() as prof:
        check("lengths", torch.randn(2, 3, 70, 32), torch.randn(2, 3, 50, 32), torch.randn(2, 3, 50, 32))
        check("causal", torch.randn(2, 3, 70, 64), torch.randn(2, 3, 70, 64), torch.randn(2, 3, 70, 64),
              is_causal=True)
        check("float mask", torch.randn(1, 2, 33, 16), torch.randn(1, 2, 40, 16), torch.randn(1, 2, 40, 16),
              mask=torch.randn(33, 40))
        hidden = torch.rand(2, 1, 33, 40) > 0.3
        hidden[0, 0, 5] = False
        check("bool mask", torch.randn(2, 2, 33, 16), torch.randn(2, 2, 40, 16), torch.randn(2, 2, 40, 16),
              mask=hidden)
        check("3-d, value dim", torch.randn(3, 20, 100), torch.randn(3, 30, 100), torch.randn(3, 30, 72), scale=0.3)
        t = lambda: torch.randn(2, 70, 3, 32).transpose(1, 2)
        check("strided", t(), t(), t(), is_causal=True)
    ran = {e.name for e in prof.events()}
    assert {"aten::_scaled_dot_product_fused_attention_overrideable",
            "aten::_scaled_dot_product_fused_attention_overrideable_backward",
            "library kernel: attention_fwd_d32_f32", "library kernel: attention_fwd_d64_f32",
            "library kernel: attention_fwd_d128_f32"} <= ran, ran
    # What the kernel does not cover takes the math path, right: dropout,
    # grouped-query heads, head dims past 128.
    q = torch.randn(1, 4, 9, 16)
    with profile() as prof:
        torch.manual_seed(1)
        F.scaled_dot_product_attention(q.to(d), q.to(d), q.to(d), dropout_p=0.5)
        out = F.scaled_dot_product_attention(q.to(d), q[:, :2].to(d), q[:, :2].to(d), enable_gqa=True)
        torch.testing.assert_close(out.cpu(), F.scaled_dot_product_attention(q, q[:, :2], q[:, :2], enable_gqa=True))
        big = torch.randn(1, 1, 5, 130)
        torch.testing.assert_close(F.scaled_dot_product_attention(big.to(d), big.to(d), big.to(d)).cpu(),
                                   F.scaled_dot_product_attention(big, big, big))
    assert "aten::_scaled_dot_product_fused_attention_overrideable" not in {e.name for e in prof.events()}
    """, env=VULKAN, timeout=600)

"""Eager ops beyond the compiler's IR on the protected driver (issue 27):
indexing, losses, scans, arg-reductions, ramps and copies run as kernels of
the device's kernel library, convolution and attention from device kernels,
other ops as PyTorch's decompositions on the device; all match CPU with no
CPU fallback, and an index out of range raises at the call with the CPU's
message. Each test runs in a fresh interpreter."""
from conftest import run_python

NATIVE = {"OPENNEURON_DRIVER": "protected", "OPENNEURON_CPU_FALLBACK": "error"}
VULKAN_NATIVE = {"OPENNEURON_DRIVER": "vulkan", "OPENNEURON_CPU_FALLBACK": "error",
                 "OPENNEURON_VULKAN_VALIDATION": "1"}


def run_on_every_driver(code):
    """`code` on host, then on protected and vulkan with no CPU fallback allowed."""
    for env in ({}, NATIVE, VULKAN_NATIVE):
        run_python(code, env=env)


def test_indexing_losses_scans_match_cpu(tmp_path):
    run_python("""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    d = "neuron"
    W, idx = torch.randn(50, 8), torch.randint(0, 50, (4, 6))
    x, gi, src = torch.randn(5, 7), torch.randint(0, 7, (5, 4)), torch.randn(5, 4)
    logits, tgt = torch.randn(6, 10), torch.randint(0, 10, (6,))
    tgt[2] = -100
    def same(name, a, b):
        torch.testing.assert_close(a.cpu(), b, msg=name)
    same("embedding", F.embedding(idx.to(d), W.to(d)), F.embedding(idx, W))
    w1, w2 = W.clone().requires_grad_(), W.to(d).requires_grad_()
    F.embedding(idx, w1, padding_idx=3).sum().backward()
    F.embedding(idx.to(d), w2, padding_idx=3).sum().backward()
    same("embedding backward", w2.grad, w1.grad)
    same("index_select", torch.index_select(x.t().to(d), 0, torch.tensor([0, 6, 2]).to(d)),
         torch.index_select(x.t(), 0, torch.tensor([0, 6, 2])))
    same("gather", torch.gather(x.to(d), 1, gi.to(d)), torch.gather(x, 1, gi))
    same("scatter", torch.zeros(5, 7).to(d).scatter(1, gi.to(d), src.to(d)), torch.zeros(5, 7).scatter(1, gi, src))
    same("scatter_add", torch.zeros(5, 7).to(d).scatter_add(1, gi.to(d), src.to(d)),
         torch.zeros(5, 7).scatter_add(1, gi, src))
    for reduction in ("mean", "sum", "none"):
        l1, l2 = logits.clone().requires_grad_(), logits.to(d).requires_grad_()
        a = F.cross_entropy(l1, tgt, reduction=reduction)
        b = F.cross_entropy(l2, tgt.to(d), reduction=reduction)
        same("cross_entropy " + reduction, b, a)
        a.sum().backward(); b.sum().backward()
        same("cross_entropy backward " + reduction, l2.grad, l1.grad)
    same("cumsum", x.to(d).cumsum(1), x.cumsum(1))
    same("cumsum int32", torch.arange(10, dtype=torch.int32).to(d).cumsum(0), torch.arange(10, dtype=torch.int32).cumsum(0))
    same("argmax", x.to(d).argmax(1), x.argmax(1))
    v, i = x.to(d).max(0, keepdim=True)
    same("max.dim", v, x.max(0, keepdim=True)[0]); same("max.dim indices", i, x.max(0, keepdim=True)[1])
    same("arange", torch.arange(3, 40, 3, device=d), torch.arange(3, 40, 3))
    same("linspace", torch.linspace(-1, 3, 7, device=d), torch.linspace(-1, 3, 7))
    same("stack", torch.stack([x.to(d), x.to(d) * 2], 1), torch.stack([x, x * 2], 1))
    same("pad", F.pad(x.to(d), (1, 2, -1, 3), value=0.5), F.pad(x, (1, 2, -1, 3), value=0.5))
    same("flip", x.to(d).flip(0, 1), x.flip(0, 1))
    same("roll", x.to(d).roll((2, -1), (0, 1)), x.roll((2, -1), (0, 1)))
    same("repeat", x.to(d).repeat(2, 1, 3), x.repeat(2, 1, 3))
    same("var", x.to(d).var(1, correction=0), x.var(1, correction=0))
    same("std", x.to(d).std(), x.std())
    same("logsumexp", x.to(d).logsumexp(1), x.logsumexp(1))
    same("silu", F.silu(x.to(d)), F.silu(x))
    same("dot", torch.dot(x[0].to(d), x[1].to(d)), torch.dot(x[0], x[1]))
    same("mv", torch.mv(x.to(d), x[0].to(d)), torch.mv(x, x[0]))
    errors = {
        "index out of range in self": lambda: F.embedding(torch.tensor([0, 99]).to(d), W.to(d)),
        "index 9 is out of bounds for dimension 1 with size 7": lambda: torch.gather(x.to(d), 1, torch.tensor([[9]]).to(d)),
        "Target 12 is out of bounds.": lambda: F.nll_loss(logits.to(d), torch.full((6,), 12).to(d)),
    }
    for message, call in errors.items():
        try:
            call()
        except IndexError as e:
            assert message in str(e), (message, str(e))
        else:
            raise AssertionError("no error: " + message)
    assert torch.neuron.fallback_report() == [], torch.neuron.fallback_report()
    """, env=NATIVE | {"OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path)})


def test_convolution_and_attention_train_without_fallback(tmp_path):
    run_python("""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, groups=1)
    gconv = torch.nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=4)
    x = torch.randn(2, 3, 9, 9)
    def step(device):
        c, g = conv.to(device), gconv.to(device)
        xi = x.detach().clone().to(device).requires_grad_()
        y = g(F.relu(c(xi)))
        q = y.flatten(2).transpose(1, 2)            # [2, 25, 8] as a sequence
        a = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        a.square().sum().backward()
        return a.cpu(), xi.grad.cpu(), c.weight.grad.cpu(), g.bias.grad.cpu()
    ref = step("cpu")
    conv.zero_grad(); gconv.zero_grad()
    got = step("neuron")
    for r, g in zip(ref, got):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4)
    assert torch.neuron.fallback_report() == [], torch.neuron.fallback_report()
    """, env=NATIVE | {"OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path)})


def test_ops_without_kernels_run_as_decompositions(tmp_path):
    run_python("""
    import torch
    torch.manual_seed(0)
    x = torch.randn(6, 5)
    torch.neuron.reset_eager_kernel_report()
    # ops with no kernel of their own but a PyTorch decomposition
    for name, f in {"addcmul_": lambda t: t.clone().addcmul_(t, t, value=0.5),
                    "diag_embed": lambda t: torch.diag_embed(t),
                    "tril": lambda t: torch.tril(t, -1)}.items():
        torch.testing.assert_close(f(x.to("neuron")).cpu(), f(x), msg=name)
    assert torch.neuron.fallback_report() == [], torch.neuron.fallback_report()
    """, env=NATIVE | {"OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path)})


def test_grouped_mm_runs_per_group_on_the_device():
    """torch._grouped_mm (MoE experts in transformers) in its four forms,
    forward and backward, with an empty group, as the CPU computes it, no
    CPU fallback; on every driver (vulkan too: products of slices)."""
    code = """
    import torch
    torch.manual_seed(0)
    d = "neuron"
    offs = torch.tensor([3, 3, 8, 12], dtype=torch.int32)  # group 1 is empty
    # (row strides of 16-byte multiples, as ATen requires)
    cases = [(torch.randn(12, 8), torch.randn(4, 8, 4)),            # 2d x 3d: rows per group
             (torch.randn(4, 4, 8), torch.randn(8, 12)),            # 3d x 2d: columns per group
             (torch.randn(8, 12), torch.randn(12, 4)),              # 2d x 2d: contraction per group
             (torch.randn(4, 4, 8), torch.randn(4, 8, 12))]         # 3d x 3d: bmm, no offs
    for i, (a, b) in enumerate(cases):
        o = None if i == 3 else offs
        a1, b1 = a.clone().requires_grad_(), b.clone().requires_grad_()
        a2, b2 = a.to(d).requires_grad_(), b.to(d).requires_grad_()
        r1 = torch._grouped_mm(a1, b1, o)
        r2 = torch._grouped_mm(a2, b2, None if o is None else o.to(d))
        valid = (slice(None), slice(0, 12)) if i == 1 else slice(0, 12)
        torch.testing.assert_close(r2.cpu()[valid], r1[valid], msg=f"case {i}")
        g = torch.randn(r1.shape)
        (r1[valid] * g[valid]).sum().backward()
        (r2[valid] * g[valid].to(d)).sum().backward()
        torch.testing.assert_close(a2.grad.cpu(), a1.grad, msg=f"case {i} grad a")
        torch.testing.assert_close(b2.grad.cpu(), b1.grad, msg=f"case {i} grad b")
    try:
        torch._grouped_mm(cases[0][0].to(d), cases[0][1].to(d), torch.tensor([3, 2, 8, 12], dtype=torch.int32).to(d))
    except RuntimeError as e:
        assert "offs must be non-decreasing" in str(e), e
    else:
        raise AssertionError("decreasing offs accepted")
    assert not torch.neuron.fallback_report(), torch.neuron.fallback_report()
    """
    run_on_every_driver(code)


def test_tensor_constants_of_compiled_code_are_lifted_on_the_device():
    """torch.tensor(...) inside a compiled function is lifted with
    lift_fresh_copy: a device copy, not the CPU fallback."""
    run_python("""
    import torch
    @torch.compile(backend="neuron")
    def f(x):
        return x * torch.tensor([1.0, 2.0, 3.0], device=x.device) + torch.tensor(0.5, device=x.device)
    x = torch.randn(4, 3)
    assert torch.equal(f(x.to("neuron")).cpu(), x * torch.tensor([1.0, 2.0, 3.0]) + 0.5)
    assert not torch.neuron.fallback_report(), torch.neuron.fallback_report()
    """, env=NATIVE)


def test_grad_scaler_steps_on_the_device():
    """torch.amp.GradScaler's unscale_ and update on the device, as on the
    CPU: a step with an inf or a NaN gradient is skipped and backs the
    scale off, finite steps grow it every growth_interval, bfloat16 and
    float32 gradients are unscaled; no CPU fallback."""
    code = """
    import torch
    torch.manual_seed(0)
    def run(device):
        ps = [torch.nn.Parameter(torch.ones(5, device=device)),
              torch.nn.Parameter(torch.ones(3, 4, device=device, dtype=torch.bfloat16))]
        opt = torch.optim.SGD(ps, lr=0.1)
        scaler = torch.amp.GradScaler(device, init_scale=1024.0, growth_interval=2)
        seen = []
        for step, bad in enumerate([None, None, float("inf"), None, float("nan"), None, None]):
            g = torch.Generator().manual_seed(step)
            ps[0].grad = (torch.randn(5, generator=g) * 1024).to(device)
            ps[1].grad = (torch.randn(3, 4, generator=g) * 1024).bfloat16().to(device)
            if bad is not None:
                ps[1].grad[1, 2] = bad
            scaler.scale(torch.ones((), device=device))  # (sets up the scale, as scaling a loss does)
            scaler.unscale_(opt)
            grads = [p.grad.detach().cpu().clone() for p in ps]
            scaler.step(opt)
            scaler.update()
            seen.append((scaler.get_scale(), grads, [p.detach().cpu().clone() for p in ps]))
        return seen
    for (s1, g1, p1), (s2, g2, p2) in zip(run("cpu"), run("neuron")):
        assert s1 == s2, (s1, s2)
        for a, b in zip(g1 + p1, g2 + p2):
            torch.testing.assert_close(b, a, equal_nan=True)
    assert not torch.neuron.fallback_report(), torch.neuron.fallback_report()
    """
    run_on_every_driver(code)


def test_transposed_convolutions_and_shape_errors_on_the_device():
    """conv_transpose1d/2d/3d (strides, padding, output_padding, groups,
    dilation, bias) forward and backward as the adjoint of the device's
    convolution, channels-last kept; wrong channel counts, bias sizes and
    kernels larger than the input raise ATen's own messages, not an error
    from inside the kernels."""
    code = """
    import torch, torch.nn.functional as F
    torch.manual_seed(0)
    d = "neuron"
    # (dims, N, C_in, C_out, groups, size, kernel, stride, padding, output_padding, dilation)
    for dims, n, ci, co, g, size, k, s, p, op, dl in [
            (2, 2, 4, 6, 1, 7, 3, 2, 1, 1, 1), (2, 1, 4, 4, 2, 5, 3, 1, 0, 0, 1), (2, 2, 3, 5, 1, 6, 4, 3, 2, 2, 1),
            (2, 2, 2, 3, 1, 5, 3, 2, 1, 0, 2), (1, 3, 4, 2, 1, 9, 5, 2, 2, 1, 1), (3, 1, 2, 3, 1, 4, 3, 2, 1, 1, 1),
            (2, 2, 2, 4, 2, 4, 4, 3, 1, 2, 4),  # output_padding above the padding (allowed below the dilation)
            (1, 2, 2, 2, 1, 4, 3, 2, 0, 1, 3)]:
        f = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[dims]
        x = torch.randn(n, ci, *([size] * dims), requires_grad=True)
        w = torch.randn(ci, co // g, *([k] * dims), requires_grad=True)
        b = torch.randn(co, requires_grad=True)
        kw = dict(stride=s, padding=p, output_padding=op, groups=g, dilation=dl)
        y = f(x, w, b, **kw)
        xd, wd, bd = (t.detach().to(d).requires_grad_() for t in (x, w, b))
        yd = f(xd, wd, bd, **kw)
        gy = torch.randn(y.shape)
        y.backward(gy)
        yd.backward(gy.to(d))
        for name, got, ref in (("out", yd, y), ("grad input", xd.grad, x.grad), ("grad weight", wd.grad, w.grad),
                               ("grad bias", bd.grad, b.grad)):
            torch.testing.assert_close(got.detach().cpu(), ref.detach(), atol=1e-4, rtol=1e-4, msg=f"{dims}d {name}")
    xc = torch.randn(1, 4, 8, 8).to(memory_format=torch.channels_last)
    assert F.conv_transpose2d(xc.to(d), torch.randn(4, 2, 3, 3).to(d)).is_contiguous(memory_format=torch.channels_last)
    assert not torch.neuron.fallback_report(), torch.neuron.fallback_report()
    for f, args in ((F.conv_transpose2d, (torch.randn(1, 3, 5, 5), torch.randn(4, 2, 3, 3))),
                    (F.conv2d, (torch.randn(1, 3, 5, 5), torch.randn(2, 4, 3, 3))),
                    (F.conv2d, (torch.randn(1, 4, 2, 2), torch.randn(2, 4, 3, 3))),
                    (F.conv2d, (torch.randn(1, 4, 5, 5), torch.randn(2, 4, 3, 3), torch.randn(3)))):
        messages = []
        for device in ("cpu", d):
            try:
                f(*[a.to(device) for a in args])
            except RuntimeError as e:
                messages.append(str(e))
        assert len(messages) == 2 and messages[0] == messages[1], messages
    """
    for env in (NATIVE, VULKAN_NATIVE):
        run_python(code, env=env)


def test_sixteen_bit_products_and_autocast_training_on_the_device():
    """float16 and bfloat16 mm, addmm, bmm and transposed operands on the
    protected driver's gemm: float accumulation and one rounding, as CUDA
    computes them; a float16 autocast training step with GradScaler runs
    with no CPU fallback."""
    run_python("""
    import torch
    torch.manual_seed(0)
    d = "neuron"
    for dt in (torch.float16, torch.bfloat16):
        a, b, x = torch.randn(37, 70).to(dt), torch.randn(50, 70).to(dt), torch.randn(37, 50).to(dt)
        A, B = torch.randn(3, 9, 17).to(dt), torch.randn(3, 17, 5).to(dt)
        for name, got, ref in (
                ("mm", a.to(d) @ b.to(d).t(), a.float() @ b.float().t()),
                ("addmm", torch.addmm(x.to(d), a.to(d), b.to(d).t(), beta=0.5, alpha=2),
                 torch.addmm(x.float(), a.float(), b.float().t(), beta=0.5, alpha=2)),
                ("bmm", torch.bmm(A.to(d), B.to(d)), torch.bmm(A.float(), B.float()))):
            assert got.dtype == dt, (name, got.dtype)
            assert torch.equal(got.cpu(), ref.to(dt)), (name, dt, (got.cpu().float() - ref.to(dt).float()).abs().max())
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 4)).to(d)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(d)
    for _ in range(2):
        with torch.autocast(d, dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(torch.randn(16, 32).to(d)), torch.randint(0, 4, (16,)).to(d))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    assert torch.isfinite(loss).item()
    assert not torch.neuron.fallback_report(), torch.neuron.fallback_report()
    """, env=NATIVE, timeout=300)  # (cold: the float16 kernels of a training step build)


def test_unique_bincount_and_masked_scatter_on_the_device():
    """torch.unique (flat, along a dim, inverse and counts), unique_consecutive,
    bincount (with and without weights: the CPU's result dtypes) and
    masked_scatter (in place and broadcast) as the CPU computes them, with
    no CPU fallback; their wrong calls raise the CPU's errors."""
    code = """
    import torch
    torch.manual_seed(0)
    def same(a, b):
        a, b = (a,) if torch.is_tensor(a) else a, (b,) if torch.is_tensor(b) else b
        for x, y in zip(a, b):
            assert y.device.type == "neuron" and x.dtype == y.dtype and x.shape == y.shape, (x, y)
            assert x.stride() == y.stride() or x.numel() <= 1, (x.stride(), y.stride())
            torch.testing.assert_close(y.cpu(), x, rtol=0, atol=0, equal_nan=True)
    x = torch.randint(-3, 4, (7, 5))
    f = torch.tensor([2.0, float("nan"), -1.0, 2.0, float("nan"), 0.5])
    for t in (x, f, x.bool(), torch.empty(0, 3, dtype=torch.long)):
        same(torch.unique(t, return_inverse=True, return_counts=True),
             torch.unique(t.to("neuron"), return_inverse=True, return_counts=True))
        same(torch.unique_consecutive(t, return_inverse=True, return_counts=True),
             torch.unique_consecutive(t.to("neuron"), return_inverse=True, return_counts=True))
    big = torch.randint(0, 1000, (40000,))  # a stable sort of a long integer line
    same(torch.unique(big, return_inverse=True, return_counts=True),
         torch.unique(big.to("neuron"), return_inverse=True, return_counts=True))
    rows = torch.randint(0, 2, (9, 3, 2))
    for dim in (0, 1, -1):
        same(torch.unique(rows, dim=dim, return_inverse=True, return_counts=True),
             torch.unique(rows.to("neuron"), dim=dim, return_inverse=True, return_counts=True))
        same(torch.unique_consecutive(rows, dim=dim, return_counts=True),
             torch.unique_consecutive(rows.to("neuron"), dim=dim, return_counts=True))
    counts = torch.randint(0, 9, (50,), dtype=torch.int32)
    for w in (None, torch.rand(50), torch.rand(50, dtype=torch.float64), torch.randint(0, 5, (50,))):
        for minlength in (0, 20):
            got = torch.bincount(counts.to("neuron"), None if w is None else w.to("neuron"), minlength)
            want = torch.bincount(counts, w, minlength)
            assert got.dtype == want.dtype and got.shape == want.shape
            torch.testing.assert_close(got.cpu(), want)
    same(torch.bincount(torch.empty(0, dtype=torch.long), minlength=3),
         torch.bincount(torch.empty(0, dtype=torch.long, device="neuron"), minlength=3))
    base, source = torch.randn(4, 6), torch.randn(30)
    mask = torch.rand(4, 6) > 0.5
    same(base.masked_scatter(mask, source), base.to("neuron").masked_scatter(mask.to("neuron"), source.to("neuron")))
    row_mask = torch.rand(6) > 0.3  # broadcast over the rows, in place
    target = base.to("neuron")
    target.masked_scatter_(row_mask.to("neuron"), source.to("neuron"))
    same(base.clone().masked_scatter_(row_mask, source), target)
    narrow = base.t()  # a strided self
    same(narrow.masked_scatter(mask.t(), source), narrow.to("neuron").masked_scatter(mask.t().to("neuron"), source.to("neuron")))
    for bad, message in [
        (lambda d: torch.bincount(torch.tensor([1, -1], device=d)), "non-negative"),
        (lambda d: torch.zeros(3, device=d).masked_scatter(torch.ones(3, dtype=torch.bool, device=d), torch.ones(2, device=d)),
         "Number of elements of source < number of ones in mask"),
        (lambda d: torch.zeros(3, device=d).masked_scatter(torch.ones(3, dtype=torch.bool, device=d), torch.ones(0, device=d)),
         "Number of elements of source < number of ones in mask"),
    ]:
        for d in ("cpu", "neuron"):
            try:
                bad(d)
            except RuntimeError as e:
                assert message in str(e), (d, e)
            else:
                raise AssertionError(f"no error on {d}: {message}")
    assert torch.ones(2, device="neuron").sum().item() == 2  # still usable
    """
    run_on_every_driver(code)


def test_embedding_bag_trains_on_the_device():
    """nn.EmbeddingBag's op and its backward (sum with per-sample weights,
    mean, max; padding_idx, include_last_offset, 2-D input, empty bags,
    16-bit weights) as the CPU computes them, with no CPU fallback. Its
    scale_grad_by_freq gradient is the documented one (each row's gradient
    divided by its index's count, as F.embedding and CUDA compute it); the
    CPU's embedding_bag kernel divides by another index's count (pytorch
    issue 190063) and is not the reference there (host runs that kernel)."""
    code = """
    import itertools, torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 4])
    offsets = torch.tensor([0, 4, 4, 7])
    for mode, pad, dtype, weighted, last in itertools.product(
            ("sum", "mean", "max"), (None, 4), (torch.float32, torch.bfloat16), (False, True),
            (False, True)):
        if weighted and mode != "sum":
            continue
        w = torch.randn(10, 3, dtype=dtype, requires_grad=True)
        psw = torch.rand(10, dtype=dtype, requires_grad=True) if weighted else None
        o = torch.cat([offsets, torch.tensor([10])]) if last else offsets
        w_n = w.detach().to("neuron").requires_grad_()
        psw_n = psw.detach().to("neuron").requires_grad_() if weighted else None
        out = F.embedding_bag(idx, w, o, mode=mode, padding_idx=pad, per_sample_weights=psw, include_last_offset=last)
        out_n = F.embedding_bag(idx.to("neuron"), w_n, o.to("neuron"), mode=mode, padding_idx=pad,
                                per_sample_weights=psw_n, include_last_offset=last)
        g = torch.randn_like(out)
        out.backward(g)
        out_n.backward(g.to("neuron"))
        tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
        torch.testing.assert_close(out_n.cpu(), out, **tol)
        torch.testing.assert_close(w_n.grad.cpu(), w.grad, **tol)
        if weighted:
            torch.testing.assert_close(psw_n.grad.cpu(), psw.grad, **tol)
    # scale_grad_by_freq: against the definition (host runs the CPU's kernel, bug included)
    host = torch.neuron.get_device_properties(0).driver == "host"
    w = torch.randn(10, 3, dtype=torch.float64)
    w_n = w.to("neuron").requires_grad_()
    out_n = F.embedding_bag(idx.to("neuron"), w_n, offsets.to("neuron"), mode="mean", scale_grad_by_freq=True)
    g = torch.randn(4, 3, dtype=torch.float64)
    out_n.backward(g.to("neuron"))
    bag = torch.tensor([0, 0, 0, 0, 2, 2, 2, 3, 3, 3])
    size = torch.bincount(bag, minlength=4).clamp_min(1).double()
    count = torch.bincount(idx, minlength=10).double()
    expected = torch.zeros(10, 3, dtype=torch.float64).index_add_(0, idx, (g / size[:, None])[bag] / count[idx, None])
    if not host:
        torch.testing.assert_close(w_n.grad.cpu(), expected)
    # 2-D input, eval (the forward-only op), max
    w, x = torch.randn(20, 4), torch.randint(0, 20, (5, 3))
    with torch.no_grad():
        torch.testing.assert_close(F.embedding_bag(x.to("neuron"), w.to("neuron"), mode="max").cpu(),
                                   F.embedding_bag(x, w, mode="max"))
    for bad, message in [
        (lambda d: F.embedding_bag(torch.tensor([1, 12], device=d), torch.randn(10, 3, device=d), torch.tensor([0], device=d)),
         "Index 1 of input takes value 12 which is not in the valid range [0, 10)"),
        (lambda d: F.embedding_bag(torch.tensor([1, 2], device=d), torch.randn(10, 3, device=d), torch.tensor([1], device=d)),
         "offsets[0] has to be 0"),
    ]:
        for d in ("cpu", "neuron"):
            try:
                bad(d)
            except (RuntimeError, IndexError) as e:
                assert message in str(e), (d, e)
            else:
                raise AssertionError(f"no error on {d}: {message}")
    assert torch.ones(2, device="neuron").sum().item() == 2
    """
    run_on_every_driver(code)


def test_ranges_and_resampling_match_cpu():
    """arange of floats runs on the device (start + i * step rounded once,
    within an ulp of the CPU's lanes), integer arange truncates fractional
    bounds and steps as the CPU does; interpolate in 16-bit and uint8
    matches the CPU's kernels (their decompositions computed in the input's
    dtype and were off by several ulps; 16-bit bilinear now computes in
    float32 on the device, within one rounding of the CPU's)."""
    ranges = """
    import torch
    for args in [(20.0,), (0.0, 1.0, 0.1), (-3.5, 7.25, 0.75), (1e6, 1e6 + 50, 0.5)]:
        got = torch.arange(*args, device="neuron")
        torch.testing.assert_close(got.cpu(), torch.arange(*args), rtol=2e-7, atol=0)
    for dtype in (torch.int64, torch.int32, torch.uint8):
        for args in [(-0.9, 2.1, 2.0), (2.1, -2.9, -1.0), (0.5, 9.7, 1.5)]:
            assert torch.equal(torch.arange(*args, dtype=dtype, device="neuron").cpu(), torch.arange(*args, dtype=dtype))
    """
    run_on_every_driver(ranges)
    resampling = """
    import torch
    import torch.nn.functional as F
    x = torch.randn(2, 3, 4, 5)
    for dtype in (torch.bfloat16, torch.float16):
        for mode in ("bilinear", "bicubic"):
            y = x.to(dtype)
            want = F.interpolate(y, size=(5, 6), mode=mode, align_corners=True)
            got = F.interpolate(y.to("neuron"), size=(5, 6), mode=mode, align_corners=True)
            # bilinear on the device computes in float32 and rounds once, as the
            # CPU's 16-bit kernel: within one rounding of it (0.01-0.09 % of elements)
            tol = torch.finfo(dtype).eps if mode == "bilinear" else 0
            torch.testing.assert_close(got.cpu(), want, atol=0, rtol=tol, msg=f"{dtype} {mode}")
    img = torch.randint(0, 256, (1, 3, 20, 20), dtype=torch.uint8)
    assert torch.equal(F.interpolate(img.to("neuron"), size=(13, 13), mode="bilinear").cpu(),
                       F.interpolate(img, size=(13, 13), mode="bilinear"))
    assert torch.equal(F.interpolate(x.to("neuron"), scale_factor=2, mode="nearest").cpu(),
                       F.interpolate(x, scale_factor=2, mode="nearest"))
    """
    for env in (NATIVE, VULKAN_NATIVE):  # 16-bit and uint8 resampling take the CPU fallback
        run_python(resampling, env={**env, "OPENNEURON_CPU_FALLBACK": "silent"})


def test_scatter_reductions_and_index_add_on_the_device():
    """scatter_reduce (sum, prod, mean, amax, amin; with and without self),
    index_add (with alpha; MoE token combining), index_reduce, functional,
    in place and out=, as the CPU computes them (bitwise: each line reduced
    in index order), NaN winning amax/amin, with no CPU fallback; an index
    out of range raises the CPU's error and the process goes on."""
    code = """
    import itertools, torch
    torch.manual_seed(0)
    def same(want, got):
        assert got.device.type == "neuron" and got.dtype == want.dtype and got.shape == want.shape, (want, got)
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True)
    n = lambda t: t.to("neuron")
    for dtype in (torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8):
        make = (lambda *s: torch.randn(*s, dtype=dtype)) if dtype.is_floating_point else \\
               (lambda *s: torch.randint(1, 5, s, dtype=dtype))
        self, src = make(5, 4), make(7, 4)
        if dtype.is_floating_point:
            src[2, 1] = float("nan")
        # index smaller than src (and than self outside dim), as scatter allows
        cases = {0: (torch.randint(0, 5, (6, 3)), src), 1: (torch.randint(0, 4, (5, 3)), make(5, 6))}
        for reduce, include_self, dim in itertools.product(("sum", "prod", "mean", "amax", "amin"), (True, False), (0, 1)):
            idx, s = cases[dim]
            want = self.scatter_reduce(dim, idx, s, reduce, include_self=include_self)
            same(want, n(self).scatter_reduce(dim, n(idx), n(s), reduce, include_self=include_self))
            inplace = n(self)
            inplace.scatter_reduce_(dim, n(idx), n(s), reduce, include_self=include_self)
            same(want, inplace)
        ix = torch.tensor([3, 0, 3, 1, 4, 3, 0])
        for dim, alpha in ((0, 1), (0, 2), (1, 1)):
            source = make(7, 4) if dim == 0 else make(5, 7)
            same(self.index_add(dim, ix if dim == 0 else ix.clamp(max=3), source, alpha=alpha),
                 n(self).index_add(dim, n(ix if dim == 0 else ix.clamp(max=3)), n(source), alpha=alpha))
        out = torch.empty(0, dtype=dtype, device="neuron")
        torch.index_add(n(self), 0, n(ix.int()), n(make(7, 4)), out=out)  # int32 index, out=
        assert out.shape == (5, 4)
        for reduce, include_self in itertools.product(("prod", "mean", "amax", "amin"), (True, False)):
            source = make(7, 4)
            same(self.index_reduce(0, ix, source, reduce, include_self=include_self),
                 n(self).index_reduce(0, n(ix), n(source), reduce, include_self=include_self))
    # MoE-style combine: expert outputs added back at their tokens' rows
    hidden, routed = torch.randn(16, 8), torch.randint(0, 16, (24,))
    expert_out = torch.randn(24, 8)
    same(torch.zeros(16, 8).index_add_(0, routed, expert_out), torch.zeros(16, 8, device="neuron").index_add_(0, n(routed), n(expert_out)))
    # scalars and an empty index
    same(torch.tensor(2.0).index_add(0, torch.tensor([0]), torch.tensor(3.0)),
         n(torch.tensor(2.0)).index_add(0, n(torch.tensor([0])), n(torch.tensor(3.0))))
    same(torch.ones(3).scatter_reduce(0, torch.empty(0, dtype=torch.long), torch.ones(0), "amax"),
         n(torch.ones(3)).scatter_reduce(0, n(torch.empty(0, dtype=torch.long)), n(torch.ones(0)), "amax"))
    for bad in (lambda d: torch.zeros(3, device=d).index_add_(0, torch.tensor([0, 3], device=d), torch.ones(2, device=d)),
                lambda d: torch.zeros(3, device=d).index_reduce_(0, torch.tensor([5], device=d), torch.ones(1, device=d), "amax")):
        for d in ("cpu", "neuron"):
            try:
                bad(d)
            except IndexError as e:
                assert "index out of range in self" in str(e) or "out of bounds" in str(e), (d, e)
            else:
                raise AssertionError(f"no error on {d}")
    assert torch.ones(2, device="neuron").sum().item() == 2  # still usable
    assert torch.neuron.fallback_report() == [], torch.neuron.fallback_report()
    """
    run_on_every_driver(code)


def test_cpu_zero_dim_tensors_are_scalars_on_the_device():
    """A 0-dim CPU tensor beside neuron tensors (DeBERTa's `scores /
    torch.tensor(d).sqrt()`, `torch.where(m, x, torch.tensor(0.))`) is a
    scalar to the op, as on CUDA: device kernels, with the dtype a 0-dim
    tensor promotes to (not a Python number's: int32 * float64 0-dim is
    float64), in place and out= too; no CPU fallback."""
    code = """
    import torch
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    i = torch.arange(12, dtype=torch.int32).view(3, 4)
    calls = [
        lambda x, i: x / torch.tensor(2.0),
        lambda x, i: x + torch.tensor(2.0, dtype=torch.float64),
        lambda x, i: i * torch.tensor(2.5, dtype=torch.float64),
        lambda x, i: i + torch.tensor(3),
        lambda x, i: i / torch.tensor(2),
        lambda x, i: torch.where(x > 0, x, torch.tensor(0.0)),
        lambda x, i: torch.maximum(x, torch.tensor(0.5)),
        lambda x, i: x.pow(torch.tensor(2.0)),
        lambda x, i: x.clone().add_(torch.tensor(1.0)),
        lambda x, i: torch.mul(x, torch.tensor(3.0), out=torch.empty_like(x)),
    ]
    for k, f in enumerate(calls):
        want, got = f(x, i), f(x.to("neuron"), i.to("neuron"))
        assert got.device.type == "neuron" and got.dtype == want.dtype, (want.dtype, got.dtype)
        # pow by a tensor exponent is a general pow on both sides (not x * x):
        # the device's and the CPU's round one ulp apart in a few per cent.
        exact = k != 7
        torch.testing.assert_close(got.cpu(), want, rtol=0 if exact else None, atol=0 if exact else None)
    assert torch.neuron.fallback_report() == [], torch.neuron.fallback_report()
    """
    run_on_every_driver(code)


def test_batch_norm_trains_on_the_device():
    # BatchNorm (every CNN's) forward and backward, training and evaluation,
    # composed from device ops: outputs, gradients and running statistics
    # match the CPU's, channels_last stays channels_last, 16-bit inputs with
    # float32 parameters (AMP) compute in float32 as the CPU; no fallback.
    run_on_every_driver("""
    import copy, torch
    torch.manual_seed(0)
    def check(name, got, want, tol):
        torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol, msg=name)
    for fmt in (torch.contiguous_format, torch.channels_last):
        for affine in (True, False):
            m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8, affine=affine))
            m = m.to(memory_format=fmt)
            d = copy.deepcopy(m).to("neuron")
            for step in range(2):
                x = torch.randn(4, 3, 9, 9).to(memory_format=fmt)
                y, yd = m(x), d(x.to("neuron"))
                check(f"output {fmt} {affine}", yd, y, 1e-4)
                assert yd.is_contiguous(memory_format=fmt) == y.is_contiguous(memory_format=fmt)
                y.square().sum().backward()
                yd.square().sum().backward()
            for (n, p), q in zip(m.named_parameters(), d.parameters()):
                check(f"grad {n}", q.grad, p.grad, 1e-3)
            check("running_mean", d[1].running_mean, m[1].running_mean, 1e-5)
            check("running_var", d[1].running_var, m[1].running_var, 1e-5)
            assert int(d[1].num_batches_tracked) == 2
            m.eval(), d.eval()
            x = torch.randn(2, 3, 9, 9, requires_grad=True)
            xd = x.detach().to("neuron").requires_grad_()
            y, yd = m(x), d(xd)
            check("eval output", yd, y, 1e-4)
            y.sum().backward(), yd.sum().backward()
            check("eval input grad", xd.grad, x.grad, 1e-4)
    for dt in (torch.float16, torch.bfloat16):
        bn = torch.nn.BatchNorm1d(6)  # float32 parameters, 16-bit input
        bnd = copy.deepcopy(bn).to("neuron")
        x = torch.randn(10, 6, 7).to(dt).requires_grad_()
        xd = x.detach().to("neuron").requires_grad_()
        y, yd = bn(x), bnd(xd)
        assert yd.dtype == dt
        check(f"{dt} output", yd.float(), y.float(), 1e-2)
        y.float().sum().backward(), yd.float().sum().backward()
        check(f"{dt} input grad", xd.grad.float(), x.grad.float(), 2e-2)
        check(f"{dt} weight grad", bnd.weight.grad, bn.weight.grad, 2e-2)
        check(f"{dt} running_var", bnd.running_var, bn.running_var, 1e-3)
    """)


def test_average_pooling_on_the_device():
    # avg_pool2d (and avg_pool1d through it) forward and backward: windows
    # as a strided view of the padded input, the CPU's divisor per position
    # (padding counted or not, ceil_mode's clipped last window,
    # divisor_override); channels_last stays so; 16-bit sums in float32.
    run_on_every_driver("""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    cases = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
             dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
             dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0), ceil_mode=True),
             dict(kernel_size=3, stride=1, padding=1, divisor_override=4), dict(kernel_size=4, stride=3, ceil_mode=True)]
    for kw in cases:
        for shape, fmt in (((2, 3, 9, 11), torch.contiguous_format), ((2, 3, 9, 11), torch.channels_last),
                           ((3, 8, 7), torch.contiguous_format)):
            for dt, tol in ((torch.float32, 1e-5), (torch.float64, 1e-12), (torch.float16, 1e-3)):
                x = torch.randn(shape, dtype=dt)
                if len(shape) == 4:
                    x = x.to(memory_format=fmt)
                x.requires_grad_()
                xd = x.detach().to("neuron").requires_grad_()
                y, yd = F.avg_pool2d(x, **kw), F.avg_pool2d(xd, **kw)
                torch.testing.assert_close(yd.cpu(), y, rtol=tol, atol=tol, msg=f"{kw} {shape} {dt}")
                if len(shape) == 4:
                    assert yd.is_contiguous(memory_format=fmt) == y.is_contiguous(memory_format=fmt)
                g = torch.randn(y.shape, dtype=dt)
                y.backward(g), yd.backward(g.to("neuron"))
                torch.testing.assert_close(xd.grad.cpu(), x.grad, rtol=tol, atol=tol, msg=f"grad {kw} {shape} {dt}")
    x = torch.randn(4, 5, 20)
    torch.testing.assert_close(F.avg_pool1d(x.to("neuron"), 4, 3, 2).cpu(), F.avg_pool1d(x, 4, 3, 2))
    """)


def test_repeat_interleave_with_tensor_repeats_on_the_device():
    # The index of each output's source from a scan of the repeats' ends;
    # the total read back (the result's size, as on CUDA); zero repeats,
    # output_size, int32 repeats, and the CPU's error for a negative one.
    run_on_every_driver("""
    import pytest, torch
    d = "neuron"
    for reps in ([2, 0, 3], [0, 0], [1], [0, 4, 0, 0, 1], []):
        r = torch.tensor(reps, dtype=torch.long)
        assert torch.equal(torch.repeat_interleave(r.to(d)).cpu(), torch.repeat_interleave(r))
    x, r = torch.randn(4, 3), torch.tensor([1, 0, 2, 3])
    assert torch.equal(x.to(d).repeat_interleave(r.to(d), dim=0).cpu(), x.repeat_interleave(r, dim=0))
    assert torch.equal(x.to(d).repeat_interleave(r[:3].to(d), dim=1).cpu(), x.repeat_interleave(r[:3], dim=1))
    got = x.to(d).repeat_interleave(r.int().to(d), dim=0, output_size=6).cpu()
    assert torch.equal(got, x.repeat_interleave(r.int(), dim=0, output_size=6))
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        torch.repeat_interleave(torch.tensor([1, -1], device=d))
    """)


def test_hypot_is_a_device_kernel():
    # hypot as a generated kernel (its PyTorch decomposition is a prim of
    # the op itself, so it took the CPU fallback): no overflow or underflow
    # on the way, infinity over NaN, within about an ulp of float64.
    run_on_every_driver("""
    import torch
    torch.manual_seed(0)
    a = torch.randn(4096) * torch.logspace(-40, 38, 4096)
    b = torch.randn(4096) * 1e3
    a[:4], b[:4] = torch.tensor([float("inf"), float("nan"), 0.0, -float("inf")]), torch.tensor([float("nan"), 1.0, 0.0, 2.0])
    got = torch.hypot(a.to("neuron"), b.to("neuron")).cpu()
    assert got[0] == float("inf") and got[1].isnan() and got[2] == 0 and got[3] == float("inf")
    want = torch.hypot(a.double(), b.double())[4:]
    assert ((got[4:].double() - want).abs() / want).max() < 2.5 * torch.finfo(torch.float32).eps
    """)


def test_bitwise_shifts_are_device_kernels():
    # << and >> (quantized weights are unpacked with them) as generated
    # kernels with the CPU's semantics per width: a count that is negative
    # or past the width gives 0 (left) or the sign (right); fused chains too.
    run_on_every_driver("""
    import torch
    torch.manual_seed(0)
    d = "neuron"
    for dt in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        lo, hi = (-2**62, 2**62) if dt == torch.int64 else (torch.iinfo(dt).min, torch.iinfo(dt).max)
        a = torch.randint(lo, hi, (4096,), dtype=dt)
        b = torch.randint(0 if dt == torch.uint8 else -3, 70, (4096,), dtype=dt)
        for name, f in (("<<", lambda x, y: x << y), (">>", lambda x, y: x >> y), ("<< 3", lambda x, y: x << 3),
                        ("unpack", lambda x, y: ((x >> 4) & 0xF) + (x << 1))):
            assert torch.equal(f(a.to(d), b.to(d)).cpu(), f(a, b)), (dt, name)
    """)


def test_special_functions_are_device_kernels():
    # erfinv (trunc_normal_ initialisation calls it), lgamma and digamma
    # (distributions' log_prob, poisson_nll_loss) as generated kernels: their
    # PyTorch decompositions are prims of the ops themselves, so they took
    # the CPU fallback. Poles, infinities and NaN as the CPU's.
    run_on_every_driver("""
    import math
    import torch
    torch.manual_seed(0)
    d = "neuron"
    eps = torch.finfo(torch.float32).eps
    def close(name, got, want, rtol, atol):
        got, want = got.cpu().double(), want.double()
        same_special = (got.isnan() == want.isnan()).all() and (got.isinf() == want.isinf()).all()
        assert same_special and (got[got.isinf()] == want[want.isinf()]).all(), name
        f = want.isfinite()
        err = ((got[f] - want[f]).abs() - rtol * want[f].abs()).max()
        assert err <= atol, (name, err.item())
    y = torch.rand(4096) * 2 - 1
    y[:5] = torch.tensor([1.0, -1.0, 0.0, 1.5, float("nan")])
    close("erfinv", torch.erfinv(y.to(d)), torch.erfinv(y.double()), 8 * eps, 1e-6)
    x = torch.cat([torch.randn(2048) * 30, torch.rand(2048) * 12, torch.tensor([0.0, -0.0, -3.0, float("inf"),
                   -float("inf"), float("nan"), 1.0, 2.0, 1e-30, 3e36])])
    close("lgamma", torch.lgamma(x.to(d)), torch.lgamma(x.double()), 16 * eps, 1e-5)
    close("digamma", torch.digamma(x.to(d)), torch.digamma(x.double()), 64 * eps, 1e-5)
    for dt in (torch.float16, torch.bfloat16):  # computed in float32, rounded once, as the CPU
        h = (torch.rand(512) * 8 - 4).to(dt)
        for f in (torch.lgamma, torch.digamma, lambda t: torch.erfinv(t / 4)):
            torch.testing.assert_close(f(h.to(d)).cpu(), f(h), atol=1e-4, rtol=2 * torch.finfo(dt).eps, equal_nan=True)
    # integer inputs promote, in-place forms and trunc_normal_ on the device
    assert torch.lgamma(torch.arange(1, 6, device=d)).cpu().allclose(torch.tensor([math.lgamma(k) for k in range(1, 6)]))
    w = torch.empty(256, 256, device=d)
    torch.nn.init.trunc_normal_(w, std=0.02, a=-0.04, b=0.04)
    assert w.abs().max().item() <= 0.04 and abs(w.std().item() - 0.0176) < 0.002
    """)


def test_median_and_kthvalue_on_the_device():
    # median, nanmedian and kthvalue from a stable device sort: the CPU's
    # rank, its index among ties, NaN propagated by median, skipped by
    # nanmedian; errors as the CPU's.
    run_on_every_driver("""
    import pytest
    import torch
    torch.manual_seed(0)
    d = "neuron"
    x = torch.randn(5, 7, 6)
    x[1, 2, 3] = x[2, 0, 1] = x[2, 5, 1] = float("nan")
    x[3, :, 2] = float("nan")
    ints = torch.randint(-3, 4, (6, 9))
    def same(name, got, want):
        if isinstance(want, tuple):
            for g, w in zip(got, want):
                torch.testing.assert_close(g.cpu(), w, equal_nan=True, msg=name)
        else:
            torch.testing.assert_close(got.cpu(), want, equal_nan=True, msg=name)
    for t in (x, ints, x.half(), x.bfloat16(), x.transpose(0, 2)):
        for f in (torch.median, torch.nanmedian):
            same(f.__name__, f(t.to(d)), f(t))
            for dim in range(t.dim()):
                for keepdim in (False, True):
                    got, want = f(t.to(d), dim, keepdim), f(t, dim, keepdim)
                    if f is torch.nanmedian:  # a line of NaN: the CPU's introselect picks any index
                        got, want = (got[0], got[1].cpu()[~want[0].isnan()]), (want[0], want[1][~want[0].isnan()])
                    same(f"{f.__name__} {dim}", got, want)
        for k in (1, 3, t.size(-1)):
            got, want = torch.kthvalue(t.to(d), k), torch.kthvalue(t, k)
            # the CPU's quickselect leaves the index among ties to chance: values only
            same(f"kthvalue {k}", got if t is not ints else got[0], want if t is not ints else want[0])
    same("scalar", torch.median(torch.tensor(2.5).to(d), 0), torch.median(torch.tensor(2.5), 0))
    same("quantile", torch.quantile(x.nan_to_num().to(d), 0.3, dim=1), torch.quantile(x.nan_to_num(), 0.3, dim=1))
    with pytest.raises(RuntimeError, match="selected number k out of range for dimension 2"):
        torch.kthvalue(x.to(d), 9)
    with pytest.raises(IndexError, match="Expected reduction dim 1 to have non-zero size"):
        torch.median(torch.ones(3, 0, device=d), 1)
    assert torch.median(torch.ones(0, 3, device=d), 1).values.shape == (0,)
    with pytest.raises(RuntimeError, match="not implemented for 'Bool'|CPU fallback"):
        torch.median(torch.ones(3, dtype=torch.bool, device=d))
    """)


def test_sixteen_bit_library_ops_on_the_device():
    # float16 / bfloat16 sort, topk, argmax, scatter, index_add (a mixture of
    # experts' combine), index_copy (a static KV cache's update), max
    # pooling, upsampling and transposed convolution took the CPU fallback:
    # their kernels are float32 ones. Now float32 copies, rounded back once:
    # bitwise the CPU's where values only move, within one rounding where
    # the CPU computes in float too.
    run_on_every_driver("""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    d = "neuron"
    for dt in (torch.bfloat16, torch.float16):
        x = torch.randn(6, 40).to(dt)
        x[2, 5] = float("nan")
        def exact(name, got, want):
            for g, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:
                torch.testing.assert_close(g.cpu(), w, atol=0, rtol=0, equal_nan=True, msg=name)
        exact("sort", x.to(d).sort(dim=1, stable=True), x.sort(dim=1, stable=True))
        values, indices = x.to(d).topk(5, 1)  # ties (many in 16 bits) in any order, as the CPU's partial sort
        exact("topk", values, x.topk(5, 1).values)
        exact("topk indices", x.gather(1, indices.cpu()), x.topk(5, 1).values)
        exact("argmax", x.to(d).argmax(1), x.argmax(1))
        exact("max.dim", x.to(d).max(1), x.max(1))
        exact("median", x.to(d).median(1), x.median(1))
        gi = torch.randint(0, 6, (6, 40))
        exact("scatter", x.to(d).scatter(0, gi.to(d), x.to(d)), x.scatter(0, gi, x))
        slots = torch.tensor([1, 4, 0])  # distinct: one rounding, as the CPU's
        src = torch.randn(3, 40).to(dt)
        y = x.to(d)
        y.index_add_(0, slots.to(d), src.to(d), alpha=2)
        exact("index_add_", y, x.clone().index_add_(0, slots, src, alpha=2))
        exact("index_copy", x.to(d).index_copy(0, slots.to(d), src.to(d)), x.index_copy(0, slots, src))
        img = torch.randn(2, 3, 8, 8).to(dt)
        exact("max_pool2d", F.max_pool2d(img.to(d), 2, return_indices=True), F.max_pool2d(img, 2, return_indices=True))
        exact("nearest", F.interpolate(img.to(d), scale_factor=2), F.interpolate(img, scale_factor=2))
        tol = dict(atol=1e-2, rtol=torch.finfo(dt).eps * 2)
        torch.testing.assert_close(F.interpolate(img.to(d), scale_factor=2, mode="bilinear").cpu(),
                                   F.interpolate(img, scale_factor=2, mode="bilinear"), **tol)
        w = torch.randn(3, 4, 3, 3).to(dt)
        torch.testing.assert_close(F.conv_transpose2d(img.to(d), w.to(d), stride=2).cpu().float(),
                                   F.conv_transpose2d(img.float(), w.float(), stride=2), atol=0.05, rtol=1e-2)
        # computed in float and rounded once (as CUDA): within one rounding of the CPU's 16-bit arithmetic
        torch.testing.assert_close(torch.linspace(-1, 1, 37, dtype=dt, device=d).cpu(),
                                   torch.linspace(-1, 1, 37, dtype=dt), atol=torch.finfo(dt).eps, rtol=0)
    # index_copy in every dtype, with the CPU's errors
    cache = torch.zeros(2, 8, 4, device=d)
    new = torch.randn(2, 3, 4)
    cache.index_copy_(1, torch.tensor([5, 6, 7], device=d), new.to(d))
    assert torch.equal(cache.cpu()[:, 5:], new) and cache.cpu()[:, :5].eq(0).all()
    import pytest
    with pytest.raises(IndexError, match=r"index_copy_\\(\\): index 9 is out of bounds for dimension 1 with size 8"):
        cache.index_copy_(1, torch.tensor([9], device=d), new[:, :1].to(d))
    ints = torch.arange(10).index_copy(0, torch.tensor([0, 9]), torch.tensor([-1, -2]))
    assert torch.equal(torch.arange(10, device=d).index_copy(0, torch.tensor([0, 9], device=d),
                                                             torch.tensor([-1, -2], device=d)).cpu(), ints)
    """)


def test_cumulative_max_min_and_logcumsumexp_on_the_device():
    # cummax / cummin / logcumsumexp took the CPU fallback: now a scan of
    # device ops with the CPU kernel's choices (a later equal value's index,
    # a NaN wins and stays, its latest index), in every dtype it takes.
    run_on_every_driver("""
    import torch
    torch.manual_seed(0)
    d = "neuron"
    x = torch.randn(4, 37, 5)
    x[1, 3, 2] = x[1, 9, 2] = x[2, 0, 0] = float("nan")
    ints = torch.randint(-4, 5, (6, 50))
    for t in (x, ints, x.bfloat16(), x.half(), x.transpose(0, 1), torch.tensor(2.5)):
        for f in (torch.cummax, torch.cummin):
            for dim in range(-1, max(t.dim(), 1)):
                got, want = f(t.to(d), dim), f(t, dim)
                torch.testing.assert_close(got.values.cpu(), want.values, atol=0, rtol=0, equal_nan=True)
                torch.testing.assert_close(got.indices.cpu(), want.indices, atol=0, rtol=0)
    big = torch.randn(3, 300) * 40
    big[0, :5] = -float("inf")
    for t, tol in ((big, 1e-5), (big.double(), 1e-12), (big.bfloat16(), 1e-2)):
        torch.testing.assert_close(t.to(d).logcumsumexp(1).cpu(), t.logcumsumexp(1), atol=tol, rtol=tol)
    g = x.nan_to_num().requires_grad_()
    gd = x.nan_to_num().to(d).requires_grad_()
    g.cummax(1).values.sum().backward()
    gd.cummax(1).values.sum().backward()
    torch.testing.assert_close(gd.grad.cpu(), g.grad)
    """)


def test_histc_on_the_device():
    # histc (transformers' mixture-of-experts layers count tokens per expert
    # with it on every forward) took the CPU fallback: now device ops with
    # the CPU kernel's binning (its linear guess in the input's dtype, the
    # top edge in the last bin, NaN and values out of range dropped, the
    # data's range where min == max) and CUDA's for integers.
    run_on_every_driver("""
    import pytest
    import torch
    torch.manual_seed(0)
    d = "neuron"
    cases = [(torch.randn(10000), 100, 0, 0), (torch.randn(10000), 7, -1, 1), (torch.rand(1000) * 10, 10, 0, 10),
             (torch.arange(0, 10.0), 10, 0, 9), (torch.tensor([1., 2., float("nan"), 3.]), 4, 0, 4),
             (torch.randn(3000).double(), 33, -2, 2), (torch.randn(500).half(), 20, 0, 0),
             (torch.randn(500).bfloat16(), 20, -3, 3), (torch.tensor([2.5]), 5, 0, 0), (torch.empty(0), 3, 0, 0)]
    for x, bins, lo, hi in cases:
        assert torch.equal(torch.histc(x.to(d), bins, lo, hi).cpu(), torch.histc(x, bins, lo, hi)), (x.dtype, bins)
    experts = torch.randint(0, 8, (1000,))
    assert torch.equal(torch.histc(experts.to(d), 8, 0, 7).cpu(), torch.bincount(experts, minlength=8))
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(torch.randn(4, device=d), 3, 2, 1)
    with pytest.raises(RuntimeError, match="is not finite"):
        torch.histc(torch.randn(4, device=d), 3, float("-inf"), 1)
    """)


def test_addbmm_on_the_device():
    # addbmm (and addbmm_) took the CPU fallback: one addmm of the batches
    # side by side; broadcast self, beta = 0 ignoring self, every float dtype.
    run_on_every_driver("""
    import torch
    torch.manual_seed(0)
    d = "neuron"
    for dt in (torch.float32, torch.float64, torch.bfloat16):
        tol = dict(atol=2e-2, rtol=2e-2) if dt == torch.bfloat16 else {}
        m, b1, b2 = torch.randn(5, 7, dtype=dt), torch.randn(3, 5, 4, dtype=dt), torch.randn(3, 4, 7, dtype=dt)
        for beta, alpha in ((1, 1), (0.5, 2)):
            torch.testing.assert_close(torch.addbmm(m.to(d), b1.to(d), b2.to(d), beta=beta, alpha=alpha).cpu(),
                                       torch.addbmm(m, b1, b2, beta=beta, alpha=alpha), **tol)
        nan = torch.full((7,), float("nan"), dtype=dt)
        torch.testing.assert_close(torch.addbmm(nan.to(d), b1.to(d), b2.to(d), beta=0).cpu(),
                                   torch.addbmm(nan, b1, b2, beta=0), **tol)
        y = m.to(d)
        y.addbmm_(b1.to(d), b2.to(d))
        torch.testing.assert_close(y.cpu(), m.clone().addbmm_(b1, b2), **tol)
    """)

"""The vulkan driver (OPENNEURON_DRIVER=vulkan; Mesa's lavapipe on a machine
without a GPU). Each test runs in a fresh interpreter on that driver with
the Khronos validation layer on (synchronization validation included): any
validation message raises at the next synchronize, so these tests fail on
it. Eager ops run as GLSL kernels the compiler generates; ops without one
run on CPU copies, counted and reported, never narrowed."""
import signal

from conftest import run_python

VULKAN = {"OPENNEURON_DRIVER": "vulkan", "OPENNEURON_CPU_FALLBACK": "silent",
          "OPENNEURON_VULKAN_VALIDATION": "1"}


def test_host_read_of_device_memory_crashes():
    code = """
    import ctypes, torch
    x = torch.ones(4, device="neuron")
    print(ctypes.string_at(x.data_ptr(), 4))
    """
    proc = run_python(code, env=VULKAN, check=False)
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stderr[-2000:])


def test_properties_and_generated_kernels_match_cpu():
    run_python("""
    import torch
    p = torch.neuron.get_device_properties(0)
    assert p.driver == "vulkan" and p.kernel_target == "glsl" and not p.host_addressable, p
    assert torch.neuron.unavailable_reason() is None
    torch.manual_seed(0)
    a = torch.randn(37, 129)
    x = a.to("neuron")
    close = torch.testing.assert_close
    close((torch.nn.functional.gelu(x * 2 - 1) + x.sigmoid()).cpu(),
          torch.nn.functional.gelu(a * 2 - 1) + a.sigmoid())
    close(x.sum(1).cpu(), a.sum(1))
    close(x.mean(0).cpu(), a.mean(0))
    close(x.amax(1).cpu(), a.amax(1))
    close(torch.softmax(x, -1).cpu(), torch.softmax(a, -1))
    close(torch.nn.functional.layer_norm(x, (129,)).cpu(), torch.nn.functional.layer_norm(a, (129,)))
    close(x.t()[3:, ::2].exp().cpu(), a.t()[3:, ::2].exp())
    # Dtypes stored in 8 and 16 bits, bool, int64 arithmetic and casts.
    close(x.half().float().cpu(), a.half().float())
    close(x.bfloat16().float().cpu(), a.bfloat16().float())
    assert torch.equal((x > 0).cpu(), a > 0)
    i = torch.randint(-50, 50, (1000,))
    assert torch.equal((i.to("neuron") // 7).cpu(), i // 7)
    assert torch.equal((i.to("neuron") % 7).cpu(), i % 7)
    assert torch.equal(i.to("neuron").to(torch.int8).cpu(), i.to(torch.int8))
    close(torch.where(x > 0, x, 0.5 * x).cpu(), torch.where(a > 0, a, 0.5 * a))
    # Values GLSL leaves undefined come out as on the CPU.
    s = torch.tensor([-1.0, 0.0, float("inf"), float("nan"), 2.0])
    close(s.to("neuron").sqrt().cpu(), s.sqrt(), equal_nan=True)
    close(s.to("neuron").log().cpu(), s.log(), equal_nan=True)
    close(torch.pow(s.to("neuron"), 3.0).cpu(), torch.pow(s, 3.0), equal_nan=True)
    kernels = {r["op"] for r in torch.neuron.eager_kernel_report() if r["kernels"]}
    assert {"aten::sum.dim_IntList", "aten::sigmoid"} <= kernels, kernels
    # float64 sin has no GLSL kernel: it runs on the CPU, exactly, not in float32.
    d = torch.randn(100, dtype=torch.float64)
    assert torch.equal(d.to("neuron").sin().cpu(), d.sin())
    torch.neuron.synchronize()
    """, env=VULKAN, timeout=300)


def test_large_kernels_loop_with_fewer_workgroups_than_elements():
    # Past 256 workgroups per compute unit, each workgroup loops over
    # several elements or rows (lavapipe stops an invocation after 65535
    # loop trips: the grid keeps every invocation far from that): many short
    # rows, few long ones, permuted coordinates, multi-pass rows (softmax).
    run_python("""
    import torch
    g = torch.Generator().manual_seed(0)
    for shape in [(1 << 21, 2), (3, 1 << 21), (1 << 23,), (64, 2, 32768)]:
        x = torch.randn(*shape, generator=g)
        xd = x.to("neuron")
        torch.testing.assert_close(xd.sum(-1).cpu(), x.sum(-1), rtol=1e-5, atol=1e-3)
        torch.testing.assert_close(xd.amax(0).cpu(), x.amax(0))
        assert torch.equal((xd * 2 + 1).cpu(), x * 2 + 1)
        if x.dim() == 3:
            assert torch.equal((xd.permute(2, 0, 1) - 1).cpu(), x.permute(2, 0, 1) - 1)
            torch.testing.assert_close(xd.permute(2, 0, 1).exp().cpu(), x.permute(2, 0, 1).exp())
        torch.testing.assert_close(xd.softmax(-1).cpu(), x.softmax(-1), rtol=1e-5, atol=1e-6)
    assert not torch.neuron.fallback_report(), torch.neuron.fallback_report()
    """, env=VULKAN, timeout=300)


def test_short_and_long_rows_reduce_alike():
    """Rows of up to 32 elements reduce an invocation each, longer ones a
    workgroup each (one kernel for both: sizes are kernel scalars). Either
    side of the cut, over the last dim and over dim 0: NaN wins max/min,
    float sums stay compensated, multi-pass rows (var, softmax) and integer,
    bool and half rows give the CPU's values."""
    run_python("""
    import torch
    g = torch.Generator().manual_seed(0)
    close = torch.testing.assert_close
    for n in (1, 2, 31, 32, 33, 200):
        x = torch.randn(37, n, generator=g)
        x[5, n // 2] = float("nan")
        xd = x.to("neuron")
        for d in (-1, 0):
            close(xd.sum(d).cpu(), x.sum(d), rtol=1e-5, atol=1e-5, equal_nan=True)
            close(xd.amax(d).cpu(), x.amax(d), equal_nan=True)
            close(xd.amin(d).cpu(), x.amin(d), equal_nan=True)
        y = torch.randn(37, n, generator=g) * 1e4 + 1e7  # a compensated sum's case
        close(y.to("neuron").sum(-1).cpu(), y.double().sum(-1).float(), rtol=1e-6, atol=0)
        if n > 1:
            close(y.to("neuron").var(-1).cpu(), y.var(-1), rtol=1e-4, atol=1e-3)
        close(xd.nan_to_num().softmax(-1).cpu(), x.nan_to_num().softmax(-1), rtol=1e-5, atol=1e-6)
        close(xd.nan_to_num().log_softmax(0).cpu(), x.nan_to_num().log_softmax(0), rtol=1e-5, atol=1e-5)
        i = torch.randint(-50, 50, (37, n), generator=g)
        assert torch.equal(i.to("neuron").sum(-1).cpu(), i.sum(-1))
        assert torch.equal(i.to("neuron").amax(0).cpu(), i.amax(0))
        b = i > 0
        assert torch.equal(b.to("neuron").any(-1).cpu(), b.any(-1))
        assert torch.equal(b.to("neuron").all(0).cpu(), b.all(0))
        h = x.nan_to_num().half()
        close(h.to("neuron").sum(-1).cpu(), h.sum(-1), rtol=1e-3, atol=1e-2)
    assert not torch.neuron.fallback_report(), torch.neuron.fallback_report()
    """, env=VULKAN, timeout=300)


def test_indexing_scan_and_loss_kernels_run_on_the_device():
    """The GLSL library's index_select/embedding, gather/scatter, nll_loss,
    cumsum/cumprod, argmax/max.dim and arange/linspace kernels: results as
    the CPU's, no CPU fallback, and an index out of range raises at the op."""
    run_python("""
    import torch
    N = torch.neuron
    torch.manual_seed(0)
    close = torch.testing.assert_close
    dev = lambda t: t.to("neuron")
    N.reset_fallback_report()
    w = torch.randn(50, 7, requires_grad=True)
    idx = torch.randint(0, 50, (6, 9))
    wd = dev(w.detach()).requires_grad_()
    out = torch.nn.functional.embedding(dev(idx), wd, padding_idx=3)
    ref = torch.nn.functional.embedding(idx, w, padding_idx=3)
    close(out.cpu(), ref)
    g = torch.randn(6, 9, 7)
    out.backward(dev(g)); ref.backward(g)
    close(wd.grad.cpu(), w.grad)
    for dtype in (torch.float32, torch.float64, torch.int64, torch.int8, torch.complex128):
        src = torch.randn(5, 6, 4).to(dtype) if dtype != torch.int8 else torch.randint(-9, 9, (5, 6, 4), dtype=dtype)
        i = torch.randint(0, 6, (8,))
        assert torch.equal(dev(src).index_select(1, dev(i)).cpu(), src.index_select(1, i)), dtype
        assert torch.equal(dev(src).index_select(1, dev(i.int())).cpu(), src.index_select(1, i)), dtype
        gi = torch.randint(0, 6, (5, 3, 4))
        assert torch.equal(torch.gather(dev(src), 1, dev(gi)).cpu(), torch.gather(src, 1, gi)), dtype
        t = dev(src.transpose(0, 2))  # strided operands
        assert torch.equal(torch.gather(t, 1, dev(gi.transpose(0, 2))).cpu(),
                           torch.gather(src.transpose(0, 2), 1, gi.transpose(0, 2))), dtype
    for dtype in (torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8):
        base = torch.zeros(4, 10, dtype=dtype)
        i = torch.randint(0, 10, (4, 12))  # duplicates: applied in index order, as the CPU
        v = torch.arange(48).reshape(4, 12).to(dtype)
        assert torch.equal(dev(base).scatter(1, dev(i), dev(v)).cpu(), base.scatter(1, i, v)), dtype
        assert torch.equal(dev(base).scatter_add(1, dev(i), dev(v)).cpu(), base.scatter_add(1, i, v)), dtype
        assert torch.equal(dev(base).scatter(1, dev(i), 7).cpu(), base.scatter(1, i, 7)), dtype
        x = torch.randn(3, 40).mul(3).to(dtype)
        assert torch.equal(dev(x).argmax(1).cpu(), x.argmax(1)), dtype
        assert torch.equal(dev(x).argmin(0).cpu(), x.argmin(0)), dtype
        m, a = dev(x).max(1)
        assert torch.equal(m.cpu(), x.max(1).values) and torch.equal(a.cpu(), x.max(1).indices), dtype
        if dtype.is_floating_point:
            close(dev(x).cumsum(1).cpu(), x.cumsum(1))
            close(dev(x[:, :8]).cumprod(1).cpu(), x[:, :8].cumprod(1))
        else:
            assert torch.equal(dev(x).cumsum(0).cpu(), x.cumsum(0)), dtype
    nan = torch.tensor([[1.0, float("nan"), 5.0, float("nan")], [2.0, 9.0, 9.0, -1.0]])
    assert torch.equal(dev(nan).argmax(1).cpu(), nan.argmax(1))
    long_row = torch.randn(2, 3000)
    assert torch.equal(dev(long_row).argmax(1).cpu(), long_row.argmax(1))
    assert torch.equal(dev(long_row).argmax().cpu(), long_row.argmax())
    assert torch.equal(torch.arange(3, 300, 7, device="neuron").cpu(), torch.arange(3, 300, 7))
    close(torch.linspace(-2, 5, 101, device="neuron").cpu(), torch.linspace(-2, 5, 101))
    logits = torch.randn(32, 11, requires_grad=True)
    target = torch.randint(0, 11, (32,))
    target[3] = -100
    weight = torch.rand(11)
    ld = dev(logits.detach()).requires_grad_()
    for kw in ({}, {"reduction": "sum"}, {"reduction": "none"}, {"weight": weight}):
        kd = {k: dev(v) if torch.is_tensor(v) else v for k, v in kw.items()}
        a = torch.nn.functional.cross_entropy(ld, dev(target), **kd)
        b = torch.nn.functional.cross_entropy(logits, target, **kw)
        close(a.cpu(), b)
        ga, = torch.autograd.grad(a.sum(), ld)
        gb, = torch.autograd.grad(b.sum(), logits)
        close(ga.cpu(), gb)
    library_ops = {"aten::embedding", "aten::embedding_dense_backward", "aten::index_select", "aten::gather",
                   "aten::scatter.src", "aten::scatter_add", "aten::nll_loss_forward", "aten::nll_loss_backward",
                   "aten::argmax", "aten::max.dim", "aten::cumsum"}
    fell_back = {r["op"] for r in N.fallback_report()}
    assert not (fell_back & library_ops), fell_back & library_ops
    for bad in (lambda: dev(w.detach()).index_select(0, dev(torch.tensor([1, 50]))),
                lambda: torch.gather(dev(w.detach()), 1, dev(torch.tensor([[7]]))),
                lambda: torch.nn.functional.cross_entropy(ld, dev(torch.full((32,), 11)))):
        try:
            bad()
        except IndexError as e:
            assert "out of" in str(e), e
        else:
            raise AssertionError("no error for an index out of range")
    assert torch.equal(dev(w.detach()).index_select(0, dev(idx[0])).cpu(), w.detach().index_select(0, idx[0]))
    N.synchronize()
    """, env=VULKAN, timeout=400)


def test_signed_integers_and_sign_bits_match_cpu():
    # Lavapipe zero-extended int32 values read into int64 arithmetic
    # (abs(-3) was -3); signbit is a kernel of its own for every dtype.
    run_python("""
    import torch
    ints = torch.tensor([-3, 0, 5, -1, -2**31, 2**31 - 1], dtype=torch.int32)
    floats = torch.tensor([-1.0, 0.0, -0.0, 2.0, float("nan"), -float("nan"), -float("inf")])
    torch.neuron.reset_eager_kernel_report()
    for t in [ints, ints.to(torch.int64), ints.to(torch.int16), ints.to(torch.int8), floats, floats.half(),
              floats.bfloat16()]:
        x = t.to("neuron")
        for f in (torch.abs, torch.signbit, torch.amax, torch.amin, lambda v: v < 0, lambda v: v * 2):
            torch.testing.assert_close(f(x).cpu(), f(t), rtol=0, atol=0, equal_nan=True, msg=str(t.dtype))
    # The library's kernels (scan, arg extremes, scatter) read int32 too.
    t = torch.tensor([[-3, 0, 5, -1, -7], [2, -9, 4, -4, 1]], dtype=torch.int32)
    index = torch.tensor([[0, 1, 2, 3, 4]] * 2)
    for f in (lambda v: v.cumsum(1), lambda v: v.argmax(1), lambda v: v.max(1).values,
              lambda v: torch.zeros_like(v).scatter_add(1, index.to(v.device), v)):
        assert torch.equal(f(t.to("neuron")).cpu(), f(t)), (f(t.to("neuron")).cpu(), f(t))
    declined = [r for r in torch.neuron.eager_kernel_report() if "signbit" in r["op"] and r["declined"]]
    assert not declined, declined
    """, env=VULKAN)


def test_pinned_non_blocking_copies_streams_and_events():
    run_python("""
    import torch
    src = torch.arange(1 << 20, dtype=torch.float32).pin_memory()
    s = torch.neuron.Stream()
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    with torch.neuron.stream(s):
        start.record()
        d = src.to("neuron", non_blocking=True)
        d.mul_(2)
        back = torch.empty_like(src).pin_memory()
        back.copy_(d, non_blocking=True)
        end.record()
    s.synchronize()
    assert torch.equal(back, src * 2)
    assert end.query() and start.elapsed_time(end) > 0
    torch.neuron.current_stream().wait_stream(s)
    assert torch.equal(d.cpu(), src * 2)
    """, env=VULKAN, timeout=180)


def test_training_step_and_compile_match_cpu():
    run_python("""
    import torch
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                              torch.nn.Linear(32, 5))
    dev = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                              torch.nn.Linear(32, 5))
    dev.load_state_dict(cpu.state_dict()); dev.to("neuron")
    x, y = torch.randn(16, 12), torch.randint(0, 5, (16,))
    for model, inp, tgt in ((cpu, x, y), (dev, x.to("neuron"), y.to("neuron"))):
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
        for _ in range(3):
            torch.nn.functional.cross_entropy(model(inp), tgt).backward(); opt.step(); opt.zero_grad()
    for p, q in zip(cpu.parameters(), dev.parameters()):
        torch.testing.assert_close(q.cpu(), p, atol=1e-5, rtol=1e-4)
    f = torch.compile(dev, backend="neuron")
    torch.testing.assert_close(f(x.to("neuron")).cpu(), cpu(x), atol=1e-5, rtol=1e-4)
    torch.neuron.synchronize()
    """, env=VULKAN, timeout=400)


def test_allocation_past_the_device_is_a_clear_oom():
    run_python("""
    import torch
    try:
        torch.empty(1 << 40, dtype=torch.uint8, device="neuron")
    except torch.OutOfMemoryError as e:
        assert "vulkan device 0" in str(e), str(e)
    else:
        raise AssertionError("no OutOfMemoryError")
    assert torch.ones(3, device="neuron").sum().item() == 3  # still usable
    """, env=VULKAN)


def test_no_vulkan_device_is_unavailable_with_a_reason():
    proc = run_python("""
    import torch
    assert not torch.neuron.is_available()
    reason = torch.neuron.unavailable_reason()
    assert reason and "vulkan" in reason.lower(), reason
    try:
        torch.ones(1, device="neuron")
    except RuntimeError as e:
        assert "unavailable" in str(e), str(e)
    else:
        raise AssertionError("no error")
    print("ok")
    """, env={**VULKAN, "VK_ICD_FILENAMES": "/nonexistent/icd.json"})
    assert "ok" in proc.stdout


def test_device_without_float64_refuses_it_never_narrows():
    # A GPU without float64 shaders (OPENNEURON_VULKAN_FP64=0 makes lavapipe
    # one): float32 kernels, Python numbers included, declare no float64
    # (the validation layer would raise: the feature is off); float64 ops
    # run on CPU copies with exact results, and say why when that is an error.
    run_python("""
    import torch
    p = torch.neuron.get_device_properties(0)
    assert not p.native_fp64 and p.kernel_target == "glsl_fp32", p
    torch.manual_seed(0)
    a = torch.randn(300, 65); x = a.to("neuron")
    close = torch.testing.assert_close
    for s in (0.3, 1e-40, 3e-39, 1e39, -2.5):         # subnormal, overflowing, plain
        close((x * s + 1).cpu(), a * s + 1)
    close(torch.softmax(x * 0.7, -1).cpu(), torch.softmax(a * 0.7, -1))
    close((x @ x.T).cpu(), a @ a.T, rtol=1e-4, atol=1e-4)
    close(x.cumsum(0).cpu(), a.cumsum(0), rtol=1e-4, atol=1e-4)
    close(torch.compile(lambda t: (t * 0.5).sin().sum(0), backend="neuron")(x).cpu(), (a * 0.5).sin().sum(0))
    # Integer Python numbers reach integer kernels exactly (not through a
    # float32: 1413754137 would round to 1413754112).
    for dt in (torch.int32, torch.int64):
        n = torch.zeros(4, dtype=dt, device="neuron")
        assert n.fill_(1413754137).cpu().tolist() == [1413754137] * 4
        c = torch.zeros(4, dtype=dt).fill_(1413754137)
        assert torch.equal((n * 3 - 1413754137).cpu(), c * 3 - 1413754137)
    # float64 data moved, not computed, stays on the device: copies,
    # clones, fills and cat are int64 bit moves.
    d = a.double(); nd = d.to("neuron")
    assert torch.equal(nd.t().contiguous().cpu(), d.t().contiguous()) and torch.equal(nd[:, ::3].clone().cpu(), d[:, ::3])
    assert torch.equal(torch.cat([nd, nd[:2]]).cpu(), torch.cat([d, d[:2]]))
    f = torch.empty(5, 3, dtype=torch.float64, device="neuron").t()
    assert torch.equal(f.fill_(-1e-300).cpu(), torch.full((3, 5), -1e-300, dtype=torch.float64))
    assert torch.zeros(2, dtype=torch.float64, device="neuron").cpu().tolist() == [0.0, 0.0]
    torch.neuron.synchronize()
    assert torch.neuron.fallback_report() == [], torch.neuron.fallback_report()
    close((nd * 0.3).exp().sum(-1).cpu(), (d * 0.3).exp().sum(-1), rtol=0, atol=0)
    close((nd @ nd.T).cpu(), d @ d.T, rtol=0, atol=0)
    assert {r["op"] for r in torch.neuron.fallback_report()} >= {"aten::mul.Tensor", "aten::exp", "aten::mm"}
    torch.neuron.synchronize()
    """, env=VULKAN | {"OPENNEURON_VULKAN_FP64": "0"})
    proc = run_python("""
    import torch
    (torch.ones(3, dtype=torch.float64, device="neuron") * 2).cpu()
    """, env=VULKAN | {"OPENNEURON_VULKAN_FP64": "0", "OPENNEURON_CPU_FALLBACK": "error"}, check=False)
    assert proc.returncode != 0 and "without float64 shaders" in proc.stderr, proc.stderr[-2000:]


def test_float64_exp_log_pow_run_on_the_device_in_float64():
    """exp, log, pow, tanh and their kin in float64 are device kernels (the
    prelude's float64 versions: GLSL has them in float32 only), within a few
    float64 ulp of the CPU over their whole range, with IEEE's special
    values; never narrowed to float32 and no CPU fallback."""
    run_python("""
    import torch
    g = torch.Generator().manual_seed(0)
    wide = torch.cat([torch.randn(4000, generator=g, dtype=torch.float64) * 300,
                      torch.randn(4000, generator=g, dtype=torch.float64),
                      torch.randn(1000, generator=g, dtype=torch.float64) * 1e-9,
                      torch.tensor([0.0, -0.0, 1.0, -1.0, 709.7, 709.8, -744.0, -746.0, 1e-310,
                                    float("inf"), -float("inf"), float("nan")], dtype=torch.float64)])
    positive = wide.abs()
    ops = {
        "exp": (torch.exp, wide), "expm1": (torch.expm1, wide), "exp2": (torch.exp2, wide),
        "log": (torch.log, positive), "log2": (torch.log2, positive), "log10": (torch.log10, positive),
        "log1p": (torch.log1p, wide), "tanh": (torch.tanh, wide), "sigmoid": (torch.sigmoid, wide),
        "sinh": (torch.sinh, wide / 2), "cosh": (torch.cosh, wide / 2),
        "pow": (lambda x: torch.pow(x.abs() % 50, x.remainder(7) - 3), wide),
        "pow_int": (lambda x: torch.pow(x, 3.0), wide),
        "softmax": (lambda x: torch.softmax(x.view(-1, 3), -1), wide[:9009]),
        "log_softmax": (lambda x: torch.log_softmax(x.view(-1, 3), -1), wide[:9009]),
    }
    for name, (f, x) in ops.items():
        want, got = f(x), f(x.to("neuron")).cpu()
        assert got.dtype == torch.float64, name
        # pow's fraction goes through exp(f * log(m)): log's last bit times
        # a large |log m| (tiny or huge bases) costs up to ~10 ulp.
        rtol = 1e-14 if name == "pow" else 2e-15
        torch.testing.assert_close(got, want, rtol=rtol, atol=1e-300, equal_nan=True, msg=name)
    f32 = torch.randn(1000, generator=g)
    torch.testing.assert_close(torch.exp2(f32.to("neuron")).cpu(), torch.exp2(f32), rtol=1e-6, atol=0)
    assert torch.neuron.fallback_report() == [], torch.neuron.fallback_report()
    """, env={**VULKAN, "OPENNEURON_CPU_FALLBACK": "error"}, timeout=300)

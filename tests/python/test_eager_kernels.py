"""Eager ops as device kernels (issue 27): on a driver whose memory the host
cannot address, pointwise ops and reductions run as kernels the compiler
makes for the device, with no CPU fallback, keyed so that new shapes reuse
them. Each test runs in a fresh interpreter on the protected driver with
OPENNEURON_CPU_FALLBACK=error where the ops must all be native."""
import os

from conftest import run_python

NATIVE = {"OPENNEURON_DRIVER": "protected", "OPENNEURON_CPU_FALLBACK": "error"}


def test_pointwise_ops_match_cpu_without_fallback(tmp_path):
    run_python("""
    import torch
    torch.manual_seed(0)
    a, b = torch.randn(6, 5), torch.randn(5)
    i, j = torch.randint(-9, 9, (6, 5)), torch.randint(1, 9, (6, 5), dtype=torch.int32)
    cases = {
        "broadcast add": lambda a, b, i, j: a + b,
        "scalar mul": lambda a, b, i, j: a * 2.5,
        "alpha": lambda a, b, i, j: torch.sub(a, b, alpha=3),
        "where": lambda a, b, i, j: torch.where(a > 0, a, b),
        "clamp": lambda a, b, i, j: a.clamp(-0.5, 0.5),
        "unary chain": lambda a, b, i, j: a.exp().log1p().tanh().sigmoid(),
        "transposed": lambda a, b, i, j: a.t() * 3 - a.t().abs(),
        "int mixed": lambda a, b, i, j: i * j + 7,
        "int to float": lambda a, b, i, j: i / j,
        "comparison": lambda a, b, i, j: (a >= b) & (i != 3),
        "float64": lambda a, b, i, j: a.double().abs().sqrt() * b.double(),
        "float16": lambda a, b, i, j: (a.half() * b.half()).sin(),
        "bfloat16": lambda a, b, i, j: a.bfloat16() + 1,
        "strided view": lambda a, b, i, j: a[::2, 1:] * a[1::2, :-1],
        "expanded": lambda a, b, i, j: b.expand(6, 5) * a,
        "zero size": lambda a, b, i, j: a[:0] + 1,
        "0-dim": lambda a, b, i, j: a[0, 0] * b[1],
    }
    dev = lambda t: t.to("neuron")
    for name, f in cases.items():
        torch.testing.assert_close(f(dev(a), dev(b), dev(i), dev(j)).cpu(), f(a, b, i, j), msg=name)
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    y = dev(x) * 2 + 1
    assert y.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(y.cpu(), x * 2 + 1)
    # In place (also through a view) and out=.
    c, n = a.clone(), dev(a)
    c.mul_(b).add_(1); n.mul_(dev(b)).add_(1)
    c[:, 1].sub_(5); n[:, 1].sub_(5)
    torch.testing.assert_close(n.cpu(), c)
    out = torch.empty(0, device="neuron")
    torch.mul(dev(a), dev(b), out=out)
    torch.testing.assert_close(out.cpu(), a * b)
    assert torch.neuron.fallback_report() == [], torch.neuron.fallback_report()
    """, env=NATIVE | {"OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path)})


def test_reductions_match_cpu_without_fallback(tmp_path):
    run_python("""
    import torch
    torch.manual_seed(0)
    a = torch.randn(7, 33, 5)
    n = a.to("neuron")
    cases = {
        "sum dim": lambda t: t.sum(1), "sum dims keepdim": lambda t: t.sum((0, 2), keepdim=True),
        "sum all": lambda t: t.sum(), "mean": lambda t: t.mean(-1), "amax": lambda t: t.amax(0),
        "amin keepdim": lambda t: t.amin(1, keepdim=True), "prod": lambda t: t[:, :4].prod(1),
        "any": lambda t: (t > 2).any(1), "all": lambda t: (t > -3).all(),
        "int sum": lambda t: (t * 10).to(torch.int32).sum(0),
        "transposed": lambda t: t.transpose(0, 2).sum(-1),
        "sum to float64": lambda t: t.sum(1, dtype=torch.float64),
        "large row": lambda t: t.reshape(-1).expand(40, -1).sum(),
    }
    for name, f in cases.items():
        torch.testing.assert_close(f(n).cpu(), f(a), msg=name)
    assert torch.neuron.fallback_report() == [], torch.neuron.fallback_report()
    """, env=NATIVE | {"OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path)})


def test_new_shapes_reuse_kernels_and_warm_processes_build_nothing(tmp_path):
    code = """
    import torch
    for shape in [(3,), (100, 7), (2, 3, 4), (1000,)]:
        x = torch.randn(shape).to("neuron")
        (x * 2 + 1).sum()
    # A transposed input is contiguous in another order: the same kernel.
    # A strided one is another layout class: one more kernel each.
    (torch.randn(5, 6).to("neuron").t() * 2 + 1)
    (torch.randn(5, 6).to("neuron")[:, ::2] * 2 + 1)
    r = {d["op"]: d for d in torch.neuron.eager_kernel_report()}
    print(r["aten::mul.Tensor"]["kernels"], r["aten::add.Tensor"]["kernels"],
          r["aten::sum"]["kernels"], sum(d["builds"] for d in r.values()))
    """
    env = NATIVE | {"OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path)}
    cold = run_python(code, env=env).stdout.split()
    warm = run_python(code, env=env).stdout.split()
    # Contiguous inputs of any rank coalesce to one dim: one kernel per op;
    # the strided input adds a 2-dim one.
    assert cold[:3] == ["2", "1", "1"], cold
    assert int(cold[3]) >= 1 and warm == cold[:3] + ["0"], (cold, warm)


def test_errors_are_raised_at_the_op_with_the_cpu_message():
    # (A dtype the CPU kernel lacks, bitwise_and of floats, is left to it.)
    run_python("""
    import torch
    for f in [lambda d: torch.ones(4, 5, device=d) + torch.ones(3, device=d),
              lambda d: torch.ones(3, dtype=torch.int64, device=d).add_(torch.ones(3, device=d)),
              lambda d: torch.ones(3, device=d).amax(5),
              lambda d: torch.ones(3, device=d) & torch.ones(3, device=d)]:
        try:
            f("cpu")
        except Exception as e:
            expected = (type(e), str(e).split("\\n")[0])
        try:
            f("neuron")
            raise AssertionError("no error on neuron")
        except Exception as e:
            assert isinstance(e, expected[0]) and str(e).startswith(expected[1]), (e, expected)
    # fill_ and zero_ (torch.ones, zeros, full) are kernels too.
    z = torch.full((3, 4), 2.5, device="neuron"); z[:, 1].zero_(); z[0].fill_(7)
    torch.testing.assert_close(z.cpu(), torch.tensor([[7.] * 4, [2.5, 0, 2.5, 2.5], [2.5, 0, 2.5, 2.5]]))
    # The device stays usable.
    assert (torch.ones(2, device="neuron") * 3).sum().item() == 6
    """, env=NATIVE | {"OPENNEURON_CPU_FALLBACK": "silent"})


def test_switched_off_the_fallback_runs():
    run_python("""
    import torch
    x = torch.randn(4).to("neuron")
    torch.testing.assert_close((x * 2).cpu(), x.cpu() * 2)
    assert [r["op"] for r in torch.neuron.fallback_report()] == ["aten::mul.Tensor"]
    assert torch.neuron.eager_kernel_report() == []
    """, env={"OPENNEURON_DRIVER": "protected", "OPENNEURON_CPU_FALLBACK": "silent",
              "OPENNEURON_EAGER_KERNELS": "0"})


def test_softmax_gelu_layer_norm_masked_fill_and_matmul_match_cpu_without_fallback(tmp_path):
    run_python("""
    import torch, torch.nn.functional as F
    torch.manual_seed(0)
    for dt in [torch.float32, torch.float64]:
        for shape, dim in [((4, 7), -1), ((3, 5, 6), 1), ((3, 1), 1), ((2, 3, 4), 0)]:
            a = torch.randn(shape, dtype=dt, requires_grad=True)
            n = a.detach().to("neuron").requires_grad_()
            for f in [F.softmax, F.log_softmax]:
                r, o = f(a, dim), f(n, dim)
                g = torch.randn_like(r)
                torch.testing.assert_close(o.cpu(), r)
                torch.testing.assert_close(torch.autograd.grad(o, n, g.to("neuron"))[0].cpu(),
                                           torch.autograd.grad(r, a, g)[0])
        for approx in ["none", "tanh"]:  # GELU and its backward, as decompositions
            a = torch.randn(5, 7, dtype=dt, requires_grad=True)
            n = a.detach().to("neuron").requires_grad_()
            r, o = F.gelu(a, approximate=approx), F.gelu(n, approximate=approx)
            g = torch.randn_like(r)
            torch.testing.assert_close(o.cpu(), r)
            torch.testing.assert_close(torch.autograd.grad(o, n, g.to("neuron"))[0].cpu(),
                                       torch.autograd.grad(r, a, g)[0])
        # Layer norm (three results; its backward's weight and bias grads are
        # column sums: a graph of several kernels), with and without affine.
        for shape, ns in [((2, 3, 16), (16,)), ((2, 3, 4), (3, 4)), ((5,), (5,))]:
            for affine in [True, False]:
                ts = [torch.randn(shape, dtype=dt)] + ([torch.randn(ns, dtype=dt) for _ in range(2)] if affine else [])
                cpu = [t.clone().requires_grad_() for t in ts]
                dev = [t.to("neuron").requires_grad_() for t in ts]
                r = F.layer_norm(cpu[0], ns, *(cpu[1:] or [None, None]))
                o = F.layer_norm(dev[0], ns, *(dev[1:] or [None, None]))
                torch.testing.assert_close(o.cpu(), r)
                g = torch.randn_like(r)
                for a, c in zip(torch.autograd.grad(o, dev, g.to("neuron")), torch.autograd.grad(r, cpu, g)):
                    torch.testing.assert_close(a.cpu(), c)
        x = torch.randn(4, 6, dtype=dt)
        y = x.to("neuron")
        y.masked_fill_((x[0] > 0).to("neuron"), float("-inf"))
        torch.testing.assert_close(y.cpu(), x.masked_fill(x[0] > 0, float("-inf")))
        # Matmuls, transposed operands without copies, judged against float64
        # (another summation order than the CPU's BLAS, as accurate).
        for sa, sb in [((5, 7), (7, 3)), ((257, 513), (513, 129)), ((4, 0), (0, 6))]:
            a, b = torch.randn(sa, dtype=dt), torch.randn(sb, dtype=dt)
            ref = a.double() @ b.double()
            cpu_err = (a @ b - ref).abs().max().item() if ref.numel() else 0
            for x, y in [(a, b), (a.t().contiguous().t(), b.t().contiguous().t())]:
                out = (x.to("neuron") @ y.to("neuron")).cpu()
                assert (out.double() - ref).abs().max().item() <= 2 * cpu_err + 1e-12 if ref.numel() else out.shape == ref.shape
        bias = torch.randn(3, dtype=dt)
        a, b = torch.randn(5, 7, dtype=dt), torch.randn(7, 3, dtype=dt)
        torch.testing.assert_close(torch.addmm(bias.to("neuron"), a.to("neuron"), b.to("neuron"), beta=0.5, alpha=2).cpu(),
                                   torch.addmm(bias, a, b, beta=0.5, alpha=2))
        A, B = torch.randn(3, 20, 30, dtype=dt), torch.randn(3, 30, 40, dtype=dt)
        torch.testing.assert_close(torch.bmm(A.to("neuron"), B.to("neuron")).cpu(), torch.bmm(A, B))
    assert torch.neuron.fallback_report() == [], torch.neuron.fallback_report()
    assert "aten::mm" in {r["op"] for r in torch.neuron.eager_kernel_report()}
    """, env=NATIVE | {"OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path)})


def test_optimizer_ops_and_foreach_run_natively(tmp_path):
    run_python("""
    import torch
    torch.manual_seed(0)
    a, b, c = torch.randn(5, 3), torch.randn(5, 3), torch.rand(5, 3) + 0.5
    d = lambda t: t.to("neuron")
    torch.testing.assert_close(torch.addcmul(d(a), d(b), d(c), value=0.3).cpu(), torch.addcmul(a, b, c, value=0.3))
    torch.testing.assert_close(torch.addcdiv(d(a), d(b), d(c), value=-0.7).cpu(), torch.addcdiv(a, b, c, value=-0.7))
    for w in [0.1, 0.9]:  # lerp's two formulas, as the CPU picks them
        torch.testing.assert_close(torch.lerp(d(a), d(b), w).cpu(), torch.lerp(a, b, w))
    for o in [2, 1, float("inf"), float("-inf")]:
        torch.testing.assert_close(torch.linalg.vector_norm(d(a), o).cpu(), torch.linalg.vector_norm(a, o))
        torch.testing.assert_close(torch.linalg.vector_norm(d(a), o, dim=1, keepdim=True).cpu(),
                                   torch.linalg.vector_norm(a, o, dim=1, keepdim=True))
    # foreach ops run per tensor on the per-tensor ops' kernels.
    for name, make in [("adamw", lambda p: torch.optim.AdamW(p, lr=0.01, foreach=True)),
                       ("adam", lambda p: torch.optim.Adam(p, lr=0.01, foreach=True)),
                       ("sgd", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, foreach=True))]:
        m1 = torch.nn.Linear(4, 3)
        m2 = torch.nn.Linear(4, 3).to("neuron")
        m2.load_state_dict(m1.state_dict())
        o1, o2 = make(m1.parameters()), make(m2.parameters())
        x = torch.randn(8, 4)
        for _ in range(3):
            m1(x).square().sum().backward(); o1.step(); o1.zero_grad()
            m2(d(x)).square().sum().backward(); o2.step(); o2.zero_grad()
        torch.nn.utils.clip_grad_norm_(m2.parameters(), 1.0)  # _foreach_norm
        torch.testing.assert_close(m2.weight.cpu(), m1.weight.detach(), msg=name)
    assert torch.neuron.fallback_report() == [], torch.neuron.fallback_report()
    """, env=NATIVE | {"OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path)})

"""Adaptive Eager Execution (issue 27): pointwise eager ops are held back and
fused into one kernel when their chain is flushed, with eager semantics kept.
Each test runs in a fresh interpreter, on the protected driver (with
OPENNEURON_CPU_FALLBACK=error where everything must be native) and on host;
results are compared with CPU eager and with fusion turned off."""
import pytest

from conftest import host_path_only, run_python

DRIVERS = {
    "protected": {"OPENNEURON_DRIVER": "protected", "OPENNEURON_CPU_FALLBACK": "error"},
    # (its fused kernels build in the background by default, once a chain
    # repeats; synchronously here so a chain's first run is fused)
    "host": {"OPENNEURON_DRIVER": "host", "OPENNEURON_EAGER_FUSION_BUILDS": "sync"},
    # GLSL kernels on lavapipe, the validation layer on (a message fails the test)
    "vulkan": {"OPENNEURON_DRIVER": "vulkan", "OPENNEURON_VULKAN_VALIDATION": "1", "OPENNEURON_CPU_FALLBACK": "error"},
}

PRELUDE = """
    import threading, torch
    from openneuron import _C
    def stats():
        return _C._eager_fusion_stats()
    def fused_since(before):
        return stats()["fused_kernels"] - before["fused_kernels"]
    torch.manual_seed(0)
    # (at least 8192 elements: smaller calls are not held on host and protected)
    x, y = torch.randn(64, 330), torch.randn(330)
    nx, ny = x.to("neuron"), y.to("neuron")
"""


@pytest.fixture(params=sorted(DRIVERS))
def env(request, tmp_path):
    return DRIVERS[request.param] | {"OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path)}


def test_chain_fuses_into_one_kernel_and_matches_cpu(env):
    run_python(PRELUDE + """
    def f(a, b):
        t = a * 0.5 + b
        return (torch.tanh(t) * t - 1.0).abs()
    s0 = stats()
    r = f(nx, ny)
    assert stats()["held"] > s0["held"]
    out = r.cpu()                        # a host read flushes the chain
    assert fused_since(s0) == 1, stats()
    torch.testing.assert_close(out, f(x, y))
    assert stats()["dead_results"] - s0["dead_results"] >= 4   # intermediates never written
    # Off: the same values op by op (the user switch for bitwise parity).
    _C._set_eager_fusion(False)
    s1 = stats()
    torch.testing.assert_close(f(nx, ny).cpu(), out)
    assert stats()["held"] == s1["held"]
    _C._set_eager_fusion(True)
    """, env=env)


def test_sixteen_bit_chains_round_each_op_as_unfused(env):
    # Each op of a float16/bfloat16 chain rounds its result to the dtype
    # before the next reads it, as when the ops run one by one: fused or
    # not, the values are the CPU's, bitwise (in float32 between ops they
    # differed from it in 61 % of elements).
    run_python(PRELUDE + """
    def f(a, b):
        return ((a * 3.3) * 0.77).sin() * b + (a * a).exp() * 0.5
    for dt in (torch.float16, torch.bfloat16):
        a, b = x.to(dt), y.to(dt)
        s0 = stats()
        out = f(a.to("neuron"), b.to("neuron")).cpu()
        assert fused_since(s0) >= 1, stats()
        assert torch.equal(out, f(a, b)), (dt, (out != f(a, b)).sum())
        _C._set_eager_fusion(False)
        assert torch.equal(f(a.to("neuron"), b.to("neuron")).cpu(), out), dt
        _C._set_eager_fusion(True)
    """, env=env)


def test_trailing_reduction_joins_the_chain(env):
    # A reduction reading a chain's result over its shape is the chain's
    # last call: one kernel, intermediates never written, results still
    # held stored by it (unless costly to compute twice: then the reduction
    # runs after the fused chain).
    run_python(PRELUDE + """
    z = torch.randn(64, 330); nz = z.to("neuron")
    cases = [
        (3, lambda a, b: ((a - b) ** 2).sum()),
        (3, lambda a, b: (a * 2 + b).mean(dim=1)),
        (3, lambda a, b: (a.exp() - 1).amax(dim=0, keepdim=True)),
        (3, lambda a, b: (a.abs() + 1).prod(1)),
        (2, lambda a, b: (a * b).sum(dim=(0, 1), dtype=torch.float64)),
    ]
    for calls, f in cases:
        s0 = stats()
        r = f(nx, nz)
        out = r.cpu()
        assert fused_since(s0) == 1 and stats()["fused_calls"] - s0["fused_calls"] == calls, (stats(), s0)
        assert stats()["dead_results"] - s0["dead_results"] == calls - 1
        torch.testing.assert_close(out, f(x, z))
    s0 = stats()
    t = nx * nz                       # held by the caller: stored by the same kernel
    r = t.sum(-1)
    torch.testing.assert_close(r.cpu(), (x * z).sum(-1))
    torch.testing.assert_close(t.cpu(), x * z)
    assert fused_since(s0) == 1, (stats(), s0)
    s0 = stats()
    e = (nx - 1).exp()                # stored beside the sum, written from its loop
    s = e.sum(-1)
    torch.testing.assert_close(s.cpu(), (x - 1).exp().sum(-1))
    torch.testing.assert_close(e.cpu(), (x - 1).exp())
    assert fused_since(s0) == 1 and stats()["fused_calls"] - s0["fused_calls"] == 3, (stats(), s0)
    w = nx * 1.0; torch.neuron.synchronize()
    s0 = stats()
    w.sub_(1).exp_()                  # stored over what the chain reads, costly to
    s = w.sum(-1)                     # compute twice: the chain runs fused, then the sum
    torch.testing.assert_close(s.cpu(), (x - 1).exp().sum(-1))
    torch.testing.assert_close(w.cpu(), (x - 1).exp())
    assert fused_since(s0) == 1 and stats()["fused_calls"] - s0["fused_calls"] == 2, (stats(), s0)
    # the chain is closed: a pointwise op after the reduction starts another
    r2 = (nx + 1).sum(); q = nx * 3
    torch.testing.assert_close(q.cpu(), x * 3); torch.testing.assert_close(r2.cpu(), (x + 1).sum())
    # a reduction error is raised at its call, the chain before it intact
    c = nx + 1
    try:
        c.sum(dim=5); raise AssertionError("no error")
    except IndexError as e:
        assert "dim" in str(e).lower()
    torch.testing.assert_close(c.cpu(), x + 1)
    """, env=env)


def test_reductions_inside_a_chain(env):
    # A reduction may start a chain and later calls over the chain's shape
    # may read its result (kept with keepdim): a centred variance written as
    # 4 ops is one kernel of passes over each row.
    run_python(PRELUDE + """
    def centred(a, dim):
        c = a - a.mean(dim, keepdim=True)
        return (c * c).sum(dim)
    for a, na in ((x, nx), (x.t(), nx.t()), (x.view(8, 8, 330), nx.view(8, 8, 330))):
        for dim in (0, -1):
            s0 = stats()
            out = centred(na, dim).cpu()
            assert fused_since(s0) == 1 and stats()["fused_calls"] - s0["fused_calls"] == 4, (stats(), s0)
            assert stats()["dead_results"] - s0["dead_results"] == 3
            torch.testing.assert_close(out, centred(a, dim), atol=1e-4, rtol=1e-5)
    # Softmax as 5 ops: its exp is needed after the sum. C++ kernels keep a
    # row of up to 8192 values between passes: one kernel. Where the last
    # pass would compute exp again (GLSL; longer rows), cut after the sum
    # instead, exp stored.
    import os
    keeps_rows = os.environ["OPENNEURON_DRIVER"] != "vulkan"
    def softmax5(a):
        e = torch.exp(a - a.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)
    long_rows = torch.randn(2, 8200)
    for a, na in ((x, nx), (x.t(), nx.t()), (long_rows, long_rows.to("neuron"))):
        s0 = stats()
        out = softmax5(na).cpu()
        in_one = 5 if keeps_rows and a.shape[-1] <= 8192 else 3
        assert fused_since(s0) == 1 and stats()["fused_calls"] - s0["fused_calls"] == in_one, (a.shape, stats(), s0)
        torch.testing.assert_close(out, softmax5(a))
    # A sum over the leading dims (a weight's gradient) beside a value the
    # user holds: one kernel, the value stored by the pass that sums.
    g3, n3, w3 = torch.randn(4, 16, 330), torch.randn(4, 16, 330), torch.randn(330)
    def weight_grad(g, n, w):
        b = (g + 1.0) * w
        return (b * n).sum((0, 1)), b
    s0 = stats()
    got = [t.cpu() for t in weight_grad(g3.to("neuron"), n3.to("neuron"), w3.to("neuron"))]
    assert fused_since(s0) == 1 and stats()["fused_calls"] - s0["fused_calls"] == 4, (stats(), s0)
    for a, b in zip(got, weight_grad(g3, n3, w3)):
        torch.testing.assert_close(a, b)
    # Values the user holds are stored by the same kernel: the row maximum,
    # the exponentials.
    s0 = stats()
    m = nx.amax(1, keepdim=True); e = (nx - m).exp(); r = e / e.sum(1, keepdim=True)
    torch.testing.assert_close(r.cpu(), torch.softmax(x, 1))
    torch.testing.assert_close(m.cpu(), x.amax(1, keepdim=True))
    torch.testing.assert_close(e.cpu(), (x - x.amax(1, keepdim=True)).exp())
    assert fused_since(s0) == 1, (stats(), s0)
    # An in-place call on a tensor the chain then reduces: every pass over
    # the row reads the old values, the store comes after the last (a store
    # in the first pass made the sum's pass scale the values twice).
    for f in (lambda t: torch.logsumexp(t.mul_(0.5), -1), lambda t: torch.softmax(t.mul_(0.5), -1),
              lambda t: (t.add_(1.0) - t.amax(-1, keepdim=True)).exp().sum(-1)):
        a = x.clone(); na = a.to("neuron")
        got = f(na).cpu()
        torch.testing.assert_close(got, f(a))
        torch.testing.assert_close(na.cpu(), a)
    # Reductions over different dims: the chain runs in pieces, right.
    def two_ways(a):
        b = a / a.abs().sum(0, keepdim=True)
        return b.sum(1)
    torch.testing.assert_close(two_ways(nx).cpu(), two_ways(x))
    # A result whose reduced dim was dropped broadcasts along another dim
    # (a square tensor): not read as a row value.
    sq = torch.randn(128, 128); nsq = sq.to("neuron")
    torch.testing.assert_close((nsq * 2 + nsq.sum(-1)).cpu(), sq * 2 + sq.sum(-1))
    torch.testing.assert_close((nsq - nsq.amax(0)).exp().cpu(), (sq - sq.amax(0)).exp())
    # A host read of the row maximum in the middle flushes what is held.
    m = nx.amax(-1, keepdim=True)
    e = (nx - m).exp()
    assert torch.equal(m.cpu(), x.amax(-1, keepdim=True))
    torch.testing.assert_close((e / e.sum(-1, keepdim=True)).cpu(), torch.softmax(x, -1))
    # Errors at the call that causes them, what was held intact.
    m = nx.amax(-1, keepdim=True)
    try:
        (nx - m).sum(dim=7); raise AssertionError("no error")
    except IndexError as err:
        assert "dim" in str(err).lower()
    torch.testing.assert_close(m.cpu(), x.amax(-1, keepdim=True))
    """, env=env)


def test_tiny_calls_are_held_only_where_dispatches_are_costly(env):
    # Below 8192 elements a held call costs more on host and protected than
    # fusion saves: such calls launch their cached kernel directly. A GPU
    # dispatch costs more: there tiny chains are fused too.
    gpu = env["OPENNEURON_DRIVER"] == "vulkan"
    run_python(PRELUDE + f"""
    t = torch.ones(10, device="neuron")
    torch.neuron.synchronize()
    s0 = stats()
    r = (t * 2 + 1).exp()
    assert (stats()["held"] - s0["held"]) == (3 if {gpu} else 0), stats()
    torch.testing.assert_close(r.cpu(), torch.full((10,), 3.0).exp())
    assert fused_since(s0) == (1 if {gpu} else 0), stats()
    """, env=env)


def test_calls_that_do_not_fuse_run_atens_kernel_on_host():
    # On host memory a held call that ran alone takes ATen's CPU kernel, as
    # without fusion: bitwise CPU's values (GELU, a sum, pow, in-place
    # and functional forms; each flushed by a matmul that reads it).
    run_python(PRELUDE + """
    import torch.nn.functional as F
    w = torch.randn(10, 8)
    half = torch.full((64, 330), 0.5)
    cases = [lambda t: F.gelu(t), lambda t: t.sum(0), lambda t: t.pow(3),
             lambda t: torch.sigmoid(t), lambda t: t.relu_(),
             lambda t: torch.ops.aten.gelu_backward(t, half.to(t.device)),  # (out= overload "grad_input")
             lambda t: torch.ops.aten.threshold_backward(t, t, 0.0)]
    for f in cases:
        a = x.clone()
        na = a.to("neuron")
        s0 = stats()
        got = f(na)
        prod = got.reshape(-1, 10)[:4] @ w[:10].to("neuron")  # not fusable: flushes
        assert stats()["held"] > s0["held"] and fused_since(s0) == 0, stats()
        want = f(a)
        assert torch.equal(got.cpu(), want) and torch.equal(prod.cpu(), want.reshape(-1, 10)[:4] @ w[:10])
    """, env=DRIVERS["host"])


def test_cold_chains_run_unfused_while_their_kernel_builds_on_host(tmp_path):
    # On host memory a chain whose kernel is not built yet runs call by call
    # (ATen's kernels: bitwise CPU's values); its kernel builds off the
    # calling thread once the chain repeats (a chain run once costs no
    # compiler process); once built, the same chain runs fused.
    # Deterministic algorithms build synchronously (a run's bits must not
    # depend on the compiler's timing).
    run_python(PRELUDE + """
    def f(a, b):
        return torch.tanh(a * 0.5 + b) * a
    s0 = stats()
    got = f(nx, ny).cpu()
    assert fused_since(s0) == 0 and stats()["awaiting_build"] - s0["awaiting_build"] == 1, stats()
    assert torch.equal(got, f(x, y))
    assert _C._eager_fusion_builds_pending() == 0  # run once: nothing builds
    got = f(nx[1:], ny).cpu()  # the same ops again (any shapes): its kernel builds
    assert fused_since(s0) == 0 and stats()["awaiting_build"] - s0["awaiting_build"] == 2, stats()
    assert torch.equal(got, f(x[1:], y))
    _C._wait_for_eager_fusion_builds()
    assert _C._eager_fusion_builds_pending() == 0
    s1 = stats()
    torch.testing.assert_close(f(nx, ny).cpu(), f(x, y))
    assert fused_since(s1) == 1 and stats()["awaiting_build"] == s1["awaiting_build"], stats()
    torch.use_deterministic_algorithms(True)
    s2 = stats()
    torch.testing.assert_close((nx * 3 - ny).exp().cpu(), (x * 3 - y).exp())
    assert fused_since(s2) == 1, stats()
    """, env={"OPENNEURON_DRIVER": "host", "OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path)})


def test_exit_with_kernels_still_building(tmp_path):
    # A process that ends while chains' kernels build exits cleanly and at
    # once: builds not started are dropped, the running one is waited for.
    import time
    t0 = time.monotonic()
    proc = run_python(PRELUDE + """
    for k in range(24):  # each chain twice: its kernel builds
        (nx * (k // 2 + 2) + ny).sin().cpu()
    assert _C._eager_fusion_builds_pending() > 0
    print("done")
    """, env={"OPENNEURON_DRIVER": "host", "OPENNEURON_COMPILE_CACHE_DIR": str(tmp_path)})
    assert proc.stdout.strip() == "done" and proc.returncode == 0
    assert time.monotonic() - t0 < 60


def test_default_is_on_on_every_driver_and_off_by_switch():
    for driver, switch, expected in (("protected", None, True), ("host", None, True), ("host", "0", False)):
        env = {"OPENNEURON_DRIVER": driver} | ({"OPENNEURON_EAGER_FUSION": switch} if switch else {})
        run_python(PRELUDE + f"""
    assert torch.neuron.is_eager_fusion_enabled() is {expected}
    (nx * 2 + 1).cpu()
    assert (stats()["held"] > 0) is {expected}, stats()
    """, env=env)


@host_path_only  # (sharing device memory across processes needs host-mappable memory)
def test_held_calls_run_before_exit(tmp_path):
    # A spawned process's last in-place writes to shared tensors are held
    # when it exits: they run then, and the parent sees them.
    from test_multiprocessing_sharing import SCRIPT
    proc = run_python(SCRIPT, script_dir=tmp_path, timeout=170)
    assert proc.stdout.splitlines()[1] == "0 [[11.0, 12.0], [14.0, 15.0]] [2.0, 2.0, 2.0, 2.0]"


def test_views_inplace_and_aliasing_see_eager_values(env):
    run_python(PRELUDE + """
    a, na = x.clone(), nx.clone()
    # In-place chain on one tensor, then a read through a view of it.
    a.mul_(2).add_(1).sin_(); na.mul_(2).add_(1).sin_()
    torch.testing.assert_close(na[:, 3].cpu(), a[:, 3])
    # An intermediate the user keeps is written; a view taken mid-chain sees it.
    t = nx + 1; v = t[:, :5]; u = t * 3; t.add_(10)
    torch.testing.assert_close(v.cpu(), (x + 11)[:, :5])
    torch.testing.assert_close(u.cpu(), (x + 1) * 3)
    # A view of held memory read by a later op (another view): eager values.
    b, nb = x.clone(), nx.clone()
    b.mul_(3); nb.mul_(3)
    c = b.t() + 1; nc = nb.t() + 1
    b.add_(5); nb.add_(5)
    torch.testing.assert_close(nc.cpu(), c)
    torch.testing.assert_close(nb.cpu(), b)
    # An in-place view op between held calls (metadata changes later).
    w = nx * 2; w2 = w + 1; w.t_()
    torch.testing.assert_close(w2.cpu(), x * 2 + 1)
    torch.testing.assert_close(w.cpu(), (x * 2).t())
    # Casts join chains.
    h = (nx * 2).half() + 1
    torch.testing.assert_close(h.cpu(), (x * 2).half() + 1)
    """, env=env)


def test_errors_raise_at_the_op_that_causes_them(env):
    run_python(PRELUDE + """
    t = nx * 2
    u = t + 1
    try:
        t + torch.ones(5, device="neuron")      # a shape error mid-chain
    except RuntimeError as e:
        assert "must match" in str(e), e
    else:
        raise AssertionError("no error")
    idx = torch.tensor([0, 99], device="neuron")
    v = u.exp()
    try:
        torch.index_select(v, 0, idx)            # an out-of-range index after a chain
        torch.neuron.synchronize()
    except (RuntimeError, IndexError) as e:
        assert "index" in str(e).lower(), e
    else:
        raise AssertionError("no error")
    torch.testing.assert_close(v.cpu(), (x * 2 + 1).exp())  # the chain's values are intact
    """, env=env | {"OPENNEURON_CPU_FALLBACK": "silent"})


def test_autograd_no_grad_hooks_and_streams(env):
    run_python(PRELUDE + """
    # Autograd through fused ops: gradients match CPU.
    xa, na_ = x.clone().requires_grad_(), nx.clone().requires_grad_()
    seen = []
    na_.register_hook(lambda g: seen.append(g.shape))
    def f(a):
        t = torch.exp(a * 0.5) * a + 0.25
        return (t * t).sum()
    f(xa).backward(); f(na_).backward()
    torch.testing.assert_close(na_.grad.cpu(), xa.grad)
    assert seen == [x.shape]
    with torch.no_grad():
        r = (nx * 3).relu() - 1
    torch.testing.assert_close(r.cpu(), (x * 3).relu() - 1)
    # A chain on a side stream: the default stream waits for it by event.
    s = torch.neuron.Stream()
    with torch.neuron.stream(s):
        z = (nx + 1) * 2
    torch.neuron.current_stream().wait_stream(s)
    torch.testing.assert_close(z.cpu(), (x + 1) * 2)
    # Many threads on one device: each one's chain gives its own values.
    errors = []
    def work(k):
        try:
            for _ in range(20):
                out = ((nx + k) * 2).sin().cpu()
                torch.testing.assert_close(out, ((x + k) * 2).sin())
        except Exception as e:
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    assert not errors, errors
    """, env=env)


def test_fused_kernels_are_cached_per_chain_not_per_shape(env):
    run_python(PRELUDE + """
    torch.neuron.reset_eager_kernel_report()
    for n in (300, 1000, 3000):
        a = torch.randn(n, 30).to("neuron")
        (torch.exp(a) * 2 + 1).cpu()
    fused = [r for r in torch.neuron.eager_kernel_report() if r["op"].startswith("fused")]
    assert len(fused) == 1 and fused[0]["kernels"] == 1 and fused[0]["launches"] == 3, fused
    """, env=env)


def test_repeated_chains_reuse_their_plan_with_this_calls_values(env):
    # A chain run again with the same metadata reuses its plan (kernel,
    # symbols, operands' places); anything the graph depends on must give
    # another plan: Python numbers, which tensors alias, which results are
    # still held, the tensors themselves.
    run_python(PRELUDE + """
    z = torch.randn(64, 330); nz = z.to("neuron")
    def f(a, b, s):
        return (a * s + b).abs() - s
    for s in (0.5, 2.0, 0.5, -3.0):                  # numbers change between runs
        torch.testing.assert_close(f(nx, nz, s).cpu(), f(x, z, s))
    for a, b, ca, cb in ((nx, nz, x, z), (nx, nx, x, x), (nz, nx, z, x), (nz, nz, z, z)):
        torch.testing.assert_close(f(a, b, 1.5).cpu(), f(ca, cb, 1.5))   # aliasing changes
    for keep in (False, True, False):                # intermediate held or not
        t = nx * 3.0
        u = (t + nz).relu()
        torch.testing.assert_close(u.cpu(), (x * 3.0 + z).relu())
        if keep:
            torch.testing.assert_close(t.cpu(), x * 3.0)
    for i in range(3):                               # in place on a fresh tensor each time
        w = nx.clone(); cw = x.clone()
        w.mul_(i + 1.0).add_(nz).sub_(0.25)
        cw.mul_(i + 1.0).add_(z).sub_(0.25)
        torch.testing.assert_close(w.cpu(), cw)
    s0 = stats()
    for _ in range(5):
        f(nx, nz, 0.5).cpu()
    assert fused_since(s0) == 5, stats()
    """, env=env)

"""torch.compile(backend="neuron"): registration, correctness against eager
(forward and backward), dtypes, views, extern kernels inside graphs, dynamic
shapes, the persistent kernel cache, the failure policy and debug dumps."""

import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

import openneuron.compiler as compiler

DEV = "neuron"
# Tests of what the C++ target's code looks like (loops, vector code).
CPP_ONLY = pytest.mark.skipif(
    torch.neuron.get_device_properties(0).kernel_target != "cpp",
    reason="checks the C++ target's generated code")


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENNEURON_COMPILE_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "torch"))  # AOTAutograd's graph cache
    torch._dynamo.reset()
    compiler.reset_metrics()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()


def compiled(fn, **kw):
    return torch.compile(fn, backend="neuron", fullgraph=True, **kw)


def check(fn, *args, atol=1e-5, rtol=1e-5, grad=False, **kw):
    args_e = [a.detach().clone().requires_grad_(grad and a.is_floating_point()) for a in args]
    args_c = [a.detach().clone().requires_grad_(grad and a.is_floating_point()) for a in args]
    expected = fn(*args_e)
    got = compiled(fn, **kw)(*args_c)
    torch.testing.assert_close(got, expected, atol=atol, rtol=rtol)
    if grad:
        outs_e = expected if isinstance(expected, (tuple, list)) else [expected]
        outs_c = got if isinstance(got, (tuple, list)) else [got]
        sum(o.float().sum() * (i + 1) for i, o in enumerate(outs_e)).backward()
        sum(o.float().sum() * (i + 1) for i, o in enumerate(outs_c)).backward()
        for a_e, a_c in zip(args_e, args_c):
            if a_e.requires_grad:
                torch.testing.assert_close(a_c.grad, a_e.grad, atol=atol * 10, rtol=rtol * 10)
    return got


def test_backend_found_by_name_after_import_torch_alone(tmp_path):
    code = (
        "import torch\n"
        "f = torch.compile(lambda x: (x * 2 + 1).relu(), backend='neuron')\n"
        "x = torch.randn(8, device='neuron')\n"
        "assert torch.equal(f(x), (x * 2 + 1).relu())\n"
        "import openneuron.compiler as c; assert c.metrics()['kernels'] >= 1, c.metrics()\n"
        "from torch._dynamo.device_interface import get_interface_for_device\n"
        "assert get_interface_for_device('neuron').device_count() >= 1\n"
    )
    env = dict(os.environ, OPENNEURON_COMPILE_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


def test_small_kernels_in_a_row_are_launched_together():
    # Twelve kernels (shapes that cannot fuse); the big one in the middle
    # keeps a launch of its own.
    xs = [torch.randn(i + 1, 3, device=DEV) for i in range(12)]
    xs[6] = torch.randn(300, 300, device=DEV)
    check(lambda *xs: [x.sin() * 2 for x in xs], *xs)
    m = compiler.metrics()
    # Only the C++ target combines launches (GLSL shaders are separate programs).
    combines = torch.neuron.get_device_properties(0).kernel_target == "cpp"
    assert m["kernels"] == 12 and m["kernel_launches"] == (3 if combines else 12), m


def test_pointwise_chain_is_one_kernel():
    x = torch.randn(64, 33, device=DEV)
    check(lambda x: torch.sigmoid(x * 2 - 1).tanh() + x.abs().sqrt(), x)
    m = compiler.metrics()
    assert m["graphs"] == 1 and m["kernels"] == 1, m


@pytest.mark.parametrize("seq", [1, 5])
def test_layernorm_feeding_a_linear_is_one_kernel(seq):
    # The normalised rows, flattened for the matmul, are stored by the kernel
    # that computes mean and variance (also with a size-1 dim between the
    # rows and the reduced dim, as in one-token decoding).
    x = torch.randn(2, seq, 32, device=DEV)
    ln = torch.nn.LayerNorm(32).to(DEV)
    w = torch.randn(16, 32, device=DEV)
    with torch.no_grad():  # the forward alone (with grad, the backward is compiled along)
        check(lambda x: F.linear(ln(x).reshape(-1, 32), w), x, atol=1e-5, rtol=1e-5)
    m = compiler.metrics()
    assert m["graphs"] == 1 and m["kernels"] == 1, m


def test_gelu_layernorm_softmax_forward_backward():
    x = torch.randn(16, 40, device=DEV)
    w = torch.randn(40, device=DEV)
    b = torch.randn(40, device=DEV)
    check(lambda x, w, b: F.gelu(F.layer_norm(x, (40,), w, b)).softmax(-1), x, w, b, grad=True, atol=1e-5)


def _against_cpu(fn, *args, grad_of, dynamic=False, atol=1e-5, rtol=1e-5):
    """fn compiled for neuron (no op through an eager kernel) against fn on
    CPU in float32 at least (CPU's own bfloat16 kernels round more than
    ours); the gradients of the args whose index is in `grad_of`."""
    def run(device, f, dtype=None):
        xs = [a.detach().to(device, dtype or a.dtype, copy=True).requires_grad_(i in grad_of) if a is not None
              else None for i, a in enumerate(args)]
        out = f(*xs)
        out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(device, out.dtype))
        return [out] + [xs[i].grad for i in sorted(grad_of)]

    low = args[0].dtype in (torch.float16, torch.bfloat16)
    expected = [e.to(args[0].dtype) for e in run("cpu", fn, torch.float32 if low else None)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", compiler.CompileFallbackWarning)
        got = run(DEV, torch.compile(fn, backend="neuron", dynamic=dynamic))
    for g, e in zip(got, expected):
        torch.testing.assert_close(g.cpu(), e, atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("weight,bias", [(True, True), (False, False), (True, False), (False, True)])
def test_layer_norm_and_its_backward_are_lowered_by_the_compiler(dtype, weight, bias):
    # Lowered in lower.cc (PyTorch's decomposition costs AOTAutograd's trace
    # milliseconds a call): every output mask, against CPU.
    from openneuron.compiler.backend import decompositions

    assert torch.ops.aten.native_layer_norm_backward.default not in decompositions()
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=3e-2, rtol=3e-2)
    x = torch.randn(3, 5, 24, dtype=dtype) * 2 + 1
    w = torch.randn(24, dtype=dtype) if weight else None
    b = torch.randn(24, dtype=dtype) if bias else None
    params = {i for i, t in ((1, w), (2, b)) if t is not None}

    def ln(x, w, b):
        return F.layer_norm(x, (24,), w, b, eps=1e-5) * 1.5

    _against_cpu(ln, x, w, b, grad_of={0} | params, **tol)
    _against_cpu(ln, x, w, b, grad_of=params or {0}, **tol)  # no grad for x (unless nothing else has one)
    torch._dynamo.reset()
    _against_cpu(lambda x, w, b: F.layer_norm(x, (5, 24), None if w is None else w.expand(5, 24),
                                              None if b is None else b.expand(5, 24)),
                 x, w, b, grad_of={0} | params, **tol)


def test_transposes_of_every_rank_are_lowered():
    # transpose and t are lowered, not decomposed: 0-dim and 1-dim tensors
    # (their transposes are themselves), negative dims, gradients.
    for fn, shape in [(lambda x: x.transpose(0, 0) * 2, ()), (lambda x: x.t() + 1, (5,)),
                      (lambda x: x.t() + 1, ()), (lambda x: x.transpose(-1, 0).sin(), (3, 4)),
                      (lambda x: x.mT.exp() @ x, (2, 3, 3))]:
        torch._dynamo.reset()
        _against_cpu(fn, torch.randn(shape), grad_of={0}, atol=1e-5, rtol=1e-5)


def test_select_backward_is_lowered_by_the_compiler():
    # x[:, i]'s gradient is a pad of the incoming one (no decomposition
    # into new_zeros and select_scatter); negative indices on symbolic sizes.
    x = torch.randn(6, 7, 3)
    _against_cpu(lambda x: x[:, 0] * 2 + x[:, -1].sin() + x.unbind(2)[1].exp().sum(1, keepdim=True), x, grad_of={0})
    torch._dynamo.reset()
    for n in (7, 9):
        _against_cpu(lambda x: x[:, -2].cos() * x[1:, 3].sum(), torch.randn(5, n), grad_of={0}, dynamic=True)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool])
def test_dtypes_are_kept(dtype):
    if dtype == torch.bool:
        x = torch.rand(10, 7, device=DEV) > 0.5
        y = torch.rand(10, 7, device=DEV) > 0.5
        out = check(lambda x, y: (x & ~y) | (x ^ y), x, y)
    elif dtype.is_floating_point:
        x = torch.randn(10, 7, device=DEV, dtype=dtype)
        # Eager rounds every op to 16 bits; fused kernels keep float32 inside.
        tol = 1e-12 if dtype == torch.float64 else 3e-2
        out = check(lambda x: (x * 3).exp().sum(-1) / x.abs().amax(), x, atol=tol, rtol=tol)
    else:
        x = torch.randint(-50, 50, (10, 7), device=DEV, dtype=dtype)
        out = check(lambda x: (x * 3 - 7) // 4 + x % 5 + x.sum(0, keepdim=True), x, atol=0, rtol=0)
    if dtype.is_floating_point or dtype == torch.bool:
        assert out.dtype == dtype


@pytest.mark.parametrize("dtype,big", [(torch.uint8, 200), (torch.int8, 100), (torch.int16, 30000),
                                       (torch.int32, 2**31 - 5)])
def test_narrow_integers_wrap_inside_fused_kernels(dtype, big):
    """A narrower integer's arithmetic wraps to its type inside a fused
    kernel, as the CPU's does, also when the result is only cast on (held
    as int64 in the kernel, uint8 200 + 200 came out as 400, not 144); so do
    casts from float into it."""
    x = torch.tensor([big, -big if dtype.is_signed else 1, 7, 3] * 64, dtype=dtype, device=DEV)
    check(lambda x: (x + x).float() * 0.5, x, atol=0, rtol=0)
    check(lambda x: (x * x - x).to(torch.float64).sum(), x, atol=0, rtol=0)
    check(lambda x: (-x).to(torch.int64) + 1, x, atol=0, rtol=0)
    f = torch.tensor([300.0, -1.0, 255.5, 3.7] * 64, device=DEV)
    check(lambda f: (f + 1).to(dtype).to(torch.float32), f, atol=0, rtol=0)


def test_float64_is_not_narrowed():
    x = torch.full((4,), 1.0, dtype=torch.float64, device=DEV)
    out = compiled(lambda x: x + 1e-12)(x)
    assert out.dtype == torch.float64 and bool((out - 1.0 > 0).all())


def test_views_and_broadcasting():
    x = torch.randn(6, 5, 4, device=DEV)
    y = torch.randn(4, device=DEV)
    check(lambda x, y: (x.transpose(0, 2) * 2)[1:, ::2] + y[None, :3, None], x, y)
    check(lambda x: x.permute(2, 0, 1).reshape(4, 30).sum(1) + x.view(-1)[:4], x)
    check(lambda x: x[:, 2] - x.unsqueeze(0).expand(3, 6, 5, 4).mean(0)[:, 1], x)


def test_views_with_storage_offsets_from_externs():
    # split -> view -> transpose: the parts start at storage offsets.
    qkv = torch.randn(2, 8, 3 * 12, device=DEV)

    def f(t):
        q, k, v = t.split(12, dim=2)
        q, k, v = (u.view(2, 8, 3, 4).transpose(1, 2) for u in (q, k, v))
        return (q @ k.transpose(-2, -1)).softmax(-1) @ v, k * 2, v.reshape(2, 3, 32) + 1

    check(f, qkv, grad=True, atol=1e-5)


def test_demo_model_trains_like_eager():
    import importlib.util

    spec = importlib.util.spec_from_file_location("train_gpt", os.path.join(os.path.dirname(__file__), "../../demo/train_gpt.py"))
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    cfg_cls = [v for k, v in vars(demo).items() if k.endswith("Config") and isinstance(v, type)][0]
    cfg = cfg_cls(n_layer=2, n_embd=48, n_head=4, block_size=32)
    losses = {}
    for mode in ("eager", "compiled"):
        torch.manual_seed(0)
        model = demo.GPT(cfg).to(DEV)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        step_model = torch.compile(model, backend="neuron") if mode == "compiled" else model
        g = torch.Generator().manual_seed(1)
        losses[mode] = []
        for _ in range(8):
            idx = torch.randint(0, cfg.vocab_size, (4, cfg.block_size), generator=g).to(DEV)
            _, loss = step_model(idx, idx.roll(1, 1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[mode].append(loss.item())
    assert max(abs(a - b) for a, b in zip(losses["eager"], losses["compiled"])) < 1e-4, losses


def test_reduction_broadcast_along_another_dim():
    # sum over rows, broadcast back along columns: not the row being reduced.
    x = torch.randn(8, 8, device=DEV)
    check(lambda x: (x.sum(1) / (x.sin().abs() + 1), x.sum(1, keepdim=True).t() * x), x)


def test_reductions():
    x = torch.randn(7, 9, 11, device=DEV)
    check(lambda x: (x.sum(), x.mean((0, 2)), x.amax(1), x.amin(-1, keepdim=True), x.var(1), x.std(0)), x)
    check(lambda x: (x.logsumexp(-1), F.log_softmax(x, 1), x.prod(2)), x, atol=1e-4, rtol=1e-4)


def test_extern_kernels_inside_the_graph():
    x = torch.randn(8, 16, device=DEV)
    w = torch.randn(32, 16, device=DEV)
    b = torch.randn(32, device=DEV)
    check(lambda x, w, b: F.relu(F.linear(x, w, b)).softmax(-1) @ w, x, w, b, grad=True, atol=1e-4, rtol=1e-4)
    m = compiler.metrics()
    assert m["graphs"] == 2 and m["graphs_fallback"] == 0, m
    assert any("mm" in op for op in m["extern_ops"]), m


def test_dynamic_shapes_compile_once():
    # (Rows of symbolic length keep their exp values between passes when they
    # fit the kernel's row arrays, 8192 values, and compute them again when
    # they do not: both sides of that bound.)
    f = torch.compile(lambda x: (x * x).softmax(-1) + 1, backend="neuron", dynamic=True)
    for rows, cols in ((8, 11), (17, 20), (33, 36), (64, 67), (3, 8192), (3, 8193), (2, 20000)):
        x = torch.randn(rows, cols, device=DEV)
        # (against float64: ATen's float32 softmax is off by up to 4e-6 on 20000-wide rows)
        want = (x.cpu().double() ** 2).softmax(-1) + 1
        torch.testing.assert_close(f(x).cpu(), want.float())
    assert compiler.metrics()["graphs"] == 1, compiler.metrics()


def test_automatic_dynamic_shapes():
    f = torch.compile(lambda x: x.sin() * 2, backend="neuron")
    for n in (5, 6, 7, 8, 9):
        x = torch.randn(n, device=DEV)
        torch.testing.assert_close(f(x), x.sin() * 2)
    # Static for the first size, then one dynamic graph for all others.
    assert compiler.metrics()["graphs"] == 2, compiler.metrics()


def test_tensor_constants_created_in_forward():
    # AOTAutograd lifts tensors made inside forward into get_attr constants.
    with warnings.catch_warnings():
        warnings.simplefilter("error", compiler.CompileFallbackWarning)
        x = torch.randn(3, 2, device=DEV)
        check(lambda x: x * torch.tensor([2.0, 3.0], device=x.device) + torch.tensor(1.5, device=x.device), x,
              grad=True)
    assert compiler.metrics()["graphs_fallback"] == 0, compiler.metrics()


def test_attention_is_the_fused_flash_kernel():
    q, k, v = (torch.randn(2, 3, 16, 8, device=DEV) for _ in range(3))
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True).sin(), q, k, v, grad=True,
          atol=1e-4, rtol=1e-4)
    # q, k, v as transposed views of one projection (as in GPT-2): the kernel
    # picks its output layout from q's, which the compiled graph must match.
    x, w = torch.randn(2, 8, 64, device=DEV), torch.randn(64, 192, device=DEV)

    def attention(x, w):
        q, k, v = (t.view(2, 8, 4, 16).transpose(1, 2) for t in (x @ w).split(64, dim=2))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 8, 64)

    check(attention, x, w, grad=True, atol=1e-4, rtol=1e-4)
    ops = compiler.metrics()["extern_ops"]
    if os.environ.get("OPENNEURON_DRIVER") in ("protected", "vulkan"):
        # Memory the host cannot address: the math path, compiled into kernels.
        assert not any("flash_attention" in op for op in ops), ops
    else:
        assert "aten._scaled_dot_product_flash_attention_for_cpu.default" in ops, ops
        assert "aten._scaled_dot_product_flash_attention_for_cpu_backward.default" in ops, ops


_INPLACE_CASES = {
    # Each input update is a store of the kernel that computes it: no extern copy.
    "chained updates": (lambda x, y: (x.mul_(2).add_(y), y.sub_(1), (x * y).sum())[2], True),
    "update with cast and broadcast": (lambda x, y: (x.copy_(y[0].double() * 3), x.sum())[1], True),
    # Reads of the old value at another element (a transpose) or after the
    # store's kernel (a later update reading it): those copies stay externs.
    "transposed read": (lambda x, y: (x.copy_(x.t() * 2 + 1), x.mean())[1], False),
    "read by a later update": (lambda x, y: (y[0].add_(x[1]), x.mul_(2), y.sum())[2], False),
}


@pytest.mark.parametrize("case", list(_INPLACE_CASES))
@torch.no_grad()
def test_updates_of_inputs_are_written_in_place(case):
    fn, all_stores = _INPLACE_CASES[case]
    x, y = torch.randn(5, 5), torch.randn(5, 5)
    x_e, y_e = x.clone(), y.clone()
    expected = fn(x_e, y_e)
    x_c, y_c = x.to(DEV), y.to(DEV)
    got = compiled(fn)(x_c, y_c)
    torch.testing.assert_close(got.cpu(), expected)
    torch.testing.assert_close(x_c.cpu(), x_e)
    torch.testing.assert_close(y_c.cpu(), y_e)
    extern_ops = compiler.metrics()["extern_ops"]
    assert ("aten.copy_.default" not in extern_ops) == all_stores, extern_ops


@torch.no_grad()
def test_input_updated_through_index_copy_is_updated_in_place():
    # A static KV cache: the functionalized index_put + copy_ back becomes index_put_.
    def step(cache, pos, v):
        cache.index_copy_(1, pos, v)
        return cache.sum(1) * 2

    f = torch.compile(step, backend="neuron")
    cache, ref = torch.zeros(2, 8, 4, device=DEV), torch.zeros(2, 8, 4)
    for i in range(3):
        pos, v = torch.tensor([i]), torch.randn(2, 1, 4)
        torch.testing.assert_close(f(cache, pos.to(DEV), v.to(DEV)).cpu(), step(ref, pos, v))
        torch.testing.assert_close(cache.cpu(), ref)
    assert "aten.index_put_.default" in compiler.metrics()["extern_ops"], compiler.metrics()


def test_symbolic_int_scalars_are_kernel_arguments():
    # A SymInt operand (a size, a Python int marked dynamic) is evaluated in
    # the kernel, not a reason to run the op eagerly.
    def f(x, n):
        return (x + n) * (n - 1), torch.full((3,), n, device=x.device) * 2, x.clamp(min=n - 5)

    cf = torch.compile(f, backend="neuron", dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", compiler.CompileFallbackWarning)
        for n in (3, 4, 7):
            x = torch.arange(6.0, device=DEV).reshape(2, 3)
            torch.testing.assert_close(cf(x, n), f(x, n))
    assert compiler.metrics()["graphs"] == 1, compiler.metrics()


def test_recompile_logs_the_failed_guard(caplog):
    f = torch.compile(lambda x, scale: x * scale, backend="neuron")
    x = torch.randn(4, device=DEV)
    f(x, 2.0)
    assert compiler.metrics()["recompiles"] == 0
    with caplog.at_level("INFO", logger="openneuron.compiler"):
        torch.testing.assert_close(f(x.to(torch.float64), 2.0), x.double() * 2)
    m = compiler.metrics()
    assert m["recompiles"] == 1, m
    reason = m["recompile_reasons"][0]["reason"]
    assert "dtype" in reason or "float" in reason.lower(), reason  # the tensor-match guard on x
    assert any("because a guard failed" in r.getMessage() and reason in r.getMessage() for r in caplog.records)


def test_persistent_cache_is_hit_by_a_new_process(tmp_path):
    code = (
        "import torch, openneuron.compiler as c\n"
        "f = torch.compile(lambda x: (x.cos() * 3).sum(-1), backend='neuron')\n"
        "f(torch.randn(4, 5, device='neuron'))\n"
        "m = c.metrics(); print(m['cache_hits'], m['cache_misses'])\n"
    )
    env = dict(os.environ, OPENNEURON_COMPILE_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-3000:]
    assert runs[0].stdout.split() == ["0", "1"], runs[0].stdout
    assert runs[1].stdout.split() == ["1", "0"], runs[1].stdout


def test_new_process_loads_forward_and_backward_from_aotautograds_cache(tmp_path):
    # A warm start skips AOTAutograd's tracing and our lowering to Python:
    # the saved wrappers run with kernels the kernel cache verified.
    code = (
        "import torch, openneuron.compiler as c\n"
        "torch.manual_seed(0)\n"
        "m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.LayerNorm(8)).to('neuron')\n"
        "x = torch.randn(4, 8, device='neuron')\n"
        "torch.compile(m, backend='neuron')(x).square().sum().backward()\n"
        "g = m[0].weight.grad.cpu(); m.zero_grad(); m(x).square().sum().backward()\n"
        # atol: eager's own float32 gradient is 1e-5 off float64's here
        # (compiled sums accumulate in double: 2e-6 off).
        "assert torch.allclose(g, m[0].weight.grad.cpu(), atol=5e-5), (g, m[0].weight.grad)\n"
        "k = c.metrics(); print(k['graphs'], k['graphs_loaded'], k['cache_hits'])\n"
    )
    env = dict(os.environ, OPENNEURON_COMPILE_CACHE_DIR=str(tmp_path / "kernels"),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "torch"))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-3000:]
    assert runs[0].stdout.split() == ["2", "0", "0"], runs[0].stdout
    assert runs[1].stdout.split() == ["2", "2", "2"], runs[1].stdout
    env["OPENNEURON_COMPILE_GRAPH_CACHE"] = "0"  # the switch: traced and compiled again
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.split() == ["2", "0", "2"], (r.stdout, r.stderr[-3000:])


def test_graph_cache_key_needs_no_inductor_code_generators(tmp_path):
    # Neither compiling nor loading a neuron graph imports Inductor's code
    # generators (~0.7 s of every warm start), and the key is the same in a
    # process that has registered them (one that also used Inductor): a hit.
    code = (
        "import sys, torch, openneuron.compiler as c\n"
        "if sys.argv[1] == 'inductor_first':\n"
        "    from torch._inductor.codegen.common import init_backend_registration\n"
        "    init_backend_registration()\n"
        "x = torch.randn(4, 8, device='neuron')\n"
        "y = torch.compile(lambda x: (x * 2).softmax(-1), backend='neuron')(x)\n"
        "assert torch.allclose(y, (x * 2).softmax(-1))\n"
        "print(c.metrics()['graphs_loaded'], 'torch._inductor.codegen.cpp' in sys.modules)\n"
    )
    env = dict(os.environ, OPENNEURON_COMPILE_CACHE_DIR=str(tmp_path / "kernels"),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "torch"))
    outputs = []
    for mode in ("plain", "plain", "inductor_first"):
        r = subprocess.run([sys.executable, "-c", code, mode], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        outputs.append(r.stdout.split())
    assert outputs == [["0", "False"], ["1", "False"], ["1", "True"]], outputs


def test_corrupt_cache_entry_is_rebuilt(tmp_path, monkeypatch):
    f = lambda x: (x + 1).exp()  # noqa: E731
    x = torch.randn(5, device=DEV)
    compiled(f)(x)
    # The kernel library; the other entry is the kernel's (its library's digest).
    entries = [p for p in os.listdir(tmp_path / "kernels") if p.endswith(".so")
               and not re.fullmatch(rb"[0-9a-f]{64}", (tmp_path / "kernels" / p).read_bytes())]
    assert len(entries) == 1
    path = tmp_path / "kernels" / entries[0]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    # Replace the file rather than write into it: this process has it mapped.
    tmp = path.with_suffix(".corrupt")
    tmp.write_bytes(bytes(data))
    os.replace(tmp, path)
    # A fresh compile of the same graph in this process: the library is
    # cached by content, so use another process to load it again.
    code = (
        "import torch, openneuron.compiler as c\n"
        "f = torch.compile(lambda x: (x + 1).exp(), backend='neuron')\n"
        "x = torch.randn(5, device='neuron'); assert torch.allclose(f(x), (x + 1).exp())\n"
        "print(c.metrics()['cache_misses'])\n"
    )
    env = dict(os.environ, OPENNEURON_COMPILE_CACHE_DIR=str(tmp_path / "kernels"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["1"]


def test_unsupported_op_warns_and_strict_raises(monkeypatch):
    x = torch.randn(4, 3, dtype=torch.complex64, device=DEV)
    f = lambda x: x * 2 + 1  # noqa: E731
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        torch.testing.assert_close(compiled(f)(x), f(x))
    msgs = [str(m.message) for m in w if issubclass(m.category, compiler.CompileFallbackWarning)]
    assert msgs and "aten.mul" in msgs[0] and "complex" in msgs[0], msgs
    torch._dynamo.reset()
    monkeypatch.setenv("OPENNEURON_COMPILE_STRICT", "1")
    with pytest.raises(Exception, match="complex"):
        compiled(f)(x)


def test_debug_dump(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENNEURON_COMPILE_DEBUG", str(tmp_path / "dump"))
    compiled(lambda x: x.relu() * 2)(torch.randn(3, device=DEV))
    [graph] = os.listdir(tmp_path / "dump")
    files = set(os.listdir(tmp_path / "dump" / graph))
    assert {"fx_graph.txt", "ir_before.txt", "ir_after.txt", "kernels.cpp", "wrapper.py", "plan.json"} <= files
    # Kernels are named after their content (identical kernels are one).
    assert re.search(r"\bon_k[0-9a-f]{24}\b", (tmp_path / "dump" / graph / "kernels.cpp").read_text())
    json.loads((tmp_path / "dump" / graph / "plan.json").read_text())


def test_kernels_respect_stream_order():
    s = torch.neuron.Stream()
    x = torch.randn(1000, device=DEV)
    f = compiled(lambda x: x * 2)
    with torch.neuron.stream(s):
        y = x + 1
        z = f(y)
    s.synchronize()
    torch.testing.assert_close(z, (x + 1) * 2)


def test_backward_of_a_strided_view_output():
    # The tangent of a strided-view output arrives compact, not in the
    # traced layout (storage offset 5, stride 8): the compiled backward
    # re-lays it out instead of indexing past its storage (fuzzer seed 503).
    def fn(x):
        v = torch.sigmoid(x.exp().exp())[:, -3:-1:2]
        return v.flatten(0), v != x.exp()

    x = torch.rand(7, 8) * 4 - 2
    xn = x.to(DEV).requires_grad_()
    xc = x.clone().requires_grad_()
    out, mask = torch.compile(fn, backend="neuron")(xn)
    ref, ref_mask = fn(xc)
    torch.testing.assert_close(out.cpu(), ref)
    assert torch.equal(mask.cpu(), ref_mask)
    w = torch.rand(7)
    (out * w.to(DEV)).sum().backward()
    (ref * w).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_integer_pow_is_generated_and_matches_eager(dtype):
    # Squaring with wrap-around, negative exponents 0 except for bases +-1.
    low = 0 if dtype == torch.uint8 else -3
    g = torch.Generator().manual_seed(0)
    a = torch.randint(low, 6, (500,), generator=g).to(dtype)
    b = torch.randint(low, 40, (500,), generator=g).to(dtype)
    before = compiler.metrics()["extern_ops"].get("aten.pow.Tensor_Tensor", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", compiler.CompileFallbackWarning)
        out = torch.compile(lambda x, y: torch.pow(x, y) + x ** 3, backend="neuron")(a.to(DEV), b.to(DEV))
    assert torch.equal(out.cpu(), torch.pow(a, b) + a ** 3)
    assert compiler.metrics()["extern_ops"].get("aten.pow.Tensor_Tensor", 0) == before


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_float_pow_by_a_special_exponent_is_computed_as_eager(dtype, tmp_path, monkeypatch):
    # ATen computes x**2, x**3, x**-2 by multiplying and x**.5, x**-.5, x**-1
    # as sqrt, rsqrt, reciprocal; so do kernels (no pow call: GELU's tanh form
    # has x**3). Other exponents still compute pow.
    monkeypatch.setenv("OPENNEURON_COMPILE_DEBUG", str(tmp_path / "dump"))
    x = (torch.rand(300, device=DEV, dtype=torch.float64) * 6 + 0.1).to(dtype)
    fn = lambda x: (x ** 2, x ** 3, x ** -2, x ** 0.5, x ** -0.5, x ** -1.0)  # noqa: E731
    tol = {torch.bfloat16: 1e-2, torch.float32: 3e-7, torch.float64: 1e-15}[dtype]
    with warnings.catch_warnings():
        warnings.simplefilter("error", compiler.CompileFallbackWarning)
        got = compiled(fn)(x)
    for g, e in zip(got, fn(x)):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e, atol=0, rtol=tol)
    if dtype != torch.bfloat16:
        assert torch.equal(got[1], x * x * x) and torch.equal(got[2], 1 / (x * x))
    sources = [f.read_text() for f in (tmp_path / "dump").rglob("kernels.cpp")]
    # After the prelude (which defines on_pow), the kernels: no on_pow call.
    assert sources and not any("on_pow(" in re.split(r"\bon_k[0-9a-f]{24}\b", s, 1)[1] for s in sources)
    check(lambda x: x ** 1.7, x.abs(), atol=tol, rtol=tol * 10)


@CPP_ONLY
def test_small_image_planes_share_one_loop(tmp_path, monkeypatch):
    """Contiguous inner dims of a kernel (a 4x4 image plane, with the
    channels around it) run as one loop, for pointwise kernels and for
    BatchNorm's per-channel reductions over (N, H, W); a transposed or
    strided read keeps its own loops. Values as eager, forward and backward."""
    import re

    monkeypatch.setenv("OPENNEURON_COMPILE_DEBUG", str(tmp_path / "dump"))
    x = torch.randn(8, 16, 4, 4, device=DEV)
    w, b = torch.randn(16, device=DEV), torch.randn(16, device=DEV)
    bn = lambda x, w, b: F.relu(F.batch_norm(x, None, None, w, b, training=True)) * 2  # noqa: E731
    check(bn, x, w, b, grad=True, atol=1e-5, rtol=1e-4)
    check(lambda x: x.transpose(2, 3) * 2 + x, x)  # one read transposed: not merged
    check(lambda x: x[:, :, ::2, ::2].exp(), x)
    sources = "".join(f.read_text() for f in (tmp_path / "dump").rglob("kernels.cpp"))
    merged = set(re.findall(r"for \(int64_t ([ri][0-9]+(?:_[0-9]+)+) = 0; \S+ < (\d+);", sources))
    assert ("r2_3", "16") in merged, merged  # reduction over each row's 4x4 planes
    assert any(v.startswith("i") and int(n) >= 64 for v, n in merged), merged  # pointwise: channels and planes
    assert not re.search(r"on_(mod|floordiv)\([^;]*\b[ri][0-9]+_[0-9]", sources)  # no division per element


@pytest.mark.skipif(platform.machine() != "x86_64" or not shutil.which("objdump"), reason="reads x86 code")
@CPP_ONLY
def test_kernel_with_many_buffers_is_vectorised(tmp_path, monkeypatch):
    """An Adam update (in place: 4 tensors and a CPU step count read, 3
    tensors and the count written) is one vectorised kernel: GCC needs a
    runtime overlap check per pair of buffers and by default gives up past 10
    of them, which left such kernels scalar. Values as eager."""
    monkeypatch.setenv("OPENNEURON_COMPILE_DEBUG", str(tmp_path / "dump"))

    def adam(p, g, m, v, step):
        step += 1
        m.lerp_(g, 0.1)
        v.mul_(0.999).addcmul_(g, g, value=0.001)
        p.mul_(0.99999).addcdiv_(m, (v.sqrt() / (1 - 0.999 ** step).sqrt()).add_(1e-8),
                                 value=-0.001 / (1 - 0.9 ** step))

    state = [torch.randn(4096, device=DEV) for _ in range(3)] + [torch.rand(4096, device=DEV), torch.tensor(3.0)]
    expected = [t.clone() for t in state]
    adam(*expected)
    compiled(adam)(*state)
    for got, want in zip(state, expected):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    (plan,) = (tmp_path / "dump").rglob("plan.json")
    libraries = sorted({step["library"] for step in json.loads(plan.read_text())["steps"] if step["kind"] == "kernel"})
    code = subprocess.run(["objdump", "-d", "--no-show-raw-insn", *libraries],
                          capture_output=True, text=True, check=True).stdout
    assert re.search(r"\bv?divps\b", code), "the update's divisions are scalar"


def test_arange_and_split_are_generated_not_externs():
    x = torch.randn(4, 12, 5, device=DEV)
    with warnings.catch_warnings():
        warnings.simplefilter("error", compiler.CompileFallbackWarning)
        got = check(lambda x: [t * (torch.arange(5, device=DEV) + 1) for t in x.split([3, 4, 5], dim=1)]
                    + [t - torch.arange(-18, 18, 3, device=DEV, dtype=torch.float16) for t in x.unbind(2)]
                    + list(x.split(5, dim=-2)) + [x.chunk(3, 1)[1] * torch.arange(2, 12, 2, device=DEV)], x,
                    atol=0, rtol=0)
    assert [tuple(t.shape) for t in got[:3]] == [(4, 3, 5), (4, 4, 5), (4, 5, 5)]
    assert got[-2].shape == (4, 2, 5) and got[-2].stride() == x.stride()  # a view, as eager gives
    assert compiler.metrics()["extern_ops"] == {}, compiler.metrics()["extern_ops"]
    # A symbolic length, and a float arange that rounds (ATen's per-lane
    # rounding) stays an eager op, with the reason.
    f = compiled(lambda x: torch.arange(x.shape[0], device=DEV) * x[:, 0], dynamic=True)
    for n in (3, 9, 17):
        assert torch.equal(f(torch.ones(n, 2, device=DEV)).cpu(), torch.arange(n).float())
    with pytest.warns(compiler.CompileFallbackWarning, match="arange"):
        out = compiled(lambda x: torch.arange(0.1, 50, 0.37, device=DEV) + x)(torch.zeros(1, device=DEV))
    # eager float arange on a device is start + i * step rounded once: within an ulp of the CPU's lanes
    torch.testing.assert_close(out.cpu(), torch.arange(0.1, 50, 0.37), rtol=2e-7, atol=0)


def test_float_scalars_of_symbolic_sizes_are_kernel_arguments():
    # x.shape[0] / x.shape[1] is a SymFloat, math.sqrt of a size becomes 0-dim
    # CPU tensors (Dynamo's tensorify pass): the wrapper computes both from
    # the sizes, kernels receive them as arguments; no eager op, one compile.
    def fn(x):
        return (x * (x.shape[0] / x.shape[1]) + x / math.sqrt(x.shape[1]), x.shape[0] / x.shape[1],
                torch.tensor(x.shape[0]) / 3)

    f = compiled(fn, dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", compiler.CompileFallbackWarning)
        for n in (3, 5, 11):
            x = torch.randn(n, 7 + n, device=DEV)
            got, want = f(x), fn(x)
            torch.testing.assert_close(got[0], want[0], atol=1e-6, rtol=1e-6)
            assert got[1] == want[1] and torch.equal(got[2], want[2])
    m = compiler.metrics()
    assert m["graphs"] == 1 and m["kernels"] == 1 and m["extern_ops"] == {}, m


@pytest.mark.parametrize("k,s,p,d,ceil,layout", [
    (3, 2, 1, 1, False, "nchw"), (3, 2, 1, 1, False, "nhwc"), (2, 2, 0, 1, True, "nchw"),
    ((3, 2), (2, 1), (1, 0), (2, 1), True, "nchw"), (3, 1, 1, 1, False, "chw")])
def test_max_pool_is_generated_with_atens_values_indices_and_gradient(k, s, p, d, ceil, layout):
    # The pool becomes a fused kernel reading a padded buffer; values,
    # indices (ties: first position, NaN wins) and the gradient the backward
    # routes through the indices are ATen's, as is the layout.
    x = torch.randn(2, 3, 11, 10) if layout != "chw" else torch.randn(3, 11, 10)
    x[..., 0, :3] = x[..., 0, 3:6]
    x[..., 4, 4] = float("nan")
    if layout == "nhwc":
        x = x.contiguous(memory_format=torch.channels_last)
    fn = lambda t: F.max_pool2d(t, k, s, p, d, ceil_mode=ceil, return_indices=True)  # noqa: E731
    xc, xn = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    (vc, ic), (vn, in_) = fn(xc), compiled(fn)(xn)
    assert torch.equal(ic, in_.cpu()) and vn.stride() == vc.stride() and in_.stride() == ic.stride()
    torch.testing.assert_close(vn.cpu(), vc, atol=0, rtol=0, equal_nan=True)
    w = torch.randn(vc.shape)
    (vc.nan_to_num() * w).sum().backward()
    (vn.nan_to_num() * w.to(DEV)).sum().backward()
    assert torch.equal(xn.grad.cpu(), xc.grad)
    assert "aten.max_pool2d_with_indices.default" not in compiler.metrics()["extern_ops"]


@pytest.mark.parametrize("fn", [lambda t: torch.diff(t, 0, 0), lambda t: torch.constant_pad_nd(t, [0, 0]),
                                lambda t: torch.ops.aten.copy.default(torch.empty_like(t), t)],
                         ids=["diff-n0", "pad-by-zeros", "functional-copy"])
def test_ops_that_copy_return_new_storage_even_when_the_value_is_an_input(fn):
    # As eager: a result that is no view never shares storage with an input.
    x = torch.randn(4, dtype=torch.float64, device=DEV)
    got = compiled(fn)(x)
    assert got.data_ptr() != x.data_ptr() and torch.equal(got, fn(x))


def test_cat_is_generated_and_fuses_with_its_readers():
    # Rotary embedding's rotate_half: slices, neg, cat and the products are
    # one kernel; dtypes promote, empty and legacy-empty parts drop out, the
    # sign of zero survives; a cat of many parts stays one extern copy.
    a, b = torch.randn(2, 3, 8), torch.randn(2, 3, 8)
    a[0, 0, 0] = -0.0
    rotary = lambda q, c: q * c + torch.cat([-q[..., 4:], q[..., :4]], -1) * c.flip(-1)  # noqa: E731
    for fn, args, kernels in [(rotary, (a, b), 1),
                              (lambda x, y: torch.cat([x, y.double(), x.new_zeros(0)], 1), (a, b), 1),
                              (lambda x, y: torch.cat([x.int(), y[:0]], 0) + 1, (a, b), 1)]:
        torch._dynamo.reset()
        compiler.reset_metrics()
        got = compiled(fn)(*[t.to(DEV) for t in args])
        want = fn(*args)
        assert got.dtype == want.dtype and got.stride() == want.stride() and torch.equal(got.cpu(), want)
        m = compiler.metrics()
        assert m["kernels"] == kernels and "aten.cat.default" not in m["extern_ops"], m
    parts = [torch.randn(2, 2) for _ in range(6)]
    torch._dynamo.reset()
    compiler.reset_metrics()
    assert torch.equal(compiled(lambda *xs: torch.cat(xs))(*[p.to(DEV) for p in parts]).cpu(), torch.cat(parts))
    assert compiler.metrics()["extern_ops"] == {"aten.cat.default": 1}


def test_constant_pad_is_generated():
    x = torch.randn(2, 3, 5, 6, device=DEV)
    with warnings.catch_warnings():
        warnings.simplefilter("error", compiler.CompileFallbackWarning)
        check(lambda x: (F.pad(x, (1, 2), value=-1.5) * 2, F.pad(x, (1, 1, 2, 0)).exp(), F.pad(x, (0, 0, 0, 3)) + 1),
              x, grad=True, atol=1e-6, rtol=1e-6)
        xi = torch.randint(0, 9, (4, 5), device=DEV)
        assert torch.equal(compiled(lambda x: F.pad(x, (2, 1), value=3) + 1)(xi).cpu(), F.pad(xi.cpu(), (2, 1), value=3) + 1)
    assert "aten.constant_pad_nd.default" not in compiler.metrics()["extern_ops"]


@pytest.mark.parametrize("dynamic", [False, True])
def test_slice_scatter_is_generated(dynamic):
    # A slice's backward (zeros and slice_scatter) and slice_scatter itself:
    # every start (negative, past the end, empty src), dtype promotion of
    # neither operand, one kernel with its neighbours; a step stays an extern.
    cases = [((4, 6, 8), (4, 6, 3), 2, 5), ((4, 6, 8), (4, 2, 8), 1, -2), ((4, 6, 8), (1, 6, 8), 0, 3),
             ((5, 7), (5, 7), 1, 0), ((5, 7), (5, 0), 1, 7), ((5, 7), (5, 7), -1, -9)]
    for xs, ss, dim, start in cases:
        x, src = torch.randn(xs), torch.randn(ss)
        fn = lambda x, s: torch.slice_scatter(x * 2, s + 1, dim=dim, start=start)  # noqa: E731
        torch._dynamo.reset()
        compiler.reset_metrics()
        got = compiled(fn, dynamic=dynamic)(x.to(DEV), src.to(DEV))
        assert torch.equal(got.cpu(), fn(x, src)), (xs, ss, dim, start)
        assert compiler.metrics()["extern_ops"] == {}, compiler.metrics()["extern_ops"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", compiler.CompileFallbackWarning)
        check(lambda x: (x[:, 2:5] * 3).sum() + x[:, -1:].exp().sum() + x[1:, :-2].sum(), torch.randn(4, 9, device=DEV),
              grad=True, atol=1e-6, rtol=1e-6)
    stepped = lambda x, s: torch.slice_scatter(x, s, 1, 0, 8, 2)  # noqa: E731
    x, src = torch.randn(3, 8), torch.randn(3, 4)
    with pytest.warns(compiler.CompileFallbackWarning, match="slice_scatter with a step"):
        assert torch.equal(compiled(stepped)(x.to(DEV), src.to(DEV)).cpu(), stepped(x, src))


def test_slices_with_a_symbolic_start_of_either_sign():
    # An int argument Dynamo makes symbolic may be negative: it counts from
    # the end, as in eager, in a slice and in slice_scatter (a silent wrong
    # result once: the start was taken as it came).
    slice_tail = compiled(lambda x, s: x[:, s:] * 2, dynamic=True)
    scatter = compiled(lambda x, y, s: torch.slice_scatter(x, y[:, :x.shape[1] - (s % x.shape[1])] + 1, 1, s)
                       if s >= 0 else torch.slice_scatter(x, y[:, :-s] + 1, 1, s), dynamic=True)
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    for s in (1, -2, 3, -5, 0, -6):
        assert torch.equal(slice_tail(x.to(DEV), s).cpu(), x[:, s:] * 2), s
        want = scatter._torchdynamo_orig_callable(x, y, s)
        assert torch.equal(scatter(x.to(DEV), y.to(DEV), s).cpu(), want), s


def _copies(fn, *args):
    """fn(*args), and the sizes of the copies its ATen kernels made."""
    with torch.profiler.profile(record_shapes=True) as prof:
        out = fn(*args)
        torch.neuron.synchronize()
    return out, [e.input_shapes[0] for e in prof.events() if e.name in ("aten::copy_", "aten::clone")]


def test_updates_of_fresh_buffers_are_made_in_place():
    # Cross-entropy's gradient (scatter into zeros) and an embedding's
    # (index_put into zeros, accumulating): the in-place overloads, no copy
    # of the zeros. A zero tensor that something else reads stays functional.
    logits = torch.randn(64, 500, requires_grad=True)
    target = torch.randint(0, 500, (64,))
    target[3] = -100
    table = torch.nn.Embedding(300, 16)
    ids = torch.randint(0, 300, (8, 40))
    ids[0, :5] = 7  # repeated rows accumulate
    def loss(logits, target, table, ids):
        return F.cross_entropy(logits, target) + F.embedding(ids, table).square().mean()
    loss(logits, target, table.weight, ids).backward()
    logits_n = logits.detach().to(DEV).requires_grad_()
    weight_n = table.weight.detach().to(DEV).requires_grad_()
    step = compiled(loss)
    step(logits_n, target.to(DEV), weight_n, ids.to(DEV)).backward()  # compiles
    logits_n.grad = weight_n.grad = None
    _, copies = _copies(lambda: step(logits_n, target.to(DEV), weight_n, ids.to(DEV)).backward())
    torch.testing.assert_close(logits_n.grad.cpu(), logits.grad, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(weight_n.grad.cpu(), table.weight.grad, rtol=1e-5, atol=1e-6)
    assert [64, 500] not in copies and [300, 16] not in copies, copies
    shared = lambda i, j, v: (torch.zeros(6, 3, device=i.device).index_put((i,), v, True),  # noqa: E731
                              torch.zeros(6, 3, device=i.device).scatter(0, j[:, None].expand(-1, 3), v))
    reread = lambda i, j, v: (lambda z: (z.index_put((i,), v, True), z + j[0]))(  # noqa: E731
        torch.zeros(6, 3, device=i.device))
    args = torch.tensor([1, 4, 1, -1]), torch.tensor([5, 0, 3, 2]), torch.randn(4, 3)
    for fn in (shared, reread):
        torch._dynamo.reset()
        got = compiled(fn)(*[a.to(DEV) for a in args])
        for g, w in zip(got, fn(*args)):
            torch.testing.assert_close(g.cpu(), w, rtol=0, atol=1e-6)


def test_fresh_buffer_rewrite_keeps_a_read_buffer_functional():
    from openneuron.compiler.fresh_buffers import reinplace_fresh_buffer_updates
    from torch.fx.experimental.proxy_tensor import make_fx

    def fn(i, v):
        z = torch.zeros(6, 3)
        return torch.ops.aten.index_put(z, [i], v, True), torch.zeros(6, 3).index_put([i], v, True), z.sum()
    gm = make_fx(fn)(torch.tensor([1, 2]), torch.randn(2, 3))
    targets = [n.target for n in reinplace_fresh_buffer_updates(gm).graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.aten.index_put_.default) == 1
    assert targets.count(torch.ops.aten.index_put.default) == 1


@pytest.mark.parametrize("decimals", [3, 0, -2])
def test_round_with_decimals_is_atens(decimals):
    x = torch.randn(500, device=DEV) * 1000
    got = compiled(lambda x: torch.round(x, decimals=decimals) + 0)(x)
    assert torch.equal(got.cpu(), torch.round(x.cpu(), decimals=decimals))


def test_inplace_view_ops_inside_compiled_ops():
    # quantile squeezes in place: functionalization replays squeeze_ on its
    # wrappers, which have no data (neuron's in-place views are metadata-only).
    compiler.reset_metrics()
    x = torch.randn(7, 5, device=DEV)
    torch.testing.assert_close(compiled(lambda x: torch.quantile(x, 0.3, dim=1))(x),
                               torch.quantile(x.cpu(), 0.3, dim=1).to(DEV))
    assert torch.equal(compiled(lambda x: torch.quantile(x, 0.5))(torch.tensor(3.0, device=DEV)).cpu(),
                       torch.tensor(3.0))
    # (a reduction over a size-1 dim read by its epilogue: fused, decided by
    # the scheduler, not sent back by code generation)
    assert compiler.metrics()["fusion_retries"] == 0


_FOREACH_CASES = {
    "add.Scalar": lambda a, b, c: torch._foreach_add(a, 2.0),
    "add.List": lambda a, b, c: torch._foreach_add(a, b, alpha=0.5),
    "mul.ScalarList": lambda a, b, c: torch._foreach_mul(a, [2.0, 3.0]),
    "mul.Tensor": lambda a, b, c: torch._foreach_mul(a, c[0][0, 0]),
    "lerp.Scalar": lambda a, b, c: torch._foreach_lerp(a, b, 0.3),
    "addcmul.Scalar": lambda a, b, c: torch._foreach_addcmul(a, b, c, value=0.7),
    "addcdiv.ScalarList": lambda a, b, c: torch._foreach_addcdiv(a, b, c, [0.1, 0.2]),
    "pow.ScalarAndTensor": lambda a, b, c: torch._foreach_pow(0.9, c),
    "div.List": lambda a, b, c: torch._foreach_div(a, c),
    "sqrt": lambda a, b, c: torch._foreach_sqrt(c),
    "maximum.List": lambda a, b, c: torch._foreach_maximum(a, b),
    "add_ in place": lambda a, b, c: (torch._foreach_add_(a, b), a)[1],
}


@pytest.mark.parametrize("case", list(_FOREACH_CASES))
def test_foreach_ops_become_kernels(case):
    fn = _FOREACH_CASES[case]
    a = [torch.randn(4, 5, device=DEV), torch.randn(3, device=DEV)]
    b = [torch.randn(4, 5, device=DEV), torch.randn(3, device=DEV)]
    c = [torch.rand(4, 5, device=DEV) + 1, torch.rand(3, device=DEV) + 1]
    expected = fn([t.clone() for t in a], b, c)
    got = compiled(fn)([t.clone() for t in a], b, c)
    torch.testing.assert_close(got, expected)
    m = compiler.metrics()
    assert m["kernels"] >= 1 and not any(op.startswith("aten._foreach") for op in m["extern_ops"]), m


def test_compiled_foreach_adamw_matches_eager_cpu():
    # Step counts stay CPU tensors; each parameter and its moments are
    # updated by one generated kernel, which computes the bias corrections
    # from its CPU step count; the counts are incremented in place after all
    # kernels (host stores): no extern call at all.
    params = [torch.randn(8, 8) if i % 2 == 0 else torch.randn(8) for i in range(10)]
    grads = [torch.randn_like(p) for p in params]

    def run(device, compile):
        ps = [p.clone().to(device).requires_grad_() for p in params]
        for p, g in zip(ps, grads):
            p.grad = g.to(device)
        opt = torch.optim.AdamW(ps, lr=1e-2, foreach=True)
        step = torch.compile(opt.step, backend="neuron") if compile else opt.step
        for _ in range(3):
            step()
        return [p.detach().cpu() for p in ps]

    torch.testing.assert_close(run(DEV, True), run("cpu", False), atol=1e-6, rtol=1e-5)
    m = compiler.metrics()
    assert 1 <= m["kernels"] <= len(params) + 1, m  # + the step counts' host stores
    assert m["extern_ops"] == {}, m


@torch.no_grad()
@pytest.mark.parametrize("returned", [False, True])
def test_foreach_ops_on_cpu_scalars_are_computed_by_the_kernels_reading_them(returned):
    # Bias corrections of step counts: split per element and computed in the
    # kernels, unless a result is also needed as a tensor (then one foreach
    # call on the host, as eager).
    def f(xs, steps):
        bc = torch._foreach_sqrt(torch._foreach_neg(torch._foreach_sub(torch._foreach_pow(0.99, steps), 1)))
        out = [x / b for x, b in zip(xs, bc)]
        return (out, bc[1]) if returned else out

    xs = [torch.randn(5, 3), torch.randn(7)]
    steps = [torch.tensor(3.0), torch.tensor(8.0)]
    got = compiled(f)([x.to(DEV) for x in xs], steps)
    torch.testing.assert_close([g.cpu() for g in got[0]] if returned else [g.cpu() for g in got],
                               f(xs, steps)[0] if returned else f(xs, steps))
    foreach_externs = {op for op in compiler.metrics()["extern_ops"] if op.startswith("aten._foreach")}
    assert foreach_externs == ({"aten._foreach_pow.ScalarAndTensor", "aten._foreach_sub.Scalar",
                                "aten._foreach_neg.default", "aten._foreach_sqrt.default"} if returned else set())
    if returned:
        assert got[1].device.type == "cpu" and torch.equal(got[1], f(xs, steps)[1])


def _bump_and_scale(x, s):
    s.add_(1)
    return x * s


def _read_old_then_bump(x, s):
    old = s * 1
    s.add_(1)
    return x * old + s


def _bump_twice(x, s):
    s.mul_(2)
    y = x / s
    s.sub_(0.5)
    return y + s


@torch.no_grad()
@pytest.mark.parametrize("fn", [_bump_and_scale, _read_old_then_bump, _bump_twice])
def test_cpu_scalars_updated_in_place_match_eager(fn):
    # In-place updates of CPU scalar inputs (step counts) are host stores
    # written after every kernel, or extern calls where a value is needed
    # as a tensor; either way values and the updated scalar match eager.
    x = torch.randn(5, 4)
    s_eager, s_compiled = torch.tensor(1.5), torch.tensor(1.5)
    f = compiled(fn)
    for _ in range(2):  # the second run reads the first one's update
        want = fn(x.to(DEV), s_eager)
        got = f(x.to(DEV), s_compiled)
        torch.testing.assert_close(got.cpu(), want.cpu())
        assert torch.equal(s_compiled, s_eager), (s_compiled, s_eager)


@torch.no_grad()
def test_cpu_scalars_are_read_by_kernels():
    # A 0-dim CPU tensor beside device tensors is a kernel operand (as CUDA
    # kernels take CPU scalars); host work only kernels read is computed by
    # the kernel, once per launch; host work returned runs on the CPU.
    def f(x, s):
        t = s * 2 + 1                      # returned: stays on the CPU
        return x * t + s.sqrt() * (s - 1).exp(), (x / s).to(torch.float64), t

    x, s = torch.randn(4, 7), torch.tensor(2.5)
    got = compiled(f)(x.to(DEV), s)
    expected = f(x, s)
    for g, e in zip(got, expected):
        assert g.device == (s.device if e.device.type == "cpu" and e.dim() == 0 else torch.device(DEV, 0)), g.device
        torch.testing.assert_close(g.cpu(), e)
    m = compiler.metrics()
    assert m["extern_ops"] == {"aten.mul.Tensor": 1, "aten.add.Tensor": 1}, m
    assert m["kernels"] == 1, m


def test_host_scalar_moved_to_device_is_a_transfer_not_a_fallback(monkeypatch):
    """A CPU 0-dim tensor copied to the device inside the graph (HF's cache
    positions) is the device's transfer: an extern copy, no fallback warning,
    and strict mode accepts it."""
    monkeypatch.setenv("OPENNEURON_COMPILE_STRICT", "1")
    x = torch.randn(6, device=DEV)
    start = torch.tensor(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", compiler.CompileFallbackWarning)
        got = check(lambda x, s: x * s.to(x.device, torch.float32) + torch.arange(6, device=DEV) * s.to(DEV),
                    x, start)
    assert got.device.type == "neuron"
    assert compiler.metrics()["fallback_ops"] == {}

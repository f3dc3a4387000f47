"""The protected driver (OPENNEURON_DRIVER=protected): device memory the host
cannot address, as on a discrete GPU. Each test runs in a fresh interpreter
on that driver. Host access to its memory must crash; every op must still
work, on CPU copies made through the driver, counted and reported; compiled
kernels are dispatched by the driver."""
import signal

from conftest import run_python

PROTECTED = {"OPENNEURON_DRIVER": "protected", "OPENNEURON_CPU_FALLBACK": "silent"}


def test_host_read_of_device_memory_crashes():
    code = """
    import ctypes, torch
    x = torch.ones(4, device="neuron")
    print(ctypes.string_at(x.data_ptr(), 4))
    """
    proc = run_python(code, env=PROTECTED, check=False)
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stderr[-2000:])


def test_properties_and_eager_ops_match_cpu():
    run_python("""
    import torch
    p = torch.neuron.get_device_properties(0)
    assert p.driver == "protected" and not p.host_addressable, p
    torch.manual_seed(0)
    a, b = torch.randn(6, 5), torch.randn(5, 7)
    x, y = a.to("neuron"), b.to("neuron")
    assert torch.allclose((x @ y).cpu(), a @ b, atol=1e-6)
    assert torch.equal(x.t()[1:, ::2].contiguous().cpu(), a.t()[1:, ::2])
    torch.testing.assert_close(x.sum().cpu(), a.sum())  # a device kernel: its own summation order, float32 tolerance
    z = torch.zeros(3, 4, device="neuron:1"); z[1, ::2] = 7; z.resize_(4, 4)
    assert z.device == torch.device("neuron", 1) and z.untyped_storage().device == z.device
    assert torch.equal(z[:3].cpu(), torch.tensor([[0.] * 4, [7, 0, 7, 0], [0.] * 4]))
    w = x.to("neuron:2").to(torch.float64)
    assert w.device.index == 2 and w.dtype == torch.float64 and torch.equal(w.cpu(), a.double())
    c = torch.randn(3, 3, dtype=torch.complex64)
    assert torch.equal(c.to("neuron").conj().cpu(), c.conj())
    # mm runs on the device's kernel library; an op without a device kernel
    # (a determinant) runs on CPU copies, counted as such.
    assert "aten::mm" in {r["op"] for r in torch.neuron.eager_kernel_report()}
    sq = torch.randn(5, 5)
    torch.testing.assert_close(torch.linalg.det(sq.to("neuron")).cpu(), torch.linalg.det(sq))
    report = {r["op"] for r in torch.neuron.fallback_report()}
    assert "aten::_linalg_det" in report, report
    stats = torch.neuron.transfer_stats()
    assert stats["host_to_device"]["cpu_fallback"]["count"] > 0, stats
    """, env=PROTECTED)


def test_pinned_non_blocking_copies_and_streams():
    run_python("""
    import torch
    src = torch.arange(1 << 16, dtype=torch.float32).pin_memory()
    s = torch.neuron.Stream()
    with torch.neuron.stream(s):
        d = src.to("neuron", non_blocking=True)
        back = torch.empty_like(src).pin_memory()
        back.copy_(d, non_blocking=True)
    s.synchronize()
    assert torch.equal(back, src)
    """, env=PROTECTED)


def test_training_step_and_compile_match_cpu():
    run_python("""
    import torch
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 6 * 6, 5))
    dev = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 6 * 6, 5))
    dev.load_state_dict(cpu.state_dict()); dev.to("neuron")
    x = torch.randn(2, 3, 8, 8)
    for model, inp in ((cpu, x), (dev, x.to("neuron"))):
        opt = torch.optim.AdamW(model.parameters(), lr=0.1)
        for _ in range(2):
            model(inp).square().mean().backward(); opt.step(); opt.zero_grad()
    for p, q in zip(cpu.parameters(), dev.parameters()):
        assert torch.allclose(p, q.cpu(), atol=1e-5), (p - q.cpu()).abs().max()
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    ref = mlp(torch.ones(3, 8))
    f = torch.compile(mlp.to("neuron"), backend="neuron")
    out = f(torch.ones(3, 8, device="neuron"))
    assert torch.allclose(out.cpu(), ref, atol=1e-5)
    """, env=PROTECTED, timeout=300)


def test_allocation_past_the_budget_is_a_clear_oom():
    run_python("""
    import torch
    try:
        torch.empty(1 << 40, dtype=torch.uint8, device="neuron")
    except torch.OutOfMemoryError as e:
        assert "OPENNEURON_HOST_DEVICE_MEMORY" in str(e), str(e)
    else:
        raise AssertionError("no OutOfMemoryError")
    assert torch.ones(3, device="neuron").sum().item() == 3  # still usable
    """, env=PROTECTED)


def test_ops_whose_cpu_kernel_lacks_a_dtype_run_as_cuda_would():
    """The CPU fallback's kernel may lack a dtype CUDA has: integer histc (MoE
    routers in transformers count tokens per expert with it) and Bool abs.
    On protected the op then runs on the device tensors as CUDA would,
    instead of failing where the host driver and CUDA succeed."""
    run_python("""
    import torch
    x = torch.randint(-2, 6, (200,), dtype=torch.int32)
    got = torch.histc(x.to("neuron"), bins=4, min=0, max=3)
    assert got.device.type == "neuron" and got.dtype == torch.int32, got
    assert torch.equal(got.cpu(), torch.bincount(x[(x >= 0) & (x <= 3)], minlength=4).int())
    b = torch.tensor([True, False])
    assert torch.equal(b.to("neuron").abs().cpu(), b)
    try:  # a dtype CUDA lacks too: the CPU kernel's own error
        torch.histc(torch.ones(3, dtype=torch.complex64).to("neuron"))
    except NotImplementedError as e:
        assert "not implemented for 'ComplexFloat'" in str(e), e
    else:
        raise AssertionError("complex histc did not raise")
    """, env=PROTECTED)

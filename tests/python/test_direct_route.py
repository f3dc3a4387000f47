"""The direct (unboxed) route: ops a training step calls most run their CPU
kernel on device memory without going through the boxed router, and must
behave exactly as the router does (which the rest of the suite checks):
same results as CPU, in-place and out= returning the caller's tensor,
multi-output ops, calls from boxed callers and threads, and every unusual
call (CPU tensors, a forced fallback) handed to the boxed router."""
import os
import threading

import pytest
import torch
import torch.nn.functional as F

from conftest import run_python

pytestmark = pytest.mark.timeout(120)

N = torch.neuron


def pair(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    cpu = torch.randn(*shape, generator=g).to(dtype)
    return cpu, cpu.to("neuron")


def test_inplace_and_out_return_the_callers_tensor():
    a, an = pair(4, 5)
    b, bn = pair(4, 5, seed=1)
    assert an.add_(bn, alpha=2) is an
    a.add_(b, alpha=2)
    assert torch.equal(an.cpu(), a)

    out = torch.empty(4, 5, device="neuron")
    assert torch.mul(an, bn, out=out) is out
    assert torch.equal(out.cpu(), a * b)

    # A too-small out= tensor is resized in place, as on CPU.
    out = torch.empty(0, device="neuron")
    ptr_before = out.data_ptr()
    assert torch.add(an, bn, out=out) is out
    assert out.shape == (4, 5) and out.data_ptr() != ptr_before
    assert torch.equal(out.cpu(), a + b)

    # Writing into a view writes the base.
    base = torch.zeros(3, 4, device="neuron")
    base[:, 1].add_(1.0)
    assert torch.equal(base.cpu(), torch.zeros(3, 4).index_fill_(1, torch.tensor([1]), 1.0))


def test_multi_output_ops_match_cpu():
    x, xn = pair(6, 8)
    w, wn = pair(8, seed=1)
    b, bn = pair(8, seed=2)
    got = torch.ops.aten.native_layer_norm(xn, [8], wn, bn, 1e-5)
    want = torch.ops.aten.native_layer_norm(x, [8], w, b, 1e-5)
    assert len(got) == 3
    for g, w_ in zip(got, want):
        assert g.device.type == "neuron"
        torch.testing.assert_close(g.cpu(), w_)
    values, indices = torch.max(xn, dim=1)
    want_v, want_i = torch.max(x, dim=1)
    assert torch.equal(values.cpu(), want_v) and torch.equal(indices.cpu(), want_i)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex64, torch.int32, torch.bfloat16, torch.bool])
def test_dtypes_are_kept(dtype):
    a, an = pair(3, 3, dtype=dtype)
    b, bn = pair(3, 3, dtype=dtype, seed=1)
    for op in (torch.mul, torch.eq):
        got = op(an, bn)
        assert got.dtype == op(a, b).dtype
        assert torch.equal(got.cpu(), op(a, b))


def test_boxed_callers_get_the_same_results():
    a, an = pair(5)
    b, bn = pair(5, seed=1)
    # torch.ops overload packets call the kernel boxed.
    got = torch.ops.aten.sub.Tensor(an, bn, alpha=3)
    assert torch.equal(got.cpu(), torch.sub(a, b, alpha=3))
    got = torch.ops.aten.gelu.default(an, approximate="tanh")
    assert torch.equal(got.cpu(), F.gelu(a, approximate="tanh"))


def test_cpu_scalars_and_mismatches_take_the_routers_path():
    a, an = pair(5)
    got = an * torch.tensor(3.0)  # CPU 0-dim tensor: accepted, as on CUDA
    assert torch.equal(got.cpu(), a * 3.0)
    with pytest.raises(RuntimeError, match=r"argument 'other' of aten::mul.Tensor"):
        an * torch.ones(5)
    if N.device_count() > 1:
        with pytest.raises(RuntimeError, match=r"neuron:1.*neuron:0|neuron:0.*neuron:1"):
            an * torch.ones(5, device="neuron:1")
        on1 = torch.ones(5, device="neuron:1") * 2
        assert on1.device == torch.device("neuron:1")


def test_kernel_errors_name_the_op_and_device():
    x = torch.ones(2, 3, device="neuron")
    y = torch.ones(4, 5, device="neuron")
    with pytest.raises(RuntimeError, match=r"while running aten::mm on neuron:0"):
        torch.mm(x, y)
    assert torch.equal((x + 1).cpu(), torch.full((2, 3), 2.0))  # still usable


def test_ops_move_no_data():
    x, xn = pair(16, 16)
    N.reset_transfer_stats()
    y = torch.relu(torch.mm(xn, xn) + 1).sum(dim=0).mul_(2)
    assert N.total_transfers() == (0, 0), N.transfer_stats()
    torch.testing.assert_close(y.cpu(), torch.relu(x @ x + 1).sum(dim=0) * 2)


def test_threads_share_direct_ops():
    x, xn = pair(32, 32)
    want = (x @ x).tanh().sum()
    errors = []

    def work():
        try:
            for _ in range(50):
                got = torch.mm(xn, xn).tanh().sum()
                torch.testing.assert_close(got.cpu(), want)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_forcing_the_fallback_applies_to_direct_ops_after_a_settings_reload():
    proc = run_python(
        """
        import os, torch
        N = torch.neuron
        a = torch.arange(6.0, device="neuron")
        before = a * 2                                   # direct
        os.environ["OPENNEURON_FORCE_CPU_FALLBACK"] = "aten::mul"
        os.environ["OPENNEURON_CPU_FALLBACK"] = "silent"
        import openneuron._C as C
        C._reload_settings()
        N.reset_transfer_stats()
        after = a * 2                                    # now the copying fallback
        assert N.transfer_stats()["device_to_host"]["cpu_fallback"]["count"] == 1
        assert torch.equal(before.cpu(), after.cpu())
        del os.environ["OPENNEURON_FORCE_CPU_FALLBACK"]
        C._reload_settings()
        N.reset_transfer_stats()
        again = a * 2                                    # direct again
        assert N.total_transfers() == (0, 0), N.transfer_stats()
        print("OK")
        """
    )
    assert "OK" in proc.stdout


def test_generator_picks_plain_ops_and_leaves_the_rest_to_the_router(tmp_path):
    """tools/gen_direct_ops.py on the installed native_functions.yaml."""
    import re
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    torch_dir = os.path.dirname(torch.__file__)
    yaml = os.path.join(os.path.dirname(torch_dir), "torchgen", "packaged", "ATen", "native",
                        "native_functions.yaml")
    outs = [str(tmp_path / "a.cc"), str(tmp_path / "b.cc")]
    subprocess.run([sys.executable, os.path.join(root, "tools", "gen_direct_ops.py"), yaml,
                    os.path.join(torch_dir, "include"), *outs], check=True, capture_output=True)
    ops = set()
    for out in outs:
        ops |= set(re.findall(r"register_direct<at::_ops::(\w+)>", open(out).read()))
    assert {"add_Tensor", "add__Tensor", "add_out", "mm_out", "native_layer_norm", "gelu_backward",
            "mish_backward", "_softmax", "nll_loss_forward", "sum_dim_IntList"} <= ops
    # mm and addmm have hand-written kernels (small_matmul.cc) that take the direct route.
    assert not ops & {"mm", "addmm"}
    # Views, copies, resizes, CPU-index ops, tensor lists and generators stay boxed.
    assert not ops & {"view", "transpose_int", "copy_", "resize_", "index_Tensor", "cat",
                      "_foreach_add_Scalar", "bernoulli_p", "_to_copy"}
    assert len(ops) > 600

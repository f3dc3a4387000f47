"""Errors: device mismatches name the op, the argument and both devices (as
CUDA's generated checks do); errors inside kernels name the op; after any
error the process and the device keep working."""
import gc

import pytest
import torch
import torch.nn.functional as F

N = torch.neuron


def assert_still_works():
    x = torch.arange(4.0, device="neuron")
    assert (x * 2).sum().item() == 12.0
    # CPU allocations are not left redirected into device memory. (Collect
    # first: a cycle through the caught error's frames would otherwise free
    # its device tensors at any allocation, between the two readings.)
    gc.collect()
    before = N.memory_allocated()
    cpu = torch.empty(1 << 20)
    assert N.memory_allocated() == before
    del cpu


@pytest.mark.parametrize(
    "call,op,arg,device",
    [
        (lambda n, c: torch.where(n > 0, n, c), "aten::where", "other", "cpu"),
        (lambda n, c: torch.mm(n.view(1, 3), c.view(3, 1)), "aten::mm", "mat2", "cpu"),
        (lambda n, c: torch.add(n, c), "aten::add", "other", "cpu"),
        (lambda n, c: c + n, "aten::add", "self", "cpu"),
        (lambda n, c: n.mul_(c), "aten::mul_", "other", "cpu"),
        (lambda n, c: torch.cat([n, c]), "aten::cat", "tensors", "cpu"),
        (lambda n, c: n.index_select(0, torch.tensor([0])), "aten::index_select", "index", "cpu"),
        (lambda n, c: torch.add(n, n, out=torch.empty(3)), "aten::add", "out", "cpu"),
        (lambda n, c: F.linear(n, torch.ones(2, 3)), "aten::mm", "mat2", "cpu"),
    ],
    ids=["where", "mm", "add", "add_reversed", "mul_", "cat", "index_select", "out", "linear"],
)
def test_cpu_tensor_mismatch_names_op_argument_and_devices(call, op, arg, device):
    n, c = torch.ones(3, device="neuron"), torch.ones(3)
    with pytest.raises(RuntimeError) as info:
        call(n, c)
    message = str(info.value)
    assert "same device" in message
    assert op in message, message
    assert f"'{arg}'" in message, message
    assert device in message and "neuron:0" in message, message
    assert_still_works()


def test_mismatch_between_neuron_devices():
    a = torch.ones(3, device="neuron:0")
    b = torch.ones(3, device="neuron:1")
    for call in (lambda: a + b, lambda: torch.mm(a.view(3, 1), b.view(1, 3)),
                 lambda: torch.add(a, a, out=torch.empty(3, device="neuron:1")),
                 lambda: a + torch.tensor(2.0, device="neuron:1")):
        with pytest.raises(RuntimeError) as info:
            call()
        message = str(info.value)
        assert "neuron:0" in message and "neuron:1" in message, message
        assert "aten::" in message
    assert_still_works()


def test_cpu_scalar_tensors_are_accepted_like_cuda():
    n = torch.arange(3.0, device="neuron")
    assert torch.equal((n + torch.tensor(2.0)).cpu(), torch.arange(3.0) + 2)
    assert torch.equal((torch.tensor(2.0) * n).cpu(), torch.arange(3.0) * 2)
    assert torch.equal(torch.where(n > 0, n, torch.tensor(-1.0)).cpu(), torch.tensor([-1.0, 1.0, 2.0]))
    n.add_(torch.tensor(1))
    assert torch.equal(n.cpu(), torch.arange(3.0) + 1)
    assert (n + torch.tensor(2.0)).device == torch.device("neuron", 0)
    # CPU index tensors are accepted for indexing, like CUDA
    assert torch.equal(n[torch.tensor([0, 2])].cpu(), torch.tensor([1.0, 3.0]))
    n[torch.tensor([1])] = torch.tensor([9.0])
    assert n[1].item() == 9.0
    # but a 0-dim neuron tensor does not make a CPU tensor's op run anywhere
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3) + torch.tensor(1.0, device="neuron")


@pytest.mark.parametrize(
    "call,op,exc,text",
    [
        (lambda: torch.mm(torch.ones(2, 3, device="neuron"), torch.ones(2, 3, device="neuron")),
         "aten::mm", RuntimeError, "cannot be multiplied"),
        (lambda: torch.ones(3, device="neuron").index_select(0, torch.tensor([5], device="neuron")),
         "aten::index_select", IndexError, "out of range"),
        (lambda: torch.ones(3, device="neuron")[torch.tensor([7], device="neuron")],
         "aten::index", IndexError, "out of bounds"),
        (lambda: F.cross_entropy(torch.randn(2, 3, device="neuron"), torch.tensor([0, 5], device="neuron")),
         "aten::nll_loss", IndexError, "out of bounds"),
        (lambda: torch.ones(2, device="neuron").reshape(3).sum(),
         None, RuntimeError, "invalid for input of size 2"),
    ],
    ids=["mm_shapes", "index_select", "getitem", "cross_entropy", "reshape"],
)
def test_kernel_errors_name_the_op(call, op, exc, text):
    with pytest.raises(exc) as info:
        call()
    message = str(info.value)
    assert text in message, message
    if op is not None:
        assert op in message and "neuron:0" in message, message
    assert_still_works()


def test_error_in_inplace_op_leaves_tensor_usable():
    x = torch.arange(6.0, device="neuron")
    with pytest.raises(RuntimeError):
        x.view(2, 3).add_(torch.ones(4, device="neuron"))
    assert torch.equal(x.cpu(), torch.arange(6.0))
    with pytest.raises(RuntimeError):
        torch.add(x, torch.ones(2, device="neuron"), out=x)
    assert torch.equal(x.cpu(), torch.arange(6.0))
    x.add_(1)
    assert x.sum().item() == 21.0


def test_many_errors_do_not_leak_device_memory():
    x = torch.randn(256, 256, device="neuron")
    bad = torch.ones(3, 3, device="neuron")
    index = torch.tensor([1000], device="neuron")

    def fail_twice():
        with pytest.raises(RuntimeError):
            torch.mm(x, bad)
        with pytest.raises(IndexError):
            x.index_select(0, index)

    fail_twice()
    gc.collect()
    before = N.memory_allocated()
    for _ in range(50):
        fail_twice()
    gc.collect()
    assert N.memory_allocated() == before
    assert_still_works()

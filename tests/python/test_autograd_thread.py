"""Backward of neuron tensors runs on the calling thread when every device
runs its kernels on host threads (the host driver), as backward of CPU
tensors does; PyTorch's per-device autograd thread would start a second
OpenMP team on the same cores (see openneuron/_torch_patches/autograd_engine.py)."""
import copy
import threading

import pytest
import torch
import torch.utils.checkpoint
from torch.autograd.variable import Variable

from conftest import run_python


def backward_threads(make_loss):
    """Thread ids seen by a tensor hook during backward of make_loss()."""
    seen = []
    x = torch.randn(8, 8, device="neuron", requires_grad=True)
    x.register_hook(lambda g: seen.append(threading.get_ident()))
    make_loss(x).backward()
    return seen, x


def test_backward_runs_on_the_calling_thread():
    seen, x = backward_threads(lambda x: (x.sin() * 2).sum())
    assert seen == [threading.get_ident()]
    torch.testing.assert_close(x.grad, 2 * x.detach().cos())


def test_switch_keeps_pytorch_device_threads(monkeypatch):
    monkeypatch.setenv("OPENNEURON_AUTOGRAD_DEVICE_THREADS", "1")
    seen, _ = backward_threads(lambda x: x.exp().sum())
    assert len(seen) == 1 and seen[0] != threading.get_ident()


def test_users_setting_is_kept_and_restored():
    assert torch.autograd.is_multithreading_enabled()
    inside = []
    x = torch.ones(3, device="neuron", requires_grad=True)
    x.register_hook(lambda g: inside.append(torch.autograd.is_multithreading_enabled()))
    with torch.autograd.set_multithreading_enabled(False):
        (x * 3).sum().backward()
        assert not torch.autograd.is_multithreading_enabled()
    assert torch.autograd.is_multithreading_enabled()
    assert inside == [False]
    (x * 3).sum().backward()
    assert torch.autograd.is_multithreading_enabled()
    torch.testing.assert_close(x.grad.cpu(), torch.full((3,), 6.0))


def test_error_in_backward_restores_setting_and_engine_stays_usable():
    class Boom(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom in backward")

    x = torch.ones(4, device="neuron", requires_grad=True)
    with pytest.raises(ValueError, match="boom in backward"):
        Boom.apply(x).sum().backward()
    assert torch.autograd.is_multithreading_enabled()
    (x * 2).sum().backward()
    assert x.grad.cpu().tolist() == [2.0] * 4


def test_autograd_grad_and_double_backward_match_cpu():
    def f(t):
        return (t.tanh() ** 3).sum()

    base = torch.randn(5, dtype=torch.float64)
    outs = []
    for device in ("cpu", "neuron"):
        t = base.to(device).requires_grad_()
        (g,) = torch.autograd.grad(f(t), t, create_graph=True)
        (gg,) = torch.autograd.grad(g.sum(), t)
        outs.append((g.detach().cpu(), gg.cpu()))
    torch.testing.assert_close(outs[0], outs[1])


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_matches_cpu(use_reentrant):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.GELU(), torch.nn.Linear(6, 1))
    x = torch.randn(4, 6)
    grads = []
    for device in ("cpu", "neuron"):
        m = model.to(device)
        m.zero_grad()
        xi = x.to(device).detach().requires_grad_()
        torch.utils.checkpoint.checkpoint(m, xi, use_reentrant=use_reentrant).sum().backward()
        grads.append([p.grad.cpu() for p in m.parameters()] + [xi.grad.cpu()])
    torch.testing.assert_close(grads[0], grads[1])


def test_engine_is_still_pytorchs_engine_for_its_callers():
    # DDP, FSDP and Dynamo use Variable._execution_engine.queue_callback and
    # check isinstance(engine, torch._C._ImperativeEngine).
    assert isinstance(Variable._execution_engine, torch._C._ImperativeEngine)
    ran = []
    x = torch.ones(2, device="neuron", requires_grad=True)
    x.register_hook(lambda g: Variable._execution_engine.queue_callback(lambda: ran.append(1)))
    x.sum().backward()
    assert ran == [1]


def test_backward_on_two_devices_from_two_threads():
    results, errors = {}, []
    torch.manual_seed(1)
    start = torch.nn.Linear(16, 4)  # one set of weights, copied to each device here
    models = {d: copy.deepcopy(start).to(d) for d in ("neuron:0", "neuron:1")}

    def train(device):
        try:
            m = models[device]
            for _ in range(20):
                m.zero_grad()
                m(torch.ones(8, 16, device=device)).pow(2).sum().backward()
            results[device] = m.weight.grad.cpu()
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=train, args=(d,)) for d in ("neuron:0", "neuron:1")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    torch.testing.assert_close(results["neuron:0"], results["neuron:1"])


def test_cpu_only_backward_does_not_initialise_the_device():
    proc = run_python(
        """
        import torch
        x = torch.ones(3, requires_grad=True)
        (x * 2).sum().backward()
        print(torch.neuron.is_initialized(), x.grad.tolist())
        """
    )
    assert proc.stdout.split("\n")[-2] == "False [2.0, 2.0, 2.0]"

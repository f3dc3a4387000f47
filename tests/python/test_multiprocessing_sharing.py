"""Neuron tensors sent to another process with torch.multiprocessing (spawn)
share their memory, as CUDA tensors do: the child reads the parent's values,
and each side sees the other's in-place writes (before: "_share_fd_: only
available on CPU"). The parent keeps using the tensor as any neuron tensor."""
import pytest

from conftest import run_python

pytestmark = pytest.mark.timeout(180)

SCRIPT = """
import torch
import torch.multiprocessing as mp


def child(t, param, q):
    q.put((t.device.type, t.cpu().tolist(), param.requires_grad, type(param).__name__))
    t.add_(10)
    param.data.mul_(2)
    q.put("written")


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    t = torch.arange(6, dtype=torch.float32, device="neuron").view(2, 3)[:, 1:]  # a view: offset, strides
    param = torch.nn.Parameter(torch.ones(4, device="neuron"))
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(t, param, q))
    p.start()
    print(q.get(timeout=90))
    assert q.get(timeout=90) == "written"
    p.join(90)
    print(p.exitcode, t.cpu().tolist(), param.detach().cpu().tolist())
    # The parent's tensors stay ordinary neuron tensors.
    loss = (param * t.sum()).sum()
    loss.backward()
    torch.optim.SGD([param], lr=0.5).step()
    t.mul_(2)
    print(param.grad.cpu().tolist(), t.cpu().tolist(), (t @ t.T).cpu().tolist()[0][0])
"""


def test_spawned_process_shares_neuron_tensors(tmp_path):
    proc = run_python(SCRIPT, script_dir=tmp_path, timeout=170)
    lines = proc.stdout.splitlines()
    assert lines[0] == "('neuron', [[1.0, 2.0], [4.0, 5.0]], True, 'Parameter')"
    assert lines[1] == "0 [[11.0, 12.0], [14.0, 15.0]] [2.0, 2.0, 2.0, 2.0]"
    assert lines[2] == "[52.0, 52.0, 52.0, 52.0] [[22.0, 24.0], [28.0, 30.0]] 1060.0"

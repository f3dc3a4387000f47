"""Advanced indexing on devices whose memory the host cannot address
(protected, vulkan): x[i, :, j] with integer index tensors (index.Tensor)
and its assignment and backward (index_put_, accumulating or not), boolean
masks (x[mask], through nonzero), nonzero and masked_select run as device
kernels, with the CPU's results, shapes (index dims in place or first) and
IndexError messages, and no CPU fallback."""
import pytest

from conftest import run_python

CODE = """
import torch
torch.manual_seed(0)
y = torch.randn(2, 3, 4, 5)
d = y.to("neuron")
I = lambda *v: torch.tensor(v)
reads = [lambda t: t[I(0, 1)], lambda t: t[:, I(2, 0, 1)], lambda t: t[I(0, 1), :, I(1, 2)],
         lambda t: t[:, I(0, 1), I(1, 2)], lambda t: t[I(-1), I(-2)], lambda t: t[..., I([[0, 4], [3, 3]])],
         lambda t: t[:, I(0, 2)[:, None], I(1, 3, 2)], lambda t: t[I(1)[:0]],
         lambda t: t.transpose(1, 3)[:, I(4, 0)], lambda t: t[I(0, 1).int()], lambda t: t[I(1, 0).to(t.device)]]
for k, f in enumerate(reads):
    a, b = f(y), f(d)
    assert a.shape == b.shape and torch.equal(a, b.cpu()), (k, a.shape, b.shape)
for bad in (lambda t: t[I(5)], lambda t: t[:, I(-9)], lambda t: t[I(0), I(7)],
            lambda t: t.clone().index_put_((I(9),), torch.tensor(1.0))):
    msgs = []
    for t in (y, d):
        try:
            bad(t)
            msgs.append(None)
        except IndexError as e:
            msgs.append(str(e))
    assert msgs[0] is not None and msgs[0] == msgs[1], msgs
for accumulate in (False, True):
    vals = torch.randn(3, 4, 5)
    a, b = y.clone(), d.clone()
    a.index_put_((I(0, 1, 0), I(2, 0, 1)), vals, accumulate=accumulate)
    b.index_put_((I(0, 1, 0).to("neuron"), I(2, 0, 1).to("neuron")), vals.to("neuron"), accumulate=accumulate)
    torch.testing.assert_close(b.cpu(), a)
    a, b = y.clone(), d.clone()
    a[:, I(0, 2), :, I(1, 4)] = 7.0
    b[:, I(0, 2), :, I(1, 4)] = 7.0
    assert torch.equal(b.cpu(), a)
    torch.testing.assert_close(torch.index_put(d, (I(1, 1),), d[0] * 2, accumulate=accumulate).cpu(),
                               torch.index_put(y, (I(1, 1),), y[0] * 2, accumulate=accumulate))
g, r = d.clone().requires_grad_(), y.clone().requires_grad_()
g[I(0, 1, 1), :, I(1, 1, 3)].pow(2).sum().backward()
r[I(0, 1, 1), :, I(1, 1, 3)].pow(2).sum().backward()
torch.testing.assert_close(g.grad.cpu(), r.grad)
z = torch.randn(3, 4, 5)
dz = z.to("neuron")
m = z > 0.3
dm = m.to("neuron")
masked = [lambda t, mm: t[mm], lambda t, mm: t[0][mm[0]], lambda t, mm: t[:, mm[0, :, 0]],
          lambda t, mm: torch.masked_select(t, mm), lambda t, mm: torch.nonzero(mm), lambda t, mm: torch.argwhere(t > 0),
          lambda t, mm: t[mm[:, :, 1], 2], lambda t, mm: t[mm & False], lambda t, mm: t.nonzero(as_tuple=True)[1]]
for k, f in enumerate(masked):
    a, b = f(z, m), f(dz, dm)
    assert a.shape == b.shape and torch.equal(a, b.cpu()), (k, a.shape, b.shape)
a, b = z.clone(), dz.clone()
a[m] += 1.5
b[dm] += 1.5
assert torch.equal(a, b.cpu())
g, r = dz.clone().requires_grad_(), z.clone().requires_grad_()
g[dm].pow(2).sum().backward()
r[m].pow(2).sum().backward()
torch.testing.assert_close(g.grad.cpu(), r.grad)
assert not torch.neuron.fallback_report(), torch.neuron.format_fallback_report()
"""


@pytest.mark.parametrize("driver", ["protected", "vulkan"])
def test_advanced_indexing_runs_on_the_device(driver):
    run_python(CODE, env={"OPENNEURON_DRIVER": driver, "OPENNEURON_CPU_FALLBACK": "silent"}, timeout=300)

"""Random ops on devices whose memory the host cannot address (protected,
vulkan) draw on the device: Philox numbers from the neuron generator's
(seed, offset), as CUDA does, never through the CPU fallback. Checked for
their distributions, ranges, dropout's scaling and gradient, replay by seed,
generator state and explicit generators, strided outputs, randperm, exponential_,
log_normal_, cauchy_, geometric_, multinomial, and the CPU's
errors for bad arguments. Each driver runs in a fresh interpreter."""
import pytest

from conftest import run_python

CODE = """
import torch
torch.manual_seed(0)
n = 200000
for dt in [torch.float32, torch.float64, torch.float16, torch.bfloat16]:
    u = torch.empty(n, device="neuron", dtype=dt).uniform_(-2, 3).cpu().double()
    # (float16 and bfloat16 round the float32 draw: 3 itself is possible, as on the CPU)
    assert u.min() >= -2 and (u.max() < 3 if dt.itemsize >= 4 else u.max() <= 3), (dt, u.min(), u.max())
    assert abs(u.mean() - 0.5) < 0.02 and abs(u.var() - 25 / 12) < 0.05, (dt, u.mean(), u.var())
    if dt == torch.float64 and torch.neuron.get_device_properties(0).kernel_target == "glsl":
        continue
    z = torch.randn(n, device="neuron", dtype=dt).cpu().double()
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02, (dt, z.mean(), z.std())
b = torch.empty(n, device="neuron").bernoulli_(0.3).cpu()
assert set(b.unique().tolist()) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.01
p = torch.rand(n, device="neuron")
bt = torch.bernoulli(p).cpu(); assert abs(bt.mean() - 0.5) < 0.01
r = torch.randint(-5, 7, (n,), device="neuron").cpu()
assert r.min() == -5 and r.max() == 6 and r.dtype == torch.int64
r8 = torch.randint(0, 256, (n,), device="neuron", dtype=torch.uint8).cpu(); assert r8.max() == 255
x = torch.randn(1000, 100, device="neuron", requires_grad=True)
y = torch.nn.functional.dropout(x, 0.25)
keep = (y != 0).float().mean().item(); assert abs(keep - 0.75) < 0.01, keep
torch.testing.assert_close(y, torch.where(y != 0, x / 0.75, 0.0))
y.sum().backward(); torch.testing.assert_close(x.grad, (y != 0).float() / 0.75)
# a seed replays; each call draws new numbers; the state carries the offset
torch.manual_seed(3); a1 = torch.rand(8, device="neuron"); a2 = torch.rand(8, device="neuron")
torch.manual_seed(3); assert torch.equal(torch.rand(8, device="neuron"), a1)
assert not torch.equal(a1, a2)
s = torch.neuron.get_rng_state(); c1 = torch.randn(5, device="neuron"); torch.neuron.set_rng_state(s)
assert torch.equal(torch.randn(5, device="neuron"), c1)
g = torch.Generator(device="neuron").manual_seed(9)
assert torch.equal(torch.rand(4, device="neuron", generator=g), torch.rand(4, device="neuron", generator=torch.Generator(device="neuron").manual_seed(9)))
# strided self
m = torch.zeros(6, 6, device="neuron"); m[:, ::2].uniform_(); mm = m.cpu()
assert (mm[:, 1::2] == 0).all() and (mm[:, ::2] > 0).any()
# normal with tensor means and standard deviations: mean + std * z, broadcast
mu = torch.linspace(-3, 3, n, device="neuron")
z1 = (torch.normal(mu, 2.0) - mu).cpu(); assert abs(z1.mean()) < 0.03 and abs(z1.std() - 2) < 0.03
sd = torch.full((n,), 0.5, device="neuron")
z2 = torch.normal(1.0, sd).cpu(); assert abs(z2.mean() - 1) < 0.01 and abs(z2.std() - 0.5) < 0.01
z3 = torch.normal(mu.view(-1, 1)[:4], sd[:3]); assert z3.shape == (4, 3)
for bad in (lambda: torch.normal(mu, -1.0), lambda: torch.normal(mu, -sd)):
    try:
        bad(); raise AssertionError("no error")
    except RuntimeError as e:
        assert "std" in str(e), e
# randperm: a permutation in every dtype the kernels write, replayed by seed,
# each position uniform over the draws (the mean of position 0 over 400 permutations)
for dt in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.float32, torch.float64):
    q = torch.randperm(100, device="neuron", dtype=dt)
    assert q.dtype == dt and sorted(q.cpu().long().tolist()) == list(range(100)), dt
torch.manual_seed(4); q1 = torch.randperm(1000, device="neuron"); torch.manual_seed(4)
assert torch.equal(torch.randperm(1000, device="neuron"), q1) and not torch.equal(q1.cpu(), torch.arange(1000))
first = torch.stack([torch.randperm(10, device="neuron")[0] for _ in range(400)]).float().cpu()
assert abs(first.mean() - 4.5) < 0.6 and len(first.unique()) == 10, first.mean()
o = torch.empty(2, dtype=torch.int64, device="neuron"); torch.randperm(7, out=o)
assert sorted(o.cpu().tolist()) == list(range(7))
assert torch.randperm(0, device="neuron").numel() == 0
# bad arguments raise the CPU's errors
for bad in (lambda: torch.empty(3, device="neuron").uniform_(2, 1), lambda: torch.empty(3, device="neuron").normal_(0, -1),
            lambda: torch.empty(3, device="neuron").bernoulli_(1.5), lambda: torch.bernoulli(torch.tensor([2.0], device="neuron"))):
    try:
        bad(); raise AssertionError("no error")
    except RuntimeError as e:
        pass
assert not torch.neuron.fallback_report(), torch.neuron.format_fallback_report()
"""


@pytest.mark.parametrize("driver", ["protected", "vulkan"])
def test_random_ops_draw_on_the_device(driver):
    # The fallback report must stay empty (the bad arguments raise the
    # CPU's errors through the fallback, which does not count a call that raised).
    run_python(CODE, env={"OPENNEURON_DRIVER": driver, "OPENNEURON_CPU_FALLBACK": "silent"}, timeout=300)


DISTRIBUTIONS = """
import math, torch
torch.manual_seed(0)
glsl = torch.neuron.get_device_properties(0).kernel_target == "glsl"
n = 100000

def ks(x, cdf):
    # Kolmogorov-Smirnov statistic sqrt(n) * D; above 1.95 has p < 0.001
    x = x.double().sort().values
    f = cdf(x); i = torch.arange(1, x.numel() + 1, dtype=torch.double)
    return math.sqrt(x.numel()) * torch.maximum(i / x.numel() - f, f - (i - 1) / x.numel()).max().item()

dtypes = [torch.float32, torch.float16] + ([] if glsl else [torch.float64])
for dt in dtypes:
    e = torch.empty(n, device="neuron", dtype=dt).exponential_(2.0).cpu().double()
    assert (e > 0).all(), dt  # never 0, as CUDA's
    continuous = dt != torch.float16   # (float16's rounding steps alone exceed the bound)
    if continuous:
        assert ks(e, lambda x: 1 - torch.exp(-2 * x)) < 1.95, dt
    assert abs(e.mean() - 0.5) < 0.01, (dt, e.mean())
    ln = torch.empty(n, device="neuron", dtype=dt).log_normal_(0.5, 0.3).cpu().double()
    assert (ln > 0).all() and (not continuous or ks(ln, lambda x: torch.special.ndtr((x.log() - 0.5) / 0.3)) < 1.95), dt
    c = torch.empty(n, device="neuron", dtype=dt).cauchy_(1.0, 2.0).cpu().double()
    assert not continuous or ks(c, lambda x: 0.5 + torch.atan((x - 1) / 2) / math.pi) < 1.95, dt
    assert abs(c.median() - 1) < 0.05, (dt, c.median())
for dt in [torch.float32] + ([] if glsl else [torch.int32, torch.int64]):  # (integers: drawn in float64)
    g = torch.empty(n, device="neuron", dtype=dt).geometric_(0.3).cpu()
    assert g.dtype == dt and g.min() >= 1, dt
    for k in (1, 2, 3):
        assert abs((g == k).double().mean() - 0.3 * 0.7 ** (k - 1)) < 0.006, (dt, k)

# multinomial: the CPU's exponential race; frequencies follow the weights
p = torch.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 1.0, 1.0]], device="neuron")
s = torch.multinomial(p, 20000, replacement=True)
assert s.shape == (2, 20000) and s.dtype == torch.int64
for row, weights in zip(s.cpu(), p.cpu()):
    freq = torch.bincount(row, minlength=4).double() / row.numel()
    assert (freq - weights / weights.sum()).abs().max() < 0.015, freq
picks = torch.stack([torch.multinomial(p[0], 2) for _ in range(1000)]).cpu()
assert (picks != 1).all() and (picks[:, 0] != picks[:, 1]).all()   # weight 0 never, no repeats
first = torch.bincount(picks[:, 0], minlength=4).double() / 1000
assert (first - torch.tensor([0.1, 0.0, 0.6, 0.3], dtype=torch.double)).abs().max() < 0.05, first
assert torch.multinomial(p, 4).sort(1).values.cpu()[1].tolist() == [0, 1, 2, 3]
assert torch.multinomial(p[0], 1).shape == (1,) and torch.multinomial(p, 1).shape == (2, 1)
out = torch.empty(0, dtype=torch.long, device="neuron"); torch.multinomial(p, 3, True, out=out); assert out.shape == (2, 3)
gen = torch.Generator(device="neuron")
draws = [torch.multinomial(p, 3, True, generator=gen.manual_seed(5)).cpu() for _ in range(2)]
assert torch.equal(*draws)
assert not torch.neuron.fallback_report(), torch.neuron.format_fallback_report()
# the CPU's errors for bad arguments and distributions
for bad in (lambda: torch.empty(3, device="neuron").exponential_(-1), lambda: torch.empty(3, device="neuron").geometric_(1.5),
            lambda: torch.multinomial(torch.zeros(3, device="neuron"), 1),
            lambda: torch.multinomial(torch.tensor([1.0, -1.0], device="neuron"), 1),
            lambda: torch.multinomial(torch.tensor([1.0, float("nan")], device="neuron"), 1),
            lambda: torch.multinomial(torch.ones(3, device="neuron"), 4)):
    try:
        bad(); raise AssertionError("no error")
    except RuntimeError:
        pass
"""


@pytest.mark.parametrize("driver", ["protected", "vulkan"])
def test_distributions_and_multinomial_draw_on_the_device(driver):
    # exponential_, log_normal_, cauchy_, geometric_ and multinomial: device
    # ops over Philox draws, checked against their distributions' CDFs.
    run_python(DISTRIBUTIONS, env={"OPENNEURON_DRIVER": driver, "OPENNEURON_CPU_FALLBACK": "silent"}, timeout=300)

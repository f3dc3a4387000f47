"""Random numbers: one default generator per device seeded by
torch.manual_seed, torch.cuda's RNG API, torch.Generator(device="neuron"),
and reproducible random ops."""
import pytest
import torch
import torch.nn.functional as F

N = torch.neuron


def draw(device="neuron", generator=None):
    return torch.randn(16, device=device, generator=generator)


def test_manual_seed_makes_draws_reproducible():
    torch.manual_seed(1234)
    a = draw()
    b = draw()
    torch.manual_seed(1234)
    assert torch.equal(draw(), a)
    assert torch.equal(draw(), b)
    assert not torch.equal(a, b)
    assert a.device == torch.device("neuron", 0)


def test_host_driver_draws_match_cpu():
    # The host driver's kernels are CPU kernels drawing from a CPU engine
    # seeded like the CPU generator: the same seed gives the same numbers.
    torch.manual_seed(7)
    n = torch.randn(100, device="neuron")
    torch.manual_seed(7)
    c = torch.randn(100)
    assert torch.equal(n.cpu(), c)


def test_torch_manual_seed_seeds_every_device():
    torch.manual_seed(5)
    d0, d3 = draw("neuron:0"), draw("neuron:3")
    torch.manual_seed(5)
    assert torch.equal(draw("neuron:3"), d3)
    assert torch.equal(draw("neuron:0"), d0)
    assert all(g.initial_seed() == 5 for g in N.default_generators)


def test_per_device_generators_are_independent():
    N.manual_seed_all(0)
    with N.device(1):
        N.manual_seed(11)  # only device 1
        assert N.initial_seed() == 11
    assert N.initial_seed() == 0
    on1 = draw("neuron:1")
    N.manual_seed(99)  # current device (0) only: must not disturb device 1
    N.manual_seed_all(0)
    with N.device(1):
        N.manual_seed(11)
    draw("neuron:0")  # drawing on device 0 does not advance device 1
    assert torch.equal(draw("neuron:1"), on1)
    assert N.default_generators[1].device == torch.device("neuron", 1)
    assert N.default_generators[-1].device == torch.device("neuron", 3)
    assert len(N.default_generators) == 4


def test_rng_state_round_trip():
    torch.manual_seed(3)
    draw()
    state = N.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    first = draw()
    N.set_rng_state(state)
    assert torch.equal(draw(), first)
    # per device, and all at once
    states = N.get_rng_state_all()
    assert len(states) == 4
    drawn = [draw(f"neuron:{i}") for i in range(4)]
    N.set_rng_state_all(states)
    assert all(torch.equal(draw(f"neuron:{i}"), drawn[i]) for i in range(4))
    s2 = N.get_rng_state("neuron:2")
    x = draw("neuron:2")
    N.set_rng_state(s2, "neuron:2")
    assert torch.equal(draw("neuron:2"), x)


def test_fork_rng():
    torch.manual_seed(0)
    with torch.random.fork_rng(device_type="neuron", devices=[0, 1]):
        inside0, inside1 = draw("neuron:0"), draw("neuron:1")
    assert torch.equal(draw("neuron:0"), inside0)
    assert torch.equal(draw("neuron:1"), inside1)


def test_generator_object():
    g = torch.Generator(device="neuron")
    assert g.device == torch.device("neuron", 0)
    g.manual_seed(42)
    assert g.initial_seed() == 42
    a = draw(generator=g)
    g.manual_seed(42)
    assert torch.equal(draw(generator=g), a)
    # a private generator does not touch the default one
    torch.manual_seed(1)
    ref = draw()
    torch.manual_seed(1)
    draw(generator=g)
    assert torch.equal(draw(), ref)
    state = g.get_state()
    b = torch.rand(5, device="neuron", generator=g)
    g.set_state(state)
    assert torch.equal(torch.rand(5, device="neuron", generator=g), b)
    g1 = torch.Generator(device="neuron:1")
    assert g1.device == torch.device("neuron", 1)
    assert torch.Generator(device="neuron").initial_seed() == 67280421310721


def test_random_ops_reproducible():
    t = torch.empty(64, device="neuron")

    def run():
        return [
            F.dropout(torch.ones(64, device="neuron"), 0.5),
            torch.nn.Dropout(0.3)(torch.ones(8, 8, device="neuron")),
            torch.randperm(20, device="neuron"),
            torch.bernoulli(torch.full((64,), 0.5, device="neuron")),
            t.normal_(2.0, 3.0).clone(),
            t.uniform_(-1, 1).clone(),
            t.exponential_().clone(),
            torch.randint(0, 10, (16,), device="neuron"),
            torch.multinomial(torch.ones(10, device="neuron"), 4),
            torch.rand(3, 3, dtype=torch.float64, device="neuron"),
            torch.randn(4, dtype=torch.complex64, device="neuron"),
        ]

    torch.manual_seed(2024)
    first = run()
    torch.manual_seed(2024)
    second = run()
    for a, b in zip(first, second):
        assert a.device.type == "neuron"
        assert torch.equal(a, b)
    drop = first[0]
    assert 10 < int((drop == 0).sum()) < 54  # about half dropped
    assert set(drop.unique().tolist()) <= {0.0, 2.0}
    assert sorted(first[2].tolist()) == list(range(20))
    assert first[9].dtype == torch.float64
    assert 1.0 < float(first[4].std()) < 5.0 and float(first[5].abs().max()) <= 1.0


@pytest.mark.parametrize(
    "call",
    [
        lambda g: torch.randn(3, device="neuron", generator=g),
        lambda g: torch.ones(3, device="neuron").normal_(generator=g),
        lambda g: torch.randperm(5, device="neuron", generator=g),
        lambda g: torch.bernoulli(torch.full((3,), 0.5, device="neuron"), generator=g),
    ],
    ids=["randn", "normal_", "randperm", "bernoulli"],
)
def test_cpu_generator_with_neuron_tensors_is_a_clear_error(call):
    with pytest.raises(RuntimeError) as info:
        call(torch.Generator())
    message = str(info.value)
    assert "neuron" in message and "cpu" in message and "generator" in message, message
    assert "aten::" in message
    assert draw().device.type == "neuron"


def test_seed_and_initial_seed():
    torch.manual_seed(77)
    assert N.initial_seed() == 77
    assert torch.initial_seed() == 77
    N.seed()
    fresh = N.initial_seed()
    assert fresh != 77
    N.seed_all()
    seeds = {g.initial_seed() for g in N.default_generators}
    assert len(seeds) == 1 and seeds != {fresh}

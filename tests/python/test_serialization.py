"""Serialization: torch.save/torch.load of neuron tensors, storages and
state_dicts, with every kind of map_location; storage methods."""
import io

import pytest
import torch


def save(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return buf


def payload():
    t = torch.arange(6.0, device="neuron:1").reshape(2, 3)
    return {
        "t": t,
        "view": t[:, 1],  # shares t's storage
        "ints": torch.tensor([1, 2, 3], dtype=torch.int64, device="neuron:0"),
        "half": torch.tensor([0.5, -1.25], dtype=torch.bfloat16, device="neuron:1"),
        "cplx": torch.tensor([1 + 2j], dtype=torch.complex128, device="neuron:0"),
    }


@pytest.mark.parametrize(
    "map_location,expected",
    [
        (None, {"t": "neuron:1", "ints": "neuron:0"}),
        ("cpu", {"t": "cpu", "ints": "cpu"}),
        ("neuron", {"t": "neuron:0", "ints": "neuron:0"}),
        ("neuron:1", {"t": "neuron:1", "ints": "neuron:1"}),
        (torch.device("neuron", 3), {"t": "neuron:3", "ints": "neuron:3"}),
        ({"neuron:1": "neuron:2"}, {"t": "neuron:2", "ints": "neuron:0"}),
        ({"neuron:1": "cpu", "neuron:0": "cpu"}, {"t": "cpu", "ints": "cpu"}),
    ],
    ids=["none", "cpu", "neuron", "neuron1", "device3", "dict", "dict_cpu"],
)
def test_save_load_neuron_tensors(map_location, expected):
    original = payload()
    loaded = torch.load(save(original), map_location=map_location)
    assert str(loaded["t"].device) == expected["t"]
    assert str(loaded["ints"].device) == expected["ints"]
    assert loaded["view"].device == loaded["t"].device
    for key, value in original.items():
        assert loaded[key].dtype == value.dtype, key
        assert torch.equal(loaded[key].cpu(), value.cpu()), key
    # the view still aliases its base after loading
    loaded["t"][0, 1] = 100.0
    assert loaded["view"][0].item() == 100.0


def test_load_cpu_checkpoint_onto_neuron():
    cpu = {"w": torch.randn(4, 4, dtype=torch.float64), "step": torch.tensor(7)}
    buf = save(cpu)
    for loc, index in (("neuron", 0), ("neuron:2", 2)):
        buf.seek(0)
        loaded = torch.load(buf, map_location=loc)
        assert loaded["w"].device == torch.device("neuron", index)
        assert loaded["w"].dtype == torch.float64
        assert torch.equal(loaded["w"].cpu(), cpu["w"])
        assert loaded["step"].item() == 7


def test_state_dict_round_trip_weights_only():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)).to("neuron")
    model(torch.randn(5, 3, device="neuron"))  # update running stats
    buf = save(model.state_dict())
    state = torch.load(buf, weights_only=True)
    assert all(v.device.type == "neuron" for v in state.values())
    fresh = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    buf.seek(0)
    fresh.load_state_dict(torch.load(buf, map_location="cpu", weights_only=True))
    for (k, v), (k2, v2) in zip(model.state_dict().items(), fresh.state_dict().items()):
        assert k == k2 and torch.equal(v.cpu(), v2), k
    # loading a CPU state_dict into a neuron model copies into its tensors
    target = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4)).to("neuron:1")
    weight = target[0].weight
    target.load_state_dict(fresh.state_dict())
    assert target[0].weight is weight and weight.device == torch.device("neuron", 1)
    assert torch.equal(weight.detach().cpu(), fresh[0].weight.detach())


def test_optimizer_state_round_trip():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to("neuron")
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.randn(3, 4, device="neuron")).sum().backward()
    opt.step()
    state = torch.load(save(opt.state_dict()), map_location="neuron")
    for param_state in state["state"].values():
        assert param_state["exp_avg"].device.type == "neuron"
    opt2 = torch.optim.Adam(model.parameters(), lr=0.1)
    opt2.load_state_dict(state)
    for s1, s2 in zip(opt.state.values(), opt2.state.values()):
        assert torch.equal(s1["exp_avg_sq"].cpu(), s2["exp_avg_sq"].cpu())


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_storage_methods():
    t = torch.arange(4.0, device="neuron:1")
    storage = t.untyped_storage()
    assert storage.device == torch.device("neuron", 1)
    assert storage.is_neuron
    assert storage.nbytes() == 16
    host = storage.cpu()
    assert host.device.type == "cpu" and not host.is_neuron
    assert torch.equal(torch.tensor([], dtype=torch.float32).set_(host), torch.arange(4.0))
    assert storage.neuron(1).data_ptr() == storage.data_ptr()  # already there
    moved = storage.neuron(2)
    assert moved.device == torch.device("neuron", 2)
    assert torch.equal(torch.tensor([], device="neuron:2").set_(moved).cpu(), torch.arange(4.0))
    fresh = torch.UntypedStorage(12, device="neuron")
    assert fresh.device == torch.device("neuron", 0) and fresh.nbytes() == 12
    # storage-level save/load
    loaded = torch.load(save(storage))
    assert loaded.device == torch.device("neuron", 1)
    assert bytes(loaded.cpu()) == bytes(host)

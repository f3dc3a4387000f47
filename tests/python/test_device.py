"""Devices: count, selection, properties, and the generic torch.accelerator
API, as torch.cuda has them."""
import threading

import pytest
import torch

from conftest import run_python


def test_available_and_count():
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == 4
    torch.ones(1, device="neuron")
    assert torch.neuron.is_initialized()
    assert torch.neuron.is_bf16_supported()
    assert torch.bfloat16 in torch.neuron.get_amp_supported_dtype()


@pytest.mark.timeout(60)
def test_device_count_from_env():
    proc = run_python(
        """
        import torch
        print(torch.neuron.device_count(), torch.accelerator.device_count())
        torch.ones(1, device="neuron:1")
        try:
            torch.ones(1, device="neuron:2")
        except (IndexError, RuntimeError) as e:
            print(str(e).splitlines()[0])
        """,
        env={"OPENNEURON_HOST_DEVICES": "2"},
    )
    lines = proc.stdout.splitlines()
    assert lines[0] == "2 2"
    assert "neuron:2" in lines[1] and "2 neuron device" in lines[1]


@pytest.mark.timeout(60)
def test_invalid_device_count_env_is_reported():
    proc = run_python(
        """
        import torch
        try:
            torch.ones(1, device="neuron")
        except Exception as e:
            print(type(e).__name__, e)
        """,
        env={"OPENNEURON_HOST_DEVICES": "abc"},
    )
    assert "OPENNEURON_HOST_DEVICES" in proc.stdout
    assert "abc" in proc.stdout, proc.stdout


def test_current_and_set_device():
    assert torch.neuron.current_device() == 0
    torch.neuron.set_device(2)
    assert torch.neuron.current_device() == 2
    assert torch.ones(1, device="neuron").device == torch.device("neuron", 2)
    assert torch.zeros(2).neuron().device == torch.device("neuron", 2)
    torch.neuron.set_device("neuron:1")
    assert torch.neuron.current_device() == 1
    torch.neuron.set_device(torch.device("neuron", 3))
    assert torch.neuron.current_device() == 3
    torch.neuron.set_device(0)
    assert torch.ones(1, device="neuron").device.index == 0


def test_current_device_is_per_thread():
    torch.neuron.set_device(1)
    seen = []
    thread = threading.Thread(target=lambda: seen.append(torch.neuron.current_device()))
    thread.start()
    thread.join()
    assert seen == [0]
    assert torch.neuron.current_device() == 1


def test_device_context_manager_restores_on_exception():
    with torch.neuron.device(1):
        assert torch.neuron.current_device() == 1
        assert torch.empty(1, device="neuron").device.index == 1
        with torch.neuron.device("neuron:3"):
            assert torch.neuron.current_device() == 3
        assert torch.neuron.current_device() == 1
    assert torch.neuron.current_device() == 0
    with pytest.raises(KeyError):
        with torch.neuron.device(2):
            raise KeyError("inside")
    assert torch.neuron.current_device() == 0


def test_device_of():
    t = torch.ones(1, device="neuron:3")
    with torch.neuron.device_of(t):
        assert torch.neuron.current_device() == 3
    assert torch.neuron.current_device() == 0
    with torch.neuron.device_of(torch.ones(1)):  # a CPU tensor changes nothing
        assert torch.neuron.current_device() == 0


def test_device_properties():
    props = torch.neuron.get_device_properties(1)
    assert props.total_memory > 0
    assert props.name == torch.neuron.get_device_name(1)
    assert "1" in props.name
    assert props.name != torch.neuron.get_device_name(0)
    assert props.driver == "host"
    assert props.host_addressable
    assert props.multi_processor_count >= 1
    assert torch.neuron.get_device_properties("neuron:2").name == torch.neuron.get_device_name(2)
    assert torch.neuron.get_device_capability() == (props.major, props.minor)
    free, total = torch.neuron.mem_get_info(1)
    assert total == props.total_memory and 0 < free <= total


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.ones(1, device="neuron:9"),
        lambda: torch.ones(1).to("neuron:4"),
        lambda: torch.neuron.set_device(7),
        lambda: torch.neuron.get_device_properties(5),
        lambda: torch.neuron.memory_allocated(4),
    ],
    ids=["factory", "to", "set_device", "properties", "memory"],
)
def test_invalid_index_names_device_count(make):
    with pytest.raises((IndexError, RuntimeError)) as info:
        make()
    message = str(info.value)
    assert "4 neuron device" in message, message
    assert "0..3" in message
    assert torch.neuron.current_device() == 0
    assert torch.ones(1, device="neuron").item() == 1.0


def test_tensor_and_module_helpers():
    t = torch.arange(4.0)
    n = t.neuron()
    assert n.is_neuron and not t.is_neuron
    assert n.device == torch.device("neuron", 0)
    assert torch.equal(n.cpu(), t)
    assert t.neuron(2).device == torch.device("neuron", 2)
    assert t.to("neuron:1").device == torch.device("neuron", 1)
    assert n.to("neuron:1").get_device() == 1
    assert t.to(torch.device("neuron", 3)).get_device() == 3
    assert n.get_device() == 0
    assert t.untyped_storage().neuron().device.type == "neuron"

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    with torch.no_grad():  # (a live graph: see test_module_conversion_with_live_graph)
        cpu_out = model.eval()(torch.ones(2, 3))
    model.neuron(1)
    assert all(p.device == torch.device("neuron", 1) for p in model.parameters())
    assert all(b.device == torch.device("neuron", 1) for b in model.buffers())
    out = model(torch.ones(2, 3, device="neuron:1"))
    assert out.device == torch.device("neuron", 1)
    torch.testing.assert_close(out.cpu(), cpu_out)


def test_module_to_keeps_parameters_and_ties():
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))
    model[1].weight = model[0].weight  # tied, as in a language model
    weight = model[0].weight
    model.to("neuron")
    assert model[0].weight is weight and model[1].weight is weight
    assert weight.device.type == "neuron" and isinstance(weight, torch.nn.Parameter)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    assert len(list(model.parameters())) == 1
    model(torch.tensor([[1, 2]], device="neuron")).sum().backward()
    opt.step()
    assert torch.equal(model[0].weight.detach().cpu(), model[1].weight.detach().cpu())


@pytest.mark.timeout(60)
def test_module_conversion_with_live_graph():
    proc = run_python(
        """
        import torch
        errors = []
        for convert in (lambda m: m.to("neuron"), lambda m: m.double()):
            m = torch.nn.LayerNorm(4)
            out = m(torch.ones(2, 4))  # graph alive
            try:
                convert(m)
            except RuntimeError as e:
                errors.append(str(e))
        print(errors)
        """
    )
    assert proc.stdout.strip() == "[]"


def test_get_device_module():
    assert torch.get_device_module("neuron") is torch.neuron
    assert torch.get_device_module(torch.device("neuron", 1)) is torch.neuron


def test_accelerator_api():
    acc = torch.accelerator
    assert acc.is_available()
    assert acc.current_accelerator() == torch.device("neuron")
    assert acc.current_accelerator().type == "neuron"
    assert acc.device_count() == torch.neuron.device_count()
    assert acc.current_device_index() == 0
    acc.set_device_index(2)
    assert torch.neuron.current_device() == 2
    assert torch.empty(1, device="neuron").device.index == 2
    acc.set_device_index(0)
    with acc.device_index(3):
        assert torch.neuron.current_device() == 3
        assert acc.current_device_index() == 3
    assert acc.current_device_index() == 0

    stream = acc.current_stream()
    assert stream.device == torch.device("neuron", 0)
    assert stream == torch.neuron.current_stream()
    side = torch.Stream(device="neuron")
    acc.set_stream(side)
    assert acc.current_stream() == side
    assert torch.neuron.current_stream() == side
    x = torch.randn(64, 64, device="neuron") @ torch.ones(64, 64, device="neuron")
    acc.synchronize()
    acc.set_stream(torch.neuron.default_stream())
    assert torch.neuron.current_stream().stream_id == 0
    assert x.shape == (64, 64)


def test_accelerator_device_capability():
    capability = torch.accelerator.get_device_capability("neuron:0")
    assert torch.float32 in capability["supported_dtypes"]
    assert torch.bfloat16 in capability["supported_dtypes"]


@pytest.mark.timeout(60)
def test_accelerator_empty_host_cache():
    proc = run_python(
        """
        import torch
        x = torch.ones(4).pin_memory().to("neuron", non_blocking=True)
        torch.neuron.synchronize()
        torch.accelerator.empty_host_cache()
        print("ok", x.sum().item())
        """,
        check=False,
    )
    assert proc.returncode == 0, f"exit status {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.strip() == "ok 4.0"

"""Dynamo's device interface for `neuron` (openneuron.compiler.device_interface):
registration, and that each method answers as torch.neuron does."""
import pytest
import torch
from torch._dynamo import device_interface as di

from openneuron.compiler.device_interface import NeuronInterface, register_device_interface

pytestmark = pytest.mark.timeout(120)

N = torch.neuron


@pytest.fixture
def iface():
    register_device_interface()
    yield di.get_interface_for_device("neuron")
    di.caching_worker_current_devices.pop("neuron", None)
    di.caching_worker_device_properties.pop("neuron", None)


def test_registered(iface):
    assert iface is NeuronInterface
    assert issubclass(iface, di.DeviceInterface)
    assert di.get_interface_for_device(torch.device("neuron", 1)) is NeuronInterface
    assert ("neuron", NeuronInterface) in list(di.get_registered_device_interfaces())
    # Registering again is harmless; the other devices keep their interfaces.
    register_device_interface()
    assert di.get_interface_for_device("neuron") is NeuronInterface
    assert di.get_interface_for_device("cpu") is di.CpuInterface


def test_devices(iface):
    assert iface.is_available()
    assert iface.device_count() == N.device_count() >= 1
    assert iface.current_device() == 0


def test_set_device_round_trip(iface):
    last = iface.device_count() - 1
    iface.set_device(last)
    assert iface.current_device() == N.current_device() == last
    iface.set_device(torch.device("neuron", 0))
    assert iface.current_device() == 0
    iface.set_device("neuron:%d" % last)
    assert N.current_device() == last


def test_device_context_and_exchange(iface):
    if iface.device_count() < 2:
        pytest.skip("needs two neuron devices")
    with iface.device(1):
        assert iface.current_device() == 1
        assert torch.empty(1, device="neuron").device.index == 1
    assert iface.current_device() == 0
    assert iface.exchange_device(1) == 0
    assert iface.current_device() == 1
    assert iface.maybe_exchange_device(0) == 1
    assert iface.current_device() == 0
    assert iface.exchange_device(-1) == -1
    assert iface.current_device() == 0
    # Dynamo's own guard drives exchange_device / maybe_exchange_device.
    with di.DeviceGuard(iface, 1):
        assert iface.current_device() == 1
    assert iface.current_device() == 0
    with di.DeviceGuard(iface, None):
        assert iface.current_device() == 0


def test_streams(iface):
    default = iface.current_stream()
    assert isinstance(default, torch.Stream)
    assert default == N.default_stream()
    assert iface.get_raw_stream(0) == default.stream_id
    assert isinstance(iface.get_raw_stream(0), int)

    s = iface.Stream()
    assert isinstance(s, torch.Stream) and s.device == torch.device("neuron", 0)
    with iface.stream(s):
        assert iface.current_stream() == s
        assert iface.get_raw_stream(0) == s.stream_id
    assert iface.current_stream() == default

    iface.set_stream(s)
    assert N.current_stream() == s
    iface.set_stream(default)
    assert N.current_stream() == default

    iface._set_stream_by_id(s.stream_id, s.device_index, s.device_type)
    assert N.current_stream() == s
    iface._set_stream_by_id(default.stream_id, default.device_index, default.device_type)
    assert N.current_stream() == default


def test_raw_stream_of_other_device(iface):
    if iface.device_count() < 2:
        pytest.skip("needs two neuron devices")
    s1 = iface.Stream(1)
    iface.set_stream(s1)
    assert iface.get_raw_stream(1) == s1.stream_id
    assert iface.get_raw_stream(0) == N.default_stream(0).stream_id


def test_events_and_synchronize(iface):
    start, end = iface.Event(enable_timing=True), iface.Event(enable_timing=True)
    assert isinstance(start, torch.Event) and start.device.type == "neuron"
    s = iface.Stream()
    with iface.stream(s):
        start.record()
        x = torch.randn(256, 256, device="neuron")
        y = x @ x
        end.record()
    end.synchronize()
    assert end.query()
    assert start.elapsed_time(end) >= 0
    iface.synchronize()
    iface.synchronize(0)
    iface.synchronize(torch.device("neuron", 0))
    torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu(), rtol=1e-4, atol=1e-4)


def test_properties(iface):
    props = iface.get_device_properties()
    assert props == N.get_device_properties(0)
    assert props.multi_processor_count >= 1
    assert iface.get_device_properties("neuron:0") == props
    assert iface.get_device_properties(torch.device("neuron", 0)) == props
    last = iface.device_count() - 1
    assert iface.get_device_properties(last) == N.get_device_properties(last)
    with pytest.raises(AssertionError):
        iface.get_device_properties("cpu")


def test_worker_answers_from_recorded_state(iface):
    # Workers see the device the main process recorded, not the live one.
    w = iface.Worker
    assert w.current_device() == 0
    last = iface.device_count() - 1
    w.set_device(last)
    assert w.current_device() == last and N.current_device() == 0
    assert w.get_device_properties() == N.get_device_properties(last)
    assert iface.get_device_properties() == N.get_device_properties(last)


def test_capabilities(iface):
    cc = iface.get_compute_capability()
    assert isinstance(cc, str) and cc == torch.backends.cpu.get_cpu_capability().lower()
    assert iface.is_bf16_supported() and iface.is_bf16_supported(including_emulation=True)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64):
        assert iface.is_dtype_supported(dtype)
    assert iface.is_triton_capable() is False
    iface.raise_if_triton_unavailable()  # no Triton needed: must not raise


def test_memory_allocated(iface):
    N.synchronize()
    before = iface.memory_allocated()
    assert before == N.memory_allocated(0)
    x = torch.empty(1 << 20, dtype=torch.uint8, device="neuron")
    assert iface.memory_allocated() >= before + (1 << 20)
    assert iface.memory_allocated(0) == N.memory_allocated(0)
    del x

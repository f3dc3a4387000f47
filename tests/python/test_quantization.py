"""Quantized tensors on neuron run PyTorch's QuantizedCPU kernels on device
memory (the router's QuantizedPrivateUse1 fallback), as dense ops run its CPU
kernels: quantize_per_tensor / per_channel, dequantize, int_repr, copies
between devices, and torch.ao.quantization.quantize_dynamic models, each
matching the CPU exactly."""
import warnings

import pytest
import torch

pytestmark = pytest.mark.timeout(120)
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", message=".*torchao.*")


def test_quantize_per_tensor_matches_cpu():
    x = torch.randn(4, 8)
    for dtype in (torch.qint8, torch.quint8, torch.qint32):
        q = torch.quantize_per_tensor(x.to("neuron"), 0.05, 3 if dtype == torch.quint8 else 0, dtype)
        ref = torch.quantize_per_tensor(x, 0.05, 3 if dtype == torch.quint8 else 0, dtype)
        assert q.device.type == "neuron" and q.is_quantized and q.dtype == dtype
        assert (q.q_scale(), q.q_zero_point()) == (ref.q_scale(), ref.q_zero_point())
        assert torch.equal(q.int_repr().cpu(), ref.int_repr())
        assert torch.equal(q.dequantize().cpu(), ref.dequantize())
        assert "quantization_scheme=torch.per_tensor_affine" in repr(q)


def test_quantized_tensors_move_between_devices():
    ref = torch.quantize_per_tensor(torch.randn(3, 5), 0.1, 2, torch.quint8)
    on_neuron = ref.to("neuron")
    assert on_neuron.device.type == "neuron" and on_neuron.q_zero_point() == 2
    back = on_neuron.cpu()
    assert back.device.type == "cpu" and back.is_quantized
    assert torch.equal(back.int_repr(), ref.int_repr())
    assert torch.equal(on_neuron.clone().int_repr().cpu(), ref.int_repr())


def test_quantize_per_channel_matches_cpu():
    x = torch.randn(4, 6)
    scales, zero_points = torch.tensor([0.1, 0.2, 0.05, 0.3]), torch.tensor([0, 1, 2, 3])
    q = torch.quantize_per_channel(x.to("neuron"), scales.to("neuron"), zero_points.to("neuron"), 0, torch.quint8)
    ref = torch.quantize_per_channel(x, scales, zero_points, 0, torch.quint8)
    del scales  # the quantizer keeps what it needs
    assert torch.equal(q.int_repr().cpu(), ref.int_repr())
    assert torch.equal(q.dequantize().cpu(), ref.dequantize())
    assert torch.equal(q.q_per_channel_scales().cpu(), ref.q_per_channel_scales())


def test_quantize_dynamic_model_matches_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x = torch.randn(5, 16)
    expected = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)(x)
    quantized = torch.ao.quantization.quantize_dynamic(model.to("neuron"), {torch.nn.Linear}, dtype=torch.qint8)
    out = quantized(x.to("neuron"))
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=1e-6)


def test_quantized_views_and_ops_match_cpu():
    ref = torch.quantize_per_tensor(torch.randn(3, 5), 0.1, 2, torch.quint8)
    n = ref.to("neuron")
    for f in (lambda t: t[1], lambda t: t.view(-1), lambda t: t.t().contiguous(), lambda t: torch.cat([t, t]),
              torch.relu, lambda t: t.clone()):
        a, b = f(n), f(ref)
        assert a.device.type == "neuron" and a.is_quantized
        assert torch.equal(a.int_repr().cpu(), b.int_repr()) and a.q_scale() == b.q_scale()

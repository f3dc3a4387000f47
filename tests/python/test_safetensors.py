"""safetensors and neuron: safetensors.torch.load_file refuses device="neuron"
(its loader knows only the device types it was built for);
openneuron.load_safetensors loads onto any device. Saving neuron tensors and
safetensors.torch.load_model into a neuron model work as they are."""
import pytest
import safetensors.torch
import torch

import openneuron


def test_load_safetensors_onto_neuron(tmp_path):
    path = str(tmp_path / "w.safetensors")
    tensors = {"w": torch.randn(3, 4), "b": torch.arange(5), "h": torch.randn(2).half()}
    safetensors.torch.save_file(tensors, path)
    with pytest.raises(Exception, match="device neuron is invalid"):  # what the workaround is for
        safetensors.torch.load_file(path, device="neuron")
    loaded = openneuron.load_safetensors(path)
    assert set(loaded) == set(tensors)
    for name, t in tensors.items():
        assert loaded[name].device == torch.device("neuron", 0) and loaded[name].dtype == t.dtype
        assert torch.equal(loaded[name].cpu(), t)
    assert openneuron.load_safetensors(path, device="neuron:1")["w"].device == torch.device("neuron", 1)


def test_save_and_load_model_on_neuron(tmp_path):
    path = str(tmp_path / "m.safetensors")
    model = torch.nn.Linear(4, 3).to("neuron")
    safetensors.torch.save_model(model, path)
    other = torch.nn.Linear(4, 3).to("neuron")
    safetensors.torch.load_model(other, path)
    assert torch.equal(other.weight.cpu(), model.weight.cpu()) and other.weight.device.type == "neuron"

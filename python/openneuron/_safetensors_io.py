"""safetensors files straight onto a neuron device.

`safetensors.torch.load_file(path, device="neuron")` is refused by
safetensors itself ("device neuron is invalid"): its Rust loader knows only
the device types it was built for. Saving neuron tensors works as is. This
reads the file through safetensors on the CPU (memory-mapped: one tensor at a
time is materialised) and copies each tensor to the device.
"""
import torch


def load_safetensors(filename, device="neuron"):
    """Like safetensors.torch.load_file(filename, device=...), for any
    device PyTorch knows, neuron included. Returns {name: tensor}."""
    from safetensors import safe_open

    device = torch.device(device)
    tensors = {}
    with safe_open(filename, framework="pt", device="cpu") as f:
        for name in f.keys():
            tensors[name] = f.get_tensor(name).to(device)
    return tensors


"""Per-device-type choices PyTorch's Python makes for "cpu" and "cuda" only,
made for "neuron" as for the CPU, whose kernels the host driver runs.

- `F.linear_cross_entropy` / `nn.LinearCrossEntropyLoss` (chunked path): with
  fp16/bf16 inputs and the "auto" options, PyTorch accumulates in float32
  with the "accurate" policy on CPU and CUDA, but in the input dtype with
  "compact" on any other device type: neuron would lose precision (and
  differ from CPU) for no reason. The table and resolver it reads are
  extended for "neuron"; other device types are left as they are.
"""
from . import require_torch

require_torch(__name__)

import torch


def _linear_cross_entropy():
    try:
        from torch.nn.modules import linear_cross_entropy_options as lce
    except ImportError:  # another torch: nothing to adjust
        return
    defaults = getattr(lce, "_AUTO_DEFAULTS", None)
    options = getattr(lce, "LinearCrossEntropyOptions", None)
    if defaults is None or options is None or not hasattr(options, "_resolve_auto_acc_dtype"):
        return
    for dtype in (torch.float16, torch.bfloat16):
        if ("cpu", dtype) in defaults:
            defaults.setdefault(("neuron", dtype), defaults[("cpu", dtype)])
    resolve = options._resolve_auto_acc_dtype

    def resolve_with_neuron(dtype, device):
        if device is not None and device.type == "neuron":
            return resolve(dtype, torch.device("cpu"))
        return resolve(dtype, device)

    options._resolve_auto_acc_dtype = staticmethod(resolve_with_neuron)


def install():
    _linear_cross_entropy()

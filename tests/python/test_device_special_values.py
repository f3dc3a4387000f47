"""Device kernels at the edges of the float range: every unary ufunc of
PyTorch's OpInfo database, on inf, -inf, NaN, signed zeros, huge, tiny and
subnormal values, gives the CPU's results on the drivers whose eager ops are
device kernels (protected: C++ kernels; vulkan: GLSL). Random samples
rarely hold these values: isinf once answered False for inf on both, and
sign(NaN), softshrink(NaN) and expm1(88) differed from the CPU."""
import pytest

from conftest import run_python

CODE = """
import os, warnings
import torch
from torch.testing._internal.common_methods_invocations import unary_ufuncs
warnings.filterwarnings("ignore")
driver = os.environ["OPENNEURON_DRIVER"]
values = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 3.0, -2.5, 88.0, -88.0, 1e7, -1e7, 1e30, -1e30, 1e-30, -1e-30,
          float("inf"), float("-inf"), float("nan"), 1e-45]
# Limits of the GPU target, not of our kernels: lavapipe flushes subnormals
# to zero (Vulkan's default float controls), and GLSL's sin/cos reduce their
# argument in float32 (exact to |x| ~ 1e7, not at 1e30, where CUDA's sinf is).
gpu_limits = {"sin": {1e30, -1e30}, "cos": {1e30, -1e30}, "tan": {1e30, -1e30}}
# float -> int conversions of values out of range are undefined in C++ (x86
# gives INT_MIN, CUDA saturates): not compared.
skip = {"int", "frexp"}
failures, checked = [], 0
for dtype in (torch.float32, torch.float64, torch.float16):
    for op in unary_ufuncs:
        if op.name.startswith("_refs.") or op.name in skip or dtype not in op.supported_dtypes("cpu"):
            continue
        vs = [v for v in values if not (driver == "vulkan" and (v == 1e-45 or v in gpu_limits.get(op.name, ())))]
        x = torch.tensor(vs, dtype=torch.float64).to(dtype)
        try:
            expected = op(x.clone())
        except Exception:  # noqa: BLE001 -- the CPU refuses this dtype
            continue
        got = op(x.to("neuron")).cpu()
        tol = dict(atol=1e-3, rtol=1e-3) if dtype == torch.float16 else dict(atol=1e-5, rtol=1e-4)
        try:
            torch.testing.assert_close(got, expected, equal_nan=True, **tol)
            checked += 1
        except AssertionError:
            wrong = [(v, e, g) for v, e, g in zip(vs, expected.tolist(), got.tolist())
                     if not torch.isclose(torch.tensor(g, dtype=torch.float64), torch.tensor(e, dtype=torch.float64),
                                          equal_nan=True, **tol)]
            failures.append(f"{op.name} {dtype}: (x, cpu, neuron) {wrong[:4]}")
assert checked > 100, checked
assert not failures, chr(10).join(failures)
"""


@pytest.mark.timeout(600)
@pytest.mark.parametrize("driver", ["protected", "vulkan"])
def test_unary_ufuncs_at_the_edges_of_the_float_range(driver):
    run_python(CODE, env={"OPENNEURON_DRIVER": driver, "OPENNEURON_VULKAN_DEVICES": "0",
                    "OPENNEURON_CPU_FALLBACK": "silent"}, timeout=560)

"""torch.compile(backend="neuron") against eager on PyTorch's own OpInfo
samples, for the ops the compiler generates code for (pointwise, reductions,
normalizations, views): test data nobody here wrote. Each sample is compiled
on its own (fresh Dynamo state), run, and compared with the same op in eager
mode on `neuron`, forward and, for floating dtypes, backward.

OPENNEURON_OPINFO_SAMPLES (default 3) samples per op and dtype."""

import os
import warnings

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import openneuron.compiler as compiler

DEV = "neuron"
SAMPLES = int(os.environ.get("OPENNEURON_OPINFO_SAMPLES", "3"))

# OpInfo names whose decompositions land on generated kernels.
GENERATED = [
    "abs", "acos", "add", "addcmul", "addcdiv", "amax", "amin", "asin", "atan", "atan2", "ceil", "clamp",
    "cos", "cosh", "div", "eq", "erf", "exp", "exp2", "expm1", "floor", "fmod", "frac", "ge", "gt", "lerp",
    "le", "log", "log10", "log1p", "log2", "logical_and", "logical_not", "logsumexp", "lt", "maximum", "mean",
    "minimum", "mul", "ne", "neg", "nn.functional.elu", "nn.functional.gelu", "nn.functional.hardtanh",
    "nn.functional.layer_norm", "nn.functional.leaky_relu", "nn.functional.relu", "nn.functional.silu",
    "nn.functional.softplus", "pow", "prod", "reciprocal", "remainder", "round", "rsqrt", "rsub", "sigmoid",
    "sign", "sin", "sinh", "softmax", "log_softmax", "sqrt", "square", "std", "sub", "sum", "tan", "tanh",
    "trunc", "var", "var_mean", "where", "xlogy", "t", "permute", "transpose", "expand", "reshape", "cat",
]
DTYPES = (torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16)

OPS = {op.name: op for op in op_db if op.variant_test_name == "" and op.name in GENERATED}


def _cases():
    for name in GENERATED:
        op = OPS.get(name)
        if op is None:
            continue
        for dtype in DTYPES:
            if dtype in op.supported_dtypes("cpu"):
                yield pytest.param(op, dtype, id=f"{name}-{str(dtype).split('.')[-1]}")


def _tolerance(dtype):
    # Generated kernels compute 16-bit floats in float32 and round once, eager
    # rounds after every op; transcendental functions are within a few ulp.
    return {torch.bfloat16: (2e-2, 2e-2), torch.float16: (2e-3, 2e-3), torch.float32: (1e-4, 1e-5)}.get(
        dtype, (1e-7, 1e-7))


def _flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return []


@pytest.mark.parametrize("op,dtype", list(_cases()))
def test_compiled_matches_eager_on_opinfo_samples(op, dtype, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENNEURON_COMPILE_CACHE_DIR", str(tmp_path / "kernels"))
    grad = dtype.is_floating_point and op.supports_autograd
    samples = list(op.sample_inputs(DEV, dtype, requires_grad=grad))[:SAMPLES]
    for sample in samples:
        def fn(x, *args):
            return op(x, *args, **sample.kwargs)

        args = [sample.input, *sample.args]
        if not all(isinstance(a, torch.Tensor) or isinstance(a, (int, float, bool)) for a in args):
            continue
        torch._dynamo.reset()
        clone = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
                 for a in args]
        expected = fn(*args)
        outs = _flat(expected)
        rtol, atol = _tolerance(outs[0].dtype if outs else dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", compiler.CompileFallbackWarning)
            got = torch.compile(fn, backend="neuron")(*clone)
        torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True,
                                   msg=lambda m: f"{op.name} {dtype} forward, sample {sample.summary()}: {m}")
        if not grad:
            continue
        outs_e = [t for t in _flat(expected) if t.requires_grad]
        outs_c = [t for t in _flat(got) if t.requires_grad]
        if not outs_e:
            continue
        g = [torch.randn_like(t) for t in outs_e]
        ins_e = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        ins_c = [a for a in clone if isinstance(a, torch.Tensor) and a.requires_grad]
        grads_e = torch.autograd.grad(outs_e, ins_e, g, allow_unused=True)
        grads_c = torch.autograd.grad(outs_c, ins_c, g, allow_unused=True)
        for a, b in zip(grads_c, grads_e):
            if b is None:
                continue
            torch.testing.assert_close(a, b, rtol=rtol * 10, atol=atol * 10, equal_nan=True,
                                       msg=lambda m: f"{op.name} {dtype} backward, sample {sample.summary()}: {m}")

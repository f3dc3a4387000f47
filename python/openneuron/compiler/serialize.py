"""FX graph (after AOTAutograd, core ATen) -> the JSON the C++ compiler reads.

Tensors carry dtype, symbolic shape, strides and storage offset from their
FakeTensor metadata; symbolic sizes are sympy expressions written in a small
prefix form the compiler parses; every other argument is a JSON literal or a
tagged object (dtype, device, enum)."""

import operator

import sympy
import torch
from torch.utils._sympy.functions import CleanDiv, FloorDiv, Max, Min, Mod, PythonMod

from ._native import CompilerUnsupported


def expr_json(e):
    if isinstance(e, torch.SymInt):
        e = e.node.expr
    if isinstance(e, bool):
        return int(e)
    if isinstance(e, int):
        return e
    if isinstance(e, sympy.Integer):
        return int(e)
    if isinstance(e, sympy.Symbol):
        return str(e)
    if isinstance(e, sympy.Add):
        return ["add", *map(expr_json, e.args)]
    if isinstance(e, sympy.Mul):
        return ["mul", *map(expr_json, e.args)]
    if isinstance(e, (FloorDiv, CleanDiv)):
        return ["floordiv", *map(expr_json, e.args)]
    if isinstance(e, (Mod, PythonMod, sympy.Mod)):
        return ["mod", *map(expr_json, e.args)]
    if isinstance(e, (Max, sympy.Max)):
        return ["max", *map(expr_json, e.args)]
    if isinstance(e, (Min, sympy.Min)):
        return ["min", *map(expr_json, e.args)]
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
        return ["mul", *([expr_json(e.base)] * int(e.exp))]
    raise CompilerUnsupported(f"symbolic size {e} ({type(e).__name__}) is not supported")


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).split(".")[-1]


def target_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    if target is operator.getitem:
        return "getitem"
    return "py." + getattr(target, "__name__", type(target).__name__)


def _is_cpu_scalar(val) -> bool:
    """A 0-dim CPU tensor (an optimizer's step count): kernels read it in
    place as an operand of device tensors, as CUDA kernels take CPU scalars."""
    return (val.device.type == "cpu" and val.dim() == 0 and val.layout == torch.strided
            and not val.is_quantized and not val.is_complex())


def meta_json(val):
    if isinstance(val, torch.Tensor):
        host = _is_cpu_scalar(val)
        if not host and (val.device.type != "neuron" or val.layout != torch.strided or val.is_quantized):
            return {"t": "other"}
        out = {
            "t": "tensor",
            "dtype": dtype_name(val.dtype),
            "shape": [expr_json(s) for s in val.shape],
            "stride": [expr_json(s) for s in val.stride()],
            "offset": expr_json(val.storage_offset()),
        }
        if host:
            out["host"] = True
        return out
    if isinstance(val, torch.SymInt):
        return {"t": "sym", "expr": expr_json(val)}
    if isinstance(val, (tuple, list)):
        return {"t": "tuple", "items": [meta_json(v) for v in val]}
    return {"t": "other"}


def arg_json(a):
    if isinstance(a, torch.fx.Node):
        return {"ref": a.name}
    if isinstance(a, (list, tuple)):
        return [arg_json(x) for x in a]
    if isinstance(a, dict):
        return {"dict": {k: arg_json(v) for k, v in a.items()}}
    if isinstance(a, (bool, int, float, str)) or a is None:
        return a  # json writes NaN and Infinity, which the compiler reads
    if isinstance(a, torch.dtype):
        return {"dtype": dtype_name(a)}
    if isinstance(a, torch.device):
        return {"device": str(a)}
    if isinstance(a, torch.SymInt):
        return {"sym": expr_json(a)}
    if isinstance(a, (torch.layout, torch.memory_format)):
        return {"enum": str(a)}
    return {"object": type(a).__name__}


def free_symbols(gm: torch.fx.GraphModule):
    symbols = set()

    def visit(val):
        if isinstance(val, torch.Tensor):
            for s in list(val.shape) + list(val.stride()) + [val.storage_offset()]:
                if isinstance(s, torch.SymInt):
                    symbols.update(str(x) for x in s.node.expr.free_symbols)
        elif isinstance(val, torch.SymInt):
            symbols.update(str(x) for x in val.node.expr.free_symbols)
        elif isinstance(val, (tuple, list)):
            for v in val:
                visit(v)

    for node in gm.graph.nodes:
        visit(node.meta.get("val"))
    return sorted(symbols)


def _is_host_scalar(val) -> bool:
    # A SymFloat, or the 0-dim CPU tensor Dynamo makes of one
    # (torch.fx.passes._tensorify_python_scalars: `x / math.sqrt(x.shape[1])`).
    return isinstance(val, torch.SymFloat) or (isinstance(val, torch.Tensor) and _is_cpu_scalar(val))


def _is_integral_scalar(val) -> bool:
    return isinstance(val, torch.Tensor) and not val.is_floating_point()


def float_symbols(gm: torch.fx.GraphModule) -> dict:
    """Scalars computed only from symbolic sizes and constants (`x.shape[0] /
    n`): FX node -> the kernel argument name the wrapper passes them as. The
    wrapper computes them before the graph runs; those that depend on tensor
    data (`.item()`) are not among them."""
    out = {}
    for node in gm.graph.nodes:
        if node.op != "call_function" or not _is_host_scalar(node.meta.get("val")):
            continue
        if isinstance(node.target, torch._ops.OpOverload) and (
                node.target._schema.is_mutable or torch.Tag.nondeterministic_seeded in node.target.tags):
            continue  # hoisted into the prologue it would write or draw random numbers out of order
        deps = node.all_input_nodes
        if all(d in out or isinstance(d.meta.get("val"), torch.SymInt) for d in deps):
            out[node] = f"fs_{node.name}"
    return out


def _may_return_alias(target) -> bool:
    """Whether an op's results may be views of its arguments (by its schema;
    any Python callable may)."""
    if isinstance(target, torch._ops.OpOverload):
        return any(r.alias_info is not None for r in target._schema.returns)
    return target is not operator.getitem


def graph_json(gm: torch.fx.GraphModule) -> dict:
    inputs, nodes, outputs = [], [], []
    floats = float_symbols(gm)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            inputs.append({"name": node.name, "meta": meta_json(node.meta.get("val"))})
        elif node.op == "call_function":
            nodes.append(
                {
                    "name": node.name,
                    "target": target_name(node.target),
                    "args": arg_json(node.args),
                    "kwargs": {k: arg_json(v) for k, v in node.kwargs.items()},
                    "meta": {"t": "symfloat", "name": floats[node], "int": _is_integral_scalar(node.meta["val"])}
                    if node in floats
                    else meta_json(node.meta.get("val")),
                    "aliases": _may_return_alias(node.target),
                }
            )
        elif node.op == "output":
            outs = node.args[0]
            outputs = [arg_json(o) for o in (outs if isinstance(outs, (tuple, list)) else [outs])]
        else:
            raise CompilerUnsupported(f"FX node kind {node.op} ({node.name}) is not supported")
    return {"inputs": inputs, "nodes": nodes, "outputs": outputs,
            "symbols": free_symbols(gm) + list(floats.values())}

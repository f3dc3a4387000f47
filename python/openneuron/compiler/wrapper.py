"""The compiled graph's host program: Python source generated from the
compiler's plan (like Inductor's wrapper), then exec'd once. It binds the
symbolic sizes, allocates and reuses buffers, launches generated kernels on
the current stream, calls extern library kernels, makes views, and frees
buffers after their last use."""

import operator
import struct

import torch

from .. import _C
from ._native import CompilerUnsupported
from .serialize import expr_json, float_symbols


def _py_expr(e) -> str:
    """Python text of a symbolic expression in the compiler's prefix form."""
    if isinstance(e, int):
        return repr(e)
    if isinstance(e, str):
        return e
    op, *args = e
    parts = [_py_expr(a) for a in args]
    if op == "add":
        return "(" + " + ".join(parts) + ")"
    if op == "mul":
        return "(" + "*".join(parts) + ")"
    if op == "floordiv":
        return f"({parts[0]} // {parts[1]})"
    if op == "mod":
        return f"({parts[0]} % {parts[1]})"
    return f"{op}({', '.join(parts)})"


def _double_bits(x) -> int:
    """A float as the int64 with its IEEE-754 double bits (kernel symbols
    are int64 slots)."""
    return _DOUBLE_AS_INT.unpack(_DOUBLE.pack(float(x)))[0]


_DOUBLE, _DOUBLE_AS_INT = struct.Struct("<d"), struct.Struct("<q")


def _in_layout(t, stride):
    """`t`, or a copy of it with strides `stride` when its own differ (in a
    dim of size > 1). The compiler plans with the strides an extern's output
    had when traced; some kernels pick their output layout from their
    inputs' (CPU flash attention), and ours may lay those inputs out
    differently than the trace did."""
    strides = t.stride()
    if strides == stride or all(a == b for n, a, b in zip(t.shape, strides, stride) if n > 1):
        return t
    out = torch.empty_strided(t.shape, stride, dtype=t.dtype, device=t.device)
    return out.copy_(t)


def _with_layout(t, size, stride, offset):
    """A copy of input `t` laid out as traced (strides and storage offset):
    kernels index inputs with the traced layout, and AOTAutograd hands a
    backward its tangents without it (a tangent of a strided view output
    arrives compact)."""
    span = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else offset
    base = torch.empty(span, dtype=t.dtype, device=t.device)
    return base.as_strided(size, stride, offset).copy_(t)


def _layout_differs(t, stride, offset):
    """Whether `t` is laid out otherwise than traced (strides of size-1 dims
    do not matter)."""
    return t.storage_offset() != offset or any(
        a != b for n, a, b in zip(t.shape, t.stride(), stride) if n > 1)


def _mutated_inputs(gm):
    """Placeholders an op of the graph writes into (their caller must see it)."""
    out = set()
    for n in gm.graph.nodes:
        if n.op == "call_function" and isinstance(getattr(n.target, "_schema", None), torch._C.FunctionSchema):
            for arg, value in zip(n.target._schema.arguments, n.args):
                if arg.alias_info is not None and arg.alias_info.is_write and isinstance(value, torch.fx.Node):
                    out.add(value)
    return out


def wrapper_globals(device):
    """The names every wrapper program uses, besides its own constants (_c*)
    and kernel handles (_k)."""
    return {"torch": torch, "_launch": _C._launch_compiled_kernel,
            "_device_index": -1 if device.index is None else device.index,
            "_empty": _C._empty_compiled_buffer,
            "_double_bits": _double_bits,
            "_as_strided": torch.as_strided,
            "_in_layout": _in_layout, "_with_layout": _with_layout,
            "_layout_differs": _layout_differs}


class WrapperBuilder:
    def __init__(self, gm, plan, device, name):
        self.gm = gm
        self.plan = plan
        self.device = device
        self.name = name
        self.lines = []
        self.globals = wrapper_globals(device)
        self.nodes = {n.name: n for n in gm.graph.nodes}
        self.extern_args = {}  # of the extern being written: FX name -> IR node id
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]

    def emit(self, line, indent=1):
        self.lines.append("    " * indent + line)

    def constant(self, value):
        name = f"_c{len(self.globals)}"
        self.globals[name] = value
        return name

    # ---- values -------------------------------------------------------------
    def render_ref(self, node: torch.fx.Node) -> str:
        if node.name in self.extern_args:
            return f"b{self.extern_args[node.name]}"
        val = node.meta.get("val")
        if isinstance(val, torch.SymInt):
            return _py_expr(expr_json(val))
        if node.op == "placeholder":
            return f"a{self.placeholders.index(node)}"
        if node.target is operator.getitem:
            return f"{self.render_ref(node.args[0])}[{node.args[1]!r}]"
        return f"fx_{node.name}"

    def render_arg(self, a) -> str:
        if isinstance(a, torch.fx.Node):
            return self.render_ref(a)
        if isinstance(a, (list, tuple)):
            inner = ", ".join(self.render_arg(x) for x in a)
            return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
        if isinstance(a, (bool, int, str)) or a is None:
            return repr(a)
        if isinstance(a, float):
            return repr(a) if a == a and abs(a) != float("inf") else f"float({str(a)!r})"
        if isinstance(a, torch.SymInt):
            return _py_expr(expr_json(a))
        return self.constant(a)

    # ---- program ------------------------------------------------------------
    def bind_inputs(self):
        mutated = _mutated_inputs(self.gm)
        for i, node in enumerate(self.placeholders):
            self.emit(f"a{i} = args[{i}]")
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor) or node in mutated:
                continue
            layout = [val.shape, val.stride(), val.storage_offset()]
            if not all(isinstance(x, int) for x in [*layout[0], *layout[1], layout[2]]):
                continue  # symbolic: sizes and strides are read from the input itself
            if layout[2] == 0 and val.is_contiguous():
                continue  # Dynamo guards user inputs; AOT makes such tangents contiguous
            size, stride, offset = tuple(layout[0]), tuple(layout[1]), layout[2]
            self.emit(f"if _layout_differs(a{i}, {stride}, {offset}):")
            self.emit(f"a{i} = _with_layout(a{i}, {size}, {stride}, {offset})", indent=2)
        ids = self.plan["inputs"]
        for i, node_id in enumerate(ids):
            if node_id is not None:
                self.emit(f"b{node_id} = a{i}")
        # Symbolic sizes, from the first input that holds each one.
        symbols = {}
        for i, node in enumerate(self.placeholders):
            val = node.meta.get("val")
            if isinstance(val, torch.SymInt):
                e = expr_json(val)
                if isinstance(e, str):
                    symbols.setdefault(e, f"a{i}")
            elif isinstance(val, torch.Tensor):
                for d, s in enumerate(val.shape):
                    e = expr_json(s)
                    if isinstance(e, str):
                        symbols.setdefault(e, f"a{i}.size({d})")
                for d, s in enumerate(val.stride()):
                    e = expr_json(s)
                    if isinstance(e, str):
                        symbols.setdefault(e, f"a{i}.stride({d})")
        self.symbols = list(self.plan.get("symbols", []))
        float_names = float_symbols(self.gm)
        floats = {name: node for node, name in float_names.items()}
        for sym in self.symbols:
            if sym in floats:
                continue
            if sym not in symbols:
                raise CompilerUnsupported(f"symbol {sym} is not a size or stride of an input")
            self.emit(f"{sym} = {symbols[sym]}")
        # SymFloats of the sizes, computed as the traced program did; kernels
        # get each as the bits of a double.
        for node in floats.values():
            args = [self.render_arg(a) for a in node.args]
            args += [f"{k}={self.render_arg(v)}" for k, v in node.kwargs.items()]
            self.emit(f"{float_names[node]} = fx_{node.name} = {self.constant(node.target)}({', '.join(args)})")
        slots = [f"_double_bits(fx_{floats[s].name})" if s in floats else s for s in self.symbols]
        self.emit(f"_syms = [{', '.join(slots)}]")
        self.emit("args.clear()")

    def kernel_step(self, step):
        for a in step["allocs"]:
            shape = "(" + "".join(f"{s}, " for s in a["shape"]) + ")"
            if a.get("input") is not None:  # a store into that graph input
                self.emit(f"b{a['id']} = a{a['input']}")
            elif a["reuse"] is not None:
                self.emit(f"b{a['id']} = b{a['reuse']}.view({shape}); del b{a['reuse']}")
            else:
                dtype = self.constant(getattr(torch, a["dtype"]))
                stride = "(" + "".join(f"{s}, " for s in a["stride"]) + ")"
                self.emit(f"b{a['id']} = _empty({shape}, {stride}, {dtype}, _device_index)")
        bufs = ", ".join(f"b{i}" for i in step["buffers"])
        self.emit(f"_launch(_k[{step['name']!r}], [{bufs}], _syms)")

    def extern_step(self, step):
        node = self.nodes[step["fx"]]
        self.extern_args = step["args"]
        target = self.constant(node.target)
        if isinstance(node.target, torch._ops.OpOverload):
            target += "._op"  # the C++ callable: skips OpOverload.__call__'s Python frame
        args = ", ".join(self.render_arg(a) for a in node.args)
        kwargs = "".join(f", {k}={self.render_arg(v)}" for k, v in node.kwargs.items())
        if kwargs and not args:
            kwargs = kwargs[2:]
        self.emit(f"fx_{node.name} = {target}({args}{kwargs})")
        for out in step["outputs"]:
            index = "" if out["index"] < 0 else f"[{out['index']}]"
            if not out["stride"]:  # 0-dim: no layout to check
                self.emit(f"b{out['id']} = fx_{node.name}{index}")
                continue
            stride = "(" + "".join(f"{s}, " for s in out["stride"]) + ")"
            self.emit(f"b{out['id']} = _in_layout(fx_{node.name}{index}, {stride})")

    def alias_step(self, step):
        shape = "(" + "".join(f"{s}, " for s in step["shape"]) + ")"
        stride = "(" + "".join(f"{s}, " for s in step["stride"]) + ")"
        self.emit(f"b{step['id']} = _as_strided(b{step['base']}, {shape}, {stride}, {step['offset']})")

    def build(self, kernel_handles):
        self.emit(f"def {self.name}(args):", indent=0)
        self.bind_inputs()
        reused = {a["reuse"] for s in self.plan["steps"] if s["kind"] == "kernel" for a in s["allocs"]}
        for step in self.plan["steps"]:
            kind = step["kind"]
            if kind == "kernel":
                self.kernel_step(step)
            elif kind == "extern":
                self.extern_step(step)
            else:
                self.alias_step(step)
            dead = [f"b{i}" for i in step["free"] if i not in reused]
            if dead:
                self.emit(f"del {', '.join(dead)}")
        outs = []
        for o in self.plan["outputs"]:
            if o["kind"] == "tensor":
                outs.append(f"b{o['id']}")
            elif o["kind"] == "sym":
                outs.append(o["expr"])
            elif o["kind"] == "number":
                outs.append(repr(o["value"]))
            elif o["kind"] == "input":
                outs.append(f"a{o['index']}")
            elif o["kind"] == "host":
                outs.append(self.render_ref(self.nodes[o["name"]]))
            else:
                outs.append("None")
        self.emit(f"return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
        source = "\n".join(self.lines) + "\n"
        self.globals["_k"] = kernel_handles
        scope = dict(self.globals)
        self.program = compile(source, f"<openneuron {self.name}>", "exec")  # saved with the graph
        exec(self.program, scope)
        fn = scope[self.name]
        fn._boxed_call = True
        return fn, source

"""torch.compile(backend="neuron"): Dynamo -> AOTAutograd (forward and
backward, decomposed to core ATen) -> the OpenNeuron compiler (C++) -> a
wrapper that runs generated kernels and extern library kernels on the
current stream."""

import copy
import functools
import itertools
import json
import logging
import operator
import os
import time
import warnings

import torch
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._dynamo.backends.common import aot_autograd

from .. import _C
from .._torch_patches import torch_source_key
from .._torch_patches.graph_cache_key import without_inductor_backends
from . import _native, metrics, precompile
from .config import settings
from .fallbacks import CompileFallbackWarning, StrictCompileError, report_fallbacks, with_constants  # noqa: F401
from .foreach import foreach_decompositions
from .fresh_buffers import reinplace_fresh_buffer_updates
from .host_scalars import split_host_foreach
from .pooling import pooling_decompositions
from .serialize import graph_json
from .wrapper import WrapperBuilder

log = logging.getLogger("openneuron.compiler")
aten = torch.ops.aten
_graph_ids = itertools.count()


def decompositions():
    table = dict(core_aten_decompositions())
    table.update(
        get_decompositions(
            [
                aten.gelu, aten.gelu_backward,
                aten._softmax, aten._log_softmax, aten._softmax_backward_data,
                aten._log_softmax_backward_data, aten.silu, aten.silu_backward, aten.sigmoid_backward,
                aten.tanh_backward, aten.threshold_backward, aten.mse_loss, aten.mse_loss_backward,
                aten.hardtanh, aten.leaky_relu, aten.addcmul, aten.addcdiv, aten.lerp, aten.rsub,
                aten.native_group_norm, aten.native_batch_norm, aten._native_batch_norm_legit,
                aten._native_batch_norm_legit_functional,
                aten._native_batch_norm_legit_no_training, aten.native_batch_norm_backward,
                aten.logsumexp, aten.std, aten.linalg_vector_norm, aten.masked_fill,
                aten.softplus, aten.mish, aten.native_dropout_backward, aten.elu, aten.hardswish,
            ]
        )
    )
    # Optimizers' foreach ops: one ordinary op per tensor, fused by the compiler.
    table.update(foreach_decompositions())
    # Max pooling as a fused kernel (ATen's NCHW kernel is slow on CPU).
    table.update(pooling_decompositions())
    # var and var_mean are lowered (two passes over the row, in one kernel with
    # their neighbours); their decomposition is to prims the compiler does not know.
    # Attention stays the fused CPU flash-attention kernel (an extern, as in
    # eager: neuron's SDPA choice is CPU's); decomposed it would be bmm +
    # softmax + bmm with the whole score matrix in memory.
    for op in (aten.var_mean, aten.var, aten.scaled_dot_product_attention,
               aten._scaled_dot_product_flash_attention_for_cpu):
        for overload in op.overloads():
            table.pop(getattr(op, overload), None)
    # Ops the compiler lowers itself (lower.cc), whose Python decompositions
    # cost AOTAutograd's trace 0.5-6 ms a call: for a 32-layer encoder,
    # transpose.int 0.5 s, layer norm and its backward 0.65 s, select_backward
    # 0.2 s of the compile, a cost that grows with depth.
    for op in (aten.transpose.int, aten.t.default, aten._unsafe_view.default, aten.native_layer_norm.default,
               aten.native_layer_norm_backward.default, aten.select_backward.default):
        table.pop(op, None)
    return table


def _device_of(gm):
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.device.type == "neuron":
            return torch.device("neuron", val.device.index or 0)
    return torch.device("neuron", torch.neuron.current_device())


def _dump(root, name, files):
    folder = os.path.join(root, name)
    os.makedirs(folder, exist_ok=True)
    for file, text in files.items():
        with open(os.path.join(folder, file), "w") as f:
            f.write(text)


def _fallback(gm, name, reason):
    if settings().strict:
        raise StrictCompileError(f"graph {name} cannot be compiled: {reason}")
    warnings.warn(f"openneuron: graph {name} runs through eager kernels: {reason}", CompileFallbackWarning)
    metrics.record_graph_fallback()
    if settings().saves_graphs:
        return precompile.eager_output_code(gm)
    return torch._functorch.aot_autograd.make_boxed_func(gm.forward)


def _lift_constants(gm: torch.fx.GraphModule):
    """A copy of `gm` whose tensor constants (get_attr nodes: tensors a model
    creates in forward, lifted by AOTAutograd) are extra inputs after the
    graph's own; returns it and the constants to pass for them."""
    attrs = [n for n in gm.graph.nodes if n.op == "get_attr"]
    if not attrs:
        return gm, []
    graph = copy.deepcopy(gm.graph)
    attrs = [n for n in graph.nodes if n.op == "get_attr"]
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    constants = []
    for i, node in enumerate(attrs):
        value = gm
        for part in node.target.split("."):
            value = getattr(value, part)
        if not isinstance(value, torch.Tensor):
            raise _native.CompilerUnsupported(f"graph constant {node.target} is a {type(value).__name__}")
        anchor = placeholders[-1] if placeholders else None
        with (graph.inserting_after(anchor) if anchor else graph.inserting_before(next(iter(graph.nodes)))):
            ph = graph.placeholder(f"_constant_{i}")
        ph.meta = dict(node.meta)
        ph.meta.setdefault("val", value)
        node.replace_all_uses_with(ph)
        graph.erase_node(node)
        placeholders.append(ph)
        constants.append(value)
    return torch.fx.GraphModule(gm, graph), constants


def _reinplace_input_updates(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`copy_(x, index_put(x, idx, v))` on a graph input x (a functionalized
    `x.index_copy_(...)` / `x[idx] = v`, e.g. a static KV cache) becomes
    `index_put_(x, idx, v)`: without it every decode step copies the whole
    cache twice. Only when nothing else reads x, so no reader can see the
    update early whatever order the kernels run in."""
    def matches(node):
        if node.op != "call_function" or node.target is not aten.copy_.default or len(node.args) < 2:
            return False
        dst, src = node.args[:2]
        return (isinstance(dst, torch.fx.Node) and dst.op == "placeholder" and isinstance(src, torch.fx.Node)
                and src.op == "call_function" and src.target is aten.index_put.default and src.args[0] is dst
                and set(dst.users) == {src, node} and not node.users)

    if not any(matches(n) for n in gm.graph.nodes):
        return gm
    graph = copy.deepcopy(gm.graph)
    for node in list(graph.nodes):
        if matches(node):
            dst, src = node.args[:2]
            src.target = aten.index_put_.default
            graph.erase_node(node)
    return torch.fx.GraphModule(gm, graph)


def _inplace_foreach(node):
    """The in-place overload of a functional `_foreach_*` node, or None."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return None
    packet = node.target.overloadpacket.__name__
    if not packet.startswith("_foreach_") or packet.endswith("_") or not node.args:
        return None
    inplace = getattr(aten, packet + "_", None)
    return getattr(inplace, node.target._overloadname, None) if inplace is not None else None


def _reinplace_foreach_updates(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`ys = _foreach_X(xs, ...)` with every `copy_(xs[i], ys[i])` (a
    functionalized `_foreach_X_(xs, ...)` on graph inputs, e.g. an
    optimizer's CPU step counts) becomes `_foreach_X_(xs, ...)` again: one
    call instead of one extern copy per tensor. Readers of ys[i] read xs[i],
    updated by then; only when nothing else reads xs."""
    def updates(node):
        """{i: (getitem node, copy_ node)} for every element, or None."""
        if _inplace_foreach(node) is None:
            return None
        xs = node.args[0]
        if not isinstance(xs, (list, tuple)) or not xs:
            return None
        found = {}
        for user in node.users:
            if user.target is not operator.getitem:
                return None
            copies = [u for u in user.users if u.target is aten.copy_.default and u.args[1] is user]
            i = user.args[1]
            if len(copies) != 1 or copies[0].users or copies[0].args[0] is not xs[i]:
                continue
            found[i] = (user, copies[0])
        ok = len(found) == len(xs) and all(
            isinstance(x, torch.fx.Node) and x.op == "placeholder" and set(x.users) == {node, found[i][1]}
            for i, x in enumerate(xs))
        return found if ok else None

    if not any(updates(n) for n in gm.graph.nodes):
        return gm
    graph = copy.deepcopy(gm.graph)
    for node in list(graph.nodes):
        found = updates(node)
        if not found:
            continue
        xs = node.args[0]
        for i, (item, copy_node) in found.items():
            graph.erase_node(copy_node)
            item.replace_all_uses_with(xs[i])
            graph.erase_node(item)
        node.target = _inplace_foreach(node)
        node.meta["val"] = None
    return torch.fx.GraphModule(gm, graph)


def compile_fx_graph(gm: torch.fx.GraphModule, example_inputs, kind: str = "forward"):
    """Compiles one AOT graph (forward or backward); returns a boxed callable."""
    name = f"graph_{next(_graph_ids)}_{kind}"
    s = settings()
    t0 = time.perf_counter()
    original = gm
    device = _device_of(gm)
    # The code-generation target is the device's (its driver says which
    # executables it loads), never assumed from the driver's name.
    options = {"cache_dir": s.cache_dir, "cache_enabled": s.cache_enabled, "cache_max_bytes": s.cache_max_bytes,
               "debug": bool(s.debug_dir),
               "target": _C._device_properties(device.index or 0)["kernel_target"]}
    try:
        gm, constants = _lift_constants(_reinplace_foreach_updates(split_host_foreach(_reinplace_input_updates(reinplace_fresh_buffer_updates(gm)))))
        graph = graph_json(gm)
        graph_text = json.dumps(graph)
        plan = _native.compile_graph(graph_text, options)
    except _native.CompilerUnsupported as e:
        return _fallback(original, name, str(e))
    plan["symbols"] = graph["symbols"]
    report_fallbacks(name, plan["fallbacks"])
    kernel_steps = [step for step in plan["steps"] if step["kind"] == "kernel"]
    labels = [(step["name"], f"{name}.{step['name']} [{step.get('summary', '')}]") for step in kernel_steps]
    t_load = time.perf_counter()
    handles = {step["name"]: _C._compiled_kernel(step["library"], step["name"], device.index or 0, label)
               for step, (_, label) in zip(kernel_steps, labels)}
    load_seconds = time.perf_counter() - t_load
    builder = WrapperBuilder(gm, plan, device, name)
    try:
        fn, source = builder.build(handles)
    except _native.CompilerUnsupported as e:
        return _fallback(original, name, str(e))
    if constants:
        fn = with_constants(fn, constants)
    if s.saves_graphs:
        fn = precompile.output_code(fn, name=name, source=source, program=builder.program, globals_=builder.globals,
                                    graph=graph_text, options=options, plan=plan, handles_labels=labels,
                                    device=device, lifted=constants)
    elapsed = time.perf_counter() - t0
    cache = plan.get("cache")
    stats = plan.get("stats", {})
    in_native = sum(stats.get(k, 0.0) for k in ("lower_seconds", "codegen_seconds", "build_seconds"))
    metrics.record_graph(plan, elapsed, python_seconds=elapsed - load_seconds - in_native,
                         load_seconds=load_seconds)
    if cache and not cache["hit"]:
        log.info("openneuron: kernel cache miss for %s: %s", name, cache["miss_reason"])
    if s.debug_dir:
        _dump(s.debug_dir, name, {"fx_graph.txt": gm.print_readable(print_output=False), "graph.json": json.dumps(graph, indent=1),
                     "ir_before.txt": plan.get("ir_before", ""), "ir_after.txt": plan.get("ir_after", ""),
                     "kernels.cpp": plan.get("source", ""), "wrapper.py": source,
                     "plan.json": json.dumps({k: v for k, v in plan.items() if k not in ("source",)}, indent=1)})
    return fn


def _forward(gm, example_inputs):
    return compile_fx_graph(gm, example_inputs, "forward")


def _backward(gm, example_inputs):
    return compile_fx_graph(gm, example_inputs, "backward")


def _inference(gm, example_inputs):
    return compile_fx_graph(gm, example_inputs, "inference")


@functools.cache
def _decompositions():
    """Built once, on first compile (~0.1 s, not needed when every frame is
    loaded saved): both AOT configurations share it."""
    return decompositions()


@functools.cache
def _aot_backend():
    return aot_autograd(
        fw_compiler=_forward,
        bw_compiler=_backward,
        inference_compiler=_inference,
        decompositions=_decompositions(),
        keep_inference_input_mutations=True,
    )


def _savable(compiler):
    from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler
    from torch._inductor.output_code import OutputCode

    return SerializableAOTDispatchCompiler(OutputCode, compiler)


def _savable_aot_backend():
    """The same, with compiled graphs AOTAutograd's bundled cache can save:
    its cache (on by default) and Dynamo's precompile cache (precompile.py)
    use it. Made per compile: PyTorch 2.13's aot_autograd wraps a savable
    backward compiler in place on every call, so a shared one nests deeper
    with each compile until Python's recursion limit (~450 compiles)."""
    return aot_autograd(
        fw_compiler=_savable(_forward),
        bw_compiler=_savable(_backward),
        inference_compiler=_savable(_inference),
        decompositions=_decompositions(),
        keep_inference_input_mutations=True,
    )

_cache_tag = None


def _run_savable(gm, example_inputs, **kwargs):
    global _cache_tag
    if _cache_tag is None:
        _cache_tag = precompile.cache_tag((str(op) for op in _decompositions()), precompile.device_kind())
    # A saved entry holds forward and backward, so the backward is compiled
    # with the forward (AOTAutograd's bundled entries are not saved after a
    # lazy backward compile).
    with torch._functorch.config.patch(bundled_autograd_cache=True, force_non_lazy_backward_lowering=True), \
            torch.compiler.config.patch(cache_key_tag=_cache_tag):
        return _savable_aot_backend()(gm, example_inputs, **kwargs)


def _recompile_reason():
    """The guard that failed when Dynamo recompiles the frame being compiled
    (None on a first compile). Dynamo computes it before calling the backend
    and keeps it in its metrics context."""
    try:
        from torch._dynamo.utils import get_metrics_context

        return getattr(get_metrics_context(), "_metrics", {}).get("recompile_reason")
    except Exception:  # noqa: BLE001 -- a Dynamo internal; never fail a compile over a log line
        return None


def neuron_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The Dynamo backend: logs why a frame is recompiled (the failed guard),
    then AOTAutograd with the neuron compiler for forward and backward."""
    reason = _recompile_reason()
    if reason:
        compile_id = torch._guards.CompileContext.current_compile_id()
        log.info("openneuron: recompiling (compile id %s) because a guard failed: %s", compile_id, reason)
        metrics.record_recompile(str(compile_id), reason)
    s = settings()
    if s.precompile:
        precompile.enable()
    t0, ours_before = time.perf_counter(), metrics.compile_seconds()
    with without_inductor_backends():
        if s.saves_graphs:
            if s.cache_enabled:
                torch_source_key.prime(s.cache_dir)
            compiled = _run_savable(gm, example_inputs, **kwargs)
        else:
            compiled = _aot_backend()(gm, example_inputs, **kwargs)
    metrics.record_frame(time.perf_counter() - t0, metrics.compile_seconds() - ours_before)
    return compiled

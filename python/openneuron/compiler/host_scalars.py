"""Foreach ops over lists of CPU scalars whose results only feed device ops
(an optimizer's bias corrections from its step counts: `_foreach_pow(beta1,
steps)`, `_foreach_sub`, `_foreach_sqrt`, ...) become one op per element,
which the compiler computes inside the kernels that read them (host values),
instead of one host extern call per foreach op, each looping over the list.

Results copied back into the CPU scalars they came from (the functionalized
`_foreach_add_(steps, 1)`) are stores the compiler writes after every kernel
that reads the old values. Foreach ops whose results are also needed as
tensors (returned, or read by another host op that stays a foreach call or
by an extern) stay whole."""
import copy
import operator

import torch

from .foreach import element_calls
from .serialize import _is_cpu_scalar


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else node


def _host_list_op(node):
    """The element calls of a functional foreach op over CPU scalars, or None."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return None
    calls = element_calls(node.target)
    if calls is None:
        return None
    tensors = [x for j in calls.lists for x in node.args[j] if isinstance(x, torch.fx.Node)]
    outputs = _val(node)
    if not tensors or not isinstance(outputs, (list, tuple)):
        return None
    if not all(isinstance(_val(x), torch.Tensor) and _is_cpu_scalar(_val(x)) for x in tensors):
        return None
    if not all(isinstance(o, torch.Tensor) and _is_cpu_scalar(o) for o in outputs):
        return None
    return calls


def _on_device(node):
    val = _val(node)
    return isinstance(val, torch.Tensor) and val.device.type == "neuron"


def _stores_into_host_input(node, item):
    """`copy_(x, item)` into a CPU scalar graph input x."""
    if node.target is not torch.ops.aten.copy_.default or node.args[1] is not item:
        return False
    dst = node.args[0]
    return (isinstance(dst, torch.fx.Node) and dst.op == "placeholder" and isinstance(_val(dst), torch.Tensor)
            and _is_cpu_scalar(_val(dst)))


def _splittable(graph):
    """The host foreach ops whose every element is read by device ops or by
    other such ops (a fixed point: dropping one can disqualify others)."""
    chosen = {n for n in graph.nodes if _host_list_op(n) is not None}
    changed = True
    while changed:
        changed = False
        for node in list(chosen):
            items = list(node.users)
            if any(item.target is not operator.getitem for item in items) or any(
                    u not in chosen and not _on_device(u) and not _stores_into_host_input(u, item)
                    for item in items for u in item.users):
                chosen.discard(node)
                changed = True
    return chosen


def split_host_foreach(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    chosen = {n.name for n in _splittable(gm.graph)}
    if not chosen:
        return gm
    graph = copy.deepcopy(gm.graph)  # node names are kept
    for node in [n for n in graph.nodes if n.name in chosen]:
        calls = _host_list_op(node)(node.args, dict(node.kwargs))
        items = {item.args[1]: item for item in node.users}
        with graph.inserting_before(node):
            for i, (op, args, kwargs) in enumerate(calls):
                if i not in items:
                    continue
                overload = torch._C._jit_resolve_packet(op._qualified_op_name, *[_val(a) for a in args],
                                                         **{k: _val(v) for k, v in kwargs.items()})
                element = graph.call_function(getattr(op, overload), args, kwargs)
                element.meta = dict(items[i].meta)
                items[i].replace_all_uses_with(element)
                graph.erase_node(items[i])
        graph.erase_node(node)
    return torch.fx.GraphModule(gm, graph)

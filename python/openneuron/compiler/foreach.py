"""Decompositions of ATen's functional `_foreach_*` ops into one ordinary op
per list element, so an optimizer's foreach step (AdamW, SGD, ...) becomes
pointwise chains the compiler fuses, instead of one eager extern call per
`_foreach_*` op (PyTorch has no decompositions for them; Inductor lowers them
itself).

Element i of `_foreach_X.overload(a, b, ...)` is `aten.X(a[i], b[i], ...)`:
tensor lists and scalar lists are indexed, anything else is passed as is.
Left out: overloads whose per-element value is not a plain argument (a
1-D tensor of scalars), reductions and ops without an elementwise base."""
import torch

aten = torch.ops.aten

# Reductions (per-tensor norms and maxima) are left to their foreach kernels.
_SKIP = {"norm", "max"}


def _is_list(arg_type, element):
    """Whether the schema type is Tensor[] / Scalar[] (Scalar prints as "number")."""
    spelled = {"Scalar": "number"}.get(element, element)
    return isinstance(arg_type, torch.ListType) and str(arg_type.getElementType()) == spelled


def _base_signature(base):
    """Positional argument count and keyword-only names of the base op's
    main overload (addcdiv's `value` is keyword-only, the foreach op's
    matching scalar positional)."""
    names = [n for n in ("default", "Tensor") if n in base.overloads()]
    names += [n for n in base.overloads() if "out" not in n]
    if not names:
        return None
    main = getattr(base, names[0])
    args = main._schema.arguments
    return sum(not a.kwarg_only for a in args), [a.name for a in args if a.kwarg_only]


def element_calls(overload):
    """For a functional `_foreach_*` overload with an elementwise base op, a
    function (args, kwargs) -> [(base op, args, kwargs) for each element];
    None for the others."""
    packet = overload.overloadpacket.__name__
    base_name = packet[len("_foreach_"):]
    if (not packet.startswith("_foreach_") or packet.endswith("_") or base_name in _SKIP
            or not hasattr(aten, base_name)):
        return None
    base = getattr(aten, base_name)
    arguments = overload._schema.arguments
    returns = overload._schema.returns
    if len(returns) != 1 or not _is_list(returns[0].type, "Tensor"):
        return None  # out= variants and the like
    if any(a.name == "scalars" and not _is_list(a.type, "Scalar") for a in arguments):
        return None  # scalars as a 1-D tensor: no per-element Scalar argument
    lists = [i for i, a in enumerate(arguments) if _is_list(a.type, "Tensor") or _is_list(a.type, "Scalar")]
    signature = _base_signature(base)
    if not lists or signature is None or any(arguments[i].kwarg_only for i in lists):
        return None
    positional, keyword_names = signature

    def calls(args, kwargs):
        out = []
        for i in range(len(args[lists[0]])):
            call = [a[i] if j in lists else a for j, a in enumerate(args)]
            out.append((base, tuple(call[:positional]), {**dict(zip(keyword_names, call[positional:])), **kwargs}))
        return out

    calls.lists = lists
    return calls


def _decomposition(overload):
    calls = element_calls(overload)
    if calls is None:
        return None

    def per_element(*args, **kwargs):
        # Ops on lists of CPU tensors (an optimizer's step counts) stay one
        # foreach call here: per element they would be as many host extern
        # calls. host_scalars.py splits those whose results feed device ops.
        # CPU scalars beside device tensors are kernel operands.
        first = next((args[j] for j in calls.lists if any(isinstance(t, torch.Tensor) for t in args[j])), [])
        if any(isinstance(t, torch.Tensor) and t.device.type != "neuron" for t in first):
            return NotImplemented
        return [base(*a, **k) for base, a, k in calls(args, kwargs)]

    return per_element


def foreach_decompositions():
    table = {}
    for name in dir(aten):
        if not name.startswith("_foreach_") or name.endswith("_"):
            continue  # in-place variants never reach the compiler (functionalized)
        packet = getattr(aten, name)
        for overload_name in packet.overloads():
            overload = getattr(packet, overload_name)
            fn = _decomposition(overload)
            if fn is not None:
                table[overload] = fn
    return table

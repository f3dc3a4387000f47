"""Sound guards for frames saved by Dynamo's precompile cache (precompile.py).

PyTorch 2.13's `caching_precompile` drops every identity guard (the object a
global or attribute holds: a module, class, function, builtin) from every
compile in the process, because it cannot save them: a compiled frame then
keeps running after the user swaps `torch.nn.functional.gelu` or a helper
function. Here the live guards stay complete, and identity guards are saved
as well, when the object they name can be found again in a new process:

- an identity guard is saved only on an object importable by name (a module
  in sys.modules, or a class, function or builtin its module and qualified
  name lead back to, through ``__wrapped__`` for decorated functions); any
  other object, or a guard type that still cannot be saved (dict versions,
  weak references), leaves the frame unsaved (a package bypass), never saved
  with guards missing;
- a function is saved by that name plus a digest of its code, and a frame
  loads only if the name leads to the same code: edited or monkeypatched
  functions are traced again;
- when a saved frame is loaded, each identity guard rooted in the module's
  globals is checked against what those globals hold now (the check the
  guard itself makes from then on).
"""

import enum
import hashlib
import importlib
import inspect
import logging
import sys
import types

import torch

from . import gc_paused, replace, require_torch
from .precompile_scope import active

require_torch(__name__)
log = logging.getLogger("openneuron.compiler")

# Guard types whose check is "this is that object": saved when the object has a name.
IDENTITY_GUARDS = frozenset(("ID_MATCH", "FUNCTION_MATCH", "CLASS_MATCH", "MODULE_MATCH", "CLOSURE_MATCH",
                             "BUILTIN_MATCH"))


class SavedObjectChanged(RuntimeError):
    """A saved frame names an object that is different in this process."""


# Attributes that lead from what a qualified name holds to the function
# itself: decorators (functools.wraps), properties, static and class methods.
_UNWRAP_STEPS = ("__wrapped__", "fget", "fset", "fdel", "__func__")
_BUILTIN_TYPES = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                  types.ClassMethodDescriptorType, types.MethodWrapperType)


def _unwrap_path(top, obj, depth=4):
    """The attribute names (from _UNWRAP_STEPS) that lead from `top` to `obj`,
    or None."""
    if top is obj:
        return ()
    if depth == 0:
        return None
    for step in _UNWRAP_STEPS:
        inner = getattr(top, step, None)
        if inner is not None and inner is not top:
            rest = _unwrap_path(inner, obj, depth - 1)
            if rest is not None:
                return (step, *rest)
    return None


def _code_fingerprint(code):
    """What a code object does, the same in every process (marshal's bytes
    depend on reference counts; reprs of nested code hold addresses and of
    frozensets a hash order)."""
    def constant(c):
        if isinstance(c, types.CodeType):
            return _code_fingerprint(c)
        if isinstance(c, frozenset):
            return "frozenset" + repr(sorted(map(repr, c)))
        if isinstance(c, tuple):
            return "(" + ",".join(map(constant, c)) + ")"
        return repr(c)

    return repr((code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                 [constant(c) for c in code.co_consts]))


def _code_digest(obj):
    code = getattr(obj, "__code__", None)
    if not isinstance(code, types.CodeType):
        return ""
    return hashlib.sha256(_code_fingerprint(code).encode()).hexdigest()[:32]


def _resolve(module, qualname):
    obj = sys.modules.get(module) or importlib.import_module(module)
    for part in qualname.split("."):
        # A class's own entry, not what its descriptor binds to.
        obj = vars(obj)[part] if inspect.isclass(obj) and part in vars(obj) else getattr(obj, part)
    return obj


def identity(obj):
    """A description of `obj` that is equal for the same object in another
    process (a module's name; a builtin's type and names; a class's or
    function's module, qualified name, the steps from what that name holds to
    it, and its code's digest; an enum member's class and name), or None when
    it has none."""
    if inspect.ismodule(obj):
        return ("module", obj.__name__) if sys.modules.get(obj.__name__) is obj else None
    if isinstance(obj, _BUILTIN_TYPES):
        owner = getattr(obj, "__self__", None)
        if owner is not None and not (inspect.ismodule(owner) or inspect.isclass(owner)):
            return None  # a method bound to some object
        owner_name = getattr(owner, "__qualname__", getattr(owner, "__name__", None))
        return ("builtin", type(obj).__qualname__, getattr(obj, "__module__", None),
                getattr(obj, "__qualname__", obj.__name__), owner_name)
    if isinstance(obj, enum.Enum):
        owner = identity(type(obj))
        return None if owner is None else ("enum", owner, obj.name)
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str):
        return None
    # Its qualified name, or else its name in its module (a function a
    # factory made and the module exports, as torch.nn.functional.max_pool2d).
    for name in (getattr(obj, "__qualname__", None), getattr(obj, "__name__", None)):
        if not isinstance(name, str) or "<locals>" in name:
            continue
        try:
            path = _unwrap_path(_resolve(module, name), obj)
        except Exception:  # noqa: BLE001 -- not importable by that name
            continue
        if path is not None:
            return ("object", module, name, path, _code_digest(obj))
    return None


def find(description):
    """The function `description` (from identity()) names in this process;
    SavedObjectChanged when it is gone or its code differs."""
    _, module, qualname, path, digest = description
    try:
        obj = _resolve(module, qualname)
        for step in path:
            obj = getattr(obj, step)
    except Exception as e:  # noqa: BLE001
        raise SavedObjectChanged(f"{module}.{qualname} is gone ({type(e).__name__}: {e})") from e
    if _code_digest(obj) != digest:
        raise SavedObjectChanged(f"{module}.{qualname} has different code")
    return obj


def _load_function(description):
    return find(description)


_SCALARS = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.layout,
            torch.memory_format)


def fingerprint(value):
    """What a guard saw, comparable with what the same place holds in another
    process: constants by value, code by what it does, named objects by
    identity(); None for objects saved by value (they load as saved)."""
    try:
        return _fingerprint(value)
    except Exception:  # noqa: BLE001 -- an object whose attributes raise: no name
        return None


def _fingerprint(value):
    if isinstance(value, _SCALARS):
        return ("value", type(value).__qualname__, repr(value))
    if isinstance(value, tuple) and all(isinstance(v, _SCALARS) for v in value):
        return ("value", "tuple", repr(value))
    if isinstance(value, types.CodeType):
        return ("code", _code_fingerprint(value))
    return identity(value)


def _is_identity_guard(guard):
    return guard.create_fn_name() in IDENTITY_GUARDS or bool(IDENTITY_GUARDS.intersection(guard.guard_types or ()))


def _needs_name(guard, value):
    """Whether `guard` on `value` compares object identity, which a new
    process can only check on an object it finds by name. (A closure match on
    a Python function compares its code, and code compares by value.)"""
    if isinstance(value, types.CodeType):
        return False
    if guard.create_fn_name() == "CLOSURE_MATCH" and type(value) is types.FunctionType:
        return False
    return _is_identity_guard(guard)


_STALE = object()  # the guard manager of a saved entry that must not be loaded


def _changed_value(guards_state, runtime_global_scope, closure_vars):
    """Why a saved entry's guards would not see, in this process, what they
    saw when it was saved ("" when they would). Dynamo rebuilds a loaded
    entry's guards from values found through modules and classes it saves by
    name: they are this process's values, not the saved ones, so a changed
    flag or a monkeypatched function would pass them."""
    scope = {"G": runtime_global_scope, "L": guards_state.output_graph.local_scope}
    cache = {}
    for source, expected in getattr(guards_state, "openneuron_value_checks", ()):
        try:
            current = source.get_value(scope, closure_vars, cache)
        except Exception as e:  # noqa: BLE001
            return f"{source.name} is gone ({type(e).__name__}: {e})"
        if fingerprint(current) != expected:
            return f"{source.name} holds another value than when the entry was saved"
    return ""


def _value_checks(check_fn_manager, builder, sorted_guards, output_graph):
    """(checks, reason): what each guard saw, to check on load (see
    _changed_value), or the reason the entry cannot be saved soundly."""
    from torch._dynamo.guards import get_global_source_name
    from torch._dynamo.source import DictGetItemSource

    checks, seen = [], set()
    for guard in sorted_guards:
        source = guard.originating_source
        try:
            value = builder.get(guard)
        except Exception:  # noqa: BLE001 -- a guard on absence (hasattr): nothing to see
            if _is_identity_guard(guard):
                return [], f"{guard.create_fn_name()} guard on {guard.name}: no value"
            continue
        expected = fingerprint(value)
        if expected is None and _needs_name(guard, value):
            return [], f"{guard.create_fn_name()} guard on {guard.name}: the object has no importable name"
        if expected is not None and source.name not in seen:
            seen.add(source.name)
            checks.append((source, expected))
        root = get_global_source_name(source)
        if _is_identity_guard(guard) and root and root == output_graph.name_of_builtins_dict_key_in_fglobals \
                and isinstance(source, DictGetItemSource):
            # Only builtins recorded as used are saved (BUILTIN_MATCH records
            # its own; an identity guard on a builtin does not).
            check_fn_manager.used_builtin_vars.add(source.index)
    return checks, ""


def install():
    """Patches Dynamo (idempotent), for our compiles only (precompile_scope.active()):
    complete live guards, identity guards saved and checked on load,
    functions saved by name and code."""
    from torch._dynamo import guards, package
    from torch._C._dynamo import eval_frame

    manager = guards.CheckFunctionManager
    savable_identity_guards = tuple(
        t for t in manager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES if t not in IDENTITY_GUARDS)

    def keep_identity_guards(original_init):
        def __init__(self, *args, **kwargs):
            if not active():
                return original_init(self, *args, **kwargs)
            # caching_precompile only decides, here, to drop identity guards.
            with torch._dynamo.config.patch(caching_precompile=False):
                original_init(self, *args, **kwargs)

        return __init__

    def save_identity_guards(original_serialize):
        def serialize_guards(self, builder, sorted_guards, output_graph):
            if not active():
                return original_serialize(self, builder, sorted_guards, output_graph)
            checks, unsavable = _value_checks(self, builder, sorted_guards, output_graph)
            if unsavable:
                # PyTorch 2.13 fails the compile when this raises: leave the frame
                # unsaved instead (a bypassed entry is never installed, so the
                # guards saved below, without identity guards, are never used).
                output_graph.bypass_package(unsavable)
                sorted_guards = [g for g in sorted_guards if not _is_identity_guard(g)]
            self._openneuron_value_checks = checks
            unsupported = manager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES
            manager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES = savable_identity_guards
            try:
                with gc_paused():
                    return original_serialize(self, builder, sorted_guards, output_graph)
            except Exception as e:  # noqa: BLE001 -- an unpicklable guard value: never fail the compile
                if unsavable:
                    return b""
                output_graph.bypass_package(f"guards cannot be saved ({type(e).__name__}: {e})")
                return b""  # a bypassed entry's guards are never loaded
            finally:
                manager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES = unsupported

        return serialize_guards

    def with_value_checks(original_pickle):
        def pickle_guards_state(state, builder):
            if active():
                state.openneuron_value_checks = getattr(builder.check_fn_manager, "_openneuron_value_checks", [])
            return original_pickle(state, builder)

        return pickle_guards_state

    def unless_stale(original_load):
        def load_guard_manager(guards_state, target_code, runtime_global_scope):
            if active():
                stale = _changed_value(guards_state, runtime_global_scope, guards._get_closure_vars())
                if stale:
                    log.info("openneuron: a saved compiled entry of %s is not loaded: %s", target_code.co_name, stale)
                    return _STALE
            return original_load(guards_state, target_code, runtime_global_scope)

        return load_guard_manager

    # A stale entry is left out; the frame's other saved entries still load.
    def skip_stale(original_install_entry):
        def load_precompile_entry(code, guard_manager, dynamo_code):
            if guard_manager is not _STALE:
                original_install_entry(code, guard_manager, dynamo_code)

        return load_precompile_entry

    def functions_by_name(original_reduce):
        def reducer_override(self, obj):
            result = original_reduce(self, obj)
            if not active():
                return result
            placeholder = isinstance(result, tuple) and result[0] is guards._Missing
            # (_load_function itself is pickled by reference, as usual.)
            if inspect.isfunction(obj) and obj is not _load_function and (result is NotImplemented or placeholder):
                description = identity(obj)
                if description is not None:
                    return _load_function, (description,)
            return result

        return reducer_override

    replace(manager, "__init__", keep_identity_guards)
    replace(manager, "serialize_guards", save_identity_guards)
    replace(guards, "pickle_guards_state", with_value_checks)
    replace(package, "load_guard_manager", unless_stale)
    replace(eval_frame, "_load_precompile_entry", skip_stale)
    replace(guards.GuardsStatePickler, "reducer_override", functions_by_name)

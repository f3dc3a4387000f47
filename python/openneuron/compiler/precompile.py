"""Warm starts without tracing (on by default; OPENNEURON_COMPILE_PRECOMPILE=0 turns it off).

A new process that compiles an already compiled model still runs Dynamo's
bytecode tracing and AOTAutograd's tracing, which cost far more than our
cached kernels. PyTorch's Dynamo-level cache (`caching_precompile`) skips
both when every compiled graph of a frame can be saved: our compiled graphs
are then `NeuronOutputCode` objects holding the wrapper's source, its
constants and the kernel library's path, saved through AOTAutograd's
bundled cache and rebuilt in the new process by one `exec`.

PyTorch marks `caching_precompile` experimental: it is process-wide and, on
its own, drops identity guards from every compile. Our patches of it live in
openneuron/_torch_patches/: the switch is on only around our own compiles
(precompile_scope.py), identity guards are kept and saved where they can be
(precompile_guards.py), and entries are written after each compile (under
TORCHINDUCTOR_CACHE_DIR/dynamo), used or passed over (precompile_entries.py). A kernel library
missing from our kernel cache is rebuilt from the stored graph, never loaded
half-way.
"""

import dataclasses
import functools
import hashlib
import importlib.util
import io
import logging
import marshal
import os
import pickle
import time

import torch
from torch._inductor.output_code import OutputCode

from .. import _C
from .._torch_patches.precompile_entries import SavedByAnotherBuild
from . import _native, metrics
from .fallbacks import report_fallbacks, with_constants
from .config import settings
from .wrapper import wrapper_globals

log = logging.getLogger("openneuron.compiler")
# Compiled wrapper programs are saved as this interpreter's bytecode, behind
# its magic number: another Python compiles the source again.
_BYTECODE_MAGIC = importlib.util.MAGIC_NUMBER


def _resolve_op(name):
    packet = torch.ops
    for part in name.split("."):
        packet = getattr(packet, part)
    return packet


class _Pickler(pickle.Pickler):
    """Pickles ATen ops by name (they are not picklable themselves)."""

    def reducer_override(self, obj):
        if isinstance(obj, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            return _resolve_op, (str(obj),)  # "aten.add.Tensor", "aten.add"
        return NotImplemented


def _dumps(value):
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    buffer = io.BytesIO()
    with unset_fake_temporarily():  # compilers run under AOTAutograd's fake mode
        _Pickler(buffer).dump(value)
    return buffer.getvalue()


@dataclasses.dataclass
class NeuronOutputCode(OutputCode):
    """One compiled graph (forward, backward or inference) in a form the
    bundled AOTAutograd cache can pickle."""

    name: str = ""
    source: str = ""                  # the wrapper program (wrapper.py)
    bytecode: bytes = b""             # it compiled: magic number + marshal (compiling it again
                                      # costs ~10 ms a graph at every warm start)
    constants: bytes = b""            # its constants and lifted tensors, pickled
    graph: str = ""                   # our JSON graph, to rebuild a lost library (as text:
                                      # loading copies each graph twice, and a dict is slow to copy)
    options: dict = None              # the compile options it was built with
    plan: dict = None                 # what a loaded graph needs of its plan (saved_plan())
    kernels: list = None              # [(step name, profiler label)]
    device_index: int = 0
    error: str = ""                   # why this graph cannot be saved ("" = it can)
    code_tag: str = ""                # code_tag() of the build that generated it
    device_kind: str = ""             # device_kind() of the device it was built for

    def __call__(self, args):
        fn = self.__dict__.get("_fn")
        if fn is None:
            fn = self._fn = self._load()
        return fn(args)

    def prepare_for_serialization(self):
        if self.error:
            from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache

            raise BypassAOTAutogradCache(f"openneuron: graph {self.name} cannot be saved: {self.error}")
        self.__dict__.pop("_fn", None)
        self.__dict__.pop("_prepared", None)

    def post_compile(self, example_inputs, constants, graph_kwargs):
        # Built on its first call: a loaded frame may hold entries that never
        # run here. What would make it unusable is checked now, while the frame
        # can still be compiled instead.
        if self.code_tag != code_tag():
            # A saved frame (precompile) carries its graphs without the cache
            # key AOTAutograd's own entries have.
            raise SavedByAnotherBuild(f"graph {self.name} was saved by another build of openneuron")
        if self.device_kind != device_kind(self.device_index):
            # Every driver's device is "neuron:0", but their kernels differ
            # (a shared object for the C++ target, SPIR-V for GLSL).
            raise SavedByAnotherBuild(f"graph {self.name} was saved for another kind of device "
                                      f"({self.device_kind or 'unknown'}, not {device_kind(self.device_index)})")
        self._prepared = self._prepare()

    def set_triton_bundle(self, triton_bundle):
        pass

    def _prepare(self):
        """What the saved data itself could make fail: its constants and its
        wrapper program."""
        values, lifted = pickle.loads(self.constants)
        if self.bytecode.startswith(_BYTECODE_MAGIC):
            program = marshal.loads(self.bytecode[len(_BYTECODE_MAGIC):])
        else:
            program = compile(self.source, f"<openneuron {self.name}>", "exec")
        return values, lifted, program

    def _load(self):
        """The wrapper, with its kernels from our kernel cache (which verifies
        the library, never loads it unchecked); warns (or, strict, raises)
        for the ops it runs through eager kernels, and counts as a compile."""
        values, lifted, program = self.__dict__.pop("_prepared", None) or self._prepare()
        t0 = time.perf_counter()
        s = settings()
        options = {**self.options, "cache_dir": s.cache_dir, "cache_enabled": s.cache_enabled,
                   "cache_max_bytes": s.cache_max_bytes}
        plan = self._plan(options)
        report_fallbacks(self.name, plan["fallbacks"])
        handles = self._handles(plan["kernel_libraries"])
        scope = {**wrapper_globals(torch.device("neuron", self.device_index)), **values, "_k": handles}
        exec(program, scope)
        fn = scope[self.name]
        fn._boxed_call = True
        metrics.record_graph(plan, time.perf_counter() - t0, loaded=True)
        return with_constants(fn, lifted) if lifted else fn

    def _plan(self, options):
        """The saved plan with each kernel's library from the kernel cache;
        when one is not there (evicted, corrupt, another toolchain), the
        stored graph is lowered and its libraries found or built again."""
        saved = self.plan  # always there: graphs saved by another build are not loaded (code_tag)
        paths = {}
        for digest in set(saved["kernel_libraries"].values()):
            found = _native.find_kernel_library(digest, options)
            if not found["hit"]:
                log.info("openneuron: the kernels of graph %s are built again: %s", self.name, found["miss_reason"])
                plan = _native.compile_graph(self.graph, options)
                return {**plan, "kernel_libraries": kernel_libraries(plan)}
            paths[digest] = found["library"]
        return {**saved, "kernel_libraries": {name: paths[d] for name, d in saved["kernel_libraries"].items()},
                "cache": {"hit": True}}

    def _handles(self, libraries):
        return {step: _C._compiled_kernel(libraries[step], step, self.device_index, label)
                for step, label in self.kernels}


def kernel_libraries(plan):
    """Each kernel step's library path."""
    return {step["name"]: step["library"] for step in plan["steps"] if step["kind"] == "kernel"}


def saved_plan(plan):
    """What a loaded graph needs of its compile plan besides the wrapper: the
    ops it runs through eager kernels (warned about again), its metrics, and
    the digest each kernel's library is found by."""
    stats = plan.get("stats", {})
    digest_of = {lib["path"]: lib["source_digest"] for lib in plan.get("libraries", [])}
    return {"fallbacks": plan["fallbacks"], "externs": plan.get("externs", []),
            "stats": {k: stats[k] for k in ("kernels", "kernel_launches", "buffers_reused") if k in stats},
            "kernel_libraries": {name: digest_of[path] for name, path in kernel_libraries(plan).items()}}


def output_code(fn, *, name, source, program, globals_, graph, options, plan, handles_labels, device, lifted):
    """`fn` (the built wrapper) as a NeuronOutputCode."""
    values = {k: v for k, v in globals_.items() if k.startswith("_c")}
    try:
        blob, error = _dumps((values, lifted)), ""
    except Exception as e:  # noqa: BLE001 -- an unpicklable constant: usable, not savable
        blob, error = b"", f"{type(e).__name__}: {e}"
    code = NeuronOutputCode(name=name, source=source, bytecode=_BYTECODE_MAGIC + marshal.dumps(program),
                            constants=blob, graph=graph, options=options, plan=saved_plan(plan),
                            kernels=handles_labels,
                            device_index=device.index or 0, error=error, code_tag=code_tag(),
                            device_kind=device_kind(device.index or 0))
    code._fn = fn
    code._boxed_call = True
    return code


def eager_output_code(gm):
    """A graph run through eager kernels, savable as AOTAutograd's own."""
    from torch._dynamo.backends.debugging import AOTEagerOutputCode
    from torch.fx.graph import _BoxedCodeGen

    gm.graph.set_codegen(_BoxedCodeGen())
    gm.recompile()
    code = AOTEagerOutputCode(gm=gm)
    code._boxed_call = True
    return code


@functools.cache
def code_tag():
    """Our compiler library and Python sources (the compiler's and the
    PyTorch patches'), which generated a saved graph's wrapper (decompositions (foreach, pooling), the serializer and the
    wrapper all shape what is saved)."""
    digest = hashlib.sha256()
    here = os.path.dirname(__file__)
    patches = os.path.join(os.path.dirname(here), "_torch_patches")
    sources = sorted(os.path.join(folder, f) for folder in (here, patches)
                     for f in os.listdir(folder) if f.endswith(".py"))
    for path in (_native.library_path(), *sources):
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:32]


def device_kind(index=0):
    """What a compiled graph depends on of its device: the driver and its
    kernel target (the same "neuron:0" on every driver)."""
    props = _C._device_properties(index)
    return f"{props['driver']}/{props['kernel_target']}/host_addressable={props['host_addressable']}"


def cache_tag(decomposition_names, device_kind=""):
    """What else must match for a saved graph to be reused: code_tag(), the
    decompositions applied, and the kind of device it was compiled for (its
    driver and kernel target: a graph built for the C++ target holds a
    shared object, one for GLSL a SPIR-V executable, and both name the
    device "neuron:0")."""
    digest = hashlib.sha256(code_tag().encode())
    digest.update("\n".join(sorted(decomposition_names)).encode())
    digest.update(device_kind.encode())
    return "openneuron-" + digest.hexdigest()[:32]


def enable():
    """Dynamo's saved frames for torch.compile(backend="neuron") (idempotent;
    the patches act only around our own compiles: _torch_patches/)."""
    from .._torch_patches import precompile_package

    precompile_package.install()

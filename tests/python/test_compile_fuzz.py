"""Random-graph differential fuzzer of torch.compile on the neuron device.

Each seed gives a random program: a DAG of pointwise, binary, cast, reduction,
view and matmul ops over 1-3 random inputs, written as the Python source of a
function (so that a failure prints a standalone reproducer). The test runs it
eagerly and through `torch.compile(fn, backend=BACKEND, fullgraph=True)` on
DEVICE and compares outputs (dtype, shape, values) and, when inputs require
grad, the gradients of sum(outputs * random weights). A fraction of programs
also runs under `dynamic=True` with inputs of other sizes of the same ranks.

Validity: the generator builds a program op by op, evaluating every candidate
op on the CPU for each input-size set, and keeps it only if it runs, stays
finite and within +-1e4, and stays away from points where eager and compiled
code may legitimately disagree (see Value.atol and the `margin` of ops). A
program that cannot be completed is regenerated, never skipped.

Tolerances: besides each op's real result the generator computes a float64
"shadow" of it from the operands' shadows. A value that any correct
implementation computes bit for bit (neg, relu, views, comparisons, max/min,
lossless casts, integer arithmetic, over exact operands) is `exact`: compared
exactly, and its shadow restarts from its value. Other values get
atol = max(4 x the measured eager error against the shadow, a floor of a few
of the dtype's rtol (torch.testing's default) per inexact op behind the value,
times its magnitude) and the dtype's default rtol. Downcasts that round are
inexact (Inductor, for one, skips the rounding inside fused kernels), so
bf16/fp16 chains get their rounding errors as tolerance. Gradients get the
same treatment from a float64 run of the program's backward.

Environment:
  OPENNEURON_FUZZ_BACKEND           compile backend (default "neuron")
  OPENNEURON_FUZZ_DEVICE            device (default "neuron"; "cpu" to check
                                    the generator, e.g. with backend inductor)
  OPENNEURON_FUZZ_SECONDS           time budget in seconds (default 60)
  OPENNEURON_FUZZ_SEED              first seed (default 0; seeds run in order)
  OPENNEURON_FUZZ_PROGRAMS          stop after this many programs (default: no limit)
  OPENNEURON_FUZZ_DYNAMIC_FRACTION  share of seeds also run with dynamic=True
                                    (default 0.25; the choice is part of the seed)
"""
import inspect
import linecache
import math
import os
import random
import time
import traceback
import warnings
from dataclasses import dataclass, field

import pytest
import torch

import openneuron.compiler as compiler

BACKEND = os.environ.get("OPENNEURON_FUZZ_BACKEND", "neuron")
DEVICE = os.environ.get("OPENNEURON_FUZZ_DEVICE", "neuron")
SECONDS = float(os.environ.get("OPENNEURON_FUZZ_SECONDS", "60"))
FIRST_SEED = int(os.environ.get("OPENNEURON_FUZZ_SEED", "0"))
MAX_PROGRAMS = int(os.environ.get("OPENNEURON_FUZZ_PROGRAMS", "0")) or None
DYNAMIC_FRACTION = float(os.environ.get("OPENNEURON_FUZZ_DYNAMIC_FRACTION", "0.25"))

LIMIT = 1e4  # largest magnitude a value may reach
MAX_NUMEL = 1 << 19  # largest tensor a value may be
MAX_ATTEMPTS = 100  # regenerations of one seed before declaring a generator bug

FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
# torch.testing.assert_close's default rtol per dtype.
BASE_RTOL = {torch.float64: 1e-7, torch.float32: 1.3e-6, torch.float16: 1e-3, torch.bfloat16: 1.6e-2}
DTYPE_WEIGHTS = {
    torch.float32: 55,
    torch.float64: 8,
    torch.bfloat16: 10,
    torch.float16: 10,
    torch.int64: 7,
    torch.int32: 5,
    torch.bool: 5,
}
BIG_SHAPES = [(1000, 257), (257, 1000), (1000,), (4, 1000), (2, 3, 1000), (1000, 1, 33)]
# Scalars exact in every dtype: a compiler may apply one unrounded to the
# operands of a fused low-precision op.
SCALARS = [2, 3, -1, 0.5, 1.5, -2.25, 0.25]


# --- Inputs (shared by the test and its reproducers) -------------------------


def make_input(shape, dtype, seed):
    """A fuzzer input on the CPU: floats in [-2, 2) (multiples of 0.5 for
    every third seed, so that ties occur), integers in [-8, 8], or bools."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) < 0.5
    if not dtype.is_floating_point:
        return torch.randint(-8, 9, shape, generator=g).to(dtype)
    t = torch.rand(shape, generator=g, dtype=torch.float64) * 4 - 2
    if seed % 3 == 0:
        t = torch.round(t * 2) / 2
    return t.to(dtype)


def make_weight(shape, seed):
    """Weights of an output in the loss sum(output * weight): floats in [-1, 1)."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g) * 2 - 1


def run_once(fn, specs, grad_outputs, device, shadow=False):
    """Runs fn on fresh inputs built from specs [(shape, dtype, seed,
    requires_grad)] on `device`. Returns the outputs (detached) and, when
    some input requires grad and grad_outputs (output indices) is not empty,
    the gradients of sum(outputs[k] * weight_k) for the inputs that require
    grad (zeros where unused). shadow=True runs in float64."""
    args = []
    for shape, dtype, seed, requires_grad in specs:
        t = make_input(shape, dtype, seed)
        if shadow and t.is_floating_point():
            t = t.double()
        args.append(t.to(device).requires_grad_(requires_grad))
    outs = fn(*args)
    wanted = [a for a in args if a.requires_grad]
    grads = None
    if wanted and grad_outputs:
        loss = sum(
            (outs[k] * make_weight(outs[k].shape, 1000 + k).to(device)).sum() for k in grad_outputs
        )
        grads = [g.detach() for g in torch.autograd.grad(loss, wanted, materialize_grads=True)]
    return [o.detach() for o in outs], grads


# --- Values and programs -----------------------------------------------------


@dataclass
class Value:
    """A tensor of the program: its CPU data for each input-size set, a
    float64 shadow of it, and what the comparison needs to know."""

    name: str
    data: list
    shadow: list
    exact: bool  # eager and compiled code must agree bit for bit
    requires_grad: bool
    lossy: int = 0  # inexact ops on the longest path to this value
    base: float = 0.0  # loosest BASE_RTOL behind this value
    scale: float = 0.0  # largest magnitude behind this value
    mag: float = 0.0  # its own largest magnitude
    err: float = 0.0  # largest |data - shadow|
    uses: int = 0
    cone: frozenset = frozenset()  # names of the values it is computed from, itself included

    @property
    def dtype(self):
        return self.data[0].dtype

    @property
    def shape(self):
        return tuple(self.data[0].shape)

    @property
    def ndim(self):
        return self.data[0].ndim

    @property
    def is_float(self):
        return self.dtype.is_floating_point

    def atol(self) -> float:
        if self.exact:
            return 0.0
        # The floor covers an eager error that is small by luck: a few of the
        # dtype's rtol per inexact op, relative to the value's magnitude, or
        # (for cancellations) to the square root of the magnitudes behind it.
        floor = self.base * (1 + self.lossy) * max(1.0, self.mag, math.sqrt(self.scale))
        return max(4 * self.err, floor)

    def rtol(self) -> float:
        return 0.0 if self.exact else BASE_RTOL.get(self.dtype, 0.0)


@dataclass
class Program:
    seed: int
    dynamic: bool
    source: str
    shadow_source: str
    specs: list  # per size set: [(shape, dtype, seed, requires_grad)]
    outputs: list  # Values
    grad_outputs: list  # indices of outputs that carry gradients
    grad_tols: list = field(default_factory=list)  # per size set: [(rtol, atol)] per grad input

    def function(self, shadow=False):
        name = f"<fuzz-program-{self.seed}{'-shadow' if shadow else ''}>"
        src = self.shadow_source if shadow else self.source
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        namespace = {"torch": torch}
        exec(compile(src, name, "exec"), namespace)
        return namespace["fn"]

    def reproducer(self, dynamic=False, device=DEVICE, backend=BACKEND) -> str:
        """A standalone script that reruns the failed comparison: the static
        compile on the first size set, or (dynamic) one dynamic=True compile
        on both size sets in turn."""
        sets = range(len(self.specs)) if dynamic else range(1)
        spec_sets = "".join(
            "    [\n" + "".join(f"        ({sh}, {dt}, {sd}, {rg}),\n" for sh, dt, sd, rg in self.specs[k]) + "    ],\n"
            for k in sets
        )
        tols = "".join(f"    ({v.rtol()!r}, {v.atol()!r}),\n" for v in self.outputs)
        gtols = "".join(
            "    [" + ", ".join(f"({r!r}, {a!r})" for r, a in self.grad_tols[k]) + "],\n"
            for k in sets
            if self.grad_tols
        )
        helpers = "\n\n".join(inspect.getsource(f) for f in (make_input, make_weight, run_once))
        return f"""import torch

{helpers}

{self.source}
SPEC_SETS = [  # per input-size set: (shape, dtype, input seed, requires_grad) per input
{spec_sets}]
GRAD_OUTPUTS = {self.grad_outputs}
TOLS = [  # (rtol, atol) per output
{tols}]
GRAD_TOLS = [  # per size set: (rtol, atol) per input that requires grad
{gtols}]
compiled = torch.compile(fn, backend="{backend}", fullgraph=True{", dynamic=True" if dynamic else ""})
for k, specs in enumerate(SPEC_SETS):
    ref_outs, ref_grads = run_once(fn, specs, GRAD_OUTPUTS, "{device}")
    outs, grads = run_once(compiled, specs, GRAD_OUTPUTS, "{device}")
    for o, r, (rtol, atol) in zip(outs, ref_outs, TOLS):
        torch.testing.assert_close(o, r, rtol=rtol, atol=atol, equal_nan=True)
    for g, r, (rtol, atol) in zip(grads or [], ref_grads or [], GRAD_TOLS[k] if GRAD_TOLS else []):
        torch.testing.assert_close(g, r, rtol=rtol, atol=atol, equal_nan=True)
print("no mismatch")
"""


class Rejected(Exception):
    """The program under construction cannot be completed validly."""


# Margin helpers: the distance of operands from the points where an op is
# discontinuous (forward) or has a kink (gradient). t: the operands' tensors.


def _dist_zero(i):
    return lambda t: t[i].double().abs()


def _dist_value(i, c):
    return lambda t: (t[i].double() - c).abs()


def _dist_pair(i, j):
    return lambda t: (t[i].double() - t[j].double()).abs()


def _dist_int(i):
    return lambda t: (t[i].double() - t[i].double().round()).abs()


def _dist_top2(i, dims, largest):
    """Gap between the two largest (smallest) elements of each reduced slice."""

    def dist(t):
        x = t[i].double()
        if x.ndim == 0:
            return torch.full((), math.inf)
        ds = tuple(range(x.ndim)) if dims is None else ((dims,) if isinstance(dims, int) else dims)
        ds = sorted(d % x.ndim for d in ds)
        x = x.movedim(ds, list(range(x.ndim - len(ds), x.ndim))).flatten(x.ndim - len(ds))
        if x.shape[-1] < 2:
            return torch.full((), math.inf)
        top = x.topk(2, dim=-1, largest=largest).values
        return (top[..., 0] - top[..., 1]).abs()

    return dist


class Generator:
    """Builds one random program; every op family is one method."""

    def __init__(self, seed: int, attempt: int, dynamic: bool):
        self.seed = seed
        self.rng = random.Random(seed * MAX_ATTEMPTS + attempt)
        self.nsets = 2 if dynamic else 1
        self.grad = self.rng.random() < 0.6
        self.values: list[Value] = []
        self.inputs: list[Value] = []
        self.lines: list[str] = []
        self.shadow_lines: list[str] = []
        self.specs: list[list] = [[] for _ in range(self.nsets)]

    # -- inputs --

    def pick_dtype(self):
        return self.rng.choices(list(DTYPE_WEIGHTS), list(DTYPE_WEIGHTS.values()))[0]

    def pick_size(self):
        r = self.rng.random()
        if r < 0.15:
            return 1
        if r < 0.6:
            return self.rng.randint(2, 8)
        return self.rng.randint(2, 33)

    def pick_shape(self):
        if self.rng.random() < 0.05:
            return self.rng.choice(BIG_SHAPES)
        rank = self.rng.choices(range(5), [1, 3, 4, 3, 2])[0]
        dims = [self.pick_size() for _ in range(rank)]
        while math.prod(dims) > 65536:
            i = dims.index(max(dims))
            dims[i] //= 2
        return tuple(dims)

    def related_shape(self, base):
        """A shape that often broadcasts with (or multiplies) `base`."""
        r = self.rng.random()
        if r < 0.3:
            return base
        if r < 0.75:  # broadcast: fewer leading dims, some dims 1, maybe a new leading 1
            s = [1 if self.rng.random() < 0.3 else d for d in base[self.rng.randint(0, len(base)) :]]
            if self.rng.random() < 0.2:
                s.insert(0, 1)
            return tuple(s)
        if r < 0.9 and len(base) >= 1:  # matmul partner: same last dim
            lead = list(base[:-2]) if len(base) >= 2 else []
            return tuple(lead + [self.pick_size(), base[-1]])
        return self.pick_shape()

    def alt_sizes(self, shapes):
        """Maps every size > 1 of the inputs to another size (1 stays 1)."""
        mapping = {}
        for n in sorted({d for s in shapes for d in s if d > 1}):
            if n >= 100:
                mapping[n] = self.rng.randint(n // 2, n - 1)
            else:
                mapping[n] = self.rng.choice([k for k in range(2, 34) if k != n])
        return mapping

    def make_inputs(self):
        n = self.rng.choices([1, 2, 3], [4, 4, 2])[0]
        shapes = [self.pick_shape()]
        dtypes = [self.pick_dtype()]
        for _ in range(1, n):
            shapes.append(self.related_shape(shapes[0]))
            dtypes.append(dtypes[0] if self.rng.random() < 0.7 else self.pick_dtype())
        mapping = self.alt_sizes(shapes)
        for i, (shape, dtype) in enumerate(zip(shapes, dtypes)):
            rg = self.grad and dtype.is_floating_point
            data, shadow = [], []
            for k in range(self.nsets):
                s = shape if k == 0 else tuple(mapping.get(d, d) for d in shape)
                seed = self.seed * 16 + 8 * k + i
                self.specs[k].append((s, dtype, seed, rg))
                t = make_input(s, dtype, seed)
                data.append(t)
                shadow.append(t.double() if t.is_floating_point() else t)
            v = Value(
                f"x{i}",
                data,
                shadow,
                exact=True,
                requires_grad=rg,
                scale=max(_max_abs(t) for t in data),
                mag=max(_max_abs(t) for t in data),
            )
            self.values.append(v)
            self.inputs.append(v)

    # -- operands --

    def pick(self, pred=None, avoid=None):
        """A value satisfying pred, recent and unused ones more likely;
        seldom `avoid` (x op x is mostly a constant)."""
        cands = [v for v in self.values if (pred is None or pred(v)) and (v is not avoid or self.rng.random() < 0.1)]
        if not cands:
            raise Rejected("no operand")
        weights = [1 + i + (8 if v.uses == 0 else 0) for i, v in enumerate(cands)]
        return self.rng.choices(cands, weights)[0]

    def scalar(self):
        return self.rng.choice(SCALARS)

    # -- emitting one op --

    def emit(self, template, operands, *, exact=False, margin=None, kink=None, dts=None):
        """Adds `vN = template.format(*operand names)` if it is valid for
        every size set, and returns its Value (None when invalid).

        exact: True, False, "inherit" (exact when all operands are) or a
        function of the results. margin / kink: (distance function, operand
        indices) of a discontinuity (checked when those operands are inexact)
        or of a kink of the gradient (checked when they also require grad).
        dts: dtypes of {name} placeholders (float64 ones in the shadow)."""
        dts = dts or {}
        names = [o.name for o in operands]
        expr = template.format(*names, **{k: _dt_src(d) for k, d in dts.items()})
        shadow_expr = template.format(
            *names, **{k: _dt_src(torch.float64 if d.is_floating_point else d) for k, d in dts.items()}
        )
        real, shad = [], []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for k in range(self.nsets):
                env = {"torch": torch, **{v.name: v.data[k] for v in self.values}}
                senv = {"torch": torch, **{v.name: v.shadow[k] for v in self.values}}
                try:
                    with torch.no_grad():
                        r = eval(expr, env)
                        s = eval(shadow_expr, senv)
                except Exception:
                    return None
                if not _acceptable(r) or not isinstance(s, torch.Tensor):
                    return None
                if real and (r.dtype != real[0].dtype or r.ndim != real[0].ndim):
                    return None
                try:
                    if not (self.margins_ok(margin, operands, k, False) and self.margins_ok(kink, operands, k, True)):
                        return None
                except Exception:
                    return None
                real.append(r)
                shad.append(s)
        if exact == "inherit":
            exact = all(o.exact for o in operands)
        elif callable(exact):
            exact = exact(real)
        exact = exact or not real[0].is_floating_point()
        name = f"v{len(self.values) - len(self.inputs)}"
        requires_grad = real[0].is_floating_point() and any(o.requires_grad for o in operands)
        own_base = BASE_RTOL.get(real[0].dtype, 0.0)
        mag = max(_max_abs(r) for r in real)
        if exact:
            # Exactly known: no error to pass on (base 0), its shadow restarts here.
            v = Value(name, real, [_as_shadow(r) for r in real], True, requires_grad, scale=mag, mag=mag)
        else:
            err = max(_max_abs(r.double() - _as_shadow(s)) for r, s in zip(real, shad))
            v = Value(
                name,
                real,
                [_as_shadow(s) for s in shad],
                False,
                requires_grad,
                lossy=max(o.lossy for o in operands) + 1,
                base=max([own_base] + [o.base for o in operands]),
                scale=max([mag] + [o.scale for o in operands]),
                mag=mag,
                err=err,
            )
        for o in operands:
            o.uses += 1
        v.cone = frozenset({name}).union(*(o.cone for o in operands))
        self.values.append(v)
        self.lines.append(f"    {name} = {expr}")
        self.shadow_lines.append(f"    {name} = {shadow_expr}")
        return v

    def margins_ok(self, spec, operands, k, kink):
        if spec is None:
            return True
        dist_fn, idx = spec
        concerned = [operands[i] for i in idx]
        if kink:
            concerned = [o for o in concerned if o.requires_grad]
        concerned = [o for o in concerned if not o.exact]
        if not concerned:
            return True
        d = dist_fn([o.data[k] for o in operands])
        if d.numel() == 0:
            return True
        return bool(d.min() > 4 * max(o.atol() for o in concerned))

    # -- op families --

    def gen_unary(self):
        x = self.pick()
        c = self.rng.choice([-1.0, -0.5, 0.0, 0.25, 1.0])
        lo, hi = sorted(self.rng.sample([-1.5, -0.5, 0.0, 0.5, 1.0, 2.0], 2))
        n = self.rng.choice([2, 3])
        s = self.scalar()
        ops = [
            ("torch.neg({0})", "inherit", None, None),
            ("-{0}", "inherit", None, None),
            ("torch.abs({0})", "inherit", None, (_dist_zero(0), [0])),
            ("torch.exp({0})", False, None, None),
            ("torch.log({0}.abs() + 1)", False, None, (_dist_zero(0), [0])),
            ("torch.sqrt({0}.abs())", False, None, (_dist_zero(0), [0])),
            ("torch.tanh({0})", False, None, None),
            ("torch.sigmoid({0})", False, None, None),
            ("torch.relu({0})", "inherit", None, (_dist_zero(0), [0])),
            ("torch.nn.functional.gelu({0})", False, None, None),
            ("torch.nn.functional.gelu({0}, approximate='tanh')", False, None, None),
            ("torch.nn.functional.silu({0})", False, None, None),
            ("torch.sin({0})", False, None, None),
            ("torch.cos({0})", False, None, None),
            ("torch.reciprocal({0}.abs() + 1)", False, None, (_dist_zero(0), [0])),
            ("torch.floor({0})", True, (_dist_int(0), [0]), None),
            (
                f"torch.clamp({{0}}, min={lo}, max={hi})",
                "inherit",
                None,
                (lambda t: torch.minimum(_dist_value(0, lo)(t), _dist_value(0, hi)(t)), [0]),
            ),
            (f"{{0}}.clamp(min={lo})", "inherit", None, (_dist_value(0, lo), [0])),
            (f"torch.pow({{0}}, {n})", False, None, None),
            ("{0} ** 2", False, None, None),
            (f"torch.where({{0}} > {c}, {{0}}, {s})", "inherit", (_dist_value(0, c), [0]), None),
        ]
        template, exact, margin, kink = self.rng.choice(ops)
        return self.emit(template, [x], exact=exact, margin=margin, kink=kink)

    def gen_binary(self):
        a = self.pick()
        if self.rng.random() < 0.3:  # a scalar operand, on either side
            s = self.scalar()
            op = self.rng.choice(["+", "-", "*", "/"] if self.rng.random() < 0.75 else [">", "<", ">=", "<=", "==", "!="])
            if op in "+-*" and self.rng.random() < 0.5:
                return self.emit(f"{s!r} {op} {{0}}", [a])
            if op == "/":
                return self.emit(f"{{0}} / {abs(s) + 1!r}", [a])
            if op in ("+", "-", "*"):
                return self.emit(f"{{0}} {op} {s!r}", [a])
            return self.emit(f"{{0}} {op} {s!r}", [a], exact=True, margin=(_dist_value(0, s), [0]))
        b = self.pick(avoid=a)
        ops = [
            ("{0} + {1}", False, None, None),
            ("torch.add({0}, {1}, alpha=2)", False, None, None),
            ("{0} - {1}", False, None, None),
            ("torch.sub({0}, {1})", False, None, None),
            ("{0} * {1}", False, None, None),
            ("torch.mul({0}, {1})", False, None, None),
            ("{0} / ({1}.abs() + 1)", False, None, (_dist_zero(1), [1])),
            ("torch.div({0}, {1}.abs() + 1)", False, None, (_dist_zero(1), [1])),
            ("torch.maximum({0}, {1})", "inherit", None, (_dist_pair(0, 1), [0, 1])),
            ("torch.minimum({0}, {1})", "inherit", None, (_dist_pair(0, 1), [0, 1])),
        ]
        comparisons = [f"{{0}} {cmp} {{1}}" for cmp in (">", "<", ">=", "<=", "==", "!=")]
        comparisons += [f"torch.{fn}({{0}}, {{1}})" for fn in ("gt", "le", "eq", "ne")]
        if self.rng.random() < 0.25:
            ops = [(c, True, (_dist_pair(0, 1), [0, 1]), None) for c in comparisons]
        template, exact, margin, kink = self.rng.choice(ops)
        return self.emit(template, [a, b], exact=exact, margin=margin, kink=kink)

    def gen_where(self):
        c = self.pick()
        branches, operands, branch_ops = [], [c], []
        for _ in range(2):
            if self.rng.random() < 0.3:
                branches.append(repr(self.scalar()))
            else:
                branch_ops.append(self.pick())
                operands.append(branch_ops[-1])
                branches.append(f"{{{len(operands) - 1}}}")
        if self.rng.random() < 0.5:
            t = self.rng.choice([-0.5, 0.0, 1.0])
            cond, margin = f"{{0}} > {t}", (_dist_value(0, t), [0])
        else:
            operands.append(self.pick(avoid=c))
            i = len(operands) - 1
            cond, margin = f"{{0}} <= {{{i}}}", (_dist_pair(0, i), [0, i])
        template = f"torch.where({cond}, {branches[0]}, {branches[1]})"
        exact = all(o.exact for o in branch_ops)
        return self.emit(template, operands, exact=exact, margin=margin)

    def gen_cast(self):
        x = self.pick()
        target = self.rng.choice([torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.float32, torch.bool])
        if target == x.dtype:
            return None
        back = x.dtype if self.rng.random() < 0.5 else None
        template = "{0}.to({dt})" + (".to({back})" if back is not None else "")
        dts = {"dt": target, **({"back": back} if back is not None else {})}
        if not target.is_floating_point:  # exact, away from the points where it jumps
            margin = (_dist_zero(0), [0]) if target == torch.bool else (_dist_int(0), [0])
            return self.emit(template, [x], exact=True, margin=margin, dts=dts)

        # A cast that rounds is inexact: compilers may skip the rounding of a
        # downcast whose result is consumed in the same fused kernel (Inductor
        # does unless config.emulate_precision_casts).
        def lossless(real):
            return x.exact and all(torch.equal(r.double(), d.double()) for r, d in zip(real, x.data))

        return self.emit(template, [x], exact=lossless, dts=dts)

    def pick_dims(self, ndim, single=False):
        """None (all dims), one dim, or (unless single) a tuple of dims."""
        if ndim == 0:
            return self.rng.choice([0, -1]) if single else self.rng.choice([None, 0, -1])
        r = self.rng.random()
        if r < 0.2 and not single:
            return None
        if r < 0.7 or single or ndim == 1:
            d = self.rng.randrange(ndim)
            return d - ndim if self.rng.random() < 0.3 else d
        return tuple(sorted(self.rng.sample(range(ndim), self.rng.randint(2, ndim))))

    def gen_reduction(self):
        x = self.pick()
        k = self.rng.random() < 0.4
        kind = self.rng.choice(["sum", "mean", "amax", "amin", "prod", "var", "softmax", "log_softmax", "logsumexp"])
        if kind in ("softmax", "log_softmax"):
            d = self.pick_dims(x.ndim, single=True)
            forms = [f"torch.{kind}({{0}}, dim={d})", f"{{0}}.{kind}({d})"]
            if x.dtype in (torch.float16, torch.bfloat16):
                forms.append(f"torch.nn.functional.{kind}({{0}}, dim={d}, dtype={{dt}})")
            return self.emit(self.rng.choice(forms), [x], dts={"dt": torch.float32})
        if kind == "prod":
            d = self.pick_dims(x.ndim, single=True)
            if x.ndim and max(v.data[i].shape[d] for v in [x] for i in range(self.nsets)) > 12:
                return None
            if x.data[0].numel() <= 12 and self.rng.random() < 0.3:
                return self.emit("torch.prod({0})", [x])
            return self.emit(f"torch.prod({{0}}, dim={d}, keepdim={k})", [x])
        dims = self.pick_dims(x.ndim)
        if kind == "var":
            c = self.rng.choice([0, 1])
            if dims is None:
                return self.emit(f"torch.var({{0}}, correction={c})", [x])
            return self.emit(f"torch.var({{0}}, dim={dims}, correction={c}, keepdim={k})", [x])
        exact = "inherit" if kind in ("amax", "amin") else False
        kink = (_dist_top2(0, dims, kind == "amax"), [0]) if kind in ("amax", "amin") else None
        if dims is None:
            template = self.rng.choice([f"torch.{kind}({{0}})", f"{{0}}.{kind}()"])
        elif self.rng.random() < 0.3:
            template = f"{{0}}.{kind}({dims}{', keepdim=True' if k else ''})"
        else:
            template = f"torch.{kind}({{0}}, dim={dims}, keepdim={k})"
        return self.emit(template, [x], exact=exact, kink=kink)

    def gen_view(self):
        x = self.pick()
        n, r = x.ndim, self.rng
        forms = ["{0}.reshape(-1)", "torch.flatten({0})", f"{{0}}.unsqueeze({r.randint(-n - 1, n)})", "{0}.squeeze()"]
        forms += ["{0}.contiguous()"]
        if n >= 1:
            forms += self._views_of_one_dim(x)
            perm = list(range(n))
            r.shuffle(perm)
            forms += [f"{{0}}.permute({tuple(perm)})", f"{{0}}.permute({tuple(perm)}).contiguous()"]
            forms.append(f"{{0}}.expand({r.choice([2, 3])}, *{{0}}.shape)")
            if 1 in x.shape:
                sizes = [str(r.choice([2, 3, 5])) if x.shape[j] == 1 else "-1" for j in range(n)]
                forms.append(f"{{0}}.expand({', '.join(sizes)})")
                other = self.pick(lambda v: v.ndim >= n, avoid=x)
                if other is not x and r.random() < 0.3:
                    return self.emit("{0}.expand_as({1})", [x, other], exact=x.exact)
        if n >= 2:
            forms += self._views_of_two_dims(x)
        if n <= 2:
            forms += ["{0}.t()", "torch.t({0})"]
        return self.emit(r.choice(forms), [x], exact="inherit")

    def _views_of_one_dim(self, x):
        """Views that change one dim (sizes written relative to the shape,
        so that they hold for other input sizes)."""
        r, n = self.rng, x.ndim
        d = r.randrange(n)
        s, e = r.randint(0, 2), r.randint(0, 2)
        step = r.choice([1, 2, 3])
        start, stop = r.choice(["", "1", "-3"]), r.choice(["", "-1"])
        index = ", ".join([":"] * d + [f"{start}:{stop}:{step}" if step > 1 else f"{start}:{stop}"])
        return [
            f"{{0}}.squeeze({d})",
            f"{{0}}.narrow({d}, {s}, {{0}}.shape[{d}] - {s + e})",
            f"torch.narrow({{0}}, {d}, {s}, {{0}}.shape[{d}] - {s + e})",
            f"{{0}}[{index}]",
            f"{{0}}[..., {r.choice(['0', '-1', '1::2'])}]",
            f"{{0}}.select({d}, -1)",
            f"{{0}}.flatten({d})",
            f"{{0}}.reshape({', '.join([f'{{0}}.shape[{j}]' for j in range(d)] + [str(r.choice([2, 3])), '-1'] + [f'{{0}}.shape[{j}]' for j in range(d + 1, n)])})",
        ]

    def _views_of_two_dims(self, x):
        """Views that swap or merge two dims."""
        r, n = self.rng, x.ndim
        a, b = r.sample(range(n), 2)
        i = r.randrange(n - 1)
        merged = ", ".join([f"{{0}}.shape[{j}]" for j in range(i)] + ["-1"] + [f"{{0}}.shape[{j}]" for j in range(i + 2, n)])
        return [
            f"{{0}}.transpose({a}, {b})",
            f"torch.transpose({{0}}, {a}, {b})",
            f"{{0}}.view({merged})",
            f"{{0}}.reshape({merged})",
            f"{{0}}.flatten({i}, {i + 1})",
        ]

    def gen_matmul(self):
        a = self.pick(lambda v: v.is_float and v.ndim >= 1)
        r = self.rng.random()
        if r < 0.3 and a.ndim >= 2:
            return self.emit(self.rng.choice(["torch.matmul({0}, {0}.mT)", "{0}.mT @ {0}", "{0} @ {0}.transpose(-1, -2)"]), [a])
        same_last = lambda v: v.dtype == a.dtype and v.ndim >= 2 and v.shape[-1] == a.shape[-1]
        chain = lambda v: v.dtype == a.dtype and v.ndim >= 2 and v.shape[-2] == a.shape[-1]
        if r < 0.7:
            b = self.pick(same_last, avoid=a)
            forms = ["torch.matmul({0}, {1}.mT)", "{0} @ {1}.transpose(-1, -2)"]
            if a.ndim == 2 and b.ndim == 2:
                forms.append("torch.mm({0}, {1}.t())")
            if a.ndim == 3 and b.ndim == 3:
                forms.append("torch.bmm({0}, {1}.transpose(1, 2))")
            return self.emit(self.rng.choice(forms), [a, b])
        b = self.pick(chain, avoid=a)
        return self.emit(self.rng.choice(["torch.matmul({0}, {1})", "{0} @ {1}"]), [a, b])

    FAMILIES = [
        ("gen_unary", 25),
        ("gen_binary", 25),
        ("gen_where", 5),
        ("gen_cast", 8),
        ("gen_reduction", 15),
        ("gen_view", 20),
        ("gen_matmul", 6),
    ]

    # -- the program --

    def build(self) -> Program:
        self.make_inputs()
        n_ops = self.rng.randint(1, 12)
        names, weights = zip(*self.FAMILIES)
        tries = 0
        while len(self.values) - len(self.inputs) < n_ops and tries < 30 * n_ops:
            tries += 1
            try:
                getattr(self, self.rng.choices(names, weights)[0])()
            except Rejected:
                pass
        produced = self.values[len(self.inputs) :]
        if not produced:
            raise Rejected("no op could be generated")
        # 1-3 outputs: the values nothing uses with the largest cones, and
        # sometimes a value something uses.
        sinks = sorted((v for v in produced if v.uses == 0), key=lambda v: -len(v.cone))
        outputs = sinks[: self.rng.choice([1, 2, 2, 3])]
        if len(outputs) < 3 and len(produced) > len(outputs) and self.rng.random() < 0.2:
            outputs.append(self.rng.choice([v for v in produced if v not in outputs]))
        # Dead code is dropped, except in a few programs (the compiler must drop it).
        kept = outputs + [v for v in produced if self.rng.random() < 0.1]
        live = frozenset().union(*(v.cone for v in kept))
        keep = [i for i, v in enumerate(produced) if v.name in live]
        args = ", ".join(v.name for v in self.inputs)
        ret = "    return (" + ", ".join(v.name for v in outputs) + ",)"
        source = "\n".join([f"def fn({args}):"] + [self.lines[i] for i in keep] + [ret]) + "\n"
        shadow_source = "\n".join([f"def fn({args}):"] + [self.shadow_lines[i] for i in keep] + [ret]) + "\n"
        grad_outputs = [i for i, v in enumerate(outputs) if v.requires_grad]
        prog = Program(self.seed, self.nsets == 2, source, shadow_source, self.specs, outputs, grad_outputs)
        if grad_outputs:
            self.gradient_tolerances(prog, [produced[i] for i in keep])
        return prog

    def gradient_tolerances(self, prog, values):
        """Runs the program's backward on the CPU (real and float64 shadow);
        rejects it unless the gradients are finite; sets prog.grad_tols."""
        fn, shadow_fn = prog.function(), prog.function(shadow=True)
        base = max(v.base for v in values)
        lossy = max(v.lossy for v in values) + 1  # the backward adds its own
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for k in range(self.nsets):
                try:
                    _, grads = run_once(fn, prog.specs[k], prog.grad_outputs, "cpu")
                    _, sgrads = run_once(shadow_fn, prog.specs[k], prog.grad_outputs, "cpu", shadow=True)
                except Exception as e:  # noqa: BLE001
                    raise Rejected(f"backward failed: {e}")
                tols = []
                for g, s in zip(grads, sgrads):
                    if not torch.isfinite(g).all() or _max_abs(g) > 1e6:
                        raise Rejected("gradient not finite or too large")
                    err = _max_abs(g.double() - s)
                    floor = 2 * max(base, BASE_RTOL[g.dtype]) * (1 + lossy) * max(1.0, _max_abs(g))
                    tols.append((BASE_RTOL[g.dtype], max(4 * err, floor)))
                prog.grad_tols.append(tols)


def _dt_src(dtype) -> str:
    return str(dtype)  # "torch.float32"


def _as_shadow(t):
    return t.double() if t.is_floating_point() else t


def _max_abs(t) -> float:
    if t.numel() == 0:
        return 0.0
    if t.dtype == torch.bool:
        return 1.0
    return float(t.double().abs().max())


def _acceptable(r) -> bool:
    if not isinstance(r, torch.Tensor) or r.dtype not in DTYPE_WEIGHTS or r.numel() > MAX_NUMEL:
        return False
    if r.numel() == 0 or r.dtype == torch.bool:
        return True
    if r.is_floating_point() and not torch.isfinite(r).all():
        return False
    return _max_abs(r) <= LIMIT


def is_dynamic_seed(seed: int) -> bool:
    return random.Random(f"dynamic-{seed}").random() < DYNAMIC_FRACTION


def generate_program(seed: int) -> Program:
    """The program of `seed`; regenerates (deterministically) until valid."""
    dynamic = is_dynamic_seed(seed)
    reasons = []
    for attempt in range(MAX_ATTEMPTS):
        try:
            return Generator(seed, attempt, dynamic).build()
        except Rejected as e:
            reasons.append(str(e))
    raise AssertionError(f"generator bug: seed {seed} gave no valid program in {MAX_ATTEMPTS} attempts: {reasons[-5:]}")


# --- Checking a program --------------------------------------------------------


def _describe(prog, size_set, what, detail):
    dynamic = what.startswith("dynamic")
    return (
        f"torch.compile fuzzer mismatch: seed {prog.seed} ({what}), backend {BACKEND!r}, device {DEVICE!r}\n"
        f"rerun: OPENNEURON_FUZZ_SEED={prog.seed} OPENNEURON_FUZZ_PROGRAMS=1 "
        f"OPENNEURON_FUZZ_DYNAMIC_FRACTION={DYNAMIC_FRACTION}\n"
        f"{detail}\n"
        f"--- standalone reproducer ---\n{prog.reproducer(dynamic)}"
    )


def _compare(prog, size_set, what, ref, res):
    (ref_outs, ref_grads), (outs, grads) = ref, res
    checks = []
    if len(outs) != len(ref_outs):
        raise AssertionError(_describe(prog, size_set, what, f"{len(outs)} outputs, eager gives {len(ref_outs)}"))
    for i, (o, r, v) in enumerate(zip(outs, ref_outs, prog.outputs)):
        checks.append((f"output {i} ({v.name})", o, r, v.rtol(), v.atol()))
    if (grads is None) != (ref_grads is None):
        raise AssertionError(_describe(prog, size_set, what, f"gradients: compiled {grads is not None}, eager {ref_grads is not None}"))
    for i, (g, r) in enumerate(zip(grads or [], ref_grads or [])):
        rtol, atol = prog.grad_tols[size_set][i]
        checks.append((f"gradient of input {i} requiring grad", g, r, rtol, atol))
    for label, o, r, rtol, atol in checks:
        if o.dtype != r.dtype or o.shape != r.shape:
            detail = f"{label}: compiled {o.dtype} {tuple(o.shape)}, eager {r.dtype} {tuple(r.shape)}"
            raise AssertionError(_describe(prog, size_set, what, detail))
        try:
            torch.testing.assert_close(o.cpu(), r.cpu(), rtol=rtol, atol=atol, equal_nan=True, check_stride=False)
        except AssertionError as e:
            raise AssertionError(_describe(prog, size_set, what, f"{label} (rtol={rtol}, atol={atol}): {e}")) from None


def _run(prog, fn, size_set, what):
    try:
        return run_once(fn, prog.specs[size_set], prog.grad_outputs, DEVICE)
    except Exception:  # noqa: BLE001
        raise AssertionError(_describe(prog, size_set, what, traceback.format_exc())) from None


def check_program(prog, stats):
    fn = prog.function()
    ref = _run(prog, fn, 0, "eager")
    compiled = torch.compile(fn, backend=BACKEND, fullgraph=True)
    _compare(prog, 0, "compiled", ref, _run(prog, compiled, 0, "compiled"))
    stats["grads"] += ref[1] is not None
    if prog.dynamic:
        torch._dynamo.reset()
        dyn = torch.compile(fn, backend=BACKEND, fullgraph=True, dynamic=True)
        for k in range(2):
            ref_k = ref if k == 0 else _run(prog, fn, k, "eager, other sizes")
            _compare(prog, k, f"dynamic=True, size set {k}", ref_k, _run(prog, dyn, k, f"dynamic=True, size set {k}"))
        stats["dynamic"] += 1
    stats["programs"] += 1


def _backend_available():
    try:
        torch._dynamo.lookup_backend(BACKEND)
    except Exception:  # noqa: BLE001
        return False
    return True


@pytest.mark.timeout(int(2 * SECONDS) + 900)
def test_compile_fuzz():
    if not _backend_available():
        pytest.skip(f"torch.compile backend {BACKEND!r} is not registered")
    stats = {"programs": 0, "grads": 0, "dynamic": 0}
    compiler.reset_metrics()
    start = time.monotonic()
    seed = FIRST_SEED
    try:
        while time.monotonic() - start < SECONDS and (MAX_PROGRAMS is None or stats["programs"] < MAX_PROGRAMS):
            torch._dynamo.reset()
            check_program(generate_program(seed), stats)
            seed += 1
    finally:
        torch._dynamo.reset()
        elapsed = time.monotonic() - start
        print(
            f"\ncompile fuzzer: {stats['programs']} programs (seeds {FIRST_SEED}..{seed - 1}), "
            f"{stats['grads']} with gradients, {stats['dynamic']} also dynamic=True, "
            f"backend {BACKEND!r} on {DEVICE!r}, {elapsed:.0f} s"
        )
    assert stats["programs"] > 0
    # The scheduler decides fusion legality; code generation never has to
    # send a graph back to it (the retry stays only as a safety net).
    assert compiler.metrics()["fusion_retries"] == 0

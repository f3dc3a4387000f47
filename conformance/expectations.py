"""The expected-failure list (expected_failures.txt): parsing and matching.

Each entry is one line:

    KIND[@MODE]  NAME  DTYPE  CHECK  -> one-line reason

KIND   xfail    an OpenNeuron bug: the check fails (or errors) and must keep
                failing until fixed; a pass is an *unexpected pass*
       exclude  the CPU reference itself is at fault (undefined output,
                a CPU kernel bug): failing samples of the check are excluded
                from the figures; a pass is an unexpected pass too
       undefined  the CPU reference's values for the check are not defined
                (uninitialized memory, undefined behaviour): where values
                differ, shape, dtype, device and aliasing are compared only
                (like the OpInfo's own "non-deterministic" ops); never an
                unexpected pass
       rounding  float rounding whose size depends on the machine (its
                vector width and kernel blocking set the summation order):
                a failing check is expected, as for xfail, and a pass is
                no unexpected pass
       skip     the item is not run (pathological in time); CHECK must be *
MODE   host | fallback | protected | compile | cuda-dtypes | vulkan: the entry applies to that run only
       (default: every run; fallback entries also apply to protected runs, and
       both to vulkan runs); protected-only: the protected run alone
NAME   op full name (OpInfo name[.variant]) or module:<name>[:train|:eval]
DTYPE  torch dtype name (float32, ...)
CHECK  forward | inplace | out | backward | forward_ad (modules: forward |
       backward); generate: the OpInfo's sample generation on neuron fails
NAME, DTYPE and CHECK are fnmatch patterns (*, ?); '#' starts a comment.
"""
import fnmatch
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PATH = os.path.join(HERE, "expected_failures.txt")
KINDS = ("xfail", "exclude", "undefined", "rounding", "skip")
_LINE = re.compile(r"^(\w+)(?:@([\w-]+))?\s+(\S+)\s+(\S+)\s+(\S+)\s+->\s+(\S.*)$")


# The protected driver (memory the host cannot address) runs every op on the
# CPU-fallback path: the fallback path's entries apply to it too.
# The vulkan driver is such a device too, with kernels of its own (GLSL).
# protected-only: rounding that depends on the protected driver's own kernels.
MODE_FAMILY = {"protected": ("protected", "protected-only", "fallback"), "vulkan": ("vulkan", "protected", "fallback")}


class Entry:
    __slots__ = ("kind", "mode", "name", "dtype", "check", "reason", "line", "used")

    def __init__(self, kind, mode, name, dtype, check, reason, line):
        self.kind, self.mode, self.name = kind, mode, name
        self.dtype, self.check, self.reason, self.line = dtype, check, reason, line
        self.used = False

    def applies_to(self, mode):
        return self.mode is None or self.mode in MODE_FAMILY.get(mode, (mode,))

    def matches(self, mode, name, dtype, check):
        return (self.applies_to(mode)
                and fnmatch.fnmatchcase(name, self.name)
                and fnmatch.fnmatchcase(dtype, self.dtype)
                and (check is None or fnmatch.fnmatchcase(check, self.check)))

    def text(self):
        mode = f"@{self.mode}" if self.mode else ""
        return f"{self.kind}{mode} {self.name} {self.dtype} {self.check} -> {self.reason}"


def load(path=DEFAULT_PATH):
    entries = []
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            m = _LINE.match(line)
            if not m:
                raise ValueError(f"{path}:{n}: cannot parse entry: {line!r}")
            kind, mode, name, dtype, check, reason = m.groups()
            if kind not in KINDS:
                raise ValueError(f"{path}:{n}: unknown kind {kind!r}")
            if mode not in (None, "host", "fallback", "compile", "cuda-dtypes", "protected", "protected-only", "vulkan"):
                raise ValueError(f"{path}:{n}: unknown mode {mode!r}")
            if kind == "skip" and check != "*":
                raise ValueError(f"{path}:{n}: a skip entry skips the whole item (CHECK must be *)")
            entries.append(Entry(kind, mode, name, dtype, check, reason.strip(), n))
    return entries


def find(entries, kind, mode, name, dtype, check=None):
    for e in entries:
        if e.kind == kind and e.matches(mode, name, dtype, check):
            return e
    return None


def mentions(entries, mode, name, dtype):
    """Entries (xfail/exclude/rounding) that concern an item, any check."""
    return [e for e in entries if e.kind in ("xfail", "exclude", "rounding")
            and e.applies_to(mode)
            and fnmatch.fnmatchcase(name, e.name) and fnmatch.fnmatchcase(dtype, e.dtype)]

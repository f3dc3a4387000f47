"""OpenNeuron conformance harness: PyTorch's device-generic OpInfo / ModuleInfo
machinery instantiated for the `neuron` device (PrivateUse1), every result
compared against the same sample run on the CPU.

Test templates (instantiated by `instantiate_device_type_tests(...,
only_for="privateuse1")`, so PyTorch's `PrivateUse1TestBase` provides the
device and the OpInfo decorators that apply to every test of an op, such as
`precisionOverride`/`toleranceOverride` and `skipCPUIfNoLapack`, are applied):

  TestConformanceNEURON.test_op_<op>_neuron_<dtype>
      @ops(op_db, dtypes=OpDTypes.supported): for every sample input
        forward     values, dtype, shape, strides and device of every output
                    match CPU (assertEqual with the op's tolerances); outputs
                    alias the inputs exactly as on CPU (storage sharing and
                    identity, in both directions)
        inplace     op.inplace_variant: returns its input, mutates it like
                    CPU; raises where CPU raises
        out         op.supports_out: out= of the right shape and an empty out=
                    (resized); returns the out tensors, values like CPU;
                    raises where CPU raises
        backward    torch.autograd.grad of the outputs w.r.t. every input
                    that requires grad, same grad_outputs on both devices
        forward_ad  forward-mode AD (torch.autograd.forward_ad), same tangents
  TestModuleConformanceNEURON.test_module_<module>[_train_mode|_eval_mode]_neuron_<dtype>
      @modules(module_db): every module input
        forward     outputs and module state after the forward (e.g. running
                    statistics) match CPU; module moved with .to("neuron")
        backward    grads of the inputs and of every parameter

Random ops: both devices run with the same seed, so values are compared
first; when they differ and the CPU itself gives different results for the
same sample (unseeded nondeterminism, e.g. torch.empty) or for another seed
(a random op), the sample is compared on shape, dtype, device and aliasing
only ("metadata-only").

CPU reference failures: a sample the CPU kernel itself rejects (raises) is
excluded from the figures with the CPU's message; failures of the CPU
reference that do not raise are excluded by entries in
expected_failures.txt.

The per-sample outcome of every check is recorded (see `Record`); run.py runs
this file's tests in a worker process and writes the report.
"""
import copy
import json
import os
import signal
import sys
import time
import traceback
import unittest
import warnings

# common_utils parses sys.argv at import; keep our own arguments away from it.
_ARGV, sys.argv = sys.argv, sys.argv[:1]

import torch  # noqa: E402  (loads OpenNeuron through the torch.backends entry point)
import torch.autograd.forward_ad as fwAD  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.testing._internal.common_device_type import (  # noqa: E402
    OpDTypes,
    PrivateUse1TestBase,
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402
from torch.testing._internal.common_modules import (  # noqa: E402
    TrainEvalMode,
    module_db,
    modules,
)
from torch.testing._internal.common_utils import TestCase  # noqa: E402
from torch.testing._internal.opinfo.core import SampleInput  # noqa: E402

sys.argv = _ARGV

DEVICE_TYPE = torch._C._get_privateuse1_backend_name()  # "neuron"
OP_CHECKS = ("forward", "inplace", "out", "backward", "forward_ad")
MODULE_CHECKS = ("forward", "backward")

# Sample outcome codes (one character per sample and check).
PASS, META, FAIL, ERROR, EXCLUDED, SKIPPED, NA = "p", "m", "f", "e", "x", "s", "-"

SEED = 1234

# Compile mode (run.py --compile): every op runs under
# torch.compile(backend="neuron", fullgraph=True), freshly compiled for each
# sample, and is compared with the CPU (forward and backward). Dynamo's own
# limits (an op it cannot trace whole) are not the compiler's: such samples
# are recorded as not applicable, with Dynamo's reason as a note.
COMPILE = os.environ.get("OPENNEURON_CONFORMANCE_COMPILE") == "1"

# CUDA-dtype mode (run.py --cuda-dtypes): the (op, dtype) pairs CUDA supports
# and the CPU does not (OpInfo's dtypesIfCUDA and backward_dtypesIfCUDA beyond
# the CPU's). The CPU cannot be the reference there: it runs the sample in a
# wider dtype (float64, complex128) and its results are rounded to the neuron
# results' dtypes; values are compared within 16-bit tolerances (a float64
# result rounded once may differ from a float32 one by an ulp or two).
# Forward and backward only: in-place and out= references would need the
# narrow dtype on the CPU.
CUDA_DTYPES = os.environ.get("OPENNEURON_CONFORMANCE_CUDA_DTYPES") == "1"
_CUDA_WIDER = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.complex32: torch.complex128,
               torch.bool: torch.float64, torch.uint8: torch.float64, torch.int8: torch.float64,
               torch.int16: torch.float64, torch.int32: torch.float64, torch.int64: torch.float64}


def cuda_only_dtypes(op):
    return set(op.supported_dtypes("cuda")) - set(op.supported_dtypes("cpu"))


def _widened(sample, narrow):
    """The CPU reference sample of CUDA-dtype mode: tensors of the narrow
    dtype (and its dtype arguments) in the wider one (leaves stay leaves)."""
    wide = _CUDA_WIDER.get(narrow, narrow)  # float32, complex64...: the CPU lacks the op, not the dtype

    def up(x):
        if isinstance(x, torch.dtype):
            return wide if x == narrow else x
        if x.dtype == narrow or (narrow == torch.complex32 and x.dtype == torch.float16):
            target = wide if x.dtype == narrow else torch.float64
            return x.detach().to(target).requires_grad_(x.requires_grad)
        return x
    return sample.transform(up)


def _rounded_like(reference, like):
    """The wide reference's tensors in the dtypes of the neuron results."""
    ref, spec = pytree.tree_flatten(reference)
    got = pytree.tree_leaves(like)
    if len(ref) != len(got):
        return reference
    return pytree.tree_unflatten([r.to(g.dtype) if isinstance(r, torch.Tensor) and isinstance(g, torch.Tensor)
                                  and r.dtype != g.dtype else r for r, g in zip(ref, got)], spec)


def _nansum_as_cuda(x, dim=None, keepdim=False, *, dtype=None):
    return torch.sum(x.masked_fill(x.isnan(), 0), dim=dim, keepdim=keepdim, dtype=dtype)


def _nanmean_as_cuda(x, dim=None, keepdim=False, *, dtype=None):
    count = (~x.isnan()).sum(dim=dim, keepdim=keepdim)
    return _nansum_as_cuda(x, dim, keepdim, dtype=dtype) / count


def _attention_as_cuda(q, k, v, bias, causal, scale, dropout_p):
    """Attention of (batch, seq, heads, dim) tensors: output and logsumexp
    [batch, heads, seq_q]. causal: None, "upper_left" or "lower_right"."""
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if bias is not None:
        scores = scores + bias
    if causal is not None:
        mq, mk = scores.shape[-2:]
        shift = mk - mq if causal == "lower_right" else 0
        scores = scores.masked_fill(torch.arange(mk)[None, :] > torch.arange(mq)[:, None] + shift, float("-inf"))
    lse = scores.logsumexp(-1).detach()  # not differentiable on CUDA
    p = torch.nn.functional.dropout(scores.softmax(-1), dropout_p) if dropout_p > 0 else scores.softmax(-1)
    return (p @ v).transpose(1, 2), lse


def _no_seeds():
    """CUDA's Philox seed and offset outputs: int64 scalars on the CPU (for
    any device), so the device's results have them on the CPU too."""
    seeds = torch.zeros((), dtype=torch.int64), torch.zeros((), dtype=torch.int64)
    for t in seeds:
        t.stays_on_cpu = True
    return seeds


def _efficient_attention_as_cuda(query, key, value, bias, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                 dropout_p, custom_mask_type, compute_log_sumexp=False, *, scale=None, seqlen_k=None):
    """CUDA's memory-efficient kernel: logsumexp rows padded to a multiple of
    32 with +inf; cu_seqlens pack variable-length sequences in batch 0."""
    causal = {0: None, 1: "upper_left", 2: "lower_right"}[custom_mask_type]
    if cu_seqlens_q is None:
        out, lse = _attention_as_cuda(query, key, value, bias, causal, scale, dropout_p)
        mq, mk, lses = query.shape[1], key.shape[1], [lse]
    else:
        bq, bk = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
        outs, lses = [], []
        for s in range(len(bq) - 1):
            o, l = _attention_as_cuda(query[:, bq[s]:bq[s + 1]], key[:, bk[s]:bk[s + 1]], value[:, bk[s]:bk[s + 1]],
                                      None, causal, scale, dropout_p)
            outs.append(o), lses.append(l)
        out = torch.cat(outs, 1)
        out = torch.cat([out, out.new_zeros(1, query.shape[1] - out.shape[1], *out.shape[2:])], 1)
        mq, mk = max_seqlen_q, max_seqlen_k
    out = out.contiguous()  # the kernel's output is a new (batch, seq, heads, dim) tensor
    rows = -(-mq // 32) * 32 if compute_log_sumexp else 0
    lse = torch.full((len(lses) if cu_seqlens_q is not None else query.shape[0], query.shape[2], rows),
                     float("inf"), dtype=torch.float32)
    for s, l in enumerate(lses):
        n = min(l.shape[-1], rows)
        (lse[s:s + 1] if cu_seqlens_q is not None else lse)[..., :n] = l[..., :n]
    return (out, lse, *_no_seeds(), mq, mk)


def _flash_attention_as_cuda(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
                             return_debug_mask, *, scale=None):
    """CUDA's FlashAttention-2 kernel: is_causal is aligned lower-right."""
    out, lse = _attention_as_cuda(query, key, value, None, "lower_right" if is_causal else None, scale, dropout_p)
    out = torch.empty_like(query).copy_(out)  # FlashAttention's output is laid out as the query
    return (out, lse.float(), *_no_seeds(), torch.empty(0, dtype=query.dtype))


def _complex_convolution_as_cuda(conv):
    """PyTorch's complex convolution (complex_convolution in ATen's
    Convolution.cpp, the same on every device, CUDA included): Gauss's trick,
    three real convolutions a, b, c whose 16-bit results are combined in 16
    bits as a - b + i(c - a - b). With complex32, the cancellation there
    loses more than the rounding of the float64 result. Here each real
    convolution is computed in float64 and rounded once to float16 (CUDA's
    accumulate in float32), every sum rounded to float16 as CUDA's are."""
    def run(input, weight, bias=None, *args, **kwargs):
        if not input.is_complex():
            return conv(input, weight, bias, *args, **kwargs)
        h = lambda t: t.to(torch.float16).to(torch.float64)  # noqa: E731
        xr, xi, wr, wi = h(input.real), h(input.imag), h(weight.real), h(weight.imag)
        br, bsum = (h(bias.real), h(h(bias.real) + h(bias.imag))) if bias is not None else (None, None)
        a = h(conv(xr, wr, br, *args, **kwargs))
        b = h(conv(xi, wi, None, *args, **kwargs))
        c = h(conv(h(xr + xi), h(wr + wi), bsum, *args, **kwargs))
        return torch.complex(h(a - b), h(h(c - a) - b))
    return run


def _intermediate_ulps(op, reference):
    """Complex32 convolutions: two float16 ulps of their largest intermediate
    (at most about twice the largest result), which float32 accumulation
    (CUDA's, ours) may round one ulp apart from the float64 reference's."""
    if not op.name.startswith("nn.functional.conv"):
        return 0.0
    finite = [t.detach().abs()[torch.isfinite(t.detach().abs())] for t in tensors_of(reference)
              if t.dtype == torch.complex32]
    biggest = max((float(t.to(torch.float32).max()) for t in finite if t.numel()), default=0.0)
    return 2 * 2 * biggest * 2.0 ** -10


# Ops the CPU lacks for a dtype altogether (complex nansum) or has no kernel
# for (CUDA's own attention kernels), and complex32 convolutions (whose
# 16-bit steps a float64 reference does not have): the reference is CUDA's
# definition, written with ops the CPU has.
_CUDA_DEFINITIONS = {"nansum": _nansum_as_cuda, "nanmean": _nanmean_as_cuda,
                     "torch.ops.aten._efficient_attention_forward": _efficient_attention_as_cuda,
                     "torch.ops.aten._flash_attention_forward": _flash_attention_as_cuda,
                     **{f"nn.functional.{name}": _complex_convolution_as_cuda(getattr(torch.nn.functional, name))
                        for name in ("conv1d", "conv2d", "conv3d",
                                     "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")}}


def reference_op(op):
    return _CUDA_DEFINITIONS.get(op.name, op) if CUDA_DTYPES else op


if CUDA_DTYPES:
    # Instantiate the op tests for CUDA's dtypes on the neuron device. Entries
    # that OpInfo runs on CUDA only to vary CUDA's own libraries
    # (batch_norm.without_cudnn) are, off CUDA, the op itself: they run.
    from torch.testing._internal.common_device_type import onlyCUDA as _only_cuda
    for _op in op_db:
        _op.dtypesIf[DEVICE_TYPE] = _op.supported_dtypes("cuda")
        if _op.variant_test_name == "without_cudnn":
            _op.decorators = tuple(d for d in _op.decorators if d is not _only_cuda)


def _compiled(op):
    def run(*args, **kwargs):
        torch._dynamo.reset()
        return torch.compile(lambda *a, **k: op(*a, **k), backend="neuron", fullgraph=True,
                             dynamic=False)(*args, **kwargs)
    return run


# Compiled kernels compute 16-bit floats in float32 and round once (as
# Inductor does), where eager rounds after every op; and in eager mode too
# the device computes an op's 16-bit values in float32 with its own exp,
# log, tanh..., accurate to float32 but not bitwise SLEEF's, so a result can
# round one 16-bit ulp from the CPU's (as CUDA's do). A 16-bit result that
# differs from the CPU's passes when it is at least about as accurate:
# PyTorch's own accuracy check (torch._dynamo.utils.same, which its
# benchmark suites use) against the CPU computing the sample in float64.
_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _in_float64(sample, widened=_LOW_PRECISION):
    """The sample with its float tensors and dtype arguments of `widened`
    in float64 (leaves stay leaves)."""
    def up(x):
        if isinstance(x, torch.dtype):
            return torch.float64 if x in widened else x
        if x.dtype in widened:
            return x.detach().double().requires_grad_(x.requires_grad)
        return x
    return sample.transform(up)


def _as_accurate(n_values, c_values, r64_values, tol=1e-3):
    """Whether the neuron values are as accurate as the CPU's, both measured
    against the float64 reference (PyTorch's check: equal within `tol`, else
    an RMS error vs float64 within a few times the CPU's)."""
    from torch._dynamo.utils import same
    cpu = [v.detach().cpu() if isinstance(v, torch.Tensor) else v for v in n_values]
    ref = [v.detach() if isinstance(v, torch.Tensor) else v for v in c_values]
    r64 = [v.detach() if isinstance(v, torch.Tensor) else v for v in r64_values]
    if len(cpu) != len(ref) or len(ref) != len(r64):
        return False
    try:
        return bool(same(ref, cpu, fp64_ref=r64, tol=tol, equal_nan=True, log_error=lambda *a, **k: None))
    except Exception:  # noqa: BLE001  (a structure same() does not compare)
        return False


def _dynamo_limit(exc):
    """Dynamo could not trace the op (not a compiler failure, which raises
    BackendCompilerFailed): its reason."""
    from torch._dynamo import exc as dynamo_exc
    if isinstance(exc, (dynamo_exc.Unsupported, dynamo_exc.UserError)):
        return _one_line(str(exc).split("\n")[0], 160)
    return None


class Config:
    """Per-run settings, set by the worker (run.py) before tests run."""

    max_samples = None       # samples per op x dtype (None: all)
    test_budget_s = 120.0    # soft budget per test: later samples are skipped
    sample_timeout_s = 60.0  # one sample longer than this is interrupted
    unbounded = set()        # item names that run all samples (CI: listed entries)
    crashes = {}             # item index -> {check: {sample: message}} (from run.py)
    undefined = []           # [name, dtype, check, reason] patterns: values not compared
    progress_fd = None       # file the worker marks (item, sample, check) in
    index = None             # index of the running item
    item = None              # "<name> <dtype>" of the running item


CONFIG = Config()

# CONFORMANCE_SIMULATE_CRASH="<name> <dtype>:<sample>:<check>" makes the worker
# die with SIGSEGV there (to test the crash recovery of run.py).
_SIMULATED_CRASH = tuple(os.environ["CONFORMANCE_SIMULATE_CRASH"].split(":")) \
    if os.environ.get("CONFORMANCE_SIMULATE_CRASH") else None


class SampleTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise SampleTimeout(f"sample took longer than {CONFIG.sample_timeout_s:.0f} s")


# --------------------------------------------------------------------------
# Per-test record
# --------------------------------------------------------------------------

class Record:
    """What one test (op x dtype, or module x dtype x mode) found."""

    def __init__(self, checks):
        self.checks = list(checks)
        self.codes = {c: [] for c in self.checks}   # one code per sample
        self.messages = {c: {} for c in self.checks}  # code -> first message
        self.exclusions = {}   # reason -> count (CPU reference raised)
        self.notes = []
        self.truncated = None  # why later samples were not run
        self.samples = 0
        self.fatal = None      # an error before/around the samples
        self.crashes = CONFIG.crashes.get(str(CONFIG.index), {})
        self.tag = ""          # the running sample, for crash reports
        self.fallbacks = set()  # ops that ran on the CPU with copies in forward checks

    def begin(self, i, check):
        """Marks (sample, check) as running, so that run.py can tell what
        crashed the worker; False if it must not run again: it crashed the
        process before (recorded as an error), or the check crashed it on two
        samples already (its later samples are recorded as errors too)."""
        crashed = self.crashes.get(check, {})
        if str(i) in crashed:
            self._crashed(i, check, f"sample {i}: {crashed[str(i)]}")
            return False
        if len(crashed) >= 2 and i > max(int(k) for k in crashed):
            first = min(int(k) for k in crashed)
            self._crashed(i, check, f"sample {i}: not run: this check crashed the process on "
                                    f"samples {sorted(int(k) for k in crashed)} (first: {crashed[str(first)]})")
            return False
        if CONFIG.progress_fd is not None:
            mark = f"{CONFIG.index} {i} {check} {self.tag}"[:500]
            os.pwrite(CONFIG.progress_fd, mark.ljust(512).encode(errors="replace"), 0)
        if _SIMULATED_CRASH and _SIMULATED_CRASH == (CONFIG.item, str(i), check):
            os.kill(os.getpid(), signal.SIGSEGV)   # testing run.py's crash recovery
        return True

    def _crashed(self, i, check, message):
        if check == "generate":
            self.fatal = f"sample generation crashed the process: {message}"
        elif check == "reference":
            reason = "CPU reference crashed the process"
            self.exclusions[reason] = self.exclusions.get(reason, 0) + 1
            for c in self.checks:
                self.add(i, c, EXCLUDED, f"{message} (CPU reference)")
        elif check in ("copy", "forward"):
            for c in (self.checks if check == "copy" else ("forward", "backward")):
                if c in self.checks:
                    self.add(i, c, ERROR, message)
        else:
            self.add(i, check, ERROR, message)

    def note(self, text):
        if text not in self.notes:
            self.notes.append(text)

    def done(self, i, check):
        """True if (sample, check) already has its outcome."""
        return check not in self.codes or len(self.codes[check]) > i

    def add(self, index, check, code, message=None):
        codes = self.codes[check]
        while len(codes) < index:
            codes.append(NA)
        codes.append(code)
        if message is not None and code not in self.messages[check]:
            self.messages[check][code] = _one_line(message)

    def to_json(self):
        return {
            "checks": {c: "".join(self.codes[c]).ljust(self.samples, NA) for c in self.checks},
            "messages": self.messages,
            "exclusions": self.exclusions,
            "notes": self.notes,
            "truncated": self.truncated,
            "samples": self.samples,
            "fatal": self.fatal,
            "fallbacks": sorted(self.fallbacks),
        }


CURRENT = {"record": None}


def _one_line(text, limit=400):
    text = " | ".join(line.strip() for line in str(text).strip().splitlines() if line.strip())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _exc_text(exc):
    return _one_line(f"{type(exc).__name__}: {exc}")


def _describe(sample, limit=200):
    try:
        text = sample.summary() if isinstance(sample, SampleInput) else repr(sample)
    except Exception:  # noqa: BLE001
        text = "<sample>"
    text = text.replace(f'device="{DEVICE_TYPE}:0", ', "")
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------------
# Copying samples between devices, preserving memory layout and aliasing
# --------------------------------------------------------------------------

def _is_device_str(x):
    return isinstance(x, str) and (x == DEVICE_TYPE or x.startswith(DEVICE_TYPE + ":"))


def copy_tensor(t, device, memo, keep_grad, keep_cpu=None):
    """A copy of `t` on `device` with the same storage layout: same size,
    strides and storage offset (overlapping and non-contiguous views stay
    so), conj/neg bits, and tensors sharing a storage still share one.
    Tensors whose id is in `keep_cpu` (CPU tensors of the original neuron
    sample, e.g. tensor_split's indices) are copied to the CPU instead."""
    if ("obj", id(t)) in memo:   # the same tensor object twice: one copy
        return memo[("obj", id(t))]
    out = _copy_tensor(t, "cpu" if keep_cpu and id(t) in keep_cpu else device, memo, keep_grad)
    memo[("obj", id(t))] = out
    return out


def _own_grad(t):
    """For a leaf view of a base that requires grad (made under no_grad):
    whether autograd gives it a gradient of its own -- it does when
    requires_grad_() was called on the view, not otherwise; nothing else
    tells the two apart, so ask autograd."""
    if t._base is None or not t._base.requires_grad:
        return True
    try:
        (g,) = torch.autograd.grad([t * 1], [t], [torch.ones_like(t)], allow_unused=True)
    except Exception:  # noqa: BLE001
        return True
    return g is not None


def _plain(t):
    return (type(t) is torch.Tensor or isinstance(t, torch.nn.Parameter)) and \
        t.layout == torch.strided and not t.is_quantized and not t.is_nested


def _copy_tensor(t, device, memo, keep_grad):
    base = t._base
    real_of_complex = (base is not None and base.is_complex() and not t.is_complex()
                       and t.dtype == base.real.dtype and not base.is_conj())
    if (_plain(t) and base is not None and _plain(base) and (base.dtype == t.dtype or real_of_complex)
            and _storage_ptr(t) is not None and _storage_ptr(t) == _storage_ptr(base)):
        # (a "view" whose data is not in its base's storage -- the CPU-fallback
        # path returns copies for view ops -- is copied as a plain tensor)
        # A view stays a view of (the copy of) its base: autograd treats
        # views differently (e.g. a leaf view's grad), so the copy must too.
        b = copy_tensor(base, device, memo, keep_grad)
        # a leaf view (made under no_grad) stays a leaf; a view with a
        # grad_fn is a differentiable view of the base's copy
        with torch.set_grad_enabled(not (b.requires_grad and t.grad_fn is None)):
            # replay the view ops themselves (autograd depends on them)
            try:
                out = t._view_func(b)
            except Exception:  # noqa: BLE001
                out = None
            if out is not None and (out.shape != t.shape or out.stride() != t.stride()
                                    or out.storage_offset() != t.storage_offset()
                                    or out.dtype != t.dtype):
                out = None
            if out is None:
                if real_of_complex:        # e.g. x.real, view_as_real(x)[..., 0]
                    b = torch.view_as_real(b.resolve_conj() if b.is_conj() else b)
                out = b.as_strided(t.size(), t.stride(), t.storage_offset())
            if out.is_conj() != t.is_conj():
                out = out.conj()
            if out.is_neg() != t.is_neg():
                out = out._neg_view()
        if keep_grad and t.requires_grad and t.grad_fn is None and _own_grad(t):
            out.requires_grad_()   # (even if it already requires grad: a leaf view
        return out                 #  made so gets its own grad, as in the sample)
    if not _plain(t):
        out = t.detach().to(device)
    else:
        # The storage itself, not t.detach()/t.conj(): no view op runs on the
        # source device (on the CPU-fallback path view ops return copies).
        st = t.untyped_storage()
        key = (str(st.device), st.data_ptr()) if st.nbytes() > 0 else None
        if key is not None and key in memo:
            new_st = memo[key]
        else:
            new_st = torch.UntypedStorage(st.nbytes(), device=device)
            if st.nbytes() > 0:
                new_st.copy_(st)
            if key is not None:
                memo[key] = new_st
        out = torch.empty(0, dtype=t.dtype, device=device).set_(
            new_st, t.storage_offset(), t.size(), t.stride())
        if t.is_neg():
            out = out._neg_view()
        if t.is_conj():
            out = out.conj()
    if keep_grad and t.requires_grad:
        out.requires_grad_()
    return out


def copy_tree(tree, device, memo=None, keep_grad=True, map_devices=True, keep_cpu=None):
    """Copies every tensor of `tree` to `device` (copy_tensor). Copying to
    the CPU with map_devices also turns neuron device arguments (device=
    "neuron:0") and modules into CPU ones, making the CPU reference of a
    neuron sample."""
    memo = {} if memo is None else memo
    to_cpu = torch.device(device).type == "cpu" and map_devices

    def f(x):
        if isinstance(x, torch.Tensor):
            return copy_tensor(x, device, memo, keep_grad, keep_cpu)
        if to_cpu and isinstance(x, torch.nn.Module):
            return copy.deepcopy(x).to("cpu")
        if to_cpu and isinstance(x, torch.device) and x.type == DEVICE_TYPE:
            return torch.device("cpu")
        if to_cpu and _is_device_str(x):
            return "cpu"
        return x

    return pytree.tree_map(f, tree)


def copy_sample(sample, device, keep_grad=True, map_devices=True, keep_cpu=None):
    memo = {}
    inp, args, kwargs = copy_tree((sample.input, sample.args, sample.kwargs), device, memo,
                                  keep_grad, map_devices, keep_cpu)
    return SampleInput(
        inp, args=tuple(args), kwargs=dict(kwargs),
        output_process_fn_grad=sample.output_process_fn_grad,
        broadcasts_input=sample.broadcasts_input, name=sample.name)


def _cut_from_its_graph(t):
    """A view of a leaf made under no_grad (some OpInfo samples, e.g. the
    CUDA attention kernels': the reason OpInfo expects 'None mismatch' in
    their composite-compliance backward): it requires grad, yet autograd
    gives it none."""
    return isinstance(t, torch.Tensor) and t.requires_grad and t._is_view() and t.grad_fn is None


def sample_leaves(sample):
    return pytree.tree_leaves((sample.input, sample.args, sample.kwargs))


def tensors_of(tree):
    return [x for x in pytree.tree_leaves(tree) if isinstance(x, torch.Tensor)]


def _detached(tree):
    return pytree.tree_map(lambda x: x.detach() if isinstance(x, torch.Tensor) else x, tree)


# --------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------

def _storage_ptr(t):
    try:
        st = t.untyped_storage()
    except Exception:  # noqa: BLE001  (sparse, nested, ...)
        return None
    return st.data_ptr() if st.nbytes() > 0 else None


def alias_signature(inputs, outputs):
    """For every tensor output: which inputs it shares storage with, and
    which inputs it *is*."""
    in_tensors = [(j, x) for j, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
    in_ptrs = [(j, _storage_ptr(x)) for j, x in in_tensors]
    sig = []
    for o in outputs:
        if not isinstance(o, torch.Tensor):
            sig.append(None)
            continue
        p = _storage_ptr(o)
        shares = tuple(j for j, q in in_ptrs if p is not None and q == p)
        ident = tuple(j for j, x in in_tensors if x is o)
        sig.append((shares, ident))
    return sig


def _fmt_alias(sig):
    parts = []
    for k, s in enumerate(sig):
        if s is None:
            continue
        shares, ident = s
        if ident:
            parts.append(f"out{k} is input{list(ident)}")
        elif shares:
            parts.append(f"out{k} shares storage with input{list(shares)}")
        else:
            parts.append(f"out{k} owns its storage")
    return ", ".join(parts) or "no tensor outputs"


def check_aliasing(n_inputs, n_outputs, c_inputs, c_outputs):
    ns = alias_signature(n_inputs, n_outputs)
    cs = alias_signature(c_inputs, c_outputs)
    if ns != cs:
        raise AssertionError(f"aliasing differs: neuron: {_fmt_alias(ns)}; cpu: {_fmt_alias(cs)}")


def names_cpu(tree):
    """True if a sample asks for the CPU explicitly (device="cpu")."""
    for x in pytree.tree_leaves(tree if not isinstance(tree, SampleInput)
                                else (tree.input, tree.args, tree.kwargs)):
        if (isinstance(x, torch.device) and x.type == "cpu") or (isinstance(x, str) and x == "cpu"):
            return True
    return False


def check_devices(n_out, c_out, wants_cpu=False):
    """Neuron results are on neuron, except where the sample asked for the
    CPU explicitly."""
    n_t, c_t = tensors_of(n_out), tensors_of(c_out)
    for k, (n, c) in enumerate(zip(n_t, c_t)):
        stays = wants_cpu or getattr(c, "stays_on_cpu", False)
        want = DEVICE_TYPE if c.device.type == "cpu" and not stays else c.device.type
        if n.device.type != want:
            raise AssertionError(f"output tensor {k} is on {n.device}, expected {want}")


def check_strides(n_out, c_out):
    for k, (n, c) in enumerate(zip(tensors_of(n_out), tensors_of(c_out))):
        if n.layout != torch.strided or c.layout != torch.strided or n.shape != c.shape or c.numel() == 0:
            continue
        ns = [s for s, d in zip(n.stride(), n.shape) if d > 1]
        cs = [s for s, d in zip(c.stride(), c.shape) if d > 1]
        if ns != cs:
            raise AssertionError(
                f"output tensor {k}: strides {tuple(n.stride())} differ from CPU's {tuple(c.stride())} "
                f"(shape {tuple(c.shape)})")


def check_metadata(n_out, c_out, wants_cpu=False):
    if CUDA_DTYPES:
        c_out = _rounded_like(c_out, n_out)
    n_leaves, n_spec = pytree.tree_flatten(n_out)
    c_leaves, c_spec = pytree.tree_flatten(c_out)
    if n_spec != c_spec:
        raise AssertionError(f"output structure differs: {n_spec} vs {c_spec}")
    for k, (n, c) in enumerate(zip(n_leaves, c_leaves)):
        if isinstance(c, torch.Tensor) != isinstance(n, torch.Tensor):
            raise AssertionError(f"output {k}: {type(n).__name__} vs CPU's {type(c).__name__}")
        if isinstance(c, torch.Tensor):
            if n.shape != c.shape or n.dtype != c.dtype or n.layout != c.layout:
                raise AssertionError(
                    f"output {k}: {tuple(n.shape)} {n.dtype} {n.layout} vs CPU's "
                    f"{tuple(c.shape)} {c.dtype} {c.layout}")
    check_devices(n_out, c_out, wants_cpu)


def _scramble_heap(out):
    """Allocates and frees buffers of the output's sizes filled with a
    pattern, so that a kernel that leaves its output uninitialized gives a
    different result when it runs again (malloc reuses those blocks)."""
    for t in tensors_of(out):
        if t.layout == torch.strided and t.numel() > 0:
            try:
                buf = torch.empty(t.untyped_storage().nbytes(), dtype=torch.uint8)
                buf.fill_(0x5A)
                del buf
            except Exception:  # noqa: BLE001
                pass


_NONDET_WORDS = ("non-deterministic", "nondeterministic")


def opinfo_nondeterminism(op):
    """The OpInfo's own statement that the op's output is not a fixed value
    (a skip of TestCommon.test_compare_cpu saying so), or None."""
    from torch.testing._internal.opinfo.core import DecorateInfo
    for d in op.decorators:
        if isinstance(d, DecorateInfo) and d.test_name == "test_compare_cpu" and d.device_type is None:
            for dec in d.decorators:
                for cell in getattr(dec, "__closure__", None) or ():
                    v = cell.cell_contents
                    if isinstance(v, str) and any(w in v for w in _NONDET_WORDS):
                        return v
    return None


def _ensure_same_exception(n_exc, c_exc, what):
    """Both devices raised; the exception types should agree."""
    if isinstance(n_exc, type(c_exc)) or isinstance(c_exc, type(n_exc)):
        return
    # NotImplementedError / RuntimeError / TypeError / ValueError of the
    # dispatcher are all 'invalid input' errors; accept any mix of them.
    generic = (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError)
    if isinstance(n_exc, generic) and isinstance(c_exc, generic):
        return
    raise AssertionError(
        f"{what}: neuron raised {_exc_text(n_exc)}, CPU raised {_exc_text(c_exc)}")


# --------------------------------------------------------------------------
# The checks of one OpInfo sample
# --------------------------------------------------------------------------

class _DrawsRandomNumbers(TorchDispatchMode):
    """Notes whether a call runs an op that draws random numbers."""

    def __init__(self):
        super().__init__()
        self.draws = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.draws |= torch.Tag.nondeterministic_seeded in func.tags
        return func(*args, **(kwargs or {}))


def _device_draws_its_own_numbers():
    """Drivers whose memory the host cannot address draw random numbers on
    the device (Philox, as CUDA), not from the CPU's generator: a random
    op's values differ from the CPU's by design there."""
    return not torch.neuron.get_device_properties(0).host_addressable


def _call(fn, sample, seed, **extra):
    torch.manual_seed(seed)
    return fn(sample.input, *sample.args, **sample.kwargs, **extra)


def _try(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs), None
    except SampleTimeout:
        raise
    except Exception as e:  # noqa: BLE001
        return None, e


def undefined_checks(name, dtype):
    """{check: reason} of the 'undefined' entries of expected_failures.txt
    for this item (values of those checks are not compared)."""
    import fnmatch
    out = {}
    for n, d, c, reason in CONFIG.undefined:
        dt = dtype_name(dtype) if isinstance(dtype, torch.dtype) else dtype
        if fnmatch.fnmatchcase(name, n) and fnmatch.fnmatchcase(dt, d):
            for check in OP_CHECKS:
                if fnmatch.fnmatchcase(check, c):
                    out.setdefault(check, reason)
    return out


class OpSampleRunner:
    def __init__(self, tc, device, dtype, op, record, grad_ok, fwad_ok):
        self.tc, self.device, self.dtype, self.op = tc, device, dtype, op
        self.rec = record
        self.grad_ok, self.fwad_ok = grad_ok, fwad_ok
        self.hint = opinfo_nondeterminism(op)
        self.undefined = undefined_checks(op_item_name(op), dtype)

    def assert_equal(self, n, c, **kw):
        if CUDA_DTYPES:
            c = _rounded_like(c, n)
            kw.setdefault("atol", max(1e-2, _intermediate_ulps(self.op, c)))
            kw.setdefault("rtol", 1e-2)
        self.tc.assertEqual(_detached(n), _detached(c), exact_device=False, **kw)

    def compare(self, n, c, meta_ok, wants_cpu=False, msg=None):
        """Values (with the op's tolerances), dtypes, shapes and devices;
        where the result is not a fixed value (meta_ok), a value mismatch
        falls back to shapes, dtypes and devices. Returns PASS or META;
        raises AssertionError."""
        try:
            self.assert_equal(n, c, msg=msg)
            check_devices(n, c, wants_cpu)
            return PASS
        except AssertionError:
            if not meta_ok:
                raise
            check_metadata(n, c, wants_cpu)
            return META

    def float64_run(self, c_sample, seed, float32=False):
        """16-bit floats (and float32 where `float32`): the sample in
        float64 and the op's outputs on it (CPU), or None."""
        low = self.dtype in _LOW_PRECISION
        if not low and not (float32 and self.dtype == torch.float32):
            return None
        s64 = _in_float64(c_sample, _LOW_PRECISION if low else (torch.float32,))
        out, exc = _try(_call, self.op, s64, seed)
        return None if exc is not None else (s64, out)

    def as_accurate_as_cpu(self, n_out, c_out, c_sample, seed):
        run = self.float64_run(c_sample, seed)
        return run is not None and _as_accurate(pytree.tree_leaves(n_out), pytree.tree_leaves(c_out),
                                                pytree.tree_leaves(run[1]))

    def float64_gradients(self, c_sample, c_o, c_g, seed):
        """The gradients `check_backward` compares, computed in float64, or
        None. float32 gradients too: a long sum (a 3-d transposed
        convolution's input gradient) in another order than the CPU's can
        round past float32's default tolerance while as accurate."""
        run = self.float64_run(c_sample, seed, float32=True)
        if run is None:
            return None
        s64, out = run
        try:
            o64 = pytree.tree_leaves(s64.output_process_fn_grad(out))
        except Exception:  # noqa: BLE001
            return None
        outs = [o for o, c in zip(o64, c_o) if isinstance(c, torch.Tensor) and c.requires_grad
                and (c.is_floating_point() or c.is_complex())]
        ins = [t for t in sample_leaves(s64) if isinstance(t, torch.Tensor) and t.requires_grad]
        grads, exc = _try(torch.autograd.grad, outs, ins, [g.to(o.dtype) for g, o in zip(c_g, outs)],
                          allow_unused=True)
        return None if exc is not None else grads

    def cpu_sample(self, pristine):
        """A fresh CPU copy of the sample as the reference runs it."""
        again = copy_sample(pristine, "cpu", keep_grad=False)
        return _widened(again, self.dtype) if CUDA_DTYPES else again

    def cpu_nondeterminism(self, pristine, c_out, seed):
        """Why the CPU result of this sample is not a fixed value, or None."""
        if self.hint:
            return f"OpInfo: {self.hint}"
        if "forward" in self.undefined:
            return f"expected_failures.txt: {self.undefined['forward']}"
        again = self.cpu_sample(pristine)
        _scramble_heap(c_out)
        with torch.no_grad():
            r, e = _try(_call, reference_op(self.op), again, seed)
        if e is None:
            try:
                self.assert_equal(r, c_out)
            except AssertionError:
                return "CPU result not reproducible with the same seed (output undefined)"
        again = self.cpu_sample(pristine)
        with torch.no_grad():
            r, e = _try(_call, reference_op(self.op), again, seed + 1)
        if e is None:
            try:
                self.assert_equal(r, c_out)
            except AssertionError:
                return "CPU result depends on the seed (random op)"
        if _device_draws_its_own_numbers():
            # OpInfo's random ops seed themselves (wrapper_set_seed), so the
            # CPU's result is fixed; the device's own draws differ from it.
            again = self.cpu_sample(pristine)
            mode = _DrawsRandomNumbers()
            with torch.no_grad(), mode:
                _try(_call, reference_op(self.op), again, seed)
            if mode.draws:
                return "random op: the device draws its own numbers (Philox, as CUDA), not the CPU's"
        return None

    def run(self, i, sample, tag):
        rec, op = self.rec, self.op
        seed = SEED + i
        if not involves_device(sample):
            # e.g. torch.arange(5): no neuron tensor, no device argument; the
            # "neuron" run would be a CPU run. Not counted.
            for check in rec.checks:
                rec.add(i, check, NA)
            rec.note("samples without a neuron tensor or device argument (not counted)")
            return
        if not rec.begin(i, "copy"):
            return
        # pristine: the sample's tensors on the CPU, its other arguments as
        # they are (device="neuron:0" stays); every later copy starts from it.
        pristine = copy_sample(sample, "cpu", keep_grad=True, map_devices=False)
        self.keep_cpu = {id(p) for p, o in zip(sample_leaves(pristine), sample_leaves(sample))
                         if isinstance(o, torch.Tensor) and o.device.type == "cpu"}
        if any(_cut_from_its_graph(t) for t in sample_leaves(sample)):
            # The neuron run gets leaves that gradients reach, as the CPU's copy has.
            sample = sample.transform(lambda t: t.detach().requires_grad_(t.requires_grad)
                                      if isinstance(t, torch.Tensor) else t)
        cs = copy_sample(pristine, "cpu", keep_grad=True)
        if CUDA_DTYPES:
            cs = _widened(cs, self.dtype)
        wants_cpu = names_cpu(sample)

        if not rec.begin(i, "reference"):
            return
        c_out, c_exc = _try(_call, reference_op(op), cs, seed)
        if c_exc is not None:
            reason = f"CPU reference raised {_exc_text(c_exc)}"
            rec.exclusions[reason] = rec.exclusions.get(reason, 0) + 1
            for check in rec.checks:
                rec.add(i, check, EXCLUDED, f"{tag}: {reason}")
            return

        # forward ------------------------------------------------------------
        meta_ok = bool(self.hint)
        n_out, n_exc = None, None
        if rec.begin(i, "forward"):
            torch.neuron.reset_fallback_report()
            n_out, n_exc = _try(_call, _compiled(op) if COMPILE else op, sample, seed)
            rec.fallbacks.update(r["op"] for r in torch.neuron.fallback_report())
            limit = _dynamo_limit(n_exc) if COMPILE and n_exc is not None else None
            if limit is not None:
                rec.note(f"Dynamo cannot trace it whole: {limit}")
                for check in rec.checks:
                    rec.add(i, check, NA)
                return
            if n_exc is not None:
                rec.add(i, "forward", ERROR, f"{tag}: {_exc_text(n_exc)}")
            else:
                try:
                    check_aliasing(sample_leaves(sample), pytree.tree_leaves(n_out),
                                   sample_leaves(cs), pytree.tree_leaves(c_out))
                    try:
                        self.assert_equal(n_out, c_out)
                        check_devices(n_out, c_out, wants_cpu)
                        check_strides(n_out, c_out)
                        rec.add(i, "forward", PASS)
                    except AssertionError as mismatch:
                        if self.as_accurate_as_cpu(n_out, c_out, copy_sample(pristine, "cpu", keep_grad=True), seed):
                            check_devices(n_out, c_out, wants_cpu)
                            check_strides(n_out, c_out)
                            rec.add(i, "forward", PASS)
                            rec.note("16-bit results as accurate as the CPU's against float64 (not equal)")
                        else:
                            why = self.cpu_nondeterminism(pristine, c_out, seed)
                            if why is None:
                                raise mismatch
                            meta_ok = True
                            check_metadata(n_out, c_out, wants_cpu)
                            rec.add(i, "forward", META, f"{tag}: {why}")
                except AssertionError as e:
                    rec.add(i, "forward", FAIL, f"{tag}: {e}")

        def ok(check):
            return meta_ok or check in self.undefined

        if "inplace" in rec.checks and rec.begin(i, "inplace"):
            self.check_inplace(i, pristine, tag, seed, ok("inplace"))
        if "out" in rec.checks and rec.begin(i, "out"):
            if not all(isinstance(x, torch.Tensor) for x in
                       (c_out if isinstance(c_out, (tuple, list)) else [c_out])):
                rec.add(i, "out", NA)
            else:
                self.check_out(i, pristine, c_out, tag, seed, ok("out"), wants_cpu)
        if "backward" in rec.checks and not rec.done(i, "backward") and rec.begin(i, "backward"):
            if n_exc is not None:
                rec.add(i, "backward", ERROR, f"{tag}: forward raised {_exc_text(n_exc)}")
            else:
                self.check_backward(i, sample, cs, n_out, c_out, tag, ok("backward"))
        if "forward_ad" in rec.checks and rec.begin(i, "forward_ad"):
            self.check_forward_ad(i, pristine, tag, seed, ok("forward_ad"))

    # inplace ----------------------------------------------------------------
    def check_inplace(self, i, pristine, tag, seed, meta_ok):
        rec, fn = self.rec, self.op.inplace_variant
        ci = copy_sample(pristine, "cpu", keep_grad=False)
        ni = copy_sample(pristine, self.device, keep_grad=False, keep_cpu=self.keep_cpu)
        with torch.no_grad():
            c_res, c_exc = _try(_call, fn, ci, seed)
            n_res, n_exc = _try(_call, fn, ni, seed)
        try:
            if c_exc is not None and n_exc is not None:
                _ensure_same_exception(n_exc, c_exc, "in-place")
                rec.add(i, "inplace", PASS)
                return
            if c_exc is not None:
                raise AssertionError(f"CPU raised {_exc_text(c_exc)} but neuron did not")
            if n_exc is not None:
                rec.add(i, "inplace", ERROR, f"{tag}: {_exc_text(n_exc)}")
                return
            if (n_res is ni.input) != (c_res is ci.input):
                raise AssertionError(
                    f"in-place variant returned {'its input' if n_res is ni.input else 'a new object'} "
                    f"on neuron, {'its input' if c_res is ci.input else 'a new object'} on CPU")
            try:
                code = self.compare(ni.input, ci.input, meta_ok, msg="mutated input differs")
                code2 = self.compare(n_res, c_res, meta_ok)
            except AssertionError:
                if not self.as_accurate_as_cpu([ni.input], [ci.input], copy_sample(pristine, "cpu", keep_grad=True),
                                               seed):
                    raise
                code = code2 = PASS
                rec.note("16-bit results as accurate as the CPU's against float64 (not equal)")
            rec.add(i, "inplace", META if META in (code, code2) else PASS)
        except AssertionError as e:
            rec.add(i, "inplace", FAIL, f"{tag}: {e}")

    # out= -------------------------------------------------------------------
    def check_out(self, i, pristine, c_ref, tag, seed, meta_ok, wants_cpu):
        rec = self.rec
        multi = isinstance(c_ref, (tuple, list))
        refs = list(c_ref) if multi else [c_ref]
        codes = []
        for variant in ("preallocated", "empty"):
            def make(device):
                # preallocated buffers start with the same contents on both
                # devices, so that a kernel leaving part of out= unwritten
                # (a CPU bug seen in fft.ihfftn) is compared fairly
                bufs = [_filled(r.shape, r.dtype, device) if variant == "preallocated"
                        else torch.empty((0,), dtype=r.dtype, device=device) for r in refs]
                return tuple(bufs) if multi else bufs[0]
            ci = copy_sample(pristine, "cpu", keep_grad=False)
            ni = copy_sample(pristine, self.device, keep_grad=False, keep_cpu=self.keep_cpu)
            c_buf = make("cpu")
            n_buf = make("cpu" if wants_cpu else self.device)
            with torch.no_grad():
                c_res, c_exc = _try(_call, self.op, ci, seed, out=c_buf)
                n_res, n_exc = _try(_call, self.op, ni, seed, out=n_buf)
            try:
                if c_exc is not None and n_exc is not None:
                    _ensure_same_exception(n_exc, c_exc, f"out= ({variant})")
                    codes.append(PASS)
                    continue
                if c_exc is not None:
                    raise AssertionError(f"out= ({variant}): CPU raised {_exc_text(c_exc)} but neuron did not")
                if n_exc is not None:
                    rec.add(i, "out", ERROR, f"{tag}: out= ({variant}): {_exc_text(n_exc)}")
                    return
                n_list = list(n_res) if isinstance(n_res, (tuple, list)) else [n_res]
                c_list = list(c_res) if isinstance(c_res, (tuple, list)) else [c_res]
                n_bufs = list(n_buf) if multi else [n_buf]
                c_bufs = list(c_buf) if multi else [c_buf]
                n_ident = [a is b for a, b in zip(n_list, n_bufs)]
                c_ident = [a is b for a, b in zip(c_list, c_bufs)]
                if n_ident != c_ident:
                    raise AssertionError(
                        f"out= ({variant}): returned the out tensors {n_ident} on neuron, {c_ident} on CPU")
                try:
                    codes.append(self.compare(tuple(n_bufs), tuple(c_bufs), meta_ok, wants_cpu,
                                              msg=f"out= ({variant})"))
                    codes.append(self.compare(n_res, c_res, meta_ok, wants_cpu,
                                              msg=f"out= ({variant}) result"))
                except AssertionError as mismatch:
                    if self.as_accurate_as_cpu(n_bufs, c_bufs, copy_sample(pristine, "cpu", keep_grad=True), seed):
                        check_devices(tuple(n_bufs), tuple(c_bufs), wants_cpu)
                        codes.append(PASS)
                        rec.note("16-bit results as accurate as the CPU's against float64 (not equal)")
                        continue
                    # Is the CPU's own out= result that of its functional form?
                    try:
                        self.assert_equal(tuple(c_bufs), tuple(refs))
                    except AssertionError as cpu_self:
                        reason = ("CPU reference: out= result differs from the CPU's functional result "
                                  f"({variant} out)")
                        rec.exclusions[reason] = rec.exclusions.get(reason, 0) + 1
                        rec.add(i, "out", EXCLUDED, f"{tag}: {reason}: {_one_line(cpu_self, 200)}")
                        return
                    raise mismatch
            except AssertionError as e:
                rec.add(i, "out", FAIL, f"{tag}: {e}")
                return
        rec.add(i, "out", META if META in codes else PASS)

    # backward ---------------------------------------------------------------
    def check_backward(self, i, n_sample, c_sample, n_out, c_out, tag, meta_ok):
        rec = self.rec
        try:
            n_o = pytree.tree_leaves(n_sample.output_process_fn_grad(n_out))
            c_o = pytree.tree_leaves(c_sample.output_process_fn_grad(c_out))
        except SampleTimeout:
            raise
        except Exception as e:  # noqa: BLE001
            rec.add(i, "backward", ERROR, f"{tag}: output_process_fn_grad raised {_exc_text(e)}")
            return
        pairs = [(n, c) for n, c in zip(n_o, c_o)
                 if isinstance(c, torch.Tensor) and isinstance(n, torch.Tensor) and c.requires_grad
                 and (c.is_floating_point() or c.is_complex())]
        c_in = [t for t in sample_leaves(c_sample) if isinstance(t, torch.Tensor) and t.requires_grad]
        n_in = [t for t in sample_leaves(n_sample) if isinstance(t, torch.Tensor) and t.requires_grad]
        if not pairs or not c_in:
            rec.add(i, "backward", NA)
            return
        if len(n_in) != len(c_in) or any(not n.requires_grad for n, _ in pairs):
            rec.add(i, "backward", FAIL,
                    f"{tag}: requires_grad differs (neuron outputs requiring grad: "
                    f"{[n.requires_grad for n, _ in pairs]})")
            return
        g = torch.Generator().manual_seed(SEED + i)
        c_g = [torch.randn(c.shape, dtype=c.dtype, generator=g) for _, c in pairs]
        n_g = [x.to(n.device, n.dtype) for x, (n, _) in zip(c_g, pairs)]
        c_grads, c_exc = _try(torch.autograd.grad, [c for _, c in pairs], c_in, c_g, allow_unused=True)
        if c_exc is not None:
            reason = f"CPU reference backward raised {_exc_text(c_exc)}"
            rec.exclusions[reason] = rec.exclusions.get(reason, 0) + 1
            rec.add(i, "backward", EXCLUDED, f"{tag}: {reason}")
            return
        n_grads, n_exc = _try(torch.autograd.grad, [n for n, _ in pairs], n_in, n_g, allow_unused=True)
        if n_exc is not None:
            rec.add(i, "backward", ERROR, f"{tag}: {_exc_text(n_exc)}")
            return
        try:
            rec.add(i, "backward", self.compare(n_grads, c_grads, meta_ok, msg="gradients differ"))
        except AssertionError as e:
            g64 = self.float64_gradients(c_sample, c_o, c_g, SEED + i)
            wide = self.dtype == torch.float32  # 1e-5: float32's default atol
            if g64 is not None and _as_accurate(list(n_grads), list(c_grads), list(g64), tol=1e-5 if wide else 1e-3):
                rec.add(i, "backward", PASS)
                rec.note(f"{'float32' if wide else '16-bit'} gradients as accurate as the CPU's against float64 "
                         "(not equal)")
            else:
                rec.add(i, "backward", FAIL, f"{tag}: {e}")

    # forward AD -------------------------------------------------------------
    def check_forward_ad(self, i, pristine, tag, seed, meta_ok):
        rec = self.rec
        diff = [t for t in sample_leaves(pristine)
                if isinstance(t, torch.Tensor) and t.requires_grad]
        if not diff:
            rec.add(i, "forward_ad", NA)
            return
        g = torch.Generator().manual_seed(SEED + 7 * i)
        tangents = {id(t): torch.randn(t.shape, dtype=t.dtype, generator=g) for t in diff}

        def dualize(sample, device, wide=False):
            """`wide`: 16-bit floats (tensors, tangents, dtype arguments) in
            float64, for the accuracy reference."""
            memo = {}
            to_cpu = torch.device(device).type == "cpu"
            widen = (lambda t: t.double() if t.dtype in _LOW_PRECISION else t) if wide else (lambda t: t)

            def f(x):
                if not isinstance(x, torch.Tensor):
                    if to_cpu and _is_device_str(x):
                        return "cpu"
                    if to_cpu and isinstance(x, torch.device) and x.type == DEVICE_TYPE:
                        return torch.device("cpu")
                    if wide and isinstance(x, torch.dtype) and x in _LOW_PRECISION:
                        return torch.float64
                    return x
                p = widen(copy_tensor(x, device, memo, keep_grad=False, keep_cpu=self.keep_cpu))
                if id(x) in tangents:
                    return fwAD.make_dual(p, widen(tangents[id(x)]).to(p.device))
                return p
            inp, args, kwargs = pytree.tree_map(f, (sample.input, sample.args, sample.kwargs))
            return SampleInput(inp, args=tuple(args), kwargs=dict(kwargs))

        def tangents_of(out):
            res = []
            for o in pytree.tree_leaves(out):
                if isinstance(o, torch.Tensor):
                    p, t = fwAD.unpack_dual(o)
                    res.append((p, t))
            return res

        with fwAD.dual_level():
            cd = dualize(pristine, "cpu")
            c_out, c_exc = _try(_call, self.op, cd, seed)
            if c_exc is not None:
                reason = f"CPU reference forward AD raised {_exc_text(c_exc)}"
                rec.exclusions[reason] = rec.exclusions.get(reason, 0) + 1
                rec.add(i, "forward_ad", EXCLUDED, f"{tag}: {reason}")
                return
            nd = dualize(pristine, self.device)
            n_out, n_exc = _try(_call, self.op, nd, seed)
            if n_exc is not None:
                rec.add(i, "forward_ad", ERROR, f"{tag}: {_exc_text(n_exc)}")
                return
            c_t, n_t = tangents_of(c_out), tangents_of(n_out)
        try:
            if len(c_t) != len(n_t):
                raise AssertionError(f"{len(n_t)} tensor outputs vs CPU's {len(c_t)}")
            c_tan = [t for _, t in c_t]
            n_tan = [t for _, t in n_t]
            if [t is None for t in c_tan] != [t is None for t in n_tan]:
                raise AssertionError(
                    f"outputs with a tangent: neuron {[t is not None for t in n_tan]}, "
                    f"CPU {[t is not None for t in c_tan]}")
            code = self.compare([p for p, _ in n_t], [p for p, _ in c_t], meta_ok, msg="primal differs")
            code2 = self.compare([t for t in n_tan if t is not None], [t for t in c_tan if t is not None],
                                 meta_ok, msg="tangents differ")
            rec.add(i, "forward_ad", META if META in (code, code2) else PASS)
        except AssertionError as e:
            # 16-bit: as accurate as the CPU's against forward AD in float64.
            r64 = None
            if self.dtype in _LOW_PRECISION and len(c_t) == len(n_t):
                with fwAD.dual_level():
                    out64, exc64 = _try(_call, self.op, dualize(pristine, "cpu", wide=True), seed)
                    r64 = None if exc64 is not None else tangents_of(out64)
            values = lambda pairs: [p for p, _ in pairs] + [t for _, t in pairs if t is not None]  # noqa: E731
            if r64 is not None and len(r64) == len(c_t) and _as_accurate(values(n_t), values(c_t), values(r64)):
                rec.add(i, "forward_ad", PASS)
                rec.note("16-bit forward AD as accurate as the CPU's against float64 (not equal)")
            else:
                rec.add(i, "forward_ad", FAIL, f"{tag}: {e}")


def _filled(shape, dtype, device):
    buf = torch.empty(shape, dtype=dtype, device=device)
    if dtype.is_floating_point or dtype.is_complex:
        buf.fill_(float("nan"))
    elif dtype == torch.bool:
        buf.fill_(True)
    else:
        buf.fill_(7)
    return buf


def involves_device(sample):
    for x in sample_leaves(sample):
        if isinstance(x, torch.Tensor) and x.device.type == DEVICE_TYPE:
            return True
        if isinstance(x, torch.device) and x.type == DEVICE_TYPE:
            return True
        if _is_device_str(x):
            return True
    return False


def _iterate_samples(rec, item_name, samples, run_one):
    """Runs `run_one(i, sample)` for every sample within the test's budget."""
    limit = None if item_name in CONFIG.unbounded else CONFIG.max_samples
    start = time.monotonic()
    it = iter(samples)
    i = 0
    while True:
        if limit is not None and i >= limit:
            rec.truncated = f"sample limit {limit}"
            break
        if time.monotonic() - start > CONFIG.test_budget_s:
            rec.truncated = f"time budget {CONFIG.test_budget_s:.0f} s exhausted after {i} samples"
            break
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, CONFIG.sample_timeout_s)
        try:
            if not rec.begin(i, "generate"):
                break
            try:
                sample = next(it)
            except StopIteration:
                break
            rec.samples = i + 1
            run_one(i, sample)
        except SampleTimeout as e:
            for check in rec.checks:
                if len(rec.codes[check]) <= i:
                    rec.add(i, check, SKIPPED, f"sample {i}: {e}")
            rec.truncated = f"sample {i} took longer than {CONFIG.sample_timeout_s:.0f} s"
            rec.notes.append(rec.truncated)
            break
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        i += 1


def _finish(tc, rec):
    """The outcome is the record (read by run.py); unittest only learns about
    skips, so that a failing sample never hides the others."""
    if rec.samples == 0 and not rec.fatal and not rec.exclusions:
        raise unittest.SkipTest("the OpInfo gives no sample input for this dtype")


def op_item_name(op):
    return op.full_name


def module_item_name(module_info, training, modes):
    return f"module:{module_info.name}" + (f":{'train' if training else 'eval'}" if modes > 1 else "")


# --------------------------------------------------------------------------
# Device-generic test templates
# --------------------------------------------------------------------------

class TestConformance(TestCase):
    def _should_stop_test_suite(self):
        return False

    @ops(op_db, dtypes=OpDTypes.supported)
    def test_op(self, device, dtype, op):
        grad_ok = op.supports_autograd and dtype in op.supported_backward_dtypes("cuda" if CUDA_DTYPES else device)
        fwad_ok = grad_ok and op.supports_forward_ad
        eager_variants = not COMPILE and not CUDA_DTYPES
        checks = ["forward"]
        if op.inplace_variant is not None and eager_variants:
            checks.append("inplace")
        if op.supports_out and eager_variants:
            checks.append("out")
        if grad_ok:
            checks.append("backward")
        if fwad_ok and eager_variants:
            checks.append("forward_ad")
        rec = Record(checks)
        CURRENT["record"] = rec
        runner = OpSampleRunner(self, device, dtype, op, rec, grad_ok, fwad_ok)
        try:
            samples = op.sample_inputs(device, dtype, requires_grad=grad_ok)
        except Exception as e:  # noqa: BLE001
            samples = None
            gen_exc = e
        if samples is None:
            self._generation_failed(rec, op, dtype, grad_ok, gen_exc)
            return _finish(self, rec)

        def run_one(i, sample):
            rec.tag = f"sample {i} {_describe(sample)}"
            runner.run(i, sample, rec.tag)

        try:
            _iterate_samples(rec, op_item_name(op), samples, run_one)
        except SampleTimeout:
            raise
        except Exception as e:  # noqa: BLE001  (sample generation on neuron raised)
            self._generation_failed(rec, op, dtype, grad_ok, e, rec.samples)
        _finish(self, rec)

    def _generation_failed(self, rec, op, dtype, grad_ok, exc, index=0):
        """Sample generation on neuron raised: a neuron error unless the CPU
        cannot generate that sample either."""
        try:
            for k, _ in enumerate(op.sample_inputs("cpu", dtype, requires_grad=grad_ok)):
                if k >= index:
                    break
            cpu_ok = True
        except Exception:  # noqa: BLE001
            cpu_ok = False
        msg = f"sample {index}: sample generation raised {_exc_text(exc)}"
        if cpu_ok:
            rec.fatal = msg
        else:
            rec.notes.append("CPU reference: " + msg)
            rec.exclusions["CPU reference: " + msg] = 1


class TestModuleConformance(TestCase):
    def _should_stop_test_suite(self):
        return False

    @modules(module_db, train_eval_mode=TrainEvalMode.train_and_eval)
    def test_module(self, device, dtype, module_info, training):
        rec = Record(MODULE_CHECKS)
        CURRENT["record"] = rec
        name = module_item_name(module_info, training, 2 if module_info.train_and_eval_differ else 1)
        try:
            inputs = module_info.module_inputs_func(
                module_info, device=device, dtype=dtype, requires_grad=True, training=training)
        except Exception as e:  # noqa: BLE001
            rec.fatal = f"module_inputs_func raised {_exc_text(e)}"
            return _finish(self, rec)
        runner = ModuleSampleRunner(self, device, dtype, module_info, training, rec)

        def run_one(i, mi):
            rec.tag = f"input {i} {mi.desc or ''}".rstrip()
            runner.run(i, mi, rec.tag)

        _iterate_samples(rec, name, inputs, run_one)
        _finish(self, rec)


class ModuleSampleRunner:
    def __init__(self, tc, device, dtype, module_info, training, record):
        self.tc, self.device, self.dtype = tc, device, dtype
        self.info, self.training, self.rec = module_info, training, record

    def assert_equal(self, n, c, **kw):
        self.tc.assertEqual(_detached(n), _detached(c), exact_device=False, **kw)

    def build(self, mi, seed):
        cargs, ckwargs = copy_tree((mi.constructor_input.args, mi.constructor_input.kwargs),
                                   "cpu", keep_grad=False)
        torch.manual_seed(seed)
        m = self.info.module_cls(*cargs, **ckwargs)
        m.to(self.dtype)
        m.train(self.training)
        return m

    def run(self, i, mi, tag):
        rec = self.rec
        if mi.forward_input is None:
            for c in rec.checks:
                rec.add(i, c, NA)
            return
        seed = SEED + i
        fwd = (mi.forward_input.args, mi.forward_input.kwargs)
        if not rec.begin(i, "copy"):
            return
        pristine = copy_tree(fwd, "cpu", keep_grad=True)
        if not rec.begin(i, "reference"):
            return
        try:
            m_c = self.build(mi, seed)
            if self.info.is_lazy:   # materialize the lazy parameters once, on CPU
                with torch.no_grad():
                    a, k = copy_tree(pristine, "cpu", keep_grad=False)
                    m_c(*a, **k)
        except SampleTimeout:
            raise
        except Exception as e:  # noqa: BLE001
            reason = f"CPU reference module construction raised {_exc_text(e)}"
            rec.exclusions[reason] = rec.exclusions.get(reason, 0) + 1
            for c in rec.checks:
                rec.add(i, c, EXCLUDED, f"{tag}: {reason}")
            return
        m_c0 = copy.deepcopy(m_c)
        c_args, c_kwargs = copy_tree(pristine, "cpu", keep_grad=True)
        n_args, n_kwargs = fwd
        torch.manual_seed(seed)
        c_out, c_exc = _try(lambda: m_c(*c_args, **c_kwargs))
        if c_exc is not None:
            reason = f"CPU reference forward raised {_exc_text(c_exc)}"
            rec.exclusions[reason] = rec.exclusions.get(reason, 0) + 1
            for c in rec.checks:
                rec.add(i, c, EXCLUDED, f"{tag}: {reason}")
            return
        if not rec.begin(i, "forward"):
            return
        try:
            m_n = copy.deepcopy(m_c0).to(self.device)
        except SampleTimeout:
            raise
        except Exception as e:  # noqa: BLE001
            for c in rec.checks:
                rec.add(i, c, ERROR, f"{tag}: module.to({self.device!r}) raised {_exc_text(e)}")
            return
        torch.manual_seed(seed)
        n_out, n_exc = _try(lambda: m_n(*n_args, **n_kwargs))
        if n_exc is not None:
            rec.add(i, "forward", ERROR, f"{tag}: {_exc_text(n_exc)}")
            rec.add(i, "backward", ERROR, f"{tag}: forward raised {_exc_text(n_exc)}")
            return

        meta_only = False
        try:
            try:
                self.assert_equal(n_out, c_out)
                check_devices(n_out, c_out)
                self.assert_equal(m_n.state_dict(), m_c.state_dict(), msg="module state after forward")
                rec.add(i, "forward", PASS)
            except AssertionError as mismatch:
                why = self.cpu_nondeterminism(m_c0, pristine, c_out, seed)
                if why is None:
                    raise mismatch
                meta_only = True
                check_metadata(n_out, c_out)
                rec.add(i, "forward", META, f"{tag}: {why}")
        except AssertionError as e:
            rec.add(i, "forward", FAIL, f"{tag}: {e}")

        # backward
        if not rec.begin(i, "backward"):
            return
        n_o, c_o = pytree.tree_leaves(n_out), pytree.tree_leaves(c_out)
        pairs = [(n, c) for n, c in zip(n_o, c_o)
                 if isinstance(c, torch.Tensor) and isinstance(n, torch.Tensor) and c.requires_grad
                 and (c.is_floating_point() or c.is_complex())]
        c_in = [t for t in tensors_of((c_args, c_kwargs)) if t.requires_grad] + \
            [p for p in m_c.parameters() if p.requires_grad]
        n_in = [t for t in tensors_of((n_args, n_kwargs)) if t.requires_grad] + \
            [p for p in m_n.parameters() if p.requires_grad]
        if not pairs or not c_in:
            rec.add(i, "backward", NA)
            return
        if len(c_in) != len(n_in) or any(not n.requires_grad for n, _ in pairs):
            rec.add(i, "backward", FAIL, f"{tag}: requires_grad differs between neuron and CPU")
            return
        g = torch.Generator().manual_seed(SEED + i)
        c_g = [torch.randn(c.shape, dtype=c.dtype, generator=g) for _, c in pairs]
        n_g = [x.to(self.device) for x in c_g]
        c_grads, c_exc = _try(torch.autograd.grad, [c for _, c in pairs], c_in, c_g, allow_unused=True)
        if c_exc is not None:
            reason = f"CPU reference backward raised {_exc_text(c_exc)}"
            rec.exclusions[reason] = rec.exclusions.get(reason, 0) + 1
            rec.add(i, "backward", EXCLUDED, f"{tag}: {reason}")
            return
        n_grads, n_exc = _try(torch.autograd.grad, [n for n, _ in pairs], n_in, n_g, allow_unused=True)
        if n_exc is not None:
            rec.add(i, "backward", ERROR, f"{tag}: {_exc_text(n_exc)}")
            return
        try:
            if meta_only:
                check_metadata(n_grads, c_grads)
                rec.add(i, "backward", META)
            else:
                try:
                    self.assert_equal(n_grads, c_grads, msg="gradients differ")
                except AssertionError:
                    g64 = self.float64_gradients(m_c0, pristine, [c for _, c in pairs], c_out, c_g, seed)
                    # float32 (1e-5: its default atol), as ops' 16-bit results in compile mode
                    if g64 is None or not _as_accurate(list(n_grads), list(c_grads), list(g64), tol=1e-5):
                        raise
                    rec.note("float32 gradients as accurate as the CPU's against float64 (not equal)")
                check_devices(n_grads, c_grads)
                rec.add(i, "backward", PASS)
        except AssertionError as e:
            rec.add(i, "backward", FAIL, f"{tag}: {e}")

    def float64_gradients(self, m_c0, pristine, c_outs, c_out, c_g, seed):
        """float32 modules: the gradients the backward check compares, with
        the module and its inputs in float64 (CPU), or None. A sum over a
        few rows, in another order than the CPU's, can round a cancelling
        gradient past float32's default tolerance while as accurate."""
        if self.dtype != torch.float32:
            return None
        up = lambda x: x.detach().double().requires_grad_(x.requires_grad) \
            if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x  # noqa: E731
        m = copy.deepcopy(m_c0).double()
        args, kwargs = pytree.tree_map(up, copy_tree(pristine, "cpu", keep_grad=True))
        torch.manual_seed(seed)
        out, exc = _try(lambda: m(*args, **kwargs))
        if exc is not None:
            return None
        picked = {id(c) for c in c_outs}
        outs = [o for o, c in zip(pytree.tree_leaves(out), pytree.tree_leaves(c_out)) if id(c) in picked]
        ins = [t for t in tensors_of((args, kwargs)) if t.requires_grad] + \
            [p for p in m.parameters() if p.requires_grad]
        if len(outs) != len(c_outs):
            return None
        grads, exc = _try(torch.autograd.grad, outs, ins, [g.double() for g in c_g], allow_unused=True)
        return None if exc is not None else grads

    def cpu_nondeterminism(self, m_c0, pristine, c_out, seed):
        for s, why in ((seed, "CPU result not reproducible with the same seed (output undefined)"),
                       (seed + 1, "CPU result depends on the seed (random module)")):
            m = copy.deepcopy(m_c0)
            a, k = copy_tree(pristine, "cpu", keep_grad=False)
            torch.manual_seed(s)
            with torch.no_grad():
                r, e = _try(lambda: m(*a, **k))
            if e is None:
                try:
                    self.assert_equal(r, c_out)
                except AssertionError:
                    return why
        return None


# Fix the device type name before instantiation, so test names and the
# OpInfo decorators see "neuron" throughout.
PrivateUse1TestBase.setUpClass()
instantiate_device_type_tests(TestConformance, globals(), only_for="privateuse1")
instantiate_device_type_tests(TestModuleConformance, globals(), only_for="privateuse1")

OP_CLASS = globals()[f"TestConformance{DEVICE_TYPE.upper()}"]
MODULE_CLASS = globals()[f"TestModuleConformance{DEVICE_TYPE.upper()}"]


# --------------------------------------------------------------------------
# Plan: every test item, in a stable order
# --------------------------------------------------------------------------

def dtype_name(dtype):
    return str(dtype).split(".")[1]


# Order used to pick an op's "most common" dtype for the CI subset.
COMMON_DTYPE_ORDER = ["float32", "float64", "int64", "int32", "bool", "complex64", "bfloat16",
                      "float16", "uint8", "int8", "int16", "complex128"]


def plan():
    """Every test item: dict(kind, name, dtype, test, cls)."""
    items = []
    for op in op_db:
        dtypes = sorted(dtype_name(d) for d in (cuda_only_dtypes(op) if CUDA_DTYPES else op.supported_dtypes(DEVICE_TYPE)))
        for dt in dtypes:
            items.append({
                "kind": "op", "name": op_item_name(op), "dtype": dt,
                "test": f"test_op_{op.formatted_name}_{DEVICE_TYPE}_{dt}", "cls": OP_CLASS.__name__,
            })
    for mi in ([] if CUDA_DTYPES else module_db):
        modes = [True, False] if mi.train_and_eval_differ else [True]
        for training in modes:
            for dt in sorted(dtype_name(d) for d in mi.supported_dtypes(DEVICE_TYPE)):
                suffix = (f"_{'train_mode' if training else 'eval_mode'}" if len(modes) > 1 else "")
                items.append({
                    "kind": "module", "name": module_item_name(mi, training, len(modes)), "dtype": dt,
                    "test": f"test_module_{mi.formatted_name}{suffix}_{DEVICE_TYPE}_{dt}",
                    "cls": MODULE_CLASS.__name__,
                })
    return items


# --------------------------------------------------------------------------
# Running one item (used by the worker)
# --------------------------------------------------------------------------

class _Result(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.outcome, self.detail = "pass", None

    def addSkip(self, test, reason):
        self.outcome, self.detail = "skipped", reason

    def addFailure(self, test, err):
        self.outcome, self.detail = "fail", _one_line(err[1])

    def addError(self, test, err):
        self.outcome = "harness-error"
        self.detail = _one_line("".join(traceback.format_exception(*err))[-1500:], 1500)

    def addExpectedFailure(self, test, err):
        self.outcome, self.detail = "opinfo-xfail", _one_line(err[1])

    def addUnexpectedSuccess(self, test):
        self.outcome, self.detail = "opinfo-xpass", "OpInfo marks this test expectedFailure"


def run_item(item):
    cls = globals()[item["cls"]]
    CURRENT["record"] = None
    if not hasattr(cls, item["test"]):
        return {"outcome": "harness-error", "detail": f"test {item['test']} was not instantiated"}
    result = _Result()
    start = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cls(item["test"]).run(result)
    rec = CURRENT["record"]
    out = {"outcome": result.outcome, "detail": result.detail,
           "time_s": round(time.monotonic() - start, 3)}
    if rec is not None:
        out.update(rec.to_json())
    return out


def worker(plan_path, results_path, start_index, config_path):
    with open(config_path) as f:
        config = json.load(f)
    CONFIG.max_samples = config.get("max_samples")
    CONFIG.test_budget_s = config.get("test_budget_s", CONFIG.test_budget_s)
    CONFIG.sample_timeout_s = config.get("sample_timeout_s", CONFIG.sample_timeout_s)
    CONFIG.unbounded = set(config.get("unbounded", ()))
    CONFIG.crashes = config.get("crashes", {})
    CONFIG.undefined = config.get("undefined", [])
    torch.set_num_threads(config.get("threads", 1))
    if config.get("progress"):
        CONFIG.progress_fd = os.open(config["progress"], os.O_WRONLY)
    with open(plan_path) as f:
        items = json.load(f)
    with open(results_path, "a", buffering=1) as out:
        for index in range(start_index, len(items)):
            item = items[index]
            out.write(json.dumps({"event": "start", "index": index}) + "\n")
            out.flush()
            CONFIG.index = index
            CONFIG.item = f"{item['name']} {item['dtype']}"
            res = run_item(item)
            res["index"] = index
            res["event"] = "end"
            out.write(json.dumps(res) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    # python conformance/harness.py --worker PLAN RESULTS START CONFIG  (see run.py)
    if len(_ARGV) >= 2 and _ARGV[1] == "--worker":
        sys.exit(worker(_ARGV[2], _ARGV[3], int(_ARGV[4]), _ARGV[5]))
    print(__doc__)

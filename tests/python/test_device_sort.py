"""sort, argsort and topk on the protected driver run as device kernels (the
C++ library's sort_lines) with the CPU's results bit for bit, tied values
included: the kernel runs the CPU kernel's own steps (std::sort,
std::stable_sort, partial_sort or nth_element) with its comparators. NaN
counts as the largest value. Errors are the CPU's."""
from conftest import run_python

CODE = """
import torch
torch.manual_seed(0)
x = torch.randn(4, 7, 5); x[1, 2, 3] = float("nan"); x[0, 0, 0] = x[0, 1, 0]
tied_ints = torch.randint(0, 5, (6, 9, 4))
tied_floats = torch.randint(0, 3, (3, 200)).float()  # topk's partial_sort path (k * 64 <= 200)
for t in (x, tied_ints, tied_floats, x.double(), tied_ints.to(torch.int16)):
    d = t.to("neuron")
    for dim in range(-1, t.dim()):
        for desc in (False, True):
            for stable in (False, True):
                a, b = torch.sort(t, dim=dim, descending=desc, stable=stable), torch.sort(d, dim=dim, descending=desc, stable=stable)
                assert torch.equal(a.indices, b.indices.cpu()), (t.dtype, dim, desc, stable)
                torch.testing.assert_close(b.values.cpu(), a.values, equal_nan=True)
        for largest in (True, False):
            for k in (0, 1, 2, t.size(dim)):
                a, b = torch.topk(t, k, dim, largest), torch.topk(d, k, dim, largest)
                assert torch.equal(a.indices, b.indices.cpu()), (t.dtype, dim, largest, k)
                torch.testing.assert_close(b.values.cpu(), a.values, equal_nan=True)
assert torch.equal(torch.argsort(tied_ints, 1), torch.argsort(tied_ints.to("neuron"), 1).cpu())
assert torch.sort(torch.tensor(3.0, device="neuron")).indices.item() == 0
assert not torch.neuron.fallback_report(), torch.neuron.format_fallback_report()
for bad in (lambda t: torch.topk(t, 9, 1), lambda t: torch.topk(t, -1, 1), lambda t: torch.sort(t, 5)):
    msgs = []
    for t in (x, x.to("neuron")):
        try:
            bad(t)
        except (RuntimeError, IndexError) as e:
            msgs.append(str(e))
    assert len(msgs) == 2 and msgs[0] == msgs[1], msgs
"""


def test_sort_and_topk_run_on_the_device_with_the_cpu_tie_order():
    run_python(CODE, env={"OPENNEURON_DRIVER": "protected", "OPENNEURON_CPU_FALLBACK": "silent"}, timeout=300)


VULKAN_CODE = """
import torch
torch.manual_seed(0)
x = torch.randn(4, 7, 5); x[1, 2, 3] = float("nan"); x[2, 4, 1] = float("nan"); x[0, 0, 0] = x[0, 1, 0]
tied_ints = torch.randint(0, 5, (6, 9, 4))
unique = torch.randperm(3000).float().reshape(3, 1000) - 1500
cases = (x, tied_ints, x.double(), tied_ints.to(torch.int32), tied_ints.to(torch.int8), tied_ints.to(torch.uint8), unique)
for t in cases:
    d = t.to("neuron")
    for dim in range(-1, t.dim()):
        for desc in (False, True):
            for stable in (False, True):
                a, b = torch.sort(t, dim=dim, descending=desc, stable=stable), torch.sort(d, dim=dim, descending=desc, stable=stable)
                torch.testing.assert_close(b.values.cpu(), a.values, equal_nan=True)
                # a stable sort (and any sort without ties) gives the CPU's indices
                assert torch.equal(a.indices, b.indices.cpu()) or not stable and t is not unique, (t.dtype, dim, desc)
                torch.testing.assert_close(t.gather(dim, b.indices.cpu()), a.values, equal_nan=True)
        for largest in (True, False):
            for k in (0, 1, 3, t.size(dim)):
                a, b = torch.topk(t, k, dim, largest), torch.topk(d, k, dim, largest)
                torch.testing.assert_close(b.values.cpu(), a.values, equal_nan=True)
                torch.testing.assert_close(t.gather(dim, b.indices.cpu()), a.values, equal_nan=True)
                assert t is not unique or torch.equal(a.indices, b.indices.cpu())
assert torch.equal(torch.argsort(unique, 1), torch.argsort(unique.to("neuron"), 1).cpu())
assert torch.sort(torch.tensor(3.0, device="neuron")).indices.item() == 0
torch.neuron.synchronize()
assert not torch.neuron.fallback_report(), torch.neuron.format_fallback_report()
# Lines past 8192 elements: the merge sort (log2(size) merge passes), in
# the stable order, every dtype family, NaNs, ties, any dim, topk.
long = torch.randn(2, 9000); long[0, ::97] = float("nan")
tied = torch.randint(-20, 20, (3, 8193))
for t in (long, long.double(), tied, tied.to(torch.int16), torch.randn(10001, 2)):
    for dim in range(t.dim()):
        for desc in (False, True):
            a, b = torch.sort(t, dim=dim, descending=desc, stable=True), torch.sort(t.to("neuron"), dim=dim, descending=desc)
            torch.testing.assert_close(b.values.cpu(), a.values, equal_nan=True)
            assert torch.equal(a.indices, b.indices.cpu()), (t.dtype, dim, desc)
a, b = torch.topk(long[1], 10, largest=False), torch.topk(long[1].to("neuron"), 10, largest=False)
assert torch.equal(a.values, b.values.cpu()) and torch.equal(a.indices, b.indices.cpu())
torch.neuron.synchronize()
assert not torch.neuron.fallback_report(), torch.neuron.format_fallback_report()
"""


def test_sort_and_topk_run_as_glsl_kernels_on_vulkan():
    # Lines up to 8192 elements: each element ranked against its line (a
    # stable order: the CPU's for stable sorts and lines without ties);
    # longer ones: a merge sort in the same order.
    run_python(VULKAN_CODE, env={"OPENNEURON_DRIVER": "vulkan", "OPENNEURON_VULKAN_VALIDATION": "1",
                                 "OPENNEURON_CPU_FALLBACK": "silent"}, timeout=300)

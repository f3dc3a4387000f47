"""torch.neuron.set_sync_debug_mode, as torch.cuda's: "warn" warns and
"error" raises at each operation that makes the host wait for the device,
naming the op; explicit synchronization and asynchronous work never do.
Each case runs in a fresh interpreter, on the host driver and on the
protected one (device memory the host cannot address)."""
import pytest

from conftest import run_python

DRIVERS = {
    "host": {},
    "protected": {"OPENNEURON_DRIVER": "protected", "OPENNEURON_CPU_FALLBACK": "silent"},
}

# Records the warnings of a block as (source line, message) pairs.
PRELUDE = """
import warnings, torch
N = torch.neuron
def syncs(block):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        block()
    return [str(w.message) for w in caught if "synchronizing operation" in str(w.message)]
x = torch.randn(8, device="neuron")
"""


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_warn_names_each_synchronizing_op(driver):
    run_python(PRELUDE + """
N.set_sync_debug_mode("warn")
assert N.get_sync_debug_mode() == 1
cases = {
    "aten::_local_scalar_dense": lambda: x.sum().item(),
    "aten::copy_ (a blocking copy to the host)": lambda: x.cpu(),
    "aten::copy_ (a blocking copy from the host)": lambda: torch.ones(3).to("neuron"),
    "aten::nonzero": lambda: torch.nonzero(x > 0),
    "aten::index.Tensor": lambda: x[x > 0],
    "aten::masked_select": lambda: torch.masked_select(x, x > 0),
    "aten::equal": lambda: torch.equal(x, x),
    "aten::_unique2": lambda: torch.unique(x),
}
for op, block in cases.items():
    got = syncs(block)
    assert len(got) >= 1 and op in got[0], (op, got)
assert any("aten::_local_scalar_dense" in m for m in syncs(lambda: print(x.sum())))
# Device work, device-to-device copies, explicit synchronization and
# asynchronous copies with pinned memory wait for nothing.
pinned = torch.ones(8).pin_memory()
s = N.Stream()
quiet = [
    lambda: x * 2 + 1,
    lambda: x[1:5].clone(),
    lambda: torch.where(x > 0, x, -x),
    lambda: torch.cat([x, x]),
    lambda: x.to("neuron"),
    lambda: N.synchronize(),
    lambda: pinned.to("neuron", non_blocking=True),
    lambda: torch.empty(8).pin_memory().copy_(x, non_blocking=True),
    lambda: s.synchronize(),
    lambda: N.current_stream().synchronize(),
]
for i, block in enumerate(quiet):
    assert syncs(block) == [], (i, syncs(block))
N.set_sync_debug_mode("default")
assert syncs(lambda: x.sum().item()) == []
""", env=DRIVERS[driver], timeout=120)


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_error_raises_at_the_op_and_the_process_goes_on(driver):
    run_python(PRELUDE + """
N.set_sync_debug_mode(2)
for block, op in ((lambda: x.sum().item(), "aten::_local_scalar_dense"),
                  (lambda: x.nonzero(), "aten::nonzero"),
                  (lambda: x.numpy(force=True), "aten::copy_")):
    try:
        block()
    except RuntimeError as e:
        assert op in str(e) and "set_sync_debug_mode" in str(e), e
    else:
        raise AssertionError(f"no error for {op}")
y = x * 3  # device work goes on
N.set_sync_debug_mode(0)
assert torch.equal(y.cpu(), x.cpu() * 3)
for bad in ("loud", 7):
    try:
        N.set_sync_debug_mode(bad)
    except RuntimeError as e:
        assert "debug_mode" in str(e)
    else:
        raise AssertionError(bad)
assert N.get_sync_debug_mode() == 0
""", env=DRIVERS[driver], timeout=120)


def test_cpu_fallback_on_protected_memory_is_a_sync():
    """On a device the host cannot address, an op on the CPU fallback
    waits for the device's queued work and copies its operands."""
    run_python(PRELUDE + """
N.set_sync_debug_mode("warn")
got = syncs(lambda: torch.sort(x))
assert any("aten::sort" in m and "CPU fallback" in m for m in got), got
""", env={**DRIVERS["protected"], "OPENNEURON_FORCE_CPU_FALLBACK": "sort"}, timeout=120)

"""Copies between the host and neuron devices: correctness for every
direction, layout and dtype conversion; CUDA's non_blocking semantics;
pinned memory; and the transfer counter that records every copy."""
import gc

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from conftest import host_path_only, count, nbytes, run_python

pytestmark = pytest.mark.timeout(60)

N = torch.neuron

DTYPES = [
    torch.float32, torch.float64, torch.float16, torch.bfloat16,
    torch.complex64, torch.complex128, torch.bool,
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
]


def sample(dtype, shape=(5, 7), seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point or dtype.is_complex:
        return (torch.randn(shape, generator=g, dtype=torch.float64) * 10).to(dtype) if not dtype.is_complex \
            else torch.randn(shape, generator=g, dtype=dtype)
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -1000), min(info.max, 1000), shape, generator=g, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_every_dtype(dtype):
    a = sample(dtype)
    n = a.to("neuron")
    assert n.device == torch.device("neuron", 0) and n.dtype == dtype
    back = n.cpu()
    assert back.dtype == dtype and torch.equal(back, a)
    # device to device, across devices and back
    n1 = n.to("neuron:1")
    assert n1.device.index == 1 and torch.equal(n1.cpu(), a)
    assert torch.equal(n1.to("neuron:0").cpu(), a)


@pytest.mark.parametrize(
    "src_dtype,dst_dtype",
    [
        (torch.float32, torch.float64),
        (torch.float64, torch.float32),
        (torch.float32, torch.bfloat16),
        (torch.float16, torch.float32),
        (torch.int64, torch.float32),
        (torch.float32, torch.int32),
        (torch.bool, torch.int64),
        (torch.float64, torch.complex128),
        (torch.uint8, torch.int8),
    ],
    ids=str,
)
def test_dtype_converting_copies(src_dtype, dst_dtype):
    a = sample(src_dtype)
    expected = a.to(dst_dtype)
    # host -> device with conversion
    n = a.to("neuron", dtype=dst_dtype)
    assert n.dtype == dst_dtype and torch.equal(n.cpu(), expected)
    # conversion on the device
    n2 = a.to("neuron").to(dst_dtype)
    assert n2.dtype == dst_dtype and torch.equal(n2.cpu(), expected)
    # device -> host with conversion
    assert torch.equal(a.to("neuron").to("cpu", dst_dtype), expected)
    # copy_ between devices with conversion
    dst = torch.empty(a.shape, dtype=dst_dtype, device="neuron:1")
    dst.copy_(a.to("neuron:0"))
    assert torch.equal(dst.cpu(), expected)
    host = torch.empty(a.shape, dtype=dst_dtype)
    host.copy_(a.to("neuron"))
    assert torch.equal(host, expected)


def test_non_contiguous_copies():
    base = torch.arange(60.0).reshape(3, 4, 5)
    for view in [base.transpose(0, 2), base[:, ::2, 1:], base.permute(1, 2, 0), base.expand(2, 3, 4, 5)]:
        n = view.to("neuron")
        assert torch.equal(n.cpu(), view)
        assert torch.equal(n.to("neuron:2").cpu(), view)
    # non-contiguous destinations
    dst = torch.zeros(5, 4, device="neuron").t()
    dst.copy_(torch.arange(20.0).reshape(4, 5))
    assert torch.equal(dst.cpu(), torch.arange(20.0).reshape(4, 5))
    n = torch.zeros(6, 6, device="neuron")
    n[1::2, ::3] = torch.ones(3, 2)
    expected = torch.zeros(6, 6)
    expected[1::2, ::3] = 1
    assert torch.equal(n.cpu(), expected)
    host = torch.zeros(4, 6)
    host[:, ::2].copy_(torch.arange(12.0, device="neuron").reshape(4, 3))
    assert torch.equal(host[:, ::2], torch.arange(12.0).reshape(4, 3))
    assert host[:, 1::2].abs().sum() == 0
    # broadcasting copy_ and a CPU scalar source
    b = torch.zeros(3, 4, device="neuron")
    b.copy_(torch.arange(4.0))
    assert torch.equal(b.cpu(), torch.arange(4.0).expand(3, 4))
    b.copy_(torch.tensor(7.0))
    assert torch.equal(b.cpu(), torch.full((3, 4), 7.0))
    # channels_last layout is kept
    img = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    n = img.to("neuron")
    assert n.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(n.cpu(), img)


def test_conj_and_neg_views_copy_values():
    c = torch.randn(6, dtype=torch.complex64)
    assert torch.equal(c.conj().to("neuron").cpu(), c.conj())
    n = c.to("neuron")
    assert torch.equal(n.conj().cpu(), c.conj())
    host = torch.empty_like(c)
    host.copy_(n.conj())
    assert torch.equal(host, c.conj().resolve_conj())
    assert torch.equal(torch.neg(n.conj()).cpu(), torch.neg(c.conj()))


def test_empty_and_scalar_copies():
    e = torch.empty(0, 3).to("neuron")
    assert e.shape == (0, 3) and e.cpu().shape == (0, 3)
    s = torch.tensor(3.5).to("neuron")
    assert s.dim() == 0 and s.item() == 3.5


def test_non_blocking_from_pageable_is_synchronous():
    # A non_blocking copy from pageable memory must complete before it
    # returns (as on CUDA): changing the source right after must not matter.
    src = torch.arange(1 << 22, dtype=torch.float32)
    expected = src.clone()
    dst = src.to("neuron", non_blocking=True)
    src.add_(1)
    assert torch.equal(dst.cpu(), expected)
    # device -> pageable host: the data is there without synchronize.
    host = torch.zeros(1 << 22)
    host.copy_(dst, non_blocking=True)
    assert torch.equal(host, expected)
    # and a pageable destination written with non_blocking=True is readable at once
    out = dst.to("cpu", non_blocking=True)
    N.synchronize()
    assert torch.equal(out, expected)


def test_non_blocking_from_pinned():
    src = torch.randn(1 << 21).pin_memory()
    assert src.is_pinned()
    dst = src.to("neuron", non_blocking=True)
    N.synchronize()
    assert torch.equal(dst.cpu(), src)
    back = torch.empty(1 << 21).pin_memory()
    back.copy_(dst, non_blocking=True)
    N.synchronize()
    assert torch.equal(back, src)
    out = dst.to("cpu", non_blocking=True)  # torch gives a pinned result
    N.synchronize()
    assert out.is_pinned() and torch.equal(out, src)


def test_pinned_block_not_reused_before_copy_ran():
    # Freeing a pinned source right after a non_blocking copy must not let a
    # new pinned allocation overwrite it before the queued copy has read it.
    size = 1 << 22
    for _ in range(3):
        src = torch.full((size,), 1.0).pin_memory()
        dst = src.to("neuron", non_blocking=True)
        del src
        other = torch.empty(size).pin_memory()
        other.fill_(-1.0)
        N.synchronize()
        assert dst.min().item() == 1.0 and dst.max().item() == 1.0
        del other


def test_pin_memory_and_is_pinned():
    t = torch.randn(100)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned() and torch.equal(p, t)
    assert torch.empty(10, pin_memory=True).is_pinned()
    assert not p.to("neuron").is_pinned()
    stats = N.host_memory_stats()
    assert stats["allocated_bytes"] >= 400 and stats["num_host_alloc"] >= 1
    with pytest.raises(RuntimeError, match="pinned"):
        torch.empty(3, device="neuron", pin_memory=True)


def test_dataloader_pin_memory():
    ds = TensorDataset(torch.arange(40.0).reshape(20, 2), torch.arange(20))
    seen = []
    for x, y in DataLoader(ds, batch_size=8, pin_memory=True):
        assert x.is_pinned() and y.is_pinned()
        xn = x.to("neuron", non_blocking=True)
        yn = y.to("neuron", non_blocking=True)
        seen.append((xn, yn))
    N.synchronize()
    assert torch.equal(torch.cat([x for x, _ in seen]).cpu(), torch.arange(40.0).reshape(20, 2))
    assert torch.equal(torch.cat([y for _, y in seen]).cpu(), torch.arange(20))


def test_dataloader_workers_pin_memory():
    # Worker processes forked after the device was initialised do CPU work
    # only and must be unaffected; batches come back pinned. (In a fresh
    # process: DataLoader's pin thread changes thread settings, see
    # test_eager_ops.py::test_backward_matches_cpu_after_dataloader_pin_thread.)
    proc = run_python(
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        torch.ones(1, device="neuron")
        ds = TensorDataset(torch.arange(40.0).reshape(20, 2), torch.arange(20))
        out = []
        for x, y in DataLoader(ds, batch_size=8, pin_memory=True, num_workers=2):
            assert x.is_pinned() and y.is_pinned()
            out.append(x.to("neuron", non_blocking=True))
        torch.neuron.synchronize()
        print(torch.cat(out).sum().item())
        """
    )
    assert proc.stdout.strip() == "780.0"


@host_path_only
def test_transfer_counter_by_direction(transfers):
    a = torch.arange(10, dtype=torch.float32)  # 40 bytes
    n = a.to("neuron")
    s = transfers()
    assert count(s, "host_to_device") == 1 and nbytes(s, "host_to_device") == 40
    assert count(s, "device_to_host") == 0

    a.cpu()  # already on the CPU: no transfer
    n.cpu()
    s = transfers()
    assert count(s, "device_to_host") == 1 and nbytes(s, "device_to_host") == 40

    n[3].item()
    s = transfers()
    assert count(s, "device_to_host") == 2 and nbytes(s, "device_to_host") == 44

    n.to("neuron:1")
    s = transfers()
    assert count(s, "device_to_device") == 1 and nbytes(s, "device_to_device") == 40

    n.clone()
    n.to("neuron:0")  # same device: nothing moves
    n.to(torch.float64)  # conversion on the device: no transfer
    assert transfers() == s

    n.tolist()
    s = transfers()
    assert count(s, "device_to_host") == 3 and nbytes(s, "device_to_host") == 84
    assert N.total_transfers() == (5, 40 + 84 + 40)
    assert N.total_transfers(s) == (5, 164)
    for direction in s.values():
        assert direction["cpu_fallback"] == {"count": 0, "bytes": 0}
        assert direction["kernel_output"] == {"count": 0, "bytes": 0}

    N.reset_transfer_stats()
    assert N.total_transfers() == (0, 0)


def test_transfer_counter_counts_pinned_async_copies(transfers):
    p = torch.ones(256).pin_memory()  # 1024 bytes
    n = p.to("neuron", non_blocking=True)
    N.synchronize()
    s = transfers()
    assert count(s, "host_to_device") == 1 and nbytes(s, "host_to_device") == 1024
    p.copy_(n, non_blocking=True)
    N.synchronize()
    s = transfers()
    assert count(s, "device_to_host") == 1 and nbytes(s, "device_to_host") == 1024


@host_path_only
def test_factories_on_device_move_nothing(transfers):
    torch.zeros(100, device="neuron")
    torch.ones(3, 3, device="neuron", dtype=torch.int64)
    torch.arange(50, device="neuron")
    torch.full((4,), 2.5, device="neuron")
    torch.empty(10, device="neuron").fill_(1)
    torch.eye(5, device="neuron")
    torch.linspace(0, 1, 7, device="neuron")
    torch.randn(10, device="neuron")
    assert N.total_transfers() == (0, 0), transfers()
    torch.tensor([1.0, 2.0], device="neuron")  # data comes from the host
    s = transfers()
    assert count(s, "host_to_device") == 1 and nbytes(s, "host_to_device") == 8


def test_storage_copies():
    n = torch.arange(6.0, device="neuron")
    storage = n.untyped_storage()
    assert storage.device == torch.device("neuron", 0)
    host = storage.cpu()
    assert host.device.type == "cpu" and host.nbytes() == 24
    assert torch.equal(torch.tensor([], dtype=torch.float32).set_(host), torch.arange(6.0))
    again = host.neuron()
    assert again.device.type == "neuron"
    gc.collect()


def test_launch_blocking_makes_async_copies_complete_on_return():
    proc = run_python(
        """
        import torch
        src = torch.ones(1 << 24).pin_memory()
        dst = torch.empty(1 << 24, device="neuron")
        side = torch.neuron.Stream()
        done = []
        for _ in range(3):
            with torch.neuron.stream(side):
                dst.copy_(src, non_blocking=True)
            done.append(side.query())  # nothing left queued
        print(done, dst.sum().item())
        """,
        env={"OPENNEURON_LAUNCH_BLOCKING": "1"},
    )
    assert proc.stdout.strip() == f"[True, True, True] {float(1 << 24)}"

"""Device memory: the caching allocator's statistics with torch.cuda's keys
and meaning, empty_cache, mem_get_info, and a readable out-of-memory error.

In-process tests use neuron:3, which no other test keeps tensors on, and
measure differences so that memory cached by earlier tests does not matter.
"""
import gc

import pytest
import torch

from conftest import run_python

DEV = torch.device("neuron", 3)
MiB = 2**20


@pytest.fixture
def dev():
    gc.collect()
    torch.neuron.synchronize(DEV)
    torch.neuron.empty_cache()
    yield DEV
    gc.collect()
    torch.neuron.empty_cache()


def test_memory_stats_keys_like_cuda(dev):
    stats = torch.neuron.memory_stats(dev)
    for key in [
        "allocated_bytes.all.current",
        "allocated_bytes.all.peak",
        "allocated_bytes.all.allocated",
        "allocated_bytes.all.freed",
        "allocated_bytes.small_pool.current",
        "allocated_bytes.large_pool.current",
        "reserved_bytes.all.current",
        "active_bytes.all.current",
        "inactive_split_bytes.all.current",
        "requested_bytes.all.current",
        "allocation.all.current",
        "segment.all.current",
        "active.all.current",
        "inactive_split.all.current",
        "oversize_allocations.current",
        "oversize_segments.current",
        "num_ooms",
        "num_alloc_retries",
        "num_sync_all_streams",
        "num_device_alloc",
        "num_device_free",
        "max_split_size",
    ]:
        assert key in stats, key
        assert isinstance(stats[key], int) and stats[key] >= 0 or key == "max_split_size"
    assert list(stats) == sorted(stats)


def test_allocated_reserved_and_peaks(dev):
    base_alloc = torch.neuron.memory_allocated(dev)
    base_req = torch.neuron.memory_stats(dev)["requested_bytes.all.current"]
    base_count = torch.neuron.memory_stats(dev)["allocation.all.current"]
    x = torch.empty(1_000_000, device=dev)  # 4,000,000 bytes
    stats = torch.neuron.memory_stats(dev)
    grown = torch.neuron.memory_allocated(dev) - base_alloc
    assert 4_000_000 <= grown < 4_000_000 + 4096  # rounded up like CUDA (512 B)
    assert stats["requested_bytes.all.current"] - base_req == 4_000_000
    assert stats["allocation.all.current"] - base_count == 1
    assert torch.neuron.memory_reserved(dev) >= torch.neuron.memory_allocated(dev)
    assert torch.neuron.max_memory_allocated(dev) >= torch.neuron.memory_allocated(dev)
    assert torch.neuron.max_memory_reserved(dev) >= torch.neuron.memory_reserved(dev)

    # current device selection: memory_allocated() reads the current device
    with torch.neuron.device(dev):
        assert torch.neuron.memory_allocated() == torch.neuron.memory_allocated(dev)
    assert torch.neuron.memory_allocated("neuron:3") == torch.neuron.memory_allocated(3)

    y = torch.empty(2_000_000, device=dev)
    peak = torch.neuron.max_memory_allocated(dev)
    del x, y
    assert torch.neuron.memory_allocated(dev) == base_alloc
    assert torch.neuron.max_memory_allocated(dev) == peak  # peak survives frees
    torch.neuron.reset_peak_memory_stats(dev)
    assert torch.neuron.max_memory_allocated(dev) == base_alloc
    assert torch.neuron.max_memory_reserved(dev) == torch.neuron.memory_reserved(dev)
    freed_before = torch.neuron.memory_stats(dev)["allocated_bytes.all.freed"]
    assert freed_before >= 12_000_000
    torch.neuron.reset_accumulated_memory_stats(dev)
    stats = torch.neuron.memory_stats(dev)
    assert stats["allocated_bytes.all.freed"] == 0
    assert stats["allocated_bytes.all.allocated"] == 0


def test_memory_is_cached_and_empty_cache_returns_it(dev):
    reserved0 = torch.neuron.memory_reserved(dev)
    free0, total = torch.neuron.mem_get_info(dev)
    x = torch.empty(8 * MiB, dtype=torch.uint8, device=dev)
    ptr = x.data_ptr()
    reserved1 = torch.neuron.memory_reserved(dev)
    assert reserved1 - reserved0 >= 8 * MiB
    free1, total1 = torch.neuron.mem_get_info(dev)
    assert total1 == total and free0 - free1 == reserved1 - reserved0
    del x
    # Freed memory stays reserved (cached) and is reused.
    assert torch.neuron.memory_reserved(dev) == reserved1
    y = torch.empty(8 * MiB, dtype=torch.uint8, device=dev)
    assert y.data_ptr() == ptr
    assert torch.neuron.memory_reserved(dev) == reserved1
    del y
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved(dev) == reserved0
    assert torch.neuron.mem_get_info(dev)[0] == free0
    assert torch.neuron.memory_stats(dev)["num_device_free"] >= 1


def test_memory_snapshot(dev):
    x = torch.empty(3 * MiB, dtype=torch.uint8, device=dev)
    segments = torch.neuron.memory_snapshot(dev)
    blocks = [b for s in segments for b in s["blocks"]]
    assert any(b["requested_size"] == 3 * MiB and b["state"] == "active_allocated" for b in blocks)
    assert sum(s["total_size"] for s in segments) == torch.neuron.memory_reserved(dev)
    assert all(s["device"] == 3 for s in segments)
    del x


def test_memory_summary(dev):
    x = torch.empty(5 * MiB, dtype=torch.uint8, device=dev)
    summary = torch.neuron.memory_summary(dev)
    assert isinstance(summary, str)
    assert "device ID 3" in summary
    for row in ("Allocated memory", "Reserved memory", "Active memory", "num_ooms", "num_alloc_retries"):
        assert row in summary, row
    assert "5.00 MiB" in summary
    short = torch.neuron.memory_summary(dev, abbreviated=True)
    assert "from large pool" in summary and "from large pool" not in short
    del x


def test_accelerator_memory_functions_match(dev):
    x = torch.empty(1234567, device=dev)
    acc = torch.accelerator
    assert acc.memory_allocated(dev) == torch.neuron.memory_allocated(dev)
    assert acc.memory_reserved(dev) == torch.neuron.memory_reserved(dev)
    assert acc.max_memory_allocated(dev) == torch.neuron.max_memory_allocated(dev)
    assert acc.max_memory_reserved(dev) == torch.neuron.max_memory_reserved(dev)
    assert dict(acc.memory_stats(dev)) == dict(torch.neuron.memory_stats(dev))
    assert tuple(acc.get_memory_info(dev)) == torch.neuron.mem_get_info(dev)
    del x
    acc.reset_peak_memory_stats(dev)
    assert torch.neuron.max_memory_allocated(dev) == torch.neuron.memory_allocated(dev)
    acc.empty_cache()
    assert torch.neuron.memory_reserved(dev) == 0


def test_memory_is_per_device(dev):
    before = [torch.neuron.memory_allocated(i) for i in range(4)]
    x = torch.empty(1 * MiB, dtype=torch.uint8, device="neuron:2")
    after = [torch.neuron.memory_allocated(i) for i in range(4)]
    assert after[2] - before[2] == 1 * MiB
    assert after[0] == before[0] and after[1] == before[1] and after[3] == before[3]
    del x


@pytest.mark.timeout(90)
def test_out_of_memory():
    proc = run_python(
        """
        import torch
        N = torch.neuron
        MiB = 2**20
        assert N.get_device_properties(0).total_memory == 64 * MiB
        assert N.mem_get_info(0)[1] == 64 * MiB
        a = torch.empty(16 * MiB, dtype=torch.uint8, device="neuron")
        try:
            torch.empty(128 * MiB, dtype=torch.uint8, device="neuron")
        except torch.OutOfMemoryError as e:
            message = str(e)
        else:
            raise AssertionError("no OutOfMemoryError")
        assert issubclass(torch.OutOfMemoryError, RuntimeError)
        assert N.OutOfMemoryError is torch.OutOfMemoryError
        print(message.splitlines()[0])
        stats = N.memory_stats()
        print("ooms", stats["num_ooms"])
        # The device still works, and smaller allocations succeed.
        b = torch.ones(1000, device="neuron")
        assert b.sum().item() == 1000.0
        c = torch.empty(40 * MiB, dtype=torch.uint8, device="neuron")
        assert N.memory_stats()["num_ooms"] == 1
        del a, b, c
        assert N.memory_allocated() == 0
        assert N.memory_reserved() > 0
        N.empty_cache()
        print("reserved", N.memory_reserved())
        # Room held by the cache is given back and retried before an OOM.
        x = [torch.empty(20 * MiB, dtype=torch.uint8, device="neuron") for _ in range(2)]
        del x
        assert N.memory_reserved() == 40 * MiB
        retries = N.memory_stats()["num_alloc_retries"]
        y = torch.empty(50 * MiB, dtype=torch.uint8, device="neuron")
        assert N.memory_stats()["num_alloc_retries"] == retries + 1
        assert N.memory_stats()["num_ooms"] == 1
        # OOM from an op's output allocation (a host kernel) is an OOM too.
        try:
            torch.ones(10 * MiB, device="neuron") + 1
        except torch.OutOfMemoryError:
            print("op oom")
        print(N.memory_allocated() == 50 * MiB)
        """,
        env={"OPENNEURON_HOST_DEVICE_MEMORY": "64MiB"},
    )
    lines = proc.stdout.splitlines()
    message = lines[0]
    assert "128.00 MiB" in message  # requested
    assert "the 4 host devices share 64.00 MiB (OPENNEURON_HOST_DEVICE_MEMORY), 48.00 MiB of it free" in message
    assert "16.00 MiB allocated" in message
    assert "16.00 MiB reserved" in message
    assert "device 0" in message
    assert lines[1:] == ["ooms 1", "reserved 0", "op oom", "True"]


def test_devices_share_one_memory_budget():
    """Host devices take the same RAM: 40 MiB on neuron:0 leaves 24 MiB of a
    64 MiB budget for every device (before, each device had 64 MiB of its
    own and the machine, not the allocator, ran out)."""
    proc = run_python(
        """
        import torch
        N, MiB = torch.neuron, 2**20
        a = torch.empty(40 * MiB, dtype=torch.uint8, device="neuron:0")
        print(N.mem_get_info(0) == N.mem_get_info(1) == (24 * MiB, 64 * MiB))
        try:
            torch.empty(40 * MiB, dtype=torch.uint8, device="neuron:1")
        except torch.OutOfMemoryError as e:
            print(str(e).splitlines()[0])
        print(N.memory_stats(1)["num_ooms"], N.memory_stats(0)["num_ooms"])
        del a  # cached by neuron:0, released for neuron:1 when it needs the room
        b = torch.ones(40 * MiB, dtype=torch.uint8, device="neuron:1")
        print(int(b[-5:].sum().item()) == 5 and N.memory_reserved(0) == 0)
        print(N.mem_get_info(0)[0] == 64 * MiB - N.memory_reserved(1))
        """,
        env={"OPENNEURON_HOST_DEVICE_MEMORY": "64MiB"},
    )
    lines = proc.stdout.splitlines()
    assert lines[0] == "True", proc.stdout
    assert "device 1: tried to allocate 40.00 MiB" in lines[1]
    assert "the 4 host devices share 64.00 MiB (OPENNEURON_HOST_DEVICE_MEMORY), 24.00 MiB of it free" in lines[1]
    assert lines[2:] == ["1 0", "True", "True"]


def test_per_process_memory_fraction():
    """torch.neuron.set_per_process_memory_fraction bounds one device's
    allocator as on CUDA; the error names the fraction."""
    proc = run_python(
        """
        import torch
        N, MiB = torch.neuron, 2**20
        assert N.get_per_process_memory_fraction(0) == 1.0
        N.set_per_process_memory_fraction(0.5, 0)
        assert N.get_per_process_memory_fraction() == 0.5
        try:
            torch.empty(40 * MiB, dtype=torch.uint8, device="neuron:0")
        except torch.OutOfMemoryError as e:
            print(str(e).splitlines()[0])
        x = torch.empty(40 * MiB, dtype=torch.uint8, device="neuron:1")  # other devices keep theirs
        y = torch.empty(20 * MiB, dtype=torch.uint8, device="neuron:0")
        for bad, error in ((1.5, ValueError), (-0.1, ValueError), (1, TypeError)):
            try:
                N.set_per_process_memory_fraction(bad)
            except error:
                pass
            else:
                raise AssertionError(bad)
        del x
        N.set_per_process_memory_fraction(1.0, "neuron:0")
        z = torch.empty(40 * MiB, dtype=torch.uint8, device="neuron:0")
        print("ok")
        """,
        env={"OPENNEURON_HOST_DEVICE_MEMORY": "64MiB"},
    )
    lines = proc.stdout.splitlines()
    assert "this process may use 32.00 MiB of device 0 (torch.neuron.set_per_process_memory_fraction(0.5))" in lines[0]
    assert lines[1] == "ok"


@pytest.mark.timeout(60)
def test_device_memory_env_parsing():
    proc = run_python(
        """
        import torch
        print(torch.neuron.get_device_properties(0).total_memory,
              torch.neuron.get_device_properties(1).total_memory)
        """,
        env={"OPENNEURON_HOST_DEVICE_MEMORY": "1.5GiB"},
    )
    assert proc.stdout.split() == [str(3 * 2**29)] * 2

"""Streams and events: torch.neuron.Stream/Event (torch.cuda's API) and the
generic torch.Stream/torch.Event on the neuron device."""
import time

import pytest
import torch

pytestmark = pytest.mark.timeout(60)

N = torch.neuron


def test_stream_creation_and_identity():
    s = N.Stream()
    assert isinstance(s, torch.Stream)
    assert s.device == torch.device("neuron", 0)
    assert s.stream_id != 0  # not the default stream
    assert s != N.default_stream()
    s1 = N.Stream(device=1)
    assert s1.device == torch.device("neuron", 1)
    assert N.Stream("neuron:2").device_index == 2
    high = N.Stream(priority=-1)
    assert high != s and high.device_index == 0
    # Wrapping the same stream gives an equal, equally hashed object.
    same = N.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    assert same == s and hash(same) == hash(s)
    assert len({s, same, s1}) == 2
    assert "neuron:0" in repr(s)


def test_current_and_default_stream():
    assert N.current_stream() == N.default_stream()
    assert N.default_stream().stream_id == 0
    assert N.default_stream(1).device == torch.device("neuron", 1)
    assert N.current_stream(2) == N.default_stream(2)
    assert torch.accelerator.current_stream() == N.current_stream()


def test_stream_context_manager():
    s = N.Stream()
    with N.stream(s) as entered:
        assert entered is s
        assert N.current_stream() == s
        assert torch.accelerator.current_stream() == s
        assert N.current_stream(1) == N.default_stream(1)  # other devices untouched
        x = torch.arange(10.0, device="neuron") * 2
    assert N.current_stream() == N.default_stream()
    s.synchronize()
    assert x.sum().item() == 90.0
    with N.stream(None) as nothing:
        assert nothing is None
        assert N.current_stream() == N.default_stream()
    N.set_stream(s)
    assert N.current_stream() == s
    N.set_stream(N.default_stream())
    assert N.current_stream() == N.default_stream()


def test_stream_context_nests_and_restores_on_error():
    a, b = N.Stream(), N.Stream(priority=-1)
    with pytest.raises(ValueError):
        with N.stream(a):
            with N.stream(b):
                assert N.current_stream() == b
            assert N.current_stream() == a
            raise ValueError
    assert N.current_stream() == N.default_stream()


def test_stream_context_on_other_device_restores_current_device():
    s1 = N.Stream(device=1)
    with N.stream(s1):
        assert N.current_stream(1) == s1
    assert N.current_stream(1) == N.default_stream(1)
    assert N.current_device() == 0


def test_generic_stream_context_restores_device():
    s2 = torch.Stream(device="neuron:2")
    with s2:
        assert torch.accelerator.current_stream(2) == s2
    assert torch.accelerator.current_stream(2).stream_id == 0
    assert N.current_device() == 0


def test_stream_synchronize_and_query():
    s = N.Stream()
    src = torch.randn(1 << 20).pin_memory()
    dst = torch.empty(1 << 20, device="neuron")
    with N.stream(s):
        dst.copy_(src, non_blocking=True)
    s.synchronize()
    assert s.query()
    assert torch.equal(dst.cpu(), src)


def test_wait_stream_orders_work():
    # A large asynchronous copy on a side stream, then work on the default
    # stream that waits for it: the result must see the copied data.
    side = N.Stream()
    src = torch.arange(1 << 22, dtype=torch.float32).pin_memory()
    dst = torch.zeros(1 << 22, device="neuron")
    for _ in range(3):
        # The copy must not overtake the default stream's zeroing of dst
        # (queued like any kernel, as on CUDA).
        side.wait_stream(N.current_stream())
        with N.stream(side):
            dst.copy_(src, non_blocking=True)
        N.current_stream().wait_stream(side)
        total = dst.sum(dtype=torch.float64).item()
        assert total == float((1 << 22) * ((1 << 22) - 1) // 2)
        dst.zero_()


def test_wait_event():
    side = N.Stream()
    src = torch.full((1 << 21,), 3.0).pin_memory()
    dst = torch.zeros(1 << 21, device="neuron")
    side.wait_stream(N.current_stream())  # the zeroing is queued on the default stream, as on CUDA
    with N.stream(side):
        dst.copy_(src, non_blocking=True)
        done = side.record_event()
    assert isinstance(done, N.Event)
    N.current_stream().wait_event(done)
    assert dst.mean().item() == 3.0
    done.synchronize()
    assert done.query()


def test_event_record_query_synchronize():
    e = N.Event()
    assert e.query()  # never recorded counts as completed, like CUDA
    e.record()
    e.synchronize()
    assert e.query()
    s = N.Stream()
    e.record(s)
    e.wait()  # current stream waits for it
    e.synchronize()
    assert e.query()


def test_generic_event_elapsed_time():
    start = torch.Event(device="neuron", enable_timing=True)
    end = torch.Event(device="neuron", enable_timing=True)
    stream = torch.accelerator.current_stream()
    start.record(stream)
    time.sleep(0.05)
    end.record(stream)
    end.synchronize()
    elapsed = start.elapsed_time(end)
    assert 40.0 <= elapsed < 5000.0, elapsed


def test_elapsed_time_requires_timing():
    a, b = torch.Event(device="neuron"), torch.Event(device="neuron")
    a.record()
    b.record()
    b.synchronize()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):
        a.elapsed_time(b)


def test_neuron_event_elapsed_time():
    start = N.Event(enable_timing=True)
    end = N.Event(enable_timing=True)
    start.record()
    time.sleep(0.05)
    end.record()
    end.synchronize()
    assert 40.0 <= start.elapsed_time(end) < 5000.0


def test_generic_stream_api():
    s = torch.Stream(device="neuron")
    assert s.device.type == "neuron" and s.stream_id != 0
    e = s.record_event()
    assert isinstance(e, torch.Event)
    e.synchronize()
    assert e.query()
    s.wait_stream(torch.accelerator.current_stream())
    s.wait_event(e)
    s.synchronize()
    assert s.query()
    ev = torch.Event(device="neuron:1")
    ev.record(torch.Stream(device="neuron:1"))
    ev.synchronize()
    assert ev.query()
    # torch.Stream and torch.neuron.Stream interoperate
    with N.stream(s):
        assert N.current_stream() == s


def test_streams_from_pool_are_distinct():
    ids = {N.Stream().stream_id for _ in range(4)}
    assert len(ids) == 4


def test_record_stream_keeps_block_until_stream_done():
    # Stream `side` is kept busy (it waits for large copies on `busy`), then
    # uses x. Freed on the default stream, x's block must not be handed out
    # again while `side` may still use it -- unless record_stream is missing.
    results = {}
    for record in (True, False):
        busy, side = N.Stream(), N.Stream()
        big = torch.ones(1 << 26).pin_memory()
        big_dst = torch.empty(1 << 26, device="neuron")
        src = torch.full((1 << 20,), 3.0).pin_memory()
        x = torch.empty(1 << 20, device="neuron")
        ptr = x.data_ptr()
        with N.stream(busy):
            for _ in range(4):
                big_dst.copy_(big, non_blocking=True)
        side.wait_stream(busy)
        with N.stream(side):
            x.copy_(src, non_blocking=True)
        if record:
            x.record_stream(side)
        del x
        y = torch.empty(1 << 20, device="neuron")
        results[record] = (y.data_ptr() == ptr, side.query())
        N.synchronize()
        del y
    reused, side_done = results[True]
    assert not side_done, "test setup: the side stream finished too early"
    assert not reused, "block reused while the recorded stream still used it"
    assert results[False][0], "test setup: the allocator did not reuse the block"


def test_synchronize_device():
    x = torch.randn(256, 256, device="neuron:1")
    y = x @ x
    N.synchronize(1)
    N.synchronize("neuron:1")
    N.synchronize()
    torch.accelerator.synchronize(1)
    # oneDNN's product (README): the CPU's values within float32 rounding.
    torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu(), rtol=1e-5, atol=1e-4)

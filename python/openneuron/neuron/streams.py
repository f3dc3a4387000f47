"""Streams and events of the neuron device (in-order HAL queues)."""
import torch

from .. import _C
from ._utils import _get_device_index


def _neuron_device(device) -> torch.device:
    return torch.device("neuron", _get_device_index(device, optional=True))


class Stream(torch.Stream):
    """An in-order queue of work on a neuron device, like torch.cuda.Stream."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if "stream_id" in kwargs:  # wrapping an existing stream
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=_neuron_device(device), priority=priority)

    def wait_event(self, event) -> None:
        event.wait(self)

    def wait_stream(self, stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        if event is None:
            event = torch.Event(device=self.device)
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, torch.Stream) and super().__eq__(other)

    def __hash__(self):
        return hash((self.stream_id, self.device_index, self.device_type))

    def __repr__(self):
        return f"<torch.neuron.Stream device=neuron:{self.device_index} stream_id={self.stream_id}>"


def _wrap(stream: torch.Stream) -> Stream:
    return Stream(
        stream_id=stream.stream_id,
        device_index=stream.device_index,
        device_type=stream.device_type,
    )


class _NeuronEventType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Event) and obj.device.type == "neuron"


class Event(metaclass=_NeuronEventType):
    """A marker in a stream: record, query, synchronize, elapsed_time.

    Creates a plain torch.Event on the current neuron device (PyTorch's event
    methods accept no subclass), so isinstance(e, torch.neuron.Event) holds
    for any neuron torch.Event."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return torch.Event(
            device=torch.device("neuron", _C._current_device()),
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )


def current_stream(device=None) -> Stream:
    return _wrap(torch.accelerator.current_stream(_neuron_device(device)))


def default_stream(device=None) -> Stream:
    d = _neuron_device(device)
    return Stream(stream_id=0, device_index=d.index, device_type=torch.Stream(device=d).device_type)


def set_stream(stream: torch.Stream) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes `stream` current on its device inside a with-block."""

    def __init__(self, stream):
        self.stream = stream
        self.previous = None

    def __enter__(self):
        if self.stream is None:
            return None
        self.previous_device = _C._current_device()
        self.previous = torch.accelerator.current_stream(self.stream.device)
        torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            torch.accelerator.set_stream(self.previous)
            _C._set_device(self.previous_device)
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)

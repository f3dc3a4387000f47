// Streams: each c10::Stream of the neuron device is backed by a HAL queue.
// Stream id 0 is the default stream; ids 1..2*kPoolSize are pool streams
// (normal priority first, then high priority), created on first use.
#pragma once

#include <c10/core/Stream.h>

#include "hal/queue.h"

namespace openneuron::integration {

constexpr int kPoolSize = 32;

hal::Queue& queue_for(const c10::Stream& stream);
c10::Stream default_stream(c10::DeviceIndex device);
c10::Stream current_stream(c10::DeviceIndex device);
// Sets the current stream of the stream's device; returns the previous one.
c10::Stream exchange_stream(const c10::Stream& stream);
// Round-robin pick from the pool; priority < 0 means high priority.
c10::Stream stream_from_pool(c10::DeviceIndex device, int priority);
int stream_priority(const c10::Stream& stream);

// Work held back on the host (eager fusion's chains) runs before anything
// observes or orders the device's streams: the integration layer registers
// the flush, which every wait, stream switch, event, launch and copy calls.
using HeldWorkFlush = void (*)(c10::DeviceIndex device);  // -1: every device
void set_held_work_flush(HeldWorkFlush flush);
void flush_held_work(c10::DeviceIndex device);

// The queue of the current stream of `device` (-1: the current device).
hal::Queue& current_queue(c10::DeviceIndex device);

// Kernels of the host driver run on the calling thread; before one touches
// device memory, asynchronous work queued on the current stream must finish.
// Returns that stream's queue.
hal::Queue& wait_current_stream(c10::DeviceIndex device);

}  // namespace openneuron::integration

#include "torch/runtime/streams.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include <c10/util/Exception.h>

#include "hal/driver.h"
#include "torch/runtime/device.h"
#include "torch/runtime/fast_tls.h"

namespace openneuron::integration {
namespace {

constexpr int kQueuesPerDevice = 1 + 2 * kPoolSize;

struct DeviceQueues {
  std::once_flag created[kQueuesPerDevice];
  std::unique_ptr<hal::Queue> queues[kQueuesPerDevice];
  std::atomic<unsigned> next_normal{0};
  std::atomic<unsigned> next_high{0};
};

DeviceQueues& device_queues(c10::DeviceIndex device) {
  // Leaked on purpose: queues must outlive every static that frees tensors.
  static auto* all = [] {
    auto* v = new std::vector<std::unique_ptr<DeviceQueues>>();
    for (int i = 0; i < device_count(); ++i)
      v->push_back(std::make_unique<DeviceQueues>());
    return v;
  }();
  check_device_index(device);
  return *(*all)[device];
}

constexpr int kMaxDevices = 64;
// The queue of each device's current stream, cached per thread: every op and
// allocation asks for it, and streams change rarely.
struct CachedQueue {
  c10::StreamId id = -1;
  hal::Queue* queue = nullptr;
};

struct ThreadStreams {
  std::array<c10::StreamId, kMaxDevices> current{};
  std::array<CachedQueue, kMaxDevices> queue{};
};

ThreadStreams& thread_streams() {
  OPENNEURON_FAST_TLS static thread_local ThreadStreams* streams = nullptr;
  if (C10_UNLIKELY(streams == nullptr)) {
    // Owned by a plain thread_local, touched once, freed at thread exit.
    static thread_local std::unique_ptr<ThreadStreams> owner;
    owner = std::make_unique<ThreadStreams>();
    streams = owner.get();
  }
  return *streams;
}

}  // namespace

hal::Queue& queue_for(const c10::Stream& stream) {
  lazy_init();
  const auto id = stream.id();
  TORCH_CHECK(id >= 0 && id < kQueuesPerDevice, "Invalid neuron stream id ",
              id, " on ", stream.device());
  auto& dq = device_queues(stream.device_index());
  std::call_once(dq.created[id], [&] {
    const int priority = id > kPoolSize ? -1 : 0;
    dq.queues[id] =
        hal::driver().create_queue(stream.device_index(), priority);
  });
  return *dq.queues[id];
}

c10::Stream default_stream(c10::DeviceIndex device) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, device), 0);
}

c10::Stream current_stream(c10::DeviceIndex device) {
  device = resolve_device_index(device);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, device),
                     thread_streams().current[device]);
}

c10::Stream exchange_stream(const c10::Stream& stream) {
  const auto device = resolve_device_index(stream.device_index());
  auto previous = current_stream(device);
  if (previous.id() != stream.id()) flush_held_work(device);
  thread_streams().current[device] = stream.id();
  return previous;
}

c10::Stream stream_from_pool(c10::DeviceIndex device, int priority) {
  device = resolve_device_index(device);
  auto& dq = device_queues(device);
  const bool high = priority < 0;
  auto& counter = high ? dq.next_high : dq.next_normal;
  const c10::StreamId id =
      1 + (high ? kPoolSize : 0) + (counter++ % kPoolSize);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, device), id);
}

int stream_priority(const c10::Stream& stream) {
  return stream.id() > kPoolSize ? -1 : 0;
}

hal::Queue& current_queue(c10::DeviceIndex device) {
  lazy_init();  // also refuses a forked child: its queues have no threads
  device = resolve_device_index(device);
  auto& cached = thread_streams().queue[device];
  const auto id = thread_streams().current[device];
  if (C10_UNLIKELY(cached.id != id || cached.queue == nullptr)) {
    cached.queue = &queue_for(current_stream(device));
    cached.id = id;
  }
  return *cached.queue;
}

namespace {
std::atomic<HeldWorkFlush> g_held_work_flush{nullptr};
}  // namespace

void set_held_work_flush(HeldWorkFlush flush) { g_held_work_flush.store(flush); }

void flush_held_work(c10::DeviceIndex device) {
  if (auto flush = g_held_work_flush.load(std::memory_order_relaxed)) flush(device);
}

hal::Queue& wait_current_stream(c10::DeviceIndex device) {
  flush_held_work(device < 0 ? -1 : device);
  auto& queue = current_queue(device);
  if (!queue.query()) queue.synchronize();
  return queue;
}

}  // namespace openneuron::integration

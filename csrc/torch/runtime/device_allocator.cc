#include "torch/runtime/device_allocator.h"

#include <array>
#include <utility>

#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>

#include "hal/driver.h"
#include "hal/error.h"
#include "torch/runtime/device.h"
#include "torch/runtime/memory_history.h"
#include "torch/runtime/streams.h"

namespace openneuron::integration {
namespace {

// One deleter per device index, so a DataPtr's context can be the pointer
// itself (as Allocator::raw_allocate demands) and still name its device.
constexpr int kMaxDevices = 64;

template <int Device>
void free_on_device(void* ptr) {
  HistoryContext context(/*is_alloc=*/false);
  hal::device_allocator(Device).free(ptr);
}

template <int... Devices>
constexpr std::array<c10::DeleterFnPtr, sizeof...(Devices)> make_deleters(
    std::integer_sequence<int, Devices...>) {
  return {&free_on_device<Devices>...};
}

constexpr auto kDeleters =
    make_deleters(std::make_integer_sequence<int, kMaxDevices>());

// The device whose allocator a DataPtr came from, or -1.
int device_of(const c10::DataPtr& ptr) {
  const auto deleter = ptr.get_deleter();
  for (int d = 0; d < kMaxDevices; ++d)
    if (kDeleters[d] == deleter) return d;
  return -1;
}

void copy_stats(const hal::StatArray& from, c10::CachingAllocator::StatArray& to) {
  for (size_t i = 0; i < from.size(); ++i) {
    to[i].current = from[i].current;
    to[i].peak = from[i].peak;
    to[i].allocated = from[i].allocated;
    to[i].freed = from[i].freed;
  }
}

}  // namespace

c10::DataPtr allocate_device_memory(size_t nbytes, c10::DeviceIndex device,
                                    c10::Device label) {
  lazy_init();
  if (nbytes == 0) return c10::DataPtr(nullptr, label);
  return allocate_device_memory(nbytes, device, label, current_queue(device));
}

c10::DataPtr allocate_device_memory(size_t nbytes, c10::DeviceIndex device,
                                    c10::Device label, hal::Queue& queue) {
  if (nbytes == 0) return c10::DataPtr(nullptr, label);
  void* ptr;
  HistoryContext context(/*is_alloc=*/true);
  try {
    ptr = hal::device_allocator(device).allocate(nbytes, &queue);
  } catch (const hal::OutOfMemoryError& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
  }
  return c10::DataPtr(ptr, ptr, kDeleters[device], label);
}

bool is_device_memory(const c10::DataPtr& ptr) { return device_of(ptr) >= 0; }

bool free_device_memory(void* ptr) {
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
    auto& allocator = hal::device_allocator(d);
    if (allocator.owns(ptr)) {
      HistoryContext context(/*is_alloc=*/false);
      allocator.free(ptr);
      return true;
    }
  }
  return false;
}

c10::DataPtr DeviceAllocator::allocate(size_t nbytes) {
  const auto device = current_device();
  return allocate_device_memory(nbytes, device, c10::Device(kNeuron, device));
}

c10::DeleterFnPtr DeviceAllocator::raw_deleter() const { return nullptr; }

void DeviceAllocator::copy_data(void* dest, const void* src,
                                std::size_t count) const {
  // Synchronous, as PyTorch expects (copy-on-write materialization, storage
  // copies), and ordered after queued work.
  wait_current_stream(current_device());
  try {
    hal::driver().copy(dest, src, count, hal::CopyKind::DeviceToDevice);
  } catch (const hal::Error& e) {
    TORCH_CHECK(false, "neuron device-to-device copy of ", count, " bytes: ", e.what());
  }
}

bool DeviceAllocator::initialized() { return is_initialized(); }

void DeviceAllocator::emptyCache(c10::MempoolId_t /*mempool_id*/) {
  for (c10::DeviceIndex d = 0; d < device_count(); ++d)
    hal::device_allocator(d).empty_cache();
}

void DeviceAllocator::recordStream(const c10::DataPtr& ptr,
                                   c10::Stream stream) {
  const int device = device_of(ptr);
  if (!ptr.get() || device < 0) return;
  hal::device_allocator(device).record_stream(ptr.get(), &queue_for(stream));
}

c10::CachingDeviceAllocator::DeviceStats DeviceAllocator::getDeviceStats(
    c10::DeviceIndex device) {
  device = resolve_device_index(device);
  const auto s = hal::device_allocator(device).stats();
  c10::CachingDeviceAllocator::DeviceStats out;
  copy_stats(s.allocation, out.allocation);
  copy_stats(s.segment, out.segment);
  copy_stats(s.active, out.active);
  copy_stats(s.inactive_split, out.inactive_split);
  copy_stats(s.allocated_bytes, out.allocated_bytes);
  copy_stats(s.reserved_bytes, out.reserved_bytes);
  copy_stats(s.active_bytes, out.active_bytes);
  copy_stats(s.inactive_split_bytes, out.inactive_split_bytes);
  copy_stats(s.requested_bytes, out.requested_bytes);
  out.num_alloc_retries = s.num_alloc_retries;
  out.num_ooms = s.num_ooms;
  out.num_sync_all_streams = s.num_sync_all_streams;
  out.num_device_alloc = s.num_device_alloc;
  out.num_device_free = s.num_device_free;
  out.max_split_size = s.max_split_size;
  auto copy_stat = [](const hal::Stat& from, c10::CachingAllocator::Stat& to) {
    to.current = from.current;
    to.peak = from.peak;
    to.allocated = from.allocated;
    to.freed = from.freed;
  };
  copy_stat(s.oversize_allocations, out.oversize_allocations);
  copy_stat(s.oversize_segments, out.oversize_segments);
  return out;
}

void DeviceAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  hal::device_allocator(resolve_device_index(device)).reset_accumulated_stats();
}

void DeviceAllocator::resetPeakStats(c10::DeviceIndex device) {
  hal::device_allocator(resolve_device_index(device)).reset_peak_stats();
}

std::pair<size_t, size_t> DeviceAllocator::getMemoryInfo(
    c10::DeviceIndex device) {
  // As cudaMemGetInfo: what the device has left, whoever holds the rest
  // (other devices sharing its memory included; cached blocks count as used).
  const hal::MemoryBudget budget =
      hal::driver().memory_budget(resolve_device_index(device));
  return {budget.free, budget.total};
}

DeviceAllocator& device_allocator() {
  static DeviceAllocator allocator;
  return allocator;
}

namespace {
struct RegisterAllocator {
  RegisterAllocator() {
    c10::SetAllocator(kNeuron, &device_allocator());
  }
} register_allocator;
}  // namespace

}  // namespace openneuron::integration

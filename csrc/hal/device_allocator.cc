// The per-device caching allocators used by the PyTorch layer.
#include <atomic>
#include <mutex>
#include <vector>

#include "hal/caching_allocator.h"
#include "hal/error.h"

namespace openneuron::hal {

CachingAllocator& device_allocator(int device) {
  Driver& drv = driver();
  const int count = drv.device_count();
  if (device < 0 || device >= count) throw InvalidDeviceError(device, count);

  // Everything here is leaked on purpose: tensors freed during static
  // destruction must still find their allocator.
  static auto* const slots =
      new std::vector<std::atomic<CachingAllocator*>>(count);
  static auto* const create_mutex = new std::mutex;

  std::atomic<CachingAllocator*>& slot = (*slots)[device];
  CachingAllocator* allocator = slot.load(std::memory_order_acquire);
  if (allocator != nullptr) return *allocator;
  std::lock_guard<std::mutex> lock(*create_mutex);
  allocator = slot.load(std::memory_order_acquire);
  if (allocator == nullptr) {
    allocator =
        new CachingAllocator(drv, device, drv.properties(device).total_memory);
    slot.store(allocator, std::memory_order_release);
  }
  return *allocator;
}

}  // namespace openneuron::hal

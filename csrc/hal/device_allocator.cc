// The per-device caching allocators used by the PyTorch layer.
#include <atomic>
#include <mutex>
#include <vector>

#include "hal/caching_allocator.h"
#include "hal/error.h"

namespace openneuron::hal {

CachingAllocator& device_allocator(int device) {
  // Everything here is leaked on purpose: tensors freed during static
  // destruction must still find their allocator.
  static auto* const slots =
      new std::vector<std::atomic<CachingAllocator*>>(driver().device_count());
  static auto* const create_mutex = new std::mutex;

  // Every allocation and free asks: the common case is one load.
  const int count = static_cast<int>(slots->size());
  if (device < 0 || device >= count) throw InvalidDeviceError(device, count);
  std::atomic<CachingAllocator*>& slot = (*slots)[device];
  CachingAllocator* allocator = slot.load(std::memory_order_acquire);
  if (allocator != nullptr) return *allocator;
  Driver& drv = driver();
  std::lock_guard<std::mutex> lock(*create_mutex);
  allocator = slot.load(std::memory_order_acquire);
  if (allocator == nullptr) {
    allocator =
        new CachingAllocator(drv, device, drv.properties(device).total_memory);
    if (drv.memory_budget(device).shared) {
      // Devices drawing on one budget: memory cached by the others is
      // released before this one reports out of memory.
      allocator->set_reclaim([](int self) {
        for (int d = 0; d < static_cast<int>(slots->size()); ++d) {
          CachingAllocator* other = (*slots)[d].load(std::memory_order_acquire);
          if (d != self && other != nullptr) other->empty_cache();
        }
      });
    }
    slot.store(allocator, std::memory_order_release);
  }
  return *allocator;
}

}  // namespace openneuron::hal

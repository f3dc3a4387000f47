// PyTorch's view of the HAL caching allocator: a c10::DeviceAllocator for the
// neuron device, so tensors, torch.neuron.memory_* and torch.accelerator.*
// all read the same allocator.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>

#include "hal/caching_allocator.h"

namespace openneuron::integration {

class DeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override;
  void emptyCache(c10::MempoolId_t mempool_id) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(
      c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;
};

DeviceAllocator& device_allocator();

// Device memory on `device` for the current stream, labelled with `label`.
// Host kernels label it CPU so ATen's CPU kernels accept it.
c10::DataPtr allocate_device_memory(size_t nbytes, c10::DeviceIndex device,
                                    c10::Device label);
// The same for the given queue's stream (a queue of `device`).
c10::DataPtr allocate_device_memory(size_t nbytes, c10::DeviceIndex device,
                                    c10::Device label, hal::Queue& queue);
// True when `ptr` was allocated by allocate_device_memory (any label).
bool is_device_memory(const c10::DataPtr& ptr);
// Frees device memory given only its address (a raw allocation); returns
// false, freeing nothing, when no device allocator owns `ptr`.
bool free_device_memory(void* ptr);

}  // namespace openneuron::integration

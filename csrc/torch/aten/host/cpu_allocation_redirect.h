// Running ATen's CPU kernels directly on device memory (host driver).
//
// The kernels allocate their outputs with the CPU allocator. While a
// RedirectCpuAllocations guard is alive on a thread, the CPU allocator hands
// out device memory of the chosen device instead (labelled CPU), so outputs
// are born in device memory and become neuron tensors without a copy.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

#include "hal/queue.h"

namespace openneuron::integration {

class RedirectCpuAllocations {
 public:
  // Allocations go to `queue`'s stream on `device` (the current stream when
  // no queue is given; a host kernel already looked it up to wait on it).
  explicit RedirectCpuAllocations(c10::DeviceIndex device,
                                  hal::Queue* queue = nullptr);
  ~RedirectCpuAllocations();
  RedirectCpuAllocations(const RedirectCpuAllocations&) = delete;
  RedirectCpuAllocations& operator=(const RedirectCpuAllocations&) = delete;

 private:
  c10::DeviceIndex previous_;
  hal::Queue* previous_queue_;
};

// A CPU-labelled allocator of device memory on `device`: the allocator of the
// CPU views through which host kernels see (and may resize) neuron storages.
c10::Allocator* device_memory_as_cpu_allocator(c10::DeviceIndex device);

// Installs the redirecting CPU allocator (idempotent).
void install_cpu_allocation_redirect();

}  // namespace openneuron::integration

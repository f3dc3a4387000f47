#include "torch/aten/host/cpu_allocation_redirect.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include <c10/core/CPUAllocator.h>

#include "torch/runtime/device.h"
#include "torch/runtime/fast_tls.h"
#include "torch/runtime/device_allocator.h"

namespace openneuron::integration {
namespace {

OPENNEURON_FAST_TLS thread_local c10::DeviceIndex tls_redirect_device = -1;
OPENNEURON_FAST_TLS thread_local hal::Queue* tls_redirect_queue = nullptr;

class DeviceMemoryAsCpu final : public c10::Allocator {
 public:
  explicit DeviceMemoryAsCpu(c10::DeviceIndex device) : device_(device) {}
  c10::DataPtr allocate(size_t n) override {
    const c10::Device label(c10::kCPU);
    if (tls_redirect_queue && tls_redirect_device == device_)
      return allocate_device_memory(n, device_, label, *tls_redirect_queue);
    return allocate_device_memory(n, device_, label);
  }
  void copy_data(void* dest, const void* src, std::size_t n) const override {
    std::memcpy(dest, src, n);
  }

 private:
  c10::DeviceIndex device_;
};

// Wraps the CPU allocator PyTorch had; only redirected threads see a change.
c10::DeleterFnPtr g_original_raw_deleter = nullptr;

// Raw allocations (Allocator::raw_allocate) made while redirected hold device
// memory; the raw deleter tells the two kinds apart by address.
void raw_free(void* ptr) {
  if (!ptr) return;
  if (!free_device_memory(ptr)) g_original_raw_deleter(ptr);
}

class RedirectingCpuAllocator final : public c10::Allocator {
 public:
  explicit RedirectingCpuAllocator(c10::Allocator* original)
      : original_(original) {
    g_original_raw_deleter = original->raw_deleter();
  }
  c10::DataPtr allocate(size_t n) override {
    if (tls_redirect_device >= 0)
      return device_memory_as_cpu_allocator(tls_redirect_device)->allocate(n);
    return original_->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &raw_free; }
  void copy_data(void* dest, const void* src, std::size_t n) const override {
    original_->copy_data(dest, src, n);
  }

 private:
  c10::Allocator* original_;
};

}  // namespace

RedirectCpuAllocations::RedirectCpuAllocations(c10::DeviceIndex device,
                                               hal::Queue* queue)
    : previous_(tls_redirect_device), previous_queue_(tls_redirect_queue) {
  tls_redirect_device = device;
  tls_redirect_queue = queue;
}

RedirectCpuAllocations::~RedirectCpuAllocations() {
  tls_redirect_device = previous_;
  tls_redirect_queue = previous_queue_;
}

c10::Allocator* device_memory_as_cpu_allocator(c10::DeviceIndex device) {
  static auto* allocators = [] {
    auto* v = new std::vector<std::unique_ptr<DeviceMemoryAsCpu>>();
    for (c10::DeviceIndex d = 0; d < device_count(); ++d)
      v->push_back(std::make_unique<DeviceMemoryAsCpu>(d));
    return v;
  }();
  return (*allocators)[device].get();
}

void install_cpu_allocation_redirect() {
  static std::once_flag once;
  std::call_once(once, [] {
    static RedirectingCpuAllocator redirect(c10::GetCPUAllocator());
    // Priority above the default (0) so later default registrations lose.
    c10::SetCPUAllocator(&redirect, /*priority=*/10);
  });
}

}  // namespace openneuron::integration

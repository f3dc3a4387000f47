#include "torch/runtime/pinned_allocator.h"

#include <cstring>

#include <ATen/core/CachingHostAllocator.h>

#include "hal/pinned_allocator.h"
#include "torch/runtime/streams.h"

namespace openneuron::integration {
namespace {

void free_pinned(void* ptr) { hal::pinned_allocator().free(ptr); }

// Also PyTorch's host allocator for the device, so torch.accelerator's
// host-memory functions (empty_host_cache, host_memory_stats) reach it.
class PinnedAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* ptr = hal::pinned_allocator().allocate(n);
    return {ptr, ptr, &free_pinned, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t n) const override {
    std::memcpy(dest, src, n);
  }
  bool record_event(void* ptr, void* /*ctx*/, c10::Stream stream) override {
    if (!hal::pinned_allocator().is_pinned(ptr)) return false;
    hal::pinned_allocator().record_use(ptr, queue_for(stream));
    return true;
  }
  void empty_cache() override { hal::pinned_allocator().empty_cache(); }
  at::HostStats get_stats() override {
    const auto s = hal::pinned_allocator().stats();
    at::HostStats stats;
    stats.active_bytes.current = s.allocated_bytes;
    stats.allocated_bytes.current = s.reserved_bytes;
    stats.num_host_alloc = s.num_host_alloc;
    stats.num_host_free = s.num_host_free;
    return stats;
  }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
};

PinnedAllocator g_pinned_allocator;

}  // namespace

c10::Allocator* pinned_allocator() { return &g_pinned_allocator; }

bool is_pinned_ptr(const void* ptr) {
  return ptr && hal::pinned_allocator().is_pinned(ptr);
}

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_pinned_allocator)

}  // namespace openneuron::integration

#include "torch/runtime/pinned_allocator.h"

#include <cstring>

#include "hal/pinned_allocator.h"

namespace openneuron::integration {
namespace {

void free_pinned(void* ptr) { hal::pinned_allocator().free(ptr); }

class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* ptr = hal::pinned_allocator().allocate(n);
    return {ptr, ptr, &free_pinned, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t n) const override {
    std::memcpy(dest, src, n);
  }
};

}  // namespace

c10::Allocator* pinned_allocator() {
  static PinnedAllocator allocator;
  return &allocator;
}

bool is_pinned_ptr(const void* ptr) {
  return ptr && hal::pinned_allocator().is_pinned(ptr);
}

}  // namespace openneuron::integration

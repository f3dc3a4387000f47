// Pinned host memory seen by a Vulkan device (VK_EXT_external_memory_host).
// A copy between device memory and a pinned block then runs as one transfer
// command that reads or writes the block itself: no staging buffer, no host
// memcpy at enqueue (so a non_blocking copy returns at once), and no worker
// copying a read-back afterwards. As with CUDA's copies from pinned memory,
// the bytes are read when the copy runs. Each pinned block is imported whole
// on its first copy and released with the block (the pinned allocator's
// release listener); a block the device will not import (alignment, size,
// no such memory type) keeps the staged path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "hal/drivers/vulkan/vulkan_memory.h"

namespace openneuron::hal {

class VulkanDevice;

class HostImports {
 public:
  explicit HostImports(const VulkanDevice& device);
  ~HostImports();
  HostImports(const HostImports&) = delete;
  HostImports& operator=(const HostImports&) = delete;

  struct Resolved {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceSize offset = 0;
  };
  // The imported buffer holding [ptr, ptr + bytes), importing its pinned
  // block on first use; nullopt when the range is not in one live pinned
  // block or the device cannot import it.
  std::optional<Resolved> resolve(const void* ptr, size_t bytes);
  size_t imported_blocks() const;

 private:
  bool import(uintptr_t start, size_t size, VulkanBuffer* out) const;
  void forget(uintptr_t start);

  const VulkanDevice& device_;
  mutable std::mutex mutex_;
  std::map<uintptr_t, VulkanBuffer> imported_;  // by pinned block start
  std::set<uintptr_t> refused_;                 // blocks the device would not import
  int listener_ = -1;
};

}  // namespace openneuron::hal

// Device memory of the Vulkan driver, and the host-visible staging buffers
// that copies and kernel arguments go through.
//
// A device allocation is a VkBuffer over its own VkDeviceMemory, read by
// kernels through its buffer device address. The DeviceAddress handed to
// the layers above is not that address but a reserved, inaccessible range
// of the host's address space (PROT_NONE, no memory behind it): offsets
// stay plain arithmetic, and a host read of device memory faults on every
// Vulkan implementation, lavapipe included (whose buffer addresses are host
// pointers), so code that would break on a discrete GPU breaks in CI too.
// resolve() turns a DeviceAddress range into (buffer, offset, address).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "hal/drivers/vulkan/vulkan_api.h"
#include "hal/types.h"

namespace openneuron::hal {

class VulkanDevice;

// A VkBuffer with its memory; mapped when host-visible.
struct VulkanBuffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceAddress address = 0;
  size_t bytes = 0;
  void* mapped = nullptr;
};

// Creates a buffer usable by kernels (device address) and copies. Returns
// false (and creates nothing) when the device is out of memory; throws
// Error for any other failure.
bool create_buffer(const VulkanDevice& device, uint32_t memory_type, size_t bytes, bool map,
                   VulkanBuffer* out);
void destroy_buffer(const VulkanDevice& device, VulkanBuffer& buffer);

class VulkanMemory {
 public:
  explicit VulkanMemory(const VulkanDevice& device) : device_(device) {}
  ~VulkanMemory();

  // nullptr when the device has no room (or `bytes` exceeds its limits).
  void* allocate(size_t bytes);
  void free(void* address, size_t bytes);
  size_t used() const;

  struct Resolved {
    VkBuffer buffer;
    VkDeviceSize offset;       // of the range within `buffer`
    VkDeviceAddress address;   // the range's first byte, for kernels
  };
  // Throws InvalidArgumentError naming the range when [address, address +
  // bytes) is not inside one live allocation of this device.
  Resolved resolve(const void* address, size_t bytes) const;
  // Whether `address` lies in one of this device's allocations.
  bool owns(const void* address) const;

 private:
  const VulkanDevice& device_;
  mutable std::shared_mutex mutex_;
  std::map<uintptr_t, VulkanBuffer> allocations_;  // by DeviceAddress
  size_t used_ = 0;
};

// Host-visible buffers for staging copies and kernel arguments, reused
// once the work that read them finished. At most kRetainedBytes stay cached
// when idle (on unified-memory devices staging takes the device's heap).
class StagingPool {
 public:
  explicit StagingPool(const VulkanDevice& device) : device_(device) {}
  ~StagingPool();
  static constexpr size_t kMinBytes = size_t{64} << 10;
  static constexpr size_t kRetainedBytes = size_t{64} << 20;

  // A mapped buffer of at least `bytes`; throws OutOfMemoryError-like Error
  // when even a fresh one cannot be made.
  std::unique_ptr<VulkanBuffer> acquire(size_t bytes);
  void release(std::unique_ptr<VulkanBuffer> buffer);

 private:
  const VulkanDevice& device_;
  std::mutex mutex_;
  std::multimap<size_t, std::unique_ptr<VulkanBuffer>> free_;  // by capacity
  size_t free_bytes_ = 0;
};

}  // namespace openneuron::hal

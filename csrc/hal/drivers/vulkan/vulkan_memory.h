// Device memory of the Vulkan driver, and the host-visible staging buffers
// that copies and kernel arguments go through.
//
// Device memory comes in blocks, each a VkBuffer over its own
// VkDeviceMemory, read by kernels through its buffer device address.
// Requests up to kMaxSuballocation (the caching allocator's 2 MiB segments)
// share kBlockBytes blocks, first fit, so a model's many segments cost a
// few vkAllocateMemory calls (slow on GPUs, and capped by
// maxMemoryAllocationCount, 4096 on some drivers); larger requests get a
// block of their own. A block is freed once empty. The DeviceAddress handed to
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
  static constexpr size_t kBlockBytes = size_t{64} << 20;
  static constexpr size_t kMaxSuballocation = size_t{4} << 20;
  static constexpr size_t kAlignment = 256;  // >= any minStorageBufferOffsetAlignment

  explicit VulkanMemory(const VulkanDevice& device) : device_(device) {}
  ~VulkanMemory();

  // nullptr when the device has no room (or `bytes` exceeds its limits).
  void* allocate(size_t bytes);
  void free(void* address, size_t bytes);
  // Bytes obtained through allocate() and not freed.
  size_t used() const;
  // Bytes of device memory in blocks (what the device has given out).
  size_t reserved() const;

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
  struct Block {
    VulkanBuffer buffer;
    std::map<size_t, size_t> free;  // offset -> bytes, coalesced
    bool shared = false;            // sub-allocated (else one allocation's own)
  };
  struct Allocation {
    Block* block;
    size_t offset;  // within the block
    size_t bytes;   // as asked
  };
  // The callers of these hold mutex_ exclusively.
  // (block, offset) of `bytes` from a shared block; block nullptr when the
  // device has no room for another.
  std::pair<Block*, size_t> take_range(size_t bytes);
  Block* new_block(size_t bytes, bool shared);  // nullptr when out of memory
  // Gives a range back; returns the block when that emptied it (removed
  // from blocks_, for the caller to destroy outside the lock).
  std::unique_ptr<Block> release_range(Block* block, size_t offset, size_t bytes);
  std::unique_ptr<Block> remove_block(Block* block);

  const VulkanDevice& device_;
  mutable std::shared_mutex mutex_;
  std::map<uintptr_t, Allocation> allocations_;  // by DeviceAddress
  std::vector<std::unique_ptr<Block>> blocks_;
  size_t used_ = 0;      // bytes of live allocations
  size_t reserved_ = 0;  // bytes of all blocks
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

#include "hal/drivers/vulkan/vulkan_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string>

#include "hal/drivers/vulkan/vulkan_device.h"
#include "hal/error.h"

namespace openneuron::hal {

using vk::api;

bool create_buffer(const VulkanDevice& device, uint32_t memory_type, size_t bytes, bool map,
                   VulkanBuffer* out) {
  VkDevice dev = device.handle();
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VulkanBuffer b;
  b.bytes = bytes;
  VkResult r = api().vkCreateBuffer(dev, &info, nullptr, &b.buffer);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) return false;
  vk::check(r, "vkCreateBuffer");
  VkMemoryRequirements requirements;
  api().vkGetBufferMemoryRequirements(dev, b.buffer, &requirements);
  if (!(requirements.memoryTypeBits & (1u << memory_type))) {
    api().vkDestroyBuffer(dev, b.buffer, nullptr);
    throw Error("vulkan: the chosen memory type cannot hold storage buffers");
  }
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.pNext = &flags;
  alloc.allocationSize = requirements.size;
  alloc.memoryTypeIndex = memory_type;
  r = api().vkAllocateMemory(dev, &alloc, nullptr, &b.memory);
  if (r != VK_SUCCESS) {
    api().vkDestroyBuffer(dev, b.buffer, nullptr);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY ||
        r == VK_ERROR_TOO_MANY_OBJECTS)
      return false;
    vk::check(r, "vkAllocateMemory");
  }
  r = api().vkBindBufferMemory(dev, b.buffer, b.memory, 0);
  if (r == VK_SUCCESS && map) r = api().vkMapMemory(dev, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped);
  if (r != VK_SUCCESS) {
    destroy_buffer(device, b);
    vk::check(r, map ? "vkMapMemory" : "vkBindBufferMemory");
  }
  VkBufferDeviceAddressInfo address{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
  address.buffer = b.buffer;
  b.address = api().vkGetBufferDeviceAddress(dev, &address);
  *out = b;
  return true;
}

void destroy_buffer(const VulkanDevice& device, VulkanBuffer& b) {
  if (b.buffer != VK_NULL_HANDLE) api().vkDestroyBuffer(device.handle(), b.buffer, nullptr);
  if (b.memory != VK_NULL_HANDLE) api().vkFreeMemory(device.handle(), b.memory, nullptr);
  b = VulkanBuffer{};
}

// ---- VulkanMemory ----------------------------------------------------------

namespace {
size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
}  // namespace

VulkanMemory::~VulkanMemory() {
  for (auto& [address, allocation] : allocations_) munmap(reinterpret_cast<void*>(address), allocation.bytes);
  for (auto& block : blocks_) destroy_buffer(device_, block->buffer);
}

VulkanMemory::Block* VulkanMemory::new_block(size_t bytes, bool shared) {
  if (reserved_ + bytes > device_.properties().total_memory) return nullptr;
  auto block = std::make_unique<Block>();
  if (!create_buffer(device_, device_.device_memory_type(), bytes, /*map=*/false, &block->buffer)) return nullptr;
  block->shared = shared;
  if (shared) block->free.emplace(0, bytes);
  reserved_ += bytes;
  blocks_.push_back(std::move(block));
  return blocks_.back().get();
}

std::pair<VulkanMemory::Block*, size_t> VulkanMemory::take_range(size_t bytes) {
  auto carve = [&](Block* b) -> std::pair<Block*, size_t> {
    for (auto it = b->free.begin(); it != b->free.end(); ++it) {
      if (it->second < bytes) continue;
      const size_t offset = it->first, left = it->second - bytes;
      b->free.erase(it);
      if (left) b->free.emplace(offset + bytes, left);
      return {b, offset};
    }
    return {nullptr, 0};
  };
  for (auto& b : blocks_) {
    if (!b->shared) continue;
    if (auto found = carve(b.get()); found.first) return found;
  }
  const size_t block_bytes = std::min(kBlockBytes, device_.properties().max_allocation);
  if (Block* b = bytes <= block_bytes ? new_block(block_bytes, true) : nullptr) return carve(b);
  return {new_block(bytes, false), 0};  // near the device's capacity: just what was asked
}

std::unique_ptr<VulkanMemory::Block> VulkanMemory::remove_block(Block* block) {
  auto it = std::find_if(blocks_.begin(), blocks_.end(), [&](const auto& b) { return b.get() == block; });
  std::unique_ptr<Block> out = std::move(*it);
  blocks_.erase(it);
  reserved_ -= out->buffer.bytes;
  return out;
}

std::unique_ptr<VulkanMemory::Block> VulkanMemory::release_range(Block* block, size_t offset, size_t bytes) {
  if (!block->shared) return remove_block(block);
  auto& free = block->free;
  auto next = free.lower_bound(offset);
  if (next != free.end() && offset + bytes == next->first) {  // merge with the range after
    bytes += next->second;
    next = free.erase(next);
  }
  if (next != free.begin()) {  // and with the one before
    auto before = std::prev(next);
    if (before->first + before->second == offset) {
      offset = before->first;
      bytes += before->second;
      free.erase(before);
    }
  }
  free.emplace(offset, bytes);
  if (offset == 0 && bytes == block->buffer.bytes) return remove_block(block);
  return nullptr;
}

void* VulkanMemory::allocate(size_t bytes) {
  if (bytes == 0 || bytes > device_.properties().max_allocation) return nullptr;
  // The handle: address space only, never readable or writable.
  void* handle = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (handle == MAP_FAILED) return nullptr;
  std::unique_lock lock(mutex_);
  const size_t rounded = round_up(bytes, kAlignment);
  const auto [block, offset] =
      rounded <= kMaxSuballocation ? take_range(rounded) : std::pair<Block*, size_t>{new_block(bytes, false), 0};
  if (!block) {
    lock.unlock();
    munmap(handle, bytes);
    return nullptr;
  }
  used_ += bytes;
  allocations_.emplace(reinterpret_cast<uintptr_t>(handle), Allocation{block, offset, bytes});
  return handle;
}

void VulkanMemory::free(void* address, size_t bytes) {
  std::unique_ptr<Block> emptied;
  {
    std::unique_lock lock(mutex_);
    auto it = allocations_.find(reinterpret_cast<uintptr_t>(address));
    if (it == allocations_.end() || it->second.bytes != bytes)
      throw InvalidArgumentError("vulkan driver: free of an address it did not allocate");
    const Allocation a = it->second;
    allocations_.erase(it);
    used_ -= bytes;
    emptied = release_range(a.block, a.offset, round_up(bytes, kAlignment));
  }
  munmap(address, bytes);
  if (emptied) destroy_buffer(device_, emptied->buffer);
}

size_t VulkanMemory::reserved() const {
  std::shared_lock lock(mutex_);
  return reserved_;
}

size_t VulkanMemory::used() const {
  std::shared_lock lock(mutex_);
  return used_;
}

bool VulkanMemory::owns(const void* address) const {
  const auto a = reinterpret_cast<uintptr_t>(address);
  std::shared_lock lock(mutex_);
  auto it = allocations_.upper_bound(a);
  if (it == allocations_.begin()) return false;
  --it;
  return a - it->first < it->second.bytes;
}

VulkanMemory::Resolved VulkanMemory::resolve(const void* address, size_t bytes) const {
  const auto a = reinterpret_cast<uintptr_t>(address);
  {
    std::shared_lock lock(mutex_);
    auto it = allocations_.upper_bound(a);
    if (it != allocations_.begin()) {
      --it;
      const uintptr_t offset = a - it->first;
      const Allocation& al = it->second;
      const VulkanBuffer& b = al.block->buffer;
      // A kernel binding (bytes == 0) may point just past the end: an empty view.
      if ((offset < al.bytes || (bytes == 0 && offset == al.bytes)) && bytes <= al.bytes - offset)
        return Resolved{b.buffer, al.offset + offset, b.address + al.offset + offset};
    }
  }
  char text[96];
  std::snprintf(text, sizeof(text), "%p + %zu bytes", address, bytes);
  throw InvalidArgumentError(std::string("vulkan driver: device address range ") + text +
                             " is not inside one live allocation of device " +
                             std::to_string(device_.index()) +
                             " (a host pointer, a freed buffer, or an access past the end)");
}

// ---- StagingPool -----------------------------------------------------------

StagingPool::~StagingPool() {
  for (auto& [capacity, buffer] : free_) destroy_buffer(device_, *buffer);
}

std::unique_ptr<VulkanBuffer> StagingPool::acquire(size_t bytes) {
  size_t capacity = kMinBytes;
  while (capacity < bytes) capacity *= 2;
  {
    std::lock_guard lock(mutex_);
    auto it = free_.lower_bound(capacity);
    // Reuse a buffer of this size class (not one far larger).
    if (it != free_.end() && it->first <= capacity * 2) {
      auto buffer = std::move(it->second);
      free_bytes_ -= it->first;
      free_.erase(it);
      return buffer;
    }
  }
  auto buffer = std::make_unique<VulkanBuffer>();
  if (!create_buffer(device_, device_.staging_memory_type(), capacity, /*map=*/true, buffer.get())) {
    {
      std::lock_guard lock(mutex_);  // give cached staging back and try once more
      for (auto& [size, cached] : free_) destroy_buffer(device_, *cached);
      free_.clear();
      free_bytes_ = 0;
    }
    if (!create_buffer(device_, device_.staging_memory_type(), capacity, true, buffer.get()))
      throw Error("vulkan: out of host-visible memory for a " + format_bytes(capacity) +
                  " staging buffer on device " + std::to_string(device_.index()));
  }
  return buffer;
}

void StagingPool::release(std::unique_ptr<VulkanBuffer> buffer) {
  std::lock_guard lock(mutex_);
  if (free_bytes_ + buffer->bytes > kRetainedBytes) {
    destroy_buffer(device_, *buffer);
    return;
  }
  free_bytes_ += buffer->bytes;
  free_.emplace(buffer->bytes, std::move(buffer));
}

}  // namespace openneuron::hal

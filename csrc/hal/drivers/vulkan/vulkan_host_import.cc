#include "hal/drivers/vulkan/vulkan_host_import.h"

#include "hal/drivers/vulkan/vulkan_device.h"
#include "hal/pinned_allocator.h"

namespace openneuron::hal {

using vk::api;

HostImports::HostImports(const VulkanDevice& device) : device_(device) {
  if (device_.host_import_alignment() == 0) return;
  listener_ = pinned_allocator().add_release_listener([this](uintptr_t start, size_t) { forget(start); });
}

HostImports::~HostImports() {
  if (listener_ >= 0) pinned_allocator().remove_release_listener(listener_);
  std::lock_guard lock(mutex_);
  for (auto& [start, buffer] : imported_) destroy_buffer(device_, buffer);
}

std::optional<HostImports::Resolved> HostImports::resolve(const void* ptr, size_t bytes) {
  const VkDeviceSize alignment = device_.host_import_alignment();
  uintptr_t start = 0;
  size_t size = 0;
  if (alignment == 0 || !pinned_allocator().find_block(ptr, bytes, &start, &size)) return std::nullopt;
  const VkDeviceSize offset = reinterpret_cast<uintptr_t>(ptr) - start;
  std::lock_guard lock(mutex_);
  if (auto it = imported_.find(start); it != imported_.end()) return Resolved{it->second.buffer, offset};
  if (refused_.count(start) || start % alignment != 0 || size % alignment != 0) return std::nullopt;
  VulkanBuffer buffer;
  if (!import(start, size, &buffer)) {
    refused_.insert(start);
    return std::nullopt;
  }
  imported_.emplace(start, buffer);
  return Resolved{buffer.buffer, offset};
}

size_t HostImports::imported_blocks() const {
  std::lock_guard lock(mutex_);
  return imported_.size();
}

// A transfer-only buffer over the block, bound to memory imported from its
// host pointer; a host-coherent memory type only, so no flushes are needed.
bool HostImports::import(uintptr_t start, size_t size, VulkanBuffer* out) const {
  VkDevice dev = device_.handle();
  void* host = reinterpret_cast<void*>(start);
  VkMemoryHostPointerPropertiesEXT pointer{VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
  if (api().vkGetMemoryHostPointerPropertiesEXT(dev, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, host,
                                                &pointer) != VK_SUCCESS)
    return false;
  VkExternalMemoryBufferCreateInfo external{VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO};
  external.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.pNext = &external;
  info.size = size;
  info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VulkanBuffer b;
  b.bytes = size;
  if (api().vkCreateBuffer(dev, &info, nullptr, &b.buffer) != VK_SUCCESS) return false;
  VkMemoryRequirements requirements;
  api().vkGetBufferMemoryRequirements(dev, b.buffer, &requirements);
  const VkMemoryPropertyFlags coherent = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int type = -1;
  for (uint32_t i = 0; i < 32 && type < 0; ++i) {
    const bool allowed = (requirements.memoryTypeBits & pointer.memoryTypeBits) & (1u << i);
    if (allowed && (device_.memory_type_flags(i) & coherent) == coherent) type = static_cast<int>(i);
  }
  VkImportMemoryHostPointerInfoEXT from_host{VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT};
  from_host.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  from_host.pHostPointer = host;
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.pNext = &from_host;
  alloc.allocationSize = size;
  alloc.memoryTypeIndex = static_cast<uint32_t>(type);
  bool ok = type >= 0 && requirements.size <= size;
  if (ok && api().vkAllocateMemory(dev, &alloc, nullptr, &b.memory) != VK_SUCCESS) {
    b.memory = VK_NULL_HANDLE;
    ok = false;
  }
  if (!ok || api().vkBindBufferMemory(dev, b.buffer, b.memory, 0) != VK_SUCCESS) {
    destroy_buffer(device_, b);
    return false;
  }
  *out = b;
  return true;
}

void HostImports::forget(uintptr_t start) {
  std::lock_guard lock(mutex_);
  refused_.erase(start);
  auto it = imported_.find(start);
  if (it == imported_.end()) return;
  destroy_buffer(device_, it->second);  // the block is idle: no copy uses it
  imported_.erase(it);
}

}  // namespace openneuron::hal

// One Vulkan instance and the logical devices the driver exposes: which
// physical devices qualify (a compute queue, buffer device addresses,
// timeline semaphores, 64-bit integers), their properties in the HAL's
// terms, their queues, memory types and the shared pipeline layout.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hal/drivers/vulkan/vulkan_api.h"
#include "hal/types.h"

namespace openneuron::hal {

class VulkanDevice {
 public:
  VulkanDevice(VkInstance instance, VkPhysicalDevice physical, int index);
  ~VulkanDevice();
  VulkanDevice(const VulkanDevice&) = delete;
  VulkanDevice& operator=(const VulkanDevice&) = delete;

  VkDevice handle() const { return device_; }
  int index() const { return index_; }
  const DeviceProperties& properties() const { return properties_; }

  // Memory types: device-local buffers, and host-visible coherent staging.
  uint32_t device_memory_type() const { return device_memory_type_; }
  uint32_t staging_memory_type() const { return staging_memory_type_; }
  VkMemoryPropertyFlags memory_type_flags(uint32_t type) const {
    return memory_properties_.memoryTypes[type].propertyFlags;
  }
  // Host memory the device can import (VK_EXT_external_memory_host): the
  // alignment its pointer and size need; 0 when it cannot.
  VkDeviceSize host_import_alignment() const { return host_import_alignment_; }
  // Nanoseconds per timestamp tick.
  double timestamp_period() const { return timestamp_period_; }
  uint32_t max_workgroups(int axis) const { return max_workgroups_[axis]; }

  // The hardware queues of the compute family; HAL queues share them
  // round-robin. submit() serialises access to each, as Vulkan requires.
  uint32_t queue_family() const { return queue_family_; }
  int hardware_queue_count() const { return static_cast<int>(queues_.size()); }
  void submit(int hardware_queue, const VkSubmitInfo& info);
  // Until the hardware queue has nothing in flight (not even the driver's
  // own bookkeeping of a finished batch): before a command pool or a
  // semaphore that batches used is destroyed.
  void wait_idle(int hardware_queue);

  // Every kernel takes one push constant: the address of its arguments.
  VkPipelineLayout pipeline_layout() const { return pipeline_layout_; }
  VkPipelineCache pipeline_cache() const { return pipeline_cache_; }

 private:
  void choose_memory_types();
  void read_properties(int index);
  void load_pipeline_cache();
  void save_pipeline_cache() const;
  std::string pipeline_cache_path() const;

  VkPhysicalDevice physical_;
  int index_;
  VkDevice device_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  std::vector<VkQueue> queues_;
  std::vector<std::unique_ptr<std::mutex>> queue_mutexes_;
  uint32_t device_memory_type_ = 0, staging_memory_type_ = 0;
  VkPhysicalDeviceMemoryProperties memory_properties_{};
  VkDeviceSize host_import_alignment_ = 0;
  double timestamp_period_ = 1.0;
  uint32_t max_workgroups_[3] = {65535, 65535, 65535};
  uint8_t pipeline_cache_uuid_[VK_UUID_SIZE] = {};
  DeviceProperties properties_;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
};

// The instance and every qualifying device, in OPENNEURON_VULKAN_DEVICES
// order. Throws Error explaining why when no device qualifies.
class VulkanContext {
 public:
  VulkanContext();
  ~VulkanContext();
  int device_count() const { return static_cast<int>(devices_.size()); }
  VulkanDevice& device(int index) { return *devices_[index]; }
  const VulkanDevice& device(int index) const { return *devices_[index]; }

 private:
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  std::vector<std::unique_ptr<VulkanDevice>> devices_;
};

// Validation-layer messages (OPENNEURON_VULKAN_VALIDATION=1): how many were
// seen, and the first one not yet reported (empty when none); queues raise
// it at their next synchronize so a test sees the fault where it happened.
size_t vulkan_validation_message_count();
std::string take_vulkan_validation_message();

}  // namespace openneuron::hal

// Executables of the Vulkan driver: the entry points of a SPIR-V executable
// file (spirv_executable_file.h), each a compute pipeline created on its
// first dispatch through the device's pipeline cache.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hal/drivers/vulkan/spirv_executable_file.h"
#include "hal/drivers/vulkan/vulkan_api.h"
#include "hal/executable.h"

namespace openneuron::hal {

class VulkanDevice;

class VulkanExecutable : public Executable {
 public:
  // Throws Error naming `path` when it cannot be read.
  VulkanExecutable(VulkanDevice& device, int device_index, const std::string& path);
  ~VulkanExecutable() override;

  int entry(const std::string& name) override;
  const EntryInfo& entry_info(int index) const override;

  int device() const { return device_index_; }
  const std::string& path() const { return path_; }
  // The entry's pipeline, created on first use; throws Error naming the
  // entry and the executable when the driver rejects its SPIR-V.
  VkPipeline pipeline(int index);

 private:
  VulkanDevice& device_;
  int device_index_;
  std::string path_;
  std::vector<SpirvEntry> entries_;
  std::mutex mutex_;
  std::vector<VkPipeline> pipelines_;
};

// The executable of a dispatch, checked against the queue's device and the
// entry's metadata: throws InvalidArgumentError naming the entry and counts.
VulkanExecutable& checked_vulkan_executable(Executable& executable, int device, int entry,
                                            size_t bindings, size_t scalars);

}  // namespace openneuron::hal

#include "hal/drivers/vulkan/vulkan_executable.h"

#include "hal/drivers/vulkan/vulkan_device.h"
#include "hal/error.h"

namespace openneuron::hal {

using vk::api;

VulkanExecutable::VulkanExecutable(VulkanDevice& device, int device_index, const std::string& path)
    : device_(device), device_index_(device_index), path_(path),
      entries_(read_spirv_executable(path)), pipelines_(entries_.size(), VK_NULL_HANDLE) {}

VulkanExecutable::~VulkanExecutable() {
  for (VkPipeline p : pipelines_)
    if (p != VK_NULL_HANDLE) api().vkDestroyPipeline(device_.handle(), p, nullptr);
}

int VulkanExecutable::entry(const std::string& name) {
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].info.name == name) return static_cast<int>(i);
  throw Error("executable " + path_ + " has no entry point '" + name + "'");
}

const EntryInfo& VulkanExecutable::entry_info(int index) const {
  if (index < 0 || index >= static_cast<int>(entries_.size()))
    throw InvalidArgumentError("executable " + path_ + " has no entry " + std::to_string(index));
  return entries_[index].info;
}

VkPipeline VulkanExecutable::pipeline(int index) {
  std::lock_guard lock(mutex_);
  if (pipelines_[index] != VK_NULL_HANDLE) return pipelines_[index];
  const SpirvEntry& e = entries_[index];
  VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  module_info.codeSize = e.spirv.size() * 4;
  module_info.pCode = e.spirv.data();
  VkShaderModule module = VK_NULL_HANDLE;
  const std::string what = "kernel '" + e.info.name + "' of " + path_;
  vk::check(api().vkCreateShaderModule(device_.handle(), &module_info, nullptr, &module),
            "vkCreateShaderModule for " + what);
  VkComputePipelineCreateInfo info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  info.stage = VkPipelineShaderStageCreateInfo{VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.layout = device_.pipeline_layout();
  VkPipeline pipeline = VK_NULL_HANDLE;
  const VkResult r = api().vkCreateComputePipelines(device_.handle(), device_.pipeline_cache(), 1,
                                                    &info, nullptr, &pipeline);
  api().vkDestroyShaderModule(device_.handle(), module, nullptr);
  vk::check(r, "vkCreateComputePipelines for " + what);
  pipelines_[index] = pipeline;
  return pipeline;
}

VulkanExecutable& checked_vulkan_executable(Executable& executable, int device, int entry,
                                            size_t bindings, size_t scalars) {
  auto* exe = dynamic_cast<VulkanExecutable*>(&executable);
  if (exe == nullptr)
    throw InvalidArgumentError("dispatch: the executable was not loaded by the vulkan driver");
  check_dispatch(exe->entry_info(entry), exe->path(), exe->device(), device, bindings, scalars);
  return *exe;
}

}  // namespace openneuron::hal

// The Vulkan API, loaded at run time: libvulkan.so.1 is opened with dlopen
// so a machine without a Vulkan loader still imports OpenNeuron (the driver
// then reports why it is unavailable instead of failing to link).
// Only the entry points the driver uses are loaded, into one table.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace openneuron::hal::vk {

// Functions of the loader itself, resolved without an instance.
#define OPENNEURON_VK_GLOBAL_FUNCTIONS(X) \
  X(vkCreateInstance)                     \
  X(vkEnumerateInstanceExtensionProperties) \
  X(vkEnumerateInstanceLayerProperties)

// Functions resolved through the instance (device-level ones included:
// the loader's trampolines dispatch them to the right driver).
#define OPENNEURON_VK_INSTANCE_FUNCTIONS(X)   \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkGetDeviceProcAddr)                      \
  X(vkCreateDebugUtilsMessengerEXT)           \
  X(vkDestroyDebugUtilsMessengerEXT)

#define OPENNEURON_VK_DEVICE_FUNCTIONS(X) \
  X(vkDestroyDevice)                      \
  X(vkGetDeviceQueue)                     \
  X(vkDeviceWaitIdle)                     \
  X(vkQueueSubmit)                        \
  X(vkQueueWaitIdle)                      \
  X(vkCreateBuffer)                       \
  X(vkDestroyBuffer)                      \
  X(vkGetBufferMemoryRequirements)        \
  X(vkAllocateMemory)                     \
  X(vkFreeMemory)                         \
  X(vkBindBufferMemory)                   \
  X(vkMapMemory)                          \
  X(vkUnmapMemory)                        \
  X(vkGetBufferDeviceAddress)             \
  X(vkCreateCommandPool)                  \
  X(vkDestroyCommandPool)                 \
  X(vkAllocateCommandBuffers)             \
  X(vkFreeCommandBuffers)                 \
  X(vkBeginCommandBuffer)                 \
  X(vkEndCommandBuffer)                   \
  X(vkResetCommandBuffer)                 \
  X(vkCmdCopyBuffer)                      \
  X(vkCmdFillBuffer)                      \
  X(vkCmdPipelineBarrier)                 \
  X(vkCmdBindPipeline)                    \
  X(vkCmdPushConstants)                   \
  X(vkCmdDispatch)                        \
  X(vkCmdWriteTimestamp)                  \
  X(vkCmdResetQueryPool)                  \
  X(vkCreateSemaphore)                    \
  X(vkDestroySemaphore)                   \
  X(vkGetSemaphoreCounterValue)           \
  X(vkWaitSemaphores)                     \
  X(vkSignalSemaphore)                    \
  X(vkCreateQueryPool)                    \
  X(vkDestroyQueryPool)                   \
  X(vkGetQueryPoolResults)                \
  X(vkCreateShaderModule)                 \
  X(vkDestroyShaderModule)                \
  X(vkCreatePipelineLayout)               \
  X(vkDestroyPipelineLayout)              \
  X(vkCreateComputePipelines)             \
  X(vkDestroyPipeline)                    \
  X(vkCreatePipelineCache)                \
  X(vkDestroyPipelineCache)               \
  X(vkGetPipelineCacheData)              \
  X(vkGetMemoryHostPointerPropertiesEXT)

#define OPENNEURON_VK_DECLARE(name) PFN_##name name = nullptr;

struct Api {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  OPENNEURON_VK_GLOBAL_FUNCTIONS(OPENNEURON_VK_DECLARE)
  OPENNEURON_VK_INSTANCE_FUNCTIONS(OPENNEURON_VK_DECLARE)
  OPENNEURON_VK_DEVICE_FUNCTIONS(OPENNEURON_VK_DECLARE)
};

#undef OPENNEURON_VK_DECLARE

// The process's table, with the loader's global functions resolved. Throws
// Error saying why when there is no Vulkan loader on this machine.
Api& api();
// Resolves the instance-level functions (and device-level trampolines).
void load_instance_functions(VkInstance instance);

// "VK_ERROR_DEVICE_LOST" for a result code.
const char* result_name(VkResult result);
// Throws Error("vulkan: <what> failed: <result>") unless `result` is
// VK_SUCCESS; VK_ERROR_DEVICE_LOST says the device must be reset.
void check(VkResult result, const std::string& what);

}  // namespace openneuron::hal::vk

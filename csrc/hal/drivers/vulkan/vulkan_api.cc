#include "hal/drivers/vulkan/vulkan_api.h"

#include <dlfcn.h>

#include "hal/error.h"

namespace openneuron::hal::vk {

Api& api() {
  static Api* const table = [] {
    void* library = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) library = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      throw Error(std::string("no Vulkan loader on this machine (libvulkan.so.1: ") + dlerror() +
                  "); install one (Debian: libvulkan1 and a driver such as mesa-vulkan-drivers)");
    }
    auto* result = new Api();
    result->vkGetInstanceProcAddr =
        reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(library, "vkGetInstanceProcAddr"));
    if (result->vkGetInstanceProcAddr == nullptr)
      throw Error("the Vulkan loader has no vkGetInstanceProcAddr");
#define OPENNEURON_VK_LOAD(name) \
  result->name = reinterpret_cast<PFN_##name>(result->vkGetInstanceProcAddr(nullptr, #name));
    OPENNEURON_VK_GLOBAL_FUNCTIONS(OPENNEURON_VK_LOAD)
#undef OPENNEURON_VK_LOAD
    return result;
  }();
  return *table;
}

void load_instance_functions(VkInstance instance) {
  Api& table = api();
#define OPENNEURON_VK_LOAD(name) \
  table.name = reinterpret_cast<PFN_##name>(table.vkGetInstanceProcAddr(instance, #name));
  OPENNEURON_VK_INSTANCE_FUNCTIONS(OPENNEURON_VK_LOAD)
  OPENNEURON_VK_DEVICE_FUNCTIONS(OPENNEURON_VK_LOAD)
#undef OPENNEURON_VK_LOAD
}

const char* result_name(VkResult result) {
  switch (result) {
#define OPENNEURON_VK_RESULT(name) \
  case name:                       \
    return #name;
    OPENNEURON_VK_RESULT(VK_SUCCESS)
    OPENNEURON_VK_RESULT(VK_NOT_READY)
    OPENNEURON_VK_RESULT(VK_TIMEOUT)
    OPENNEURON_VK_RESULT(VK_INCOMPLETE)
    OPENNEURON_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    OPENNEURON_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    OPENNEURON_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    OPENNEURON_VK_RESULT(VK_ERROR_DEVICE_LOST)
    OPENNEURON_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    OPENNEURON_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    OPENNEURON_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    OPENNEURON_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    OPENNEURON_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    OPENNEURON_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    OPENNEURON_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    OPENNEURON_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    OPENNEURON_VK_RESULT(VK_ERROR_UNKNOWN)
    OPENNEURON_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    OPENNEURON_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    OPENNEURON_VK_RESULT(VK_ERROR_FRAGMENTATION)
    OPENNEURON_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    OPENNEURON_VK_RESULT(VK_ERROR_INVALID_SHADER_NV)
#undef OPENNEURON_VK_RESULT
    default:
      return "VkResult (unnamed)";
  }
}

void check(VkResult result, const std::string& what) {
  if (result == VK_SUCCESS) return;
  std::string message = "vulkan: " + what + " failed: " + result_name(result) + " (" +
                        std::to_string(static_cast<int>(result)) + ")";
  if (result == VK_ERROR_DEVICE_LOST)
    message += "; the device was lost (a driver fault or a kernel that ran too long)";
  throw Error(message);
}

}  // namespace openneuron::hal::vk

#include "hal/drivers/vulkan/vulkan_cooperative_matrix.h"

#include <cstdint>
#include <vector>

#include "hal/drivers/vulkan/vulkan_api.h"

namespace openneuron::hal::vk {
namespace {

struct CooperativeMatrixProperties {  // VkCooperativeMatrixPropertiesKHR
  VkStructureType sType = static_cast<VkStructureType>(1000506001);
  void* pNext = nullptr;
  uint32_t MSize = 0, NSize = 0, KSize = 0;
  uint32_t AType = 0, BType = 0, CType = 0, ResultType = 0;  // VkComponentTypeKHR
  VkBool32 saturatingAccumulation = VK_FALSE;
  uint32_t scope = 0;  // VkScopeKHR
};

using GetProperties = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, CooperativeMatrixProperties*);

constexpr uint32_t kFloat16 = 0, kFloat32 = 1;  // VK_COMPONENT_TYPE_FLOAT16_KHR, _FLOAT32_KHR
constexpr uint32_t kSubgroupScope = 3;           // VK_SCOPE_SUBGROUP_KHR

}  // namespace

bool has_float16_16x16x16_matrices(VkInstance instance, VkPhysicalDevice physical) {
  auto get = reinterpret_cast<GetProperties>(
      api().vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  if (get == nullptr) return false;
  uint32_t count = 0;
  if (get(physical, &count, nullptr) != VK_SUCCESS || count == 0) return false;
  std::vector<CooperativeMatrixProperties> shapes(count);
  if (get(physical, &count, shapes.data()) != VK_SUCCESS) return false;
  shapes.resize(count);
  for (const auto& s : shapes)
    if (s.MSize == 16 && s.NSize == 16 && s.KSize == 16 && s.AType == kFloat16 && s.BType == kFloat16 &&
        s.CType == kFloat32 && s.ResultType == kFloat32 && s.scope == kSubgroupScope && !s.saturatingAccumulation)
      return true;
  return false;
}

}  // namespace openneuron::hal::vk

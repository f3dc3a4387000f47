// VK_KHR_cooperative_matrix: which matrix shapes a device's matrix units
// (tensor cores, WMMA, XMX) offer, and the feature to enable. Debian
// bookworm's Vulkan headers (1.3.239) predate the extension, so its structs
// are declared here from the specification.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

namespace openneuron::hal::vk {

constexpr const char* kCooperativeMatrixExtension = "VK_KHR_cooperative_matrix";

struct CooperativeMatrixFeatures {  // VkPhysicalDeviceCooperativeMatrixFeaturesKHR
  VkStructureType sType = static_cast<VkStructureType>(1000506000);
  void* pNext = nullptr;
  VkBool32 cooperativeMatrix = VK_FALSE;
  VkBool32 cooperativeMatrixRobustBufferAccess = VK_FALSE;
};

// Whether `physical` runs the float16 product gemm_coop_f16 is written for
// (compiler/codegen/glsl_gemm_coop.h): 16x16x16 float16 A and B, float32
// C and result, at subgroup scope. `instance` resolves the query.
bool has_float16_16x16x16_matrices(VkInstance instance, VkPhysicalDevice physical);

}  // namespace openneuron::hal::vk

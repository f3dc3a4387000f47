#include "test_util.h"

#if OPENNEURON_HAL_VULKAN
#include <shaderc/shaderc.hpp>

#include <stdexcept>

namespace openneuron::hal::test_util {

std::vector<uint32_t> compile_glsl(const std::string& source, const std::string& name) {
  shaderc::Compiler compiler;
  shaderc::CompileOptions options;
  options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
  options.SetOptimizationLevel(shaderc_optimization_level_performance);
  auto result = compiler.CompileGlslToSpv(source, shaderc_compute_shader, name.c_str(), options);
  if (result.GetCompilationStatus() != shaderc_compilation_status_success)
    throw std::runtime_error("GLSL compile of " + name + " failed: " + result.GetErrorMessage());
  return {result.cbegin(), result.cend()};
}

}  // namespace openneuron::hal::test_util
#endif

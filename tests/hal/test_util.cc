#include "test_util.h"

#include <cstdlib>

namespace {

// Before any driver reads its settings: the vulkan driver runs with the
// validation layer (any message fails a test) and as two devices, so the
// multi-device tests run on one GPU (lavapipe) too. Set variables win.
const bool kTestEnvironment = [] {
  setenv("OPENNEURON_VULKAN_VALIDATION", "1", 0);
  setenv("OPENNEURON_VULKAN_DEVICES", "0,0", 0);
  return true;
}();

}  // namespace

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

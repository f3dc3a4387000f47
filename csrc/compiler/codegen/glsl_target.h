// The GLSL target: kernels for Vulkan devices (kernel_target "glsl", or
// "glsl_fp32" for devices without float64 shaders: there float64 values
// are refused, the ops run elsewhere, never narrowed). Each
// kernel group becomes one GLSL compute shader; build() compiles them to
// SPIR-V in process with shaderc and writes the Vulkan driver's executable
// file (hal/drivers/vulkan/spirv_executable_file.h).
#pragma once

#include "compiler/codegen/target.h"

namespace openneuron::compiler {

class GlslTarget : public Target {
 public:
  explicit GlslTarget(bool fp64) : fp64_(fp64) {}
  const char* name() const override { return fp64_ ? "glsl" : "glsl_fp32"; }
  std::string prelude() const override;
  GeneratedKernel kernel(const KernelGroup& group, const std::string& entry,
                         const std::vector<std::string>& symbols) const override;
  // Shaders are separate programs: no entry point calls another.
  bool combines_small_kernels() const override { return false; }
  std::string combined_launch(const CombinedLaunch& launch, const Schedule& schedule,
                              const std::vector<GeneratedKernel>& kernels,
                              size_t num_symbols) const override;
  void build(const std::string& source, const std::string& output) const override;
  std::array<int64_t, 3> launch_grid(const KernelGroup& group) const override;
  std::string library_source() const override;
  std::vector<std::pair<std::string, std::string>> cache_key_parts() const override;

 private:
  bool fp64_;
};

// GLSL compute source to SPIR-V for Vulkan 1.2 (shaderc, in process);
// throws CompileError with shaderc's messages and `name`.
std::vector<uint32_t> compile_glsl_to_spirv(const std::string& source, const std::string& name);

}  // namespace openneuron::compiler

#include "compiler/codegen/cpp_target.h"

#include "compiler/codegen/cpp_library.h"
#include "compiler/codegen/prelude.h"
#include "compiler/toolchain.h"

namespace openneuron::compiler {

std::string CppTarget::prelude() const { return kKernelPrelude; }

GeneratedKernel CppTarget::kernel(const KernelGroup& group, const std::string& entry,
                                  const std::vector<std::string>& symbols) const {
  return generate_kernel(group, entry, symbols);
}

std::string CppTarget::combined_launch(const CombinedLaunch& launch, const Schedule& schedule,
                                       const std::vector<GeneratedKernel>& kernels,
                                       size_t num_symbols) const {
  return combined_launch_source(launch, schedule, kernels, num_symbols);
}

void CppTarget::build(const std::string& source, const std::string& output) const {
  compile_shared_object(source, output);
}

std::array<int64_t, 3> CppTarget::launch_grid(const KernelGroup&) const {
  // One workgroup per thread the launch may use (OpenMP inside the kernel).
  return {0, 1, 1};
}

std::string CppTarget::library_source() const {
  return std::string(kCppLibrarySource) + kCppIndexingLibrarySource + kCppRandomLibrarySource;
}

std::vector<std::pair<std::string, std::string>> CppTarget::cache_key_parts() const {
  const Toolchain& tc = toolchain();
  return {{"compiler", tc.version}, {"flags", tc.flags}, {"cpu", tc.cpu_features}};
}

}  // namespace openneuron::compiler

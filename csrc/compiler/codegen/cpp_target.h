// The C++ target: kernels as C++ loop nests (cpp_kernel.h) built into a
// shared object by the system compiler (toolchain.h), for the CPU drivers.
#pragma once

#include "compiler/codegen/target.h"

namespace openneuron::compiler {

class CppTarget : public Target {
 public:
  const char* name() const override { return "cpp"; }
  std::string prelude() const override;
  GeneratedKernel kernel(const KernelGroup& group, const std::string& entry,
                         const std::vector<std::string>& symbols) const override;
  std::string combined_launch(const CombinedLaunch& launch, const Schedule& schedule,
                              const std::vector<GeneratedKernel>& kernels,
                              size_t num_symbols) const override;
  void build(const std::string& source, const std::string& output) const override;
  std::array<int64_t, 3> launch_grid(const KernelGroup& group) const override;
  std::string library_source() const override;
  std::vector<std::pair<std::string, std::string>> cache_key_parts() const override;
};

}  // namespace openneuron::compiler

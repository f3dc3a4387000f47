// A code-generation target: what the target-neutral IR, lowering and
// schedule become for one kind of device. The C++ target (cpp_target.h)
// serves the CPU drivers; a GLSL/SPIR-V target sits beside it for GPUs.
// compile.cc asks the target for every target-specific piece and nothing
// else; a new target implements this interface and registers in target.cc.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "compiler/codegen/combined_launch.h"
#include "compiler/codegen/cpp_kernel.h"

namespace openneuron::compiler {

class Target {
 public:
  virtual ~Target() = default;
  // Its name in the compile options ("target") and the plan JSON.
  virtual const char* name() const = 0;
  // Source that precedes every kernel of a library.
  virtual std::string prelude() const = 0;
  // One kernel group's entry point (with its metadata).
  virtual GeneratedKernel kernel(const KernelGroup& group, const std::string& entry,
                                 const std::vector<std::string>& symbols) const = 0;
  // Whether small kernels may share one entry point (combined_launch).
  virtual bool combines_small_kernels() const { return true; }
  // An entry point running several small kernels in one dispatch.
  virtual std::string combined_launch(const CombinedLaunch& launch, const Schedule& schedule,
                                      const std::vector<GeneratedKernel>& kernels,
                                      size_t num_symbols) const = 0;
  // Builds a library's source into the file `output` the driver loads;
  // throws CompileError with the tool's messages.
  virtual void build(const std::string& source, const std::string& output) const = 0;
  // Workgroups a dispatch of `group` runs, for the plan; 0 in x: as many as
  // the launching thread may use (the CPU target sizes it at launch).
  virtual std::array<int64_t, 3> launch_grid(const KernelGroup& group) const = 0;
  // Source of the target's kernel library (hand-written kernels such as
  // matmul; kernel_library() in compile.h builds it), empty if none.
  virtual std::string library_source() const { return ""; }
  // What besides the source decides the built library (tool, flags, the
  // machine it targets): the target's part of the kernel cache key.
  virtual std::vector<std::pair<std::string, std::string>> cache_key_parts() const = 0;
};

// The target named `name`; throws CompileError listing the known ones.
const Target& find_target(const std::string& name);

}  // namespace openneuron::compiler

// C++ code generation for one fused kernel group: a loop nest over the
// group's iteration space, the outer loop parallel (OpenMP), the innermost
// contiguous loop left to the C++ compiler to vectorise for the machine's
// SIMD. Sizes are symbolic kernel arguments, so one kernel serves all sizes.
#pragma once

#include <string>
#include <vector>

#include "compiler/passes/schedule.h"

namespace openneuron::compiler {

struct GeneratedKernel {
  std::string name;            // exported C symbol
  std::string source;          // the function (without the prelude)
  std::vector<Node*> buffers;  // argument order: buffers read, then written
  int num_outputs = 0;
};

// Kernel signature: void name(void** buffers, const int64_t* symbols,
// int64_t threads); symbols in the order of `symbols`.
GeneratedKernel generate_kernel(const KernelGroup& group, const std::string& name,
                                const std::vector<std::string>& symbols);

}  // namespace openneuron::compiler

// C++ code generation for one fused kernel group: a loop nest over the
// group's iteration space, the outer loop parallel (OpenMP), the innermost
// contiguous loop left to the C++ compiler to vectorise for the machine's
// SIMD. Sizes are symbolic kernel arguments, so one kernel serves all sizes.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/passes/schedule.h"

namespace openneuron::compiler {

// Largest row (elements over the reduced dims) whose costly values (softmax's
// exp) a row kernel keeps in a stack array between passes instead of
// computing them again; rows of symbolic length up to this size too.
constexpr int64_t kRowCacheMax = 8192;

struct GeneratedKernel {
  std::string name;            // exported C symbol
  std::string source;          // the function (without the prelude)
  std::vector<Node*> buffers;  // argument order: buffers read, then written
  int num_outputs = 0;
};

// Thrown when a root of a reduction group reads one of the group's
// reductions at another row than the one being computed (a view moved the
// index). The scheduler rules this out (Scheduler::reads_reductions_at_row);
// this is the writer's safety net for what its analysis approximates (pad):
// compile.cc then schedules again with that root in a kernel of its own.
struct FusionConflict : std::runtime_error {
  explicit FusionConflict(int root_id)
      : std::runtime_error("fusion conflict at node %" + std::to_string(root_id)), root(root_id) {}
  int root;
};

// Kernel signature: void name(void** buffers, const int64_t* symbols,
// int64_t threads); symbols in the order of `symbols`. Beside it, the
// entry's metadata (entry_info_source) the HAL checks each dispatch against.
GeneratedKernel generate_kernel(const KernelGroup& group, const std::string& name,
                                const std::vector<std::string>& symbols);

// `extern "C" const int64_t <name>_info[5]`: {bindings, scalars, workgroup
// size x, y, z}, the CPU drivers' EntryInfo (hal/drivers/host/host_executable.h).
std::string entry_info_source(const std::string& name, int bindings, int scalars);

}  // namespace openneuron::compiler

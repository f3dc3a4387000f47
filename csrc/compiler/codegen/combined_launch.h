// Small kernels that run back to back are launched as one: an entry point
// calls each in turn with its slice of the buffer list. A launch costs more
// than a small kernel's work (converting its arguments, the stream, the
// profiler event), and an optimizer step or a backward pass of a small model
// runs hundreds of them in a row.
#pragma once

#include <string>
#include <vector>

#include "compiler/codegen/cpp_kernel.h"
#include "compiler/passes/schedule.h"

namespace openneuron::compiler {

struct CombinedLaunch {
  std::string name;        // exported entry point
  std::vector<int> steps;  // consecutive kernel steps (indices into Schedule::steps), two or more
};

// Runs of consecutive kernel steps whose kernels each iterate over at most
// `kCombinedLaunchMaxElements` elements (a constant count). A run ends where
// a kernel's output takes over a buffer freed inside the run: the wrapper
// hands that memory over before the launch.
std::vector<CombinedLaunch> combine_small_kernels(const Schedule& s, const std::vector<GeneratedKernel>& kernels);

// The entry point's C++ source (after the kernels it calls), with its
// metadata; every kernel takes all `num_symbols` graph symbols.
std::string combined_launch_source(const CombinedLaunch& launch, const Schedule& s,
                                   const std::vector<GeneratedKernel>& kernels,
                                   size_t num_symbols);

constexpr int64_t kCombinedLaunchMaxElements = 65536;

}  // namespace openneuron::compiler

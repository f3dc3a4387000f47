// GLSL code generation for one fused kernel group (the GLSL target's
// counterpart of cpp_kernel.h). A pointwise kernel gives each invocation
// elements of a grid-stride loop over the group's shape; a reduction kernel
// gives each invocation whole rows, reduced in one pass per batch of
// reductions, as the C++ target's row kernel does. Sizes are symbolic
// arguments, so one kernel serves every size; any grid runs it correctly.
#pragma once

#include <string>
#include <vector>

#include "compiler/codegen/cpp_kernel.h"
#include "compiler/codegen/glsl_entry.h"
#include "compiler/passes/schedule.h"

namespace openneuron::compiler {

// Invocations per workgroup of every generated GLSL kernel.
constexpr int kGlslWorkgroupSize = 128;

// `fp64`: whether the device has float64 shaders. Without them a group
// computing float64 values raises UnsupportedError (the op runs elsewhere,
// never narrowed), and Python numbers arrive as floats.
GeneratedKernel generate_glsl_kernel(const KernelGroup& group, const std::string& name,
                                     const std::vector<std::string>& symbols, bool fp64);

}  // namespace openneuron::compiler

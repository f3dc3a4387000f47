// Kernels from the device's kernel library (the compiler target's
// hand-written kernels, compiler/codegen/target.h: matmul), loaded through
// the HAL like compiled kernels, and the ops that run on them.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "torch/aten/eager/eager_op.h"

namespace openneuron::integration {

// A handle for launch_compiled_kernel, or -1 when the device's kernel target
// has no library (or it failed to build: warned once).
int64_t library_kernel(c10::DeviceIndex device, const std::string& entry);

// mm, bmm, addmm, baddbmm (functional or out=) writing `out`, as computed by
// their meta functions, on the library's gemm; false (nothing done) for a
// dtype it lacks.
bool run_matmul(const EagerOp& op, c10::ArrayRef<c10::IValue> args, const at::Tensor& out,
                c10::DeviceIndex device);

}  // namespace openneuron::integration

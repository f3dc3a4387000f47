// Eager ops whose result size depends on the values (unique, bincount,
// repeat_interleave with a tensor of repeats) and
// masked_scatter, composed from device ops on drivers whose memory the host
// cannot address (they took the CPU fallback): sorts, scans, scatters and
// selects, with the size read back where it is the result's, as on CUDA.
// Shapes, dtypes and errors are the CPU kernel's; a call these do not cover
// (unique along a dim, complex values, a wrong call) is left to the CPU
// fallback, which raises the CPU's error for a wrong one.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs the op and returns true, or returns false having changed nothing.
bool run_counting_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openneuron::integration

// 2-d average pooling and its backward (avg_pool2d, and avg_pool1d through
// it), composed from device ops on drivers whose memory the host cannot
// address (they took the CPU fallback): the windows are a strided view of
// the zero-padded input (Tensor::unfold, no copy), summed in float32 for
// 16-bit inputs as the CPU, and divided by the CPU kernel's divisor per
// output position (padding counted or not, ceil_mode's last window clipped,
// divisor_override); the backward adds each output's share into a padded
// gradient, one strided view per kernel offset. A call these do not cover
// (bad sizes: the CPU fallback raises the CPU's error) is left alone.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs the op and returns true, or returns false having changed nothing.
bool run_avg_pool_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openneuron::integration

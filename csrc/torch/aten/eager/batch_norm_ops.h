// Batch normalization, forward and backward, composed from device ops on
// drivers whose memory the host cannot address (every CNN's BatchNorm took
// the CPU fallback there): native_batch_norm, _native_batch_norm_legit
// (with and without stats, no_training), _batch_norm_with_update and
// _batch_norm_no_update, native_batch_norm_backward and batch_norm_backward.
// Results follow the CPU kernel's: statistics over every dim but the
// channels (biased variance for the output, unbiased for running_var), the
// output as x * alpha + beta with alpha = invstd * weight and beta = bias -
// mean * alpha per channel, empty saved statistics in evaluation; 16-bit
// inputs computed in float32, with parameters of their dtype or float32
// (AMP's), saved statistics and parameter gradients in the parameters'
// dtype. Anything else (other dtypes, an empty input) is left to the CPU
// fallback, which raises the CPU's error for a wrong call.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs the op and returns true, or returns false having changed nothing.
bool run_batch_norm_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openneuron::integration

// float64 data moved, not computed, on a device without float64 shaders
// (many GPUs; OPENNEURON_VULKAN_FP64=0): copies, clones and fills are the
// same bits as int64 ones, so they run on int64 views of the same memory,
// where a generated kernel would declare float64 values and be refused.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Whether `t` is float64 data on a neuron device without float64 shaders.
bool float64_without_shaders(const at::Tensor& t);

// copy_, clone, zero_ and fill_.Scalar of such float64 tensors: runs the op
// and returns true, or returns false having changed nothing.
bool run_float64_as_bits(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openneuron::integration

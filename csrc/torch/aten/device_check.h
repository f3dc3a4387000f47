// The same-device check PyTorch generates for CUDA kernels, for neuron ops:
// a mismatch names the op, the argument and both devices.
#pragma once

#include <ATen/core/stack.h>

#include "torch/aten/op_info.h"

namespace openneuron::integration {

// Checks the op's arguments (the top of `stack`) and returns the index of the
// neuron device the op runs on.
c10::DeviceIndex check_devices(const OpInfo& info,
                               const c10::FunctionSchema& schema,
                               const torch::jit::Stack& stack);

}  // namespace openneuron::integration

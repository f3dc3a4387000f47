// Random ops on devices whose memory the host cannot address, as kernels of
// the device's kernel library (cpp_library_random.cc, glsl_library_random.cc)
// drawing Philox numbers from the neuron generator's (seed, offset), as
// CUDA does: uniform_, normal_, bernoulli (scalar and tensor p), random_
// with a range, and native_dropout. Numbers differ from the CPU's; a seed
// replays them. A bad argument (std < 0, from > to, p outside [0, 1]) is
// left to the CPU fallback, which raises the CPU's error.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs the op and returns true, or returns false having changed nothing
// (not one of these ops, or a dtype, argument or layout they do not take).
// Called before the op's generator is swapped for its CPU engine.
bool run_random_op(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack);

}  // namespace openneuron::integration

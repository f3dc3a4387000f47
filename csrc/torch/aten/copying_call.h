// Runs an op on CPU copies of its neuron arguments and brings the results
// back: the mechanics of the CPU-fallback path. Unlike ATen's generic
// cpu_fallback it writes back every argument the schema marks as written
// (batch norm's running stats too), returns the caller's own tensor for
// in-place and out= results, and keeps the strides the CPU kernel gave new
// results.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

void call_with_cpu_copies(const c10::OperatorHandle& op,
                          torch::jit::Stack* stack);

}  // namespace openneuron::integration

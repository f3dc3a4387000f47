// An eager op with no device kernel, run as PyTorch's own decomposition
// (torch._decomp, through openneuron/_eager_decompositions.py) on the
// device's tensors before the CPU fallback is considered: its ops dispatch
// to the device again. Random ops are left to the fallback.
// OPENNEURON_EAGER_DECOMPOSITIONS=0 turns it off.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs the op's decomposition and returns true; false (nothing changed)
// when it has none, it is already being decomposed on this thread, or the
// decomposition raised (the CPU fallback then runs the op, and raises the
// CPU's error for a bad call).
bool run_decomposition(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openneuron::integration

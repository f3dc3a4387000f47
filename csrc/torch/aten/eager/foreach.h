// Foreach ops (the optimizers' _foreach_add_, _foreach_lerp_, ...) on a
// device whose memory the host cannot address: each tensor of the lists
// goes through the matching per-tensor op (as PyTorch's own "slow" foreach
// kernels do), so it runs as that op's device kernel, not on CPU copies.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs `op` (an aten::_foreach_* op) per tensor and returns true, or returns
// false having changed nothing (no matching per-tensor op).
bool run_foreach_per_tensor(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openneuron::integration

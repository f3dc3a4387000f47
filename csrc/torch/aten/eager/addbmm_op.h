// addbmm(self, batch1, batch2, beta, alpha) and addbmm_ on drivers whose memory the host
// cannot address (it took the CPU fallback): one addmm of the batches laid
// side by side, batch1 as [n, B*m] and batch2 as [B*m, p], so the sum over
// the batch is the gemm's own reduction (the CPU adds one addmm per batch:
// the same sums, associated otherwise).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs the op and returns true, or returns false having changed nothing.
bool run_addbmm_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openneuron::integration

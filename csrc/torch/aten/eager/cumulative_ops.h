// cummax, cummin and logcumsumexp, composed from device ops on drivers
// whose memory the host cannot address (they took the CPU fallback): a
// Hillis-Steele scan, log2(n) rounds in which each element combines with
// the one s places before it (s = 1, 2, 4, ...). cummax/cummin keep the
// CPU kernel's choice: a later equal value wins (its index is the
// result's), a NaN wins and stays, the latest NaN's index; logcumsumexp
// combines by logaddexp (the same sums, associated otherwise than the
// CPU's sequential loop: within float rounding of it).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs the op and returns true, or returns false having changed nothing.
bool run_cumulative_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openneuron::integration

// Eager reductions along an index, composed from the library's scatter
// kernel on drivers whose memory the host cannot address (they took the
// CPU fallback): scatter_reduce (sum, prod, mean, amax, amin; with or
// without self), index_add (MoE token combining, GNN message passing) and
// index_reduce, functional, in place and out=. Each line along the dim is
// reduced in index order, as the CPU, so sums round as the CPU's.
// A call these do not cover (16-bit floats, bool, a wrong call) is left to
// the CPU fallback, which raises the CPU's error for a wrong one.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs the op and returns true, or returns false having changed nothing.
bool run_scatter_reduce_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openneuron::integration

// Eager ops that are device copies of views: constant_pad_nd (a fill and a
// copy of the overlap), flip (an index_select per dim, reversed indices),
// roll (two copies per dim), repeat (a copy into a view of the result that
// steps through the repeats). Shapes and errors from the op's meta function.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs the op and returns true, or returns false having changed nothing.
bool run_copy_op(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack);

}  // namespace openneuron::integration

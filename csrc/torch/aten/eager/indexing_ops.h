// Eager ops the compiler's IR cannot express, as kernels of the device's
// kernel library (compiler/codegen/cpp_library_indexing.cc): indexing
// (index_select, embedding and its backward, gather, scatter), nll_loss and
// its backward, cumsum/cumprod, argmax/argmin and max/min along a dim,
// arange/linspace, and stack as copies. Shapes, dtypes and argument errors
// come from the op's meta function; an index out of range raises at the
// call with the CPU's message (the kernel reports it; the op waits for it).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace openneuron::integration {

// Runs the op and returns true, or returns false having changed nothing
// (not one of these ops, or a dtype or layout the kernels lack).
bool run_library_op(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack);

}  // namespace openneuron::integration

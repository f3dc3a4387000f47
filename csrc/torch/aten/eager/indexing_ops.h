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

// The library's scatter kernel into `out` (in place) along `dim`: each
// line along dim in index order, as the CPU. max and min let a NaN on
// either side win (scatter_reduce's amax/amin). Returns false, having done
// nothing, when the device has no kernel for out's dtype (scatter_fits
// says so beforehand). An index out of
// range raises c10::IndexError.
enum class ScatterMode { assign = 0, add = 1, value = 2, multiply = 3, max = 4, min = 5 };
bool scatter_fits(const at::Tensor& out, const at::Tensor& index, int64_t dim);
bool scatter_on_device(const at::Tensor& out, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                       ScatterMode mode, double value = 0.0);

// Runs the op and returns true, or returns false having changed nothing
// (not one of these ops, or a dtype or layout the kernels lack).
bool run_library_op(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack);

}  // namespace openneuron::integration

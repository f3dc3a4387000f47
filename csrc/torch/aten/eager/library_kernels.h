// Kernels from the device's kernel library (the compiler target's
// hand-written kernels, compiler/codegen/target.h: matmul), loaded through
// the HAL like compiled kernels, and the ops that run on them.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <string>
#include <vector>

#include "torch/aten/eager/eager_op.h"

namespace openneuron::integration {

// A handle for launch_compiled_kernel, or -1 when the device's kernel target
// has no library (or it failed to build: warned once).
int64_t library_kernel(c10::DeviceIndex device, const std::string& entry);

// Helpers of the boxed handlers that run ops on the library's kernels
// (indexing_ops.cc, random_ops.cc):
// the entry suffix of a dtype (_f32, _f64, _i64, _i32, _i16, _i8, _u8), or nullptr;
const char* library_type_suffix(at::ScalarType t);
// a double's bits, as kernels take float scalars;
int64_t double_bits(double v);
// the op's arguments on the stack;
c10::ArrayRef<c10::IValue> op_args(const c10::OperatorHandle& op, const torch::jit::Stack* stack);
// the op's name with its overload ("aten::scatter_.src"), as handler
// tables key it;
std::string op_full_name(const c10::OperatorHandle& op);
// the arguments replaced by the op's results;
void finish_op(torch::jit::Stack* stack, size_t num_args, std::vector<at::Tensor> results);
// whether a kernel whose invocations loop `trips` times runs to the end on
// the device (lavapipe stops an invocation after 65535 trips).
bool loops_fit(c10::DeviceIndex device, int64_t trips);

// Held while a handler composes an op from other device ops: they are the
// op's own work, so a Python dispatch mode (the profiler's, a test's) sees
// the op, not them.
struct ComposedOpScope {
  c10::impl::ExcludeDispatchKeyGuard no_python{
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot})};
};

// mm, bmm, addmm, baddbmm (functional or out=) writing `out`, as computed by
// their meta functions, on the library's gemm; false (nothing done) for a
// dtype it lacks.
bool run_matmul(const EagerOp& op, c10::ArrayRef<c10::IValue> args, const at::Tensor& out,
                c10::DeviceIndex device);

}  // namespace openneuron::integration

// Which eager ops the compiler can make a device kernel for, and how their
// arguments map onto the single-op graph it compiles (see eager_kernel.h).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <string>

namespace openneuron::integration {

struct EagerOp {
  // Row: an op that reduces along a dim inside and keeps its input's shape
  // (softmax); the graph is its decomposition (eager_graph.cc).
  // Matmul: the device's library gemm (library_kernels.h).
  enum class Family { None, Pointwise, Reduction, Row, Matmul } family = Family::None;
  enum class Form { Functional, InPlace, Out } form = Form::Functional;
  std::string name;    // "aten::add_.Tensor"
  std::string target;  // the functional op the graph calls: "aten.add.Tensor"
  bool decomposed = false;  // a pointwise op written as its decomposition (decompositions.h)
  int out_arg = -1;    // the argument written: self (in-place) or out (out=)
  int dim_arg = -1;    // a reduction's dims ("dim"), and its "keepdim"
  int keepdim_arg = -1;
  int normalized_arg = -1;  // layer norm's "normalized_shape"
  int results = 1;          // tensors returned
  // ATen's C++ meta function (meta_functions.h); null: the dispatcher's Meta kernel.
  const c10::KernelFunction* meta_function = nullptr;
};

// The op's facts, computed once per op (Family::None: no device kernel).
const EagerOp& eager_op(const c10::OperatorHandle& op);

}  // namespace openneuron::integration

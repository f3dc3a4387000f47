// The ATen ops the compiler generates code for, by family. (What each
// pointwise op becomes in a kernel is the target's business:
// codegen/cpp_pointwise.h for the C++ target.)
#pragma once

#include <string>

namespace openneuron::compiler {

// Pointwise op: the IR name and the number of tensor operands.
struct PointwiseLowering {
  const char* ir_op;
  int arity;
  bool is_comparison;  // computes in the promoted input dtype, returns bool
};

// Returns nullptr when `aten_op` (e.g. "aten.add.Tensor") is not pointwise.
const PointwiseLowering* find_pointwise(const std::string& aten_op);
// True for ops the compiler means to generate (pointwise, reductions, views):
// when one of them is not lowered, the user is warned.
bool is_generated_family(const std::string& aten_op);

}  // namespace openneuron::compiler

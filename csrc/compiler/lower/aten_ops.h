// The ATen ops the compiler generates code for, by family, and the C++
// expression each pointwise op becomes in a kernel.
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
// A C++ expression for an IR pointwise op over operands a, b, c already in
// the compute type `ct`.
std::string pointwise_cpp(const std::string& ir_op, const std::string& ct, const std::string& a,
                          const std::string& b, const std::string& c);
// True for ops the compiler means to generate (pointwise, reductions, views):
// when one of them is not lowered, the user is warned.
bool is_generated_family(const std::string& aten_op);

}  // namespace openneuron::compiler

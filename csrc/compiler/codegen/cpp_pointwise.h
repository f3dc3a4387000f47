// The C++ expression each IR pointwise op becomes in a C++ target kernel.
#pragma once

#include <string>

namespace openneuron::compiler {

// A C++ expression for an IR pointwise op over operands a, b, c already in
// the compute type `ct`; throws CompileError for an op without a pattern.
std::string pointwise_cpp(const std::string& ir_op, const std::string& ct, const std::string& a,
                          const std::string& b, const std::string& c);

}  // namespace openneuron::compiler

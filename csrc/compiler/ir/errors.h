// Typed errors of the compiler. UnsupportedError means "this op or graph is
// not compiled": the front end runs it through eager kernels instead (or
// raises, in strict mode); CompileError means the input or the toolchain is
// broken.
#pragma once

#include <stdexcept>
#include <string>

namespace openneuron::compiler {

class CompileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class UnsupportedError : public CompileError {
 public:
  using CompileError::CompileError;
};

// An op of a generated family that runs as an extern kernel by design (a
// copy from host memory is the device's transfer): no fallback to report.
class ExternByDesign : public UnsupportedError {
 public:
  using UnsupportedError::UnsupportedError;
};

}  // namespace openneuron::compiler

// The text every generated kernel source starts with: element types the C++
// standard lacks (bfloat16), and the scalar helpers kernels call, with
// PyTorch's semantics (NaN-propagating max/min, Python-style floor division).
#pragma once

namespace openneuron::compiler {

extern const char* const kKernelPrelude;

}  // namespace openneuron::compiler

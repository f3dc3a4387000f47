// Element types of the IR, named as PyTorch names them (without "torch.").
#pragma once

#include <string>

namespace openneuron::compiler {

enum class DType { Bool, UInt8, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64, Complex64, Complex128 };

DType dtype_from_name(const std::string& name);  // throws UnsupportedError
const char* dtype_name(DType d);
bool is_floating(DType d);
bool is_integral(DType d);  // bool excluded
bool is_complex(DType d);
int itemsize(DType d);
// PyTorch's promotion of two dtypes of the same priority class.
DType promote(DType a, DType b);
// The dtype computation happens in for values of dtype d.
DType compute_dtype(DType d);

}  // namespace openneuron::compiler

#include "compiler/codegen/cpp_types.h"

#include "compiler/ir/errors.h"

namespace openneuron::compiler {

const char* storage_ctype(DType d) {
  switch (d) {
    case DType::Bool: return "uint8_t";  // GCC does not vectorise loads of bool
    case DType::UInt8: return "uint8_t";
    case DType::Int8: return "int8_t";
    case DType::Int16: return "int16_t";
    case DType::Int32: return "int32_t";
    case DType::Int64: return "int64_t";
    case DType::Float16: return "on_half";
    case DType::BFloat16: return "on_bfloat16";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Complex64:
    case DType::Complex128: break;
  }
  throw UnsupportedError("complex dtypes are not generated");
}

const char* compute_ctype(DType d) {
  switch (d) {
    case DType::Bool: return "bool";
    case DType::UInt8:
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64: return "int64_t";
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Complex64:
    case DType::Complex128: break;
  }
  throw UnsupportedError("complex dtypes are not generated");
}

}  // namespace openneuron::compiler

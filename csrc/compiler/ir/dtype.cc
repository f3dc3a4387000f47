#include "compiler/ir/dtype.h"

#include "compiler/ir/errors.h"

namespace openneuron::compiler {

namespace {
struct Info {
  DType dtype;
  const char* name;
  int size;
};
constexpr Info kInfo[] = {
    {DType::Bool, "bool", 1},
    {DType::UInt8, "uint8", 1},
    {DType::Int8, "int8", 1},
    {DType::Int16, "int16", 2},
    {DType::Int32, "int32", 4},
    {DType::Int64, "int64", 8},
    {DType::Float16, "float16", 2},
    {DType::BFloat16, "bfloat16", 2},
    {DType::Float32, "float32", 4},
    {DType::Float64, "float64", 8},
    {DType::Complex64, "complex64", 8},
    {DType::Complex128, "complex128", 16},
};
const Info& info(DType d) { return kInfo[static_cast<int>(d)]; }
}  // namespace

DType dtype_from_name(const std::string& name) {
  for (auto& i : kInfo)
    if (name == i.name) return i.dtype;
  throw UnsupportedError("unsupported dtype " + name);
}
const char* dtype_name(DType d) { return info(d).name; }
bool is_floating(DType d) {
  return d == DType::Float16 || d == DType::BFloat16 || d == DType::Float32 || d == DType::Float64;
}
bool is_complex(DType d) { return d == DType::Complex64 || d == DType::Complex128; }
bool is_integral(DType d) { return !is_floating(d) && !is_complex(d) && d != DType::Bool; }
int itemsize(DType d) { return info(d).size; }

DType compute_dtype(DType d) {
  if (d == DType::Float16 || d == DType::BFloat16) return DType::Float32;
  if (is_integral(d)) return DType::Int64;
  return d;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  auto rank = [](DType d) {
    if (d == DType::Bool) return 0;
    if (is_integral(d)) return 1;
    if (is_floating(d)) return 2;
    return 3;
  };
  if (rank(a) != rank(b)) return rank(a) > rank(b) ? a : b;
  if (is_floating(a)) {
    // float16 with bfloat16 promotes to float32, as in PyTorch.
    if ((a == DType::Float16 && b == DType::BFloat16) || (a == DType::BFloat16 && b == DType::Float16))
      return DType::Float32;
    return itemsize(a) >= itemsize(b) ? a : b;
  }
  if (is_integral(a)) {
    bool a_unsigned = a == DType::UInt8, b_unsigned = b == DType::UInt8;
    if (a_unsigned != b_unsigned) {
      DType s = a_unsigned ? b : a;
      return itemsize(s) > 1 ? s : DType::Int16;
    }
    return itemsize(a) >= itemsize(b) ? a : b;
  }
  return itemsize(a) >= itemsize(b) ? a : b;
}

}  // namespace openneuron::compiler

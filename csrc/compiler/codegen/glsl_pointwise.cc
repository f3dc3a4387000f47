#include "compiler/codegen/glsl_pointwise.h"

#include <map>
#include <set>

#include "compiler/codegen/op_pattern.h"
#include "compiler/ir/errors.h"

namespace openneuron::compiler {

std::string pointwise_glsl(const std::string& op, const std::string& ct, const std::string& a,
                           const std::string& b, const std::string& c) {
  static const std::map<std::string, std::string> patterns = {
      {"identity", "$a"},
      {"abs", "on_abs($a)"},
      {"neg", "(-$a)"},
      {"exp", "on_exp($a)"},
      {"exp2", "on_exp2($a)"},
      {"expm1", "on_expm1($a)"},
      {"log", "on_log($a)"},
      {"log2", "on_log2($a)"},
      {"log10", "on_log10($a)"},
      {"log1p", "on_log1p($a)"},
      {"sqrt", "on_sqrt($a)"},
      {"rsqrt", "on_div($t(1), on_sqrt($a))"},
      {"sin", "sin($a)"},
      {"cos", "cos($a)"},
      {"tan", "tan($a)"},
      {"tanh", "on_tanh($a)"},
      {"sinh", "on_sinh($a)"},
      {"cosh", "on_cosh($a)"},
      {"asin", "on_asin($a)"},
      {"acos", "on_acos($a)"},
      {"atan", "on_atan($a)"},
      {"asinh", "on_asinh($a)"},
      {"acosh", "on_acosh($a)"},
      {"atanh", "on_atanh($a)"},
      {"erf", "on_erf($a)"},
      {"erfc", "on_erfc($a)"},
      {"erfinv", "on_erfinv($a)"},
      {"lgamma", "on_lgamma($a)"},
      {"digamma", "on_digamma($a)"},
      {"sigmoid", "on_sigmoid($a)"},
      {"reciprocal", "on_div($t(1), $a)"},
      {"sign", "on_sign($a)"},
      {"floor", "on_floor($a)"},
      {"ceil", "on_ceil($a)"},
      {"trunc", "on_trunc($a)"},
      {"round", "on_round($a)"},
      {"relu", "($a < $t(0) ? $t(0) : $a)"},
      {"frac", "($a - on_trunc($a))"},
      {"logical_not", "(!($a != $t(0)))"},
      {"bitwise_not", "on_bitwise_not($a)"},
      {"isnan", "($a != $a)"},
      {"add", "($a + $b)"},
      {"sub", "($a - $b)"},
      {"mul", "($a * $b)"},
      {"div", "on_div($a, $b)"},
      {"div_trunc", "on_div_trunc($a, $b)"},
      {"div_floor", "on_div_floor($a, $b)"},
      {"maximum", "on_maximum($a, $b)"},
      {"minimum", "on_minimum($a, $b)"},
      {"pow", "on_pow($a, $b)"},
      {"fmod", "on_fmod($a, $b)"},
      {"remainder", "on_remainder($a, $b)"},
      {"atan2", "atan($a, $b)"},
      {"hypot", "on_hypot($a, $b)"},
      {"eq", "($a == $b)"},
      {"ne", "($a != $b)"},
      {"lt", "($a < $b)"},
      {"le", "($a <= $b)"},
      {"gt", "($a > $b)"},
      {"ge", "($a >= $b)"},
      {"logical_and", "(($a != $t(0)) && ($b != $t(0)))"},
      {"logical_or", "(($a != $t(0)) || ($b != $t(0)))"},
      {"logical_xor", "(($a != $t(0)) != ($b != $t(0)))"},
      {"bitwise_and", "on_bitwise_and($a, $b)"},
      {"bitwise_or", "on_bitwise_or($a, $b)"},
      {"bitwise_xor", "on_bitwise_xor($a, $b)"},
      {"where", "($a ? $b : $c)"},
  };
  // GLSL has these in float32 only, and the prelude has no float64 versions
  // of them (it has exp, log, pow, tanh and their kin: glsl_prelude_fp64.cc).
  static const std::set<std::string> float_only = {"sin",  "cos",  "tan",   "asin",  "acos", "atan",
                                                   "asinh", "acosh", "atanh", "erf", "erfc", "atan2",
                                                   "hypot", "erfinv", "lgamma", "digamma"};
  // Integer operands of ops GLSL defines on floats only.
  static const std::set<std::string> no_integer = {"isnan"};
  if (op == "signbit")  // the sign bit itself: set for -0.0 and negative NaN
    return ct == "float"    ? fill_op_pattern("((floatBitsToUint($a) >> 31) != 0u)", ct, a, b, c)
           : ct == "double" ? fill_op_pattern("((unpackDouble2x32($a).y >> 31) != 0u)", ct, a, b, c)
           : ct == "bool"   ? "false"
                            : fill_op_pattern("($a < $t(0))", ct, a, b, c);
  if (const std::string shift = shift_pattern(op); !shift.empty()) return fill_op_pattern(shift, ct, a, b, c);
  auto it = patterns.find(op);
  if (it == patterns.end()) throw UnsupportedError("no GLSL pattern for pointwise op " + op);
  if (ct == "double" && float_only.count(op))
    throw UnsupportedError("float64 " + op + " has no GLSL kernel (GLSL computes it in float32 only)");
  if ((ct == "int64_t" || ct == "bool") && no_integer.count(op)) return "false";
  if (ct == "bool" && (op == "add" || op == "mul" || op == "sub"))
    return fill_op_pattern(op == "mul" ? "($a && $b)" : op == "add" ? "($a || $b)" : "($a != $b)", ct, a, b, c);
  if (ct == "bool" && (op == "neg" || op == "relu" || op == "floor" || op == "ceil" || op == "trunc" ||
                       op == "round" || op == "sign"))
    return a;
  if (ct == "bool" && (op == "lt" || op == "le" || op == "gt" || op == "ge" || op == "maximum" ||
                       op == "minimum" || op == "div" || op == "pow" || op == "frac"))
    throw UnsupportedError("bool " + op + " has no GLSL kernel");
  return fill_op_pattern(it->second, ct, a, b, c);
}

const char* glsl_compute_type(DType d) {
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
    default: break;
  }
  throw UnsupportedError("complex dtypes are not generated");
}

const char* glsl_storage_type(DType d) {
  switch (d) {
    case DType::Bool: return "uint8_t";
    case DType::UInt8: return "uint8_t";
    case DType::Int8: return "int8_t";
    case DType::Int16: return "int16_t";
    case DType::Int32: return "int32_t";
    case DType::Int64: return "int64_t";
    case DType::Float16: return "float16_t";
    case DType::BFloat16: return "uint16_t";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    default: break;
  }
  throw UnsupportedError("complex dtypes are not generated");
}

}  // namespace openneuron::compiler

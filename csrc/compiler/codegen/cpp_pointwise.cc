#include "compiler/codegen/cpp_pointwise.h"

#include <map>

#include "compiler/codegen/op_pattern.h"
#include "compiler/ir/errors.h"

namespace openneuron::compiler {

std::string pointwise_cpp(const std::string& op, const std::string& ct, const std::string& a,
                          const std::string& b, const std::string& c) {
  static const std::map<std::string, std::string> patterns = {
      {"identity", "$a"},
      {"abs", "on_abs($a)"},
      {"neg", "(-$a)"},
      {"exp", "on_exp($a)"},
      {"exp2", "std::exp2($a)"},
      {"expm1", "std::expm1($a)"},
      {"log", "std::log($a)"},
      {"log2", "std::log2($a)"},
      {"log10", "std::log10($a)"},
      {"log1p", "std::log1p($a)"},
      {"sqrt", "std::sqrt($a)"},
      {"rsqrt", "(($t)1 / std::sqrt($a))"},
      {"sin", "std::sin($a)"},
      {"cos", "std::cos($a)"},
      {"tan", "std::tan($a)"},
      {"tanh", "std::tanh($a)"},
      {"sinh", "std::sinh($a)"},
      {"cosh", "std::cosh($a)"},
      {"asin", "std::asin($a)"},
      {"acos", "std::acos($a)"},
      {"atan", "std::atan($a)"},
      {"asinh", "std::asinh($a)"},
      {"acosh", "std::acosh($a)"},
      {"atanh", "std::atanh($a)"},
      {"erf", "std::erf($a)"},
      {"erfc", "std::erfc($a)"},
      {"erfinv", "on_erfinv($a)"},
      {"lgamma", "std::lgamma($a)"},
      {"digamma", "on_digamma($a)"},
      {"sigmoid", "(($t)1 / (($t)1 + on_exp(-$a)))"},
      {"reciprocal", "(($t)1 / $a)"},
      {"sign", "on_sign($a)"},
      {"floor", "on_floor($a)"},
      {"ceil", "on_ceil($a)"},
      {"trunc", "on_trunc($a)"},
      {"round", "on_round($a)"},
      {"relu", "($a < ($t)0 ? ($t)0 : $a)"},
      {"frac", "($a - std::trunc($a))"},
      {"logical_not", "(!($a != ($t)0))"},
      {"bitwise_not", "on_bitwise_not($a)"},
      {"isnan", "($a != $a)"},
      {"add", "($a + $b)"},
      {"sub", "($a - $b)"},
      {"mul", "($a * $b)"},
      {"div", "($a / $b)"},
      {"div_trunc", "on_div_trunc($a, $b)"},
      {"div_floor", "on_div_floor($a, $b)"},
      {"maximum", "on_maximum($a, $b)"},
      {"minimum", "on_minimum($a, $b)"},
      {"pow", "on_pow($a, $b)"},
      {"fmod", "on_fmod($a, $b)"},
      {"remainder", "on_remainder($a, $b)"},
      {"atan2", "std::atan2($a, $b)"},
      {"hypot", "std::hypot($a, $b)"},
      {"eq", "($a == $b)"},
      {"ne", "($a != $b)"},
      {"lt", "($a < $b)"},
      {"le", "($a <= $b)"},
      {"gt", "($a > $b)"},
      {"ge", "($a >= $b)"},
      {"logical_and", "(($a != ($t)0) && ($b != ($t)0))"},
      {"logical_or", "(($a != ($t)0) || ($b != ($t)0))"},
      {"logical_xor", "(($a != ($t)0) != ($b != ($t)0))"},
      {"bitwise_and", "on_bitwise_and($a, $b)"},
      {"bitwise_or", "on_bitwise_or($a, $b)"},
      {"bitwise_xor", "on_bitwise_xor($a, $b)"},
      {"where", "($a ? $b : $c)"},
  };
  if (op == "signbit")
    return ct == "float" || ct == "double" ? fill_op_pattern("on_signbit($a)", ct, a, b, c)
           : ct == "bool"                  ? "false"
                                           : fill_op_pattern("($a < ($t)0)", ct, a, b, c);
  if (const std::string shift = shift_pattern(op); !shift.empty()) return fill_op_pattern(shift, ct, a, b, c);
  auto it = patterns.find(op);
  if (it == patterns.end()) throw CompileError("no code pattern for pointwise op " + op);
  return fill_op_pattern(it->second, ct, a, b, c);
}

}  // namespace openneuron::compiler

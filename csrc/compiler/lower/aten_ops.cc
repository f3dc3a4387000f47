#include "compiler/lower/aten_ops.h"

#include <map>
#include <set>

#include "compiler/ir/errors.h"

namespace openneuron::compiler {

namespace {

// ATen op name without overload -> lowering.
const std::map<std::string, PointwiseLowering>& pointwise_table() {
  static const std::map<std::string, PointwiseLowering> table = {
      {"aten.abs", {"abs", 1, false}},       {"aten.neg", {"neg", 1, false}},
      {"aten.exp", {"exp", 1, false}},       {"aten.exp2", {"exp2", 1, false}},
      {"aten.expm1", {"expm1", 1, false}},   {"aten.log", {"log", 1, false}},
      {"aten.log2", {"log2", 1, false}},     {"aten.log10", {"log10", 1, false}},
      {"aten.log1p", {"log1p", 1, false}},   {"aten.sqrt", {"sqrt", 1, false}},
      {"aten.rsqrt", {"rsqrt", 1, false}},   {"aten.sin", {"sin", 1, false}},
      {"aten.cos", {"cos", 1, false}},       {"aten.tan", {"tan", 1, false}},
      {"aten.tanh", {"tanh", 1, false}},     {"aten.sinh", {"sinh", 1, false}},
      {"aten.cosh", {"cosh", 1, false}},     {"aten.asin", {"asin", 1, false}},
      {"aten.acos", {"acos", 1, false}},     {"aten.atan", {"atan", 1, false}},
      {"aten.asinh", {"asinh", 1, false}},   {"aten.acosh", {"acosh", 1, false}},
      {"aten.atanh", {"atanh", 1, false}},   {"aten.erf", {"erf", 1, false}},
      {"aten.erfc", {"erfc", 1, false}},     {"aten.sigmoid", {"sigmoid", 1, false}},
      {"aten.reciprocal", {"reciprocal", 1, false}}, {"aten.sign", {"sign", 1, false}},
      {"aten.floor", {"floor", 1, false}},   {"aten.ceil", {"ceil", 1, false}},
      {"aten.trunc", {"trunc", 1, false}},   {"aten.round", {"round", 1, false}},
      {"aten.relu", {"relu", 1, false}},     {"aten.frac", {"frac", 1, false}},
      {"aten.logical_not", {"logical_not", 1, true}},
      {"aten.bitwise_not", {"bitwise_not", 1, false}},
      {"aten.isnan", {"isnan", 1, true}},
      {"aten.add", {"add", 2, false}},       {"aten.sub", {"sub", 2, false}},
      {"aten.mul", {"mul", 2, false}},       {"aten.div", {"div", 2, false}},
      {"aten.maximum", {"maximum", 2, false}}, {"aten.minimum", {"minimum", 2, false}},
      {"aten.pow", {"pow", 2, false}},       {"aten.fmod", {"fmod", 2, false}},
      {"aten.remainder", {"remainder", 2, false}}, {"aten.atan2", {"atan2", 2, false}},
      {"aten.clamp_min", {"maximum", 2, false}}, {"aten.clamp_max", {"minimum", 2, false}},
      {"aten.eq", {"eq", 2, true}},  {"aten.ne", {"ne", 2, true}},
      {"aten.lt", {"lt", 2, true}},  {"aten.le", {"le", 2, true}},
      {"aten.gt", {"gt", 2, true}},  {"aten.ge", {"ge", 2, true}},
      {"aten.logical_and", {"logical_and", 2, true}},
      {"aten.logical_or", {"logical_or", 2, true}},
      {"aten.logical_xor", {"logical_xor", 2, true}},
      {"aten.bitwise_and", {"bitwise_and", 2, false}},
      {"aten.bitwise_or", {"bitwise_or", 2, false}},
      {"aten.bitwise_xor", {"bitwise_xor", 2, false}},
      {"aten.where", {"where", 3, false}},
  };
  return table;
}

std::string base_name(const std::string& aten_op) {
  // "aten.add.Tensor" -> "aten.add"
  auto first = aten_op.find('.');
  auto second = aten_op.find('.', first + 1);
  return second == std::string::npos ? aten_op : aten_op.substr(0, second);
}

std::string fill(const std::string& pattern, const std::string& ct, const std::string& a,
                 const std::string& b, const std::string& c) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '$' && i + 1 < pattern.size()) {
      char k = pattern[++i];
      out += k == 'a' ? a : k == 'b' ? b : k == 'c' ? c : k == 't' ? ct : "$";
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace

const PointwiseLowering* find_pointwise(const std::string& aten_op) {
  auto& table = pointwise_table();
  auto it = table.find(base_name(aten_op));
  return it == table.end() ? nullptr : &it->second;
}

bool is_generated_family(const std::string& aten_op) {
  static const std::set<std::string> others = {
      "aten.sum", "aten.mean", "aten.amax", "aten.amin", "aten.var", "aten.var_mean",
      "aten.prod", "aten.view", "aten._unsafe_view", "aten.reshape", "aten.permute",
      "aten.expand", "aten.unsqueeze", "aten.squeeze", "aten.slice", "aten.select",
      "aten.t", "aten.transpose", "aten.clone", "aten.copy", "aten._to_copy", "aten.full", "aten.full_like",
      "aten.scalar_tensor", "prims.convert_element_type", "aten.clamp", "aten.alias",
      "aten.split", "aten.split_with_sizes", "aten.unbind", "aten.arange", "aten.constant_pad_nd", "aten.cat"};
  return find_pointwise(aten_op) || others.count(base_name(aten_op));
}

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
  auto it = patterns.find(op);
  if (it == patterns.end()) throw CompileError("no code pattern for pointwise op " + op);
  return fill(it->second, ct, a, b, c);
}

}  // namespace openneuron::compiler

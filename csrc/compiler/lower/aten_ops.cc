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
      {"aten.erfinv", {"erfinv", 1, false}}, {"aten.lgamma", {"lgamma", 1, false}},
      {"aten.digamma", {"digamma", 1, false}},
      {"aten.reciprocal", {"reciprocal", 1, false}}, {"aten.sign", {"sign", 1, false}},
      {"aten.floor", {"floor", 1, false}},   {"aten.ceil", {"ceil", 1, false}},
      {"aten.trunc", {"trunc", 1, false}},   {"aten.round", {"round", 1, false}},
      {"aten.relu", {"relu", 1, false}},     {"aten.frac", {"frac", 1, false}},
      {"aten.logical_not", {"logical_not", 1, true}},
      {"aten.bitwise_not", {"bitwise_not", 1, false}},
      {"aten.isnan", {"isnan", 1, true}},    {"aten.signbit", {"signbit", 1, true}},
      {"aten.add", {"add", 2, false}},       {"aten.sub", {"sub", 2, false}},
      {"aten.mul", {"mul", 2, false}},       {"aten.div", {"div", 2, false}},
      {"aten.maximum", {"maximum", 2, false}}, {"aten.minimum", {"minimum", 2, false}},
      {"aten.pow", {"pow", 2, false}},       {"aten.fmod", {"fmod", 2, false}},
      {"aten.remainder", {"remainder", 2, false}}, {"aten.atan2", {"atan2", 2, false}},
      {"aten.hypot", {"hypot", 2, false}},
      {"aten.bitwise_left_shift", {"bitwise_shl", 2, false}}, {"aten.__lshift__", {"bitwise_shl", 2, false}},
      {"aten.bitwise_right_shift", {"bitwise_shr", 2, false}}, {"aten.__rshift__", {"bitwise_shr", 2, false}},
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
      "aten.split", "aten.split_with_sizes", "aten.unbind", "aten.arange", "aten.constant_pad_nd", "aten.cat",
      "aten.native_layer_norm", "aten.native_layer_norm_backward", "aten.select_backward",
      "aten.slice_scatter"};
  return find_pointwise(aten_op) || others.count(base_name(aten_op));
}

}  // namespace openneuron::compiler

#include "torch/aten/eager/eager_op.h"

#include <mutex>
#include <set>
#include <unordered_map>

#include "compiler/lower/aten_ops.h"
#include "torch/aten/eager/meta_functions.h"

namespace openneuron::integration {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_reduction(const std::string& base) {
  return base == "sum" || base == "mean" || base == "amax" || base == "amin" || base == "prod" ||
         base == "any" || base == "all" || base == "var" || base == "std" || base == "logsumexp";
}

// Pointwise ops written as their decompositions (decompositions.h), by
// "base.overload" or base.
bool is_decomposed_pointwise(const std::string& base, const std::string& overload) {
  static const std::set<std::string> names = {
      "gelu", "gelu_backward", "addcmul", "addcdiv", "lerp.Scalar", "lerp.Tensor", "masked_fill.Scalar",
      "masked_fill.Tensor", "silu", "silu_backward", "sigmoid_backward", "tanh_backward", "threshold",
      "threshold_backward", "hardtanh", "hardtanh_backward", "leaky_relu", "leaky_relu_backward", "elu",
      "elu_backward", "hardsigmoid", "hardsigmoid_backward", "hardswish", "hardswish_backward", "softplus",
      "softplus_backward", "mish", "rsub.Tensor", "rsub.Scalar", "logaddexp", "logaddexp2",
      "deg2rad", "rad2deg", "fmax", "fmin", "heaviside", "softshrink", "hardshrink",
      "softshrink_backward", "hardshrink_backward", "sinc", "logit", "nan_to_num", "isinf", "isposinf",
      "isneginf"};
  return names.count(base) || names.count(base + "." + overload);
}

bool is_row_op(const std::string& base) {
  return base == "_softmax" || base == "_log_softmax" || base == "_softmax_backward_data" ||
         base == "_log_softmax_backward_data" || base == "native_layer_norm" || base == "native_layer_norm_backward";
}

EagerOp classify(const c10::OperatorHandle& op) {
  EagerOp e;
  const auto& schema = op.schema();
  e.name = schema.name() + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
  const bool layer_norm = schema.name() == "aten::native_layer_norm" ||
                          schema.name() == "aten::native_layer_norm_backward";
  if (schema.name().rfind("aten::", 0) != 0 || (schema.returns().size() != 1 && !layer_norm)) return e;
  for (const auto& r : schema.returns())
    if (r.type()->kind() != c10::TypeKind::TensorType) return e;
  e.results = static_cast<int>(schema.returns().size());
  std::string base = schema.name().substr(6);
  std::string overload = schema.overload_name();
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto* alias = schema.arguments()[i].alias_info();
    if (!alias || !alias->isWrite()) continue;
    if (e.out_arg >= 0) return {};  // several outputs
    e.out_arg = static_cast<int>(i);
  }
  if (e.out_arg < 0) {
    if (schema.returns()[0].alias_info()) return {};  // a view
  } else if (schema.arguments()[e.out_arg].is_out()) {
    e.form = EagerOp::Form::Out;
    overload = overload == "out" ? "default" : ends_with(overload, "_out") ? overload.substr(0, overload.size() - 4)
                                                                          : overload;
  } else if (e.out_arg == 0 && ends_with(base, "_") && !ends_with(base, "__")) {
    e.form = EagerOp::Form::InPlace;
    base.pop_back();
  } else {
    return {};
  }
  // Ops that are not structured have no C++ meta function of their own:
  // the dispatcher's Meta kernel (C++ or PyTorch's Python one) stands in.
  auto meta = meta_functions().find(e.name);
  if (meta != meta_functions().end()) e.meta_function = &meta->second;
  e.target = "aten." + base + "." + (overload.empty() ? "default" : overload);
  // fill_(value) and zero_() are a full_like of the value stored into self.
  if ((base == "fill" && overload == "Scalar") || base == "zero") e.target = "aten.full_like.default";
  e.decomposed = is_decomposed_pointwise(base, overload);
  if (e.decomposed || compiler::find_pointwise(e.target) || base == "clamp" || base == "clone" || base == "copy" ||
      e.target == "aten.full_like.default") {
    e.family = EagerOp::Family::Pointwise;
  } else if (base == "mm" || base == "bmm" || base == "addmm" || base == "baddbmm" || base == "mv" ||
             base == "addmv" || base == "addr") {
    e.family = EagerOp::Family::Matmul;
  } else if (is_reduction(base) || is_row_op(base) || base == "linalg_vector_norm") {
    // var and std by correction only (the other overloads reach the
    // router as it, and var's lowering reads no `unbiased`).
    if ((base == "var" || base == "std") && overload != "correction") return e;
    e.family = is_row_op(base) ? EagerOp::Family::Row : EagerOp::Family::Reduction;
    e.decomposed = base == "linalg_vector_norm" || base == "std" || base == "logsumexp";
    for (size_t i = 0; i < schema.arguments().size(); ++i) {
      if (schema.arguments()[i].name() == "dim") e.dim_arg = static_cast<int>(i);
      if (schema.arguments()[i].name() == "keepdim") e.keepdim_arg = static_cast<int>(i);
      if (schema.arguments()[i].name() == "normalized_shape") e.normalized_arg = static_cast<int>(i);
    }
  }
  return e;
}

}  // namespace

const EagerOp& eager_op(const c10::OperatorHandle& op) {
  static std::mutex mutex;
  static auto* ops = new std::unordered_map<const void*, EagerOp>();  // by schema
  const void* key = &op.schema();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = ops->find(key);
  if (it == ops->end()) it = ops->emplace(key, classify(op)).first;
  return it->second;
}

}  // namespace openneuron::integration

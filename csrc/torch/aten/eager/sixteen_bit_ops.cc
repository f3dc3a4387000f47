#include "torch/aten/eager/sixteen_bit_ops.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "torch/aten/eager/library_kernels.h"
#include "torch/runtime/device.h"

namespace openneuron::integration {
namespace {

// Ops (name.overload) whose 16-bit calls may run in float32 (header).
bool widenable(const std::string& name) {
  static const std::unordered_set<std::string> ops = {
      "aten::sort", "aten::sort.stable", "aten::topk", "aten::argmax", "aten::argmin", "aten::max.dim",
      "aten::min.dim", "aten::median", "aten::median.dim", "aten::nanmedian", "aten::nanmedian.dim",
      "aten::kthvalue", "aten::cummax", "aten::cummin", "aten::logcumsumexp",
      "aten::scatter.src", "aten::scatter_.src", "aten::scatter.value", "aten::scatter_.value",
      "aten::scatter_add", "aten::scatter_add_", "aten::scatter_reduce.two", "aten::scatter_reduce_.two",
      "aten::index_add", "aten::index_add_", "aten::index_reduce", "aten::index_reduce_",
      "aten::index_copy", "aten::index_copy_",
      "aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward",
      "aten::upsample_nearest2d", "aten::upsample_nearest2d_backward", "aten::_upsample_nearest_exact2d",
      "aten::_upsample_nearest_exact2d_backward", "aten::upsample_bilinear2d",
      "aten::upsample_bilinear2d_backward", "aten::convolution", "aten::convolution_backward",
      "aten::linspace.out", "aten::arange.start_out"};
  return ops.count(name) > 0;
}

bool sixteen_bit(const at::Tensor& t) {
  return t.defined() && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16);
}

}  // namespace

bool run_sixteen_bit_in_float32(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!widenable(op_full_name(op))) return false;
  const auto& arguments = op.schema().arguments();
  c10::ArrayRef<c10::IValue> args = op_args(op, stack);
  // One 16-bit dtype among the floating tensor arguments, all on neuron devices.
  std::optional<at::ScalarType> narrow;
  for (const auto& a : args) {
    if (!a.isTensor() || !a.toTensor().defined() || !at::isFloatingType(a.toTensor().scalar_type())) continue;
    if (!sixteen_bit(a.toTensor())) return false;  // mixed with float32/64: the CPU's dtype error
    if (a.toTensor().device().type() != kNeuron || (narrow && *narrow != a.toTensor().scalar_type())) return false;
    narrow = a.toTensor().scalar_type();
  }
  if (!narrow) return false;
  torch::jit::Stack widened;
  std::vector<std::pair<at::Tensor, at::Tensor>> written;  // (argument, its float32 copy) the op writes
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].isTensor() || !sixteen_bit(args[i].toTensor())) {
      widened.push_back(args[i]);
      continue;
    }
    const at::Tensor& t = args[i].toTensor();
    at::Tensor wide = t.to(at::kFloat);
    const auto* alias = arguments[i].alias_info();
    if (alias && alias->isWrite()) written.emplace_back(t, wide);
    widened.emplace_back(std::move(wide));
  }
  {
    const ComposedOpScope composed;
    op.callBoxed(&widened);
  }
  for (auto& [argument, wide] : written) {
    if (argument.sizes() != wide.sizes()) argument.resize_(wide.sizes());  // out=, resized by the op
    argument.copy_(wide);
  }
  torch::jit::drop(*stack, args.size());
  for (auto& r : widened) {
    if (!r.isTensor() || !r.toTensor().defined()) {
      stack->push_back(std::move(r));
      continue;
    }
    at::Tensor t = r.toTensor();
    const auto it = std::find_if(written.begin(), written.end(), [&](const auto& w) { return w.second.is_same(t); });
    if (it != written.end()) stack->emplace_back(it->first);
    else stack->emplace_back(t.scalar_type() == at::kFloat ? t.to(*narrow) : t);
  }
  return true;
}

}  // namespace openneuron::integration

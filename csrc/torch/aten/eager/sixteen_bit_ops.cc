#include "torch/aten/eager/sixteen_bit_ops.h"

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <unordered_set>

#include "torch/aten/cuda_dtypes.h"
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
  // One 16-bit dtype among the floating tensor arguments, all on neuron
  // devices; float32/64 beside it is left to the CPU's dtype error.
  std::optional<at::ScalarType> narrow;
  for (const auto& a : op_args(op, stack)) {
    if (!a.isTensor() || !a.toTensor().defined() || !at::isFloatingType(a.toTensor().scalar_type())) continue;
    if (!sixteen_bit(a.toTensor())) return false;
    if (a.toTensor().device().type() != kNeuron || (narrow && *narrow != a.toTensor().scalar_type())) return false;
    narrow = a.toTensor().scalar_type();
  }
  if (!narrow) return false;
  const ComposedOpScope composed;
  return run_in_wider_dtype(op, stack);
}

}  // namespace openneuron::integration

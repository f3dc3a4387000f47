#include "torch/aten/eager/order_statistics_ops.h"

#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>

#include <string>

#include "torch/aten/eager/library_kernels.h"
#include "torch/runtime/device.h"

namespace openneuron::integration {
namespace {

using Args = c10::ArrayRef<c10::IValue>;
using at::Tensor;

enum class Statistic { median, nanmedian, kthvalue };

// The types the CPU kernels take (not bool, not complex), on a neuron device.
bool orderable(const Tensor& t) {
  return t.defined() && t.device().type() == kNeuron && t.scalar_type() != at::kBool && !t.is_complex() &&
         library_type_suffix(t.scalar_type()) != nullptr;
}

// Each line's rank in the stable ascending order of `line` (a keepdim
// tensor of ranks, int64, along `dim`).
Tensor ranks(const Tensor& lines, int64_t dim, Statistic s, int64_t k) {
  const int64_t n = lines.size(dim);
  c10::DimVector shape(lines.sizes().begin(), lines.sizes().end());
  shape[dim] = 1;
  const auto long_options = lines.options().dtype(at::kLong);
  if (s == Statistic::kthvalue) return at::full(shape, k - 1, long_options);
  if (!at::isFloatingType(lines.scalar_type())) return at::full(shape, (n - 1) / 2, long_options);
  const Tensor nans = at::isnan(lines).sum(dim, /*keepdim=*/true);
  if (s == Statistic::median)  // the first NaN, where a line has one: the last non-NaN's successor
    return at::where(nans > 0, n - nans, (n - 1) / 2);
  // nanmedian: the non-NaN values' median; a line of NaN gives its first.
  return at::clamp_min(n - 1 - nans, 0).div_(2, "floor");
}

// values (and indices) of the statistic along `dim`.
std::pair<Tensor, Tensor> along(const Tensor& self, int64_t dim, bool keepdim, Statistic s, int64_t k) {
  const Tensor lines = self.dim() == 0 ? self.unsqueeze(0) : self;
  const auto sorted = at::sort(lines, /*stable=*/true, dim, /*descending=*/false);
  const Tensor rank = ranks(lines, dim, s, k);
  Tensor values = std::get<0>(sorted).gather(dim, rank), indices = std::get<1>(sorted).gather(dim, rank);
  if (!keepdim || self.dim() == 0) {
    values = values.squeeze(dim);
    indices = indices.squeeze(dim);
  }
  return {values, indices};
}

// median(self) / nanmedian(self): the whole tensor's, values only.
bool whole(const c10::OperatorHandle& op, torch::jit::Stack* stack, Statistic s) {
  Args a = op_args(op, stack);
  const Tensor self = a[0].toTensor();
  if (!orderable(self) || self.numel() == 0) return false;
  finish_op(stack, a.size(), {along(self.reshape({-1}), 0, false, s, 0).first});
  return true;
}

// median.dim / nanmedian.dim (self, dim, keepdim), kthvalue (self, k, dim, keepdim).
bool with_dim(const c10::OperatorHandle& op, torch::jit::Stack* stack, Statistic s) {
  Args a = op_args(op, stack);
  const Tensor self = a[0].toTensor();
  const size_t dim_at = s == Statistic::kthvalue ? 2 : 1;
  if (!orderable(self)) return false;
  const int64_t rank = std::max<int64_t>(self.dim(), 1), dim_arg = a[dim_at].toInt();
  if (dim_arg < -rank || dim_arg >= rank) return false;
  const int64_t dim = c10::maybe_wrap_dim(dim_arg, rank);
  const int64_t n = self.dim() ? self.size(dim) : 1;
  const int64_t k = s == Statistic::kthvalue ? a[1].toInt() : 0;
  // The CPU's errors.
  TORCH_CHECK_INDEX(n > 0, s == Statistic::kthvalue ? "kthvalue" : "median", "(): Expected reduction dim ", dim,
                    " to have non-zero size.");
  TORCH_CHECK(s != Statistic::kthvalue || (k >= 1 && k <= n), "kthvalue(): selected number k out of range for dimension ",
              dim);
  auto [values, indices] = along(self, dim, a[dim_at + 1].toBool(), s, k);
  finish_op(stack, a.size(), {values, indices});
  return true;
}

}  // namespace

bool run_order_statistic_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = op_full_name(op);
  const bool whole_tensor = name == "aten::median" || name == "aten::nanmedian";
  const bool per_dim = name == "aten::median.dim" || name == "aten::nanmedian.dim" || name == "aten::kthvalue";
  if (!whole_tensor && !per_dim) return false;
  const Statistic s = name.rfind("aten::nanmedian", 0) == 0 ? Statistic::nanmedian
                      : name == "aten::kthvalue"              ? Statistic::kthvalue
                                                              : Statistic::median;
  const ComposedOpScope composed;
  return whole_tensor ? whole(op, stack, s) : with_dim(op, stack, s);
}

}  // namespace openneuron::integration

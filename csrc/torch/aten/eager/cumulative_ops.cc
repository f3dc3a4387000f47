#include "torch/aten/eager/cumulative_ops.h"

#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>

#include <optional>
#include <string>

#include "torch/aten/eager/library_kernels.h"
#include "torch/runtime/device.h"

namespace openneuron::integration {
namespace {

using Args = c10::ArrayRef<c10::IValue>;
using at::Tensor;

// One round of the scan: the first s elements of t kept, then `combined`
// (each later element combined with the one s places before it).
Tensor shifted_combine(const Tensor& t, int64_t dim, int64_t s, const Tensor& combined) {
  return at::cat({t.narrow(dim, 0, s), combined}, dim);
}

// The input's lines (a 0-dim input as one of one element) and the dim
// along them; nullopt where the op does not take the call (the CPU
// fallback raises the CPU's error for a dim out of range).
struct Lines {
  Tensor t;
  int64_t dim, n;
};
std::optional<Lines> lines_of(Args a, bool floating_only) {
  const Tensor self = a[0].toTensor();
  if (self.device().type() != kNeuron || self.is_complex() || self.scalar_type() == at::kBool ||
      library_type_suffix(self.scalar_type()) == nullptr ||
      (floating_only && !at::isFloatingType(self.scalar_type())))
    return std::nullopt;
  const int64_t rank = std::max<int64_t>(self.dim(), 1);
  if (a[1].toInt() < -rank || a[1].toInt() >= rank) return std::nullopt;
  const Tensor t = (self.dim() == 0 ? self.unsqueeze(0) : self).contiguous();
  const int64_t dim = c10::maybe_wrap_dim(a[1].toInt(), rank);
  return Lines{t, dim, t.size(dim)};
}

// A result in the input's shape (0-dim for a 0-dim input), dense and its
// own storage (a line of one element leaves the scan with the input's).
Tensor like_self(const Tensor& result, const Tensor& self) {
  const Tensor r = self.dim() == 0 ? result.squeeze(0) : result.contiguous();
  return r.is_alias_of(self) ? r.clone() : r;
}

// cummax (largest) / cummin (self, dim): values and int64 indices.
bool cumulative_extreme(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool largest) {
  Args a = op_args(op, stack);
  const std::optional<Lines> l = lines_of(a, /*floating_only=*/false);
  if (!l) return false;
  const int64_t dim = l->dim, n = l->n;
  c10::DimVector shape(l->t.dim(), 1);
  shape[dim] = n;
  Tensor values = l->t, indices = at::arange(n, l->t.options().dtype(at::kLong)).view(shape).expand(l->t.sizes());
  const bool floating = at::isFloatingType(values.scalar_type());
  for (int64_t s = 1; s < n; s *= 2) {
    const Tensor later = values.narrow(dim, s, n - s), earlier = values.narrow(dim, 0, n - s);
    Tensor later_wins = largest ? at::ge(later, earlier) : at::le(later, earlier);
    if (floating) later_wins = at::isnan(later).logical_or_(at::isnan(earlier).logical_not_().logical_and_(later_wins));
    const Tensor new_values = shifted_combine(values, dim, s, at::where(later_wins, later, earlier));
    indices = shifted_combine(indices, dim, s,
                              at::where(later_wins, indices.narrow(dim, s, n - s), indices.narrow(dim, 0, n - s)));
    values = new_values;
  }
  const Tensor self = a[0].toTensor();
  finish_op(stack, a.size(), {like_self(values, self), like_self(indices, self)});
  return true;
}

// logcumsumexp(self, dim), floating types.
bool log_cumulative_sum_exp(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args a = op_args(op, stack);
  const std::optional<Lines> l = lines_of(a, /*floating_only=*/true);
  if (!l) return false;
  Tensor values = l->t;
  for (int64_t s = 1; s < l->n; s *= 2)
    values = shifted_combine(values, l->dim, s,
                             at::logaddexp(values.narrow(l->dim, 0, l->n - s), values.narrow(l->dim, s, l->n - s)));
  finish_op(stack, a.size(), {like_self(values, a[0].toTensor())});
  return true;
}

}  // namespace

bool run_cumulative_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = op_full_name(op);
  if (name != "aten::cummax" && name != "aten::cummin" && name != "aten::logcumsumexp") return false;
  const ComposedOpScope composed;
  if (name == "aten::logcumsumexp") return log_cumulative_sum_exp(op, stack);
  return cumulative_extreme(op, stack, name == "aten::cummax");
}

}  // namespace openneuron::integration

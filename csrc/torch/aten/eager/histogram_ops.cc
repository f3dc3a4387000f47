#include "torch/aten/eager/histogram_ops.h"

#include <ATen/ATen.h>

#include <cmath>
#include <string>

#include "torch/aten/cuda_dtypes.h"
#include "torch/aten/eager/library_kernels.h"
#include "torch/runtime/device.h"

namespace openneuron::integration {
namespace {

using at::Tensor;

// histc(self, bins, min, max) of a floating tensor (header).
Tensor histc_of_floats(const Tensor& self, int64_t bins, double lo, double hi) {
  // The CPU kernel's checks and messages.
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  TORCH_CHECK(!(lo > hi), "torch.histc: max must be larger than min");
  if (lo == hi && self.numel() > 0) {
    const auto range = at::aminmax(self);
    lo = std::get<0>(range).item<double>();
    hi = std::get<1>(range).item<double>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histc: range of [", lo, ", ", hi, "] is not finite");
  const Tensor x = self.reshape({-1});
  // The bounds in the input's dtype; each element's bin from the linear
  // guess computed there (histc does not search the edges, as histogram
  // does), the top edge in the last bin.
  const Tensor low = at::scalar_tensor(lo, x.options()), high = at::scalar_tensor(hi, x.options());
  const Tensor in_range = x.ge(low).logical_and_(x.le(high));
  const Tensor pos = x.sub(low).mul(bins).div(high.sub(low)).nan_to_num(0).to(at::kLong).clamp(0, bins - 1);
  const Tensor chosen = pos.masked_select(in_range);
  return at::zeros({bins}, x.options()).index_add_(0, chosen, at::ones_like(chosen, x.options()));
}

}  // namespace

bool run_histogram_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (op_full_name(op) != "aten::histc") return false;
  c10::ArrayRef<c10::IValue> a = op_args(op, stack);
  const Tensor self = a[0].toTensor();
  if (self.device().type() != kNeuron || self.is_complex() || self.scalar_type() == at::kBool) return false;
  const ComposedOpScope composed;
  const int64_t bins = a[1].toInt();
  Tensor result = at::isIntegralType(self.scalar_type(), /*includeBool=*/false)
                      ? histc_of_integers(self, bins, a[2].toScalar(), a[3].toScalar())
                      : histc_of_floats(self, bins, a[2].toScalar().toDouble(), a[3].toScalar().toDouble());
  finish_op(stack, a.size(), {result});
  return true;
}

}  // namespace openneuron::integration

#include "torch/aten/eager/addbmm_op.h"

#include <ATen/ATen.h>

#include <string>

#include "torch/aten/eager/library_kernels.h"
#include "torch/runtime/device.h"

namespace openneuron::integration {

bool run_addbmm_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = op_full_name(op);
  const bool in_place = name == "aten::addbmm_";
  if (name != "aten::addbmm" && !in_place) return false;
  c10::ArrayRef<c10::IValue> a = op_args(op, stack);
  const at::Tensor self = a[0].toTensor(), batch1 = a[1].toTensor(), batch2 = a[2].toTensor();
  // Shapes and dtypes the CPU would reject: its error, through the fallback.
  if (batch1.dim() != 3 || batch2.dim() != 3 || batch1.size(0) != batch2.size(0) ||
      batch1.size(2) != batch2.size(1) || batch1.scalar_type() != self.scalar_type() ||
      batch2.scalar_type() != self.scalar_type() || batch1.device() != self.device() ||
      batch2.device() != self.device() || self.device().type() != kNeuron)
    return false;
  if (self.is_complex()) return false;  // the device gemm is real: complex keeps the fallback
  const ComposedOpScope composed;
  const int64_t b = batch1.size(0), n = batch1.size(1), m = batch1.size(2), p = batch2.size(2);
  const at::Tensor side_by_side = batch1.permute({1, 0, 2}).reshape({n, b * m});
  const at::Tensor stacked = batch2.reshape({b * m, p});
  if (in_place && (self.dim() != 2 || self.size(0) != n || self.size(1) != p)) return false;
  const at::Tensor result = at::addmm(self, side_by_side, stacked, a[3].toScalar(), a[4].toScalar());
  finish_op(stack, a.size(), {in_place ? self.copy_(result) : result});
  return true;
}

}  // namespace openneuron::integration

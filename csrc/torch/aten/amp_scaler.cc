// torch.amp.GradScaler's two ops, unscale_ (_amp_foreach_non_finite_check_
// and_unscale_) and update (_amp_update_scale_). On drivers the host cannot
// address they took the CPU fallback: every gradient copied to the CPU and
// back at each step of a mixed-precision training loop. Composed here from
// device ops, with CUDA's semantics (AmpKernels.cu); on host the CPU kernels
// keep running on host memory through the router.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "torch/aten/router.h"

namespace openneuron::integration {
namespace {

using at::Tensor;

void check_scalar_float(const Tensor& t, const char* name, const char* op) {
  TORCH_CHECK(t.numel() == 1, op, ": ", name, " must be a 1-element tensor, got ", t.numel(), " elements");
  TORCH_CHECK(t.scalar_type() == at::kFloat, op, ": ", name, " must be a float tensor, got ", t.scalar_type());
}

// found_inf becomes 1 when any gradient holds an inf or NaN (it is never
// cleared here: GradScaler zeroes it per optimizer); every gradient is
// multiplied by inv_scale, in float, rounded once to its dtype.
void unscale(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  if (host_addressable()) return route_boxed(op, keys, stack);
  constexpr const char* kOp = "_amp_foreach_non_finite_check_and_unscale_";
  auto args = torch::jit::last(*stack, 3);
  const std::vector<Tensor> grads = args[0].toTensorVector();
  Tensor found_inf = args[1].toTensor();
  const Tensor inv_scale = args[2].toTensor();
  check_scalar_float(found_inf, "found_inf", kOp);
  check_scalar_float(inv_scale, "inv_scale", kOp);
  if (!grads.empty()) {
    std::vector<Tensor> finite;
    finite.reserve(grads.size());
    for (const Tensor& g : grads) {
      TORCH_CHECK(g.device() == found_inf.device(), kOp, ": every gradient must be on ", found_inf.device(),
                  ", got one on ", g.device());
      TORCH_CHECK(at::isFloatingType(g.scalar_type()), kOp, ": gradients must be floating point, got ",
                  g.scalar_type());
      finite.push_back(at::isfinite(g).all());
    }
    found_inf.masked_fill_(at::stack(finite).all().logical_not(), 1.0);
    at::_foreach_mul_(grads, inv_scale);
  }
  torch::jit::drop(*stack, 3);
}

// A found inf multiplies the scale by the backoff factor and resets the
// growth tracker; otherwise the tracker counts the step, and at
// growth_interval steps the scale grows (when the grown scale is finite)
// and the tracker restarts. No host read: all of it stays on the device.
void update_scale(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  if (host_addressable()) return route_boxed(op, keys, stack);
  constexpr const char* kOp = "_amp_update_scale_";
  auto args = torch::jit::last(*stack, 6);
  Tensor scale = args[0].toTensor();
  Tensor tracker = args[1].toTensor();
  const Tensor found_inf = args[2].toTensor();
  const double growth = args[3].toDouble(), backoff = args[4].toDouble();
  const int64_t interval = args[5].toInt();
  check_scalar_float(scale, "current_scale", kOp);
  check_scalar_float(found_inf, "found_inf", kOp);
  TORCH_CHECK(tracker.numel() == 1 && tracker.scalar_type() == at::kInt, kOp,
              ": growth_tracker must be a 1-element int tensor, got ", tracker.scalar_type(), " with ",
              tracker.numel(), " elements");
  const Tensor found = found_inf.ne(0);
  const Tensor steps = tracker.add(1);
  const Tensor grown = scale.mul(growth);
  const Tensor grows = found.logical_not().logical_and(steps.eq(interval));
  Tensor new_scale = at::where(found, scale.mul(backoff), at::where(grows.logical_and(grown.isfinite()), grown, scale));
  Tensor new_tracker = at::where(found.logical_or(grows), at::zeros_like(steps), steps);
  scale.copy_(new_scale);
  tracker.copy_(new_tracker);
  torch::jit::drop(*stack, 6);
  torch::jit::push(*stack, scale);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", torch::CppFunction::makeFromBoxedFunction<&unscale>());
  m.impl("_amp_update_scale_", torch::CppFunction::makeFromBoxedFunction<&update_scale>());
}

}  // namespace
}  // namespace openneuron::integration

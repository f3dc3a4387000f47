// torch.autocast(device_type="neuron"): the same op policy as CUDA's, from
// ATen's shared lists (lower precision for matmul-like ops, float32 for
// numerically sensitive ones, widest type for mixed-input ops).
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace openneuron::integration {
namespace {

using at::Tensor;
using at::Scalar;
using at::ScalarType;
using at::IntArrayRef;

#define LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define FP32_OPT_DTYPE(...) \
  KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

// Ops off the lists run unchanged.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(::torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(LOWER)
  AT_FORALL_FP32(FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(FP32_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(
      KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(PROMOTE)
}

#undef LOWER
#undef FP32
#undef FP32_OPT_DTYPE
#undef PROMOTE

}  // namespace
}  // namespace openneuron::integration

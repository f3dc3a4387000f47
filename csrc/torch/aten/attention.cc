// scaled_dot_product_attention picks its algorithm through a per-device
// stub; devices without an entry get the slow "math" path, with numerics
// unlike CPU's. The neuron entry runs CPU's selection function itself (it
// only looks at shapes, strides, dtypes and flags), so neuron runs the same
// fused CPU kernels as CPU -- also while torch.compile traces with fake
// tensors, where dispatching the _fused_sdp_choice op would reach its meta
// kernel and always answer "math". A device the host cannot address takes
// its library's fused kernel where there is one (fused_attention.cc), else
// the math path: its matmuls, softmax and masking run as device kernels,
// where the fused CPU kernels would run on CPU copies.
#include <ATen/native/transformers/attention.h>
#include <ATen/SDPBackend.h>
#include <ATen/ops/_fused_sdp_choice_native.h>

#include "torch/aten/fused_attention.h"
#include "torch/aten/router.h"

namespace openneuron::integration {
namespace {

int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key,
                         const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask,
                         double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  if (!host_addressable())
    return static_cast<int64_t>(fused_attention_applies(query, key, value, attn_mask, dropout_p)
                                    ? at::SDPBackend::overrideable
                                    : at::SDPBackend::math);
  return at::native::_fused_sdp_choice_cpp(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                           enable_gqa);
}

}  // namespace
}  // namespace openneuron::integration

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub,
                              &openneuron::integration::fused_sdp_choice)
}  // namespace at::native

// The fused attention kernel's SDPA backend (fused_attention.cc).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace openneuron::integration {

// Whether scaled_dot_product_attention's "overrideable" backend (the fused
// kernel) takes this call on a neuron device; else the math path.
bool fused_attention_applies(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                             const std::optional<at::Tensor>& attn_mask, double dropout_p);

}  // namespace openneuron::integration

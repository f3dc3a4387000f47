// scaled_dot_product_attention as one fused kernel where the device's kernel
// library has one (the vulkan driver's GLSL library: attention_fwd_d*_f32):
// PyTorch's "overrideable" SDPA backend, the one meant for out-of-tree
// devices. The forward computes softmax(Q K^T * scale + mask) V and its
// logsumexp in one pass (scores never reach memory); the backward
// recomputes the probabilities with ATen ops on the device
// (attention_math.h). Calls the kernel does not cover (dropout, other
// dtypes, head dims past 128, grouped-query heads, tracing under
// torch.compile) take the math path, as before.
#include "torch/aten/fused_attention.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/core/DispatchKey.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>

#include "hal/driver.h"
#include "torch/aten/attention_math.h"
#include "torch/aten/eager/library_kernels.h"
#include "torch/runtime/compiled_kernels.h"

namespace openneuron::integration {
namespace {

constexpr int64_t kRowsPerWorkgroup = 64;

// The kernel of a head dim ("" past the largest).
std::string forward_entry(int64_t head_dim) {
  for (int64_t dmax : {32, 64, 128})
    if (head_dim <= dmax) return "attention_fwd_d" + std::to_string(dmax) + "_f32";
  return "";
}

int64_t workgroups_for(const at::Tensor& q4, c10::DeviceIndex device) {
  const int64_t groups = q4.size(0) * q4.size(1) * ((q4.size(2) + kRowsPerWorkgroup - 1) / kRowsPerWorkgroup);
  return std::max<int64_t>(1, std::min(groups, hal::driver().properties(device).max_workgroups));
}

// (B, H, L, D) views of 3-d (H, L, D) or 4-d inputs.
at::Tensor four_d(const at::Tensor& t) { return t.dim() == 3 ? t.unsqueeze(0) : t; }

// The mask as a float32 bias seen in (B, H, Lq, Lk) (broadcast strides).
at::Tensor bias_of(const at::Tensor& mask, const at::Tensor& q4, const at::Tensor& k4) {
  at::Tensor bias = mask.scalar_type() == at::kBool
                        ? at::zeros({}, q4.options()).masked_fill(mask.logical_not(),
                                                                   -std::numeric_limits<float>::infinity())
                        : mask.to(at::kFloat);
  return bias.expand({q4.size(0), q4.size(1), q4.size(2), k4.size(2)});
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
           at::Tensor>
fused_attention_forward(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                        const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                        bool return_debug_mask, std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0 && !return_debug_mask,
              "_scaled_dot_product_fused_attention_overrideable on neuron: no dropout or debug mask "
              "(scaled_dot_product_attention takes the math path for them)");
  const c10::DeviceIndex device = query.device().index();
  const at::Tensor q4 = four_d(query), k4 = four_d(key), v4 = four_d(value);
  const int64_t B = q4.size(0), H = q4.size(1), Lq = q4.size(2), Lk = k4.size(2), D = q4.size(3),
                Dv = v4.size(3);
  const int64_t kernel = library_kernel(device, forward_entry(std::max(D, Dv)));
  TORCH_CHECK(kernel >= 0, "_scaled_dot_product_fused_attention_overrideable: no fused kernel on ", query.device(),
              " for head dim ", std::max(D, Dv));
  std::vector<int64_t> out_shape = query.sizes().vec();
  out_shape.back() = Dv;
  at::Tensor out = at::empty(out_shape, query.options());
  at::Tensor lse = at::empty({B, H, Lq}, query.options().dtype(at::kFloat));
  const at::Tensor o4 = four_d(out);
  at::Tensor bias;
  if (attn_bias && attn_bias->defined()) bias = bias_of(*attn_bias, q4, k4);
  const double s = scale.value_or(attention_math::default_scale(query));
  int64_t scale_bits;
  std::memcpy(&scale_bits, &s, sizeof scale_bits);
  std::vector<int64_t> scalars = {B, H, Lq, Lk, D, Dv};
  for (const at::Tensor* t : {&q4, &k4, &v4, &o4})
    for (int d = 0; d < 4; ++d) scalars.push_back(t->stride(d));
  for (int d = 0; d < 3; ++d) scalars.push_back(lse.stride(d));
  for (int d = 0; d < 4; ++d) scalars.push_back(bias.defined() ? bias.stride(d) : 0);
  scalars.insert(scalars.end(), {scale_bits, is_causal ? 1 : 0, bias.defined() ? 1 : 0});
  if (out.numel() > 0)
    launch_compiled_kernel(kernel, {q4, k4, v4, o4, lse, bias.defined() ? bias : o4}, scalars,
                           workgroups_for(q4, device));
  const at::Tensor seed = at::empty({}, query.options().dtype(at::kLong).device(at::kCPU));
  return {out, lse, at::Tensor(), at::Tensor(), c10::SymInt(Lq), c10::SymInt(Lk), seed, seed.clone(), at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k, int64_t max_q,
    int64_t max_k, double dropout_p, bool is_causal, const at::Tensor& philox_seed,
    const at::Tensor& philox_offset, std::optional<double> scale) {
  TORCH_CHECK(dropout_p == 0.0, "_scaled_dot_product_fused_attention_overrideable_backward on neuron: no dropout");
  attention_math::Problem p;
  p.q = four_d(query), p.k = four_d(key), p.v = four_d(value);
  if (attn_bias.defined()) p.bias = bias_of(attn_bias, p.q, p.k);
  p.causal = is_causal ? attention_math::Causal::upper_left : attention_math::Causal::none;
  p.scale = scale.value_or(attention_math::default_scale(query));
  p.dropout_p = 0.0;
  p.seed = 0;
  const bool bias_grad = grad_input_mask[3] && attn_bias.defined() && attn_bias.scalar_type() != at::kBool;
  attention_math::Grads g = attention_math::gradients(p, four_d(grad_out), bias_grad);
  auto back = [&](const at::Tensor& grad, const at::Tensor& like) { return like.dim() == 3 ? grad.squeeze(0) : grad; };
  // The bias's gradient comes in the expanded (B, H, Lq, Lk) shape.
  at::Tensor grad_bias = bias_grad ? g.bias.sum_to_size(attn_bias.sizes()).to(attn_bias.scalar_type()) : at::Tensor();
  return {back(g.q, query), back(g.k, key), back(g.v, value), grad_bias};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(fused_attention_forward));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(fused_attention_backward));
}

}  // namespace

bool fused_attention_applies(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                             const std::optional<at::Tensor>& attn_mask, double dropout_p) {
  if (!at::globalContext().userEnabledOverrideableSDP() || dropout_p != 0.0) return false;
  // Traced calls (fake and functional tensors under torch.compile) keep the
  // math path: the compiler lowers its ops.
  for (const at::Tensor* t : {&query, &key, &value})
    if (t->key_set().has(c10::DispatchKey::Python) || t->key_set().has(c10::DispatchKey::Functionalize) ||
        t->scalar_type() != at::kFloat || t->dim() != query.dim() || t->device() != query.device())
      return false;
  if (query.dim() != 3 && query.dim() != 4) return false;
  if (key.size(-3) != query.size(-3) || value.size(-3) != query.size(-3) || key.size(-2) != value.size(-2) ||
      key.size(-1) != query.size(-1) || (query.dim() == 4 && (key.size(0) != query.size(0) ||
                                                               value.size(0) != query.size(0))))
    return false;  // grouped-query heads (enable_gqa) and broadcast batches: the math path
  if (attn_mask && attn_mask->defined()) {
    const at::ScalarType t = attn_mask->scalar_type();
    if ((t != at::kFloat && t != at::kBool) || attn_mask->device() != query.device()) return false;
    std::vector<int64_t> full = {query.dim() == 4 ? query.size(0) : 1, query.size(-3), query.size(-2), key.size(-2)};
    if (!at::is_expandable_to(attn_mask->sizes(), full)) return false;
  }
  const c10::DeviceIndex device = query.device().index();
  const std::string entry = forward_entry(std::max(query.size(-1), value.size(-1)));
  if (entry.empty() || library_kernel(device, entry) < 0) return false;
  // Each invocation's loop trips: its rows' workgroups times the key tiles
  // and their keys (lavapipe stops an invocation past 65535).
  const at::Tensor q4 = four_d(query);
  const int64_t groups = q4.size(0) * q4.size(1) * ((q4.size(2) + kRowsPerWorkgroup - 1) / kRowsPerWorkgroup);
  const int64_t workgroups = workgroups_for(q4, device);
  const int64_t per_invocation = (groups + workgroups - 1) / workgroups;
  return loops_fit(device, per_invocation * ((key.size(-2) + 15) / 16) * 17);
}

}  // namespace openneuron::integration

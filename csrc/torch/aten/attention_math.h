// Attention computed with ATen ops on the tensors' device, in float32:
// the reference that CUDA's attention ops on neuron (cuda_attention.cc)
// and the fused kernel's backward (fused_attention.cc) share.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace openneuron::integration::attention_math {

enum class Causal { none = 0, upper_left = 1, lower_right = 2 };

// One attention problem in (batch, heads, seq, dim) layout, float32.
struct Problem {
  at::Tensor q, k, v;  // [B, H, M, K]
  std::optional<at::Tensor> bias;
  Causal causal;
  double scale;
  double dropout_p;
  int64_t seed;  // of the dropout keep mask
};

double default_scale(const at::Tensor& q);

// The keep mask of dropout, a function of (seed, shape) only.
at::Tensor keep_mask(const Problem& p, at::IntArrayRef sizes);

struct Probabilities {
  at::Tensor p;     // softmax of the scores, [B, H, Mq, Mk]
  at::Tensor kept;  // p after dropout (p itself without)
  at::Tensor logsumexp;  // [B, H, Mq]
};

Probabilities probabilities(const Problem& p);

struct Grads {
  at::Tensor q, k, v, bias;
};

// The gradients of q, k, v (and the bias, when asked) from the output's.
Grads gradients(const Problem& p, const at::Tensor& grad_out, bool bias_requires_grad);

}  // namespace openneuron::integration::attention_math

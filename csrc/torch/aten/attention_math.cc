#include "torch/aten/attention_math.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>

namespace openneuron::integration::attention_math {

double default_scale(const at::Tensor& q) { return 1.0 / std::sqrt(static_cast<double>(q.size(-1))); }

at::Tensor keep_mask(const Problem& p, at::IntArrayRef sizes) {
  at::Generator cpu = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(p.seed));
  at::Tensor keep = at::empty(sizes, at::dtype(at::kFloat)).bernoulli_(1.0 - p.dropout_p, cpu);
  return keep.to(p.q.device()).div_(1.0 - p.dropout_p);
}

Probabilities probabilities(const Problem& p) {
  at::Tensor scores = at::matmul(p.q, p.k.transpose(-2, -1)).mul_(p.scale);
  if (p.bias) scores.add_(p.bias->to(at::kFloat));
  if (p.causal != Causal::none) {
    const int64_t mq = scores.size(-2), mk = scores.size(-1);
    const int64_t shift = p.causal == Causal::lower_right ? mk - mq : 0;
    const auto opts = at::TensorOptions().dtype(at::kLong).device(scores.device());
    // key j is visible from query i when j <= i + shift
    const at::Tensor hidden = at::arange(mk, opts).unsqueeze(0).gt(at::arange(mq, opts).add(shift).unsqueeze(1));
    scores.masked_fill_(hidden, -std::numeric_limits<float>::infinity());
  }
  Probabilities out;
  out.logsumexp = at::logsumexp(scores, -1);
  // A query that sees no key gets zero attention (not NaN), as on CUDA.
  out.p = scores.sub_(out.logsumexp.unsqueeze(-1)).exp_().nan_to_num_(0.0);
  out.kept = p.dropout_p > 0 ? out.p.mul(keep_mask(p, out.p.sizes())) : out.p;
  return out;
}

Grads gradients(const Problem& p, const at::Tensor& grad_out, bool bias_requires_grad) {
  const Probabilities probs = probabilities(p);
  Grads g;
  g.v = at::matmul(probs.kept.transpose(-2, -1), grad_out);
  at::Tensor grad_p = at::matmul(grad_out, p.v.transpose(-2, -1));
  if (p.dropout_p > 0) grad_p.mul_(keep_mask(p, grad_p.sizes()));
  // softmax backward: dS = P * (dP - rowsum(dP * P))
  at::Tensor grad_s = probs.p.mul(grad_p.sub(grad_p.mul(probs.p).sum(-1, true)));
  g.q = at::matmul(grad_s, p.k).mul_(p.scale);
  g.k = at::matmul(grad_s.transpose(-2, -1), p.q).mul_(p.scale);
  if (bias_requires_grad && p.bias) g.bias = grad_s.sum_to_size(p.bias->sizes()).to(p.bias->scalar_type());
  return g;
}

}  // namespace openneuron::integration::attention_math

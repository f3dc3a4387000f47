// CUDA's own attention kernels on neuron: _efficient_attention_forward /
// _backward (xformers' memory-efficient kernel) and _flash_attention_forward /
// _backward (FlashAttention-2). PyTorch's CPU build has no kernel for them,
// yet code written for CUDA calls them directly (OpInfo lists them for
// CUDA). Here they are computed exactly, in float32 whatever the input's
// 16-bit dtype, with ATen ops on the tensors' device, and return what CUDA
// returns: the same layouts (batch, seq, heads, dim), logsumexp shapes
// (the memory-efficient kernel pads its rows to a multiple of 32 with +inf),
// causal alignments (upper-left / lower-right as custom_mask_type says;
// flash's is_causal is lower-right) and variable-length batches
// (cu_seqlens). Dropout draws its seed from the device generator and
// returns it as CUDA returns its Philox seed and offset, so the backward
// regenerates the same keep mask.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "torch/aten/attention_math.h"
#include "torch/runtime/generator.h"

namespace openneuron::integration {
namespace {

using namespace attention_math;

constexpr int64_t kLogsumexpAlign = 32;  // the memory-efficient kernel's row padding

// (batch, seq, heads, dim) -> (batch, heads, seq, dim), in float32.
at::Tensor heads_first(const at::Tensor& t) { return t.transpose(1, 2).to(at::kFloat); }

// Sequences joined along the seq dim of (batch, heads, seq, dim), then back
// to (batch, seq, heads, dim) in like's dtype and memory layout (CUDA's
// kernels allocate their gradients, and FlashAttention its output, like
// the inputs); rows past the last boundary (cu_seqlens[-1] below the
// tensor's length) are zeros.
at::Tensor joined(const std::vector<at::Tensor>& parts, const at::Tensor& like) {
  at::Tensor all = at::cat(parts, 2);
  const int64_t missing = like.size(1) - all.size(2);
  if (missing > 0)
    all = at::cat({all, at::zeros({all.size(0), all.size(1), missing, all.size(3)}, all.options())}, 2);
  return at::empty_like(like).copy_(all.transpose(1, 2));
}

// Sequence boundaries of a variable-length batch (cu_seqlens), on the host.
std::vector<int64_t> boundaries(const at::Tensor& cu_seqlens) {
  const at::Tensor host = cu_seqlens.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
}

struct Batch {
  std::optional<std::vector<int64_t>> q_bounds, k_bounds;  // variable length
  bool varlen() const { return q_bounds.has_value(); }
  int64_t sequences(const at::Tensor& q) const { return varlen() ? q_bounds->size() - 1 : q.size(0); }
};

Batch batch_of(const std::optional<at::Tensor>& cu_q, const std::optional<at::Tensor>& cu_k) {
  TORCH_CHECK(cu_q.has_value() == cu_k.has_value() && (!cu_q || cu_q->defined() == cu_k->defined()),
              "attention: cu_seqlens_q and cu_seqlens_k must be given together");
  Batch b;
  if (cu_q && cu_q->defined()) {
    TORCH_CHECK(cu_q->dim() == 1 && cu_k->dim() == 1, "attention: cu_seqlens must be 1-D");
    b.q_bounds = boundaries(*cu_q);
    b.k_bounds = boundaries(*cu_k);
    TORCH_CHECK(b.q_bounds->size() == b.k_bounds->size() && b.q_bounds->size() >= 1,
                "attention: cu_seqlens_q and cu_seqlens_k must have the same length");
  }
  return b;
}

// The problem of sequence `s` (the whole batch when not variable-length),
// from tensors in (batch, seq, heads, dim) layout.
Problem problem_of(const Batch& b, int64_t s, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const std::optional<at::Tensor>& bias, Causal causal, double scale, double dropout_p,
                   int64_t seed) {
  auto slice = [&](const at::Tensor& t, const std::vector<int64_t>& bounds) {
    return t.slice(1, bounds[s], bounds[s + 1]);
  };
  Problem p;
  p.q = heads_first(b.varlen() ? slice(q, *b.q_bounds) : q);
  p.k = heads_first(b.varlen() ? slice(k, *b.k_bounds) : k);
  p.v = heads_first(b.varlen() ? slice(v, *b.k_bounds) : v);
  if (bias && bias->defined()) {
    TORCH_CHECK(!b.varlen(), "_efficient_attention_forward: a bias with cu_seqlens is not supported on neuron");
    p.bias = *bias;
  }
  p.causal = causal;
  p.scale = scale;
  p.dropout_p = dropout_p;
  p.seed = b.varlen() ? seed + s : seed;
  return p;
}

// Forward over the batch: output (batch, seq, heads, dim) in q's dtype and
// logsumexp [sequences, heads, max_seq_q] (rows past a sequence's end: +inf).
std::pair<at::Tensor, at::Tensor> forward(const Batch& b, const at::Tensor& q, const at::Tensor& k,
                                          const at::Tensor& v, const std::optional<at::Tensor>& bias,
                                          Causal causal, double scale, double dropout_p, int64_t seed,
                                          int64_t lse_rows) {
  const int64_t n = b.sequences(q);
  at::Tensor logsumexp = at::full({n, q.size(2), lse_rows}, std::numeric_limits<float>::infinity(),
                                  q.options().dtype(at::kFloat));
  std::vector<at::Tensor> outs;
  for (int64_t s = 0; s < (b.varlen() ? n : 1); ++s) {
    const Problem p = problem_of(b, s, q, k, v, bias, causal, scale, dropout_p, seed);
    const Probabilities probs = probabilities(p);
    outs.push_back(at::matmul(probs.kept, p.v));
    const int64_t rows = std::min<int64_t>(probs.logsumexp.size(-1), lse_rows);
    at::Tensor dest = b.varlen() ? logsumexp.narrow(0, s, 1) : logsumexp;
    dest.narrow(2, 0, rows).copy_(probs.logsumexp.narrow(-1, 0, rows));
  }
  return {joined(outs, q), logsumexp};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward(
    const Batch& b, const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const std::optional<at::Tensor>& bias, Causal causal, double scale, double dropout_p, int64_t seed,
    bool bias_requires_grad) {
  std::vector<at::Tensor> gq, gk, gv, gbias;
  for (int64_t s = 0; s < (b.varlen() ? b.sequences(q) : 1); ++s) {
    const Problem p = problem_of(b, s, q, k, v, bias, causal, scale, dropout_p, seed);
    at::Tensor go = heads_first(b.varlen() ? grad_out.slice(1, (*b.q_bounds)[s], (*b.q_bounds)[s + 1]) : grad_out);
    Grads g = gradients(p, go, bias_requires_grad);
    gq.push_back(g.q), gk.push_back(g.k), gv.push_back(g.v);
    if (g.bias.defined()) gbias.push_back(g.bias);
  }
  at::Tensor grad_bias = gbias.empty() ? at::Tensor() : gbias.front();
  return {joined(gq, q), joined(gk, k), joined(gv, v), grad_bias};
}

// Dropout's seed from the device generator; CUDA returns its Philox seed
// and offset as int64 scalars on the CPU.
std::pair<at::Tensor, at::Tensor> draw_seed(const at::Tensor& q, double dropout_p) {
  if (dropout_p <= 0) return {at::zeros({}, at::kLong), at::zeros({}, at::kLong)};
  at::Generator gen = default_generator(q.device().index());
  std::lock_guard<std::mutex> lock(gen.mutex());
  const auto [seed, offset] = gen.get<NeuronGenerator>()->next_philox_draw();
  return {at::scalar_tensor(static_cast<int64_t>(seed), at::kLong),
          at::scalar_tensor(static_cast<int64_t>(offset), at::kLong)};
}

int64_t seed_of(const at::Tensor& seed, const at::Tensor& offset) {
  // One mask per (seed, offset) pair: mix them into the CPU generator's seed.
  return seed.item<int64_t>() ^ (offset.item<int64_t>() * static_cast<int64_t>(0x9E3779B97F4A7C15ull));
}

void check_supported(const char* op, const std::optional<at::Tensor>& seqlen_k,
                     std::optional<int64_t> window) {
  TORCH_CHECK(!seqlen_k || !seqlen_k->defined(), op, ": seqlen_k (per-batch key lengths) is not supported on neuron");
  TORCH_CHECK(!window, op, ": sliding-window attention (window_size) is not supported on neuron");
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt>
efficient_attention_forward(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                            const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& cu_seqlens_q,
                            const std::optional<at::Tensor>& cu_seqlens_k, std::optional<int64_t> max_seqlen_q,
                            std::optional<int64_t> max_seqlen_k, double dropout_p, int64_t custom_mask_type,
                            bool compute_log_sumexp, std::optional<double> scale,
                            const std::optional<at::Tensor>& seqlen_k, std::optional<int64_t> window_size) {
  check_supported("_efficient_attention_forward", seqlen_k, window_size);
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4,
              "_efficient_attention_forward: query, key and value must be 4-D (batch, seq, heads, dim)");
  TORCH_CHECK(custom_mask_type >= 0 && custom_mask_type <= 2,
              "_efficient_attention_forward: custom_mask_type must be 0, 1 or 2, got ", custom_mask_type);
  const Batch b = batch_of(cu_seqlens_q, cu_seqlens_k);
  const int64_t mq = b.varlen() ? max_seqlen_q.value_or(query.size(1)) : query.size(1);
  const int64_t mk = b.varlen() ? max_seqlen_k.value_or(key.size(1)) : key.size(1);
  const int64_t lse_rows = compute_log_sumexp ? (mq + kLogsumexpAlign - 1) / kLogsumexpAlign * kLogsumexpAlign : 0;
  auto [seed, offset] = draw_seed(query, dropout_p);
  auto [out, lse] = forward(b, query, key, value, bias, static_cast<Causal>(custom_mask_type),
                            scale.value_or(default_scale(query)), dropout_p,
                            dropout_p > 0 ? seed_of(seed, offset) : 0, lse_rows);
  // The memory-efficient kernel's output is a new contiguous tensor.
  return {out.contiguous(), lse, seed, offset, c10::SymInt(mq), c10::SymInt(mk)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> efficient_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& bias, const at::Tensor& /*out*/, const std::optional<at::Tensor>& cu_seqlens_q,
    const std::optional<at::Tensor>& cu_seqlens_k, int64_t /*max_seqlen_q*/, int64_t /*max_seqlen_k*/,
    const at::Tensor& /*logsumexp*/, double dropout_p, const at::Tensor& philox_seed,
    const at::Tensor& philox_offset, int64_t custom_mask_type, bool bias_requires_grad,
    std::optional<double> scale, std::optional<int64_t> /*num_splits_key*/, std::optional<int64_t> window_size,
    bool /*shared_storage_dqdkdv*/) {
  check_supported("_efficient_attention_backward", std::nullopt, window_size);
  const Batch b = batch_of(cu_seqlens_q, cu_seqlens_k);
  return backward(b, grad_out, query, key, value, bias, static_cast<Causal>(custom_mask_type),
                  scale.value_or(default_scale(query)), dropout_p,
                  dropout_p > 0 ? seed_of(philox_seed, philox_offset) : 0, bias_requires_grad);
}

// Flash's variable-length layout is (total, heads, dim): one batch of 1.
at::Tensor as_batch(const at::Tensor& t, bool varlen) { return varlen ? t.unsqueeze(0) : t; }

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> flash_attention_forward(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& cum_seq_q, const std::optional<at::Tensor>& cum_seq_k, int64_t max_q,
    int64_t /*max_k*/, double dropout_p, bool is_causal, bool return_debug_mask, std::optional<double> scale,
    std::optional<int64_t> window_size_left, std::optional<int64_t> window_size_right,
    const std::optional<at::Tensor>& seqused_k, const std::optional<at::Tensor>& alibi_slopes,
    const std::optional<at::Tensor>& block_table, std::optional<int64_t> /*num_splits*/) {
  check_supported("_flash_attention_forward", seqused_k, window_size_left ? window_size_left : window_size_right);
  TORCH_CHECK(!alibi_slopes || !alibi_slopes->defined(),
              "_flash_attention_forward: alibi_slopes are not supported on neuron");
  TORCH_CHECK(!block_table || !block_table->defined(),
              "_flash_attention_forward: a paged KV cache (block_table) is not supported on neuron");
  TORCH_CHECK(!return_debug_mask, "_flash_attention_forward: return_debug_mask is not supported on neuron");
  const Batch b = batch_of(cum_seq_q, cum_seq_k);
  const at::Tensor q = as_batch(query, b.varlen()), k = as_batch(key, b.varlen()), v = as_batch(value, b.varlen());
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "_flash_attention_forward: query, key and value must be (batch, seq, heads, dim), "
              "or (total, heads, dim) with cum_seq_q/cum_seq_k");
  auto [seed, offset] = draw_seed(query, dropout_p);
  const int64_t lse_rows = b.varlen() ? max_q : q.size(1);
  auto [out, lse] = forward(b, q, k, v, std::nullopt, is_causal ? Causal::lower_right : Causal::none,
                            scale.value_or(default_scale(q)), dropout_p,
                            dropout_p > 0 ? seed_of(seed, offset) : 0, lse_rows);
  if (b.varlen()) {
    out = out.squeeze(0);
    // FlashAttention's variable-length logsumexp: (heads, total_q).
    std::vector<at::Tensor> rows;
    for (size_t s = 0; s + 1 < b.q_bounds->size(); ++s)
      rows.push_back(lse[s].narrow(-1, 0, (*b.q_bounds)[s + 1] - (*b.q_bounds)[s]));
    lse = at::cat(rows, -1);
  }
  return {out, lse, seed, offset, at::empty({0}, query.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& /*out*/, const at::Tensor& /*logsumexp*/, const at::Tensor& cum_seq_q,
    const at::Tensor& cum_seq_k, int64_t /*max_q*/, int64_t /*max_k*/, double dropout_p, bool is_causal,
    const at::Tensor& rng_state, const at::Tensor& unused, std::optional<double> scale,
    std::optional<int64_t> window_size_left, std::optional<int64_t> window_size_right) {
  check_supported("_flash_attention_backward", std::nullopt,
                  window_size_left ? window_size_left : window_size_right);
  const Batch b = batch_of(cum_seq_q, cum_seq_k);
  const bool varlen = b.varlen();
  auto [gq, gk, gv, unused_bias] =
      backward(b, as_batch(grad_out, varlen), as_batch(query, varlen), as_batch(key, varlen),
               as_batch(value, varlen), std::nullopt, is_causal ? Causal::lower_right : Causal::none,
               scale.value_or(default_scale(query)), dropout_p,
               dropout_p > 0 ? seed_of(rng_state, unused) : 0, false);
  if (varlen) return {gq.squeeze(0), gk.squeeze(0), gv.squeeze(0)};
  return {gq, gk, gv};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_efficient_attention_forward", TORCH_FN(efficient_attention_forward));
  m.impl("_efficient_attention_backward", TORCH_FN(efficient_attention_backward));
  m.impl("_flash_attention_forward", TORCH_FN(flash_attention_forward));
  m.impl("_flash_attention_backward", TORCH_FN(flash_attention_backward));
}

}  // namespace
}  // namespace openneuron::integration

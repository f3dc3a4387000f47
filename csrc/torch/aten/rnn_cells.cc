// The fused LSTM and GRU cells PyTorch's nn.LSTM / nn.GRU call on devices
// other than CPU. ATen has CUDA kernels only; these compose them from ATen
// ops (each runs the CPU kernel on device memory), with the same gate
// layout and workspace as CUDA's, so autograd's formulas apply unchanged.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace openneuron::integration {
namespace {

using at::Tensor;

Tensor with_bias(const Tensor& gates, const std::optional<Tensor>& bias) {
  return bias && bias->defined() ? gates + *bias : gates;
}

std::tuple<Tensor, Tensor, Tensor> fused_lstm_cell(
    const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& cx,
    const std::optional<Tensor>& input_bias,
    const std::optional<Tensor>& hidden_bias) {
  const auto gates = with_bias(input_gates, input_bias) +
                     with_bias(hidden_gates, hidden_bias);
  auto chunks = gates.chunk(4, 1);
  const auto i = chunks[0].sigmoid(), f = chunks[1].sigmoid();
  const auto g = chunks[2].tanh(), o = chunks[3].sigmoid();
  auto cy = f * cx + i * g;
  auto hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};  // workspace: activated gates
}

std::tuple<Tensor, Tensor, Tensor> fused_lstm_cell_backward(
    const std::optional<Tensor>& grad_hy, const std::optional<Tensor>& grad_cy,
    const Tensor& cx, const Tensor& cy, const Tensor& workspace,
    bool has_bias) {
  auto chunks = workspace.chunk(4, 1);
  const auto &i = chunks[0], &f = chunks[1], &g = chunks[2], &o = chunks[3];
  const auto tanh_cy = cy.tanh();
  const bool has_ghy = grad_hy && grad_hy->defined();
  const bool has_gcy = grad_cy && grad_cy->defined();
  auto d_cy = at::zeros_like(cy);
  Tensor d_o = at::zeros_like(cy);
  if (has_ghy) {
    d_cy = d_cy + *grad_hy * o * (1 - tanh_cy * tanh_cy);
    d_o = *grad_hy * tanh_cy * o * (1 - o);
  }
  if (has_gcy) d_cy = d_cy + *grad_cy;
  const auto d_i = d_cy * g * i * (1 - i);
  const auto d_f = d_cy * cx * f * (1 - f);
  const auto d_g = d_cy * i * (1 - g * g);
  auto grad_gates = at::cat({d_i, d_f, d_g, d_o}, 1);
  auto grad_cx = d_cy * f;
  Tensor grad_bias = has_bias ? grad_gates.sum(0) : Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

std::tuple<Tensor, Tensor> fused_gru_cell(
    const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& hx,
    const std::optional<Tensor>& input_bias,
    const std::optional<Tensor>& hidden_bias) {
  auto in = with_bias(input_gates, input_bias).chunk(3, 1);
  auto hid = with_bias(hidden_gates, hidden_bias).chunk(3, 1);
  const auto r = (in[0] + hid[0]).sigmoid();
  const auto z = (in[1] + hid[1]).sigmoid();
  const auto n = (in[2] + r * hid[2]).tanh();
  auto hy = n + z * (hx - n);
  // workspace: gates, previous hidden state and the hidden candidate part
  return {hy, at::cat({r, z, n, hx, hid[2]}, 1)};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> fused_gru_cell_backward(
    const Tensor& grad_hy, const Tensor& workspace, bool has_bias) {
  auto w = workspace.chunk(5, 1);
  const auto &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  const auto d_z = grad_hy * (hx - n) * (1 - z) * z;
  const auto grad_hx = grad_hy * z;
  const auto d_n = grad_hy * (1 - z) * (1 - n * n);
  const auto d_hn = d_n * r;
  const auto d_r = d_n * hn * (1 - r) * r;
  auto grad_input_gates = at::cat({d_r, d_z, d_n}, 1);
  auto grad_hidden_gates = at::cat({d_r, d_z, d_hn}, 1);
  Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : Tensor();
  Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias,
          grad_hidden_bias};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl",
         TORCH_FN(fused_lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
}

}  // namespace
}  // namespace openneuron::integration

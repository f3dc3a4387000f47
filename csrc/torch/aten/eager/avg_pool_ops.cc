#include "torch/aten/eager/avg_pool_ops.h"

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "torch/aten/eager/library_kernels.h"
#include "torch/runtime/device.h"

namespace openneuron::integration {
namespace {

using Args = c10::ArrayRef<c10::IValue>;
using at::Tensor;

// A pooling call's geometry (height, width).
struct Pool {
  int64_t kernel[2], stride[2], pad[2], in[2], out[2];
  bool ceil_mode = false, count_include_pad = true;
  std::optional<int64_t> divisor_override;
};

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The CPU's output size (ATen's pooling_output_shape, dilation 1).
int64_t output_size(int64_t in, int64_t k, int64_t pad, int64_t stride, bool ceil_mode) {
  int64_t out = floor_div(in + 2 * pad - (k - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Two values from an int[2] argument given as one or two ints.
bool pair_of(const c10::IValue& v, int64_t out[2], bool empty_ok = false) {
  const auto list = v.toIntList();
  if (list.size() == 0 && empty_ok) return false;
  if (list.size() != 1 && list.size() != 2) return false;
  out[0] = list.get(0);
  out[1] = list.get(list.size() - 1);
  return true;
}

// The geometry of avg_pool2d's arguments from `first` (kernel_size,
// stride, padding, ceil_mode, count_include_pad, divisor_override), or
// nullopt where the CPU would raise (it then does, through the fallback).
std::optional<Pool> pool_of(const Tensor& input, Args a, size_t first) {
  if (input.dim() != 3 && input.dim() != 4) return std::nullopt;
  Pool p;
  if (!pair_of(a[first], p.kernel)) return std::nullopt;
  if (!pair_of(a[first + 1], p.stride, /*empty_ok=*/true)) std::copy(p.kernel, p.kernel + 2, p.stride);
  if (!pair_of(a[first + 2], p.pad)) return std::nullopt;
  p.ceil_mode = a[first + 3].toBool();
  p.count_include_pad = a[first + 4].toBool();
  if (!a[first + 5].isNone()) p.divisor_override = a[first + 5].toInt();
  if (p.divisor_override && *p.divisor_override == 0) return std::nullopt;
  for (int d = 0; d < 2; ++d) {
    p.in[d] = input.size(input.dim() - 2 + d);
    if (p.kernel[d] <= 0 || p.stride[d] <= 0 || p.pad[d] < 0 || p.pad[d] > p.kernel[d] / 2) return std::nullopt;
    p.out[d] = output_size(p.in[d], p.kernel[d], p.pad[d], p.stride[d], p.ceil_mode);
    if (p.out[d] <= 0) return std::nullopt;
  }
  return p;
}

// The CPU kernel's divisor of each output position ([out_h, out_w]).
Tensor divisors(const Pool& p, const Tensor& like) {
  std::vector<double> values;
  values.reserve(p.out[0] * p.out[1]);
  for (int64_t oh = 0; oh < p.out[0]; ++oh)
    for (int64_t ow = 0; ow < p.out[1]; ++ow) {
      int64_t start[2] = {oh * p.stride[0] - p.pad[0], ow * p.stride[1] - p.pad[1]}, end[2], pooled = 1, inside = 1;
      for (int d = 0; d < 2; ++d) {
        end[d] = std::min(start[d] + p.kernel[d], p.in[d] + p.pad[d]);
        pooled *= end[d] - start[d];
        inside *= std::min(end[d], p.in[d]) - std::max<int64_t>(start[d], 0);
      }
      const int64_t counted = p.count_include_pad ? pooled : inside;
      // (an empty window sums to 0, as the CPU's output there)
      values.push_back(p.divisor_override ? static_cast<double>(*p.divisor_override) : counted > 0 ? counted : 1.0);
    }
  return at::tensor(values, at::TensorOptions().dtype(at::kDouble))
      .view({p.out[0], p.out[1]})
      .to(like.options());
}

// Zero rows/columns after the input so the last window fits.
int64_t pad_after(const Pool& p, int d) {
  return std::max<int64_t>(p.pad[d], (p.out[d] - 1) * p.stride[d] + p.kernel[d] - p.pad[d] - p.in[d]);
}

// The dtype the CPU kernel sums in: float for 16-bit inputs.
at::ScalarType compute_type(const Tensor& t) { return at::toOpMathType(t.scalar_type()); }

// A floating tensor on a neuron device with elements, or with none only
// along the batch dim (the CPU raises for other empty dims).
bool poolable(const Tensor& t) {
  if (!t.defined() || t.device().type() != kNeuron || !at::isFloatingType(t.scalar_type())) return false;
  for (int64_t d = t.dim() == 4 ? 1 : 0; d < t.dim(); ++d)
    if (t.size(d) == 0) return false;
  return true;
}

// The result in the input's layout (channels_last stays so), as the CPU's.
Tensor like_input(const Tensor& result, const Tensor& input) {
  const Tensor r = result.to(input.scalar_type());
  return input.dim() == 4 ? r.contiguous(input.suggest_memory_format()) : r.contiguous();
}

// avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
bool avg_pool2d(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args a = op_args(op, stack);
  const Tensor input = a[0].toTensor();
  if (!poolable(input)) return false;
  const std::optional<Pool> p = pool_of(input, a, 1);
  if (!p) return false;
  const Tensor x = (input.dim() == 3 ? input.unsqueeze(0) : input).to(compute_type(input));
  const Tensor padded = at::constant_pad_nd(x, {p->pad[1], pad_after(*p, 1), p->pad[0], pad_after(*p, 0)}, 0);
  const Tensor windows = padded.unfold(2, p->kernel[0], p->stride[0])
                             .unfold(3, p->kernel[1], p->stride[1])
                             .narrow(2, 0, p->out[0])
                             .narrow(3, 0, p->out[1]);
  Tensor out = windows.sum({4, 5}) / divisors(*p, windows);
  if (input.dim() == 3) out = out.squeeze(0);
  finish_op(stack, a.size(), {like_input(out, input)});
  return true;
}

// avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override): each output's share added over its
// window, one strided view of the padded gradient per kernel offset.
bool avg_pool2d_backward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args a = op_args(op, stack);
  const Tensor grad = a[0].toTensor(), input = a[1].toTensor();
  if (!poolable(input) || !poolable(grad) || grad.device() != input.device() ||
      grad.scalar_type() != input.scalar_type() || grad.dim() != input.dim())
    return false;
  const std::optional<Pool> p = pool_of(input, a, 2);
  if (!p || grad.size(-2) != p->out[0] || grad.size(-1) != p->out[1]) return false;
  const Tensor g4 = (grad.dim() == 3 ? grad.unsqueeze(0) : grad).to(compute_type(input));
  const Tensor share = g4 / divisors(*p, g4);
  const int64_t rows = p->pad[0] + p->in[0] + pad_after(*p, 0), cols = p->pad[1] + p->in[1] + pad_after(*p, 1);
  Tensor padded = at::zeros({g4.size(0), g4.size(1), rows, cols}, g4.options());
  for (int64_t i = 0; i < p->kernel[0]; ++i)
    for (int64_t j = 0; j < p->kernel[1]; ++j)
      padded.slice(2, i, i + (p->out[0] - 1) * p->stride[0] + 1, p->stride[0])
          .slice(3, j, j + (p->out[1] - 1) * p->stride[1] + 1, p->stride[1])
          .add_(share);
  Tensor grad_input = padded.narrow(2, p->pad[0], p->in[0]).narrow(3, p->pad[1], p->in[1]);
  if (input.dim() == 3) grad_input = grad_input.squeeze(0);
  finish_op(stack, a.size(), {like_input(grad_input, input)});
  return true;
}

}  // namespace

bool run_avg_pool_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = op_full_name(op);
  if (name != "aten::avg_pool2d" && name != "aten::avg_pool2d_backward") return false;
  const ComposedOpScope composed;
  return name == "aten::avg_pool2d" ? avg_pool2d(op, stack) : avg_pool2d_backward(op, stack);
}

}  // namespace openneuron::integration

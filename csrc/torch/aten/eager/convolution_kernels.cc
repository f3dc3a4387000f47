#include "torch/aten/eager/convolution_kernels.h"

#include <ATen/Functions.h>

#include <vector>

#include "torch/aten/eager/implicit_gemm_convolution.h"

namespace openneuron::integration {
namespace {

struct Shape {
  int64_t n, c, o, g, spatial;
  std::vector<int64_t> in, kernel, out;  // spatial sizes
  int64_t ck() const {  // a group's column length: C/g times the kernel's size
    int64_t k = c / g;
    for (int64_t s : kernel) k *= s;
    return k;
  }
  int64_t l() const {
    int64_t k = 1;
    for (int64_t s : out) k *= s;
    return k;
  }
};

int64_t at_or_last(c10::IntArrayRef a, int64_t i) { return a.size() == 1 ? a[0] : a[i]; }

bool supported(const at::Tensor& input, const at::Tensor& weight, bool transposed) {
  const auto t = input.scalar_type();
  return !transposed && (t == at::kFloat || t == at::kDouble) && weight.scalar_type() == t &&
         input.dim() >= 3 && input.dim() <= 5 && weight.dim() == input.dim();
}

Shape shape_of(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
               c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups) {
  Shape s;
  s.n = input.size(0);
  s.c = input.size(1);
  s.o = weight.size(0);
  s.g = groups;
  s.spatial = input.dim() - 2;
  for (int64_t i = 0; i < s.spatial; ++i) {
    s.in.push_back(input.size(2 + i));
    s.kernel.push_back(weight.size(2 + i));
    const int64_t padded = s.in[i] + 2 * at_or_last(padding, i);
    s.out.push_back((padded - at_or_last(dilation, i) * (s.kernel[i] - 1) - 1) / at_or_last(stride, i) + 1);
  }
  return s;
}

at::Tensor padded(const at::Tensor& input, const Shape& s, c10::IntArrayRef padding) {
  std::vector<int64_t> pad;
  bool any = false;
  for (int64_t i = s.spatial - 1; i >= 0; --i) {
    const int64_t p = at_or_last(padding, i);
    pad.insert(pad.end(), {p, p});
    any |= p != 0;
  }
  return any ? at::constant_pad_nd(input, pad, 0) : input.contiguous();
}

// The columns of x (padded, contiguous): [n, g, ck, l].
at::Tensor columns(const at::Tensor& x, const Shape& s, c10::IntArrayRef stride, c10::IntArrayRef dilation) {
  std::vector<int64_t> sizes{s.n, s.c}, strides{x.stride(0), x.stride(1)};
  for (int64_t i = 0; i < s.spatial; ++i) {
    sizes.push_back(s.kernel[i]);
    strides.push_back(at_or_last(dilation, i) * x.stride(2 + i));
  }
  for (int64_t i = 0; i < s.spatial; ++i) {
    sizes.push_back(s.out[i]);
    strides.push_back(at_or_last(stride, i) * x.stride(2 + i));
  }
  return x.as_strided(sizes, strides).reshape({s.n, s.g, s.ck(), s.l()});
}

std::vector<int64_t> out_sizes(const Shape& s, int64_t channels) {
  std::vector<int64_t> sizes{s.n, channels};
  sizes.insert(sizes.end(), s.out.begin(), s.out.end());
  return sizes;
}

}  // namespace

std::optional<at::Tensor> device_convolution(const at::Tensor& input, const at::Tensor& weight,
                                             const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                             c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                                             int64_t groups) {
  if (!supported(input, weight, transposed)) return std::nullopt;
  const Shape s = shape_of(input, weight, stride, padding, dilation, groups);
  for (int64_t o : s.out)
    if (o <= 0) return std::nullopt;
  at::Tensor out;
  if (auto direct = implicit_gemm_convolution(input, weight, bias, stride, padding, dilation, groups)) {
    out = *direct;
  } else {
    const at::Tensor cols = columns(padded(input, s, padding), s, stride, dilation);
    const at::Tensor w = weight.reshape({1, s.g, s.o / s.g, s.ck()});
    out = at::matmul(w, cols).reshape(out_sizes(s, s.o));  // [n, g, o/g, l]
    if (bias && bias->defined()) {
      std::vector<int64_t> b(out.dim(), 1);
      b[1] = s.o;
      out = at::add(out, bias->reshape(b));
    }
  }
  if (input.suggest_memory_format() == at::MemoryFormat::ChannelsLast && out.dim() == 4)
    out = out.contiguous(at::MemoryFormat::ChannelsLast);
  return out;
}

std::optional<std::tuple<at::Tensor, at::Tensor, at::Tensor>> device_convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, int64_t groups,
    std::array<bool, 3> output_mask) {
  if (!supported(input, weight, transposed) || grad_output.scalar_type() != input.scalar_type())
    return std::nullopt;
  const Shape s = shape_of(input, weight, stride, padding, dilation, groups);
  const at::Tensor go = grad_output.reshape({s.n, s.g, s.o / s.g, s.l()});
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[2]) {
    std::vector<int64_t> dims{0};
    for (int64_t i = 0; i < s.spatial; ++i) dims.push_back(2 + i);
    grad_bias = grad_output.sum(dims);
  }
  const ImplicitGemmGrads direct = implicit_gemm_convolution_backward(grad_output, input, weight, stride, padding,
                                                                      dilation, groups, output_mask[0], output_mask[1]);
  if (direct.weight) grad_weight = *direct.weight;
  if (direct.input) grad_input = direct.input->contiguous(input.suggest_memory_format());
  if (output_mask[1] && !grad_weight.defined()) {
    const at::Tensor cols = columns(padded(input, s, padding), s, stride, dilation);  // [n, g, ck, l]
    // sum over n of go [o/g, l] x cols^T [l, ck], as one product per group
    const at::Tensor a = go.permute({1, 2, 0, 3}).reshape({s.g, s.o / s.g, s.n * s.l()});
    const at::Tensor b = cols.permute({1, 0, 3, 2}).reshape({s.g, s.n * s.l(), s.ck()});
    // A long sum (n times the output's size): float32 accumulates in
    // float64, as the compiler's float32 sums do, then rounds once.
    grad_weight = a.scalar_type() == at::kFloat
                      ? at::bmm(a.to(at::kDouble), b.to(at::kDouble)).to(at::kFloat).reshape(weight.sizes())
                      : at::bmm(a, b).reshape(weight.sizes());
  }
  if (output_mask[0] && !grad_input.defined()) {
    // Columns' gradient [n, g, ck, l], added back into the padded input
    // once per kernel offset (overlapping windows accumulate).
    const at::Tensor w = weight.reshape({1, s.g, s.o / s.g, s.ck()}).transpose(2, 3);
    std::vector<int64_t> col_sizes{s.n, s.c};
    col_sizes.insert(col_sizes.end(), s.kernel.begin(), s.kernel.end());
    col_sizes.insert(col_sizes.end(), s.out.begin(), s.out.end());
    const at::Tensor dcols = at::matmul(w, go).reshape(col_sizes);
    std::vector<int64_t> padded_sizes{s.n, s.c};
    for (int64_t i = 0; i < s.spatial; ++i) padded_sizes.push_back(s.in[i] + 2 * at_or_last(padding, i));
    at::Tensor gx = at::zeros(padded_sizes, input.options());
    std::vector<int64_t> window_sizes{s.n, s.c}, window_strides{gx.stride(0), gx.stride(1)};
    for (int64_t i = 0; i < s.spatial; ++i) {
      window_sizes.push_back(s.out[i]);
      window_strides.push_back(at_or_last(stride, i) * gx.stride(2 + i));
    }
    int64_t offsets = 1;
    for (int64_t k : s.kernel) offsets *= k;
    for (int64_t k = 0; k < offsets; ++k) {
      int64_t offset = 0, rest = k;
      at::Tensor part = dcols;
      std::vector<int64_t> index(s.spatial);
      for (int64_t i = s.spatial - 1; i >= 0; --i) {
        index[i] = rest % s.kernel[i];
        rest /= s.kernel[i];
        offset += index[i] * at_or_last(dilation, i) * gx.stride(2 + i);
      }
      for (int64_t i = 0; i < s.spatial; ++i) part = part.select(2, index[i]);
      gx.as_strided(window_sizes, window_strides, offset).add_(part);
    }
    grad_input = gx;
    for (int64_t i = 0; i < s.spatial; ++i) {
      const int64_t p = at_or_last(padding, i);
      if (p) grad_input = grad_input.narrow(2 + i, p, s.in[i]);
    }
    grad_input = grad_input.contiguous(input.suggest_memory_format());
  }
  return std::make_tuple(grad_input, grad_weight, grad_bias);
}

bool run_convolution_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const bool forward = schema.name() == "aten::convolution", backward = schema.name() == "aten::convolution_backward";
  if ((!forward && !backward) || !schema.overload_name().empty()) return false;
  const size_t n = schema.arguments().size();
  c10::ArrayRef<c10::IValue> a(stack->data() + stack->size() - n, n);
  if (forward) {
    // (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    const std::optional<at::Tensor> bias = a[2].isNone() ? std::nullopt : std::optional<at::Tensor>(a[2].toTensor());
    auto out = device_convolution(a[0].toTensor(), a[1].toTensor(), bias, a[3].toIntVector(), a[4].toIntVector(),
                                  a[5].toIntVector(), a[6].toBool(), a[8].toInt());
    if (!out) return false;
    torch::jit::drop(*stack, n);
    stack->emplace_back(std::move(*out));
    return true;
  }
  // (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask)
  const auto mask = a[10].toBoolList();
  auto grads = device_convolution_backward(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[4].toIntVector(),
                                           a[5].toIntVector(), a[6].toIntVector(), a[7].toBool(), a[9].toInt(),
                                           {mask.get(0), mask.get(1), mask.get(2)});
  if (!grads) return false;
  torch::jit::drop(*stack, n);
  stack->emplace_back(std::get<0>(*grads));
  stack->emplace_back(std::get<1>(*grads));
  stack->emplace_back(std::get<2>(*grads));
  return true;
}

}  // namespace openneuron::integration

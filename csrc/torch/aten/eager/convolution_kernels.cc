#include "torch/aten/eager/convolution_kernels.h"

#include <ATen/Functions.h>
#include <c10/util/StringUtil.h>

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

bool supported(const at::Tensor& input, const at::Tensor& weight) {
  const auto t = input.scalar_type();
  return (t == at::kFloat || t == at::kDouble) && weight.scalar_type() == t && input.dim() >= 3 &&
         input.dim() <= 5 && weight.dim() == input.dim();
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

// ATen's shape checks, with its messages (Convolution.cpp,
// check_shape_forward): the router reaches these kernels before ATen's
// convolution would check, and a wrong channel count must not surface as a
// reshape error inside them.
void check_shapes(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                  c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                  int64_t groups) {
  const auto w = weight.sizes();
  TORCH_CHECK(groups > 0, "non-positive groups is not supported");
  for (int64_t v : stride) TORCH_CHECK(v > 0, "non-positive stride is not supported");
  for (int64_t v : padding) TORCH_CHECK(v >= 0, "negative padding is not supported");
  for (int64_t v : dilation) TORCH_CHECK(v > 0, "dilation should be greater than zero");
  TORCH_CHECK(w[0] >= groups, "Given groups=", groups, ", expected weight to be at least ", groups,
              " at dimension 0, but got weight of size ", w, " instead");
  TORCH_CHECK(w[0] % groups == 0, "Given groups=", groups, ", expected weight to be divisible by ", groups,
              " at dimension 0, but got weight of size [", w, "] instead");
  const int64_t channels = transposed ? w[0] : w[1] * groups;
  TORCH_CHECK(input.size(1) == channels, "Given ",
              transposed ? "transposed=1" : "groups=" + std::to_string(groups), ", weight of size ", w,
              ", expected input", input.sizes(), " to have ", channels, " channels, but got ", input.size(1),
              " channels instead");
  const int64_t outputs = transposed ? w[1] * groups : w[0];
  if (bias && bias->defined())
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == outputs, "Given ",
                transposed ? "transposed=1, weight of size " : "weight of size ", w,
                ", expected bias to be 1-dimensional with ", outputs, " elements, but got bias of size ",
                bias->sizes(), " instead");
  if (transposed) return;
  std::vector<int64_t> padded_input, kernel;
  bool fits = true;
  for (int64_t i = 0; i < input.dim() - 2; ++i) {
    padded_input.push_back(input.size(2 + i) + 2 * at_or_last(padding, i));
    kernel.push_back(at_or_last(dilation, i) * (w[2 + i] - 1) + 1);
    fits &= padded_input.back() >= kernel.back();
  }
  TORCH_CHECK(fits, "Calculated padded input size per channel: (", c10::Join(" x ", padded_input),
              "). Kernel size: (", c10::Join(" x ", kernel), "). Kernel size can't be greater than actual input size");
}

at::Tensor with_bias(at::Tensor out, const std::optional<at::Tensor>& bias) {
  if (!bias || !bias->defined()) return out;
  std::vector<int64_t> b(out.dim(), 1);
  b[1] = out.size(1);
  return at::add(out, bias->reshape(b));
}

// A tensor of `sizes` that is never read: the convolution whose input
// gradient a transposed convolution is needs its input's shape only.
at::Tensor shape_only(const at::Tensor& like, const std::vector<int64_t>& sizes) {
  return at::empty({}, like.options()).expand(sizes);
}

// A transposed convolution (weight [C_in, C_out / g, k...]) is the adjoint
// of the convolution with that weight, stride and dilation, without padding,
// from its "full" output (full_i = (in_i - 1) * stride + dilation * (k_i - 1)
// + 1 positions) to the input's shape. Its output is the full one with
// `padding` cropped at the start and padding - output_padding at the end (a
// negative crop pads zeros: output_padding may exceed the padding, and the
// stride when the dilation is larger).
struct Transposed {
  std::vector<int64_t> full;  // full output sizes (batch and channels first)
  std::vector<int64_t> crop;  // constant_pad_nd's pad from the full output to the output (negative: crop)
  std::vector<int64_t> uncrop;  // and back
  std::vector<int64_t> no_padding;
};

Transposed transposed_geometry(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                               c10::IntArrayRef padding, c10::IntArrayRef dilation, c10::IntArrayRef output_padding,
                               int64_t groups) {
  Transposed t;
  const int64_t spatial = input.dim() - 2;
  t.full = {input.size(0), weight.size(1) * groups};
  t.no_padding.assign(spatial, 0);
  for (int64_t i = 0; i < spatial; ++i)
    t.full.push_back((input.size(2 + i) - 1) * at_or_last(stride, i) +
                     at_or_last(dilation, i) * (weight.size(2 + i) - 1) + 1);
  for (int64_t i = spatial - 1; i >= 0; --i) {  // constant_pad_nd: the last dim first
    const int64_t p = at_or_last(padding, i), op = at_or_last(output_padding, i);
    t.crop.insert(t.crop.end(), {-p, op - p});
    t.uncrop.insert(t.uncrop.end(), {p, p - op});
  }
  return t;
}

std::optional<at::Tensor> transposed_convolution(const at::Tensor& input, const at::Tensor& weight,
                                                 const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                                 c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                                 c10::IntArrayRef output_padding, int64_t groups) {
  const Transposed t = transposed_geometry(input, weight, stride, padding, dilation, output_padding, groups);
  auto grads = device_convolution_backward(input, shape_only(input, t.full), weight, stride, t.no_padding, dilation,
                                           /*transposed=*/false, t.no_padding, groups, {true, false, false});
  if (!grads) return std::nullopt;
  const at::Tensor out = at::constant_pad_nd(std::get<0>(*grads), t.crop, 0);
  for (int64_t i = 2; i < out.dim(); ++i)
    if (out.size(i) <= 0) return std::nullopt;
  return with_bias(out, bias).contiguous(input.suggest_memory_format());
}

// Its gradients: the input's is the convolution of the output gradient
// (brought back to the full output's shape); the weight's, the
// convolution's weight gradient with input and output gradient in each
// other's place.
std::optional<std::tuple<at::Tensor, at::Tensor, at::Tensor>> transposed_convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, c10::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  const Transposed t = transposed_geometry(input, weight, stride, padding, dilation, output_padding, groups);
  const at::Tensor full_grad = at::constant_pad_nd(grad_output, t.uncrop, 0);
  at::Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) {
    auto gi = device_convolution(full_grad, weight, std::nullopt, stride, t.no_padding, dilation, false,
                                 t.no_padding, groups);
    if (!gi) return std::nullopt;
    grad_input = gi->contiguous(input.suggest_memory_format());
  }
  if (output_mask[1]) {
    auto gw = device_convolution_backward(input, full_grad, weight, stride, t.no_padding, dilation, false,
                                          t.no_padding, groups, {false, true, false});
    if (!gw) return std::nullopt;
    grad_weight = std::get<1>(*gw);
  }
  if (output_mask[2]) {
    std::vector<int64_t> dims{0};
    for (int64_t i = 2; i < grad_output.dim(); ++i) dims.push_back(i);
    grad_bias = grad_output.sum(dims);
  }
  return std::make_tuple(grad_input, grad_weight, grad_bias);
}

}  // namespace

std::optional<at::Tensor> device_convolution(const at::Tensor& input, const at::Tensor& weight,
                                             const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                             c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                                             c10::IntArrayRef output_padding, int64_t groups) {
  if (!supported(input, weight)) return std::nullopt;
  check_shapes(input, weight, bias, stride, padding, dilation, transposed, groups);
  if (transposed)
    return transposed_convolution(input, weight, bias, stride, padding, dilation, output_padding, groups);
  const Shape s = shape_of(input, weight, stride, padding, dilation, groups);
  for (int64_t o : s.out)
    if (o <= 0) return std::nullopt;
  at::Tensor out;
  if (auto direct = implicit_gemm_convolution(input, weight, bias, stride, padding, dilation, groups)) {
    out = *direct;
  } else {
    const at::Tensor cols = columns(padded(input, s, padding), s, stride, dilation);
    const at::Tensor w = weight.reshape({1, s.g, s.o / s.g, s.ck()});
    out = with_bias(at::matmul(w, cols).reshape(out_sizes(s, s.o)), bias);  // [n, g, o/g, l]
  }
  if (input.suggest_memory_format() == at::MemoryFormat::ChannelsLast && out.dim() == 4)
    out = out.contiguous(at::MemoryFormat::ChannelsLast);
  return out;
}

std::optional<std::tuple<at::Tensor, at::Tensor, at::Tensor>> device_convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  if (!supported(input, weight) || grad_output.scalar_type() != input.scalar_type()) return std::nullopt;
  if (transposed)
    return transposed_convolution_backward(grad_output, input, weight, stride, padding, dilation, output_padding,
                                           groups, output_mask);
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
                                  a[5].toIntVector(), a[6].toBool(), a[7].toIntVector(), a[8].toInt());
    if (!out) return false;
    torch::jit::drop(*stack, n);
    stack->emplace_back(std::move(*out));
    return true;
  }
  // (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask)
  const auto mask = a[10].toBoolList();
  auto grads = device_convolution_backward(a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[4].toIntVector(),
                                           a[5].toIntVector(), a[6].toIntVector(), a[7].toBool(), a[8].toIntVector(),
                                           a[9].toInt(),
                                           {mask.get(0), mask.get(1), mask.get(2)});
  if (!grads) return false;
  torch::jit::drop(*stack, n);
  stack->emplace_back(std::get<0>(*grads));
  stack->emplace_back(std::get<1>(*grads));
  stack->emplace_back(std::get<2>(*grads));
  return true;
}

}  // namespace openneuron::integration

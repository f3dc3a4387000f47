#include "torch/aten/eager/implicit_gemm_convolution.h"

#include <ATen/Functions.h>

#include <algorithm>
#include <vector>

#include "compiler/codegen/gemm_launch.h"
#include "hal/driver.h"
#include "torch/aten/eager/library_kernels.h"
#include "torch/runtime/compiled_kernels.h"

namespace openneuron::integration {
namespace {

// A convolution argument along spatial dim `i` (one value may stand for all).
int64_t along(c10::IntArrayRef a, int64_t i) { return a.size() == 1 ? a[0] : a[i]; }

// A 2-d convolution's sizes; a 1-d one is a 2-d one of height 1.
struct Geometry {
  bool flat = false;
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
  int64_t taps() const { return kh * kw; }
  // The kernels' scalars after the gemm's (glsl_gemm.cc).
  std::vector<int64_t> conv_scalars() const { return {h, w, ow, kh, kw, sh, sw, ph, pw, dh, dw}; }
};

std::optional<Geometry> geometry(const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
                                 c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups) {
  if (groups != 1 || input.scalar_type() != at::kFloat || weight.scalar_type() != at::kFloat ||
      (input.dim() != 3 && input.dim() != 4) || weight.dim() != input.dim())
    return std::nullopt;
  const hal::DeviceProperties& props = hal::driver().properties(input.device().index());
  if (props.kernel_target == "cpp" || !props.tiled_kernels) return std::nullopt;
  Geometry g;
  g.flat = input.dim() == 3;
  const int64_t x = g.flat ? 0 : 1;  // the width's index in the arguments
  g.n = input.size(0), g.c = input.size(1), g.h = g.flat ? 1 : input.size(2), g.w = input.size(-1);
  g.o = weight.size(0), g.kh = g.flat ? 1 : weight.size(2), g.kw = weight.size(-1);
  g.sh = g.flat ? 1 : along(stride, 0), g.sw = along(stride, x);
  g.ph = g.flat ? 0 : along(padding, 0), g.pw = along(padding, x);
  g.dh = g.flat ? 1 : along(dilation, 0), g.dw = along(dilation, x);
  g.oh = (g.h + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  g.ow = (g.w + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  if (g.n == 0 || g.o == 0 || g.c == 0 || g.oh <= 0 || g.ow <= 0 || weight.size(1) != g.c) return std::nullopt;
  return g;
}

// The `family` kernel ("conv2d", "conv2d_dgrad") of the tile size the
// product's shape takes, with its grid; -1 when it takes no tiled kernel.
std::pair<int64_t, int64_t> tiled_kernel(c10::DeviceIndex device, const std::string& family,
                                         const compiler::GemmShape& shape) {
  const hal::DeviceProperties& props = hal::driver().properties(device);
  const compiler::GemmLaunch launch =
      compiler::gemm_launch(shape, /*float32=*/true, props.tiled_kernels, props.compute_units, props.max_workgroups);
  if ((launch.entry != "gemm_t128" && launch.entry != "gemm_t64") || launch.swap_operands) return {-1, 0};
  return {library_kernel(device, family + "_t" + launch.entry.substr(6) + "_f32"), launch.workgroups};
}

}  // namespace

std::optional<at::Tensor> implicit_gemm_convolution(const at::Tensor& input, const at::Tensor& weight,
                                                    const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                                    c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                                    int64_t groups) {
  const bool has_bias = bias && bias->defined();
  if (has_bias && bias->scalar_type() != at::kFloat) return std::nullopt;
  const auto g = geometry(input, weight, stride, padding, dilation, groups);
  if (!g) return std::nullopt;
  const int64_t k = g->c * g->taps(), pixels = g->oh * g->ow;
  const auto [kernel, workgroups] = tiled_kernel(input.device().index(), "conv2d",
                                                 {g->n, g->o, pixels, k, std::max({g->o * k, g->c * g->h * g->w, g->o * pixels})});
  if (kernel < 0) return std::nullopt;
  const at::Tensor x = input.contiguous(), weights = weight.contiguous();
  at::Tensor out = at::empty(g->flat ? std::vector<int64_t>{g->n, g->o, g->ow} : std::vector<int64_t>{g->n, g->o, g->oh, g->ow},
                             x.options());
  // glsl_gemm.h's scalars: A = weights [o, k]; B = the columns (an image
  // apart); C = out [o, pixels] per image; X = the bias along rows.
  std::vector<int64_t> scalars = {g->n, g->o, pixels, k, 0, k, 1, g->c * g->h * g->w, 0, 0, g->o * pixels, pixels, 1,
                                  0, 1, 0, double_bits(1.0), double_bits(has_bias ? 1.0 : 0.0)};
  for (int64_t v : g->conv_scalars()) scalars.push_back(v);
  launch_compiled_kernel(kernel, {weights, x, out, has_bias ? bias->contiguous() : out}, scalars, workgroups);
  return out;
}

namespace {

// The input's gradient: A = the weights as [c, (o, kh, kw)]; B = the output
// gradient (an image apart); C = the input gradient [c, pixels] per image.
std::optional<at::Tensor> input_grad(const Geometry& g, const at::Tensor& grad_output, const at::Tensor& input,
                                     const at::Tensor& weight) {
  const int64_t k = g.o * g.taps(), pixels = g.h * g.w, out_image = g.o * g.oh * g.ow;
  const auto [kernel, workgroups] = tiled_kernel(input.device().index(), "conv2d_dgrad",
                                                 {g.n, g.c, pixels, k, std::max({g.c * k, out_image, g.c * pixels})});
  if (kernel < 0) return std::nullopt;
  at::Tensor grad_input = at::empty(input.sizes(), grad_output.options());
  std::vector<int64_t> scalars = {g.n, g.c, pixels, k, 0, 0, 0, out_image, 0, 0, g.c * pixels, pixels, 1,
                                  0, 1, 0, double_bits(1.0), double_bits(0.0)};
  for (int64_t v : g.conv_scalars()) scalars.push_back(v);
  launch_compiled_kernel(kernel, {weight.contiguous(), grad_output, grad_input, grad_input}, scalars, workgroups);
  return grad_input;
}

// The weights' gradient: A = an image's output gradient [o, pixels]; B =
// its columns, transposed [pixels, c*kh*kw]; C = its share, one per image,
// summed after (float sums within an image; across images the device's
// reduction: compensated on GPUs, double on the CPU). The shares outsize
// the columns when there are more output channels than pixels (late
// layers): then nullopt.
std::optional<at::Tensor> weight_grad(const Geometry& g, const at::Tensor& grad_output, const at::Tensor& input,
                                      const at::Tensor& weight) {
  const int64_t k = g.c * g.taps(), pixels = g.oh * g.ow;
  if (g.n > 1 && g.o > pixels) return std::nullopt;
  const auto [kernel, workgroups] = tiled_kernel(input.device().index(), "conv2d_wgrad",
                                                 {g.n, g.o, k, pixels, std::max({g.o * pixels, g.c * g.h * g.w, g.o * k})});
  if (kernel < 0) return std::nullopt;
  at::Tensor shares = at::empty({g.n, g.o, k}, grad_output.options());
  std::vector<int64_t> scalars = {g.n, g.o, k, pixels, g.o * pixels, pixels, 1, g.c * g.h * g.w, 0, 0,
                                  g.o * k, k, 1, 0, 1, 0, double_bits(1.0), double_bits(0.0)};
  for (int64_t v : g.conv_scalars()) scalars.push_back(v);
  launch_compiled_kernel(kernel, {grad_output, input.contiguous(), shares, shares}, scalars, workgroups);
  return (g.n == 1 ? shares[0] : shares.sum(0)).view(weight.sizes());
}

}  // namespace

ImplicitGemmGrads implicit_gemm_convolution_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                                     const at::Tensor& weight, c10::IntArrayRef stride,
                                                     c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                                     int64_t groups, bool want_input, bool want_weight) {
  ImplicitGemmGrads grads;
  if (grad_output.scalar_type() != at::kFloat) return grads;
  const auto g = geometry(input, weight, stride, padding, dilation, groups);
  if (!g) return grads;
  const at::Tensor go = grad_output.contiguous();
  if (want_input) grads.input = input_grad(*g, go, input, weight);
  if (want_weight) grads.weight = weight_grad(*g, go, input, weight);
  return grads;
}

}  // namespace openneuron::integration

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

// A convolution argument along spatial dim `i` of `dims` (one value may stand for all).
int64_t along(c10::IntArrayRef a, int64_t i) { return a.size() == 1 ? a[0] : a[i]; }

}  // namespace

std::optional<at::Tensor> implicit_gemm_convolution(const at::Tensor& input, const at::Tensor& weight,
                                                    const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                                    c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                                    int64_t groups) {
  const bool has_bias = bias && bias->defined();
  if (groups != 1 || input.scalar_type() != at::kFloat || weight.scalar_type() != at::kFloat ||
      (has_bias && bias->scalar_type() != at::kFloat) || (input.dim() != 3 && input.dim() != 4) ||
      weight.dim() != input.dim())
    return std::nullopt;
  const c10::DeviceIndex device = input.device().index();
  const hal::DeviceProperties& props = hal::driver().properties(device);
  if (props.kernel_target == "cpp" || !props.tiled_kernels) return std::nullopt;
  // A 1-d convolution is a 2-d one of height 1: its arguments describe the width.
  const bool flat = input.dim() == 3;
  const int64_t w_dim = flat ? 0 : 1;
  const int64_t n = input.size(0), c = input.size(1), h = flat ? 1 : input.size(2), w = input.size(-1);
  const int64_t o = weight.size(0), kh = flat ? 1 : weight.size(2), kw = weight.size(-1);
  const int64_t sh = flat ? 1 : along(stride, 0), sw = along(stride, w_dim);
  const int64_t ph = flat ? 0 : along(padding, 0), pw = along(padding, w_dim);
  const int64_t dh = flat ? 1 : along(dilation, 0), dw = along(dilation, w_dim);
  const int64_t oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1, ow = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  if (n == 0 || o == 0 || oh <= 0 || ow <= 0 || weight.size(1) != c) return std::nullopt;
  const int64_t k = c * kh * kw, pixels = oh * ow;
  compiler::GemmShape shape{n, o, pixels, k, std::max({o * k, c * h * w, o * pixels})};
  const compiler::GemmLaunch launch =
      compiler::gemm_launch(shape, /*float32=*/true, props.tiled_kernels, props.compute_units, props.max_workgroups);
  if ((launch.entry != "gemm_t128" && launch.entry != "gemm_t64") || launch.swap_operands) return std::nullopt;
  const int64_t kernel = library_kernel(device, "conv2d_t" + launch.entry.substr(6) + "_f32");
  if (kernel < 0) return std::nullopt;
  const at::Tensor x = input.contiguous(), weights = weight.contiguous();
  at::Tensor out = at::empty(flat ? std::vector<int64_t>{n, o, ow} : std::vector<int64_t>{n, o, oh, ow}, x.options());
  // glsl_gemm.h's scalars: A = weights [o, k]; B = the columns (an image
  // apart); C = out [o, pixels] per image; X = the bias along rows.
  const std::vector<int64_t> scalars = {n, o, pixels, k, 0, k, 1, c * h * w, 0, 0, o * pixels, pixels, 1,
                                        0, 1, 0, double_bits(1.0), double_bits(has_bias ? 1.0 : 0.0),
                                        h, w, ow, kh, kw, sh, sw, ph, pw, dh, dw};
  launch_compiled_kernel(kernel, {weights, x, out, has_bias ? bias->contiguous() : out}, scalars, launch.workgroups);
  return out;
}

}  // namespace openneuron::integration

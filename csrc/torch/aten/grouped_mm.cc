// torch._grouped_mm (torch.nn.functional.grouped_mm), which transformers'
// mixture-of-experts layers call for every expert at once. ATen has CUDA and
// XPU kernels and a CPU one; on protected and vulkan the CPU one ran on the
// CPU fallback, copying every expert's weights each call. This composes it
// from device products as CUDA and XPU do off their fast paths: the group
// offsets are read once (a device-to-host sync, as there), then one mm per
// group into slices of the output. Checks and output shape are ATen's own
// (GroupedMMUtils.h, inline in PyTorch 2.13's headers).
#include <ATen/ATen.h>
#include <ATen/native/GroupedMMUtils.h>
#include <torch/library.h>

namespace openneuron::integration {
namespace {

using at::Tensor;

Tensor grouped_mm(const Tensor& mat_a, const Tensor& mat_b, const std::optional<Tensor>& offs,
                  const std::optional<Tensor>& bias, std::optional<c10::ScalarType> out_dtype) {
  at::native::_grouped_mm_validate_inputs(mat_a, mat_b, offs, bias, out_dtype);
  const auto dtype = at::native::_resolve_grouped_mm_out_dtype(mat_a, mat_b, out_dtype);
  Tensor out = at::native::create_grouped_gemm_output_tensor(mat_a, mat_b, offs, dtype);
  if (!offs) {  // 3d x 3d: a batched product
    at::bmm_out(out, mat_a, mat_b);
    return out;
  }
  const Tensor ends = offs->to(at::kCPU, at::kLong);
  const int64_t* end = ends.const_data_ptr<int64_t>();
  const bool a_2d = mat_a.dim() == 2, b_2d = mat_b.dim() == 2;
  int64_t start = 0;
  for (int64_t g = 0; g < ends.numel(); ++g) {
    // ATen's CPU kernel slices past a bad offset silently; say which one.
    TORCH_CHECK(end[g] >= start, "torch._grouped_mm: offs must be non-decreasing, but offs[", g, "] = ",
                end[g], " follows ", start);
    Tensor part;
    if (a_2d && !b_2d) {  // groups of mat_a's rows, one matrix of mat_b each
      part = out.slice(0, start, end[g]);
      at::mm_out(part, mat_a.slice(0, start, end[g]), mat_b[g]);
    } else if (!a_2d && b_2d) {  // groups of mat_b's columns
      part = out.slice(1, start, end[g]);
      at::mm_out(part, mat_a[g], mat_b.slice(1, start, end[g]));
    } else {  // groups along the contraction: one output matrix each
      part = out[g];
      at::mm_out(part, mat_a.slice(1, start, end[g]), mat_b.slice(0, start, end[g]));
    }
    start = end[g];
  }
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_grouped_mm", TORCH_FN(grouped_mm));
}

}  // namespace
}  // namespace openneuron::integration

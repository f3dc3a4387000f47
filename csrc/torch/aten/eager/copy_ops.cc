#include "torch/aten/eager/copy_ops.h"

#include <ATen/Functions.h>
#include <ATen/WrapDimUtils.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <string>
#include <vector>

#include "torch/aten/eager/eager_kernel.h"
#include "torch/aten/eager/library_kernels.h"
#include "torch/aten/eager/eager_op.h"
#include "torch/aten/eager/tensor_alias.h"
#include "torch/runtime/compiled_kernels.h"

namespace openneuron::integration {
namespace {

at::Tensor seen(const at::Tensor& t, c10::IntArrayRef sizes, c10::IntArrayRef strides, int64_t offset) {
  return alias_with(t, sizes, strides, offset);
}

at::Tensor narrowed(const at::Tensor& t, int64_t dim, int64_t start, int64_t length) {
  std::vector<int64_t> sizes = t.sizes().vec();
  sizes[dim] = length;
  return seen(t, sizes, t.strides(), t.storage_offset() + start * t.stride(dim));
}

bool device_copy(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.numel() == 0) return true;
  at::Tensor d = dst;
  return copy_as_eager_kernel(d, src);
}

bool plain(const at::Tensor& t) { return !t.is_conj() && !t.is_neg(); }

// constant_pad_nd(self, pad, value)
bool constant_pad(const at::Tensor& self, const std::vector<int64_t>& pad, const c10::Scalar& value, at::Tensor& out) {
  if (out.numel() == 0) return true;
  out.fill_(value);
  at::Tensor src = self, dst = out;
  const int64_t dims = static_cast<int64_t>(pad.size() / 2);
  for (int64_t i = 0; i < dims; ++i) {
    const int64_t d = self.dim() - 1 - i, left = pad[2 * i], right = pad[2 * i + 1];
    const int64_t skip = std::max<int64_t>(0, -left);
    const int64_t length = self.size(d) - skip - std::max<int64_t>(0, -right);
    if (length <= 0) return true;  // all padding
    src = narrowed(src, d, skip, length);
    dst = narrowed(dst, d, std::max<int64_t>(0, left), length);
  }
  return device_copy(dst, src);
}

// flip(self, dims): one index_select per dim, with the indices reversed.
bool flip(const at::Tensor& self, const std::vector<int64_t>& dims, at::Tensor& out) {
  at::Tensor x = self;
  for (int64_t d : dims) {
    d = c10::maybe_wrap_dim(d, self.dim());
    const int64_t n = self.size(d);
    if (n <= 1) continue;
    x = at::index_select(x, d, at::arange(n - 1, -1, -1, self.options().dtype(at::kLong)));
  }
  return device_copy(out, x);
}

// roll along one dim: the last `shift` elements first.
bool roll_dim(const at::Tensor& src, at::Tensor& dst, int64_t dim, int64_t shift) {
  const int64_t n = src.size(dim);
  if (n == 0) return true;
  shift = ((shift % n) + n) % n;
  return device_copy(narrowed(dst, dim, shift, n - shift), narrowed(src, dim, 0, n - shift)) &&
         device_copy(narrowed(dst, dim, 0, shift), narrowed(src, dim, n - shift, shift));
}

bool roll(const at::Tensor& self, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims, at::Tensor& out) {
  if (!out.is_contiguous()) return false;
  if (dims.empty()) {  // rolled as one flat dim
    at::Tensor flat_src = self.is_contiguous() ? self : at::Tensor();
    if (!flat_src.defined()) {
      flat_src = empty_compiled_buffer(self.sizes(), out.strides(), self.scalar_type(), out.device().index());
      if (!device_copy(flat_src, self)) return false;
    }
    at::Tensor src1 = seen(flat_src, {self.numel()}, {1}, flat_src.storage_offset());
    at::Tensor dst1 = seen(out, {out.numel()}, {1}, out.storage_offset());
    return roll_dim(src1, dst1, 0, shifts[0]);
  }
  at::Tensor src = self;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = c10::maybe_wrap_dim(dims[i], self.dim());
    at::Tensor dst = i + 1 == dims.size()
                         ? out
                         : empty_compiled_buffer(out.sizes(), out.strides(), out.scalar_type(), out.device().index());
    if (!roll_dim(src, dst, d, shifts[i])) return false;
    src = dst;
  }
  return true;
}

// repeat(self, repeats): the result, as [r0, s0, r1, s1, ...], receives self
// broadcast along the repeat dims.
bool repeat(const at::Tensor& self, const std::vector<int64_t>& repeats, at::Tensor& out) {
  if (!out.is_contiguous() || out.numel() == 0) return out.numel() == 0;
  const int64_t lead = static_cast<int64_t>(repeats.size()) - self.dim();
  std::vector<int64_t> out_sizes, out_strides, in_sizes, in_strides;
  for (size_t i = 0; i < repeats.size(); ++i) {
    const int64_t d = static_cast<int64_t>(i) - lead;
    const int64_t s = d >= 0 ? self.size(d) : 1, t = d >= 0 ? self.stride(d) : 0;
    out_sizes.insert(out_sizes.end(), {repeats[i], s});
    out_strides.insert(out_strides.end(), {s * out.stride(i), out.stride(i)});
    in_sizes.insert(in_sizes.end(), {repeats[i], s});
    in_strides.insert(in_strides.end(), {0, t});
  }
  return device_copy(seen(out, out_sizes, out_strides, out.storage_offset()),
              seen(self, in_sizes, in_strides, self.storage_offset()));
}

}  // namespace

bool run_copy_op(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const std::string& name = schema.name();
  if (!schema.overload_name().empty() ||
      (name != "aten::constant_pad_nd" && name != "aten::flip" && name != "aten::roll" && name != "aten::repeat"))
    return false;
  const size_t n = schema.arguments().size();
  c10::ArrayRef<c10::IValue> args(stack->data() + stack->size() - n, n);
  const at::Tensor& self = args[0].toTensor();
  if (!plain(self)) return false;
  const ComposedOpScope composed;
  std::vector<at::Tensor> outs = eager_outputs(op, eager_op(op), device, args);  // shapes and errors
  at::Tensor out = outs[0];
  if (out.is_alias_of(self)) return false;
  bool ok;
  if (name == "aten::constant_pad_nd") ok = constant_pad(self, args[1].toIntVector(), args[2].toScalar(), out);
  else if (name == "aten::flip") ok = flip(self, args[1].toIntVector(), out);
  else if (name == "aten::roll") ok = roll(self, args[1].toIntVector(), args[2].toIntVector(), out);
  else ok = repeat(self, args[1].toIntVector(), out);
  if (!ok) return false;
  torch::jit::drop(*stack, n);
  stack->emplace_back(std::move(out));
  return true;
}

}  // namespace openneuron::integration

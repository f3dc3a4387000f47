#include "torch/aten/eager/indexing_ops.h"

#include <ATen/TensorUtils.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/broadcast_tensors.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hal/driver.h"
#include "torch/aten/eager/eager_kernel.h"
#include "torch/aten/eager/eager_op.h"
#include "torch/aten/eager/library_kernels.h"
#include "torch/runtime/compiled_kernels.h"
#include "torch/runtime/device.h"

namespace openneuron::integration {
namespace {

using Args = c10::ArrayRef<c10::IValue>;


bool float_type(at::ScalarType t) { return t == at::kFloat || t == at::kDouble; }


// A neuron tensor of `like`'s device.
at::Tensor empty_on(const at::Tensor& like, c10::IntArrayRef sizes, at::ScalarType dtype) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * std::max<int64_t>(sizes[d + 1], 1);
  return empty_compiled_buffer(sizes, strides, dtype, like.device().index());
}

// `t` as a contiguous tensor (a device copy when it is not one).
at::Tensor dense(const at::Tensor& t) {
  if (t.is_contiguous() && !t.is_conj() && !t.is_neg()) return t;
  at::Tensor out = empty_on(t, t.sizes(), t.scalar_type());
  TORCH_CHECK(copy_as_eager_kernel(out, t), "neuron: could not make a contiguous copy on the device");
  return out;
}

at::Tensor as_type(const at::Tensor& t, at::ScalarType dtype) {
  if (t.scalar_type() == dtype) return dense(t);
  at::Tensor out = empty_on(t, t.sizes(), dtype);
  TORCH_CHECK(copy_as_eager_kernel(out, t), "neuron: could not convert on the device");
  return out;
}

struct Launch {
  int64_t kernel = -1;
  bool ok() const { return kernel >= 0; }
};

Launch find(c10::DeviceIndex device, const std::string& entry) { return {library_kernel(device, entry)}; }

// The C++ library's kernels run on host threads with the CPU's semantics
// throughout; a GPU target's lack a few (noted at their use).
bool cpp_target(c10::DeviceIndex device) { return hal::driver().properties(device).kernel_target == "cpp"; }

// The error word a kernel sets for an index out of range, zeroed.
at::Tensor error_word(const at::Tensor& like) {
  at::Tensor err = empty_on(like, {2}, at::kLong);
  err.zero_();
  return err;
}

// The index the kernel found out of range, if any (waits for the kernel).
std::optional<int64_t> bad_index(const at::Tensor& err) {
  const at::Tensor host = err.cpu();
  const int64_t* v = host.const_data_ptr<int64_t>();
  if (!v[0]) return std::nullopt;
  return v[1];
}

int64_t prod(c10::IntArrayRef sizes, int64_t from, int64_t to) {
  int64_t n = 1;
  for (int64_t d = from; d < to; ++d) n *= sizes[d];
  return n;
}

// Coordinates of `shape` (rank <= 8) and strides of `tensors` (each seen in
// that shape), in the kernels' Coords layout.
std::optional<std::vector<int64_t>> coords(int64_t dim, c10::IntArrayRef shape,
                                           std::initializer_list<const at::Tensor*> tensors) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank > 8) return std::nullopt;
  std::vector<int64_t> s(10 + 8 * tensors.size(), 0);
  s[0] = std::max<int64_t>(rank, 1);
  s[1] = rank ? dim : 0;
  for (int d = 0; d < 8; ++d) s[2 + d] = d < rank ? shape[d] : 1;
  size_t t = 0;
  for (const at::Tensor* x : tensors) {
    for (int64_t d = 0; d < x->dim() && d < 8; ++d) s[10 + t * 8 + d] = x->stride(d);
    ++t;
  }
  return s;
}


using Handler = std::function<bool(const c10::OperatorHandle&, c10::DeviceIndex, torch::jit::Stack*)>;


// index_select(self, dim, index) and embedding(weight, indices, ...).
bool index_select(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack, bool embedding) {
  Args args = op_args(op, stack);
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& index = embedding ? args[1].toTensor() : args[2].toTensor();
  if (index.scalar_type() != at::kLong && index.scalar_type() != at::kInt) return false;
  const size_t element = self.element_size();
  const std::string entry = "index_select_e" + std::to_string(element);
  Launch k = find(device, entry);
  if (!k.ok()) return false;
  std::vector<at::Tensor> outs = eager_outputs(op, eager_op(op), device, args);
  at::Tensor out = outs[0];
  if (!out.is_contiguous()) return false;
  const int64_t dim = embedding ? 0 : c10::maybe_wrap_dim(args[1].toInt(), std::max<int64_t>(self.dim(), 1));
  if (out.numel() > 0) {
    const at::Tensor src = dense(self), idx = dense(index);
    const c10::IntArrayRef sizes = self.dim() ? self.sizes() : c10::IntArrayRef({1});
    at::Tensor err = error_word(out);
    launch_compiled_kernel(k.kernel, {src, idx, out, err},
                           {prod(sizes, 0, dim), sizes[dim], prod(sizes, dim + 1, sizes.size()), idx.numel(),
                            index.scalar_type() == at::kInt});
    if (auto bad = bad_index(err)) {
      if (embedding) TORCH_CHECK_INDEX(false, "index out of range in self");
      TORCH_CHECK_INDEX(false, "index_select(): index ", *bad, " out of range for tensor of size ", self.sizes(),
                        " at dimension ", dim);
    }
  }
  finish_op(stack, args.size(), std::move(outs));
  return true;
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
bool embedding_backward(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const at::Tensor& grad = args[0].toTensor();
  if (!float_type(grad.scalar_type())) return false;
  // A GPU target's kernel sums each column over every index (one
  // invocation per column): it counts no frequencies.
  const bool scale = args[4].toBool();
  if (!cpp_target(device) && (scale || !loops_fit(device, args[1].toTensor().numel()))) return false;
  Launch k = find(device, std::string("embedding_backward_") + library_type_suffix(grad.scalar_type()));
  if (!k.ok()) return false;
  std::vector<at::Tensor> outs = eager_outputs(op, eager_op(op), device, args);
  at::Tensor out = outs[0];
  if (!out.is_contiguous() || out.dim() != 2) return false;
  const at::Tensor idx = as_type(args[1].toTensor(), at::kLong);
  const at::Tensor g = dense(grad);
  out.zero_();
  at::Tensor err = error_word(out);
  launch_compiled_kernel(k.kernel, {g, idx, out, err},
                         {idx.numel(), out.size(1), out.size(0), args[3].toInt(), scale});
  if (bad_index(err)) TORCH_CHECK_INDEX(false, "index out of range in self");
  finish_op(stack, args.size(), std::move(outs));
  return true;
}

// gather(self, dim, index, sparse_grad)
bool gather(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& index = args[2].toTensor();
  Launch k = find(device, "gather_e" + std::to_string(self.element_size()));
  if (!k.ok() || index.scalar_type() != at::kLong || self.is_conj() || self.is_neg()) return false;
  std::vector<at::Tensor> outs = eager_outputs(op, eager_op(op), device, args);
  at::Tensor out = outs[0];
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), std::max<int64_t>(self.dim(), 1));
  auto s = coords(dim, index.sizes(), {&self, &index, &out});
  if (!s) return false;
  if (index.numel() > 0) {
    s->push_back(self.dim() ? self.size(dim) : 1);
    at::Tensor err = error_word(out);
    launch_compiled_kernel(k.kernel, {self, index, out, err}, *s);
    if (auto bad = bad_index(err))
      TORCH_CHECK_INDEX(false, "index ", *bad, " is out of bounds for dimension ", dim, " with size ",
                        self.dim() ? self.size(dim) : 1);
  }
  finish_op(stack, args.size(), std::move(outs));
  return true;
}

// The library's scatter kernel for `out`'s dtype, when the device has one
// and its loops fit (bool assigns as bytes).
Launch scatter_kernel(const at::Tensor& out, const at::Tensor& index, int64_t dim, int mode) {
  const at::ScalarType type = out.scalar_type() == at::kBool && mode != 1 ? at::kByte : out.scalar_type();
  const char* suffix = library_type_suffix(type);
  if (!suffix || index.scalar_type() != at::kLong || index.dim() > 8) return {};
  const c10::DeviceIndex device = out.device().index();
  if (!loops_fit(device, index.dim() ? index.size(dim) : 1)) return {};
  return find(device, std::string("scatter_") + suffix);
}

void launch_scatter(Launch k, const at::Tensor& out, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                    int mode, double value) {
  if (index.numel() == 0) return;
  auto s = coords(dim, index.sizes(), {&out, &index, &src});
  s->push_back(out.dim() ? out.size(dim) : 1);
  s->push_back(mode);
  s->push_back(double_bits(value));
  at::Tensor err = error_word(out);
  launch_compiled_kernel(k.kernel, {out, index, src, err}, *s);
  if (auto bad = bad_index(err))
    TORCH_CHECK_INDEX(false, "index ", *bad, " is out of bounds for dimension ", dim, " with size ",
                      out.dim() ? out.size(dim) : 1);
}

// scatter.src / scatter.value / scatter_add, functional and in place.
bool scatter(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack, int mode) {
  Args args = op_args(op, stack);
  const EagerOp& e = eager_op(op);
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& index = args[2].toTensor();
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), std::max<int64_t>(self.dim(), 1));
  Launch k = scatter_kernel(self, index, dim, mode);
  if (!k.ok()) return false;
  const bool value = mode == 2;
  if (!value && (args[3].toTensor().scalar_type() != self.scalar_type() || args[3].toTensor().is_conj())) return false;
  std::vector<at::Tensor> outs = eager_outputs(op, e, device, args);
  at::Tensor out = outs[0];
  if (e.form == EagerOp::Form::Functional && out.numel() > 0 && !copy_as_eager_kernel(out, self)) return false;
  const at::Tensor src = value ? out : args[3].toTensor();
  launch_scatter(k, out, dim, index, src, mode, value ? args[3].toScalar().toDouble() : 0.0);
  finish_op(stack, args.size(), std::move(outs));
  return true;
}

// nll_loss_forward(self, target, weight, reduction, ignore_index) -> (output, total_weight)
bool nll_loss_forward(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const at::Tensor& self = args[0].toTensor();
  if (!float_type(self.scalar_type()) || self.dim() > 2 || args[1].toTensor().scalar_type() != at::kLong) return false;
  Launch k = find(device, std::string("nll_loss_forward_") + library_type_suffix(self.scalar_type()));
  if (!k.ok() || !loops_fit(device, self.dim() == 2 ? self.size(0) / 64 : 1)) return false;
  std::vector<at::Tensor> outs = eager_outputs(op, eager_op(op), device, args);
  const bool weighted = args[2].isTensor() && args[2].toTensor().defined();
  if (weighted && args[2].toTensor().scalar_type() != self.scalar_type()) return false;
  const at::Tensor x = dense(self), target = dense(args[1].toTensor());
  const at::Tensor weight = weighted ? dense(args[2].toTensor()) : x;
  const int64_t n = self.dim() == 2 ? self.size(0) : 1, c = self.size(-1);
  at::Tensor err = error_word(x);
  launch_compiled_kernel(k.kernel, {x, target, weight, outs[0], outs[1], err},
                         {n, c, weighted, args[3].toInt(), args[4].toInt()});
  if (auto bad = bad_index(err)) TORCH_CHECK_INDEX(false, "Target ", *bad, " is out of bounds.");
  finish_op(stack, args.size(), std::move(outs));
  return true;
}

// nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)
bool nll_loss_backward(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const at::Tensor& self = args[1].toTensor();
  if (!float_type(self.scalar_type()) || self.dim() > 2 || args[2].toTensor().scalar_type() != at::kLong) return false;
  Launch k = find(device, std::string("nll_loss_backward_") + library_type_suffix(self.scalar_type()));
  if (!k.ok()) return false;
  std::vector<at::Tensor> outs = eager_outputs(op, eager_op(op), device, args);
  if (!outs[0].is_contiguous()) return false;
  const bool weighted = args[3].isTensor() && args[3].toTensor().defined();
  const at::Tensor go = dense(args[0].toTensor()), target = dense(args[2].toTensor());
  const at::Tensor weight = weighted ? dense(args[3].toTensor()) : go;
  const int64_t n = self.dim() == 2 ? self.size(0) : 1, c = self.size(-1);
  at::Tensor err = error_word(go);
  launch_compiled_kernel(k.kernel, {go, target, weight, dense(args[6].toTensor()), outs[0], err},
                         {n, c, weighted, args[4].toInt(), args[5].toInt()});
  if (auto bad = bad_index(err)) TORCH_CHECK_INDEX(false, "Target ", *bad, " is out of bounds.");
  finish_op(stack, args.size(), std::move(outs));
  return true;
}

// cumsum / cumprod (self, dim, dtype)
bool scan(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack, int mode) {
  Args args = op_args(op, stack);
  const EagerOp& e = eager_op(op);
  if (e.form != EagerOp::Form::Functional) return false;
  std::vector<at::Tensor> outs = eager_outputs(op, e, device, args);
  at::Tensor out = outs[0];
  const char* suffix = library_type_suffix(out.scalar_type());
  if (!suffix) return false;
  Launch k = find(device, std::string("scan_") + suffix);
  const at::Tensor& self = args[0].toTensor();
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), std::max<int64_t>(self.dim(), 1));
  if (!k.ok() || !loops_fit(device, self.dim() ? self.size(dim) : 1)) return false;
  if (out.numel() > 0) {
    const at::Tensor x = as_type(self, out.scalar_type());
    at::Tensor result = out.is_contiguous() ? out : empty_on(out, out.sizes(), out.scalar_type());
    const c10::IntArrayRef sizes = self.dim() ? self.sizes() : c10::IntArrayRef({1});
    launch_compiled_kernel(k.kernel, {x, result},
                           {prod(sizes, 0, dim), sizes[dim], prod(sizes, dim + 1, sizes.size()), mode});
    if (!result.is_same(out)) TORCH_CHECK(copy_as_eager_kernel(out, result), "neuron: copy failed");
  }
  finish_op(stack, args.size(), std::move(outs));
  return true;
}

// argmax / argmin (self, dim?, keepdim) and max.dim / min.dim (self, dim, keepdim)
bool extreme(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack, int mode,
             bool with_values) {
  Args args = op_args(op, stack);
  const at::Tensor& self = args[0].toTensor();
  const char* suffix = library_type_suffix(self.scalar_type());
  if (!suffix || eager_op(op).form != EagerOp::Form::Functional) return false;
  Launch k = find(device, std::string("arg_extreme_") + suffix);
  const int64_t line = args[1].isNone() || self.dim() == 0
                           ? self.numel()
                           : self.size(c10::maybe_wrap_dim(args[1].toInt(), self.dim()));
  if (!k.ok() || !loops_fit(device, line / 64)) return false;
  std::vector<at::Tensor> outs = eager_outputs(op, eager_op(op), device, args);
  for (const auto& t : outs)
    if (!t.is_contiguous()) return false;
  if (self.numel() > 0) {
    const at::Tensor x = dense(self);
    int64_t outer = 1, size = self.numel(), inner = 1;
    if (!args[1].isNone() && self.dim() > 0) {
      const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), self.dim());
      outer = prod(self.sizes(), 0, dim);
      size = self.size(dim);
      inner = prod(self.sizes(), dim + 1, self.dim());
    }
    const at::Tensor values = with_values ? outs[0] : x;
    const at::Tensor indices = with_values ? outs[1] : outs[0];
    launch_compiled_kernel(k.kernel, {x, values, indices}, {outer, size, inner, mode, with_values});
  }
  finish_op(stack, args.size(), std::move(outs));
  return true;
}

// sort(self, dim, descending), sort.stable(self, stable, dim, descending)
// and topk(self, k, dim, largest, sorted=True): each line's values in order
// with their indices (topk: its k first), tied values in the CPU's order.
// Left to the CPU: topk(sorted=False) (an order of its choosing) and 1-D
// integer sorts of 32768 elements or more (its radix sort's tie order).
enum class SortForm { sort, sort_stable, topk };

// Lines past the rank kernel's reach (sort_lines): merge passes
// (merge_lines) over a contiguous copy of the lines, between two buffers,
// log2(size) of them; then the first `kept` of each line into the outputs.
bool merge_sort(const at::Tensor& self, int64_t dim, bool descending, int64_t kept, const std::vector<at::Tensor>& outs,
                c10::DeviceIndex device, const char* suffix) {
  Launch k = find(device, std::string("merge_lines_") + suffix);
  if (!k.ok()) return false;
  const at::Tensor moved = self.movedim(dim, -1);
  const int64_t size = moved.size(-1), lines = moved.numel() / size;
  at::Tensor values[2] = {empty_on(self, moved.sizes(), self.scalar_type()),
                          empty_on(self, moved.sizes(), self.scalar_type())};
  at::Tensor indices[2] = {empty_on(self, moved.sizes(), at::kLong), empty_on(self, moved.sizes(), at::kLong)};
  TORCH_CHECK(copy_as_eager_kernel(values[0], moved), "neuron: could not copy sort's lines on the device");
  int now = 0;
  for (int64_t width = 1; width < size; width *= 2, now = 1 - now)
    launch_compiled_kernel(k.kernel, {values[now], indices[now], values[1 - now], indices[1 - now]},
                           {lines, size, width, descending, width == 1});
  at::Tensor out_values = outs[0].movedim(dim, -1), out_indices = outs[1].movedim(dim, -1);
  TORCH_CHECK(copy_as_eager_kernel(out_values, values[now].narrow(-1, 0, kept)) &&
                  copy_as_eager_kernel(out_indices, indices[now].narrow(-1, 0, kept)),
              "neuron: could not copy sort's results on the device");
  return true;
}

bool sort_op(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack, SortForm form) {
  Args args = op_args(op, stack);
  const at::Tensor& self = args[0].toTensor();
  const char* suffix = library_type_suffix(self.scalar_type());
  if (!suffix || eager_op(op).form != EagerOp::Form::Functional) return false;
  if (form == SortForm::topk && !args[4].toBool()) return false;
  const bool stable = form == SortForm::sort_stable && !args[1].isNone() && args[1].toBool();
  // The CPU radix-sorts long 1-D integer lines, which orders ties otherwise
  // than std::sort; a stable sort has one answer whatever the algorithm.
  if (form != SortForm::topk && !stable && self.dim() == 1 && self.numel() >= 32768 &&
      at::isIntegralType(self.scalar_type(), /*includeBool=*/false))
    return false;
  Launch k = find(device, std::string("sort_lines_") + suffix);
  if (!k.ok()) return false;
  const int64_t dim_arg = args[form == SortForm::sort ? 1 : 2].toInt();
  const bool descending = args[form == SortForm::sort ? 2 : 3].toBool();  // topk: largest
  bool merge = false;
  if (!cpp_target(device)) {
    // The GLSL kernel ranks each element against its whole line: lines up
    // to 8192 elements within the device's loop-trip limit (lavapipe's);
    // longer ones take the merge sort.
    const int64_t rank = std::max<int64_t>(self.dim(), 1);
    if (dim_arg < -rank || dim_arg >= rank) return false;
    const int64_t line = self.dim() ? self.size(c10::maybe_wrap_dim(dim_arg, rank)) : 1;
    merge = line > 8192 || !loops_fit(device, (line + 63) / 64 * (line / 4 + 4));
  }
  if (form == SortForm::topk) {  // a k out of range: the CPU's message, not the meta function's
    const int64_t rank = std::max<int64_t>(self.dim(), 1);
    if (dim_arg < -rank || dim_arg >= rank) return false;
    const int64_t k_arg = args[1].toInt();
    if (k_arg < 0 || k_arg > (self.dim() ? self.size(c10::maybe_wrap_dim(dim_arg, rank)) : 1)) return false;
  }
  // The meta function raises the CPU's errors for a dim out of range.
  std::vector<at::Tensor> outs = eager_outputs(op, eager_op(op), device, args);
  // The kernels write dense lines: outputs strided as a transposed input
  // (the meta function keeps its layout) are written through dense copies.
  std::vector<at::Tensor> dense_outs;
  for (const auto& t : outs) dense_outs.push_back(t.is_contiguous() ? t : empty_on(t, t.sizes(), t.scalar_type()));
  const c10::IntArrayRef sizes = self.dim() ? self.sizes() : c10::IntArrayRef({1});
  const int64_t dim = c10::maybe_wrap_dim(dim_arg, static_cast<int64_t>(sizes.size()));
  const int64_t kept = form == SortForm::topk ? args[1].toInt() : sizes[dim];
  if (merge) {
    if (self.numel() > 0 && kept > 0 && !merge_sort(self, dim, descending, kept, dense_outs, device, suffix))
      return false;
  } else if (self.numel() > 0 && kept > 0)
    launch_compiled_kernel(k.kernel, {dense(self), dense_outs[0], dense_outs[1]},
                           {prod(sizes, 0, dim), sizes[dim], prod(sizes, dim + 1, sizes.size()), descending,
                            form == SortForm::topk ? kept : stable ? -2 : -1});
  for (size_t i = 0; i < outs.size(); ++i)
    if (!dense_outs[i].is_same(outs[i])) TORCH_CHECK(copy_as_eager_kernel(outs[i], dense_outs[i]), "neuron: copy failed");
  finish_op(stack, args.size(), std::move(outs));
  return true;
}

// arange.start_out(start, end, step, out) and linspace.out(start, end, steps, out)
bool ramp(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack, bool linspace) {
  Args args = op_args(op, stack);
  const at::Tensor& out_arg = args[3].toTensor();
  const char* suffix = library_type_suffix(out_arg.scalar_type());
  // A floating arange is start + i * step rounded once (the C++ target
  // computes it in double; GLSL in the output's type, as CUDA does): within
  // an ulp of the CPU's, whose vector lanes add the step to a rounded base,
  // not bitwise. Integer linspace rounds as the CPU's does elsewhere.
  if (!suffix || (linspace && !float_type(out_arg.scalar_type()))) return false;
  for (int i = 0; i < 2; ++i)
    if (!args[i].isScalar() || args[i].toScalar().isComplex()) return false;
  Launch k = find(device, std::string("ramp_") + suffix);
  if (!k.ok()) return false;
  std::vector<at::Tensor> outs = eager_outputs(op, eager_op(op), device, args);
  at::Tensor out = outs[0];
  if (!out.is_contiguous()) return false;
  const double start = args[0].toScalar().toDouble(), end = args[1].toScalar().toDouble();
  const int64_t n = out.numel();
  double step = linspace ? (n > 1 ? (end - start) / static_cast<double>(n - 1) : 0.0) : args[2].toScalar().toDouble();
  const bool from_both_ends = linspace && n > 1;  // one step: the start, as the CPU
  if (n > 0) launch_compiled_kernel(k.kernel, {out}, {n, double_bits(start), double_bits(step), from_both_ends, double_bits(end)});
  finish_op(stack, args.size(), std::move(outs));
  return true;
}

// stack(tensors, dim): one device copy per tensor into its slice.
bool stack_op(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const auto tensors = args[0].toTensorVector();
  for (const auto& t : tensors)
    if (t.device().type() != kNeuron || t.is_conj() || t.is_neg()) return false;
  std::vector<at::Tensor> outs = eager_outputs(op, eager_op(op), device, args);
  at::Tensor out = outs[0];
  for (const auto& t : tensors)
    if (t.is_alias_of(out)) return false;
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), out.dim());
  for (size_t i = 0; i < tensors.size(); ++i) {
    at::Tensor slice = out.select(dim, static_cast<int64_t>(i));
    if (tensors[i].numel() > 0 && !copy_as_eager_kernel(slice, tensors[i])) return false;
  }
  finish_op(stack, args.size(), std::move(outs));
  return true;
}

// equal(self, other): the same sizes and every element equal (NaN is not),
// as one device reduction read back; dtypes must match, as on the CPU.
bool equal_op(const c10::OperatorHandle& op, c10::DeviceIndex, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const at::Tensor self = args[0].toTensor(), other = args[1].toTensor();
  if (self.device() != other.device() || self.device().type() != kNeuron) return false;
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "equal: expected object of scalar type ",
              self.scalar_type(), " but got scalar type ", other.scalar_type(), " for argument 'other'");
  const bool result = self.sizes() == other.sizes() && (self.numel() == 0 || at::eq(self, other).all().item<bool>());
  torch::jit::drop(*stack, args.size());
  stack->emplace_back(result);
  return true;
}

// max(self) and min(self): amax and amin over every dim, which have device
// kernels; an empty input is an error, as on the CPU.
bool extreme_of_all(const c10::OperatorHandle& op, c10::DeviceIndex, torch::jit::Stack* stack, bool max) {
  Args args = op_args(op, stack);
  const at::Tensor self = args[0].toTensor();
  if (self.device().type() != kNeuron) return false;
  TORCH_CHECK(self.numel() > 0, max ? "max()" : "min()",
              ": Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the "
              "'dim' argument.");
  at::Tensor out = max ? at::amax(self) : at::amin(self);
  finish_op(stack, args.size(), {out});
  return true;
}

// Advanced indexing (x[i, :, j]) with integer index tensors: the indexed
// dims' indices combine into one linear index over those dims, viewed as
// one dim of `x`. As PyTorch, the broadcast index dims take the indexed
// dims' place when those are adjacent, else they come first. A boolean
// mask (its result's shape depends on the values) is left to other routes.
struct LinearIndex {
  at::Tensor x;           // self, its indexed dims first when not adjacent
  int64_t first = 0;      // where the indexed dims start in x
  int64_t count = 0;      // how many
  int64_t block = 1;      // their elements
  at::Tensor linear;      // broadcast index shape; `block` where an index is out of range
  std::vector<at::Tensor> indices;
  // x's shape with the indexed dims as one, and with them as the index's.
  std::vector<int64_t> blocked_shape() const {
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().begin() + first);
    shape.push_back(block);
    shape.insert(shape.end(), x.sizes().begin() + first + count, x.sizes().end());
    return shape;
  }
  std::vector<int64_t> result_shape() const {
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().begin() + first);
    shape.insert(shape.end(), linear.sizes().begin(), linear.sizes().end());
    shape.insert(shape.end(), x.sizes().begin() + first + count, x.sizes().end());
    return shape;
  }
  // The CPU's error for the first index out of range (by indexed dim).
  [[noreturn]] void raise_out_of_range() const {
    for (int64_t j = 0; j < count; ++j) {
      const at::Tensor i = indices[j].cpu().reshape(-1);
      const int64_t size = x.size(first + j);
      for (int64_t k = 0; k < i.numel(); ++k) {
        const int64_t v = i[k].item<int64_t>();
        TORCH_CHECK_INDEX(v >= -size && v < size, "index ", v, " is out of bounds for dimension ", j, " with size ",
                          size);
      }
    }
    TORCH_CHECK_INDEX(false, "index out of range");
  }
};

std::optional<LinearIndex> linear_index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& list) {
  if (self.device().type() != kNeuron || list.size() == 0) return std::nullopt;
  LinearIndex li;
  std::vector<int64_t> dims;
  int64_t dim = 0;  // the dim the next entry indexes
  for (size_t e = 0; e < list.size(); ++e) {
    const std::optional<at::Tensor> i = list.get(e);
    if (!i.has_value() || !i->defined()) {
      ++dim;
      continue;
    }
    if (i->device() != self.device() && !i->device().is_cpu()) return std::nullopt;
    if (i->scalar_type() == at::kBool || i->scalar_type() == at::kByte) {
      // A mask over the next k dims stands for its nonzero's k columns,
      // as in PyTorch (its shape must match: else the CPU raises).
      const int64_t k = i->dim();
      if (k == 0 || dim + k > self.dim() || self.sizes().slice(dim, k) != i->sizes()) return std::nullopt;
      const at::Tensor coords = at::nonzero(i->to(self.device(), at::kBool));
      for (int64_t j = 0; j < k; ++j) {
        dims.push_back(dim++);
        li.indices.push_back(coords.select(1, j));
      }
      continue;
    }
    if (i->scalar_type() != at::kLong && i->scalar_type() != at::kInt) return std::nullopt;
    dims.push_back(dim++);
    li.indices.push_back(i->to(self.device(), at::kLong));
  }
  if (dims.empty() || dim > self.dim()) return std::nullopt;
  li.indices = at::broadcast_tensors(li.indices);
  const bool adjacent = dims.back() - dims.front() + 1 == static_cast<int64_t>(dims.size());
  std::vector<int64_t> order = dims;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) order.push_back(d);
  li.x = adjacent ? self : self.permute(order);
  li.first = adjacent ? dims.front() : 0;
  li.count = static_cast<int64_t>(dims.size());
  for (int64_t j = 0; j < li.count; ++j) li.block *= li.x.size(li.first + j);
  li.linear = at::zeros_like(li.indices[0]);
  at::Tensor bad = at::zeros_like(li.indices[0], at::kBool);
  int64_t stride = 1;
  for (int64_t j = li.count - 1; j >= 0; --j) {
    const int64_t size = li.x.size(li.first + j);
    const at::Tensor& i = li.indices[j];
    bad.logical_or_(i.lt(-size).logical_or_(i.ge(size)));
    li.linear.add_(at::where(i.lt(0), i.add(size), i), stride);
    stride *= size;
  }
  li.linear.masked_fill_(bad, li.block);  // out of range as a whole: the kernel reports it
  return li;
}

// The linear positions (int64, ascending) of `self`'s non-zero elements:
// their count read back (nonzero's size is its values', as on CUDA), then a
// scan gives each its slot and a scatter writes it there (the others all
// write one spare slot past the end).
at::Tensor nonzero_positions(const at::Tensor& self) {
  const at::Tensor flat = self.reshape(-1).ne(0);
  const int64_t count = flat.sum().item().toLong();
  const at::Tensor slot = at::where(flat, flat.to(at::kLong).cumsum(0).sub_(1), count);
  at::Tensor out = at::empty({count + 1}, self.options().dtype(at::kLong));
  out.scatter_(0, slot, at::arange(flat.numel(), out.options()));
  return out.narrow(0, 0, count);
}

// nonzero(self): each non-zero element's coordinates, [count, dim].
bool nonzero_op(const c10::OperatorHandle& op, c10::DeviceIndex, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const at::Tensor self = args[0].toTensor();
  if (self.device().type() != kNeuron || self.dim() == 0 || self.numel() == 0 || self.is_complex()) return false;
  at::Tensor position = nonzero_positions(self);
  std::vector<at::Tensor> coords(self.dim());
  for (int64_t d = self.dim() - 1; d >= 0; --d) {
    coords[d] = position.remainder(self.size(d));
    position = position.div(self.size(d), "floor");
  }
  // [dim, count] transposed: the CPU's strides (1, count)
  finish_op(stack, args.size(), {at::stack(coords, 0).t()});
  return true;
}

// masked_select(self, mask): the elements where the broadcast mask is set.
bool masked_select_op(const c10::OperatorHandle& op, c10::DeviceIndex, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const at::Tensor self = args[0].toTensor(), mask = args[1].toTensor();
  if (self.device().type() != kNeuron || mask.device() != self.device() || mask.scalar_type() != at::kBool)
    return false;
  const auto both = at::broadcast_tensors({self, mask});
  finish_op(stack, args.size(), {both[0].reshape(-1).index_select(0, nonzero_positions(both[1]))});
  return true;
}

// index(self, indices): index_select along the linear index.
bool index_tensor(const c10::OperatorHandle& op, c10::DeviceIndex, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const auto li = linear_index(args[0].toTensor(), args[1].toOptionalTensorList());
  if (!li) return false;
  at::Tensor gathered;
  try {
    gathered = li->x.reshape(li->blocked_shape()).index_select(li->first, li->linear.reshape(-1));
  } catch (const c10::IndexError&) {
    li->raise_out_of_range();
  }
  finish_op(stack, args.size(), {gathered.view(li->result_shape())});
  return true;
}

// index_put_(self, indices, values, accumulate) and its functional and
// _impl forms: scatter (or scatter_add) along the linear index, into self
// seen with its indexed dims as one.
bool index_put(const c10::OperatorHandle& op, c10::DeviceIndex, torch::jit::Stack* stack, bool inplace) {
  Args args = op_args(op, stack);
  at::Tensor self = args[0].toTensor();
  at::Tensor values = args[2].toTensor();
  const bool accumulate = args[3].toBool();
  // (x[i] = 2.0 sends a CPU scalar, as on CUDA)
  if (values.device().is_cpu() && values.dim() == 0) values = values.to(self.device());
  if (values.device() != self.device() || values.scalar_type() != self.scalar_type()) return false;
  if (!inplace) self = self.clone();
  const auto li = linear_index(self, args[1].toOptionalTensorList());
  if (!li) return false;
  // self with its indexed dims as one: a view, or a contiguous copy
  // written back after (non-adjacent indexed dims, most often).
  const auto target_shape = li->blocked_shape();
  const bool viewable = at::detail::computeStride(li->x.sizes(), li->x.strides(), target_shape).has_value();
  const at::Tensor staged = viewable ? li->x : li->x.contiguous();
  at::Tensor target = staged.view(target_shape);
  // values over the result's shape, the index along the blocked dim.
  const std::vector<int64_t> result = li->result_shape();
  std::vector<int64_t> flat(result.begin(), result.begin() + li->first);
  flat.push_back(li->linear.numel());
  flat.insert(flat.end(), result.begin() + li->first + li->linear.dim(), result.end());
  const at::Tensor src = values.expand(result).reshape(flat);
  std::vector<int64_t> index_view(flat.size(), 1);
  index_view[li->first] = li->linear.numel();
  const at::Tensor index = li->linear.reshape(index_view).expand(flat);
  try {
    if (accumulate) target.scatter_add_(li->first, index, src);
    else target.scatter_(li->first, index, src);
  } catch (const c10::IndexError&) {
    li->raise_out_of_range();
  }
  if (!viewable) li->x.copy_(staged);
  finish_op(stack, args.size(), {self});
  return true;
}

// eye(n, m, out=): zeros, then ones on the diagonal, as two device fills.
bool eye_out(const c10::OperatorHandle& op, c10::DeviceIndex, torch::jit::Stack* stack, bool square) {
  Args args = op_args(op, stack);
  const int64_t n = args[0].toInt(), m = square ? n : args[1].toInt();
  at::Tensor out = args[square ? 1 : 2].toTensor();
  if (out.device().type() != kNeuron || n < 0 || m < 0) return false;  // the CPU raises
  out.resize_({n, m});
  out.zero_();
  out.diagonal().fill_(1);
  finish_op(stack, args.size(), {out});
  return true;
}

const std::unordered_map<std::string, Handler>& handlers() {
  static const auto* table = new std::unordered_map<std::string, Handler>{
      {"aten::index_select", [](auto& op, auto d, auto* s) { return index_select(op, d, s, false); }},
      {"aten::embedding", [](auto& op, auto d, auto* s) { return index_select(op, d, s, true); }},
      {"aten::embedding_dense_backward", embedding_backward},
      {"aten::gather", gather},
      {"aten::scatter.src", [](auto& op, auto d, auto* s) { return scatter(op, d, s, 0); }},
      {"aten::scatter_.src", [](auto& op, auto d, auto* s) { return scatter(op, d, s, 0); }},
      {"aten::scatter.value", [](auto& op, auto d, auto* s) { return scatter(op, d, s, 2); }},
      {"aten::scatter_.value", [](auto& op, auto d, auto* s) { return scatter(op, d, s, 2); }},
      {"aten::scatter_add", [](auto& op, auto d, auto* s) { return scatter(op, d, s, 1); }},
      {"aten::scatter_add_", [](auto& op, auto d, auto* s) { return scatter(op, d, s, 1); }},
      {"aten::nll_loss_forward", nll_loss_forward},
      {"aten::nll_loss_backward", nll_loss_backward},
      {"aten::cumsum", [](auto& op, auto d, auto* s) { return scan(op, d, s, 0); }},
      {"aten::cumprod", [](auto& op, auto d, auto* s) { return scan(op, d, s, 1); }},
      {"aten::argmax", [](auto& op, auto d, auto* s) { return extreme(op, d, s, 0, false); }},
      {"aten::argmin", [](auto& op, auto d, auto* s) { return extreme(op, d, s, 1, false); }},
      {"aten::max.dim", [](auto& op, auto d, auto* s) { return extreme(op, d, s, 0, true); }},
      {"aten::min.dim", [](auto& op, auto d, auto* s) { return extreme(op, d, s, 1, true); }},
      {"aten::arange.start_out", [](auto& op, auto d, auto* s) { return ramp(op, d, s, false); }},
      {"aten::linspace.out", [](auto& op, auto d, auto* s) { return ramp(op, d, s, true); }},
      {"aten::stack", stack_op},
      {"aten::equal", equal_op},
      {"aten::index.Tensor", index_tensor},
      {"aten::nonzero", nonzero_op},
      {"aten::masked_select", masked_select_op},
      {"aten::index_put_", [](auto& op, auto d, auto* s) { return index_put(op, d, s, true); }},
      {"aten::_index_put_impl_", [](auto& op, auto d, auto* s) { return index_put(op, d, s, true); }},
      {"aten::index_put", [](auto& op, auto d, auto* s) { return index_put(op, d, s, false); }},
      {"aten::eye.out", [](auto& op, auto d, auto* s) { return eye_out(op, d, s, true); }},
      {"aten::eye.m_out", [](auto& op, auto d, auto* s) { return eye_out(op, d, s, false); }},
      {"aten::sort", [](auto& op, auto d, auto* s) { return sort_op(op, d, s, SortForm::sort); }},
      {"aten::sort.stable", [](auto& op, auto d, auto* s) { return sort_op(op, d, s, SortForm::sort_stable); }},
      {"aten::topk", [](auto& op, auto d, auto* s) { return sort_op(op, d, s, SortForm::topk); }},
      {"aten::max", [](auto& op, auto d, auto* s) { return extreme_of_all(op, d, s, true); }},
      {"aten::min", [](auto& op, auto d, auto* s) { return extreme_of_all(op, d, s, false); }},
  };
  return *table;
}

}  // namespace

bool scatter_fits(const at::Tensor& out, const at::Tensor& index, int64_t dim) {
  return scatter_kernel(out, index, dim, static_cast<int>(ScatterMode::max)).ok();
}

bool scatter_on_device(const at::Tensor& out, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                       ScatterMode mode, double value) {
  const Launch k = scatter_kernel(out, index, dim, static_cast<int>(mode));
  if (!k.ok() || (mode != ScatterMode::value && src.scalar_type() != out.scalar_type())) return false;
  launch_scatter(k, out, dim, index, src, static_cast<int>(mode), value);
  return true;
}

bool run_library_op(const c10::OperatorHandle& op, c10::DeviceIndex device, torch::jit::Stack* stack) {
  const std::string name = op_full_name(op);
  const auto& table = handlers();
  auto it = table.find(name);
  if (it == table.end()) return false;
  const ComposedOpScope composed;
  return it->second(op, device, stack);
}

}  // namespace openneuron::integration

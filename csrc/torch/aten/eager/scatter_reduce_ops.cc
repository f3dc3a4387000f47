#include "torch/aten/eager/scatter_reduce_ops.h"

#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <c10/util/Exception.h>

#include <limits>
#include <optional>
#include <string>
#include <unordered_map>

#include "torch/aten/eager/eager_op.h"
#include "torch/aten/eager/indexing_ops.h"
#include "torch/aten/eager/library_kernels.h"
#include "torch/runtime/device.h"

namespace openneuron::integration {
namespace {

using Args = c10::ArrayRef<c10::IValue>;
using at::Tensor;

using Form = EagerOp::Form;
using Handler = bool (*)(const c10::OperatorHandle&, torch::jit::Stack*);

bool on_neuron(const Tensor& t) { return t.defined() && t.device().type() == kNeuron; }

// A 0-dim tensor as 1-d (the kernels index along a dim).
Tensor one_dim(const Tensor& t) { return t.dim() ? t : t.view({1}); }

// Integer and floating values the library's scatter kernel takes (not
// bool, complex or 16-bit floats: those keep the CPU fallback).
bool reducible(const Tensor& t) { return on_neuron(t) && library_type_suffix(t.scalar_type()) != nullptr; }

// The tensor the op writes: self (in place), a copy of it (functional) or
// out= resized and filled with self (as the CPU's structured kernels).
std::optional<Tensor> target_of(const c10::OperatorHandle& op, const Tensor& self, Args args) {
  const EagerOp& e = eager_op(op);
  if (e.form == Form::InPlace) return self;
  if (e.form == Form::Functional) return self.clone();
  Tensor out = args[e.out_arg].toTensor();
  if (out.device() != self.device() || out.scalar_type() != self.scalar_type()) return std::nullopt;
  out.resize_(self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  return out;
}

// The reduction's identity, written where include_self=False drops self's
// value (inf for floats, the type's extreme for integers).
c10::Scalar identity(const std::string& reduce, at::ScalarType type) {
  if (reduce == "prod") return 1;
  if (reduce != "amax" && reduce != "amin") return 0;
  const bool lowest = reduce == "amax";
  if (at::isFloatingType(type)) return lowest ? -std::numeric_limits<double>::infinity()
                                              : std::numeric_limits<double>::infinity();
  switch (type) {
    case at::kByte: return lowest ? 0 : 255;
    case at::kChar: return lowest ? -128 : 127;
    case at::kShort: return lowest ? -32768 : 32767;
    case at::kInt: return lowest ? std::numeric_limits<int32_t>::lowest() : std::numeric_limits<int32_t>::max();
    default: return lowest ? std::numeric_limits<int64_t>::lowest() : std::numeric_limits<int64_t>::max();
  }
}

// `like` filled with the identity. Device fills take their value as a
// double, which holds int64's lowest (-2^63) but not its largest: that is
// the lowest's bitwise complement.
Tensor identity_like(const Tensor& like, const std::string& reduce) {
  if (like.scalar_type() == at::kLong && reduce == "amin")
    return at::full_like(like, std::numeric_limits<int64_t>::lowest()).bitwise_not_();
  return at::full_like(like, identity(reduce, like.scalar_type()));
}

std::optional<ScatterMode> mode_of(const std::string& reduce) {
  if (reduce == "sum" || reduce == "mean") return ScatterMode::add;
  if (reduce == "prod") return ScatterMode::multiply;
  if (reduce == "amax") return ScatterMode::max;
  if (reduce == "amin") return ScatterMode::min;
  return std::nullopt;
}

// Whether reduce_into can take the call: a reduction the kernel has and a
// line it runs.
bool reducible_into(const Tensor& target, int64_t dim, const Tensor& index, const std::string& reduce) {
  return mode_of(reduce) && scatter_fits(target, index, dim);
}

// Reduces src into target along dim at index (an index of src's rank and
// at most its size), as scatter_reduce: the identity first where self is
// left out, then the kernel in index order, then the mean's division by
// each slot's count (self counted when included; floor for integers).
// reducible_into holds.
void reduce_into(Tensor& target, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                 bool include_self) {
  const std::optional<ScatterMode> mode = mode_of(reduce);
  if (index.numel() == 0) return;
  if (!include_self) TORCH_CHECK(scatter_on_device(target, dim, index, identity_like(src, reduce), ScatterMode::assign));
  TORCH_CHECK(scatter_on_device(target, dim, index, src, *mode));
  if (reduce == "mean") {
    Tensor count = include_self ? at::ones_like(target) : at::zeros_like(target);
    count.scatter_add_(dim, index, at::ones_like(src));
    count.masked_fill_(count == 0, 1);
    if (at::isFloatingType(target.scalar_type())) target.div_(count);
    else target.div_(count, "floor");
  }
}

// Whether scatter_reduce's shapes hold (else the CPU fallback raises its
// error): index of self's and src's rank, no larger than src, and no
// larger than self outside dim.
bool scatter_shapes_fit(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  const int64_t rank = std::max<int64_t>(self.dim(), 1);
  if (std::max<int64_t>(index.dim(), 1) != rank || std::max<int64_t>(src.dim(), 1) != rank) return false;
  if (self.dim() == 0 || index.dim() == 0 || src.dim() == 0) return index.numel() <= 1;
  for (int64_t d = 0; d < rank; ++d)
    if (index.size(d) > src.size(d) || (d != dim && index.size(d) > self.size(d))) return false;
  return true;
}

// scatter_reduce.two(self, dim, index, src, reduce, include_self) and its
// in-place and out= forms.
bool scatter_reduce(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const Tensor self = args[0].toTensor(), index = args[2].toTensor(), src = args[3].toTensor();
  if (!reducible(self) || index.device() != self.device() || src.device() != self.device() ||
      index.scalar_type() != at::kLong || src.scalar_type() != self.scalar_type())
    return false;
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), std::max<int64_t>(self.dim(), 1));
  const std::string reduce(args[4].toStringRef());
  if (!scatter_shapes_fit(self, dim, index, src) ||
      !reducible_into(one_dim(self), dim, one_dim(index), reduce))
    return false;
  std::optional<Tensor> target = target_of(op, self, args);
  if (!target) return false;
  Tensor flat = one_dim(*target);
  reduce_into(flat, dim, one_dim(index), one_dim(src), reduce, args[5].toBool());
  finish_op(stack, args.size(), {*target});
  return true;
}

// index along dim of `like` (index 1-d, one entry per slice), broadcast
// over like's other dims: the index scatter takes.
Tensor spread_index(const Tensor& index, const Tensor& like, int64_t dim) {
  std::vector<int64_t> shape(like.dim(), 1);
  shape[dim] = index.numel();
  return index.to(at::kLong).reshape(shape).expand(like.sizes());
}

// Whether index_add / index_reduce's shapes hold: a 1-d index (or a
// scalar) with one entry per slice of source, source shaped as self
// outside dim.
bool index_shapes_fit(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  if (index.dim() > 1 || (index.scalar_type() != at::kLong && index.scalar_type() != at::kInt)) return false;
  const int64_t rank = std::max<int64_t>(self.dim(), 1);
  if (std::max<int64_t>(source.dim(), 1) != rank) return false;
  if (self.dim() == 0 || source.dim() == 0) return index.numel() == 1;
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim && source.size(d) != self.size(d)) return false;
  return source.size(dim) == index.numel();
}

// What index_add and index_copy scatter: the tensor written (target_of's),
// its view of rank 1 at least, source's values and the index spread over
// them along dim; nullopt where the kernel does not take the call.
struct IndexScatter {
  Tensor target, flat, spread, values;
  int64_t dim;
};
std::optional<IndexScatter> index_scatter_of(const c10::OperatorHandle& op, Args args) {
  const Tensor self = args[0].toTensor(), index = args[2].toTensor(), source = args[3].toTensor();
  if (!reducible(self) || index.device() != self.device() || source.device() != self.device() ||
      source.scalar_type() != self.scalar_type())
    return std::nullopt;
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), std::max<int64_t>(self.dim(), 1));
  const Tensor values = one_dim(source);
  if (!index_shapes_fit(self, dim, index, source)) return std::nullopt;
  const Tensor spread = spread_index(index, values, dim);
  if (!scatter_fits(one_dim(self), spread, dim)) return std::nullopt;
  std::optional<Tensor> target = target_of(op, self, args);
  if (!target) return std::nullopt;
  return IndexScatter{*target, one_dim(*target), spread, values, dim};
}

// index_add(self, dim, index, source, alpha) and its in-place and out=
// forms: a scatter-add of alpha * source along the index.
bool index_add(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  std::optional<IndexScatter> s = index_scatter_of(op, args);
  if (!s) return false;
  const c10::Scalar alpha = args[4].toScalar();
  const Tensor scaled = alpha.equal(1) ? s->values : s->values.mul(alpha);
  try {
    TORCH_CHECK(scatter_on_device(s->flat, s->dim, s->spread, scaled, ScatterMode::add));
  } catch (const c10::IndexError&) {
    TORCH_CHECK_INDEX(false, "index out of range in self");
  }
  finish_op(stack, args.size(), {s->target});
  return true;
}

// index_copy(self, dim, index, source) and its in-place and out= forms
// (a static KV cache writes its new positions with it): a scatter of
// source's slices along the index, a repeated index keeping the last.
bool index_copy(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  if (args[2].toTensor().scalar_type() != at::kLong) return false;  // int32: the fallback raises the CPU's error
  std::optional<IndexScatter> s = index_scatter_of(op, args);
  if (!s) return false;
  try {
    TORCH_CHECK(scatter_on_device(s->flat, s->dim, s->spread, s->values, ScatterMode::assign));
  } catch (const c10::IndexError& e) {
    TORCH_CHECK_INDEX(false, "index_copy_(): ", e.msg());
  }
  finish_op(stack, args.size(), {s->target});
  return true;
}

// index_reduce(self, dim, index, source, reduce, include_self) and its
// in-place and out= forms: scatter_reduce along the index.
bool index_reduce(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const Tensor self = args[0].toTensor(), index = args[2].toTensor(), source = args[3].toTensor();
  const std::string reduce(args[4].toStringRef());
  if (!reducible(self) || index.device() != self.device() || source.device() != self.device() ||
      source.scalar_type() != self.scalar_type() || reduce == "sum")
    return false;
  const int64_t dim = c10::maybe_wrap_dim(args[1].toInt(), std::max<int64_t>(self.dim(), 1));
  const Tensor values = one_dim(source);
  if (!index_shapes_fit(self, dim, index, source)) return false;
  const Tensor spread = spread_index(index, values, dim);
  if (!reducible_into(one_dim(self), dim, spread, reduce)) return false;
  std::optional<Tensor> target = target_of(op, self, args);
  if (!target) return false;
  Tensor flat = one_dim(*target);
  try {
    reduce_into(flat, dim, spread, values, reduce, args[5].toBool());
  } catch (const c10::IndexError&) {
    TORCH_CHECK_INDEX(false, "index out of range in self");
  }
  finish_op(stack, args.size(), {*target});
  return true;
}

// Each op in its three forms (eager_op(op).form tells them apart).
const std::unordered_map<std::string, Handler>& handlers() {
  static const auto* table = new std::unordered_map<std::string, Handler>{
      {"aten::scatter_reduce.two", scatter_reduce}, {"aten::scatter_reduce_.two", scatter_reduce},
      {"aten::scatter_reduce.two_out", scatter_reduce}, {"aten::index_add", index_add},
      {"aten::index_add_", index_add}, {"aten::index_add.out", index_add},
      {"aten::index_reduce", index_reduce}, {"aten::index_reduce_", index_reduce},
      {"aten::index_reduce.out", index_reduce}, {"aten::index_copy", index_copy},
      {"aten::index_copy_", index_copy}, {"aten::index_copy.out", index_copy},
  };
  return *table;
}

}  // namespace

bool run_scatter_reduce_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = op_full_name(op);
  const auto it = handlers().find(name);
  if (it == handlers().end()) return false;
  const ComposedOpScope composed;
  return it->second(op, stack);
}

}  // namespace openneuron::integration

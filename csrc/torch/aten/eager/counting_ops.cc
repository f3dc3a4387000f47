#include "torch/aten/eager/counting_ops.h"

#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include <string>
#include <unordered_map>

#include "torch/aten/eager/library_kernels.h"
#include "torch/runtime/device.h"

namespace openneuron::integration {
namespace {

using Args = c10::ArrayRef<c10::IValue>;
using at::Tensor;
using Handler = bool (*)(const c10::OperatorHandle&, torch::jit::Stack*);

bool on_neuron(const Tensor& t) { return t.defined() && t.device().type() == kNeuron; }

// Values the device ops composing these take: not complex, nor the
// unsigned types wider than a byte (PyTorch's barebones dtypes, which have
// few kernels anywhere).
bool composable(const Tensor& t) {
  const at::ScalarType type = t.scalar_type();
  return on_neuron(t) && !t.is_complex() && type != at::kUInt16 && type != at::kUInt32 && type != at::kUInt64;
}

// Where each run of equal rows starts in `rows` ([n, m]): true at 0 and
// wherever a row differs from the one before (NaN differs from NaN, as in
// the CPU's kernels).
Tensor run_starts(const Tensor& rows) {
  const int64_t n = rows.size(0);
  Tensor starts = at::ones({n}, rows.options().dtype(at::kBool));
  if (n > 1) starts.narrow(0, 1, n - 1).copy_(rows.narrow(0, 1, n - 1).ne(rows.narrow(0, 0, n - 1)).any(1));
  return starts;
}

// The runs of equal rows of `rows` ([n, m], in the order `order` gives:
// positions of the input's rows; undefined: the input's own order): which
// rows start a run, every input row's run (its inverse index) and each
// run's length. The run count is read back: it is the results' size, as
// on CUDA.
struct Runs {
  Tensor starts, inverse, counts;
};
Runs runs_of(const Tensor& rows, const Tensor& order, bool return_inverse, bool return_counts) {
  const auto longs = rows.options().dtype(at::kLong);
  Runs r{run_starts(rows), at::empty({0}, longs), at::empty({0}, longs)};
  const Tensor run = r.starts.to(at::kLong).cumsum(0).sub_(1);
  if (return_inverse) r.inverse = order.defined() ? at::empty({rows.size(0)}, longs).scatter_(0, order, run) : run;
  if (return_counts) {
    const int64_t count = run[-1].item<int64_t>() + 1;
    r.counts = at::zeros({count}, longs).scatter_add_(0, run, at::ones_like(run));
  }
  return r;
}

std::vector<Tensor> empty_runs(const Tensor& self, bool return_inverse, bool return_counts) {
  const auto longs = self.options().dtype(at::kLong);
  return {at::empty({0}, self.options()), return_inverse ? at::empty(self.sizes(), longs) : at::empty({0}, longs),
          return_counts ? at::zeros({0}, longs) : at::empty({0}, longs)};
}

// The slices of `self` along `dim` as rows, [size(dim), rest].
Tensor as_rows(const Tensor& self, int64_t dim) { return self.movedim(dim, 0).reshape({self.size(dim), -1}); }

// `t` in a dtype the device's sort takes, ordered alike: bool as uint8,
// 16-bit floats as float32 (exact).
Tensor sortable(const Tensor& t) {
  if (t.scalar_type() == at::kBool) return t.to(at::kByte);
  if (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16) return t.to(at::kFloat);
  return t;
}

// The order that sorts `rows` lexicographically: a stable sort by each
// column, the last first.
Tensor lexicographic_order(const Tensor& rows) {
  Tensor order = at::arange(rows.size(0), rows.options().dtype(at::kLong));
  for (int64_t c = rows.size(1) - 1; c >= 0; --c) {
    const Tensor keys = sortable(rows.select(1, c).index_select(0, order));
    order = order.index_select(0, std::get<1>(keys.sort(/*stable=*/true, 0, false)));
  }
  return order;
}

// unique_dim(self, dim, sorted, return_inverse, return_counts) and
// unique_consecutive along a dim: runs of equal slices, lexicographically
// sorted first for unique_dim. Both always return the inverse and counts,
// as the CPU's.
std::vector<Tensor> unique_slices(const Tensor& self, int64_t dim, bool sort) {
  dim = c10::maybe_wrap_dim(dim, self.dim());
  const Tensor rows = as_rows(self, dim);
  const Tensor order = sort ? lexicographic_order(rows) : Tensor();
  Runs r = runs_of(sort ? rows.index_select(0, order) : rows, order, true, true);
  const Tensor firsts = at::arange(rows.size(0), r.starts.options().dtype(at::kLong)).masked_select(r.starts);
  // Gathered as rows and moved back, with the CPU's strides.
  const Tensor chosen = self.movedim(dim, 0).index_select(0, sort ? order.index_select(0, firsts) : firsts);
  return {chosen.movedim(0, dim), r.inverse, r.counts};
}

bool unique_dim(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const Tensor self = args[0].toTensor();
  if (!composable(self) || self.numel() == 0) return false;
  finish_op(stack, args.size(), unique_slices(self, args[1].toInt(), true));
  return true;
}

// _unique2(self, sorted, return_inverse, return_counts): a stable sort, then
// the runs of equal values. Always sorted (the CPU may leave the order
// unspecified when sorted=False; CUDA sorts too).
bool unique2(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const Tensor self = args[0].toTensor();
  if (!composable(self)) return false;
  const bool inverse = args[2].toBool(), counts = args[3].toBool();
  std::vector<Tensor> out;
  if (self.numel() == 0) {
    out = empty_runs(self, inverse, counts);
  } else {
    auto [sorted, order] = sortable(self.reshape(-1)).sort(/*stable=*/true, 0, false);
    Runs r = runs_of(sorted.unsqueeze(1), order, inverse, counts);
    out = {sorted.masked_select(r.starts).to(self.scalar_type()), inverse ? r.inverse.view(self.sizes()) : r.inverse,
           r.counts};
  }
  finish_op(stack, args.size(), std::move(out));
  return true;
}

// unique_consecutive(self, return_inverse, return_counts, dim=None): the
// runs of the flattened input, or of the slices along dim.
bool unique_consecutive(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const Tensor self = args[0].toTensor();
  if (!composable(self)) return false;
  const bool inverse = args[1].toBool(), counts = args[2].toBool();
  std::vector<Tensor> out;
  if (!args[3].isNone()) {
    if (self.numel() == 0) return false;
    out = unique_slices(self, args[3].toInt(), false);
  } else if (self.numel() == 0) {
    out = empty_runs(self, inverse, counts);
  } else {
    const Tensor flat = self.reshape(-1);
    Runs r = runs_of(flat.unsqueeze(1), Tensor(), inverse, counts);
    out = {flat.masked_select(r.starts), inverse ? r.inverse.view(self.sizes()) : r.inverse, r.counts};
  }
  finish_op(stack, args.size(), std::move(out));
  return true;
}

// bincount(self, weights=None, minlength=0): the largest value read back
// (the result's size, as on CUDA), then a scatter-add of ones or weights.
// Result dtypes as the CPU's: int64 without weights (or with an empty
// input), float32 for float32 weights, float64 for any others.
bool bincount(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const Tensor self = args[0].toTensor();
  const Tensor weights = args[1].isNone() ? Tensor() : args[1].toTensor();
  const int64_t minlength = args[2].toInt();
  // Wrong calls raise the CPU kernel's own errors there.
  if (!composable(self) || !at::isIntegralType(self.scalar_type(), /*includeBool=*/false) || self.dim() != 1 ||
      minlength < 0 || (weights.defined() && (weights.device() != self.device() || weights.dim() != 1 ||
                                              weights.size(0) != self.size(0) || weights.is_complex())))
    return false;
  Tensor out;
  if (self.numel() == 0) {
    out = at::zeros({minlength}, self.options().dtype(at::kLong));
  } else {
    const Tensor bounds = at::stack({self.min(), self.max()}).to(at::kLong).cpu();
    TORCH_CHECK(bounds[0].item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
    const int64_t bins = std::max(minlength, bounds[1].item<int64_t>() + 1);
    const at::ScalarType type = !weights.defined() ? at::kLong
                                : weights.scalar_type() == at::kFloat ? at::kFloat
                                                                       : at::kDouble;
    const Tensor src = weights.defined() ? weights.to(type) : at::ones({self.numel()}, self.options().dtype(type));
    out = at::zeros({bins}, self.options().dtype(type)).scatter_add_(0, self.to(at::kLong), src);
  }
  finish_op(stack, args.size(), {out});
  return true;
}

// masked_scatter_(self, mask, source) and masked_scatter: the i-th masked
// element takes source's i-th element (source read flat, in row-major
// order): a scan of the mask gives each its index into source. Too few
// source elements raise the CPU's error at the call.
bool masked_scatter(const c10::OperatorHandle& op, torch::jit::Stack* stack, bool inplace) {
  Args args = op_args(op, stack);
  const Tensor self = args[0].toTensor(), mask = args[1].toTensor(), source = args[2].toTensor();
  if (!composable(self) || mask.device() != self.device() || source.device() != self.device() ||
      mask.scalar_type() != at::kBool || source.scalar_type() != self.scalar_type())
    return false;
  // In place, the mask broadcasts to self; the functional form broadcasts both.
  std::vector<int64_t> shape = self.sizes().vec();
  if (!inplace) shape = at::infer_size(self.sizes(), mask.sizes());
  else if (!at::is_expandable_to(mask.sizes(), self.sizes())) return false;
  const Tensor chosen = mask.expand(shape).reshape(-1);
  const Tensor slot = chosen.to(at::kLong).cumsum(0).sub_(1).clamp_min_(0);
  Tensor taken;
  if (source.numel() == 0) {
    TORCH_CHECK(!chosen.any().item<bool>(), "Number of elements of source < number of ones in mask");
    taken = at::zeros(shape, self.options());
  } else {
    try {
      taken = source.reshape(-1).index_select(0, slot).view(shape);
    } catch (const c10::IndexError&) {
      TORCH_CHECK(false, "Number of elements of source < number of ones in mask");
    }
  }
  const Tensor merged = at::where(chosen.view(shape), taken, self.expand(shape));
  if (inplace) {
    Tensor out = self;
    out.copy_(merged);
    finish_op(stack, args.size(), {out});
  } else {
    finish_op(stack, args.size(), {merged});
  }
  return true;
}

// repeat_interleave.Tensor(repeats, output_size=None): the index of each
// output element's source, for repeat_interleave's self forms. The total
// and the smallest count read back in one transfer (the result's size, as
// on CUDA); each source's end (the running sum) marks where the next one
// starts, so a scan of those marks numbers the sources.
bool repeat_interleave(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const Tensor repeats = args[0].toTensor();
  if (!composable(repeats) || repeats.dim() != 1 ||
      (repeats.scalar_type() != at::kLong && repeats.scalar_type() != at::kInt))
    return false;
  Tensor index;
  if (repeats.numel() == 0) {
    index = at::empty({0}, repeats.options());
  } else {
    const Tensor ends = repeats.to(at::kLong).cumsum(0);
    const Tensor facts = at::stack({repeats.to(at::kLong).min(), ends[-1]}).cpu();
    TORCH_CHECK(facts[0].item<int64_t>() >= 0, "repeats can not be negative");
    const int64_t total = facts[1].item<int64_t>();
    if (!args[1].isNone() && args[1].toInt() != total) return false;  // the CPU's size error
    Tensor starts = at::zeros({total + 1}, ends.options());
    starts.index_add_(0, ends, at::ones_like(ends));
    index = starts.narrow(0, 0, total).cumsum(0).to(repeats.scalar_type());
  }
  finish_op(stack, args.size(), {index});
  return true;
}

const std::unordered_map<std::string, Handler>& handlers() {
  static const auto* table = new std::unordered_map<std::string, Handler>{
      {"aten::_unique2", unique2},
      {"aten::unique_consecutive", unique_consecutive},
      {"aten::unique_dim", unique_dim},
      {"aten::bincount", bincount},
      {"aten::repeat_interleave.Tensor", repeat_interleave},
      {"aten::masked_scatter_", [](auto& op, auto* s) { return masked_scatter(op, s, true); }},
      {"aten::masked_scatter", [](auto& op, auto* s) { return masked_scatter(op, s, false); }},
  };
  return *table;
}

}  // namespace

bool run_counting_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = op_full_name(op);
  const auto it = handlers().find(name);
  if (it == handlers().end()) return false;
  const ComposedOpScope composed;
  return it->second(op, stack);
}

}  // namespace openneuron::integration

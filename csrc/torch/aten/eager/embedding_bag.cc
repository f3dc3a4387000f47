#include "torch/aten/eager/embedding_bag.h"

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include <limits>
#include <optional>
#include <string>
#include <unordered_map>

#include "torch/aten/eager/library_kernels.h"
#include "torch/runtime/device.h"

namespace openneuron::integration {
namespace {

using Args = c10::ArrayRef<c10::IValue>;
using at::Tensor;
using Handler = bool (*)(const c10::OperatorHandle&, torch::jit::Stack*);

enum Mode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

bool on_neuron(const Tensor& t) { return t.defined() && t.device().type() == kNeuron; }
bool index_type(const Tensor& t) { return t.scalar_type() == at::kLong || t.scalar_type() == at::kInt; }

// Rows are summed in float for 16-bit weights, as CUDA and the CPU do.
at::ScalarType accumulate_type(at::ScalarType t) {
  return t == at::kHalf || t == at::kBFloat16 ? at::kFloat : t;
}

// Each index's bag, as the CPU's make_offset2bag computes it: the number of
// offsets after the first at or before its position (with
// include_last_offset the last offset is not a bag's start, so positions
// past it belong to the last bag, as on the CPU).
Tensor bag_of_each_index(const Tensor& offsets, int64_t indices, int64_t bags) {
  Tensor starts = at::zeros({indices + 1}, offsets.options().dtype(at::kLong));
  if (bags > 1) {
    const Tensor later = offsets.narrow(0, 1, bags - 1).to(at::kLong);
    starts.scatter_add_(0, later, at::ones_like(later));
  }
  return starts.cumsum(0).narrow(0, 0, indices);
}

// The CPU's checks of the offsets and indices, on one read of the device.
void check_offsets_and_indices(const Tensor& indices, const Tensor& offsets, int64_t num_weights) {
  const int64_t n = indices.size(0);
  std::vector<Tensor> parts{offsets[0].to(at::kLong), offsets[-1].to(at::kLong)};
  if (n > 0) {
    parts.push_back(indices.min().to(at::kLong));
    parts.push_back(indices.max().to(at::kLong));
  }
  const Tensor seen = at::stack(parts).cpu();
  const int64_t* v = seen.const_data_ptr<int64_t>();
  TORCH_CHECK(v[0] == 0, "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
              "position 0. However, got ", v[0]);
  TORCH_CHECK(v[1] <= n, "offsets[-1] can not be greater than input's length ", n, " but got offsets[-1] of ", v[1]);
  if (n > 0 && (v[2] < 0 || v[3] >= num_weights)) {
    const Tensor bad = indices.lt(0).logical_or(indices.ge(num_weights)).nonzero().select(1, 0)[0];
    const int64_t at = bad.item<int64_t>();
    TORCH_CHECK_INDEX(false, "Index ", at, " of input takes value ", indices[at].item<int64_t>(),
                      " which is not in the valid range [0, ", num_weights, ")");
  }
}

// Each bag's maximum per feature, and the index of its first row holding
// it (0 for an empty bag, whose maximum is 0, as on the CPU). Bags are
// runs of positions, so each is laid out as a row of a [bags, longest,
// dim] block (-inf where a bag is shorter or an index is padding) reduced
// by amax and argmax (the first maximum, as the CPU's kernel). None when
// that block would be far larger than the rows (very uneven bags): the
// CPU fallback then.
struct BagMaxima {
  Tensor values, indices;
};
std::optional<BagMaxima> bag_maxima(const Tensor& rows, const Tensor& index, const Tensor& offsets,
                                    const Tensor& bag, const Tensor& target, const Tensor& bag_size) {
  const int64_t n = rows.size(0), dim = rows.size(1), bags = bag_size.size(0);
  const auto longs = index.options();
  const Tensor start = offsets.narrow(0, 0, bags).to(at::kLong);
  const Tensor segment = at::zeros({bags}, longs).scatter_add_(0, bag, at::ones_like(bag));  // padding included
  const int64_t longest = n == 0 ? 0 : segment.max().item<int64_t>();
  if ((bags + 1) * std::max<int64_t>(longest, 1) > 16 * n + 4096) return std::nullopt;
  const Tensor first_of = at::cat({start, at::zeros({1}, longs)});  // the spare bag's rows go anywhere in it
  const Tensor slot = at::arange(n, longs).sub(first_of.index_select(0, target)).clamp(0, std::max<int64_t>(longest - 1, 0));
  Tensor block = at::full({bags + 1, std::max<int64_t>(longest, 1), dim}, -std::numeric_limits<double>::infinity(),
                          rows.options());
  block.index_put_({target, slot}, rows);
  block = block.narrow(0, 0, bags);
  const Tensor empty = bag_size.eq(0).unsqueeze(1);
  const auto [values, at_slot] = block.max(1);
  const Tensor position = at_slot.add(start.unsqueeze(1)).clamp_max(std::max<int64_t>(n - 1, 0));
  const Tensor chosen = n == 0 ? at::zeros({bags, dim}, longs) : index.index_select(0, position.reshape(-1)).view({bags, dim});
  return BagMaxima{at::where(empty, 0, values), at::where(empty, 0, chosen)};
}

// _embedding_bag and _embedding_bag_forward_only(weight, indices, offsets,
// scale_grad_by_freq, mode, sparse, per_sample_weights, include_last_offset,
// padding_idx) -> (output, offset2bag, bag_size, max_indices): the indexed
// rows gathered, then added (sum, mean) or reduced (max) into their bags;
// indices equal to padding_idx count in no bag. The other three results are
// the CPU's, which the backward (here, or the CPU's) reads.
bool embedding_bag(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const Tensor weight = args[0].toTensor(), indices = args[1].toTensor(), offsets = args[2].toTensor();
  const int64_t mode = args[4].toInt();
  const Tensor psw = args[6].isNone() ? Tensor() : args[6].toTensor();
  const bool include_last = args[7].toBool();
  // At this level a negative padding_idx means none (F.embedding_bag wraps
  // the user's negative one before).
  const int64_t padding = args[8].toInt();
  const bool has_padding = padding >= 0;
  // Anything unusual (wrong shapes or dtypes, no bags at all) is the CPU's.
  if (!on_neuron(weight) || weight.dim() != 2 || !at::isFloatingType(weight.scalar_type()) || !on_neuron(indices) ||
      !on_neuron(offsets) || indices.dim() != 1 || offsets.dim() != 1 || !index_type(indices) ||
      !index_type(offsets) || offsets.size(0) < (include_last ? 2 : 1) || mode < kSum || mode > kMax ||
      (psw.defined() && (mode != kSum || !on_neuron(psw) || psw.sizes() != indices.sizes() ||
                         psw.scalar_type() != weight.scalar_type())))
    return false;
  const int64_t num_weights = weight.size(0), dim = weight.size(1), n = indices.size(0);
  check_offsets_and_indices(indices, offsets, num_weights);
  const int64_t bags = offsets.size(0) - (include_last ? 1 : 0);
  const auto longs = indices.options().dtype(at::kLong);
  const Tensor index = indices.to(at::kLong);
  const Tensor bag = bag_of_each_index(offsets, n, bags);
  // Indices at padding_idx go to a spare bag past the last, dropped after.
  const Tensor counted = has_padding ? index.ne(padding) : at::ones({n}, longs.dtype(at::kBool));
  const Tensor target = has_padding ? at::where(counted, bag, bags) : bag;
  const at::ScalarType acc = accumulate_type(weight.scalar_type());
  Tensor rows = weight.index_select(0, index).to(acc);
  Tensor bag_size = at::zeros({bags + 1}, longs).scatter_add_(0, target, at::ones_like(target)).narrow(0, 0, bags);
  Tensor output, max_indices;
  if (mode == kMax) {
    auto best = bag_maxima(rows, index, offsets, bag, target, bag_size);
    if (!best) return false;
    output = best->values;
    max_indices = best->indices;
  } else {
    if (psw.defined()) rows = rows.mul(psw.to(acc).unsqueeze(1));
    output = at::zeros({bags + 1, dim}, weight.options().dtype(acc)).scatter_add_(0, target.unsqueeze(1).expand({n, dim}), rows).narrow(0, 0, bags);
    if (mode == kMean) output = output.div(bag_size.clamp_min(1).unsqueeze(1).to(acc));
    max_indices = mode == kMean ? bag_size.clone() : at::zeros({bags}, longs);
  }
  if (mode == kSum) bag_size = at::zeros({bags}, longs);
  // The CPU skips offset2bag on its fast path (sum of float rows, no padding).
  const bool fast_path = mode == kSum && !has_padding && weight.scalar_type() != at::kDouble;
  Tensor offset2bag = fast_path ? at::empty({0}, longs) : bag;
  finish_op(stack, args.size(), {output.to(weight.scalar_type()), offset2bag, bag_size, max_indices});
  return true;
}

// The bag of each index: offset2bag as the forward left it, or computed
// afresh where the forward's fast path left it empty (as the CPU's backward
// does).
Tensor bags_of(const Tensor& offset2bag, const Tensor& offsets, int64_t n) {
  if (offset2bag.numel() == n && n > 0) return offset2bag.to(at::kLong);
  return bag_of_each_index(offsets, n, offsets.size(0));
}

// _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size,
// max_indices, num_weights, scale_grad_by_freq, mode, sparse,
// per_sample_weights, padding_idx): the dense weight gradient. Sum and
// mean add each bag's gradient (scaled by the index's sample weight, or
// divided by the bag's size) into its indices' rows; max adds it into the
// row that held each feature's maximum. padding_idx's row gets nothing;
// scale_grad_by_freq divides by how often each index occurs. A sparse
// gradient is left to the CPU.
bool embedding_bag_backward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const Tensor grad = args[0].toTensor(), indices = args[1].toTensor(), offsets = args[2].toTensor();
  const Tensor offset2bag = args[3].toTensor(), bag_size = args[4].toTensor(), max_indices = args[5].toTensor();
  const int64_t num_weights = args[6].toInt(), mode = args[8].toInt(), padding = args[11].toInt();
  const bool by_frequency = args[7].toBool(), sparse = args[9].toBool();
  const Tensor psw = args[10].isNone() ? Tensor() : args[10].toTensor();
  if (sparse || !on_neuron(grad) || grad.dim() != 2 || !at::isFloatingType(grad.scalar_type()) ||
      !on_neuron(indices) || indices.dim() != 1 || !index_type(indices) || !on_neuron(offsets) ||
      offsets.dim() != 1 || offsets.size(0) < 1 || mode < kSum || mode > kMax || (psw.defined() && !on_neuron(psw)))
    return false;
  const int64_t n = indices.size(0), dim = grad.size(1);
  const at::ScalarType acc = accumulate_type(grad.scalar_type());
  const Tensor index = indices.to(at::kLong);
  // padding_idx's row (and, for max, the rows of empty bags) get a spare row
  // past the last, dropped after.
  Tensor grad_weight = at::zeros({num_weights + 1, dim}, grad.options().dtype(acc));
  if (mode == kMax) {
    const Tensor empty = bag_size.eq(0).unsqueeze(1);
    const Tensor rows = at::where(empty, num_weights, max_indices.to(at::kLong));
    grad_weight.scatter_add_(0, rows, grad.to(acc));
  } else if (n > 0) {
    const Tensor bag = bags_of(offset2bag, offsets, n);
    Tensor contribution = grad.index_select(0, bag).to(acc);
    if (mode == kMean) contribution = contribution.div(bag_size.index_select(0, bag).clamp_min(1).to(acc).unsqueeze(1));
    if (psw.defined()) contribution = contribution.mul(psw.to(acc).unsqueeze(1));
    if (by_frequency) {
      const Tensor counts = at::zeros({num_weights}, index.options()).scatter_add_(0, index, at::ones_like(index));
      contribution = contribution.div(counts.index_select(0, index).to(acc).unsqueeze(1));
    }
    const Tensor rows = padding >= 0 ? at::where(index.eq(padding), num_weights, index) : index;
    grad_weight.scatter_add_(0, rows.unsqueeze(1).expand({n, dim}), contribution);
  }
  finish_op(stack, args.size(), {grad_weight.narrow(0, 0, num_weights).to(grad.scalar_type())});
  return true;
}

// _embedding_bag_per_sample_weights_backward(grad, weight, indices,
// offsets, offset2bag, mode, padding_idx): each sample weight's gradient,
// the dot product of its bag's gradient and its row (0 at padding_idx).
bool per_sample_weights_backward(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  Args args = op_args(op, stack);
  const Tensor grad = args[0].toTensor(), weight = args[1].toTensor(), indices = args[2].toTensor();
  const Tensor offsets = args[3].toTensor(), offset2bag = args[4].toTensor();
  const int64_t mode = args[5].toInt(), padding = args[6].toInt();
  if (mode != kSum || !on_neuron(grad) || grad.dim() != 2 || !on_neuron(weight) || weight.dim() != 2 ||
      !at::isFloatingType(grad.scalar_type()) || !on_neuron(indices) || indices.dim() != 1 || !index_type(indices) ||
      !on_neuron(offsets) || offsets.dim() != 1 || offsets.size(0) < 1)
    return false;
  const int64_t n = indices.size(0);
  const at::ScalarType acc = accumulate_type(grad.scalar_type());
  Tensor out = at::zeros({n}, grad.options());
  if (n > 0) {
    const Tensor index = indices.to(at::kLong);
    const Tensor bag = bags_of(offset2bag, offsets, n);
    Tensor dot = grad.index_select(0, bag).to(acc).mul(weight.index_select(0, index).to(acc)).sum(1);
    if (padding >= 0) dot = at::where(index.eq(padding), 0, dot);
    out = dot.to(grad.scalar_type());
  }
  finish_op(stack, args.size(), {out});
  return true;
}

}  // namespace

bool run_embedding_bag_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  static const auto* table = new std::unordered_map<std::string, Handler>{
      {"aten::_embedding_bag", embedding_bag},
      {"aten::_embedding_bag_forward_only", embedding_bag},
      {"aten::_embedding_bag_backward", embedding_bag_backward},
      {"aten::_embedding_bag_per_sample_weights_backward", per_sample_weights_backward},
  };
  const auto it = table->find(op.schema().name());
  if (it == table->end() || !op.schema().overload_name().empty()) return false;
  const ComposedOpScope composed;
  return it->second(op, stack);
}

}  // namespace openneuron::integration

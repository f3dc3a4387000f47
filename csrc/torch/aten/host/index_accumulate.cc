// index_put_(self, [row indices], values, accumulate=True) on the host driver: the
// gradient of an embedding (PyTorch's decomposition of
// embedding_dense_backward, which compiled graphs run) and index_add-like
// updates of whole rows. ATen's CPU kernel adds element by element through
// a generic index iterator, with atomic compare-and-swap loops when
// parallel: 845 us for a 1024-row update of a [8000, 256] table (83 us
// here), the largest non-matmul cost of a compiled BERT step. Here each row of values
// is added to its row of self with contiguous vector adds, in index order
// (so duplicates sum in a fixed order: deterministic, unlike ATen's
// parallel path), threads splitting the columns; an index out of range
// raises ATen's error with self untouched. Every other call goes to the
// router.
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include "torch/aten/router.h"
#include "torch/runtime/settings.h"
#include "torch/runtime/streams.h"

namespace openneuron::integration {
namespace {

constexpr int64_t kParallelElements = 32768;  // ATen's GRAIN_SIZE

// The row indices when this call is a whole-row update the fast path takes.
std::optional<at::Tensor> row_indices(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                                      const at::Tensor& values) {
  if (indices.size() != 1) return std::nullopt;
  const std::optional<at::Tensor> index = indices.get(0);
  if (!index || !index->defined()) return std::nullopt;
  const auto device = self.device();
  const bool float_type = self.scalar_type() == at::kFloat || self.scalar_type() == at::kDouble;
  if (!float_type || self.dim() < 1 || !self.is_contiguous() || self.layout() != at::kStrided ||
      values.device() != device || values.scalar_type() != self.scalar_type() || !values.is_contiguous() ||
      values.layout() != at::kStrided || index->device() != device || index->scalar_type() != at::kLong ||
      !index->is_contiguous() || self.is_alias_of(values) || self.is_alias_of(*index))
    return std::nullopt;
  // values exactly [*index.shape, *self.shape[1:]] (no broadcasting).
  if (values.dim() != index->dim() + self.dim() - 1) return std::nullopt;
  for (const auto d : c10::irange(index->dim()))
    if (values.size(d) != index->size(d)) return std::nullopt;
  for (const auto d : c10::irange(1, self.dim()))
    if (values.size(index->dim() + d - 1) != self.size(d)) return std::nullopt;
  return *index;
}

template <class T>
void add_rows(const at::Tensor& self, const at::Tensor& index, const at::Tensor& values) {
  const int64_t rows = self.size(0), n = index.numel();
  const int64_t width = rows == 0 ? 0 : self.numel() / rows;
  const int64_t* idx = index.const_data_ptr<int64_t>();
  const T* src = values.const_data_ptr<T>();
  T* dst = self.mutable_data_ptr<T>();
  const int64_t grain = std::max<int64_t>(16, kParallelElements / std::max<int64_t>(n, 1));
  at::parallel_for(0, width, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = idx[i] < 0 ? idx[i] + rows : idx[i];
      T* __restrict__ out = dst + row * width;
      const T* __restrict__ in = src + i * width;
#pragma omp simd
      for (int64_t c = begin; c < end; ++c) out[c] += in[c];
    }
  });
}

// ATen's error for an index out of range, raised before any row is
// updated (ATen's kernel raises midway, with part of self updated).
void check_indices_in_range(const c10::OperatorHandle& op, const at::Tensor& index, int64_t rows) {
  const int64_t* idx = index.const_data_ptr<int64_t>();
  for (const auto i : c10::irange(index.numel())) {
    if (idx[i] >= -rows && idx[i] < rows) continue;
    try {
      TORCH_CHECK_INDEX(false, "index ", idx[i], " is out of bounds for dimension 0 with size ", rows);
    } catch (...) {
      rethrow_with_op_context(op, index.device().index());
    }
  }
}

// index_put_(self, indices, values, accumulate=False), index_put (the same,
// functional) and _index_put_impl_ (with one more argument, unsafe): each
// would otherwise go to the router whole, which runs ATen's CPU kernels.
template <bool kInPlace>
void index_put(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const size_t num_args = op.schema().arguments().size();
  auto args = torch::jit::last(*stack, num_args);
  const bool accumulate = args[3].toBool();
  if (accumulate && host_addressable() && !settings().forces_cpu_fallback(op.schema().name())) {
    const at::Tensor& self = args[0].toTensor();
    const at::Tensor values = args[2].toTensor();
    if (auto index = row_indices(self, args[1].toOptionalTensorList(), values)) {
      wait_current_stream(self.device().index());  // the inputs' producers have run
      check_indices_in_range(op, *index, self.size(0));
      at::Tensor out = kInPlace ? self : self.clone();
      if (self.scalar_type() == at::kFloat)
        add_rows<float>(out, *index, values);
      else
        add_rows<double>(out, *index, values);
      torch::jit::drop(*stack, num_args);
      stack->emplace_back(std::move(out));
      return;
    }
  }
  route_boxed(op, keys, stack);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_put_", torch::CppFunction::makeFromBoxedFunction<&index_put<true>>());
  m.impl("_index_put_impl_", torch::CppFunction::makeFromBoxedFunction<&index_put<true>>());
  m.impl("index_put", torch::CppFunction::makeFromBoxedFunction<&index_put<false>>());
}

}  // namespace
}  // namespace openneuron::integration

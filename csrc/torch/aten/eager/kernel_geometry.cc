#include "torch/aten/eager/kernel_geometry.h"

#include <algorithm>
#include <numeric>

namespace openneuron::integration {

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& shape, const int64_t* sizes,
                                       const int64_t* strides, int rank) {
  const int n = static_cast<int>(shape.size());
  std::vector<int64_t> out(n, 0);
  for (int i = 0; i < rank; ++i) {
    const int d = n - rank + i;
    if (d >= 0 && sizes[i] != 1) out[d] = strides[i];
  }
  return out;
}

namespace {

// Whether dim `a` should run inside dim `b` (TensorIterator's order: by the
// first operand whose strides differ and are not broadcast).
bool runs_inside(const KernelGeometry& g, int a, int b) {
  for (const auto& s : g.strides) {
    if (s[a] == 0 || s[b] == 0 || s[a] == s[b]) continue;
    return s[a] < s[b];
  }
  return false;
}

}  // namespace

KernelGeometry make_kernel_geometry(const std::vector<int64_t>& shape, const std::vector<bool>& reduced,
                                    const std::vector<std::vector<int64_t>>& strides, bool reorder) {
  KernelGeometry g;
  g.strides.resize(strides.size());
  // Size-1 dims are not iterated (a reduction over one does nothing).
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    g.shape.push_back(shape[d]);
    g.reduced.push_back(!reduced.empty() && reduced[d]);
    for (size_t k = 0; k < strides.size(); ++k) g.strides[k].push_back(strides[k][d]);
  }
  if (reorder) {
    std::vector<int> order(g.shape.size());
    std::iota(order.begin(), order.end(), 0);
    // Outermost first; an insertion sort, as TensorIterator's, since
    // broadcast strides make the order partial.
    for (size_t i = 1; i < order.size(); ++i)
      for (size_t j = i; j > 0 && runs_inside(g, order[j - 1], order[j]); --j) std::swap(order[j - 1], order[j]);
    KernelGeometry sorted;
    sorted.strides.resize(g.strides.size());
    for (int d : order) {
      sorted.shape.push_back(g.shape[d]);
      sorted.reduced.push_back(g.reduced[d]);
      for (size_t k = 0; k < g.strides.size(); ++k) sorted.strides[k].push_back(g.strides[k][d]);
    }
    g = std::move(sorted);
  }
  // Merge dim d into d+1 (its inner neighbour) when every operand steps
  // through both as through one.
  KernelGeometry merged;
  merged.strides.resize(g.strides.size());
  for (int d = 0; d < g.rank(); ++d) {
    const int m = merged.rank() - 1;
    bool merge = m >= 0 && merged.reduced[m] == g.reduced[d];
    for (size_t k = 0; merge && k < g.strides.size(); ++k)
      merge = merged.strides[k][m] == g.strides[k][d] * g.shape[d];
    if (merge) {
      merged.shape[m] *= g.shape[d];
      for (size_t k = 0; k < g.strides.size(); ++k) merged.strides[k][m] = g.strides[k][d];
      continue;
    }
    merged.shape.push_back(g.shape[d]);
    merged.reduced.push_back(g.reduced[d]);
    for (size_t k = 0; k < g.strides.size(); ++k) merged.strides[k].push_back(g.strides[k][d]);
  }
  return merged;
}

}  // namespace openneuron::integration

// The loop an eager kernel runs, TensorIterator's way: every operand seen
// through the same iteration shape (broadcast operands with stride 0, a
// reduction's output with stride 0 along the reduced dims), size-1 dims
// dropped, dims ordered so the first operand's innermost dim is last, and
// adjacent dims merged wherever every operand allows. A contiguous add of
// any shape becomes one dim, so kernels are keyed by this rank, not by the
// tensors' ranks, and sizes and strides are kernel arguments.
#pragma once

#include <cstdint>
#include <vector>

namespace openneuron::integration {

struct KernelGeometry {
  std::vector<int64_t> shape;
  std::vector<bool> reduced;                  // per dim: a reduction runs along it
  std::vector<std::vector<int64_t>> strides;  // per operand, per dim (elements)
  int rank() const { return static_cast<int>(shape.size()); }
};

// `strides[k]` gives operand k's stride along each dim of `shape` (0 where
// it broadcasts); `reduced` marks reduction dims (empty: none). With
// `reorder`, dims are sorted by operand 0's strides (pointwise ops; a
// reduction keeps its order).
KernelGeometry make_kernel_geometry(const std::vector<int64_t>& shape, const std::vector<bool>& reduced,
                                    const std::vector<std::vector<int64_t>>& strides, bool reorder);

// Operand strides of a tensor of `sizes`/`strides` broadcast to `shape`
// (aligned at the innermost dim; 0 where it broadcasts).
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& shape, const int64_t* sizes,
                                       const int64_t* strides, int rank);

}  // namespace openneuron::integration

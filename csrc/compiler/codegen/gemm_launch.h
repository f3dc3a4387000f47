// Which GLSL gemm entry (glsl_gemm.h) runs a product, and its grid: kept
// apart from the GLSL sources, which build only with Vulkan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace openneuron::compiler {

struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  // The largest element offset within one matrix of any operand (its last
  // element's, strides included): the tiled kernels index in 32 bits.
  int64_t largest_offset = 0;
};

struct GemmLaunch {
  std::string entry;     // without the dtype suffix: "gemm", "gemm_t128", "gemm_t64", "gemm_rows"
  int64_t workgroups;    // along x
  // Run as C^T = B^T A^T: A and B swap places, with the scalars of
  // swapped_gemm_scalars (a product with few columns is one with few rows).
  bool swap_operands = false;
};

// Which entry runs a float32 product on a device, and its grid. `tiled`:
// the device runs the tiled kernels (DeviceProperties::tiled_kernels); `compute_units` and `max_workgroups`
// from the device's properties. `sixteen_bit` (float16, bfloat16): the
// tiled kernels or "gemm" (they have no "gemm_rows"). Other dtypes take
// "gemm".
GemmLaunch gemm_launch(const GemmShape& shape, bool float32, bool tiled, int compute_units,
                       int64_t max_workgroups, bool sixteen_bit = false);

// The gemm scalars (glsl_gemm.h's order) of the transposed product.
std::vector<int64_t> swapped_gemm_scalars(const std::vector<int64_t>& scalars);

}  // namespace openneuron::compiler
